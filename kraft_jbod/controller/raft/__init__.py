"""KRaft among several voters: a pure raft core (elections, replication, the high watermark).

Modules, bottom up: :mod:`.messages` (the voter-to-voter exchanges as plain values),
:mod:`.replica_log` (what the core needs of a log, and an in-memory one),
:mod:`.election_store` (the ``quorum-state`` file), :mod:`.node` (one voter's state machine)
and :mod:`.simulation` (several nodes on a lossy in-memory network, for tests and benches).
Nothing here does I/O except :class:`.election_store.FileElectionStore`.
"""
