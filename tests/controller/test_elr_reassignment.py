"""A reassignment completed by the leader's AlterPartition, with eligible leader replicas on
(KIP-966): the change is built as Kafka's AlterPartition path builds it, with ELR and the
topic's effective min.insync.replicas (issue 12, item 7; docs/divergences.md, ELR)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kraft_jbod.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kraft_jbod.messages.alter_partition_request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
from kraft_jbod.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from tests.controller.harness import Cluster, dir_id

# (min.insync.replicas, ISR the leader proposes, Kafka's record: leader, ISR, ELR, replicas)
ROWS = [
    # At or above min ISR after completion: no ELR.
    (2, [1, 2, 3, 4], (2, [2, 3, 4], None, [2, 3, 4])),
    # Below min ISR (3; rf 4 while reassigning): the old ISR members outside the new ISR go
    # to the ELR, the replica the reassignment removes (1) included, as Kafka's builder does.
    (3, [1, 2, 4], (2, [2, 4], [1, 3], [2, 3, 4])),
]


def _setup(min_isr: int, make: Callable[[], Cluster] = Cluster) -> Cluster:
    c = make()
    for b in (1, 2, 3, 4):
        c.start_broker(b, [dir_id(b, 0)])
    topic = CreatableTopic(
        name="t",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[CreatableReplicaAssignment(0, [1, 2, 3])],
        configs=[CreatableTopicConfig("min.insync.replicas", str(min_isr))],
    )
    assert c.call(19, 7, CreateTopicsRequest(topics=[topic])).records
    req = AlterPartitionReassignmentsRequest(topics=[ReassignableTopic("t", [ReassignablePartition(0, [2, 3, 4])])])
    assert c.call(45, 0, req).records
    return c


def complete(min_isr: int, proposed: list[int], make: Callable[[], Cluster] = Cluster) -> tuple[Cluster, list[Any]]:
    """Start the reassignment, then the leader's AlterPartition (also replayed by Kafka's
    loader in tests/interop); returns the cluster and the AlterPartition's records."""
    c = _setup(min_isr, make)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 0)
    assert p is not None and p.leader == 1 and list(p.replicas) == [2, 3, 4, 1]
    pd = PartitionData(
        partition_index=0,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        new_isr_with_epochs=[BrokerState(b, c.epoch(b)) for b in proposed],
    )
    req = AlterPartitionRequest(broker_id=1, broker_epoch=c.epoch(1), topics=[TopicData(topic_id=tid, partitions=[pd])])
    return c, [r for r, _ in c.call(56, 3, req).records]


@pytest.mark.parametrize(("min_isr", "proposed", "kafka"), ROWS)
def test_completion_by_alter_partition_carries_elr(
    min_isr: int, proposed: list[int], kafka: tuple[int, list[int], list[int] | None, list[int]]
) -> None:
    c, records = complete(min_isr, proposed)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    (rec,) = [r for r in records if isinstance(r, PartitionChangeRecord)]
    assert (rec.leader, rec.isr, rec.eligible_leader_replicas, rec.replicas) == kafka
    assert rec.adding_replicas == [] and rec.removing_replicas == []
    p = c.state.partition(tid, 0)
    assert p is not None and list(p.elr) == (kafka[2] or [])
    assert c.state.check_invariants() == []
    live = c.state.durable_state()
    assert c.restart().durable_state() == live
