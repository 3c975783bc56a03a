"""The judge with full controllers: two of our controllers (``ControllerQuorum``, the whole
controller on each voter) and Kafka 4.4's own controller as the third voter of a static
quorum, two fake JBOD brokers attached.

The leader is lost again and again: killed as ``kill -9`` (ours restarted from its folder at
once, Kafka's JVM once the next leader is agreed), and now and then leadership handed to
Kafka's controller (EndQuorumEpoch naming it) so that it leads often.
Whoever leads must go on from the other's state: topics created through the leader stay,
the brokers stay registered and unfenced with the same broker epochs, and a directory
failure is handled by whichever controller leads (one under Kafka's, one under ours):
leadership moves off the failed directory in the committed image every controller shares.
At the end every voter's log is a prefix of the longest, batch for batch and byte for byte
(Kafka's segment holds our controllers' batches exactly as they wrote them, and Kafka's
controller replayed them without a fault), and Kafka's controller logged no WARN or ERROR
the mock caused.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller.raft import wire
from kraft_jbod.controller.raft.file_log import PARTITION_DIR, SEGMENT
from kraft_jbod.controller.raft.node import Timing
from kraft_jbod.controller.raft.seat import RAFT_DIR, QuorumSeat
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.realkafka import configs, logs
from kraft_jbod.realkafka.cluster import free_port
from kraft_jbod.realkafka.distribution import KafkaDistribution
from kraft_jbod.realkafka.process import KafkaProcess, run_tool
from kraft_jbod.storage import StorageLayout, format_storage
from kraft_jbod.testing.cluster import FAKE_BROKER_DEFAULTS, KafkaConnection
from kraft_jbod.testing.quorum import CLUSTER_ID, ControllerQuorum
from kraft_jbod.wire.primitives import uuid_to_base64url

METADATA_VERSION = ("4.3-IV0", 30)  # the newest level this Kafka build's storage tool knows
OURS = (3000, 3001)
KAFKA_ID = 3002
FAILOVERS = 20
# Both kinds of voter on the same timeouts, shorter than Kafka's defaults (1 s election,
# 2 s fetch) so twenty failovers fit in a few minutes, long enough for a loaded machine.
ELECTION_MS, FETCH_MS = 500, 1000
TIMING = Timing(election_timeout_ms=ELECTION_MS, fetch_timeout_ms=FETCH_MS, election_backoff_max_ms=300, retry_ms=100)

# What Kafka's controller logs in this scenario through no fault of ours.
EXPECTED = (
    logs.Benign(
        r"WARN \[(RaftManager|NodeToControllerChannelManager) id=\d+( name=\w+)?\] Connection to node \d+ "
        r"\(\S+\) could not be established",
        "start-up, and after one of our controllers is killed",
        "Kafka's voter reaches for a node whose listener is not up (itself at start, the killed controller)",
    ),
    logs.Benign(
        r"WARN \[QuorumController id=\d+\] Performing controller activation\.",
        "Kafka's controller elected",
        "Kafka logs every activation at WARN",
    ),
    logs.Benign(
        r"WARN \[QuorumController id=\d+\] Renouncing the leadership due to a metadata log event\. We were the "
        r"leader at epoch \d+, but in the new epoch \d+, the leader is \S+\.",
        "Kafka's controller resumed after a pause that cost it the leadership, or handing it on",
        "the leader moved while it was stopped (or it resigned); it drops its controller role on the new epoch",
    ),
    logs.Benign(
        r"WARN \[QuorumController id=\d+\] Directories \[\S+\] in broker \d+ marked offline, remaining directories",
        "the directory failure the test causes, handled while Kafka's controller leads",
        "Kafka logs every directory a broker reports offline at WARN",
    ),
    logs.Benign(
        r"ERROR \[ControllerRegistrationManager id=\d+ incarnation=\S+\] RegistrationResponseHandler: "
        r"channel manager timed out before sending the request\.",
        "a leader killed while Kafka's voter was registering with it",
        "its ControllerRegistration to the killed leader times out; it retries with the next one",
    ),
    logs.Benign(
        r"ERROR \[QuorumController id=\d+\] Exceptionally slow controller event "
        r"\S+ took \d+ ms\.",
        "a loaded machine",
        "Kafka's event monitor flags any controller event above 2 s; only when the JVM gets no CPU",
    ),
)


async def _until(what: str, probe: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s: {what}")
        await asyncio.sleep(0.02)


def _kafka(
    kafka_dist: KafkaDistribution, root: Path, port: int, voters: str, extra: dict[str, str] | None = None
) -> KafkaProcess:
    config = root / "kafka" / "controller.properties"
    config.parent.mkdir(parents=True)
    props = configs.kafka_controller_properties(node_id=KAFKA_ID, port=port, log_dir=root / "kafka" / "data")
    props.update(
        {
            "controller.quorum.voters": voters,
            "controller.quorum.election.timeout.ms": str(ELECTION_MS),
            "controller.quorum.fetch.timeout.ms": str(FETCH_MS),
            "controller.quorum.election.backoff.max.ms": "300",
            **(extra or {}),
        }
    )
    configs.write_properties(config, props)
    formatted = run_tool(
        kafka_dist,
        "kafka.tools.StorageTool",
        ["format", "-t", CLUSTER_ID, "-c", str(config), "--release-version", METADATA_VERSION[0]],
        root / "kafka",
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    return KafkaProcess("controller", kafka_dist, config, root / "kafka" / "controller.log", heap_mb=512)


async def _start_broker(root: Path, broker_id: int, voters: str) -> FakeBroker:
    base = root / f"broker-{broker_id}"
    port = free_port()
    props = {
        "process.roles": "broker",
        "node.id": str(broker_id),
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "kraft.jbod.serve.clients": "false",
        "log.dirs": ",".join(str(base / f"d{i}") for i in range(3)),
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


def _seat(server: ControllerServer) -> QuorumSeat:
    seat = server.quorum
    assert isinstance(seat, QuorumSeat)
    return seat


async def _create_topic(address: tuple[str, int], name: str, replication_factor: int = 2) -> int:
    conn = await KafkaConnection.open(address, client_id="admin")
    try:
        req = CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=3, replication_factor=replication_factor)],
            timeout_ms=5000,
        )
        resp = await asyncio.wait_for(conn.call(req, 7), 10)
        return int(resp.topics[0].error_code)
    finally:
        await conn.close()


def test_full_controllers_beside_kafkas_controller_through_failovers(
    kafka_dist: KafkaDistribution, tmp_path: Path
) -> None:
    kafka_port = free_port()
    elections: list[int] = []
    how: list[str] = []
    leaders: list[int] = []
    acknowledged: list[str] = []
    dir_failures: dict[str, int] = {}  # "kafka" / "ours" -> the broker whose directory failed under it
    timeline: list[str] = []

    async def run() -> KafkaProcess:
        quorum = ControllerQuorum(
            tmp_path / "quorum",
            voters=len(OURS),
            first_id=OURS[0],
            timing=TIMING,
            metadata_version=METADATA_VERSION[1],
            external={KAFKA_ID: ("127.0.0.1", kafka_port)},
        )
        async with quorum:
            kafka = await asyncio.to_thread(_kafka, kafka_dist, tmp_path, kafka_port, quorum.voters_property)
            await asyncio.to_thread(kafka.start)
            brokers: list[FakeBroker] = []
            try:
                leader, epoch = await quorum.wait_for_leader_view(timeout=120)
                brokers = [await _start_broker(tmp_path, b, quorum.voters_property) for b in (1, 2)]

                def image_of() -> Any:
                    """The committed state as the most caught-up controller of ours holds it."""
                    return max(quorum.servers.values(), key=lambda s: s.log.end_offset).state

                def all_unfenced() -> bool:
                    return all(
                        all(
                            (reg := s.state.brokers.get(b.node_id)) is not None
                            and not reg.fenced
                            and reg.epoch == b.lifecycle.epoch
                            for b in brokers
                        )
                        for s in quorum.servers.values()
                    )

                def every_controller_registered() -> bool:
                    return all({*OURS, KAFKA_ID} <= set(s.state.image.controllers) for s in quorum.servers.values())

                await _until("both brokers registered and unfenced", all_unfenced, 60)
                await _until("every controller registered", every_controller_registered, 60)
                broker_epochs = {b.node_id: b.lifecycle.epoch for b in brokers}

                async def create(name: str) -> None:
                    answers: list[str] = []
                    deadline = time.monotonic() + 90
                    while time.monotonic() < deadline:
                        view = await quorum.wait_for_leader_view(timeout=60)
                        address = ("127.0.0.1", kafka_port) if view[0] == KAFKA_ID else quorum.addresses[view[0]]
                        try:
                            code = await _create_topic(address, name)
                        except Exception as exc:  # the leader went away mid-request: not acknowledged
                            code, answers = -1, [*answers[-9:], f"{view}: {exc!r}"]
                        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                            acknowledged.append(name)
                            return
                        if code >= 0:
                            answers = [*answers[-9:], f"{view}: error {code}"]
                        await asyncio.sleep(0.2)
                    regs = {
                        i: {b: (r.fenced, r.epoch) for b, r in s.state.brokers.items()}
                        for i, s in quorum.servers.items()
                    }
                    raise AssertionError(f"{name} never acknowledged: {answers}; broker registrations {regs}")

                async def fail_a_directory(under: str) -> None:
                    """Fail a directory holding a partition leader; the leader moves off it."""
                    broker = brokers[len(dir_failures)]

                    def placed_leader() -> Any:
                        state = image_of()
                        dirs = state.brokers[broker.node_id].registered_dirs
                        for t in state.image.topics.values():
                            for p in t.partitions.values():
                                if p.leader == broker.node_id and p.dirs[p.replicas.index(broker.node_id)] in dirs:
                                    return p.dirs[p.replicas.index(broker.node_id)]
                        return None

                    failed = await _until(
                        f"broker {broker.node_id} leads a partition placed in a directory", placed_leader
                    )
                    broker.fail_directory(uuid_to_base64url(failed))

                    def moved() -> bool:
                        for s in quorum.servers.values():
                            img = s.state.image
                            for t in img.topics.values():
                                for p in t.partitions.values():
                                    if broker.node_id in p.replicas and p.leader == broker.node_id:
                                        if p.dirs[p.replicas.index(broker.node_id)] == failed:
                                            return False
                            reg = s.state.brokers.get(broker.node_id)
                            if reg is None or failed in reg.online_set:
                                return False
                        return True

                    await _until(f"leaders off broker {broker.node_id}'s failed directory ({under} leads)", moved)
                    dir_failures[under] = broker.node_id

                since_kafka = 0
                for r in range(FAILOVERS):
                    await create(f"topic-{r}")
                    leader, epoch = await quorum.wait_for_leader_view(timeout=60)
                    leaders.append(leader)
                    under = "kafka" if leader == KAFKA_ID else "ours"
                    if under not in dir_failures and len(dir_failures) < len(brokers):
                        await fail_a_directory(under)
                    since_kafka = 0 if leader == KAFKA_ID else since_kafka + 1
                    timeline.append(f"round {r}: leader {leader} epoch {epoch}")
                    lost = time.monotonic()
                    if leader == KAFKA_ID:
                        before = image_of().image.controllers[KAFKA_ID].incarnation_id
                        quorum.mark_lost()
                        await asyncio.to_thread(kafka.kill)
                        how.append("kill")
                        leader, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=60)
                        elections.append(int((time.monotonic() - lost) * 1000))
                        await asyncio.to_thread(kafka.start)
                        # Back as a follower before the next loss (a kill with it down would leave
                        # one voter of three).
                        await asyncio.to_thread(kafka.wait_for_line, r"Completed transition to FollowerState", 120)
                        # ... and registered anew (a kill during its registration is a scenario of its own).
                        await _until(
                            "Kafka's controller registered again after its restart",
                            lambda before=before: image_of().image.controllers[KAFKA_ID].incarnation_id != before,
                            120,
                        )
                    elif since_kafka >= 3:
                        voter = _seat(quorum.servers[leader]).voter
                        assert voter is not None
                        voter.resign(KAFKA_ID)  # hand it to Kafka's controller
                        quorum.mark_lost()
                        how.append("move")
                        leader, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=60)
                        elections.append(int((time.monotonic() - lost) * 1000))
                    else:
                        old = leader
                        await quorum.kill(old)
                        how.append("kill")
                        leader, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=60)
                        elections.append(int((time.monotonic() - lost) * 1000))
                        await quorum.restart(old)
                    timeline.append(f"  -> {how[-1]}: leader {leader} epoch {epoch} after {elections[-1]} ms")
                    # The new leader holds everything acknowledged, and manages the brokers.
                    await _until(
                        f"round {r}: every acknowledged topic on every controller",
                        lambda: all(
                            all(t in s.state.image.topic_names for t in acknowledged) for s in quorum.servers.values()
                        ),
                    )
                await create("topic-last")
                await _until("brokers unfenced on the last leader", all_unfenced, 60)
                assert {b.node_id: b.lifecycle.epoch for b in brokers} == broker_epochs, "a broker was fenced"
                assert set(dir_failures) == {"kafka", "ours"}, f"directory failures handled: {dir_failures}"
                await asyncio.sleep(2)  # let every voter fetch up to the last high watermark
            finally:
                for b in brokers:
                    await b.close()
                # In a thread: our voters must keep answering (EndQuorumEpoch) while Kafka's stops.
                await asyncio.to_thread(kafka.stop, 60)
        return kafka

    try:
        kafka = asyncio.run(asyncio.wait_for(run(), 900))
    finally:
        print("\n".join(timeline))
    text = kafka.log_text(this_run=False)  # every run of Kafka's controller
    assert "Encountered fatal fault" not in text
    # Every voter's log is a prefix of the longest, batch for batch and byte for byte.
    segments = {i: tmp_path / "quorum" / f"controller-{i}" / RAFT_DIR / PARTITION_DIR / SEGMENT for i in OURS}
    segments[KAFKA_ID] = tmp_path / "kafka" / "data" / PARTITION_DIR / SEGMENT
    all_logs = {i: wire.decode_entries(p.read_bytes()) for i, p in segments.items()}
    longest = max(all_logs.values(), key=len)
    for i, entries in all_logs.items():
        assert entries == longest[: len(entries)], f"voter {i}'s log is not a prefix of the longest"
    kafka_led = leaders.count(KAFKA_ID)
    print(
        f"mixed full-controller failovers={len(elections)} (kill={how.count('kill')} move={how.count('move')}) "
        f"rounds_led_by_kafka={kafka_led} election_ms_median={statistics.median(elections):.0f} "
        f"election_ms_worst={max(elections)} topics_acknowledged={len(acknowledged)} lost=0 batches={len(longest)}"
    )
    assert kafka_led >= 2, f"Kafka's controller led only {kafka_led} rounds"
    problems = logs.problems(text, EXPECTED)
    assert problems == [], "\n".join(p[:400] for p in problems)


REAL_BROKER_ID = 1
# Kafka's broker with Kafka's controller, no mock in between: a broker's idle controller
# channel (directory assignments) keeps the controller it last used until a request fails;
# when Kafka's controller lost the leadership and came back at the same address, the next
# request there gets NOT_CONTROLLER and the channel moves on. An all-Kafka cluster logs the same.
STALE_BROKER_CHANNEL = (
    logs.Benign(
        r"ERROR \[ControllerApis nodeId=\d+\] Unexpected error handling request RequestHeader\(apiKey="
        r"(ASSIGN_REPLICAS_TO_DIRS|BROKER_HEARTBEAT), apiVersion=\d+, clientId=\d+,",
        "a real broker's idle controller channel still naming Kafka's controller from an earlier epoch",
        "the channel learns the new leader only from a failed request (Kafka's NodeToControllerRequestThread)",
        detail="NotControllerException: The active controller appears to be node",
    ),
)
REAL_FAILOVERS = 6
SESSION_MS = 4000  # broker.session.timeout.ms on every controller: a broker not heard from is fenced


def test_real_broker_managed_by_kafkas_controller_and_ours(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    """A real Kafka 4.4 broker beside the same mixed quorum: it registers once, and through
    leader losses its session goes on with whichever controller leads (same broker epoch,
    never fenced over more than a session timeout after each failover), and the replicas of
    topics created through either kind of leader land in its directories (its
    AssignReplicasToDirs reached the leader of the moment)."""
    kafka_port = free_port()
    root = tmp_path / "broker"
    dirs = [root / "d1", root / "d2"]
    meta = root / "meta"
    timeline: list[str] = []
    leaders: list[int] = []

    def registered(quorum: ControllerQuorum, epoch: int | None = None) -> bool:
        regs = [s.state.brokers.get(REAL_BROKER_ID) for s in quorum.servers.values()]
        return all(r is not None and not r.fenced and (epoch is None or r.epoch == epoch) for r in regs)

    def placed(quorum: ControllerQuorum, names: list[str]) -> bool:
        for server in quorum.servers.values():
            state = server.state
            reg = state.brokers.get(REAL_BROKER_ID)
            for name in names:
                tid = state.image.topic_names.get(name)
                if reg is None or tid is None:
                    return False
                for p in state.image.topics[tid].partitions.values():
                    if p.dirs[p.replicas.index(REAL_BROKER_ID)] not in reg.registered_dirs:
                        return False
        return True

    async def run() -> tuple[KafkaProcess, KafkaProcess]:
        quorum = ControllerQuorum(
            tmp_path / "quorum",
            voters=len(OURS),
            first_id=OURS[0],
            timing=TIMING,
            metadata_version=METADATA_VERSION[1],
            external={KAFKA_ID: ("127.0.0.1", kafka_port)},
            props={"broker.session.timeout.ms": str(SESSION_MS)},
        )
        async with quorum:
            kafka = await asyncio.to_thread(
                _kafka,
                kafka_dist,
                tmp_path,
                kafka_port,
                quorum.voters_property,
                {"broker.session.timeout.ms": str(SESSION_MS)},
            )
            await asyncio.to_thread(kafka.start)
            props = configs.broker_properties(
                node_id=REAL_BROKER_ID,
                controller_voters=quorum.voters_property,
                log_dirs=dirs,
                metadata_dir=meta,
                broker_count=1,
            )
            config = root / "server.properties"
            configs.write_properties(config, props)
            format_storage(StorageLayout(REAL_BROKER_ID, tuple(dirs), meta), CLUSTER_ID)
            broker = KafkaProcess("broker-1", kafka_dist, config, root / "server.log", heap_mb=384)
            try:
                await quorum.wait_for_leader_view(timeout=120)
                await asyncio.to_thread(broker.start)
                await _until("the real broker registered and unfenced", lambda: registered(quorum), 180)
                epoch = next(iter(quorum.servers.values())).state.brokers[REAL_BROKER_ID].epoch
                created: list[str] = []
                since_kafka = 0
                for r in range(REAL_FAILOVERS):
                    leader, raft_epoch = await quorum.wait_for_leader_view(timeout=60)
                    leaders.append(leader)
                    name = f"real-{r}"
                    address = ("127.0.0.1", kafka_port) if leader == KAFKA_ID else quorum.addresses[leader]
                    code = await _create_topic(address, name, replication_factor=1)
                    assert code == ErrorCode.NONE, f"round {r}: creating {name} through {leader}: error {code}"
                    created.append(name)
                    await _until(f"round {r}: the replicas of {created} in the broker's directories",
                                 lambda: placed(quorum, created), 60)  # fmt: skip
                    since_kafka = 0 if leader == KAFKA_ID else since_kafka + 1
                    timeline.append(f"round {r}: leader {leader} epoch {raft_epoch}")
                    if leader == KAFKA_ID:
                        before = quorum.servers[OURS[0]].state.image.controllers[KAFKA_ID].incarnation_id
                        await asyncio.to_thread(kafka.kill)
                        leader, raft_epoch = await quorum.wait_for_leader_view(above_epoch=raft_epoch, timeout=60)
                        await asyncio.to_thread(kafka.start)
                        await _until(
                            "Kafka's controller registered again after its restart",
                            lambda before=before: all(
                                s.state.image.controllers[KAFKA_ID].incarnation_id != before
                                for s in quorum.servers.values()
                            ),
                            180,
                        )
                    elif since_kafka >= 2:
                        voter = _seat(quorum.servers[leader]).voter
                        assert voter is not None
                        voter.resign(KAFKA_ID)
                        leader, raft_epoch = await quorum.wait_for_leader_view(above_epoch=raft_epoch, timeout=60)
                    else:
                        old = leader
                        await quorum.kill(old)
                        leader, raft_epoch = await quorum.wait_for_leader_view(above_epoch=raft_epoch, timeout=60)
                        await quorum.restart(old)
                    timeline.append(f"  -> leader {leader} epoch {raft_epoch}")
                    # Past a session timeout under the new leader: still unfenced, same epoch.
                    await asyncio.sleep(1.5 * SESSION_MS / 1000)
                    await _until(f"round {r}: the broker's session kept", lambda: registered(quorum, epoch), 30)
            finally:
                await asyncio.to_thread(broker.stop, 60)
                await asyncio.to_thread(kafka.stop, 60)
        return kafka, broker

    try:
        kafka, broker = asyncio.run(asyncio.wait_for(run(), 900))
    finally:
        print("\n".join(timeline))
    assert KAFKA_ID in leaders and set(leaders) & set(OURS), f"leaders: {leaders}"
    broker_log = broker.log_text(this_run=False)
    assert "Encountered fatal fault" not in broker_log
    text = kafka.log_text(this_run=False)
    assert "Encountered fatal fault" not in text
    problems = logs.problems(text, EXPECTED + STALE_BROKER_CHANNEL)
    assert problems == [], "\n".join(p[:400] for p in problems)
