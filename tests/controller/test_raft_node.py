"""The pure KRaft voter (controller/raft): elections, replication, the high watermark, the
quorum-state file, and seeded runs of three voters through kills, pauses, partitions and
message loss (controller/raft/simulation.py checks the safety properties at every step)."""

from __future__ import annotations

import random
import uuid
from pathlib import Path

import pytest

from kraft_jbod.controller.raft import election_store
from kraft_jbod.controller.raft.election_store import Election, FileElectionStore, MemoryElectionStore
from kraft_jbod.controller.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    Entry,
    Error,
    FetchRequest,
    FetchResponse,
    Outbox,
    VoteRequest,
    VoteResponse,
)
from kraft_jbod.controller.raft.node import NotLeaderError, RaftNode, Role
from kraft_jbod.controller.raft.replica_log import LogError, MemoryLog
from kraft_jbod.controller.raft.simulation import Network, Simulation, run_failovers
from kraft_jbod.errors import StorageError


def node(node_id: int = 1, voters: tuple[int, ...] = (1, 2, 3), *, log: MemoryLog | None = None,
         store: MemoryElectionStore | None = None, now: int = 0) -> RaftNode:  # fmt: skip
    return RaftNode(
        node_id, voters, log or MemoryLog(), store or MemoryElectionStore(), rng=random.Random(7), now_ms=now
    )


def log_of(*epochs: int) -> MemoryLog:
    log = MemoryLog()
    log.append([Entry(i, e, b"%d" % i) for i, e in enumerate(epochs)])
    return log


# --------------------------------------------------------------------------- the log


def test_memory_log_refuses_gaps_and_epochs_going_back() -> None:
    log = log_of(1, 1, 2)
    with pytest.raises(LogError):
        log.append([Entry(5, 2, b"")])
    with pytest.raises(LogError):
        log.append([Entry(3, 1, b"")])
    assert log.epoch_end(1) == (1, 2)
    assert log.epoch_end(2) == (2, 3)
    assert log.epoch_end(5) == (2, 3)
    assert log.epoch_end(0) == (0, 0)
    log.truncate_to(2)
    assert (log.end_offset, log.last_epoch, log.truncations) == (2, 1, 1)
    assert log.epoch_end(2) == (1, 2)


# --------------------------------------------------------------------------- quorum-state


def test_quorum_state_file_round_trips_in_kafkas_layout(tmp_path: Path) -> None:
    store = FileElectionStore(tmp_path)
    assert store.read() == Election()
    directory = uuid.uuid4()
    store.write(Election(epoch=7, leader_id=2, voted_id=3, voted_directory_id=directory))
    text = (tmp_path / "quorum-state").read_text()
    assert '"leaderId":2' in text and '"leaderEpoch":7' in text and '"data_version":1' in text
    assert store.read() == Election(epoch=7, leader_id=2, voted_id=3, voted_directory_id=directory)
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_quorum_state_file_reads_kafkas_version_0() -> None:
    text = '{"clusterId":"","leaderId":1,"leaderEpoch":4,"votedId":-1,"appliedOffset":0,"currentVoters":null,"data_version":0}'
    assert election_store.decode(text) == Election(epoch=4, leader_id=1, voted_id=-1)


@pytest.mark.parametrize(
    "text",
    ["not json", "[]", '{"data_version": 9}', '{"leaderId": "2"}', '{"votedDirectoryId": "!!", "data_version": 1}'],
)
def test_quorum_state_file_bad_content_is_a_clear_error(text: str, tmp_path: Path) -> None:
    (tmp_path / "quorum-state").write_text(text)
    with pytest.raises(StorageError, match="quorum-state"):
        FileElectionStore(tmp_path).read()


# --------------------------------------------------------------------------- one node


def test_single_voter_leads_at_once_and_commits_alone() -> None:
    n = node(1, (1,))
    n.tick(0)
    assert n.role is Role.LEADER and n.epoch == 1
    first = n.propose([b"a", b"b"], 1)
    assert first == 1 and n.high_watermark == 3  # the epoch's control entry, then a and b


def test_vote_granted_once_per_epoch_and_kept_across_restart() -> None:
    store = MemoryElectionStore()
    n = node(1, store=store)
    out = n.receive(2, VoteRequest(2, 1, 0, 0, pre_vote=False), 5).sends
    assert isinstance(out[0].message, VoteResponse) and out[0].message.granted
    assert store.election == Election(epoch=1, leader_id=-1, voted_id=2)
    restarted = node(1, store=store, now=10)
    out = restarted.receive(3, VoteRequest(3, 1, 0, 0, pre_vote=False), 11).sends
    assert not out[0].message.granted  # type: ignore[union-attr]
    out = restarted.receive(2, VoteRequest(2, 1, 0, 0, pre_vote=False), 12).sends
    assert out[0].message.granted  # type: ignore[union-attr]


def test_vote_refused_to_a_candidate_whose_log_is_behind() -> None:
    n = node(1, log=log_of(1, 1, 2))
    resp = n.receive(2, VoteRequest(2, 3, last_epoch=2, last_offset=2, pre_vote=False), 0).sends[0].message
    assert isinstance(resp, VoteResponse) and not resp.granted and resp.epoch == 3
    resp = n.receive(3, VoteRequest(3, 3, last_epoch=2, last_offset=3, pre_vote=False), 1).sends[0].message
    assert isinstance(resp, VoteResponse) and resp.granted


def test_pre_vote_does_not_move_the_epoch_or_spend_the_vote() -> None:
    store = MemoryElectionStore()
    n = node(1, store=store)
    resp = n.receive(2, VoteRequest(2, 0, 0, 0, pre_vote=True), 0).sends[0].message
    assert isinstance(resp, VoteResponse) and resp.granted and resp.pre_vote
    assert n.epoch == 0 and n.voted_id == -1 and store.writes == 0


@pytest.mark.parametrize(
    "req",
    [
        VoteRequest(2, 2, last_epoch=2, last_offset=0, pre_vote=False),  # last epoch not below the new one
        VoteRequest(2, 1, last_epoch=2, last_offset=0, pre_vote=True),
        VoteRequest(2, 1, last_epoch=0, last_offset=-1, pre_vote=False),
        VoteRequest(9, 1, last_epoch=0, last_offset=0, pre_vote=False),  # not a voter
    ],
)
def test_invalid_vote_requests_change_nothing(req: VoteRequest) -> None:
    n = node(1)
    resp = n.receive(req.candidate_id, req, 0).sends[0].message
    assert isinstance(resp, VoteResponse) and resp.error is Error.INVALID_REQUEST and not resp.granted
    assert n.epoch == 0


def test_fetch_to_a_non_leader_names_the_leader_and_fences_old_epochs() -> None:
    n = node(1)
    n.receive(2, BeginQuorumEpochRequest(2, 4), 0)
    assert (n.role, n.leader_id, n.epoch) == (Role.FOLLOWER, 2, 4)
    resp = n.receive(-1, FetchRequest(-1, 4, 0, 0), 1).sends[0].message
    assert isinstance(resp, FetchResponse)
    assert (resp.error, resp.leader_id, resp.epoch) == (Error.NOT_LEADER_OR_FOLLOWER, 2, 4)
    resp = n.receive(-1, FetchRequest(-1, 3, 0, 0), 1).sends[0].message
    assert isinstance(resp, FetchResponse) and resp.error is Error.FENCED_LEADER_EPOCH and resp.leader_id == 2
    resp = n.receive(-1, FetchRequest(-1, 5, 0, 0), 1).sends[0].message
    assert isinstance(resp, FetchResponse) and resp.error is Error.UNKNOWN_LEADER_EPOCH
    with pytest.raises(NotLeaderError, match="leader 2, epoch 4"):
        n.propose([b"x"], 2)


def test_follower_truncates_a_diverging_tail_before_appending() -> None:
    # Leader 2 (epoch 3) holds epochs 1,1,3,3; the follower holds 1,1,2,2,2 from a lost epoch 2.
    leader = node(2, log=log_of(1, 1, 3, 3))
    leader.epoch = 3
    leader_out = Outbox()
    leader._become_leader(leader_out, 0)
    assert leader_out.sends and leader.role is Role.LEADER and leader.epoch == 3
    follower = node(1, log=log_of(1, 1, 2, 2, 2))
    follower.receive(2, BeginQuorumEpochRequest(2, 3), 0)
    for step in range(1, 20):
        sends = follower.tick(step * 100).sends
        for s in sends:
            for answer in leader.receive(1, s.message, step * 100).sends:
                follower.receive(2, answer.message, step * 100)
    assert follower.log.end_offset == leader.log.end_offset == 5
    assert [e.epoch for e in follower.log.read(0, 10)] == [1, 1, 3, 3, 3]
    assert follower.high_watermark == leader.high_watermark == 5
    assert follower.truncated_below_hw == 0


def test_memory_log_start_offset_after_a_snapshot() -> None:
    log = log_of(1, 1, 2, 2, 3)
    assert log.delete_before(3) == 3
    assert (log.start_offset, log.end_offset, log.last_epoch) == (3, 5, 3)
    assert log.read(2, 10) == [] and [e.offset for e in log.read(3, 10)] == [3, 4]
    assert log.epoch_end(2) == (2, 4) and log.epoch_end(1) == (0, 0)
    log.truncate_to(0)  # never below the start
    assert (log.start_offset, log.end_offset, log.last_epoch) == (3, 3, 2)
    with pytest.raises(LogError):
        log.delete_before(9)
    log.reset_to(10, 4)
    assert (log.start_offset, log.end_offset, log.last_epoch, log.epoch_end(5)) == (10, 10, 4, (4, 10))
    log.append([Entry(10, 5, b"")])
    assert log.epoch_end(4) == (4, 10) and log.epoch_end(5) == (5, 11)


def _exchange(leader: RaftNode, follower: RaftNode, now: int) -> list[FetchResponse]:
    answers = []
    for s in follower.tick(now).sends:
        for answer in leader.receive(follower.node_id, s.message, now).sends:
            if isinstance(answer.message, FetchResponse):
                answers.append(answer.message)
            follower.receive(leader.node_id, answer.message, now)
    return answers


def test_a_follower_below_the_leaders_log_start_loads_its_snapshot() -> None:
    # Leader 2 (epoch 3) snapshotted at 4 (epoch 3) and deleted the log below it.
    leader = node(2, log=log_of(1, 1, 3, 3, 3, 3))
    leader.log.add_snapshot(4, 3)
    leader.log.delete_before(4)
    leader.epoch = 3
    leader._become_leader(Outbox(), 0)
    follower = node(1, log=log_of(1, 1))
    follower.receive(2, BeginQuorumEpochRequest(2, 3), 0)
    answers = _exchange(leader, follower, 300)  # the fetch BeginQuorumEpoch sent is resent
    assert answers and answers[-1].snapshot_id == (4, 3) and answers[-1].log_start_offset == 4
    assert follower.snapshot_wanted == (4, 3)
    assert not follower.tick(900).sends  # no fetching while the snapshot is wanted
    follower.snapshot_progress(1900)  # a FetchSnapshot answer keeps the leader alive
    assert follower.role is Role.FOLLOWER and not follower.tick(2500).sends
    follower.snapshot_loaded(4, 3, 2500)
    assert (follower.log.start_offset, follower.log.end_offset, follower.log.last_epoch) == (4, 4, 3)
    assert follower.snapshot_wanted is None and follower.high_watermark == 4
    for step in range(26, 40):
        _exchange(leader, follower, step * 100)
    assert follower.log.end_offset == leader.log.end_offset == 7
    assert follower.high_watermark == leader.high_watermark == 7
    assert [e.epoch for e in follower.log.read(4, 10)] == [3, 3, 3]


def test_an_empty_fetcher_gets_the_snapshot_and_an_old_epoch_too() -> None:
    leader = node(2, log=log_of(1, 1, 3, 3))
    leader.log.add_snapshot(3, 3)
    leader.epoch = 3
    leader._become_leader(Outbox(), 0)

    def answer(offset: int, last_epoch: int) -> FetchResponse:
        resp = leader.receive(1, FetchRequest(1, 3, offset, last_epoch), 1).sends[0].message
        assert isinstance(resp, FetchResponse)
        return resp

    assert answer(0, 0).snapshot_id == (3, 3)  # Kafka: an empty log loads the snapshot
    leader.snapshot_served(1, 5)  # its FetchSnapshot counts for check-quorum
    assert leader._last_fetch[1] == 5
    assert answer(2, 1).snapshot_id == (3, 3)  # a last epoch older than the oldest snapshot's
    assert answer(4, 3).snapshot_id is None and answer(4, 3).entries
    nonsense = node(1)
    nonsense.receive(2, BeginQuorumEpochRequest(2, 3), 0)
    nonsense.receive(2, FetchResponse(2, 3, Error.NONE, 0, snapshot_id=(5, 9)), 1)
    assert nonsense.snapshot_wanted is None  # an epoch beyond the leader's: refused


def test_restarted_leader_resigns_its_epoch() -> None:
    store = MemoryElectionStore()
    store.write(Election(epoch=5, leader_id=1, voted_id=1))
    n = node(1, store=store)
    assert n.role is Role.RESIGNED and n.epoch == 5
    out = n.tick(0).sends
    assert {s.destination for s in out} == {2, 3}
    assert all(isinstance(s.message, EndQuorumEpochRequest) and s.message.epoch == 5 for s in out)


def test_end_quorum_epoch_starts_the_preferred_successor_at_once() -> None:
    n = node(3)
    n.receive(1, BeginQuorumEpochRequest(1, 2), 0)
    n.receive(1, EndQuorumEpochRequest(1, 2, (3, 2)), 10)
    out = n.tick(10).sends
    assert n.role is Role.PROSPECTIVE
    assert {s.destination for s in out} == {1, 2} and all(isinstance(s.message, VoteRequest) for s in out)


@pytest.mark.parametrize(
    ("me", "successors", "wait_ms"),
    [
        (3, (2, 3), 500),  # second of two: max >> 1
        (2, (4, 5, 2), 500),  # third of three: (max >> 2) << 1
        (2, (3,), 1000),  # not named (a leadership move names one voter): the whole max
        (2, (), 1000),
    ],
)
def test_end_quorum_epoch_backs_off_by_place_among_the_successors(
    me: int, successors: tuple[int, ...], wait_ms: int
) -> None:
    # Kafka's strict exponential back-off, with election_backoff_max_ms = 1000: a random draw
    # let a voter the leader did not name stand first and win over the one it named.
    n = node(me, voters=(1, 2, 3, 4, 5))
    assert n.timing.election_backoff_max_ms == 1000
    n.receive(1, BeginQuorumEpochRequest(1, 2), 0)
    n.receive(1, EndQuorumEpochRequest(1, 2, successors), 10)
    n.tick(10 + wait_ms - 1)
    assert n.role is Role.FOLLOWER
    n.tick(10 + wait_ms)
    assert n.role is Role.PROSPECTIVE


# --------------------------------------------------------------------------- three voters


def test_three_voters_elect_one_leader_and_commit_by_majority() -> None:
    sim = Simulation(3, seed=3)
    assert sim.run_until(lambda: sim.leader() is not None, 10_000)
    leader = sim.leader()
    assert leader is not None
    offset = leader.propose([b"x"], sim.now)
    sim.step(50)
    assert all(n.log.end_offset == offset + 1 for n in sim.nodes.values())
    assert all(n.high_watermark == offset + 1 for n in sim.nodes.values())
    # One follower down: a majority (2 of 3) still commits.
    down = next(i for i in sim.ids if i != leader.node_id)
    sim.kill(down)
    offset = leader.propose([b"y"], sim.now)
    sim.step(50)
    assert leader.high_watermark == offset + 1
    # Both followers down: nothing commits, and check-quorum makes the leader resign.
    sim.kill(next(i for i in sim.ids if i not in (leader.node_id, down)))
    offset = leader.propose([b"z"], sim.now)
    sim.step(50)
    assert leader.high_watermark == offset
    sim.step(4000)
    assert leader.role is not Role.LEADER


def test_an_isolated_follower_does_not_disturb_the_quorum() -> None:
    """Pre-vote (KIP-996): a follower cut off for 10 s cannot raise the epoch of the others."""
    sim = Simulation(3, seed=5)
    assert sim.run_until(lambda: sim.leader() is not None, 10_000)
    leader = sim.leader()
    assert leader is not None
    epoch = leader.epoch
    lonely = next(i for i in sim.ids if i != leader.node_id)
    sim.network.isolate(lonely, sim.ids)
    sim.step(10_000)
    sim.network.heal()
    sim.step(3_000)
    assert sim.leader() is leader and leader.epoch == epoch
    assert sim.nodes[lonely].role is Role.FOLLOWER and sim.nodes[lonely].epoch == epoch


@pytest.mark.parametrize(
    ("how", "drop_rate"),
    [("kill", 0.0), ("kill", 0.05), ("pause", 0.0), ("isolate", 0.05), ("resign", 0.0)],
)
def test_twenty_failovers_lose_no_committed_record(how: str, drop_rate: float) -> None:
    report = run_failovers(20, how=how, seed=11, drop_rate=drop_rate)
    assert report.failovers == 20
    assert report.lost == 0
    assert report.acknowledged > 500 and report.committed >= report.acknowledged
    assert report.epochs >= 21
    # Elections end within a fetch timeout plus two election timeouts (simulated time).
    assert report.worst_ms < 2000 + 2 * 2000 + 1000


def test_a_minority_partition_never_elects() -> None:
    sim = Simulation(5, seed=2, network=Network(drop_rate=0.02))
    assert sim.run_until(lambda: sim.leader() is not None, 10_000)
    leader = sim.leader()
    assert leader is not None
    minority = [leader.node_id, next(i for i in sim.ids if i != leader.node_id)]
    for a in minority:
        for b in sim.ids:
            if b not in minority:
                sim.network.cut(a, b)
    assert sim.run_until(lambda: any(n.is_leader and n.epoch > leader.epoch for n in sim.nodes.values()), 10_000)
    sim.step(5_000)
    for i in minority:
        assert not (sim.nodes[i].is_leader and sim.nodes[i].epoch > leader.epoch)
    assert not leader.is_leader  # check-quorum
