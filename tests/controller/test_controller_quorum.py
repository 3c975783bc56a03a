"""Three full controllers on one raft log, two fake JBOD brokers: the active controller is
killed, the next one takes over with the whole state, the brokers follow it without losing
their sessions, and a directory failure reported afterwards is handled by the new leader."""

from __future__ import annotations

import asyncio
import socket
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller import features as fv
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.controller_registration_request import ControllerRegistrationRequest, Feature, Listener
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.unregister_controller_request import UnregisterControllerRequest
from kraft_jbod.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kraft_jbod.storage import format_storage
from kraft_jbod.testing.cluster import FAKE_BROKER_DEFAULTS, KafkaConnection
from kraft_jbod.testing.quorum import CLUSTER_ID, ControllerQuorum
from kraft_jbod.wire.primitives import uuid_to_base64url

pytestmark = pytest.mark.asyncio


async def _until(what: str, probe: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s: {what}")
        await asyncio.sleep(0.02)


async def _start_broker(root: Path, broker_id: int, voters: str) -> FakeBroker:
    base = root / f"broker-{broker_id}"
    props = {
        "process.roles": "broker",
        "node.id": str(broker_id),
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:{19000 + broker_id}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{19000 + broker_id}",
        "kraft.jbod.serve.clients": "false",
        "log.dirs": ",".join(str(base / f"d{i}") for i in range(2)),
        "metadata.log.dir": str(base / "meta"),
        "broker.session.timeout.ms": "9000",
        "kraft.jbod.control.listener": "127.0.0.1:0",
        **FAKE_BROKER_DEFAULTS,
    }
    config = BrokerConfig.from_properties(props)
    format_storage(config.layout, CLUSTER_ID)
    broker = FakeBroker(config)
    await broker.start()
    return broker


async def _create_topic(server: ControllerServer, name: str, partitions: int) -> int:
    conn = await KafkaConnection.open(server.addresses[0], client_id="admin")
    try:
        req = CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=2)], timeout_ms=5000
        )
        resp = await conn.call(req, 7)
        return int(resp.topics[0].error_code)
    finally:
        await conn.close()


def _unfenced(server: ControllerServer, broker: FakeBroker) -> bool:
    reg = server.state.brokers.get(broker.node_id)
    return reg is not None and not reg.fenced and reg.epoch == broker.lifecycle.epoch


def _placed(server: ControllerServer, topic: str) -> bool:
    image = server.state.image
    topic_id = image.topic_names.get(topic)
    if topic_id is None:
        return False
    brokers = server.state.brokers
    # Every replica in one of its broker's registered directories (no reserved id left).
    return all(
        all(d in brokers[r].registered_dirs for r, d in zip(p.replicas, p.dirs, strict=True))
        for p in image.topics[topic_id].partitions.values()
    )


def _committed(directory: Path) -> list[bytes]:
    with MetadataLog.open(directory / "__cluster_metadata-0", fsync=False, read_only=True) as log:
        return [log.read(info.base_offset, 1)[: info.size] for info in log.batches]


async def test_active_controller_killed_state_and_brokers_follow(tmp_path: Path) -> None:
    async with ControllerQuorum(tmp_path / "quorum", voters=3) as quorum:
        first = await quorum.wait_for_active(timeout=30)
        await _until("bootstrap committed", lambda: first.state.image.features)
        brokers = [await _start_broker(tmp_path, i, quorum.voters_property) for i in (1, 2)]
        try:
            await _until("both brokers unfenced", lambda: all(_unfenced(first, b) for b in brokers))
            assert await _create_topic(first, "t", 4) == ErrorCode.NONE
            await _until("every replica in a directory", lambda: _placed(first, "t"))
            before = first.state.image
            topic_id = before.topic_names["t"]
            leaders_before = {p.partition_id: p.leader for p in before.topics[topic_id].partitions.values()}
            committed_end = first.log.end_offset

            old, epoch = first.config.node_id, quorum.epoch_of(first)
            await quorum.kill(old)
            new = await quorum.wait_for_active(above_epoch=epoch, timeout=30)
            assert new.config.node_id != old
            # The new active controller holds everything acknowledged before the failover.
            assert new.log.end_offset >= committed_end
            image = new.state.image
            assert {p.partition_id: p.leader for p in image.topics[topic_id].partitions.values()} == leaders_before
            assert _placed(new, "t")
            # The brokers follow it and keep their sessions (same broker epoch, not fenced),
            # well past a session timeout counted from the failover.
            host, port = new.addresses[0]
            for b in brokers:
                await _until(f"broker {b.node_id} fetching from the new leader", lambda b=b: b._hb.addr == (host, port))
            await asyncio.sleep(1.0)
            assert all(_unfenced(new, b) for b in brokers)
            epochs = {b.node_id: b.lifecycle.epoch for b in brokers}

            # A directory failure after the failover: the new leader moves leadership off it.
            victim = brokers[0]
            led = [p for p in image.topics[topic_id].partitions.values() if p.leader == victim.node_id]
            assert led, "broker 1 leads no partition of t"
            victim_dir = led[0].dirs[led[0].replicas.index(victim.node_id)]
            victim.fail_directory(uuid_to_base64url(victim_dir))

            def moved() -> bool:
                part = new.state.image.topics[topic_id].partitions[led[0].partition_id]
                return part.leader != victim.node_id

            await _until("leadership moved off the failed directory", moved)
            reg = new.state.brokers[victim.node_id]
            assert victim_dir not in reg.online_set
            assert {b.node_id: b.lifecycle.epoch for b in brokers} == epochs

            # The killed controller comes back as a standby, catches up, and answers NOT_CONTROLLER.
            back = await quorum.restart(old)
            await _until("the restarted controller caught up", lambda: back.log.end_offset >= new.log.end_offset)
            assert back.quorum is not None and not back.quorum.active
            assert back.state.image.topics[topic_id].partitions[led[0].partition_id].leader != victim.node_id
            assert await _create_topic(back, "u", 1) == ErrorCode.NOT_CONTROLLER
            ends = {i: s.log.end_offset for i, s in quorum.servers.items()}
        finally:
            for b in brokers:
                await b.close()
    # Every controller's committed log is a prefix of the longest, byte for byte.
    logs = {i: _committed(tmp_path / "quorum" / f"controller-{i}") for i in quorum.ids}
    longest = max(logs.values(), key=len)
    for i, batches in logs.items():
        assert batches == longest[: len(batches)], f"controller {i} disagrees"
    assert len(longest) > 0 and max(ends.values()) > committed_end


FAILOVERS = 20


async def _create_on_active(quorum: ControllerQuorum, name: str) -> bool:
    """Create ``name`` through whichever controller is active; True once acknowledged."""
    for _ in range(20):
        server = await quorum.wait_for_active(timeout=30)
        try:
            code = await _create_topic(server, name, 1)
        except Exception:
            code = -1  # the controller went away mid-request: not acknowledged, try again
        if code == ErrorCode.NONE:
            return True
        if code == ErrorCode.TOPIC_ALREADY_EXISTS:
            return True  # an earlier attempt committed it without the answer reaching us
        await asyncio.sleep(0.1)
    return False


async def test_repeated_failovers_lose_nothing(tmp_path: Path) -> None:
    """The active controller is killed again and again with brokers attached: after each
    failover one controller is active, it holds every acknowledged topic, and every
    controller's committed log is a prefix of the longest."""
    async with ControllerQuorum(tmp_path / "quorum", voters=3) as quorum:
        first = await quorum.wait_for_active(timeout=30)
        await _until("bootstrap committed", lambda: first.state.image.features)
        brokers = [await _start_broker(tmp_path, i, quorum.voters_property) for i in (1, 2)]
        acknowledged: list[str] = []
        try:
            await _until("both brokers unfenced", lambda: all(_unfenced(first, b) for b in brokers))
            for r in range(FAILOVERS):
                name = f"topic-{r}"
                assert await _create_on_active(quorum, name), f"{name} never acknowledged"
                acknowledged.append(name)
                active = await quorum.wait_for_active(timeout=30)
                old, epoch = active.config.node_id, quorum.epoch_of(active)
                await quorum.kill(old)
                new = await quorum.wait_for_active(above_epoch=epoch, timeout=30)
                live = [s for s in quorum.servers.values() if s.quorum is not None and s.quorum.active]
                assert live == [new], f"round {r}: {len(live)} active controllers"
                missing = [t for t in acknowledged if t not in new.state.image.topic_names]
                assert not missing, f"round {r}: acknowledged topics lost: {missing}"
                await quorum.restart(old)
                logs = {i: _committed(tmp_path / "quorum" / f"controller-{i}") for i in quorum.ids}
                longest = max(logs.values(), key=len)
                for i, batches in logs.items():
                    assert batches == longest[: len(batches)], f"round {r}: controller {i} disagrees"
            final = await quorum.wait_for_active(timeout=30)
            await _until("brokers unfenced on the last leader", lambda: all(_unfenced(final, b) for b in brokers))
        finally:
            for b in brokers:
                await b.close()
    assert len(quorum.elections) == FAILOVERS
    print(
        f"failovers={len(quorum.elections)} election_ms_median={statistics.median(quorum.elections)} "
        f"election_ms_worst={max(quorum.elections)} topics_acknowledged={len(acknowledged)} lost=0"
    )


async def _call(server: ControllerServer, body: Any, version: int) -> Any:
    conn = await KafkaConnection.open(server.addresses[0], client_id="admin")
    try:
        return await conn.call(body, version)
    finally:
        await conn.close()


def _stale_registration(controller_id: int, features: dict[str, tuple[int, int]]) -> ControllerRegistrationRequest:
    """What a controller that has since left the quorum registered, years ago."""
    return ControllerRegistrationRequest(
        controller_id=controller_id,
        incarnation_id=uuid.uuid4(),
        listeners=[Listener(name="CONTROLLER", host="old-controller.example", port=9093)],
        features=[
            Feature(name=n, min_supported_version=lo, max_supported_version=hi) for n, (lo, hi) in features.items()
        ],
    )


def _update(name: str, level: int, upgrade_type: int = 1) -> UpdateFeaturesRequest:
    return UpdateFeaturesRequest(
        feature_updates=[FeatureUpdateKey(feature=name, max_version_level=level, upgrade_type=upgrade_type)]
    )


async def test_controllers_register_and_a_stale_registration_is_repaired(tmp_path: Path) -> None:
    """Every controller registers with the active one (RegisterControllerRecord); a
    registration left by a controller that is gone blocks a feature upgrade until
    UnregisterController (4.4-IV2, KIP-1312) removes it."""
    async with ControllerQuorum(tmp_path / "quorum", voters=3, metadata_version=fv.MV_4_4_IV2) as quorum:
        active = await quorum.wait_for_active(timeout=30)

        def registered() -> bool:
            regs = active.state.image.controllers
            return all(
                i in regs and regs[i].incarnation_id == s.quorum.incarnation_id
                for i, s in quorum.servers.items()
                if s.quorum is not None
            )

        await _until("every controller registered", registered)
        # The registrations are committed: every standby holds them too.
        await _until(
            "the standbys hold the registrations",
            lambda: all(set(s.state.image.controllers) >= set(quorum.ids) for s in quorum.servers.values()),
        )
        # Controller 9 left the quorum long ago; its registration stays.
        old = _stale_registration(9, {"metadata.version": (1, fv.MV_4_4_IV2), "share.version": (0, 1)})
        assert (await _call(active, old, 0)).error_code == ErrorCode.NONE
        assert (await _call(active, _update("share.version", 1, 2), 1)).error_code == ErrorCode.NONE
        blocked = await _call(active, _update("share.version", 2), 1)
        assert blocked.error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert "Controller 9 only supports versions 0-1" in blocked.error_message

        unknown = await _call(active, UnregisterControllerRequest(controller_id=42), 0)
        assert unknown.error_code == ErrorCode.CONTROLLER_ID_NOT_REGISTERED
        itself = await _call(active, UnregisterControllerRequest(controller_id=active.config.node_id), 0)
        assert itself.error_code == ErrorCode.INVALID_REQUEST
        repaired = await _call(active, UnregisterControllerRequest(controller_id=9), 0)
        assert repaired.error_code == ErrorCode.NONE
        assert 9 not in active.state.image.controllers
        done = await _call(active, _update("share.version", 2), 1)
        assert done.error_code == ErrorCode.NONE
        assert active.state.image.features["share.version"] == 2


async def test_before_4_4_iv2_a_stale_registration_blocks_the_upgrade_for_good(tmp_path: Path) -> None:
    """Below 4.4-IV2 (KAFKA-20865's clusters) the same stale registration blocks a
    metadata.version upgrade and UnregisterController is not there to remove it."""
    async with ControllerQuorum(tmp_path / "quorum", voters=3, metadata_version=fv.MV_4_2_IV1) as quorum:
        active = await quorum.wait_for_active(timeout=30)
        await _until("controllers registered", lambda: len(active.state.image.controllers) == 3)
        old = _stale_registration(9, {"metadata.version": (1, fv.MV_4_2_IV1)})
        assert (await _call(active, old, 0)).error_code == ErrorCode.NONE
        blocked = await _call(active, _update("metadata.version", fv.MV_4_3_IV0), 1)
        assert blocked.error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert f"Controller 9 only supports versions 1-{fv.MV_4_2_IV1}" in blocked.error_message
        refused = await _call(active, UnregisterControllerRequest(controller_id=9), 0)
        assert refused.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert active.state.image.metadata_version == fv.MV_4_2_IV1


async def test_a_voter_that_has_not_registered_blocks_an_upgrade(tmp_path: Path) -> None:
    """Kafka's check: every voter of the quorum must have registered before a feature
    changes. The third voter here never starts (an address nothing listens on), so the
    upgrade is refused naming it; once a registration for it is committed, it goes through."""
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        silent = placeholder.getsockname()
    async with ControllerQuorum(
        tmp_path / "quorum", voters=2, metadata_version=fv.MV_4_2_IV1, external={3999: silent}
    ) as quorum:
        active = await quorum.wait_for_active(timeout=30)
        await _until("both running controllers registered", lambda: set(active.state.image.controllers) == {3000, 3001})
        blocked = await _call(active, _update("metadata.version", fv.MV_4_3_IV0), 1)
        assert blocked.error_code == ErrorCode.INVALID_UPDATE_VERSION
        assert blocked.error_message.endswith(
            f"Invalid update version {fv.MV_4_3_IV0} for feature metadata.version. "
            "controller 3999 has not registered, and may not support this feature"
        )
        assert active.state.image.metadata_version == fv.MV_4_2_IV1
        late = _stale_registration(3999, {"metadata.version": (1, fv.MV_4_3_IV0)})
        assert (await _call(active, late, 0)).error_code == ErrorCode.NONE
        done = await _call(active, _update("metadata.version", fv.MV_4_3_IV0), 1)
        assert done.error_code == ErrorCode.NONE
        assert active.state.image.metadata_version == fv.MV_4_3_IV0


async def test_describe_quorum_from_a_standby_is_not_leader_or_follower(tmp_path: Path) -> None:
    """DescribeQuorum is a raft API in Kafka: a voter that does not lead answers
    NOT_LEADER_OR_FOLLOWER in the partition (not NOT_CONTROLLER); the leader describes it."""
    from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData

    def request(topic: str = "__cluster_metadata") -> DescribeQuorumRequest:
        return DescribeQuorumRequest(
            topics=[TopicData(topic_name=topic, partitions=[PartitionData(partition_index=0)])]
        )

    async with ControllerQuorum(tmp_path / "quorum", voters=3) as quorum:
        # On a starved machine leadership may move between the calls: the answers count only
        # if the same controller was active in the same epoch before and after them.
        for _ in range(5):
            active = await quorum.wait_for_active(timeout=30)
            epoch = quorum.epoch_of(active)
            standby = next(s for i, s in quorum.servers.items() if i != active.config.node_id)
            answers = []
            for version in (0, 2):
                resp = await _call(standby, request(), version)
                other = (await _call(standby, request("t"), version)).topics[0].partitions[0]
                answers.append((resp, other))
            led = (await _call(active, request(), 2)).topics[0].partitions[0]
            if quorum.active() is active and quorum.epoch_of(active) == epoch:
                break
        else:
            raise AssertionError("leadership moved during every attempt")
        for resp, other in answers:
            part = resp.topics[0].partitions[0]
            assert (resp.error_code, part.error_code) == (0, ErrorCode.NOT_LEADER_OR_FOLLOWER)
            assert not part.current_voters  # nothing else, as Kafka (its leader id stays the default 0)
            assert other.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert (led.error_code, led.leader_id) == (0, active.config.node_id)


async def test_describe_quorum_on_the_active_controller_describes_every_voter(tmp_path: Path) -> None:
    """As Kafka's leader: every voter with the log end offset it fetched from, its last fetch
    and last caught-up times (wall clock), at every version; at v2 every voter's listener. A
    voter that stops fetching keeps its old times while the others' move on."""
    from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData

    request = DescribeQuorumRequest(
        topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]
    )
    async with ControllerQuorum(tmp_path / "quorum", voters=3) as quorum:
        active = await quorum.wait_for_active(timeout=30)
        me = active.config.node_id
        others = [i for i in quorum.ids if i != me]
        seat = active.quorum
        assert seat is not None
        await _until("every voter fetched", lambda: all(p.last_fetch_ms > 0 for p in seat.voter.node.progress.values()))  # type: ignore[union-attr]
        for version in (0, 1, 2):
            before = int(time.time() * 1000)
            resp = await _call(active, request, version)
            part = resp.topics[0].partitions[0]
            assert (part.error_code, part.leader_id, part.leader_epoch) == (0, me, quorum.epoch_of(active))
            assert part.high_watermark > 0
            voters = {v.replica_id: v for v in part.current_voters}
            assert list(voters) == [me, *others]
            assert voters[me].log_end_offset >= part.high_watermark
            for i in others:
                assert 0 < voters[i].log_end_offset <= voters[me].log_end_offset
            if version == 0:
                continue  # no timestamps before v1
            assert voters[me].last_fetch_timestamp >= before
            for i in others:
                assert before - 10_000 < voters[i].last_fetch_timestamp <= int(time.time() * 1000)
                assert before - 10_000 < voters[i].last_caught_up_timestamp <= voters[i].last_fetch_timestamp
            if version >= 2:
                ports = {n.node_id: n.listeners[0].port for n in resp.nodes}
                assert ports == {i: quorum.addresses[i][1] for i in quorum.ids}
        gone = others[0]
        await quorum.kill(gone, record=False)
        stopped = (await _call(active, request, 1)).topics[0].partitions[0]
        await asyncio.sleep(0.5)
        later = {v.replica_id: v for v in (await _call(active, request, 1)).topics[0].partitions[0].current_voters}
        then = {v.replica_id: v for v in stopped.current_voters}
        assert later[gone].last_fetch_timestamp == then[gone].last_fetch_timestamp
        assert later[others[1]].last_fetch_timestamp > then[others[1]].last_fetch_timestamp
