"""A dynamic quorum (kraft.version 1) of pure raft nodes: the voter set in the log, and
AddRaftVoter / RemoveRaftVoter on the leader with Kafka's answers (node.py Rules V1-V9)."""

from __future__ import annotations

import statistics
import uuid

import pytest

from kraft_jbod.controller.raft.messages import BeginQuorumEpochRequest, Error, VoteRequest
from kraft_jbod.controller.raft.node import RaftNode
from kraft_jbod.controller.raft.simulation import Network, Simulation, run_failovers
from kraft_jbod.controller.raft.voter_set import VoterKey, VoterSet, VoterSetHistory

A, B, C = (uuid.UUID(int=i) for i in (11, 12, 13))


def _elected(sim: Simulation, limit_ms: int = 10_000) -> RaftNode:
    assert sim.run_until(lambda: sim.leader() is not None and sim.leader().high_watermark > 0, limit_ms)  # type: ignore[union-attr]
    leader = sim.leader()
    assert leader is not None
    sim.step(100)  # the first voter set commits
    return leader


def _write(sim: Simulation, count: int, tag: str) -> None:
    for i in range(count):
        sim.propose(f"{tag}{i}".encode())
        sim.step(5)


def _prefix_consistent(sim: Simulation) -> int:
    """Every two live logs agree below the smaller high watermark; the entries compared."""
    nodes = list(sim.nodes.values())
    compared = 0
    for a in nodes:
        for b in nodes:
            upto = min(a.high_watermark, b.high_watermark)
            assert sim.logs[a.node_id].entries[:upto] == sim.logs[b.node_id].entries[:upto]
            compared = max(compared, upto)
    return compared


# ---------------------------------------------------------------- the voter set itself


def test_voter_set_refuses_duplicates_and_never_empties() -> None:
    voters = VoterSet.of([VoterKey(1, A), VoterKey(2, B)])
    assert voters.add(VoterKey(2, C)) is None  # node 2 votes already, whatever its directory
    assert voters.remove(VoterKey(2, C)) is None  # another directory: not that voter
    one = voters.remove(VoterKey(2, B))
    assert one is not None and one.ids == {1}
    assert one.remove(VoterKey(1, A)) is None  # the last voter stays
    assert voters.is_voter(VoterKey(1, None)) and not voters.is_voter(VoterKey(1, B))
    with pytest.raises(ValueError, match="twice"):
        VoterSet.of([VoterKey(1, A), VoterKey(1, B)])


def test_history_is_newest_recorded_and_truncation_rolls_back() -> None:
    boot = VoterSet.of([VoterKey(1, A)])
    two = VoterSet.of([VoterKey(1, A), VoterKey(2, B)])
    history = VoterSetHistory(boot)
    assert history.latest == boot and history.latest_offset == -1 and not history.recorded
    history.appended(1, boot)
    history.appended(7, two)
    assert history.latest == two and history.committed(7) == boot and history.committed(8) == two
    history.truncated(7)
    assert history.latest == boot and history.latest_offset == 1


# ---------------------------------------------------------------- the quorum


def test_bootstrap_set_is_recorded_by_the_first_leader_and_survives_restart() -> None:
    sim = Simulation(3, seed=3, dynamic=True)
    leader = _elected(sim)
    entries = sim.logs[leader.node_id].entries
    assert sim.codec is not None
    recorded = sim.codec.voters_in(entries[1])
    assert recorded is not None and recorded.ids == {1, 2, 3}
    assert {k.directory_id for k in recorded} == {sim.directories[i] for i in (1, 2, 3)}
    follower = next(i for i in sim.nodes if i != leader.node_id)
    sim.kill(follower)
    sim.start(follower)  # a restart reads the voter set back from its log
    assert sim.nodes[follower].voter_history.latest_offset == 1


def test_add_then_remove_voters_with_failover_after_each_change() -> None:
    sim = Simulation(3, seed=5, dynamic=True)
    _elected(sim)
    _write(sim, 40, "a")
    sim.add_node(4)
    sim.step(400)
    assert not sim.nodes[4].is_voter and sim.nodes[4].log.end_offset > 40  # observing
    assert sim.add_voter(4) is Error.NONE
    assert all(n.voters == {1, 2, 3, 4} for n in sim.nodes.values())
    # Kill the leader: the four-voter quorum (majority 3) elects another.
    old = sim.leader()
    assert old is not None
    sim.kill(old.node_id)
    assert sim.run_until(lambda: sim.leader() is not None, 10_000)
    sim.start(old.node_id)
    _write(sim, 40, "b")
    leader = sim.leader()
    assert leader is not None
    victim = next(i for i in sorted(sim.nodes) if i != leader.node_id)
    assert sim.remove_voter(victim) is Error.NONE
    sim.step(200)
    assert all(n.voters == {1, 2, 3, 4} - {victim} for n in sim.nodes.values())
    assert not sim.nodes[victim].is_voter
    # The leader removes itself: it resigns once that commits and another leads.
    leader = sim.leader()
    assert leader is not None
    gone = leader.node_id
    assert sim.remove_voter(gone) is Error.NONE
    assert sim.run_until(lambda: (n := sim.leader()) is not None and n.node_id != gone, 10_000)
    _write(sim, 40, "c")
    sim.step(500)
    survivors = {1, 2, 3, 4} - {victim, gone}
    assert all(n.voters == survivors for n in sim.nodes.values())
    assert not sim.nodes[gone].is_voter
    # The removed nodes keep replicating as observers; nothing committed was lost.
    # Every node, voter or not, catches up with the leader (a removed one finds it as an observer).
    assert sim.run_until(lambda: len({(n.high_watermark, n.log.end_offset) for n in sim.nodes.values()}) == 1, 10_000)
    assert _prefix_consistent(sim) > 120
    assert sim.lost() == 0


def test_uncommitted_voter_set_is_in_force_and_truncation_rolls_it_back() -> None:
    sim = Simulation(3, seed=7, dynamic=True)
    old = _elected(sim)
    others = [i for i in sim.ids if i != old.node_id]
    sim.network.isolate(old.node_id, sim.ids)
    reply = old.remove_voter(VoterKey(others[0], sim.directories[others[0]]), sim.now)
    assert reply.pending
    assert old.voters == {old.node_id, others[1]}  # in force at once, not committed
    assert sim.run_until(lambda: (n := sim.leader()) is not None and n.node_id != old.node_id, 10_000)
    sim.step(3000)  # check-quorum makes the isolated leader resign
    assert not old.is_leader
    # Unanswered within the request timeout, or the epoch lost first: Kafka's two answers.
    (answer,) = [e for c, e, _ in old.voter_change_results if c == reply.change_id]
    assert answer in (Error.REQUEST_TIMED_OUT, Error.NOT_LEADER_OR_FOLLOWER)
    sim.network.heal()
    sim.step(1000)
    assert old.voters == {1, 2, 3}  # its uncommitted VotersRecord was truncated away
    assert _prefix_consistent(sim) > 0


# ---------------------------------------------------------------- Kafka's refusals, one by one


def _quorum(seed: int = 11) -> tuple[Simulation, RaftNode]:
    sim = Simulation(3, seed=seed, dynamic=True, network=Network())
    return sim, _elected(sim)


def test_non_leader_answers_not_leader_or_follower() -> None:
    sim, leader = _quorum()
    follower = next(n for n in sim.nodes.values() if n is not leader)
    assert follower.add_voter(VoterKey(9, A), sim.now).error is Error.NOT_LEADER_OR_FOLLOWER
    assert follower.remove_voter(VoterKey(1, None), sim.now).error is Error.NOT_LEADER_OR_FOLLOWER


def test_add_refusals_in_kafkas_order() -> None:
    sim, leader = _quorum()
    assert leader.add_voter(VoterKey(9, None), sim.now).error is Error.INVALID_REQUEST
    assert leader.add_voter(VoterKey(9, A), sim.now, has_listener=False).error is Error.INVALID_REQUEST
    taken = leader.voter_set.key_of(2)
    assert taken is not None
    assert leader.add_voter(VoterKey(2, C), sim.now).error is Error.DUPLICATE_VOTER
    # Node 9 never fetched: not a caught-up observer.
    reply = leader.add_voter(VoterKey(9, A), sim.now)
    assert reply.pending
    assert leader.add_voter(VoterKey(8, B), sim.now).error is Error.REQUEST_TIMED_OUT  # one change at a time
    assert leader.remove_voter(VoterKey(2, B), sim.now).error is Error.REQUEST_TIMED_OUT
    leader.add_voter_versions(reply.change_id, (0, 1), sim.now)
    assert leader.voter_change_results[-1][:2] == (reply.change_id, Error.REQUEST_TIMED_OUT)
    assert leader.voters == {1, 2, 3}


def test_add_refused_for_kraft_version_range_or_no_api_versions() -> None:
    sim, leader = _quorum()
    sim.add_node(4)
    sim.step(400)
    key = VoterKey(4, sim.directories[4])
    reply = leader.add_voter(key, sim.now)
    leader.add_voter_versions(reply.change_id, (0, 0), sim.now)
    assert leader.voter_change_results[-1][:2] == (reply.change_id, Error.INVALID_REQUEST)
    reply = leader.add_voter(key, sim.now)
    leader.add_voter_versions(reply.change_id, None, sim.now)
    assert leader.voter_change_results[-1][:2] == (reply.change_id, Error.REQUEST_TIMED_OUT)
    # The same observer under another directory id (a reformatted disk) is not caught up.
    reply = leader.add_voter(VoterKey(4, C), sim.now)
    leader.add_voter_versions(reply.change_id, (0, 1), sim.now)
    assert leader.voter_change_results[-1][:2] == (reply.change_id, Error.REQUEST_TIMED_OUT)
    assert sim.add_voter(4) is Error.NONE


def test_remove_refusals_and_commit_timeout() -> None:
    sim, leader = _quorum()
    assert leader.remove_voter(VoterKey(9, A), sim.now).error is Error.VOTER_NOT_FOUND
    wrong_dir = VoterKey(2, uuid.UUID(int=99))
    assert leader.remove_voter(wrong_dir, sim.now).error is Error.VOTER_NOT_FOUND
    # The followers stop: the new set {leader, x} cannot commit; the answer times out.
    for i in sim.ids:
        if i != leader.node_id:
            sim.pause(i)
    other = next(i for i in sim.ids if i != leader.node_id)
    reply = leader.remove_voter(VoterKey(other, sim.directories[other]), sim.now)
    assert reply.pending
    sim.step(leader.timing.request_timeout_ms + 10)
    results = [e for c, e, _ in leader.voter_change_results if c == reply.change_id]
    assert results in ([Error.REQUEST_TIMED_OUT], [Error.NOT_LEADER_OR_FOLLOWER])
    # The newest set is still uncommitted: the next change must wait (Rule V5).
    if leader.is_leader:
        assert leader.remove_voter(VoterKey(other, sim.directories[other]), sim.now).error is Error.REQUEST_TIMED_OUT


def test_static_quorum_refuses_voter_changes() -> None:
    sim = Simulation(3, seed=2)
    leader = _elected(sim)
    assert leader.remove_voter(VoterKey(2, None), sim.now).error is Error.INVALID_REQUEST
    assert leader.remove_voter(VoterKey(2, A), sim.now).error is Error.UNSUPPORTED_VERSION
    assert leader.add_voter(VoterKey(9, A), sim.now).error is Error.UNSUPPORTED_VERSION


def test_new_leader_refuses_until_its_epoch_commits() -> None:
    sim, leader = _quorum()
    sim.network.isolate(leader.node_id, sim.ids)
    assert sim.run_until(lambda: (n := sim.leader()) is not None and n.epoch > leader.epoch, 10_000)
    new = sim.leader()
    assert new is not None
    # Take the followers away before the new leader's epoch commits... if it already has,
    # the check is Rule V5/V6 instead; assert whichever Kafka's order gives.
    reply = new.remove_voter(VoterKey(leader.node_id, sim.directories[leader.node_id]), sim.now)
    if new.high_watermark <= new.epoch_start:
        assert reply.error is Error.REQUEST_TIMED_OUT
    else:
        assert reply.pending


def test_vote_and_begin_epoch_for_another_directory_are_invalid_voter_key() -> None:
    sim, leader = _quorum()
    follower = next(n for n in sim.nodes.values() if n is not leader)
    stranger = uuid.UUID(int=424242)
    vote = VoteRequest(leader.node_id, follower.epoch + 1, follower.log.last_epoch, follower.log.end_offset, False)
    answer = follower.receive(leader.node_id, VoteRequest(**{**_fields(vote), "voter_directory_id": stranger}), sim.now)
    (sent,) = answer.sends
    assert sent.message.error is Error.INVALID_VOTER_KEY  # type: ignore[union-attr]
    begin = BeginQuorumEpochRequest(leader.node_id, follower.epoch, voter_directory_id=stranger)
    (sent,) = follower.receive(leader.node_id, begin, sim.now).sends
    assert sent.message.error is Error.INVALID_VOTER_KEY  # type: ignore[union-attr]


def _fields(req: VoteRequest) -> dict[str, object]:
    return {f: getattr(req, f) for f in req.__slots__}  # type: ignore[attr-defined]


# ---------------------------------------------------------------- repeated failovers and changes


def test_failovers_with_membership_changes_lose_nothing() -> None:
    """Kill the leader again and again while a fourth node joins and voters leave and come back."""
    sim = Simulation(3, seed=21, dynamic=True)
    _elected(sim)
    sim.add_node(4)
    elections: list[int] = []
    changes = 0
    for round_ in range(12):
        _write(sim, 20, f"r{round_}-")
        leader = sim.leader()
        assert leader is not None
        if round_ % 3 == 0:
            joiner = next((i for i in sorted(sim.nodes) if not sim.nodes[i].is_voter), None)
            if joiner is not None:
                assert sim.add_voter(joiner) is Error.NONE
                changes += 1
        elif round_ % 3 == 1 and len(leader.voters) > 3:
            victim = max(leader.voters)
            assert sim.remove_voter(victim) is Error.NONE
            changes += 1
        # (Removing the leader itself makes it resign: wait for the next.)
        assert sim.run_until(lambda: sim.leader() is not None, 15_000)
        leader = sim.leader()
        assert leader is not None
        lost_at, old_epoch, old_id = sim.now, leader.epoch, leader.node_id
        sim.kill(old_id)
        assert sim.run_until(lambda e=old_epoch: (n := sim.leader()) is not None and n.epoch > e, 15_000)
        elections.append(sim.now - lost_at)
        sim.start(old_id)
    sim.step(1000)
    assert changes >= 6
    assert _prefix_consistent(sim) > 200
    assert sim.lost() == 0
    assert statistics.median(elections) < 5_000


def test_simulated_failovers_with_voter_changes_report() -> None:
    """The figures `kraft-jbod quorum simulate --dynamic` prints: every change accepted,
    nothing acknowledged lost."""
    report = run_failovers(40, seed=4, dynamic=True)
    assert report.failovers == 40
    assert (report.voters_added, report.voters_removed) == (20, 20)
    assert report.lost == 0 and report.acknowledged > 1000


def test_cli_quorum_simulate_dynamic(capsys: pytest.CaptureFixture[str]) -> None:
    from kraft_jbod.cli import main

    assert main(["quorum", "simulate", "--dynamic", "--failovers", "6", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"voters_added":3' in out and '"voters_removed":3' in out and '"lost":0' in out


def test_a_removed_voter_can_be_added_back_at_once() -> None:
    """Kafka's leader keeps a removed voter's fetch state (it becomes an observer's), so the
    voter counts as caught up for an AddRaftVoter right after its removal commits, even
    with no fetch since."""
    sim, leader = _quorum()
    _write(sim, 20, "x")
    sim.step(500)  # idle: every follower's fetches reach the leader's log end
    other = next(i for i in sim.ids if i != leader.node_id)
    key = VoterKey(other, sim.directories[other])
    removal = leader.remove_voter(key, sim.now)
    sim.pause(other)  # no fetch from it after the removal
    assert sim.run_until(lambda: any(c == removal.change_id for c, _, _ in leader.voter_change_results), 5_000)
    reply = leader.add_voter(key, sim.now)
    assert reply.pending
    leader.add_voter_versions(reply.change_id, (0, 1), sim.now)
    assert leader.voters == {1, 2, 3}  # appended at once, no "lagging behind"
    assert sim.run_until(lambda: any(c == reply.change_id for c, _, _ in leader.voter_change_results), 5_000)
    assert [e for c, e, _ in leader.voter_change_results if c in (removal.change_id, reply.change_id)] == [
        Error.NONE,
        Error.NONE,
    ]
