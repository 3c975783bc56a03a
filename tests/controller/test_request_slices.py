"""Large AssignReplicasToDirs requests go in slices (server.py Rule 4): the slices give the
answer and the image one pass gives, and heartbeats are answered between slices.

No test here times anything: the server test checks *when* heartbeats are answered
relative to the slices' commits. tools/bench/bench_assign_heartbeats.py measures the
latency at 10^6 partitions.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller import state as state_mod
from kraft_jbod.controller.apis.directories import split_assign
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.error_codes import ErrorCode
from tests.controller.harness import Cluster, dir_id
from tests.controller.test_server import CLUSTER, Client, dirs_of, make_config, register_and_unfence

LOST = uuid.UUID(int=2)


def _cluster() -> tuple[Cluster, list[uuid.UUID]]:
    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.start_broker(2, [dir_id(2, 0)])
    tids = []
    for name, n in (("a", 7), ("b", 1), ("c", 12)):
        c.create_topic(name, n, 2)
        tid = c.state.topic_id_of(name)
        assert tid is not None
        tids.append(tid)
    return c, tids


def _request(c: Cluster, tids: list[uuid.UUID]) -> AssignReplicasToDirsRequest:
    """Every shape a slice boundary can cut: a directory and a topic spanning slices, an
    unknown topic, a topic with no partitions, an unknown partition, partitions the broker
    holds no replica of, an offline (LOST) target, a directory with no topics."""
    a, b, cc = tids
    return AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=c.epoch(1),
        directories=[
            DirectoryData(
                id=dir_id(1, 1),
                topics=[
                    TopicData(topic_id=a, partitions=[PartitionData(i) for i in range(7)]),
                    TopicData(topic_id=uuid.UUID(int=777 << 64), partitions=[PartitionData(0), PartitionData(1)]),
                    TopicData(topic_id=b, partitions=[]),
                    TopicData(topic_id=cc, partitions=[PartitionData(i) for i in range(9)] + [PartitionData(99)]),
                ],
            ),
            DirectoryData(id=dir_id(1, 0), topics=[]),
            DirectoryData(
                id=LOST, topics=[TopicData(topic_id=cc, partitions=[PartitionData(i) for i in range(9, 12)])]
            ),
            DirectoryData(id=dir_id(1, 0), topics=[TopicData(topic_id=b, partitions=[PartitionData(0)])]),
        ],
    )


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 8, 13, 22])
def test_slices_answer_and_change_what_one_pass_does(limit: int) -> None:
    whole, tids = _cluster()
    sliced, _ = _cluster()
    req = _request(whole, tids)
    one = whole.call(ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0, req)
    plan = split_assign(req, limit)
    assert plan is not None
    bodies = list(plan.bodies)
    assert len(bodies) == -(-23 // limit)  # 23 partitions named
    for body in bodies:
        assert sum(len(t.partitions) for d in body.directories for t in d.topics) <= limit  # type: ignore[attr-defined]
    responses = [sliced.call(ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0, body).response for body in bodies]
    merged = plan.merge(responses)
    assert merged == one.response
    assert merged.encode(0) == one.response.encode(0)
    assert snap.comparable(sliced.state.image) == snap.comparable(whole.state.image)
    assert sliced.state.check_invariants() == []
    assert split_assign(req, 23) is None  # within the limit: one pass


def test_a_top_level_error_in_a_later_slice_is_the_answer() -> None:
    c, tids = _cluster()
    req = _request(c, tids)
    plan = split_assign(req, 5)
    assert plan is not None
    first = c.call(ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0, next(plan.bodies)).response
    # As if the broker re-registered between the slices: its epoch no longer matches.
    stale = dataclasses.replace(next(plan.bodies), broker_epoch=c.epoch(1) + 1)
    second = c.call(ApiKey.ASSIGN_REPLICAS_TO_DIRS, 0, stale).response
    assert second.error_code == ErrorCode.STALE_BROKER_EPOCH  # type: ignore[attr-defined]
    merged = plan.merge([first, second])
    assert merged.error_code == ErrorCode.STALE_BROKER_EPOCH and merged.directories == []  # type: ignore[attr-defined]


async def test_heartbeats_are_answered_between_the_slices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_mod, "MAX_PARTITIONS_PER_SLICE", 200)
    cfg = make_config(tmp_path, **{"metadata.max.idle.interval.ms": "0"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        assert s.log is not None
        broker = await Client.connect(s.addresses[0])
        epoch1 = await register_and_unfence(broker, 1)
        other = await Client.connect(s.addresses[0])
        epoch2 = await register_and_unfence(other, 2)
        topics = []
        for n in range(3):
            req = CreateTopicsRequest(topics=[CreatableTopic(f"t{n}", 2000, 1)], timeout_ms=1000)
            assert (await broker.call(req, 7)).topics[0].error_code == 0
            tid = s.state.topic_id_of(f"t{n}")
            topics.append(TopicData(topic_id=tid, partitions=[PartitionData(p) for p in range(2000)]))
        # Broker 1 moves every replica it holds to its second directory: ~3,000 partitions,
        # ~15 slices of 200, each one commit.
        big = AssignReplicasToDirsRequest(
            broker_id=1, broker_epoch=epoch1, directories=[DirectoryData(id=dirs_of(1)[1], topics=topics)]
        )
        start = s.log.end_offset
        pending = asyncio.ensure_future(broker.call(big, 0))
        seen: list[int] = []  # the log end offset when each heartbeat was answered
        while not pending.done():
            hb = await other.call(BrokerHeartbeatRequest(2, epoch2, s.log.end_offset, want_fence=False), 1)
            assert hb.error_code == 0
            seen.append(s.log.end_offset)
        resp: Any = pending.result()
        end = s.log.end_offset
        assert resp.error_code == 0
        codes = [p.error_code for t in resp.directories[0].topics for p in t.partitions]
        # Broker 2 holds the other half of the replicas: NOT_LEADER_OR_FOLLOWER for those.
        assert len(codes) == 6000 and set(codes) == {ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER}
        moved = [p for p in s.state.partitions() if 1 in p.replicas]
        assert moved and all(p.dir_of(1) == dirs_of(1)[1] for p in moved)
        # Heartbeats were answered while the assignment was part-way committed: some of its
        # slices in the log, some not yet. Without slices every heartbeat would see either none
        # of its records or all of them. (How many land between depends on how a loaded
        # machine interleaves the two clients on this one loop: one is the proof.)
        between = [offset for offset in seen if start < offset < end]
        assert between, (start, end, seen)
        assert s.stats["request_slices"] >= 10
        await broker.close()
        await other.close()


async def test_heartbeats_are_answered_while_a_snapshot_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rule 5: a snapshot (seconds at 10^6 partitions) holds the worker, not the heartbeats;
    a request that writes waits for the snapshot, and is answered after it."""
    import threading

    from kraft_jbod.controller.server import snapshots
    from tests.controller.test_server import registration

    release = threading.Event()
    started = threading.Event()
    real = snapshots.write_image_snapshot

    def held(*args: Any, **kwargs: Any) -> Path:
        started.set()
        assert release.wait(30), "the test never released the snapshot"
        return real(*args, **kwargs)

    cfg = make_config(tmp_path, **{"metadata.max.idle.interval.ms": "0"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        assert s.log is not None
        a = await Client.connect(s.addresses[0])
        epoch = await register_and_unfence(a, 1)
        b = await Client.connect(s.addresses[0])
        monkeypatch.setattr(snapshots, "write_image_snapshot", held)
        s.snapshot_policy.max_bytes = 1  # the next commit takes a snapshot
        writer = asyncio.ensure_future(b.call(registration(2), 3))
        while not started.is_set():
            await asyncio.sleep(0.01)
        end = s.log.end_offset
        for _ in range(3):  # answered while the snapshot is being written
            hb = await a.call(BrokerHeartbeatRequest(1, epoch, end, want_fence=False), 1)
            assert hb.error_code == 0 and not hb.is_fenced
            assert not release.is_set() and s.stats["snapshots"] == 0
        # A request that writes is handled, and waits for the snapshot before its commit.
        third = await Client.connect(s.addresses[0])
        waiting = asyncio.ensure_future(third.call(registration(3), 3))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not waiting.done() and s.log.end_offset == end
        release.set()
        assert (await writer).error_code == 0  # the registration whose commit took the snapshot
        assert (await waiting).error_code == 0
        assert s.stats["snapshots"] >= 1 and s.log.end_offset > end
        assert s.state.image.brokers.keys() >= {1, 2, 3}
        for c in (a, b, third):
            await c.close()


def _leader_cluster() -> tuple[Cluster, list[uuid.UUID]]:
    """Three brokers, two topics of RF 3 whose every partition broker 1 leads."""
    c = Cluster()
    for b in (1, 2, 3):
        c.start_broker(b, [dir_id(b, 0)])
    tids = []
    for name, n in (("x", 9), ("y", 6)):
        c.create_topic(name, n, 3)
        tid = c.state.topic_id_of(name)
        assert tid is not None
        tids.append(tid)
    return c, tids


def _shrink_everything(c: Cluster, tids: list[uuid.UUID]) -> Any:
    """Every partition's leader drops its last follower from the ISR, plus: a partition
    named twice (the second entry carries the old partition epoch), an unknown topic, a
    topic with no entries, a partition broker 1 does not lead and an unknown partition."""
    from kraft_jbod.messages.alter_partition_request import AlterPartitionRequest, BrokerState
    from kraft_jbod.messages.alter_partition_request import PartitionData as APart
    from kraft_jbod.messages.alter_partition_request import TopicData as ATopic

    def entry(p: Any) -> APart:
        isr = [b for b in p.isr if b != p.isr[-1] or b == p.leader]
        return APart(
            partition_index=p.partition_id,
            leader_epoch=p.leader_epoch,
            new_isr_with_epochs=[BrokerState(b, c.epoch(b)) for b in isr],
            partition_epoch=p.partition_epoch,
        )

    topics = []
    for tid in tids:
        parts = sorted(c.state.topics[tid].partitions.values(), key=lambda p: p.partition_id)
        mine = [p for p in parts if p.leader == 1]
        entries = [entry(p) for p in mine]
        if mine:
            entries.append(entry(mine[0]))  # repeated, old partition epoch
        topics.append(ATopic(topic_id=tid, partitions=[*entries, APart(partition_index=77)]))
    topics.insert(1, ATopic(topic_id=uuid.UUID(int=999 << 64), partitions=[APart(partition_index=0)]))
    topics.insert(2, ATopic(topic_id=tids[0], partitions=[]))
    return AlterPartitionRequest(broker_id=1, broker_epoch=c.epoch(1), topics=topics)


@pytest.mark.parametrize("limit", [1, 2, 4, 7])
def test_alter_partition_slices_answer_and_change_what_one_pass_does(limit: int) -> None:
    from kraft_jbod.controller.apis.topics import split_alter_partition

    whole, tids = _leader_cluster()
    sliced, _ = _leader_cluster()
    req = _shrink_everything(whole, tids)  # at v3: brokers with their epochs
    total = sum(len(t.partitions) for t in req.topics)
    one = whole.call(ApiKey.ALTER_PARTITION, 3, req)
    assert len(one.records) >= 2  # something changed
    codes = [p.error_code for t in one.response.topics for p in t.partitions]  # type: ignore[attr-defined]
    assert ErrorCode.INVALID_UPDATE_VERSION in codes and ErrorCode.UNKNOWN_TOPIC_ID in codes
    plan = split_alter_partition(req, limit)
    assert plan is not None
    bodies = list(plan.bodies)
    assert len(bodies) == -(-total // limit)
    responses = [sliced.call(ApiKey.ALTER_PARTITION, 3, body).response for body in bodies]
    merged = plan.merge(responses)
    assert merged == one.response and merged.encode(3) == one.response.encode(3)
    assert snap.comparable(sliced.state.image) == snap.comparable(whole.state.image)
    assert split_alter_partition(req, total) is None


async def test_heartbeats_are_answered_while_an_append_is_in_flight(tmp_path: Path) -> None:
    """Rule 6: a heartbeat that writes nothing is answered while a batch is being written
    and fsync'd; one that writes waits for the batch and is handled after it."""
    import threading

    from tests.controller.test_server import registration

    release = threading.Event()
    started = threading.Event()
    cfg = make_config(tmp_path, **{"metadata.max.idle.interval.ms": "0"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        assert s.log is not None
        steady = await Client.connect(s.addresses[0])
        epoch1 = await register_and_unfence(steady, 1)
        leaving = await Client.connect(s.addresses[0])
        epoch2 = await register_and_unfence(leaving, 2)
        real = s.log.append

        def held(*args: Any, **kwargs: Any) -> int:
            started.set()
            assert release.wait(30), "the test never released the append"
            return real(*args, **kwargs)

        s.log.append = held  # type: ignore[method-assign]
        writer = await Client.connect(s.addresses[0])
        pending = asyncio.ensure_future(writer.call(registration(3), 3))
        while not started.is_set():
            await asyncio.sleep(0.01)
        end = s.log.end_offset
        for _ in range(3):
            hb = await steady.call(BrokerHeartbeatRequest(1, epoch1, end, want_fence=False), 1)
            assert hb.error_code == 0 and not hb.is_fenced
        assert not pending.done() and s.stats["heartbeats_during_append"] == 3
        # Broker 2 asks to be fenced: that writes, so it waits for the append in flight.
        fence = asyncio.ensure_future(leaving.call(BrokerHeartbeatRequest(2, epoch2, end, want_fence=True), 1))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not fence.done() and s.log.end_offset == end
        s.log.append = real  # type: ignore[method-assign]
        release.set()
        assert (await pending).error_code == 0
        assert (await fence).is_fenced
        assert s.state.image.brokers[2].fenced and 3 in s.state.image.brokers
        for c in (steady, leaving, writer):
            await c.close()
