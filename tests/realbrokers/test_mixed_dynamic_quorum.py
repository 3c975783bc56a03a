"""The judge at kraft.version 1: two of our raft voters and Kafka 4.4's own controller in a
dynamic quorum, Kafka's controller formatted with ``--initial-controllers`` naming all three
(directory ids included) and ``controller.quorum.bootstrap.servers`` instead of static voters.

* Kafka's voter follows our leader and replicates its log: the bootstrap voter set our first
  leader records (a KRaftVersionRecord + VotersRecord batch), metadata records after it.
* Our leader removes Kafka's voter (RemoveRaftVoter), the two of ours go on committing, and
  adds it back (AddRaftVoter: Kafka's controller answers our ApiVersions with its
  kraft.version range and fetches as an observer with its directory id until added).
* Our leader is killed: the survivor and Kafka's voter elect a new leader; leadership is
  then handed to Kafka's controller, and Kafka's leader adds a new voter of ours (formatted
  with no voter set, found by the bootstrap servers) and removes it again, over the wire.
* At the end every log is the newest leader's, batch for batch and byte for byte, up to an
  uncommitted tail of an older epoch a stopped voter may keep (Raft's rule); the
  voter sets recorded in it are the changes made, in order; Kafka's controller hit no fatal
  fault and logged nothing beyond what test_mixed_quorum.py lists for raft-only voters.
"""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from pathlib import Path

from kraft_jbod.connection import ClientConnection, ResponseReceived
from kraft_jbod.controller.raft import messages as core
from kraft_jbod.controller.raft import wire
from kraft_jbod.controller.raft.file_log import PARTITION_DIR, SEGMENT
from kraft_jbod.controller.raft.node import Timing
from kraft_jbod.controller.raft.voter import RaftVoter
from kraft_jbod.controller.raft.voter_set import VoterKey, VoterSet
from kraft_jbod.controller.raft.voters_codec import VotersRecordCodec
from kraft_jbod.messages.add_raft_voter_request import AddRaftVoterRequest, Listener
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from kraft_jbod.realkafka import configs, logs
from kraft_jbod.realkafka.cluster import free_port, new_cluster_id
from kraft_jbod.realkafka.distribution import KafkaDistribution
from kraft_jbod.realkafka.process import KafkaProcess, run_tool
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.primitives import uuid_to_base64url
from tests.realbrokers.test_mixed_quorum import LOADED_MACHINE, METADATA_VERSION, NOT_SERVED_YET, PAUSED_LEADER, _record

KAFKA_ID = 3
JOINER = 4
# Kafka's raft client names the controller.quorum.bootstrap.servers by negative node ids.
BOOTSTRAP_UNREACHABLE = (
    logs.Benign(
        r"WARN \[RaftManager id=\d+\] Connection to node -\d+ \(\S+\) could not be established",
        "start-up, and after our leader is killed",
        "Kafka's voter tries every bootstrap server, its own (not listening yet at start) and the killed voter's",
    ),
)


async def _call(address: tuple[str, int], body: Message, version: int) -> Message:
    reader, writer = await asyncio.open_connection(*address)
    try:
        conn = ClientConnection(client_id="test-admin")
        writer.write(conn.send_request(body, version))
        await writer.drain()
        while True:
            ev = conn.next_event()
            if isinstance(ev, ResponseReceived):
                return ev.body  # type: ignore[no-any-return]
            data = await asyncio.wait_for(reader.read(65536), 60)
            assert data, "the controller closed the connection"
            conn.receive_data(data)
    finally:
        writer.close()


def test_dynamic_mixed_quorum_voter_changes_and_failover(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    cluster_id = new_cluster_id()
    ports = {i: free_port() for i in (1, 2, KAFKA_ID, JOINER)}
    addresses = {i: ("127.0.0.1", ports[i]) for i in (1, 2, KAFKA_ID)}
    dirs = {i: uuid.uuid4() for i in ports}
    initial = VoterSet.of(VoterKey(i, dirs[i]) for i in (1, 2, KAFKA_ID))
    config = tmp_path / "kafka" / "controller.properties"
    config.parent.mkdir(parents=True)
    props = configs.kafka_controller_properties(
        node_id=KAFKA_ID, port=ports[KAFKA_ID], log_dir=tmp_path / "kafka" / "data"
    )
    del props["controller.quorum.voters"]
    props["controller.quorum.bootstrap.servers"] = ",".join(f"{h}:{p}" for h, p in addresses.values())
    configs.write_properties(config, props)
    controllers = ",".join(f"{i}@127.0.0.1:{ports[i]}:{uuid_to_base64url(dirs[i])}" for i in (1, 2, KAFKA_ID))
    formatted = run_tool(
        kafka_dist,
        "kafka.tools.StorageTool",
        [
            *("format", "-t", cluster_id, "-c", str(config), "--release-version", METADATA_VERSION[0]),
            *("--initial-controllers", controllers),
        ],
        tmp_path / "kafka",
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    kafka = KafkaProcess("controller", kafka_dist, config, tmp_path / "kafka" / "controller.log", heap_mb=512)
    timeline: list[str] = []
    elections: list[float] = []

    def voter(i: int, seed: int, voters: VoterSet) -> RaftVoter:
        return RaftVoter(
            i,
            {i: ("127.0.0.1", ports[i])},
            tmp_path / f"voter-{i}",
            cluster_id=cluster_id,
            timing=Timing(),
            fsync=False,
            seed=seed,
            directory_id=dirs[i],
            initial_voters=voters,
        )

    async def until(what: str, probe: object, timeout: float = 90) -> object:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = probe()  # type: ignore[operator]
            if got:
                return got
            await asyncio.sleep(0.05)
        raise AssertionError(f"not within {timeout} s: {what}\n" + "\n".join(timeline))

    def agreed(ours: dict[int, RaftVoter], above: int) -> tuple[int, int] | None:
        views = {(v.node.leader_id, v.node.epoch) for v in ours.values() if v.node is not None}
        if len(views) != 1:
            return None
        leader, epoch = next(iter(views))
        mine = ours.get(leader)
        if leader < 0 or epoch <= above or (mine is not None and (mine.node is None or not mine.node.is_leader)):
            return None
        return leader, epoch

    async def change(what: str, ask: object) -> None:
        deadline = time.monotonic() + 90
        while True:
            error, message = await ask()  # type: ignore[operator]
            timeline.append(f"{time.strftime('%H:%M:%S')} {what}: {error.name} {message}")
            if error is core.Error.NONE:
                return
            assert error is core.Error.REQUEST_TIMED_OUT and time.monotonic() < deadline, "\n".join(timeline)
            await asyncio.sleep(0.5)

    async def run() -> None:
        ours = {i: voter(i, i, initial) for i in (1, 2)}
        for v in ours.values():
            await v.start()
        for v in ours.values():
            v.connect(addresses)
        try:
            # Two of three vote: ours elect and record the bootstrap set before Kafka's starts.
            leader_id, epoch = await until("a leader of ours", lambda: agreed(ours, 0))  # type: ignore[misc]
            leader = ours[leader_id]
            assert leader.node is not None
            leader.propose(
                [_record(12, FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION[1]).encode(0))]
            )
            for _ in range(3):
                leader.propose([_record(20, NoOpRecord().encode(0))])
            await asyncio.to_thread(kafka.start)
            segment = tmp_path / "kafka" / "data" / PARTITION_DIR / SEGMENT
            assert leader.log is not None
            held = len(leader.log.entries)
            await until(
                "Kafka's voter replicates our log",
                lambda: segment.exists() and len(wire.decode_entries(segment.read_bytes())) >= held,
                180,
            )
            # Remove Kafka's voter, write without it, add it back.
            await change("remove Kafka's voter", lambda: leader.remove_voter(KAFKA_ID, dirs[KAFKA_ID]))
            assert all(v.node is not None and v.node.voters == {1, 2} for v in ours.values())
            offset = leader.propose([_record(20, NoOpRecord().encode(0))])
            await until("committed by two", lambda: leader.node is not None and leader.node.high_watermark > offset)
            await change(
                "add Kafka's voter",
                lambda: leader.add_voter(KAFKA_ID, dirs[KAFKA_ID], "127.0.0.1", ports[KAFKA_ID]),
            )
            await until(
                "three voters everywhere", lambda: all(v.node.voters == {1, 2, KAFKA_ID} for v in ours.values())
            )  # type: ignore[union-attr]
            # Failover: our leader dies; the survivor and Kafka's voter elect.
            lost = time.monotonic()
            await leader.kill()
            del ours[leader_id]
            new_id, epoch = await until("a leader after the kill", lambda: agreed(ours, epoch))  # type: ignore[misc]
            elections.append((time.monotonic() - lost) * 1000)
            timeline.append(f"after killing {leader_id}: {new_id} leads epoch {epoch}")
            back = voter(leader_id, 100 + leader_id, initial)
            await back.start()
            back.connect(addresses)
            ours[leader_id] = back
            # Hand the leadership to Kafka's controller.
            for _ in range(5):
                if new_id == KAFKA_ID:
                    break
                lost = time.monotonic()
                ours[new_id].resign(KAFKA_ID)
                new_id, epoch = await until("a leader after the move", lambda e=epoch: agreed(ours, e))  # type: ignore[misc]
                elections.append((time.monotonic() - lost) * 1000)
                timeline.append(f"after moving: {new_id} leads epoch {epoch}")
            assert new_id == KAFKA_ID, "\n".join(timeline)
            # Kafka's leader adds a voter of ours formatted with no voter set, then removes it.
            joiner = voter(JOINER, JOINER, VoterSet(frozenset()))
            await joiner.start()
            joiner.connect(addresses)
            ours[JOINER] = joiner
            await until(
                "the joiner follows Kafka's leader",
                lambda: joiner.node is not None and joiner.node.leader_id == KAFKA_ID,
            )
            add = AddRaftVoterRequest(
                cluster_id=cluster_id,
                timeout_ms=30_000,
                voter_id=JOINER,
                voter_directory_id=dirs[JOINER],
                listeners=[Listener(name=configs.CONTROLLER_LISTENER, host="127.0.0.1", port=ports[JOINER])],
                ack_when_committed=True,
            )

            async def add_joiner() -> tuple[core.Error, str]:
                got = await _call(addresses[KAFKA_ID], add, 1)
                return core.Error(got.error_code), got.error_message or ""  # type: ignore[attr-defined]

            await change("Kafka's leader adds ours", add_joiner)
            await until(
                "four voters everywhere",
                lambda: all(v.node is not None and v.node.voters == {1, 2, KAFKA_ID, JOINER} for v in ours.values()),
            )
            remove = RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=JOINER, voter_directory_id=dirs[JOINER])

            async def remove_joiner() -> tuple[core.Error, str]:
                got = await _call(addresses[KAFKA_ID], remove, 0)
                return core.Error(got.error_code), got.error_message or ""  # type: ignore[attr-defined]

            await change("Kafka's leader removes ours", remove_joiner)
            await until(
                "three voters again",
                lambda: all(v.node is not None and v.node.voters == {1, 2, KAFKA_ID} for v in ours.values()),
            )
            await asyncio.sleep(3)  # every voter fetches up to the high watermark
        finally:
            await asyncio.to_thread(kafka.stop, 60)
            for v in ours.values():
                await v.kill()

    try:
        asyncio.run(asyncio.wait_for(run(), 900))
    finally:
        print("\n".join(timeline))
    text = kafka.log_text()
    assert "Encountered fatal fault" not in text
    segments = {i: tmp_path / f"voter-{i}" / PARTITION_DIR / SEGMENT for i in (1, 2, JOINER)}
    segments[KAFKA_ID] = tmp_path / "kafka" / "data" / PARTITION_DIR / SEGMENT
    all_logs = {i: wire.decode_entries(p.read_bytes()) for i, p in segments.items()}
    longest = _newest_leaders_log(all_logs)
    codec = VotersRecordCodec({})
    recorded = [s.ids for e in longest if (s := codec.voters_in(e)) is not None]
    changes = [ids for n, ids in enumerate(recorded) if n == 0 or recorded[n - 1] != ids]
    full = {1, 2, KAFKA_ID}
    assert changes == [full, {1, 2}, full, full | {JOINER}, full], recorded
    print(f"dynamic mixed quorum: elections_ms={[round(e) for e in elections]} batches={len(longest)}")
    problems = logs.problems(text, NOT_SERVED_YET + LOADED_MACHINE + BOOTSTRAP_UNREACHABLE)
    assert problems == [], "\n".join(p[:400] for p in problems)


def _newest_leaders_log(all_logs: dict[int, list[core.Entry]]) -> list[core.Entry]:
    """The log of the newest leader, once every other log is checked against it as Raft allows.

    Batch for batch and byte for byte the same up to where they part; past that, only batches
    of an older epoch than the newest leader's batch there: a tail the voter appended but no
    majority held, left because it stopped before it fetched from the new leader and truncated
    it (Kafka's voter, say, stopped while ours elected a leader). Such batches were never
    committed; any other difference fails.
    """
    reference = max(all_logs.values(), key=lambda es: (es[-1].epoch, len(es)) if es else (-1, 0))
    for i, entries in all_logs.items():
        same = 0
        while same < min(len(entries), len(reference)) and entries[same] == reference[same]:
            same += 1
        tail = entries[same:]
        if tail:
            assert same < len(reference), f"voter {i}'s log runs past the newest leader's"
            parted = reference[same].epoch
            assert all(e.epoch < parted for e in tail), (
                f"voter {i}'s log parts from the newest leader's at batch {same} with epochs "
                f"{[e.epoch for e in tail]} not older than {parted}"
            )
    return reference


DYNAMIC_ROUNDS = 10


def test_dynamic_mixed_quorum_repeated_changes_and_failovers(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    """Each round: whoever leads (ours or Kafka's) removes a voter that does not lead (Kafka's
    or one of ours, in turn) and adds it back, then the leader is lost (ours killed and
    restarted, Kafka's paused and resumed). Every acknowledged record survives, every log is
    the newest leader's up to an uncommitted older tail, and records each change."""
    cluster_id = new_cluster_id()
    ports = {i: free_port() for i in (1, 2, KAFKA_ID)}
    addresses = {i: ("127.0.0.1", ports[i]) for i in ports}
    dirs = {i: uuid.uuid4() for i in ports}
    initial = VoterSet.of(VoterKey(i, dirs[i]) for i in ports)
    kafka = _format_dynamic_kafka(kafka_dist, tmp_path, ports, dirs, cluster_id)
    elections: list[float] = []
    acknowledged: list[tuple[int, bytes]] = []
    changes_made: list[str] = []
    lost_by: list[str] = []
    timeline: list[str] = []

    def voter(i: int, seed: int) -> RaftVoter:
        return RaftVoter(
            i,
            {i: addresses[i]},
            tmp_path / f"voter-{i}",
            cluster_id=cluster_id,
            timing=Timing(),
            fsync=False,
            seed=seed,
            directory_id=dirs[i],
            initial_voters=initial,
        )

    async def agreed(ours: dict[int, RaftVoter], above: int) -> tuple[int, int]:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            views = {(v.node.leader_id, v.node.epoch) for v in ours.values() if v.node is not None}
            if len(views) == 1:
                leader, epoch = next(iter(views))
                mine = ours.get(leader)
                if leader >= 0 and epoch > above and (mine is None or (mine.node is not None and mine.node.is_leader)):
                    return leader, epoch
            await asyncio.sleep(0.02)
        raise AssertionError(
            "no agreed leader: " + "; ".join(v.describe() for v in ours.values()) + "\n" + "\n".join(timeline)
        )

    async def change(ours: dict[int, RaftVoter], leader: int, kind: str, target: int) -> None:
        deadline = time.monotonic() + 90
        while True:
            if leader in ours:
                if kind == "remove":
                    error, message = await ours[leader].remove_voter(target, dirs[target])
                else:
                    error, message = await ours[leader].add_voter(target, dirs[target], *addresses[target])
            else:
                body: Message = (
                    RemoveRaftVoterRequest(cluster_id=cluster_id, voter_id=target, voter_directory_id=dirs[target])
                    if kind == "remove"
                    else AddRaftVoterRequest(
                        cluster_id=cluster_id,
                        timeout_ms=30_000,
                        voter_id=target,
                        voter_directory_id=dirs[target],
                        listeners=[Listener(name=configs.CONTROLLER_LISTENER, host="127.0.0.1", port=ports[target])],
                        ack_when_committed=True,
                    )
                )
                got = await _call(addresses[KAFKA_ID], body, 0 if kind == "remove" else 1)
                error, message = core.Error(got.error_code), got.error_message or ""  # type: ignore[attr-defined]
            timeline.append(f"{time.strftime('%H:%M:%S')} {leader} {kind}s {target}: {error.name} {message}")
            if error is core.Error.NONE:
                changes_made.append(f"{kind} {target} by {'kafka' if leader == KAFKA_ID else 'ours'}")
                return
            assert error is core.Error.REQUEST_TIMED_OUT and time.monotonic() < deadline, "\n".join(timeline)
            await asyncio.sleep(0.5)

    async def run() -> None:
        ours = {i: voter(i, i) for i in (1, 2)}
        for v in ours.values():
            await v.start()
        for v in ours.values():
            v.connect(addresses)
        leader, epoch = await agreed(ours, 0)
        first = ours[leader]
        first.propose(
            [_record(12, FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION[1]).encode(0))]
        )
        await asyncio.to_thread(kafka.start)
        try:
            for r in range(DYNAMIC_ROUNDS):
                mine = ours.get(leader)
                if mine is not None and mine.node is not None and mine.node.is_leader:
                    payload = _record(20, NoOpRecord().encode(0))
                    offset = mine.propose([payload])
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline and mine.node is not None and mine.node.is_leader:
                        if mine.node.high_watermark > offset:
                            acknowledged.append((offset, payload))
                            break
                        await asyncio.sleep(0.01)
                # A voter that does not lead leaves and comes back, through the leader.
                target = KAFKA_ID if r % 2 == 0 and leader != KAFKA_ID else next(i for i in (1, 2) if i != leader)
                await change(ours, leader, "remove", target)
                await change(ours, leader, "add", target)
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
                    new, epoch = await agreed(ours, epoch)
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
            await asyncio.sleep(3)
        finally:
            await asyncio.to_thread(kafka.stop, 60)
            for v in ours.values():
                await v.kill()

    try:
        asyncio.run(asyncio.wait_for(run(), 900))
    finally:
        print("\n".join(timeline))
    text = kafka.log_text()
    assert "Encountered fatal fault" not in text
    segments = {i: tmp_path / f"voter-{i}" / PARTITION_DIR / SEGMENT for i in (1, 2)}
    segments[KAFKA_ID] = tmp_path / "kafka" / "data" / PARTITION_DIR / SEGMENT
    all_logs = {i: wire.decode_entries(p.read_bytes()) for i, p in segments.items()}
    longest = _newest_leaders_log(all_logs)
    by_offset = {e.offset: e for e in longest}
    lost = [o for o, p in acknowledged if o not in by_offset or by_offset[o].payload != p]
    assert lost == [], f"acknowledged records lost at offsets {lost}"
    codec = VotersRecordCodec({})
    recorded = [s.ids for e in longest if (s := codec.voters_in(e)) is not None]
    distinct = [ids for n, ids in enumerate(recorded) if n == 0 or recorded[n - 1] != ids]
    assert len(distinct) == 1 + 2 * DYNAMIC_ROUNDS, (distinct, changes_made)
    assert len(elections) == DYNAMIC_ROUNDS
    print(
        f"dynamic mixed failovers={len(elections)} (kill={lost_by.count('kill')} pause={lost_by.count('pause')}) "
        f"election_ms_median={statistics.median(elections):.0f} election_ms_worst={max(elections):.0f} "
        f"voter_changes={len(changes_made)} (by_kafka={sum('kafka' in c for c in changes_made)}) "
        f"acknowledged={len(acknowledged)} lost=0 batches={len(longest)}"
    )
    problems = logs.problems(text, NOT_SERVED_YET + LOADED_MACHINE + PAUSED_LEADER + BOOTSTRAP_UNREACHABLE)
    assert problems == [], "\n".join(p[:400] for p in problems)


def _format_dynamic_kafka(
    kafka_dist: KafkaDistribution, tmp_path: Path, ports: dict[int, int], dirs: dict[int, uuid.UUID], cluster_id: str
) -> KafkaProcess:
    """Kafka's controller (id KAFKA_ID) formatted with --initial-controllers naming every
    voter of ``ports`` and controller.quorum.bootstrap.servers instead of static voters."""
    config = tmp_path / "kafka" / "controller.properties"
    config.parent.mkdir(parents=True)
    props = configs.kafka_controller_properties(
        node_id=KAFKA_ID, port=ports[KAFKA_ID], log_dir=tmp_path / "kafka" / "data"
    )
    del props["controller.quorum.voters"]
    props["controller.quorum.bootstrap.servers"] = ",".join(f"127.0.0.1:{p}" for p in ports.values())
    configs.write_properties(config, props)
    controllers = ",".join(f"{i}@127.0.0.1:{p}:{uuid_to_base64url(dirs[i])}" for i, p in ports.items())
    formatted = run_tool(
        kafka_dist,
        "kafka.tools.StorageTool",
        [
            *("format", "-t", cluster_id, "-c", str(config), "--release-version", METADATA_VERSION[0]),
            *("--initial-controllers", controllers),
        ],
        tmp_path / "kafka",
    )
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
    return KafkaProcess("controller", kafka_dist, config, tmp_path / "kafka" / "controller.log", heap_mb=512)
