"""A mixed raft quorum: two of our voters (controller/raft) and Kafka 4.4's own controller as
the third voter, static voters (kraft.version 0). Kafka's voter must find our leader by the
election and replicate its log: LeaderChange control batches and metadata records (the
metadata.version FeatureLevelRecord first, then NoOpRecords) land in its segment file
byte for byte, and it replays them without a fault.

What the raft voters do not serve (they carry no controller state machine) is what
Kafka's voter is refused, and it says so in its log: ControllerRegistration (api 70)
answered as unsupported. Those lines are the only ERROR/WARN lines allowed beyond the
scenario's own; the full controllers on the quorum serve it
(tests/realbrokers/test_mixed_controller_quorum.py). UpdateRaftVoter (api 82) is served by
every voter.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import time
from pathlib import Path

from kraft_jbod.controller.raft import wire
from kraft_jbod.controller.raft.file_log import PARTITION_DIR, SEGMENT
from kraft_jbod.controller.raft.node import Timing
from kraft_jbod.controller.raft.voter import RaftVoter
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.realkafka import configs, logs
from kraft_jbod.realkafka.cluster import free_port, new_cluster_id
from kraft_jbod.realkafka.distribution import KafkaDistribution
from kraft_jbod.realkafka.process import KafkaProcess, run_tool
from kraft_jbod.wire.records import write_metadata_frame_header

METADATA_VERSION = ("4.3-IV0", 30)  # the newest level this Kafka build's storage tool knows
KAFKA_ID = 3
# What Kafka's voter may log about us today, each an API the raft voters do not serve yet.
NOT_SERVED_YET = (
    logs.Benign(
        r"ERROR Request ControllerRegistrationRequestData.* failed due to unsupported version error",
        "a controller registering with a raft-only leader",
        "the raft voters carry no controller state machine: ControllerRegistration (70) is not served",
    ),
    logs.Benign(
        r"ERROR \[ControllerRegistrationManager id=\d+ incarnation=\S+\] RegistrationResponseHandler: "
        r"unsupported API version error",
        "the same, as the registration manager reports it",
        "ControllerRegistration (70) is not served by the raft voters",
    ),
    logs.Benign(
        r"WARN \[(RaftManager|NodeToControllerChannelManager) id=\d+( name=\w+)?\] Connection to node \d+ "
        r"\(\S+\) could not be established",
        "start-up, and after our leader is killed",
        "Kafka's voter reaches for a node whose listener is not up (itself at start, the killed voter)",
    ),
    logs.Benign(
        r"WARN \[QuorumController id=\d+\] Performing controller activation\.",
        "Kafka's controller elected after our leader is killed",
        "Kafka logs every activation at WARN",
    ),
    logs.Benign(
        r"WARN \[QuorumController id=\d+\] Renouncing the leadership due to a metadata log event\. We were the "
        r"leader at epoch \d+, but in the new epoch \d+, the leader is \(none\)\.",
        "Kafka's controller leading when the test stops it",
        "it resigns (EndQuorumEpoch), one of our voters starts the next epoch, Kafka's controller sees it "
        "before its process ends",
    ),
    logs.Benign(
        r"ERROR \[ControllerApis nodeId=\d+\] Unexpected error handling request RequestHeader\(apiKey="
        r"CONTROLLER_REGISTRATION",
        "Kafka's controller just elected over a log our leader wrote",
        "its own registration arrives while it activates; an open disagreement (docs/controller-quorum.md)",
    ),
)


def _record(api_key: int, body: bytes) -> bytes:
    out = bytearray()
    write_metadata_frame_header(out, api_key, 0)
    return bytes(out) + body


def test_kafkas_controller_follows_our_leader_and_replicates(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    cluster_id = new_cluster_id()
    ports = {i: free_port() for i in (1, 2, KAFKA_ID)}
    config = tmp_path / "kafka" / "controller.properties"
    config.parent.mkdir(parents=True)
    props = configs.kafka_controller_properties(
        node_id=KAFKA_ID, port=ports[KAFKA_ID], log_dir=tmp_path / "kafka" / "data"
    )
    props["controller.quorum.voters"] = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    configs.write_properties(config, props)
    formatted = run_tool(
        kafka_dist,
        "kafka.tools.StorageTool",
        ["format", "-t", cluster_id, "-c", str(config), "--release-version", METADATA_VERSION[0]],
        tmp_path / "kafka",
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    kafka = KafkaProcess("controller", kafka_dist, config, tmp_path / "kafka" / "controller.log", heap_mb=512)

    async def run() -> tuple[int, int]:
        ours = {
            i: RaftVoter(i, {i: ("127.0.0.1", ports[i])}, tmp_path / f"voter-{i}", cluster_id=cluster_id,
                         timing=Timing(), fsync=False, seed=i)
            for i in (1, 2)
        }  # fmt: skip
        for v in ours.values():
            await v.start()
        for v in ours.values():
            v.connect({i: ("127.0.0.1", p) for i, p in ports.items()})
        kafka.start()
        try:
            deadline = time.monotonic() + 120
            leader = None
            while time.monotonic() < deadline:
                leader = next((v for v in ours.values() if v.node is not None and v.node.is_leader), None)
                if leader is not None:
                    break
                await asyncio.sleep(0.1)
            assert leader is not None and leader.log is not None
            leader.propose(
                [_record(12, FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION[1]).encode(0))]
            )
            for _ in range(5):
                leader.propose([_record(20, NoOpRecord().encode(0))])
            segment = tmp_path / "kafka" / "data" / PARTITION_DIR / SEGMENT
            while time.monotonic() < deadline:
                if segment.exists() and len(wire.decode_entries(segment.read_bytes())) >= len(leader.log.entries):
                    break
                await asyncio.sleep(0.2)
            # Failover: our leader dies; Kafka's controller or our other voter takes over, and
            # our survivor follows whichever leads.
            first = leader.node_id
            await leader.kill()
            survivor = ours[3 - first]
            while time.monotonic() < deadline:
                node = survivor.node
                if node is not None and node.epoch > 1 and node.leader_id >= 0 and node.high_watermark > 0:
                    break
                await asyncio.sleep(0.1)
            assert survivor.node is not None and survivor.node.leader_id >= 0, survivor.describe()
            if survivor.node.is_leader:
                for _ in range(3):
                    survivor.propose([_record(20, NoOpRecord().encode(0))])
            await asyncio.sleep(3)
            assert survivor.log is not None
            return first, survivor.log.end_offset
        finally:
            await asyncio.sleep(1)  # let Kafka's voter see the high watermark
            # In a thread: our voters must keep answering (EndQuorumEpoch) while Kafka's stops.
            await asyncio.to_thread(kafka.stop, 60)
            for v in ours.values():
                await v.kill()

    leader_id, end = asyncio.run(asyncio.wait_for(run(), 240))
    text = kafka.log_text()
    assert re.search(
        rf"Completed transition to FollowerState\(fetchTimeoutMs=\d+, epoch=\d+, leader={leader_id}\b", text
    ), text[-3000:]
    assert "Encountered fatal fault" not in text
    # After the failover every log is a prefix of the longest, batch for batch and byte for byte.
    segments = [tmp_path / f"voter-{i}" / PARTITION_DIR / SEGMENT for i in (1, 2)]
    segments.append(tmp_path / "kafka" / "data" / PARTITION_DIR / SEGMENT)
    all_logs = [wire.decode_entries(p.read_bytes()) for p in segments]
    longest = max(all_logs, key=len)
    for entries in all_logs:
        assert entries == longest[: len(entries)]
    survivor_log = all_logs[2 - leader_id]  # the voter that was not killed
    # (>=: the quorum goes on while Kafka's voter shuts down: it resigns, and our survivor may lead next)
    assert sum(e.count for e in survivor_log) >= end
    assert len(all_logs[2]) >= len(all_logs[leader_id - 1])  # Kafka's voter holds all the first leader wrote
    problems = logs.problems(text, NOT_SERVED_YET + LOADED_MACHINE)
    assert problems == [], "\n".join(p[:300] for p in problems)


MIXED_FAILOVERS = 20
# Kafka's event monitor on a loaded machine: no fault of anyone's, allowed in every test here.
LOADED_MACHINE = (
    logs.Benign(
        r"ERROR \[QuorumController id=\d+\] Exceptionally slow controller event "
        r"\S+ took \d+ ms\.",
        "a loaded machine (seen with other JVM tests running beside it)",
        "Kafka's event monitor flags any controller event above 2 s (controller.performance.always.log.threshold.ms); "
        "any event (replaying a batch, a leader change, the periodic no-op write) is that slow only when the JVM gets no CPU",
    ),
)
# What Kafka's voter logs when it loses the leadership by a pause (SIGSTOP) and comes back.
PAUSED_LEADER = (
    logs.Benign(
        r"ERROR \[ControllerRegistrationManager id=\d+ incarnation=\S+\] RegistrationResponseHandler: "
        r"channel manager timed out before sending the request\.",
        "a leader killed while Kafka's voter was registering with it",
        "its ControllerRegistration to the killed leader times out; it retries with the next one",
    ),
    logs.Benign(
        r"WARN \[QuorumController id=\d+\] Renouncing the leadership due to a metadata log event\. We were the "
        r"leader at epoch \d+, but in the new epoch \d+, the leader is \S+\.",
        "Kafka's controller resumed after a pause that cost it the leadership",
        "the leader moved while it was stopped; it resigns its controller role on seeing the new epoch",
    ),
)


def _format_kafka(
    kafka_dist: KafkaDistribution, tmp_path: Path, ports: dict[int, int], cluster_id: str
) -> KafkaProcess:
    config = tmp_path / "kafka" / "controller.properties"
    config.parent.mkdir(parents=True)
    props = configs.kafka_controller_properties(
        node_id=KAFKA_ID, port=ports[KAFKA_ID], log_dir=tmp_path / "kafka" / "data"
    )
    props["controller.quorum.voters"] = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    configs.write_properties(config, props)
    formatted = run_tool(
        kafka_dist,
        "kafka.tools.StorageTool",
        ["format", "-t", cluster_id, "-c", str(config), "--release-version", METADATA_VERSION[0]],
        tmp_path / "kafka",
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    return KafkaProcess("controller", kafka_dist, config, tmp_path / "kafka" / "controller.log", heap_mb=512)


def test_mixed_quorum_repeated_failovers(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    """The leader is lost again and again: ours killed (and restarted from its folder),
    Kafka's paused (and resumed). After each loss the live voters agree on one new leader;
    at the end every log is a prefix of the longest and every record our leaders
    acknowledged is in it."""
    cluster_id = new_cluster_id()
    ports = {i: free_port() for i in (1, 2, KAFKA_ID)}
    kafka = _format_kafka(kafka_dist, tmp_path, ports, cluster_id)
    addresses = {i: ("127.0.0.1", p) for i, p in ports.items()}
    elections: list[float] = []
    acknowledged: list[tuple[int, bytes]] = []
    lost_by: list[str] = []
    timeline: list[str] = []  # what each round did, for a failure message

    def voter(i: int, seed: int) -> RaftVoter:
        return RaftVoter(
            i,
            {i: addresses[i]},
            tmp_path / f"voter-{i}",
            cluster_id=cluster_id,
            timing=Timing(),
            fsync=False,
            seed=seed,
        )

    async def agreed(ours: dict[int, RaftVoter], above: int, deadline: float) -> tuple[int, int]:
        """(leader, epoch) once every live voter of ours names the same leader in the same
        epoch above ``above``, and that leader (if ours) leads it."""
        while time.monotonic() < deadline:
            views = {(v.node.leader_id, v.node.epoch) for v in ours.values() if v.node is not None}
            if len(views) == 1:
                leader, epoch = next(iter(views))
                if leader >= 0 and epoch > above:
                    mine = ours.get(leader)
                    if mine is None or (mine.node is not None and mine.node.is_leader):
                        return leader, epoch
            await asyncio.sleep(0.02)
        states = "; ".join(v.describe() for v in ours.values())
        raise AssertionError(
            f"no agreed leader above epoch {above}: {states}; kafka running={kafka.running()}\n" + "\n".join(timeline)
        )

    async def run() -> None:
        ours = {i: voter(i, i) for i in (1, 2)}
        for v in ours.values():
            await v.start()
        for v in ours.values():
            v.connect(addresses)
        kafka.start()
        try:
            leader, epoch = await agreed(ours, 0, time.monotonic() + 120)
            while leader not in ours:
                leader, epoch = await agreed(ours, epoch, time.monotonic() + 60)  # Kafka's first: wait for ours
            first = ours[leader]
            first.propose(
                [_record(12, FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION[1]).encode(0))]
            )
            for r in range(MIXED_FAILOVERS):
                mine = ours.get(leader)
                if mine is not None and mine.node is not None:
                    payload = _record(20, NoOpRecord().encode(0))
                    offset = mine.propose([payload])
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline and mine.node is not None and mine.node.is_leader:
                        if mine.node.high_watermark > offset:
                            acknowledged.append((offset, payload))
                            break
                        await asyncio.sleep(0.01)
                lost = time.monotonic()
                timeline.append(f"{time.strftime('%H:%M:%S')} round {r}: leader {leader} epoch {epoch} lost")
                if leader in ours:
                    await ours[leader].kill()
                    del ours[leader]
                    lost_by.append("kill")
                else:
                    kafka.pause()
                    lost_by.append("pause")
                try:
                    new, epoch = await agreed(ours, epoch, time.monotonic() + 60)
                finally:
                    if leader == KAFKA_ID:
                        kafka.resume()
                elections.append((time.monotonic() - lost) * 1000)
                if leader != KAFKA_ID:
                    back = voter(leader, 100 * r + leader)
                    for attempt in range(50):
                        try:
                            await back.start()
                            break
                        except OSError:
                            if attempt == 49:
                                raise
                            await asyncio.sleep(0.1)
                    back.connect(addresses)
                    ours[leader] = back
                leader = new
            await asyncio.sleep(3)  # let every voter fetch up to the last leader's high watermark
        finally:
            await asyncio.to_thread(kafka.stop, 60)
            for v in ours.values():
                await v.kill()

    asyncio.run(asyncio.wait_for(run(), 900))
    text = kafka.log_text()
    assert "Encountered fatal fault" not in text
    segments = [tmp_path / f"voter-{i}" / PARTITION_DIR / SEGMENT for i in (1, 2)]
    segments.append(tmp_path / "kafka" / "data" / PARTITION_DIR / SEGMENT)
    all_logs = [wire.decode_entries(p.read_bytes()) for p in segments]
    longest = max(all_logs, key=len)
    for entries in all_logs:
        assert entries == longest[: len(entries)]
    by_offset = {e.offset: e for e in longest}
    lost = [o for o, p in acknowledged if o not in by_offset or by_offset[o].payload != p]
    assert lost == [], f"acknowledged records lost at offsets {lost}"
    assert len(elections) == MIXED_FAILOVERS
    print(
        f"mixed failovers={len(elections)} (kill={lost_by.count('kill')} pause={lost_by.count('pause')}) "
        f"election_ms_median={statistics.median(elections):.0f} election_ms_worst={max(elections):.0f} "
        f"acknowledged={len(acknowledged)} lost=0 batches={len(longest)}"
    )
    problems = logs.problems(text, NOT_SERVED_YET + LOADED_MACHINE + PAUSED_LEADER)
    assert problems == [], "\n".join(p[:300] for p in problems)
