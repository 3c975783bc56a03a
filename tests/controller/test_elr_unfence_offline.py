"""One heartbeat that unfences a broker and reports one of its directories offline, with
eligible leader replicas on (KIP-966, the default metadata.version) and
min.insync.replicas 2 (issue 12, item 7).

Kafka 4.4 (ReplicationControlManager.processBrokerHeartbeat) builds both steps from the
state before the heartbeat: handleBrokerUnfenced writes the registration change and runs
the change builder over the leaderless partitions with the broker as an acceptable
leader while its directories still count as online, then handleDirectoriesOffline runs
the builder over the partitions in the failed directory with the broker removed, then
writes the directory change. With ELR on, a fenced broker is in no ISR, so the second step
finds nothing to change for it. The table gives, per partition, the record Kafka writes
and ours; they differ only where Kafka elects the broker into the directory that the same
heartbeat reports failed (docs/divergences.md, "unfence plus offline directories").
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.topic_record import TopicRecord
from tests.controller.harness import Cluster, dir_id

TID = uuid.UUID(int=0x77)
FAILED, KEPT = 0, 1  # broker 1's directory indexes
RECOVERING = 1

# (partition, replicas, broker 1's dir, ISR, leader, ELR, last known ELR,
#  Kafka's record fields or None, whether ours writes the same)
ROWS: list[tuple[int, list[int], int, list[int], int, list[int], list[int], dict[str, Any] | None, bool]] = [
    # ELR [1, 2], broker 2 fenced: the ELR election picks broker 1 and takes it out of the ELR.
    (0, [1, 2], KEPT, [], -1, [1, 2], [], {"leader": 1, "isr": [1], "eligible_leader_replicas": [2]}, True),
    # The same partition in the failed directory: Kafka elects broker 1 there (the
    # registration still lists the directory); we leave it leaderless.
    (1, [1, 2], FAILED, [], -1, [1, 2], [], {"leader": 1, "isr": [1], "eligible_leader_replicas": [2]}, False),
    # Only the last known leader is left: Kafka's builder elects it uncleanly (RECOVERING)
    # and clears the last known ELR.
    (2, [1, 2], KEPT, [], -1, [], [1], {"leader": 1, "isr": [1], "leader_recovery_state": RECOVERING, "last_known_elr": []}, True),
    (3, [1, 2], FAILED, [], -1, [], [1], {"leader": 1, "isr": [1], "leader_recovery_state": RECOVERING, "last_known_elr": []}, False),
    # Led by broker 3 with broker 1 in the ELR of the failed directory: nothing changes.
    (4, [1, 3], FAILED, [3], 3, [1], [], None, True),
    # Leaderless, broker 1 only in the ELR but broker 2 (the ISR) fenced: ISR stays, no leader.
    (5, [2, 1], KEPT, [2], -1, [1], [], None, True),
]  # fmt: skip


def _cluster(make: Callable[[], Cluster] = Cluster) -> Cluster:
    c = make()  # the default level has ELR on
    c.start_broker(1, [dir_id(1, FAILED), dir_id(1, KEPT)])
    c.start_broker(2, [dir_id(2, 0)])
    c.start_broker(3, [dir_id(3, 0)])
    c.heartbeat(1, want_fence=True)
    c.heartbeat(2, want_fence=True)
    records: list[tuple[Any, int]] = [
        (TopicRecord(name="t", topic_id=TID), 0),
        (ConfigRecord(resource_type=2, resource_name="t", name="min.insync.replicas", value="2"), 0),
    ]
    for pid, replicas, d1, isr, leader, elr, lke, _kafka, _same in ROWS:
        dirs = [dir_id(1, d1) if b == 1 else dir_id(b, 0) for b in replicas]
        part = PartitionRecord(
            partition_id=pid,
            topic_id=TID,
            replicas=replicas,
            isr=isr,
            leader=leader,
            leader_epoch=3,
            partition_epoch=5,
            directories=dirs,
            eligible_leader_replicas=elr,
            last_known_elr=lke,
        )
        records.append((part, 2))
    c.commit(records)
    return c


def _fields(rec: PartitionChangeRecord) -> dict[str, Any]:
    unset = PartitionChangeRecord(partition_id=rec.partition_id, topic_id=rec.topic_id)
    names = ("leader", "isr", "eligible_leader_replicas", "last_known_elr", "leader_recovery_state", "directories")
    return {n: getattr(rec, n) for n in names if getattr(rec, n) != getattr(unset, n)}


def _heartbeat(make: Callable[[], Cluster] = Cluster) -> tuple[Cluster, list[Any]]:
    """The heartbeat of the table (also replayed by Kafka's loader in tests/interop)."""
    c = _cluster(make)
    out = c.heartbeat(1, offline=[dir_id(1, FAILED)])
    return c, [r for r, _ in out.records]


@pytest.mark.parametrize("row", ROWS, ids=[f"p{r[0]}" for r in ROWS])
def test_each_partition_gets_kafkas_record_or_the_documented_difference(row: tuple[Any, ...]) -> None:
    pid, _replicas, _d1, isr, leader, elr, lke, kafka, same = row
    c, records = _heartbeat()
    mine = [_fields(r) for r in records if isinstance(r, PartitionChangeRecord) and r.partition_id == pid]
    assert mine == ([kafka] if kafka is not None and same else [])  # never two records for one partition
    p = c.state.partition(TID, pid)
    assert p is not None
    if kafka is not None and not same:
        # Ours: still leaderless, ELR and last known ELR as before the heartbeat.
        assert (p.leader, list(p.isr), list(p.elr), list(p.last_known_elr)) == (leader, isr, elr, lke)
    assert c.state.check_invariants() == []


def test_record_order_is_kafkas_unfence_elections_then_dirs() -> None:
    c, records = _heartbeat()
    shape = [(type(r).__name__, getattr(r, "partition_id", None)) for r in records]
    assert shape == [
        ("BrokerRegistrationChangeRecord", None),
        ("PartitionChangeRecord", 0),
        ("PartitionChangeRecord", 2),
        ("BrokerRegistrationChangeRecord", None),
    ]
    first, last = records[0], records[-1]
    assert isinstance(first, BrokerRegistrationChangeRecord) and first.fenced == -1
    assert isinstance(last, BrokerRegistrationChangeRecord) and last.log_dirs == [dir_id(1, KEPT)]
    assert not c.state.brokers[1].fenced
    live = c.state.durable_state()
    assert c.restart().durable_state() == live
