"""A kraft.version 1 quorum of raft voters over TCP (testing/quorum.py ``dynamic=True``):
three voters from an initial set, a fourth added by AddRaftVoter after observing, voters
removed by RemoveRaftVoter (the leader too), a failover after each change; every log on disk
a prefix-consistent copy holding Kafka's VotersRecord batches; AddRaftVoter / RemoveRaftVoter
over the wire with Kafka's answers; a voter restarted on another port records its new endpoint by
UpdateRaftVoter."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from kraft_jbod.connection import ClientConnection, ResponseReceived
from kraft_jbod.controller.raft.messages import Error as RaftError
from kraft_jbod.controller.raft.voter_set import VoterKey
from kraft_jbod.controller.raft.voters_codec import VotersRecordCodec
from kraft_jbod.messages.add_raft_voter_request import AddRaftVoterRequest, Listener
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from kraft_jbod.testing.quorum import CLUSTER_ID, LocalQuorum
from kraft_jbod.wire.message import Message


def _prefix_consistent(logs: dict[int, list]) -> int:  # type: ignore[type-arg]
    """The longest log; every other is a prefix of it (entry bytes compared)."""
    longest = max(logs.values(), key=len)
    for entries in logs.values():
        assert [e.raw for e in entries] == [e.raw for e in longest[: len(entries)]]
    return len(longest)


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
            data = await asyncio.wait_for(reader.read(65536), 30)
            assert data, "the voter closed the connection"
            conn.receive_data(data)
    finally:
        writer.close()


def test_add_and_remove_voters_with_failovers(tmp_path: Path) -> None:
    async def run() -> None:
        async with LocalQuorum(tmp_path, voters=3, dynamic=True) as quorum:
            leader = await quorum.wait_for_leader()
            offset, epoch = await quorum.write([b"before"])
            assert await quorum.wait_committed(offset, epoch)
            await quorum.add_voter(4)
            assert quorum.voter_set() == {1, 2, 3, 4}
            # Failover in the four-voter quorum.
            assert leader.node is not None
            old_epoch = leader.node.epoch
            await quorum.kill(leader.node_id)
            new = await quorum.wait_for_leader(above_epoch=old_epoch)
            await quorum.restart(leader.node_id)
            offset, epoch = await quorum.write([b"four voters"])
            assert await quorum.wait_committed(offset, epoch)
            # Remove a follower, then the leader itself.
            follower = next(i for i in sorted(quorum.voter_set()) if i != new.node_id)
            await quorum.remove_voter(follower)
            assert quorum.voter_set() == {1, 2, 3, 4} - {follower}
            assert new.node is not None
            gone, gone_epoch = new.node_id, new.node.epoch
            await quorum.remove_voter(gone)
            after = await quorum.wait_for_leader(above_epoch=gone_epoch)
            assert after.node_id != gone
            assert quorum.voter_set() == {1, 2, 3, 4} - {follower, gone}
            offset, epoch = await quorum.write([b"two voters"])
            assert await quorum.wait_committed(offset, epoch)
            # Every node, the removed ones as observers, reaches the leader's log end.
            assert after.node is not None
            end = after.node.log.end_offset
            for _ in range(500):
                if all(v.node is not None and v.node.log.end_offset == end for v in quorum.voters.values()):
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError([v.describe() for v in quorum.voters.values()])
            assert len(quorum.voter_changes) == 3
        logs = quorum.logs()
        assert _prefix_consistent(logs) >= 8
        codec = VotersRecordCodec({})
        sets = [s.ids for e in logs[after.node_id] if (s := codec.voters_in(e)) is not None]
        assert sets == [{1, 2, 3}, {1, 2, 3, 4}, {1, 2, 3, 4} - {follower}, {1, 2, 3, 4} - {follower, gone}]

    asyncio.run(run())


def test_voter_changes_over_the_wire(tmp_path: Path) -> None:
    async def run() -> None:
        async with LocalQuorum(tmp_path, voters=3, dynamic=True) as quorum:
            leader = await quorum.wait_for_leader()
            offset, epoch = await quorum.write([b"x"])
            assert await quorum.wait_committed(offset, epoch)
            follower = next(i for i in quorum.ids if i != leader.node_id)
            at_leader, at_follower = quorum.addresses[leader.node_id], quorum.addresses[follower]
            stranger = uuid.uuid4()
            add = AddRaftVoterRequest(
                cluster_id=CLUSTER_ID,
                timeout_ms=5000,
                voter_id=9,
                voter_directory_id=stranger,
                listeners=[Listener(name="CONTROLLER", host="127.0.0.1", port=1)],
                ack_when_committed=True,
            )
            answer = await _call(at_follower, add, 1)
            assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]
            bad_cluster = AddRaftVoterRequest(**{**_fields(add), "cluster_id": "AAAAAAAAAAAAAAAAAAAAAA"})
            answer = await _call(at_leader, bad_cluster, 1)
            assert answer.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID  # type: ignore[attr-defined]
            no_listener = AddRaftVoterRequest(
                **{**_fields(add), "listeners": [Listener(name="OTHER", host="h", port=1)]}
            )
            answer = await _call(at_leader, no_listener, 1)
            assert answer.error_code == ErrorCode.INVALID_REQUEST  # type: ignore[attr-defined]
            dup = AddRaftVoterRequest(**{**_fields(add), "voter_id": follower})
            answer = await _call(at_leader, dup, 1)
            assert answer.error_code == ErrorCode.DUPLICATE_VOTER  # type: ignore[attr-defined]
            # Nobody listens on port 1: the ApiVersions round trip fails.
            answer = await _call(at_leader, add, 1)
            assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
            remove = RemoveRaftVoterRequest(cluster_id=CLUSTER_ID, voter_id=9, voter_directory_id=stranger)
            answer = await _call(at_leader, remove, 0)
            assert answer.error_code == ErrorCode.VOTER_NOT_FOUND  # type: ignore[attr-defined]
            no_dir = RemoveRaftVoterRequest(
                cluster_id=CLUSTER_ID, voter_id=follower, voter_directory_id=uuid.UUID(int=0)
            )
            answer = await _call(at_leader, no_dir, 0)
            assert answer.error_code == ErrorCode.INVALID_REQUEST  # type: ignore[attr-defined]
            real = RemoveRaftVoterRequest(
                cluster_id=CLUSTER_ID, voter_id=follower, voter_directory_id=quorum.directory_ids[follower]
            )
            answer = await _call(at_leader, real, 0)
            assert answer.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
            assert quorum.voter_set() == set(quorum.ids) - {follower}

    asyncio.run(run())


def _fields(msg: object) -> dict[str, object]:
    return {f: getattr(msg, f) for f in msg.__slots__ if f != "unknown_tagged_fields"}  # type: ignore[attr-defined]


def test_directory_ids_round_trip_through_kafka_bytes() -> None:
    from kraft_jbod import codec
    from kraft_jbod.controller.raft import messages as core
    from kraft_jbod.controller.raft import wire

    a, b = uuid.uuid4(), uuid.uuid4()
    endpoints = {1: ("CONTROLLER", "127.0.0.1", 9093), 2: ("CONTROLLER", "127.0.0.1", 9094)}
    for msg in (
        core.VoteRequest(1, 5, 3, 120, False, candidate_directory_id=a, voter_directory_id=b),
        core.BeginQuorumEpochRequest(1, 5, voter_directory_id=b),
        core.FetchRequest(2, 5, 77, 4, a),
    ):
        api_key, version, body = wire.request_to_wire(msg, cluster_id=CLUSTER_ID, destination=2, endpoints=endpoints)
        decoded = codec.request_class(api_key).decode(body.encode(version), version)
        assert wire.request_from_wire(api_key, decoded, cluster_id=CLUSTER_ID) == msg


def test_voters_record_batch_round_trips_and_bad_bytes_are_no_voter_set() -> None:
    from kraft_jbod.controller.raft import messages as core
    from kraft_jbod.controller.raft import wire
    from kraft_jbod.controller.raft.voter_set import VoterKey, VoterSet

    codec = VotersRecordCodec({1: ("CONTROLLER", "h1", 9093)})
    voters = VoterSet.of([VoterKey(1, uuid.uuid4()), VoterKey(2, uuid.uuid4())])
    entry = codec.voters_entry(7, 3, voters)
    (back,) = wire.decode_entries(entry.raw or b"")
    assert (back.offset, back.count, back.epoch) == (7, 2, 3)
    learner = VotersRecordCodec({})
    assert learner.voters_in(back) == voters
    assert learner.endpoints == {1: ("CONTROLLER", "h1", 9093)}  # endpoints learned from the record
    assert entry.raw is not None
    torn = core.Entry(7, 3, b"", control=True, count=2, raw=entry.raw[:-5])
    assert learner.voters_in(torn) is None
    assert learner.voters_in(core.Entry(0, 1, b"x")) is None


def test_auto_join_and_a_reformatted_voter_rejoining(tmp_path: Path) -> None:
    """controller.quorum.auto.join.enable: a new voter formatted with no voter set asks the
    leader to add it; a voter whose disk was wiped (same id, new directory id) first has its
    old key removed, then adds itself, as Kafka's observer does."""

    async def run() -> None:
        async with LocalQuorum(tmp_path, voters=3, dynamic=True) as quorum:
            await quorum.wait_for_leader()
            joiner = await quorum.add_voter(4, auto_join=True)
            assert quorum.voter_set() == {1, 2, 3, 4}
            assert ("add", RaftError.NONE) in joiner.join_answers
            leader = await quorum.wait_for_leader()
            target = next(i for i in (1, 2, 3) if i != leader.node_id)
            old = quorum.directory_ids[target]
            again = await quorum.reformat(target)
            assert quorum.directory_ids[target] != old
            kinds = [k for k, e in again.join_answers if e is RaftError.NONE]
            assert kinds[:2] == ["remove", "add"], again.join_answers
            leader = await quorum.wait_for_leader()
            assert leader.node is not None
            assert leader.node.voter_set.key_of(target) == VoterKey(target, quorum.directory_ids[target])

    asyncio.run(run())


def test_a_voter_restarted_on_another_port_gets_its_new_endpoint_into_the_log(tmp_path: Path) -> None:
    """UpdateRaftVoter at kraft.version 1: the restarted voter finds its entry in the newest
    VotersRecord naming its old port, asks the leader, and the leader records the new one."""

    async def run() -> None:
        async with LocalQuorum(tmp_path, voters=3, dynamic=True) as quorum:
            leader = await quorum.wait_for_leader()
            offset, epoch = await quorum.write([b"x"])
            assert await quorum.wait_committed(offset, epoch)
            moved = next(i for i in quorum.ids if i != leader.node_id)
            old = quorum.addresses[moved]
            await quorum.kill(moved)
            voter = quorum._voter(moved, ("127.0.0.1", 0))
            await voter.start()
            quorum.addresses[moved] = voter.addresses[moved]
            assert quorum.addresses[moved] != old
            voter.connect(quorum.addresses)
            wanted = (voter.listener, *quorum.addresses[moved])
            assert voter.codec is not None
            for _ in range(1500):
                lead = quorum.leader()
                if (
                    lead is not None
                    and lead.codec is not None
                    and lead.codec.endpoints.get(moved) == wanted
                    and (voter.codec.recorded.get(moved) or (None,))[0] == wanted
                ):
                    break
                await asyncio.sleep(0.02)
            else:
                raise AssertionError([v.describe() for v in quorum.voters.values()])
            assert ErrorCode.NONE in voter.update_answers
            assert lead.addresses[moved] == quorum.addresses[moved]  # the leader reaches it there
            # Once recorded, the voter asks no more (its entry matches its listener).
            asked = len(voter.update_answers)
            await asyncio.sleep(quorum.timing.fetch_timeout_ms * 3 / 1000)
            assert len(voter.update_answers) == asked
            assert quorum.voter_set() == {1, 2, 3}
        reader = VotersRecordCodec({})
        sets = [s.ids for e in quorum.logs()[lead.node_id] if (s := reader.voters_in(e)) is not None]
        assert sets[-1] == {1, 2, 3} and len(sets) >= 2
        assert reader.recorded[moved][0] == wanted

    asyncio.run(run())
