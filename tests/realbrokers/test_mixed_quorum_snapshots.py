"""Snapshots between our controllers and Kafka 4.4's controller on one static quorum (two of
ours, Kafka's the third voter, two fake JBOD brokers attached).

Phase 1, Kafka's voter from our leader: Kafka's controller registers, is killed; our leader
writes enough for several snapshots and cuts its log below them (Kafka's retention rule);
Kafka's controller comes back below our log start, is answered with a SnapshotId, loads our
snapshot with FetchSnapshot and fetches on; then it leads (leadership handed to it) and
manages the brokers. Phase 2, our voter from Kafka's leader: one of ours is killed while
Kafka's controller snapshots and moves its log start; ours comes back below it, loads
Kafka's snapshot with FetchSnapshot, fetches on, and leads once Kafka's controller is killed,
managing the brokers. DescribeQuorum is compared between Kafka's leader and ours. Kafka's
controller logs no WARN or ERROR beyond what the scenario itself causes.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from kraft_jbod.controller import snapshot as snapshots
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.realkafka import logs
from kraft_jbod.realkafka.cluster import free_port
from kraft_jbod.realkafka.distribution import KafkaDistribution
from kraft_jbod.realkafka.process import KafkaProcess
from kraft_jbod.testing.cluster import KafkaConnection
from kraft_jbod.testing.quorum import ControllerQuorum
from tests.realbrokers.test_mixed_controller_quorum import (
    EXPECTED,
    KAFKA_ID,
    METADATA_VERSION,
    OURS,
    TIMING,
    _create_topic,
    _kafka,
    _seat,
    _start_broker,
    _until,
)

# Both kinds of controller snapshot every 2 KB of records and keep as little log as allowed.
SNAPSHOTTING = {
    "metadata.log.max.record.bytes.between.snapshots": "2048",
    "metadata.max.retention.bytes": "1",
}
DESCRIBE = DescribeQuorumRequest(
    topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]
)
KAFKA_LOG_START = re.compile(r"Incremented log start offset to (\d+)")
# Kafka's controller, just elected at start-up, registering with itself before it activated:
# Kafka's own (its registration goes to the raft leader, itself); an all-Kafka quorum logs the same.
SELF_REGISTRATION = logs.Benign(
    r"ERROR \[ControllerApis nodeId=\d+\] Unexpected error handling request RequestHeader\(apiKey="
    rf"CONTROLLER_REGISTRATION, apiVersion=\d+, clientId={KAFKA_ID},",
    "Kafka's controller elected while its own registration was under way",
    "its registration manager sends to the raft leader, itself, before its controller is active",
    detail=f"The active controller appears to be node {KAFKA_ID}.",
)


async def _describe(address: tuple[str, int]) -> Any:
    conn = await KafkaConnection.open(address, client_id="admin")
    try:
        return await asyncio.wait_for(conn.call(DESCRIBE, 2), 10)
    finally:
        await conn.close()


def _shape(resp: Any) -> dict[str, Any]:
    """What must agree between Kafka's leader's DescribeQuorum answer and ours."""
    part = resp.topics[0].partitions[0]
    return {
        "error": (resp.error_code, part.error_code),
        "voters": sorted(v.replica_id for v in part.current_voters),
        "fetched": sorted(v.replica_id for v in part.current_voters if v.last_fetch_timestamp > 0),
        "caught_up": sorted(v.replica_id for v in part.current_voters if v.last_caught_up_timestamp > 0),
        "hw_known": part.high_watermark > 0,
        "nodes": sorted(n.node_id for n in resp.nodes),
        "node_listeners": sorted(len(n.listeners) for n in resp.nodes),
    }


def _kafka_snapshots(root: Path) -> list[snapshots.SnapshotId]:
    return snapshots.list_snapshots(root / "kafka" / "data" / "__cluster_metadata-0")


def test_snapshots_cross_between_kafkas_controller_and_ours(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    kafka_port = free_port()
    report: list[str] = []
    shapes: dict[str, dict[str, Any]] = {}

    async def run() -> KafkaProcess:
        quorum = ControllerQuorum(
            tmp_path / "quorum",
            voters=len(OURS),
            first_id=OURS[0],
            timing=TIMING,
            metadata_version=METADATA_VERSION[1],
            external={KAFKA_ID: ("127.0.0.1", kafka_port)},
            props=SNAPSHOTTING,
        )
        async with quorum:
            kafka = await asyncio.to_thread(
                _kafka, kafka_dist, tmp_path, kafka_port, quorum.voters_property, SNAPSHOTTING
            )
            await asyncio.to_thread(kafka.start)
            brokers = []
            topics: list[str] = []
            try:
                leader, epoch = await quorum.wait_for_leader_view(timeout=120)
                brokers = [await _start_broker(tmp_path, b, quorum.voters_property) for b in (1, 2)]
                broker_epochs: dict[int, int] = {}

                def unfenced_on(server: ControllerServer) -> bool:
                    return all(
                        (reg := server.state.brokers.get(b.node_id)) is not None
                        and not reg.fenced
                        and reg.epoch == b.lifecycle.epoch
                        for b in brokers
                    )

                def registered(controller: int) -> bool:
                    return all(controller in s.state.image.controllers for s in quorum.servers.values())

                await _until("brokers unfenced", lambda: all(unfenced_on(s) for s in quorum.servers.values()), 60)
                await _until("Kafka's controller registered", lambda: registered(KAFKA_ID), 120)
                broker_epochs = {b.node_id: b.lifecycle.epoch for b in brokers}

                async def create(name: str) -> None:
                    for _ in range(100):
                        view = await quorum.wait_for_leader_view(timeout=60)
                        address = ("127.0.0.1", kafka_port) if view[0] == KAFKA_ID else quorum.addresses[view[0]]
                        try:
                            code = await _create_topic(address, name)
                        except Exception:
                            code = -1
                        if code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                            topics.append(name)
                            return
                        await asyncio.sleep(0.2)
                    raise AssertionError(f"{name} never acknowledged")

                # ---- phase 1: Kafka's voter catches up from our leader's snapshot
                leader, epoch = await quorum.wait_for_leader_view(timeout=60)
                if leader == KAFKA_ID:  # our voters lead phase 1: hand it to one of ours
                    quorum.mark_lost()
                    await asyncio.to_thread(kafka.kill)
                    leader, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=60)
                    await asyncio.to_thread(kafka.start)
                    await asyncio.to_thread(kafka.wait_for_line, r"Completed transition to FollowerState", 120)
                ours_leader = quorum.servers[leader]
                shapes["ours"] = _shape(await _describe(quorum.addresses[leader]))
                await asyncio.to_thread(kafka.kill)
                cut_before = _seat(ours_leader).voter.log.start_offset  # type: ignore[union-attr]
                for n in range(12):
                    await create(f"p1-{n}")
                rlog = _seat(ours_leader).voter.log  # type: ignore[union-attr]
                await _until("our leader cut its log", lambda: rlog.start_offset > cut_before, 30)
                ours_cut = rlog.start_offset
                started = time.monotonic()
                await asyncio.to_thread(kafka.start)
                await _until(
                    "Kafka's voter holds our snapshot",
                    lambda: any(s.end_offset >= ours_cut for s in _kafka_snapshots(tmp_path)),
                    120,
                )
                kafka_loaded = max(_kafka_snapshots(tmp_path))
                node = _seat(ours_leader).voter.node  # type: ignore[union-attr]
                await _until(
                    "Kafka's voter caught up",
                    lambda: node is not None and node.progress[KAFKA_ID].end_offset >= ours_cut,
                    120,
                )
                report.append(
                    f"phase 1: our leader {leader} cut its log at {ours_cut}; Kafka's voter loaded "
                    f"{kafka_loaded.file_name} and caught up in {int((time.monotonic() - started) * 1000)} ms"
                )
                # Kafka's controller leads and manages the brokers.
                voter = _seat(ours_leader).voter
                assert voter is not None
                for _ in range(5):
                    voter.resign(KAFKA_ID)
                    quorum.mark_lost()
                    leader, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=60)
                    if leader == KAFKA_ID:
                        break
                    voter = _seat(quorum.servers[leader]).voter
                    assert voter is not None
                assert leader == KAFKA_ID
                await create("p1-kafka-leads")
                await _until(
                    "brokers unfenced under Kafka's controller",
                    lambda: all(unfenced_on(s) for s in quorum.servers.values()),
                    60,
                )
                shapes["kafka"] = _shape(await _describe(("127.0.0.1", kafka_port)))

                # ---- phase 2: our voter catches up from Kafka's leader's snapshot
                victim = OURS[1] if OURS[1] in quorum.servers else OURS[0]
                await quorum.kill(victim, record=False)
                kafka_start_before = [int(m) for m in KAFKA_LOG_START.findall(kafka.log_text(this_run=True))]
                deadline = time.monotonic() + 150
                n = 0
                kafka_cut = 0
                while time.monotonic() < deadline:  # Kafka's cleaner runs every 60 s
                    await create(f"p2-{n}")
                    n += 1
                    starts = [int(m) for m in KAFKA_LOG_START.findall(kafka.log_text(this_run=True))]
                    if len(starts) > len(kafka_start_before) and starts[-1] > 0:
                        kafka_cut = starts[-1]
                        break
                    await asyncio.sleep(1.0)
                assert kafka_cut > 0, "Kafka's leader never moved its log start"
                started = time.monotonic()
                back = await quorum.restart(victim)
                back_seat = _seat(back)
                assert back_seat.voter is not None and back_seat.voter.log is not None
                assert back_seat.voter.log.end_offset < kafka_cut
                await _until("our voter loaded Kafka's snapshot", lambda: back_seat.snapshots_loaded, 60)
                await _until(
                    "our voter holds every topic",
                    lambda: all(t in back.state.image.topic_names for t in topics),
                    60,
                )
                report.append(
                    f"phase 2: Kafka's leader moved its log start to {kafka_cut}; our voter {victim} loaded "
                    f"{back_seat.snapshots_loaded} in {back_seat.snapshot_load_ms} ms, held every topic after "
                    f"{int((time.monotonic() - started) * 1000)} ms"
                )
                # Our caught-up voter leads once Kafka's controller is gone, and manages the brokers.
                quorum.mark_lost()
                await asyncio.to_thread(kafka.kill)
                leader, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=60)
                for _ in range(5):  # a resignation names the successor but may not elect it
                    if leader == victim:
                        break
                    voter = _seat(quorum.servers[leader]).voter
                    assert voter is not None
                    voter.resign(victim)
                    leader, epoch = await quorum.wait_for_leader_view(above_epoch=epoch, timeout=60)
                assert leader == victim
                await create("p2-ours-leads")
                await _until("brokers unfenced under our caught-up voter", lambda: unfenced_on(back), 60)
                assert {b.node_id: b.lifecycle.epoch for b in brokers} == broker_epochs, "a broker was fenced"
                assert all(t in back.state.image.topic_names for t in topics)
            finally:
                for b in brokers:
                    await b.close()
                await asyncio.to_thread(kafka.stop, 60)
        return kafka

    kafka = asyncio.run(asyncio.wait_for(run(), 900))
    print("\n" + "\n".join(report))
    print(f"DescribeQuorum: ours {shapes.get('ours')}; Kafka's {shapes.get('kafka')}")
    assert shapes["ours"] == shapes["kafka"]
    text = kafka.log_text(this_run=False)
    assert "Encountered fatal fault" not in text
    problems = logs.problems(text, (*EXPECTED, SELF_REGISTRATION))
    assert problems == [], "\n".join(p[:400] for p in problems)
