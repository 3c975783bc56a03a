"""The judge for full controllers at kraft.version 1: two of our controllers
(``ControllerQuorum(dynamic=True)``, the whole controller on each voter) and Kafka 4.4's own
controller, formatted with ``--initial-controllers`` naming all three (directory ids
included) and ``controller.quorum.bootstrap.servers`` instead of static voters, two fake JBOD
brokers attached.

A fourth controller of ours, formatted with no voter set, joins as an observer and is added
by whoever leads (AddRaftVoter over the wire); the leader is killed once (ours restarted from
its folder, Kafka's JVM restarted once the next leader is agreed); the fourth is removed
again by Kafka's controller (leadership handed to it first). Every acknowledged topic is on
every controller of ours, the brokers stay unfenced with the same broker epochs, every
voter's log is a prefix of the longest, byte for byte, and Kafka's controller hit no fatal
fault and logged nothing the static judge does not allow.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from pathlib import Path

from kraft_jbod.controller.raft import wire
from kraft_jbod.controller.raft.file_log import PARTITION_DIR, SEGMENT
from kraft_jbod.controller.raft.seat import RAFT_DIR, QuorumSeat
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.realkafka import configs, logs
from kraft_jbod.realkafka.cluster import free_port
from kraft_jbod.realkafka.distribution import KafkaDistribution
from kraft_jbod.realkafka.process import KafkaProcess, run_tool
from kraft_jbod.testing.quorum import CLUSTER_ID, ControllerQuorum
from kraft_jbod.wire.primitives import uuid_to_base64url
from tests.realbrokers.test_mixed_controller_quorum import (
    ELECTION_MS,
    EXPECTED,
    FETCH_MS,
    METADATA_VERSION,
    TIMING,
    _create_topic,
    _start_broker,
    _until,
)
from tests.realbrokers.test_mixed_dynamic_quorum import BOOTSTRAP_UNREACHABLE, _newest_leaders_log

OURS = (3000, 3001)
KAFKA_ID = 3002
JOINER = 3100


def _kafka(kafka_dist: KafkaDistribution, root: Path, port: int, bootstrap: str, controllers: str) -> KafkaProcess:
    config = root / "kafka" / "controller.properties"
    config.parent.mkdir(parents=True)
    props = configs.kafka_controller_properties(node_id=KAFKA_ID, port=port, log_dir=root / "kafka" / "data")
    del props["controller.quorum.voters"]
    props.update(
        {
            "controller.quorum.bootstrap.servers": bootstrap,
            "controller.quorum.election.timeout.ms": str(ELECTION_MS),
            "controller.quorum.fetch.timeout.ms": str(FETCH_MS),
            "controller.quorum.election.backoff.max.ms": "300",
        }
    )
    configs.write_properties(config, props)
    formatted = run_tool(
        kafka_dist,
        "kafka.tools.StorageTool",
        [
            *("format", "-t", CLUSTER_ID, "-c", str(config), "--release-version", METADATA_VERSION[0]),
            *("--initial-controllers", controllers),
        ],
        root / "kafka",
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    return KafkaProcess("controller", kafka_dist, config, root / "kafka" / "controller.log", heap_mb=512)


def test_full_controllers_at_kraft_version_1_beside_kafkas(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    kafka_port = free_port()
    elections: list[int] = []
    acknowledged: list[str] = []
    timeline: list[str] = []
    changes: list[tuple[str, int, float]] = []

    async def run() -> KafkaProcess:
        kafka_dir = uuid.uuid4()
        quorum = ControllerQuorum(
            tmp_path / "quorum",
            voters=len(OURS),
            first_id=OURS[0],
            timing=TIMING,
            metadata_version=METADATA_VERSION[1],
            external={KAFKA_ID: ("127.0.0.1", kafka_port)},
            dynamic=True,
            external_directory_ids={KAFKA_ID: kafka_dir},
        )
        # Our ports are fixed before the start: Kafka's format names them.
        quorum.addresses.update({i: ("127.0.0.1", free_port()) for i in OURS})
        every = quorum.all_voters
        controllers = ",".join(
            f"{i}@{h}:{p}:{uuid_to_base64url(quorum.directory_ids[i])}" for i, (h, p) in sorted(every.items())
        )
        bootstrap = ",".join(f"{h}:{p}" for _, (h, p) in sorted(every.items()))
        kafka = await asyncio.to_thread(_kafka, kafka_dist, tmp_path, kafka_port, bootstrap, controllers)
        async with quorum:
            await asyncio.to_thread(kafka.start)
            brokers = []
            try:
                leader, epoch = await quorum.wait_for_leader_view(timeout=120)
                timeline.append(f"first leader {leader} epoch {epoch}")
                brokers = [await _start_broker(tmp_path, b, quorum.voters_property) for b in (1, 2)]

                def all_unfenced() -> bool:
                    return all(
                        (reg := s.state.brokers.get(b.node_id)) is not None
                        and not reg.fenced
                        and reg.epoch == b.lifecycle.epoch
                        for s in quorum.servers.values()
                        for b in brokers
                    )

                await _until("both brokers registered and unfenced", all_unfenced, 90)
                await _until(
                    "Kafka's controller registered",
                    lambda: all(KAFKA_ID in s.state.image.controllers for s in quorum.servers.values()),
                    90,
                )
                epochs = {b.node_id: b.lifecycle.epoch for b in brokers}

                async def create(name: str) -> None:
                    deadline = time.monotonic() + 90
                    while time.monotonic() < deadline:
                        view = await quorum.wait_for_leader_view(timeout=60)
                        try:
                            code = await _create_topic(quorum.all_voters[view[0]], name)
                        except Exception:
                            code = -1  # the leader went away mid-request: not acknowledged
                        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                            acknowledged.append(name)
                            return
                        await asyncio.sleep(0.2)
                    raise AssertionError(f"{name} never acknowledged")

                async def everywhere(step: str) -> None:
                    await _until(
                        f"{step}: every acknowledged topic on every controller of ours",
                        lambda: all(
                            all(t in s.state.image.topic_names for t in acknowledged) for s in quorum.servers.values()
                        ),
                        60,
                    )

                await create("t-start")
                await everywhere("start")

                # Grow: our fourth controller joins as an observer; whoever leads adds it.
                leader, _ = await quorum.wait_for_leader_view(timeout=60)
                timeline.append(f"adding {JOINER} through leader {leader}")
                await quorum.add_controller(JOINER, timeout=120)
                await _until("every controller of ours sees the fourth vote", lambda: _all_see(quorum, True), 60)
                await create("t-added")
                await everywhere("after the add")

                # One failover: the leader is killed.
                leader, epoch = await quorum.wait_for_leader_view(timeout=60)
                lost = time.monotonic()
                if leader == KAFKA_ID:
                    quorum.mark_lost()
                    await asyncio.to_thread(kafka.kill)
                    leader2, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=90)
                    elections.append(int((time.monotonic() - lost) * 1000))
                    await asyncio.to_thread(kafka.start)
                    await asyncio.to_thread(kafka.wait_for_line, r"Completed transition to FollowerState", 120)
                else:
                    await quorum.kill(leader)
                    leader2, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=90)
                    elections.append(int((time.monotonic() - lost) * 1000))
                    await quorum.restart(leader)
                timeline.append(f"killed leader {leader}; next {leader2} epoch {epoch} after {elections[-1]} ms")
                await create("t-failover")
                await everywhere("after the failover")

                # Leadership handed to Kafka's controller (if ours leads), which then removes
                # the fourth, a full controller of ours, over the wire.
                # A resignation names a successor but does not elect it: the other voters, still
                # hearing from the old leader, refuse its pre-vote until their own back-off ends,
                # and one of them may win first (so with Kafka's voters too); hand it over again.
                for _ in range(3):
                    leading = (quorum.leader_view() or (-1, -1))[0]
                    if leading == KAFKA_ID:
                        break
                    if leading in quorum.servers:
                        seat = quorum.servers[leading].quorum
                        assert isinstance(seat, QuorumSeat) and seat.voter is not None
                        seat.voter.resign(KAFKA_ID)
                    try:
                        await _until(
                            "Kafka's controller leads", lambda: (quorum.leader_view() or (-1, -1))[0] == KAFKA_ID, 20
                        )
                    except AssertionError:
                        continue
                    break
                # With four voters the named successor gets only two pre-votes while the others
                # still hear from the old leader, so the hand-over can fail every time; the
                # removal below then goes through whichever controller leads (recorded).
                if (quorum.leader_view() or (-1, -1))[0] != KAFKA_ID:
                    timeline.append("the hand-over to Kafka's controller did not take; removing through our leader")
                timeline.append(f"removing {JOINER} through leader {(quorum.leader_view() or (-1, -1))[0]}")
                await create("t-kafka-leads")
                await quorum.remove_controller(JOINER, timeout=120)
                await _until("every controller of ours sees the fourth removed", lambda: _all_see(quorum, False), 60)
                await create("t-removed")
                await everywhere("after the removal")
                await _until("brokers unfenced at the end", all_unfenced, 60)
                assert {b.node_id: b.lifecycle.epoch for b in brokers} == epochs, "a broker was fenced"
                changes.extend(quorum.voter_changes)
                await asyncio.sleep(2)  # every voter fetches up to the last high watermark
            finally:
                for b in brokers:
                    await b.close()
                await asyncio.to_thread(kafka.stop, 60)
        return kafka

    try:
        kafka = asyncio.run(asyncio.wait_for(run(), 900))
    finally:
        print("\n".join(timeline))
    text = kafka.log_text(this_run=False)
    assert "Encountered fatal fault" not in text
    segments = {
        i: tmp_path / "quorum" / f"controller-{i}" / RAFT_DIR / PARTITION_DIR / SEGMENT for i in (*OURS, JOINER)
    }
    segments[KAFKA_ID] = tmp_path / "kafka" / "data" / PARTITION_DIR / SEGMENT
    all_logs = {i: wire.decode_entries(p.read_bytes()) for i, p in segments.items()}
    longest = _newest_leaders_log(all_logs)  # Raft's rule: only an older, uncommitted tail may differ
    print(
        f"mixed kraft.version 1 full controllers: voter changes={[(k, n, round(t, 1)) for k, n, t in changes]} "
        f"failovers={len(elections)} election_ms_median={statistics.median(elections):.0f} "
        f"election_ms_worst={max(elections)} topics_acknowledged={len(acknowledged)} lost=0 batches={len(longest)}"
    )
    problems = logs.problems(text, (*EXPECTED, *BOOTSTRAP_UNREACHABLE))
    assert problems == [], "\n".join(p[:400] for p in problems)


def _all_see(quorum: ControllerQuorum, voting: bool) -> bool:
    """Every running controller of ours has (or has not) the fourth in its voter set."""
    seats = [s.quorum for s in quorum.servers.values()]
    return all(isinstance(seat, QuorumSeat) and (JOINER in seat.voter_ids()) == voting for seat in seats)
