"""AlterPartition through the state machine: every per-partition error, the change, replay.

Setting: three unfenced brokers with two directories each, topic ``t`` with two
partitions of three replicas, every replica assigned to its broker's first directory.
Each error case perturbs the cluster and/or the request, then checks the code, that no
record was written, and that the partition did not move. Each success checks that the
response reports exactly the state the committed record produced.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from kraft_jbod.controller.state import API_ALTER_PARTITION, Partition
from kraft_jbod.errors import ProtocolError
from kraft_jbod.messages.alter_partition_request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
from kraft_jbod.messages.alter_partition_response import AlterPartitionResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from tests.controller.harness import Cluster, dir_id

NONE, UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER, INVALID_REQUEST = 0, 3, 41, 42
STALE_BROKER_EPOCH, UNKNOWN_TOPIC_ID = 77, 100
FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION = ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION
INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED = ErrorCode.INELIGIBLE_REPLICA, ErrorCode.OPERATION_NOT_ATTEMPTED


def make_cluster(level: int = 22) -> tuple[Cluster, uuid.UUID]:
    c = Cluster(level=level)
    for b in (1, 2, 3):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1)])
    out = c.create_topic("t", 2, 3)
    assert out.response.topics[0].error_code == 0  # type: ignore[attr-defined]
    tid = c.state.topic_id_of("t")
    assert tid is not None
    if level >= 17:
        for pid in (0, 1):
            for b in (1, 2, 3):
                c.assign(b, dir_id(b, 0), [(tid, pid)])
    return c, tid


def part(c: Cluster, tid: uuid.UUID, pid: int = 0) -> Partition:
    p = c.state.partition(tid, pid)
    assert p is not None
    return p


def followers(p: Partition) -> list[int]:
    return [b for b in p.replicas if b != p.leader]


@dataclass
class Req:
    """One partition entry; None fields default to the partition's current values."""

    isr: list[int] | None = None
    broker: int | None = None
    leader_epoch: int | None = None
    partition_epoch: int | None = None
    lrs: int = 0
    epochs: dict[int, int] = field(default_factory=dict)  # broker -> epoch sent in v3 (default: real)
    pid: int = 0


def entry(c: Cluster, tid: uuid.UUID, r: Req, version: int) -> PartitionData:
    p = c.state.partition(tid, r.pid)
    isr = list(r.isr if r.isr is not None else (p.isr if p else []))
    pd = PartitionData(
        partition_index=r.pid,
        leader_epoch=r.leader_epoch if r.leader_epoch is not None else (p.leader_epoch if p else 0),
        partition_epoch=r.partition_epoch if r.partition_epoch is not None else (p.partition_epoch if p else 0),
        leader_recovery_state=r.lrs,
    )
    if version >= 3:
        pd.new_isr_with_epochs = [
            BrokerState(b, r.epochs.get(b, c.epoch(b) if b in c.state.brokers else -1)) for b in isr
        ]
    else:
        pd.new_isr = isr
    return pd


def alter(
    c: Cluster,
    tid: uuid.UUID,
    reqs: list[Req],
    *,
    version: int = 3,
    broker: int | None = None,
    broker_epoch: int | None = None,
    topic: TopicData | None = None,
) -> tuple[AlterPartitionResponse, list[Any]]:
    target = c.state.partition(tid, reqs[0].pid) or part(c, tid, 0)
    leader = target.leader if broker is None else broker
    if topic is None:
        topic = TopicData(topic_name="t", topic_id=tid) if version >= 2 else TopicData(topic_name="t")
    topic.partitions = [entry(c, tid, r, version) for r in reqs]
    req = AlterPartitionRequest(
        broker_id=leader,
        broker_epoch=c.epoch(leader) if broker_epoch is None else broker_epoch,
        topics=[topic],
    )
    out = c.call(API_ALTER_PARTITION, version, req)
    assert isinstance(out.response, AlterPartitionResponse)
    return out.response, out.records


def bump_epochs(c: Cluster, tid: uuid.UUID, *, leader: bool) -> None:
    """Commit a no-op change (partition epoch + 1), re-electing the same leader if asked (+1 each)."""
    p = part(c, tid)
    rec = PartitionChangeRecord(partition_id=0, topic_id=tid, leader=p.leader if leader else -2)
    c.commit([(rec, 1)])


def fence(c: Cluster, tid: uuid.UUID) -> None:
    c.heartbeat(followers(part(c, tid))[0], want_fence=True)


def shut_down(c: Cluster, tid: uuid.UUID) -> None:
    c.heartbeat(followers(part(c, tid))[0], want_shut_down=True)


def unregister(c: Cluster, tid: uuid.UUID) -> None:
    c.call(64, 0, UnregisterBrokerRequest(broker_id=followers(part(c, tid))[0]))


def fail_dir(c: Cluster, tid: uuid.UUID) -> None:
    b = followers(part(c, tid))[0]
    c.heartbeat(b, offline=[dir_id(b, 0)])


def nothing(c: Cluster, tid: uuid.UUID) -> None:
    pass


def all_replicas(p: Partition) -> list[int]:
    return list(p.replicas)


# (id, setup, request builder from the partition, version, expected code)
ERROR_CASES: list[tuple[str, Callable[[Cluster, uuid.UUID], None], Callable[[Partition], Req], int, int]] = [
    ("unknown-partition", nothing, lambda p: Req(pid=7), 3, UNKNOWN_TOPIC_OR_PARTITION),
    ("leader-epoch-ahead", nothing, lambda p: Req(leader_epoch=p.leader_epoch + 1), 3, NOT_CONTROLLER),
    ("partition-epoch-ahead", nothing, lambda p: Req(partition_epoch=p.partition_epoch + 1), 3, NOT_CONTROLLER),
    (
        "leader-epoch-behind",
        lambda c, t: bump_epochs(c, t, leader=True),
        lambda p: Req(leader_epoch=p.leader_epoch - 1, partition_epoch=p.partition_epoch - 1),
        3,
        FENCED_LEADER_EPOCH,
    ),
    ("not-the-leader", nothing, lambda p: Req(broker=followers(p)[0]), 3, INVALID_REQUEST),
    (
        "partition-epoch-behind",
        lambda c, t: bump_epochs(c, t, leader=False),
        lambda p: Req(partition_epoch=p.partition_epoch - 1),
        3,
        INVALID_UPDATE_VERSION,
    ),
    ("isr-not-replica", nothing, lambda p: Req(isr=[p.leader, 9]), 3, INVALID_REQUEST),
    ("isr-duplicate", nothing, lambda p: Req(isr=[p.leader, p.leader]), 3, INVALID_REQUEST),
    ("isr-negative", nothing, lambda p: Req(isr=[p.leader, -1]), 2, INVALID_REQUEST),
    ("isr-without-leader", nothing, lambda p: Req(isr=followers(p)), 3, INVALID_REQUEST),
    ("isr-empty", nothing, lambda p: Req(isr=[]), 3, INVALID_REQUEST),
    ("recovering-with-followers", nothing, lambda p: Req(isr=all_replicas(p), lrs=1), 3, INVALID_REQUEST),
    ("recovered-to-recovering", nothing, lambda p: Req(isr=[p.leader], lrs=1), 3, INVALID_REQUEST),
    ("unknown-recovery-state", nothing, lambda p: Req(lrs=5), 3, INVALID_REQUEST),
    ("fenced-replica", fence, lambda p: Req(isr=all_replicas(p)), 3, INELIGIBLE_REPLICA),
    ("fenced-replica-v1", fence, lambda p: Req(isr=all_replicas(p)), 1, OPERATION_NOT_ATTEMPTED),
    ("shutting-down-replica", shut_down, lambda p: Req(isr=all_replicas(p)), 2, INELIGIBLE_REPLICA),
    ("shutting-down-replica-v0", shut_down, lambda p: Req(isr=all_replicas(p)), 0, OPERATION_NOT_ATTEMPTED),
    ("unregistered-replica", unregister, lambda p: Req(isr=all_replicas(p)), 3, INELIGIBLE_REPLICA),
    (
        "v3-epoch-mismatch",
        nothing,
        lambda p: Req(isr=[p.leader, followers(p)[0]], epochs={followers(p)[0]: 12345}),
        3,
        INELIGIBLE_REPLICA,
    ),
    ("offline-directory", fail_dir, lambda p: Req(isr=all_replicas(p)), 3, INELIGIBLE_REPLICA),
]


@pytest.mark.parametrize(
    ("setup", "build", "version", "code"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES]
)
def test_partition_errors_write_nothing(
    setup: Callable[[Cluster, uuid.UUID], None], build: Callable[[Partition], Req], version: int, code: int
) -> None:
    c, tid = make_cluster()
    setup(c, tid)
    p = part(c, tid)
    before = p.durable()
    r = build(p)
    resp, records = alter(c, tid, [r], version=version, broker=r.broker)
    assert resp.error_code == NONE
    [t] = resp.topics
    [pr] = t.partitions
    assert (pr.partition_index, pr.error_code) == (r.pid, code)
    assert records == [] and part(c, tid).durable() == before
    assert c.state.check_invariants() == []


def assert_reports_state(c: Cluster, tid: uuid.UUID, pr: Any, pid: int = 0) -> None:
    p = part(c, tid, pid)
    assert pr.error_code == NONE
    got = (pr.leader_id, pr.leader_epoch, list(pr.isr), pr.leader_recovery_state, pr.partition_epoch)
    assert got == (p.leader, p.leader_epoch, list(p.isr), p.leader_recovery_state, p.partition_epoch)


def test_shrink_then_expand_bumps_only_the_partition_epoch() -> None:
    c, tid = make_cluster()
    p = part(c, tid)
    le, pe, full = p.leader_epoch, p.partition_epoch, list(p.isr)
    resp, records = alter(c, tid, [Req(isr=[p.leader])])
    assert len(records) == 1
    rec, ver = records[0]
    assert ver == 1 and rec.isr == [p.leader] and rec.leader == -2 and rec.leader_recovery_state == -1
    assert rec.directories is None and rec.replicas is None
    assert_reports_state(c, tid, resp.topics[0].partitions[0])
    assert (p.isr, p.leader_epoch, p.partition_epoch) == ((p.leader,), le, pe + 1)
    resp, records = alter(c, tid, [Req(isr=full)])
    assert len(records) == 1 and p.isr == tuple(full) and (p.leader_epoch, p.partition_epoch) == (le, pe + 2)
    assert_reports_state(c, tid, resp.topics[0].partitions[0])
    assert c.state.check_invariants() == []


@pytest.mark.parametrize(("level", "bump"), [(11, 1), (12, 0), (16, 0)])
def test_isr_shrink_bumps_leader_epoch_only_before_3_6(level: int, bump: int) -> None:
    c, tid = make_cluster(level)
    p = part(c, tid)
    le = p.leader_epoch
    resp, records = alter(c, tid, [Req(isr=[p.leader])])
    [(rec, ver)] = records
    assert ver == 0  # no Directories before 3.7-IV2
    assert rec.leader == (p.leader if bump else -2)
    assert p.leader_epoch == le + bump
    assert_reports_state(c, tid, resp.topics[0].partitions[0])
    # An expansion never bumps it.
    alter(c, tid, [Req(isr=list(p.replicas))])
    assert p.leader_epoch == le + bump


def test_same_isr_is_a_no_op_and_reorder_is_not() -> None:
    c, tid = make_cluster()
    p = part(c, tid)
    before = p.durable()
    resp, records = alter(c, tid, [Req()])
    assert records == [] and p.durable() == before
    assert_reports_state(c, tid, resp.topics[0].partitions[0])
    # Kafka compares the ISR as a list: a new order is a change.
    resp, records = alter(c, tid, [Req(isr=list(reversed(p.isr)))])
    assert len(records) == 1 and p.isr == tuple(reversed(before[1]))


def test_recovering_leader_reports_recovered() -> None:
    c, tid = make_cluster()
    p = part(c, tid)
    c.commit([(PartitionChangeRecord(partition_id=0, topic_id=tid, isr=[p.leader], leader_recovery_state=1), 1)])
    assert p.leader_recovery_state == 1
    # Staying RECOVERING alone in the ISR is valid and changes nothing.
    _, records = alter(c, tid, [Req(lrs=1)])
    assert records == []
    resp, records = alter(c, tid, [Req(lrs=0)])
    [(rec, _)] = records
    assert rec.leader_recovery_state == 0 and rec.isr is None
    assert p.leader_recovery_state == 0
    assert_reports_state(c, tid, resp.topics[0].partitions[0])
    # v0 cannot carry the field: it means RECOVERED, which is now the state.
    _, records = alter(c, tid, [Req()], version=0)
    assert records == []


def test_broker_epoch_minus_one_skips_the_v3_epoch_check() -> None:
    c, tid = make_cluster()
    p = part(c, tid)
    alter(c, tid, [Req(isr=[p.leader])])
    f = followers(p)[0]
    resp, _ = alter(c, tid, [Req(isr=[p.leader, f], epochs={f: -1})])
    assert resp.topics[0].partitions[0].error_code == NONE and p.isr == (p.leader, f)


@pytest.mark.parametrize("delta", [1, -1])
def test_stale_requester_epoch_is_a_top_level_error(delta: int) -> None:
    c, tid = make_cluster()
    p = part(c, tid)
    resp, records = alter(c, tid, [Req(isr=[p.leader])], broker_epoch=c.epoch(p.leader) + delta)
    assert (resp.error_code, resp.topics, records) == (STALE_BROKER_EPOCH, [], [])


def test_unknown_broker_is_stale() -> None:
    c, tid = make_cluster()
    resp, records = alter(c, tid, [Req()], broker=42, broker_epoch=7)
    assert (resp.error_code, records) == (STALE_BROKER_EPOCH, [])


@pytest.mark.parametrize(
    ("version", "topic", "code"),
    [
        (3, TopicData(topic_id=uuid.UUID(int=0x55)), UNKNOWN_TOPIC_ID),
        (2, TopicData(topic_id=uuid.UUID(int=0)), UNKNOWN_TOPIC_ID),
        (1, TopicData(topic_name="nope"), UNKNOWN_TOPIC_OR_PARTITION),
        (0, TopicData(topic_name=""), UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_unknown_topics(version: int, topic: TopicData, code: int) -> None:
    c, tid = make_cluster()
    resp, records = alter(c, tid, [Req(), Req(pid=1)], version=version, topic=topic)
    assert records == []
    assert [(x.partition_index, x.error_code) for x in resp.topics[0].partitions] == [(0, code), (1, code)]


def test_by_name_before_v2_and_response_names_the_topic() -> None:
    c, tid = make_cluster()
    p = part(c, tid)
    resp, records = alter(c, tid, [Req(isr=[p.leader])], version=1)
    assert len(records) == 1 and resp.topics[0].topic_name == "t"
    assert_reports_state(c, tid, resp.topics[0].partitions[0])
    again = AlterPartitionResponse.decode(resp.encode(1), 1)
    assert again.topics[0].topic_name == "t" and again.topics[0].partitions[0].isr == [p.leader]
    resp, _ = alter(c, tid, [Req()], version=2)
    assert resp.topics[0].topic_id == tid


def test_a_repeated_partition_sees_the_first_change() -> None:
    c, tid = make_cluster()
    p = part(c, tid)
    pe = p.partition_epoch
    resp, records = alter(c, tid, [Req(isr=[p.leader]), Req(isr=list(p.replicas))])
    codes = [x.error_code for x in resp.topics[0].partitions]
    assert codes == [NONE, INVALID_UPDATE_VERSION] and len(records) == 1
    assert p.isr == (p.leader,) and p.partition_epoch == pe + 1


def test_mixed_request_writes_only_the_valid_changes() -> None:
    c, tid = make_cluster()
    p0 = part(c, tid, 0)
    # Rule 2 comes before the leader check, so partition 1 fails the same way whoever leads it.
    resp, records = alter(c, tid, [Req(isr=[p0.leader], pid=0), Req(pid=1, partition_epoch=99)])
    assert [x.error_code for x in resp.topics[0].partitions] == [NONE, NOT_CONTROLLER]
    assert len(records) == 1 and records[0][0].partition_id == 0
    assert_reports_state(c, tid, resp.topics[0].partitions[0], 0)


def test_changes_survive_replay() -> None:
    c, tid = make_cluster()
    p = part(c, tid)
    leader = p.leader
    alter(c, tid, [Req(isr=[leader])])
    c.commit([(PartitionChangeRecord(partition_id=0, topic_id=tid, leader_recovery_state=1), 1)])
    alter(c, tid, [Req(lrs=0)])
    alter(c, tid, [Req(isr=list(p.replicas))])
    live = c.state.durable_state()
    fresh = c.restart()
    assert fresh.durable_state() == live
    q = part(c, tid)
    assert (q.isr, q.leader, q.leader_recovery_state) == (p.replicas, leader, 0)
    assert q.partition_epoch == p.partition_epoch
    assert fresh.check_invariants() == []


def test_wrong_body_is_a_protocol_error() -> None:
    c, _ = make_cluster()
    with pytest.raises(ProtocolError):
        c.state.handle(API_ALTER_PARTITION, 3, UnregisterBrokerRequest(broker_id=1), now_ms=c.now, next_offset=0)
    with pytest.raises(ProtocolError):
        c.state.handle(API_ALTER_PARTITION, 4, AlterPartitionRequest(), now_ms=c.now, next_offset=0)
    assert c.state.handled_api_versions()[API_ALTER_PARTITION] == (0, 3)
