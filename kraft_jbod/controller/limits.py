"""Kafka's size limits on one controller operation, and the texts it answers with.

``MAX_RECORDS_PER_USER_OP`` is QuorumController's bound (10,000, the default batch size).
Kafka builds a user request's records in a list that throws past the bound; what the
client then sees depends on where the throw is caught (Kafka 4.4's controller code):

* caught nowhere: the whole request fails with POLICY_VIOLATION and
  ``EXCESSIVE_BATCH``, nothing is written: CreateTopics, UnregisterBroker, ElectLeaders,
  IncrementalAlterConfigs and AlterConfigs (even with ValidateOnly; the ClearElrRecords a
  ``min.insync.replicas`` change adds count), CreateAcls (every creation gets the error
  but those Kafka's AclApis refuses before the controller: CLUSTER name, empty name);
* turned into INVALID_REQUEST with ``DELETE_ACLS_TOO_MANY``: DeleteAcls, every filter;
* caught per item as an unexpected error: DeleteTopics and CreatePartitions (per topic)
  and AlterPartitionReassignments (per partition) answer UNKNOWN_SERVER_ERROR (no
  message) for the items past the bound and keep the records of those before it, up to
  10,000 in one atomic batch. CreatePartitions keeps even the first partitions of the
  topic that crossed the bound (its records go straight into the bounded list); a
  CreatePartitions with more than 10,000 topics fails as a whole (its result list is
  bounded too).

UpdateFeatures is bounded as well but cannot reach 10,000 records. Records the
controller writes on its own (fencing, unfencing, directory failures, session expiry)
are not bounded: they are split into batches of ``MAX_RECORDS_PER_BATCH``
(controller/log.py). CreateTopics is refused even earlier past 10,000 new partitions
(KAFKA-17870).
"""

from __future__ import annotations

from typing import Final

MAX_RECORDS_PER_USER_OP: Final = 10_000
MAX_PARTITIONS_PER_REQUEST: Final = 10_000
EXCESSIVE_BATCH: Final = "Unable to perform excessively large batch operation."
EXCESSIVE_PARTITIONS: Final = "Excessively large number of partitions per request."
DELETE_ACLS_TOO_MANY: Final = f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation."
# The most partitions one slice of a broker request names (controller/server.py processes
# AssignReplicasToDirs and AlterPartition in slices, committing each before the next, so
# requests queued behind, heartbeats first of all, wait for one slice, not the whole request).
# A slice's handle + apply + story is about 10-20 us per partition; each slice is one fsync,
# so smaller slices make the request itself slower (tools/bench/bench_assign_heartbeats.py:
# 1,000 against 2,000 gave a heartbeat p99 of 88-119 ms against 103-252 ms, for a 10-12 %
# slower assignment of 10^6 replicas).
MAX_PARTITIONS_PER_SLICE: Final = 1_000
# QuorumController's maximum records per batch: a larger atomic record set is written as
# several batches of at most this many records, in one append (controller/log.py).
MAX_RECORDS_PER_BATCH: Final = 10_000
