"""The controller's admin API families (configs, ACLs, partitions, features, quorum)."""
