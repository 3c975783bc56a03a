"""AssignReplicasToDirs: top-level and per-partition errors, records, offline targets."""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller import features as fv
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from tests.controller.harness import Cluster, dir_id

LOST = uuid.UUID(int=2)


def _cluster() -> tuple[Cluster, uuid.UUID]:
    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.start_broker(2, [dir_id(2, 0)])
    c.start_broker(3, [dir_id(3, 0)])
    c.create_topic("t", 3, 2)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    return c, tid


def test_top_level_errors() -> None:
    old = Cluster(level=16)
    old.start_broker(1, [])
    out = old.call(73, 0, AssignReplicasToDirsRequest(broker_id=1, broker_epoch=old.epoch(1)))
    assert out.response.error_code == ErrorCode.UNSUPPORTED_VERSION and out.records == []  # type: ignore[attr-defined]
    c, _ = _cluster()
    for broker, epoch in ((1, c.epoch(1) + 1), (9, 0)):
        out = c.call(73, 0, AssignReplicasToDirsRequest(broker_id=broker, broker_epoch=epoch))
        assert out.response.error_code == ErrorCode.STALE_BROKER_EPOCH  # type: ignore[attr-defined]
        assert out.response.directories == [] and out.records == []  # type: ignore[attr-defined]


def test_per_partition_errors_mirror_the_request() -> None:
    c, tid = _cluster()
    not_mine = next(p.partition_id for p in c.state.topics[tid].partitions.values() if 1 not in p.replicas)
    mine = next(p.partition_id for p in c.state.topics[tid].partitions.values() if 1 in p.replicas)
    req = AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=c.epoch(1),
        directories=[
            DirectoryData(
                id=dir_id(1, 1),
                topics=[
                    TopicData(topic_id=uuid.UUID(int=777 << 64), partitions=[PartitionData(0), PartitionData(1)]),
                    TopicData(
                        topic_id=tid, partitions=[PartitionData(99), PartitionData(not_mine), PartitionData(mine)]
                    ),
                ],
            )
        ],
    )
    out = c.call(73, 0, req)
    resp = out.response
    assert resp.error_code == 0  # type: ignore[attr-defined]
    codes = [[p.error_code for p in t.partitions] for t in resp.directories[0].topics]  # type: ignore[attr-defined]
    assert codes == [
        [ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.UNKNOWN_TOPIC_ID],
        [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NONE],
    ]
    [(rec, ver)] = out.records
    assert isinstance(rec, PartitionChangeRecord) and ver == fv.partition_change_record_version(fv.DEFAULT_LEVEL)
    p = c.state.partition(tid, mine)
    assert p is not None and rec.directories == list(p.dirs)
    assert p.dir_of(1) == dir_id(1, 1)
    assert p in c.state.replicas_in(1, dir_id(1, 1))
    again = c.call(73, 0, req)
    assert again.records == []  # nothing changed: no record


@pytest.mark.parametrize("target", [LOST, uuid.UUID(int=4242 << 64)], ids=["LOST", "unknown dir"])
def test_assign_to_offline_dir_adds_isr_record(target: uuid.UUID) -> None:
    c, tid = _cluster()
    led = [p for p in c.state.topics[tid].partitions.values() if p.leader == 1]
    assert led, "placement should give broker 1 a leadership"
    p = led[0]
    out = c.assign(1, target, [(tid, p.partition_id)])
    recs = [r for r, _ in out.records]
    assert len(recs) == 2 and all(isinstance(r, PartitionChangeRecord) for r in recs)
    first, second = recs
    assert first.directories is not None and second.directories is None  # type: ignore[attr-defined]
    assert 1 not in p.isr and p.leader != 1 and p.leader != -1
    assert c.state.check_invariants() == []


@pytest.mark.parametrize(("profile", "offline"), [("kafka", True), ("kip", False)])
def test_unknown_dir_on_single_dir_broker(profile: str, offline: bool) -> None:
    c = Cluster(profile=profile)
    c.start_broker(1, [dir_id(1, 0)])
    c.start_broker(2, [dir_id(2, 0)])
    c.create_topic("t", 1, 2)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    out = c.assign(1, uuid.UUID(int=4242 << 64), [(tid, 0)])
    assert len(out.records) == (2 if offline else 1)
    p = c.state.partition(tid, 0)
    assert p is not None and (1 not in p.isr) is offline
    assert c.state.check_invariants() == []
