"""Kafka's size limits on one controller operation, and the texts it answers with.

``MAX_RECORDS_PER_USER_OP`` is QuorumController's bound (10,000, the default batch size): a
user request (CreateTopics, DeleteTopics, UnregisterBroker, ...) whose records would exceed
it fails as a whole with POLICY_VIOLATION, because Kafka builds them in a BoundedList that
throws. CreateTopics is refused even earlier past 10,000 new partitions (KAFKA-17870).
"""

from __future__ import annotations

from typing import Final

MAX_RECORDS_PER_USER_OP: Final = 10_000
MAX_PARTITIONS_PER_REQUEST: Final = 10_000
EXCESSIVE_BATCH: Final = "Unable to perform excessively large batch operation."
EXCESSIVE_PARTITIONS: Final = "Excessively large number of partitions per request."
# QuorumController's maximum records per batch: a larger atomic record set is written as
# several batches of at most this many records, in one append (controller/log.py).
MAX_RECORDS_PER_BATCH: Final = 10_000
