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


def test_assignment_elects_judging_replicas_by_their_previous_dirs() -> None:
    """Kafka runs its change builder, election included, for every assignment, and judges each
    replica by the directory it had before this request; the ISR step for an offline target
    is built from that state too. Found by the differential twin (tests/twin) against Kafka
    4.4's controller, which wrote exactly these records (ELR on, one replica)."""
    from kraft_jbod.messages.config_record import ConfigRecord
    from kraft_jbod.messages.feature_level_record import FeatureLevelRecord

    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.commit(
        [
            (FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0),
            (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="1"), 0),
        ]
    )
    c.create_topic("t", 1, 1)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.image.topics[tid].partitions[0]

    def state() -> tuple[object, ...]:
        return (p.leader, p.isr, p.elr, p.last_known_elr, p.leader_epoch, p.dirs)

    unregistered = dir_id(1, 2)
    c.assign(1, dir_id(7, 0), [(tid, 0)])  # a dir the broker does not have: offline
    assert state() == (-1, (), (1,), (1,), 1, (dir_id(7, 0),))
    c.assign(1, uuid.UUID(int=1), [(tid, 0)])  # UNASSIGNED counts as online; judged by the old dir: no election
    assert state() == (-1, (), (1,), (1,), 1, (uuid.UUID(int=1),))
    # Offline target again, but the election judges the replica by UNASSIGNED (online): it is
    # elected from the ELR, and the ISR step (from the state before) changes nothing.
    out = c.assign(1, unregistered, [(tid, 0)])
    assert len(out.records) == 1
    assert state() == (1, (1,), (), (), 2, (unregistered,))
    # Online target: the leader is judged by its offline dir and loses leadership, the ISR stays.
    c.assign(1, dir_id(1, 1), [(tid, 0)])
    assert state() == (-1, (1,), (), (1,), 3, (dir_id(1, 1),))


def test_an_offline_target_runs_the_isr_step_on_every_assigned_partition() -> None:
    """Kafka's ISR step for an offline target (its generateLeaderAndIsrUpdates) runs the change
    builder for every partition assigned there, not only where the broker is in the ISR or
    leads, and builds it from the state before the request. A leaderless partition whose other
    replica can lead is elected by the assignment's own builder and again by the ISR step: two
    records, two leader epochs. Found by the differential twin against Kafka 4.4's controller
    (4.3-IV0, a fenced broker assigning its replica to a directory it never registered)."""
    from kraft_jbod.messages.create_topics_request import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreateTopicsRequest,
    )

    c = Cluster(level=25)  # ELR off
    c.start_broker(3, [dir_id(3, 0), dir_id(3, 1)])
    c.start_broker(2, [dir_id(2, 0)])
    topic = CreatableTopic(
        name="t",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[3, 2])],
    )
    c.call(19, 7, CreateTopicsRequest(topics=[topic]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.heartbeat(2, want_fence=True)
    c.assign(3, dir_id(3, 0), [(tid, 0)])
    c.heartbeat(3, offline=[dir_id(3, 0)])
    c.assign(3, dir_id(3, 1), [(tid, 0)])  # judged by its old (offline) dir: nobody elected
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr) == (-1, (3,))
    epoch = p.leader_epoch
    out = c.assign(2, dir_id(2, 9), [(tid, 0)])  # broker 2's own id, never registered: offline
    changes = [r for r, _ in out.records if isinstance(r, PartitionChangeRecord)]
    assert [(r.leader, r.directories is not None) for r in changes] == [(3, True), (3, False)]
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr, p.leader_epoch) == (3, (3,), epoch + 2)
    assert c.state.check_invariants() == []


def _unclean_topic(c: Cluster, replicas: list[int]) -> uuid.UUID:
    from kraft_jbod.messages.create_topics_request import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreatableTopicConfig,
        CreateTopicsRequest,
    )

    topic = CreatableTopic(
        name="u",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=replicas)],
        configs=[CreatableTopicConfig("unclean.leader.election.enable", "true")],
    )
    out = c.call(19, 7, CreateTopicsRequest(topics=[topic]))
    assert out.response.topics[0].error_code == 0  # type: ignore[attr-defined]
    tid = c.state.topic_id_of("u")
    assert tid is not None
    return tid


@pytest.mark.parametrize("level", [25, fv.DEFAULT_LEVEL], ids=["ELR off", "ELR on"])
def test_a_failed_directory_elects_uncleanly_where_the_topic_allows_it(level: int) -> None:
    """Kafka's generateLeaderAndIsrUpdates runs an UNCLEAN election for a topic with
    unclean.leader.election.enable: when the last ISR member's directory fails, a live replica
    outside the ISR leads (ISR reset to it, leader recovery RECOVERING)."""
    c = Cluster(level=level)
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.start_broker(2, [dir_id(2, 0)])
    tid = _unclean_topic(c, [1, 2])
    c.assign(1, dir_id(1, 0), [(tid, 0)])
    c.heartbeat(2, want_fence=True)  # 2 leaves the ISR
    c.heartbeat(2)  # and is back, unfenced, but outside the ISR
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr) == (1, (1,)) and c.state.brokers[2].active
    c.heartbeat(1, offline=[dir_id(1, 0)])
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)
    assert c.state.check_invariants() == []


def test_unfencing_elects_uncleanly_where_the_topic_allows_it() -> None:
    """Without ELR: both replicas fenced, the ISR keeps its last member (leader -1); when the
    other one comes back, the unfencing election (over every leaderless partition) takes it
    uncleanly because the topic allows it."""
    c = Cluster(level=25)
    c.start_broker(1)
    c.start_broker(2)
    tid = _unclean_topic(c, [1, 2])
    c.heartbeat(2, want_fence=True)
    c.heartbeat(1, want_fence=True)
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr) == (-1, (1,))
    c.heartbeat(2)
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr, p.leader_recovery_state) == (2, (2,), 1)
    assert c.state.check_invariants() == []


def test_the_periodic_check_elects_uncleanly_once_a_topic_allows_it() -> None:
    """Kafka's electUnclean task: every unclean.leader.election.interval.ms, a leaderless
    partition whose topic now allows unclean elections gets one (here the topic allowed
    none when its last ISR member was fenced)."""
    from kraft_jbod.messages.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    c = Cluster(level=25, session_timeout_ms=10**9, unclean_check_interval_ms=60_000)
    c.start_broker(1)
    c.start_broker(2)
    c.create_topic("t", 1, 2)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 0)
    assert p is not None
    first, second = p.replicas
    c.heartbeat(second, want_fence=True)
    c.heartbeat(second)  # back, but outside the ISR
    c.heartbeat(first, want_fence=True)
    assert c.tick() == []  # the task starts: its first run is one interval away
    assert (p.leader, p.isr) == (-1, (first,))
    c.now += 60_000
    assert c.tick() == []  # due, but the topic allows no unclean election
    allow = AlterConfigsResource(2, "t", [AlterableConfig("unclean.leader.election.enable", 0, "true")])
    c.call(44, 1, IncrementalAlterConfigsRequest(resources=[allow]))
    c.now += 59_999
    assert c.tick() == []
    c.now += 1
    [(rec, _)] = c.tick()
    assert isinstance(rec, PartitionChangeRecord)
    assert (p.leader, p.isr, p.leader_recovery_state) == (second, (second,), 1)
    assert c.state.check_invariants() == []


def test_a_failed_directory_reaches_every_partition_with_a_replica_in_it() -> None:
    """Kafka indexes partitions by directory id alone (directoriesToPartitions), whichever
    broker's replica sits there, and runs the ISR step per newly offline directory from the
    state before the heartbeat. Broker 1's replica was assigned to a directory of broker 2's;
    broker 2 then reports that directory and its own replica's directory offline: the
    partition is met twice and gets the same record twice. Found by the differential twin
    against Kafka 4.4's controller (4.1-IV0, seed 7401)."""
    from kraft_jbod.messages.create_topics_request import (
        CreatableReplicaAssignment,
        CreatableTopic,
        CreateTopicsRequest,
    )

    c = Cluster(level=25)  # ELR off
    c.start_broker(1, [dir_id(1, 0)])
    c.start_broker(2, [dir_id(2, 0), dir_id(2, 1)])
    c.start_broker(3, [dir_id(3, 0)])
    topic = CreatableTopic(
        name="t",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[CreatableReplicaAssignment(partition_index=0, broker_ids=[3, 1, 2])],
    )
    c.call(19, 7, CreateTopicsRequest(topics=[topic]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.assign(1, dir_id(2, 0), [(tid, 0)])  # not broker 1's: offline for it, it leaves the ISR
    c.assign(2, dir_id(2, 1), [(tid, 0)])
    p = c.state.partition(tid, 0)
    assert p is not None and p.isr == (3, 2)
    epoch = p.partition_epoch
    out = c.heartbeat(2, offline=[dir_id(2, 0), dir_id(2, 1)])
    changes = [r for r, _ in out.records if isinstance(r, PartitionChangeRecord)]
    assert len(changes) == 2 and changes[0] == changes[1] and changes[0].isr == [3]
    assert (p.isr, p.partition_epoch) == ((3,), epoch + 2)
    assert c.state.check_invariants() == []
