"""The benign-line list of kafka_logs.py: exact text only, everything else still fails.
Runs without Kafka (no JVM)."""

from __future__ import annotations

from tests.interop.kafka_logs import BENIGN, problems

UTILS = "org.apache.kafka.common.utils.Utils"
MOVE = (
    "Failed atomic move of /tmp/k/__cluster_metadata-0/00000000000000000000.index to "
    "/tmp/k/__cluster_metadata-0/00000000000000000000.index.deleted retrying with a non-atomic move"
)


def test_the_atomic_move_fallback_is_benign_and_only_it() -> None:
    benign = ("WARN", UTILS, "kafka-scheduler-1", MOVE)
    others = [
        ("ERROR", UTILS, "t", MOVE),  # the same text at another level
        ("WARN", "org.apache.kafka.raft.KafkaRaftClient", "t", MOVE),  # another logger
        ("WARN", UTILS, "t", MOVE.replace(".index.deleted", ".index.swap")),  # not a file being deleted
        ("WARN", UTILS, "t", MOVE + " (and more)"),  # more text
        ("WARN", UTILS, "t", "Failed to close something"),
        ("FATAL", "org.apache.kafka.server", "t", "boom"),
    ]
    assert problems([benign, ("INFO", UTILS, "t", "fine"), *others]) == others
    assert problems([*others], logger_prefix="org.apache.kafka.raft") == [others[1]]


def test_every_benign_entry_has_a_reason_and_a_logger() -> None:
    assert BENIGN and all(len(b.reason) > 80 and b.logger.startswith("org.apache.kafka.") for b in BENIGN)
    assert all(b.level in ("WARN", "ERROR") for b in BENIGN)
