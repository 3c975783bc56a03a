"""Pure pieces of the fake broker and the controller's Fetch handler, with real logs."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraft_jbod.broker.assignments import MAX_PER_REQUEST, Assignment, AssignmentQueue
from kraft_jbod.broker.directories import DirectoryManager, reconcile
from kraft_jbod.broker.follower import FollowerFatal, MetadataFollower
from kraft_jbod.broker.image import PartitionView
from kraft_jbod.broker.lifecycle import Effect, Input, Lifecycle, LifecycleError, State, transition
from kraft_jbod.controller import replication as rp
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    AssignReplicasToDirsResponse,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fetch_request import FetchRequest
from kraft_jbod.messages.fetch_response import FetchResponse
from kraft_jbod.messages.leader_change_message import LeaderChangeMessage, Voter
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.wire.primitives import UNASSIGNED_DIRECTORY
from kraft_jbod.wire.records import LEADER_CHANGE

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
T1 = uuid.UUID(int=0x77 << 64 | 5)


# ---------------------------------------------------------------- lifecycle table


def test_lifecycle_table_rejects_what_it_does_not_hold() -> None:
    with pytest.raises(LifecycleError):
        transition(State.STARTING, Input.UNFENCED)
    with pytest.raises(LifecycleError):
        transition(State.SHUTTING_DOWN, Input.CAUGHT_UP)


@pytest.mark.parametrize(
    ("state", "effect", "after"),
    [
        # Kafka's BrokerLifecycleManager: controlled shutdown only from RUNNING.
        (State.STARTING, Effect.STOP, State.SHUTTING_DOWN),
        (State.RECOVERY, Effect.STOP, State.SHUTTING_DOWN),
        (State.RUNNING, Effect.NONE, State.PENDING_CONTROLLED_SHUTDOWN),
        (State.PENDING_CONTROLLED_SHUTDOWN, Effect.NONE, State.PENDING_CONTROLLED_SHUTDOWN),
    ],
)
def test_shutdown_request_by_state(state: State, effect: Effect, after: State) -> None:
    assert transition(state, Input.SHUTDOWN_REQUESTED) == (effect, after)


def test_controlled_shutdown_heartbeats_want_shut_down_until_told() -> None:
    lc = Lifecycle(1, multi_dir=True, state=State.RUNNING, epoch=7, image_published=True)
    assert not lc.heartbeat(5, 0).want_shut_down
    assert lc.feed(Input.SHUTDOWN_REQUESTED) is Effect.NONE
    hb = lc.heartbeat(5, 0)
    assert hb.want_shut_down and not hb.want_fence
    assert lc.on_heartbeat(hb, BrokerHeartbeatResponse(is_caught_up=True, should_shut_down=False)) == []
    assert lc.state is State.PENDING_CONTROLLED_SHUTDOWN
    hb = lc.heartbeat(6, 0)
    assert hb.want_shut_down
    assert lc.on_heartbeat(hb, BrokerHeartbeatResponse(is_caught_up=True, should_shut_down=True)) == [Effect.STOP]
    assert lc.history[-1][2] is State.SHUTTING_DOWN


def test_multi_dir_broker_stays_fenced_while_assignments_are_queued() -> None:
    lc = Lifecycle(1, multi_dir=True)
    lc.epoch = 10
    assert lc.heartbeat(5, 0).want_fence  # STARTING
    hb = lc.heartbeat(5, 0)
    lc.on_heartbeat(hb, BrokerHeartbeatResponse(is_caught_up=True, is_fenced=True))
    assert lc.state is State.RECOVERY
    assert lc.heartbeat(5, 0).want_fence  # image not published yet
    lc.image_published = True
    assert lc.heartbeat(5, 3).want_fence  # 3 assignments queued
    hb = lc.heartbeat(5, 0)
    assert not hb.want_fence
    lc.on_heartbeat(hb, BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False))
    assert lc.history[-1][2] is State.RUNNING
    single = Lifecycle(2, multi_dir=False, state=State.RECOVERY, image_published=True)
    assert not single.heartbeat(5, 3).want_fence


def test_offline_dirs_accumulate_and_timeout_counts_only_unreported() -> None:
    lc = Lifecycle(1, multi_dir=True, failure_timeout_ms=1000)
    a, b = uuid.UUID(int=500), uuid.UUID(int=400)
    assert lc.dir_failed(a, 0) and not lc.dir_failed(a, 10)
    lc.dir_failed(b, 100)
    hb = lc.heartbeat(0, 0)
    assert hb.offline_log_dirs == [b, a]  # signed uuid order, whole set every time
    assert lc.overdue_failures(1050) == [a]
    lc.on_heartbeat(hb, BrokerHeartbeatResponse(error_code=77))
    assert lc.overdue_failures(1200) == [a, b]
    lc.on_heartbeat(hb, BrokerHeartbeatResponse())
    assert lc.overdue_failures(5000) == []
    assert lc.heartbeat(0, 0).offline_log_dirs == [b, a]


# ---------------------------------------------------------------- assignment queue


def test_queue_batches_2250_and_requeues_failures() -> None:
    q = AssignmentQueue()
    d = uuid.UUID(int=1000)
    for i in range(5000):
        q.add(Assignment(T1, i, d, queued_ms=0))
    assert q.send_at() == 0  # more than a request's worth: no dispatch delay
    req = q.build(1, 7)
    assert req is not None and req.broker_epoch == 7
    sent = [p.partition_index for p in req.directories[0].topics[0].partitions]
    assert len(sent) == MAX_PER_REQUEST and q.queued == 5000
    assert q.build(1, 7) is None  # one in flight at a time
    resp = AssignReplicasToDirsResponse(
        directories=[
            DirectoryData(
                id=d,
                topics=[
                    TopicData(
                        topic_id=T1,
                        partitions=[PartitionData(partition_index=p, error_code=3 if p == 0 else 0) for p in sent[:-1]],
                    )
                ],
            )
        ]
    )
    done = q.on_response(resp, now_ms=10)
    assert len(done) == MAX_PER_REQUEST - 2  # partition 0 errored, the last one was missing
    assert q.queued == 5000 - len(done)
    q.build(1, 7)
    q.on_failure(now_ms=100)
    assert q.queued == 5000 - len(done) and q.send_at() == 100 + 200


# ---------------------------------------------------------------- directories


def test_probe_detects_removed_dir_and_reconcile_follows_the_kip(tmp_path: Path) -> None:
    a, b = uuid.UUID(int=1 << 70), uuid.UUID(int=2 << 70)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    dirs = DirectoryManager([(tmp_path / "a", a), (tmp_path / "b", b)])
    assert dirs.probe() == []
    p_new = PartitionView(T1, 0, (1, 2), (1, 2), 1, 0, 0, (UNASSIGNED_DIRECTORY, UNASSIGNED_DIRECTORY))
    p_here = PartitionView(T1, 1, (1,), (1,), 1, 0, 0, (b,))
    p_moved = PartitionView(T1, 2, (1,), (1,), 1, 0, 0, (a,))
    dirs.create(dirs.dirs[b], (T1, 2), "t")  # found in b, metadata says a
    acts = {x.tp[1]: x for x in reconcile(1, [p_new, p_here, p_moved], dirs)}
    assert acts[0].create and acts[0].assign and acts[0].directory == a  # a holds fewer
    assert acts[1].create and not acts[1].assign and acts[1].directory == b
    assert not acts[2].create and acts[2].assign and acts[2].directory == b
    (tmp_path / "a").rename(tmp_path / "gone")
    assert dirs.probe() == [a]
    unknown = PartitionView(T1, 3, (1,), (1,), 1, 0, 0, (uuid.UUID(int=9 << 70),))
    assert reconcile(1, [unknown], dirs) == []  # a failed dir exists: do not refill


# ---------------------------------------------------------------- replication (controller) + follower


def make_log(tmp_path: Path, epochs: list[int]) -> MetadataLog:
    log = MetadataLog.open(tmp_path / "log", fsync=False)
    lcm = LeaderChangeMessage(version=0, leader_id=3000, voters=[Voter(3000)], granting_voters=[Voter(3000)])
    for i, e in enumerate(epochs):
        log.leader_epoch = e
        log.append_control([(LEADER_CHANGE, lcm, 0)], timestamp_ms=1)
        if i == 0:
            log.append(ControllerState.bootstrap_records(17), timestamp_ms=1)
        log.append([(NoOpRecord(), 0), (NoOpRecord(), 0)], timestamp_ms=1)
    return log


def fetch(follower: MetadataFollower, log: MetadataLog, leader: rp.Leader, version: int = 17) -> FetchResponse:
    req = FetchRequest.decode(follower.build_request(version).encode(version), version)
    answer = rp.handle_fetch(req, version, cluster_id=CLUSTER, leader=leader, log=log)
    return FetchResponse.decode(answer.response.encode(version), version)


@pytest.mark.parametrize("version", [13, 15, 17])
def test_follower_learns_the_leader_and_decodes_every_batch(tmp_path: Path, version: int) -> None:
    log = make_log(tmp_path, [1, 2, 4])
    leader = rp.Leader(3000, 4, "127.0.0.1", 9093)
    f = MetadataFollower(cluster_id=CLUSTER, node_id=1, directory_id=uuid.UUID(int=5 << 80))
    first = fetch(f, log, leader, version)
    assert first.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert f.on_response(first).new_leader and f.epoch == 4
    published = []
    for _ in range(20):
        published += f.on_response(fetch(f, log, leader, version)).published
        if f.end_offset == log.end_offset:
            break
    assert f.end_offset == log.end_offset and f.batches_decoded == len(log.batches)
    assert [o for o, _, _ in published] == [o for o, _, _ in log.replay()][: len(published)]
    assert f.epochs == rp.epoch_starts(log.batches)
    parked = rp.handle_fetch(f.build_request(version), version, cluster_id=CLUSTER, leader=leader, log=log)
    assert parked.park_ms == 500 and not parked.response.responses[0].partitions[0].records


def test_follower_tells_when_a_new_leader_serves(tmp_path: Path) -> None:
    """The controller channels follow a new leader once it answers with a known high
    watermark (a raft leader tells -1 until its epoch's first batch is committed)."""
    log = make_log(tmp_path, [1, 2, 4])
    f = MetadataFollower(cluster_id=CLUSTER, node_id=1)
    f.on_response(fetch(f, log, rp.Leader(3000, 4)))  # FENCED_LEADER_EPOCH: learns epoch 4
    assert f.epoch == 4 and not f.leader_serving()
    f.on_response(fetch(f, log, rp.Leader(3000, 4)))
    assert f.leader_serving()
    # Epoch 5 is elected; its leader answers without a high watermark until it commits.
    f.on_response(fetch(f, log, rp.Leader(3001, 5)))
    assert (f.epoch, f.leader_id) == (5, 3001) and not f.leader_serving()
    early = fetch(f, log, rp.Leader(3001, 5))
    early.responses[0].partitions[0].high_watermark = -1
    f.on_response(early)
    assert not f.leader_serving()
    f.on_response(fetch(f, log, rp.Leader(3001, 5)))
    assert f.leader_serving()


def test_fetch_errors_and_diverging_epoch(tmp_path: Path) -> None:
    log = make_log(tmp_path, [1, 3])
    leader = rp.Leader(3000, 3)
    starts = rp.epoch_starts(log.batches)
    assert rp.end_offset_for_epoch(starts, 2, log.end_offset) == (1, starts[1][1])
    assert rp.end_offset_for_epoch(starts, 3, log.end_offset) == (3, log.end_offset)
    assert rp.end_offset_for_epoch(starts, 0, log.end_offset) == (0, 0)
    f = MetadataFollower(cluster_id=CLUSTER, node_id=1)
    f.epoch, f.leader_id = 3, 3000
    req = f.build_request(17)
    req.topics[0].partitions[0].fetch_offset = log.end_offset + 5
    req.topics[0].partitions[0].last_fetched_epoch = 2
    ans = rp.handle_fetch(req, 17, cluster_id=CLUSTER, leader=leader, log=log).response
    assert ans.responses[0].partitions[0].diverging_epoch.epoch == 1
    req.topics[0].partitions[0].current_leader_epoch = 4
    assert (
        rp.handle_fetch(req, 17, cluster_id=CLUSTER, leader=leader, log=log)
        .response.responses[0]
        .partitions[0]
        .error_code
        == ErrorCode.UNKNOWN_LEADER_EPOCH
    )
    assert rp.handle_fetch(req, 17, cluster_id="other", leader=leader, log=log).response.error_code == 104
    req.topics[0].topic_id = uuid.UUID(int=7)
    assert rp.handle_fetch(req, 17, cluster_id=CLUSTER, leader=leader, log=log).response.error_code == 42
    # a follower that already published past the diverging point must not truncate
    f.published_offset = 100
    resp = FetchResponse.decode(ans.encode(17), 17)
    with pytest.raises(FollowerFatal):
        f.on_response(resp)


def test_broker_ctl_bad_address_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from kraft_jbod import cli

    assert cli.main(["broker-ctl", "nonsense", "status"]) == 2
    assert "expected HOST:PORT" in capsys.readouterr().err
    assert cli.main(["broker-ctl", "127.0.0.1:1", "status"]) == 2
    assert "cannot talk to 127.0.0.1:1" in capsys.readouterr().err


def test_cordoned_dirs_go_in_heartbeats_only_once_caught_up_and_supported() -> None:
    a, b = uuid.UUID(int=0x99 << 64 | 1), uuid.UUID(int=0x99 << 64 | 2)
    lc = Lifecycle(1, multi_dir=True, epoch=3)
    lc.set_cordoned({a})
    hb = lc.heartbeat(5, 0, cordon_supported=True)
    assert hb.cordoned_log_dirs is None  # STARTING: Kafka reads the config after catching up
    lc.on_heartbeat(hb, BrokerHeartbeatResponse(is_caught_up=True, is_fenced=True))
    assert lc.heartbeat(5, 0, cordon_supported=True).cordoned_log_dirs == [a]
    assert lc.heartbeat(5, 0, cordon_supported=False).cordoned_log_dirs is None  # below 4.3-IV0
    lc.set_cordoned({a, b})
    assert set(lc.heartbeat(5, 0, cordon_supported=True).cordoned_log_dirs or []) == {a, b}
    lc.set_cordoned(set())
    assert lc.heartbeat(5, 0, cordon_supported=True).cordoned_log_dirs == []


def test_reconcile_keeps_new_replicas_out_of_cordoned_dirs(tmp_path: Path) -> None:
    ids = [uuid.UUID(int=0x55 << 64 | i) for i in (1, 2)]
    dm = DirectoryManager([(tmp_path / "a", ids[0]), (tmp_path / "b", ids[1])])
    parts = [PartitionView(T1, i, (1,), (1,), 1, 0, 0, (UNASSIGNED_DIRECTORY,)) for i in range(4)]
    acts = reconcile(1, parts, dm, frozenset({ids[0]}))
    assert [a.directory for a in acts] == [ids[1]] * 4
    everything = reconcile(1, parts, dm, frozenset(ids))  # all cordoned: they still take them
    assert {a.directory for a in everything} == set(ids)
