"""UpdateRaftVoter (api 82) at kraft.version 1: the leader of a dynamic quorum records a
voter's new endpoint and kraft.version range in a VotersRecord (node.py Rules U1-U5,
voter_updates.py Rule 6), and a follower voter knows when to ask (``update_voter_due``).

The pure nodes here write Kafka's VotersRecord batches (voters_codec.py), so the bytes the
leader appends are read back with a codec of their own."""

from __future__ import annotations

import uuid

from kraft_jbod.controller.raft.messages import Error
from kraft_jbod.controller.raft.node import RaftNode
from kraft_jbod.controller.raft.simulation import Checker, Simulation
from kraft_jbod.controller.raft.voter_set import VoterKey
from kraft_jbod.controller.raft.voter_updates import answer_update_voter
from kraft_jbod.controller.raft.voters_codec import VotersRecordCodec
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.update_raft_voter_request import KRaftVersionFeature, Listener, UpdateRaftVoterRequest

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
LISTENER = "CONTROLLER"


class _Unchecked(Checker):
    def observe(self, nodes: dict[int, RaftNode]) -> None:
        pass


def _quorum(seed: int = 5) -> tuple[Simulation, VotersRecordCodec]:
    """Three dynamic voters writing Kafka's VotersRecord batches (one codec shared: the
    endpoints every voter was configured with)."""
    sim = Simulation(3, seed=seed, dynamic=True)
    codec = VotersRecordCodec({i: (LISTENER, "127.0.0.1", 9090 + i) for i in sim.ids}, clock_ms=lambda: 1)
    for node in sim.nodes.values():
        node.voter_codec = codec  # nothing is in the logs yet: nothing to read again
    # The simulation's safety checker takes one entry per offset; Kafka's voter-set batch
    # spans two (test_raft_dynamic_quorum.py runs the checker over the same changes).
    sim.checker = _Unchecked()
    return sim, codec


def _settled(sim: Simulation) -> RaftNode:
    """The leader once its epoch and the bootstrap VotersRecord are committed."""
    assert sim.run_until(
        lambda: (
            (lead := sim.leader()) is not None
            and lead.voter_history.recorded
            and lead.high_watermark > lead.voter_history.latest_offset
        ),
        10_000,
    )
    leader = sim.leader()
    assert leader is not None
    return leader


def _request(sim: Simulation, voter: int, port: int, **changes: object) -> UpdateRaftVoterRequest:
    leader = sim.leader()
    fields: dict[str, object] = {
        "cluster_id": CLUSTER,
        "current_leader_epoch": leader.epoch if leader is not None else 0,
        "voter_id": voter,
        "voter_directory_id": sim.directories[voter],
        "listeners": [Listener(name=LISTENER, host="127.0.0.1", port=port)],
        "k_raft_version_feature": KRaftVersionFeature(min_supported_version=0, max_supported_version=1),
    }
    fields.update(changes)
    return UpdateRaftVoterRequest(**fields)  # type: ignore[arg-type]


def _answer(node: RaftNode, req: UpdateRaftVoterRequest, codec: VotersRecordCodec, now_ms: int) -> int:
    resp = answer_update_voter(
        node,
        req,
        cluster_id=CLUSTER,
        listener=LISTENER,
        endpoints=codec.endpoints,
        now_ms=now_ms,
        record=lambda endpoint, supported: codec.update(req.voter_id, endpoint, supported),
    )
    return resp.error_code


def _follower(sim: Simulation, leader: RaftNode) -> int:
    return next(i for i in sim.ids if i != leader.node_id)


def test_the_leader_appends_a_voters_record_with_the_new_endpoint_and_answers_at_once() -> None:
    sim, codec = _quorum()
    leader = _settled(sim)
    voter = _follower(sim, leader)
    end, voters = leader.log.end_offset, leader.voter_set
    req = _request(
        sim, voter, 7777, k_raft_version_feature=KRaftVersionFeature(min_supported_version=1, max_supported_version=1)
    )
    assert _answer(leader, req, codec, sim.now) == ErrorCode.NONE
    # One VotersRecord batch appended, answered before it commits (as Kafka's leader does).
    assert leader.log.end_offset == end + 2  # KRaftVersionRecord + VotersRecord
    assert leader.high_watermark <= end
    assert leader.voter_history.latest_offset == end
    (entry,) = leader.log.read(end, 10)
    reader = VotersRecordCodec({})
    assert reader.voters_in(entry) == voters  # the same voters, keys unchanged
    assert reader.recorded[voter] == ((LISTENER, "127.0.0.1", 7777), (1, 1))
    for other in sim.ids:
        if other != voter:
            assert reader.recorded[other] == ((LISTENER, "127.0.0.1", 9090 + other), (0, 1))
    # It commits, and every voter holds it.
    assert sim.run_until(lambda: leader.high_watermark > end, 5_000)
    assert sim.run_until(lambda: all(n.voter_history.latest_offset == end for n in sim.nodes.values()), 5_000)


def test_refusals_in_kafkas_order_write_nothing() -> None:
    sim, codec = _quorum()
    leader = _settled(sim)
    voter = _follower(sim, leader)
    follower = sim.nodes[voter]
    key = VoterKey(voter, sim.directories[voter])
    end = leader.log.end_offset

    def refused(node: RaftNode, k: VoterKey, supported: tuple[int, int] = (0, 1), **kw: bool) -> Error | None:
        called: list[bool] = []
        reply = node.update_voter(k, supported, sim.now, record=lambda: called.append(True), **kw)
        assert not called  # the codec is told nothing on a refusal
        return reply.error

    assert refused(follower, key) is Error.NOT_LEADER_OR_FOLLOWER
    # A range without kraft.version 1 beats an unknown voter (Kafka checks the range first).
    assert refused(leader, VoterKey(9, uuid.UUID(int=9)), (0, 0)) is Error.INVALID_REQUEST
    assert refused(leader, key, (2, 3)) is Error.INVALID_REQUEST
    assert refused(leader, key, has_listener=False) is Error.INVALID_REQUEST
    assert refused(leader, VoterKey(9, uuid.UUID(int=9))) is Error.VOTER_NOT_FOUND
    assert refused(leader, VoterKey(voter, uuid.UUID(int=424242))) is Error.VOTER_NOT_FOUND  # another disk
    assert refused(leader, VoterKey(voter, None)) is Error.VOTER_NOT_FOUND
    assert leader.log.end_offset == end
    # A pending AddRaftVoter: one change at a time, before any other check.
    sim.add_node(4)
    sim.step(300)
    pending = leader.add_voter(VoterKey(4, sim.directories[4]), sim.now)
    assert pending.pending
    assert refused(leader, VoterKey(9, uuid.UUID(int=9)), (0, 0)) is Error.REQUEST_TIMED_OUT
    leader.add_voter_versions(pending.change_id, None, sim.now)  # that change fails
    assert leader.log.end_offset == end
    assert codec.endpoints[voter] == (LISTENER, "127.0.0.1", 9090 + voter)


def test_uncommitted_voter_set_holds_the_next_update_back() -> None:
    sim, codec = _quorum()
    leader = _settled(sim)
    voter = _follower(sim, leader)
    for i in sim.ids:
        if i != leader.node_id:
            sim.pause(i)
    assert _answer(leader, _request(sim, voter, 7001), codec, sim.now) == ErrorCode.NONE
    end = leader.log.end_offset
    assert _answer(leader, _request(sim, voter, 7002), codec, sim.now) == ErrorCode.REQUEST_TIMED_OUT
    assert leader.log.end_offset == end
    for i in sim.ids:
        if i != leader.node_id:
            sim.resume(i)
    assert sim.run_until(lambda: leader.high_watermark >= end, 5_000)
    assert _answer(leader, _request(sim, voter, 7002), codec, sim.now) == ErrorCode.NONE
    reader = VotersRecordCodec({})
    assert reader.voters_in(leader.log.read(end, 1)[0]) == leader.voter_set
    assert reader.recorded[voter][0] == (LISTENER, "127.0.0.1", 7002)


def test_a_new_leader_refuses_until_its_epoch_commits() -> None:
    sim, codec = _quorum()
    assert sim.run_until(lambda: sim.leader() is not None, 10_000)
    leader = sim.leader()
    assert leader is not None
    assert leader.high_watermark <= leader.epoch_start  # no follower fetched yet
    voter = _follower(sim, leader)
    end = leader.log.end_offset
    assert _answer(leader, _request(sim, voter, 7777), codec, sim.now) == ErrorCode.REQUEST_TIMED_OUT
    assert leader.log.end_offset == end


def test_the_shell_checks_come_first_as_at_kraft_version_0() -> None:
    sim, codec = _quorum()
    leader = _settled(sim)
    voter = _follower(sim, leader)
    end = leader.log.end_offset
    assert _answer(leader, _request(sim, voter, 1, cluster_id="another"), codec, sim.now) == (
        ErrorCode.INCONSISTENT_CLUSTER_ID
    )
    stale = _request(sim, voter, 1, current_leader_epoch=leader.epoch - 1)
    assert _answer(leader, stale, codec, sim.now) == ErrorCode.FENCED_LEADER_EPOCH
    other = _request(sim, voter, 1, listeners=[Listener(name="OTHER", host="h", port=1)])
    assert _answer(leader, other, codec, sim.now) == ErrorCode.INVALID_REQUEST
    inverted = KRaftVersionFeature(min_supported_version=1, max_supported_version=0)
    assert _answer(leader, _request(sim, voter, 1, k_raft_version_feature=inverted), codec, sim.now) == (
        ErrorCode.INVALID_REQUEST
    )
    assert _answer(leader, _request(sim, voter, 1, voter_directory_id=uuid.UUID(int=0)), codec, sim.now) == (
        ErrorCode.INVALID_REQUEST
    )
    assert leader.log.end_offset == end
    assert codec.endpoints[voter] == (LISTENER, "127.0.0.1", 9090 + voter)


def test_update_voter_due_once_per_fetch_timeout_on_a_following_voter() -> None:
    sim, _ = _quorum()
    leader = _settled(sim)
    follower = sim.nodes[_follower(sim, leader)]
    period = follower.timing.fetch_timeout_ms
    assert not leader.update_voter_due(sim.now + 10 * period)
    # Due a fetch timeout after it began following, then once per period.
    due = next(t for t in range(sim.now, sim.now + 2 * period) if follower.update_voter_due(t))
    assert not follower.update_voter_due(due + period - 1)
    assert follower.update_voter_due(due + period)
