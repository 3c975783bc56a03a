"""The fake JBOD broker: a KRaft broker's control-plane behaviour without the data plane."""
