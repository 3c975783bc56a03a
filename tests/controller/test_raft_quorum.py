"""Three raft voters over TCP on 127.0.0.1 (controller/raft/voter.py, testing/quorum.py):
repeated failovers of every kind, each voter's log on disk a prefix-consistent copy, no
acknowledged record lost; and the wire translation round-trips through the real codecs."""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
from pathlib import Path

import pytest

from kraft_jbod import codec
from kraft_jbod.controller.log import decode_control_record
from kraft_jbod.controller.raft import messages as core
from kraft_jbod.controller.raft import wire
from kraft_jbod.controller.raft.file_log import FileReplicaLog
from kraft_jbod.controller.raft.voter import leader_change_payload
from kraft_jbod.errors import DecodeError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.leader_change_message import LeaderChangeMessage
from kraft_jbod.testing.quorum import LocalQuorum
from kraft_jbod.wire.records import Record, RecordBatch, read_record_batch, write_record_batch

ENDPOINTS = {1: ("CONTROLLER", "127.0.0.1", 9093), 2: ("CONTROLLER", "127.0.0.1", 9094)}
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


# --------------------------------------------------------------------------- wire


@pytest.mark.parametrize(
    "request_msg",
    [
        core.VoteRequest(1, 4, 3, 120, pre_vote=True),
        core.VoteRequest(1, 5, 3, 120, pre_vote=False),
        core.BeginQuorumEpochRequest(1, 5),
        core.EndQuorumEpochRequest(1, 5, (2, 3)),
        core.FetchRequest(2, 5, 77, 4),
    ],
)
def test_requests_round_trip_through_kafka_bytes(request_msg: core.Message) -> None:
    api_key, version, body = wire.request_to_wire(request_msg, cluster_id=CLUSTER, destination=2, endpoints=ENDPOINTS)
    decoded = codec.request_class(api_key).decode(body.encode(version), version)
    assert wire.request_from_wire(api_key, decoded, cluster_id=CLUSTER) == request_msg
    assert wire.request_from_wire(api_key, decoded, cluster_id="AAAAAAAAAAAAAAAAAAAAAA") == 104


@pytest.mark.parametrize(
    ("request_msg", "response"),
    [
        (core.VoteRequest(2, 5, 3, 9, pre_vote=True), core.VoteResponse(1, 5, -1, True, True)),
        (core.BeginQuorumEpochRequest(1, 5), core.BeginQuorumEpochResponse(2, 5, 1)),
        (core.EndQuorumEpochRequest(1, 5, ()), core.EndQuorumEpochResponse(2, 6, -1, core.Error.FENCED_LEADER_EPOCH)),
        (
            core.FetchRequest(2, 5, 1, 1),
            core.FetchResponse(
                1,
                5,
                core.Error.NONE,
                1,
                high_watermark=2,
                entries=(core.Entry(1, 5, b"lc", control=True), core.Entry(2, 5, b"data")),
            ),
        ),
        (
            core.FetchRequest(2, 5, 9, 4),
            core.FetchResponse(1, 5, core.Error.NONE, 9, high_watermark=3, diverging_epoch=3, diverging_end_offset=6),
        ),
    ],
)
def test_responses_round_trip_through_kafka_bytes(request_msg: core.Message, response: core.Message) -> None:
    api_key, version, _ = wire.request_to_wire(request_msg, cluster_id=CLUSTER, destination=2, endpoints=ENDPOINTS)
    body = wire.response_to_wire(response, version=version, endpoints=ENDPOINTS, timestamp_ms=1)
    decoded = codec.response_class(api_key).decode(body.encode(version), version)
    source = response.voter_id if not isinstance(response, core.FetchResponse) else 1  # type: ignore[union-attr]
    got = wire.response_from_wire(request_msg, decoded, source=source)
    if isinstance(got, core.FetchResponse):
        # Received batches keep their bytes (raw); what they hold is what was sent.
        assert all(e.raw is not None for e in got.entries)
        got = dataclasses.replace(got, entries=tuple(dataclasses.replace(e, raw=None) for e in got.entries))
    assert got == response
    if api_key == ApiKey.FETCH and response.leader_id == 1:  # type: ignore[union-attr]
        assert [(n.node_id, n.port) for n in decoded.node_endpoints] == [(1, 9093)]


def test_entries_are_kafka_batches_with_a_leader_change_control_record() -> None:
    payload = leader_change_payload(2, frozenset({1, 2, 3}), frozenset({2, 3}))
    data = wire.encode_entries([core.Entry(0, 4, payload, control=True), core.Entry(1, 4, b"x")], timestamp_ms=5)
    batch, pos = read_record_batch(data, 0)
    assert batch.is_control and batch.partition_leader_epoch == 4 and batch.base_offset == 0
    ctype, msg = decode_control_record(batch.records[0])
    assert ctype == 2 and isinstance(msg, LeaderChangeMessage) and msg.leader_id == 2
    assert [v.voter_id for v in msg.granting_voters] == [2, 3]
    second, _ = read_record_batch(data, pos)
    assert (second.base_offset, second.records[0].value, second.is_control) == (1, b"x", False)
    assert wire.decode_entries(data + data[:30]) == wire.decode_entries(data)  # a partial tail waits
    with pytest.raises(DecodeError):
        wire.decode_entries(data[:-3] + bytes([data[-3] ^ 0xFF]) + data[-2:])  # CRC


def test_a_batch_of_several_records_is_one_entry_spanning_them(tmp_path: Path) -> None:
    """Kafka's controller writes batches of many records; a voter stores and serves them whole."""
    first = bytearray()
    write_record_batch(
        first,
        RecordBatch.of([Record(offset_delta=i, value=b"v%d" % i) for i in range(3)], base_offset=0, base_timestamp=7,
                       partition_leader_epoch=2),
    )  # fmt: skip
    [entry] = wire.decode_entries(bytes(first))
    assert (entry.offset, entry.count, entry.next_offset, entry.epoch, entry.raw) == (0, 3, 3, 2, bytes(first))
    log = FileReplicaLog(tmp_path, fsync=False)
    log.append([entry, core.Entry(3, 2, b"mine")])
    assert log.end_offset == 4 and log.epoch_end(2) == (2, 4)
    assert log.read(1, 10) == log.entries  # the batch holding offset 1, then the rest
    assert wire.encode_entries(log.read(0, 1), timestamp_ms=0) == bytes(first)  # served byte for byte
    log.truncate_to(2)  # inside the batch: the batch goes whole
    assert log.end_offset == 0 and log.entries == []
    log.append([entry])
    log.close()
    assert FileReplicaLog(tmp_path, fsync=False).entries == [entry]


def test_file_log_survives_reopen_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    log = FileReplicaLog(tmp_path, fsync=False)
    log.append([core.Entry(0, 1, b"", control=True), core.Entry(1, 1, b"a"), core.Entry(2, 2, b"b")])
    log.truncate_to(2)
    log.append([core.Entry(2, 3, b"c")])
    log.close()
    with open(log.path, "ab") as f:
        f.write(b"\x00" * 40)
    again = FileReplicaLog(tmp_path, fsync=False)
    assert [(e.offset, e.epoch, e.payload) for e in again.entries] == [(0, 1, b""), (1, 1, b"a"), (2, 3, b"c")]
    assert again.path.stat().st_size == log.path.stat().st_size
    again.close()


# --------------------------------------------------------------------------- over TCP


async def _failovers(quorum: LocalQuorum, how: str, rounds: int) -> list[tuple[int, bytes]]:
    acknowledged: list[tuple[int, bytes]] = []
    for r in range(rounds):
        for i in range(10):
            payload = b"%s-%d-%d" % (how.encode(), r, i)
            offset, epoch = await quorum.write([payload])
            if await quorum.wait_committed(offset, epoch):
                acknowledged.append((offset, payload))
        leader = await quorum.wait_for_leader()
        assert leader.node is not None
        old, epoch = leader.node_id, leader.node.epoch
        if how == "kill":
            await quorum.kill(old)
        elif how == "pause":
            quorum.pause(old)
        elif how == "isolate":
            quorum.isolate(old)
        else:
            quorum.move_leadership()
        new = await quorum.wait_for_leader(above_epoch=epoch, timeout=30)
        assert new.node_id != old or how == "move"
        if how == "kill":
            await quorum.restart(old)
        elif how == "pause":
            quorum.resume(old)
        elif how == "isolate":
            quorum.heal(old)
    return acknowledged


@pytest.mark.parametrize(("how", "rounds"), [("kill", 8), ("pause", 4), ("isolate", 4), ("move", 4)])
def test_failovers_over_tcp_keep_every_acknowledged_record(tmp_path: Path, how: str, rounds: int) -> None:
    async def main() -> tuple[list[tuple[int, bytes]], list[int]]:
        async with LocalQuorum(tmp_path) as quorum:
            await quorum.wait_for_leader(timeout=30)
            acknowledged = await _failovers(quorum, how, rounds)
            # Let every voter catch up before the logs are compared.
            final, epoch = await quorum.write([b"last"])
            assert await quorum.wait_committed(final, epoch)
            for _ in range(300):
                if all(v.log is not None and v.log.end_offset > final for v in quorum.voters.values()):
                    break
                await asyncio.sleep(0.02)
            return acknowledged, quorum.elections

    acknowledged, elections = asyncio.run(asyncio.wait_for(main(), 240))
    assert len(elections) == rounds
    logs = LocalQuorum(tmp_path).logs()
    longest = max(logs.values(), key=len)
    for voter, entries in logs.items():
        assert entries == longest[: len(entries)], f"voter {voter}'s log is not a prefix of the longest"
        assert len(entries) == len(longest)
    assert len(acknowledged) >= rounds * 5
    lost = [(o, p) for o, p in acknowledged if o >= len(longest) or longest[o].payload != p]
    assert lost == []
    # Every epoch starts with a LeaderChange control entry naming its leader.
    starts = [e for e in longest if e.control]
    assert len(starts) >= rounds + 1
    print(
        f"{how}: {len(elections)} failovers, election ms median {statistics.median(elections)} worst {max(elections)}"
    )


def test_the_quorum_state_file_is_kafkas(tmp_path: Path) -> None:
    async def main() -> int:
        async with LocalQuorum(tmp_path) as quorum:
            leader = await quorum.wait_for_leader(timeout=30)
            assert leader.node is not None
            return leader.node_id

    leader = asyncio.run(asyncio.wait_for(main(), 60))
    text = (tmp_path / f"voter-{leader}" / "quorum-state").read_text()
    assert f'"leaderId":{leader}' in text and '"data_version":1' in text


async def test_the_pytest_fixture_scripts_a_failover(kraft_quorum: LocalQuorum) -> None:
    """The docs/controller-quorum.md example, as users write it."""
    leader = await kraft_quorum.wait_for_leader(timeout=30)
    assert leader.node is not None
    offset, epoch = await kraft_quorum.write([b"before"])
    assert await kraft_quorum.wait_committed(offset, epoch)
    await kraft_quorum.kill(leader.node_id)
    new = await kraft_quorum.wait_for_leader(above_epoch=epoch, timeout=30)
    assert new.node_id != leader.node_id
    assert new.log is not None and new.log.entries[offset].payload == b"before"
    await kraft_quorum.restart(leader.node_id)
    assert len(kraft_quorum.elections) == 1
