"""UpdateRaftVoter (api 82) on a quorum voter at kraft.version 0 (controller/raft/voter_updates.py),
and the high watermark a new leader tells fetchers before its own is established."""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller.raft.messages import Error, FetchRequest, FetchResponse
from kraft_jbod.controller.raft.node import RaftNode
from kraft_jbod.controller.raft.simulation import Simulation
from kraft_jbod.controller.raft.voter_updates import answer_update_voter
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.update_raft_voter_request import KRaftVersionFeature, Listener, UpdateRaftVoterRequest

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
ENDPOINTS = {i: ("CONTROLLER", "127.0.0.1", 9090 + i) for i in (1, 2, 3)}


def _request(node: RaftNode, **changes: object) -> UpdateRaftVoterRequest:
    voter = next(i for i in (1, 2, 3) if i != node.leader_id)
    fields: dict[str, object] = {
        "cluster_id": CLUSTER,
        "current_leader_epoch": node.epoch,
        "voter_id": voter,
        "voter_directory_id": uuid.uuid4(),
        "listeners": [Listener(name="CONTROLLER", host="127.0.0.1", port=9090 + voter)],
        "k_raft_version_feature": KRaftVersionFeature(min_supported_version=0, max_supported_version=1),
    }
    fields.update(changes)
    return UpdateRaftVoterRequest(**fields)  # type: ignore[arg-type]


def _answer(node: RaftNode | None, req: UpdateRaftVoterRequest) -> tuple[int, int, int, str, int]:
    resp = answer_update_voter(node, req, cluster_id=CLUSTER, listener="CONTROLLER", endpoints=ENDPOINTS)
    leader = resp.current_leader
    return resp.error_code, leader.leader_id, leader.leader_epoch, leader.host, leader.port


def _settled() -> Simulation:
    sim = Simulation(3, seed=3)
    assert sim.run_until(lambda: (lead := sim.leader()) is not None and lead.high_watermark > lead.epoch_start, 10_000)
    return sim


def test_the_leader_accepts_a_voters_endpoints_and_names_itself() -> None:
    sim = _settled()
    leader = sim.leader()
    assert leader is not None
    port = 9090 + leader.node_id
    assert _answer(leader, _request(leader)) == (ErrorCode.NONE, leader.node_id, leader.epoch, "127.0.0.1", port)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"cluster_id": "another-cluster-id-xxxx"}, ErrorCode.INCONSISTENT_CLUSTER_ID),
        ({"voter_directory_id": uuid.UUID(int=0)}, ErrorCode.INVALID_REQUEST),
        ({"listeners": [Listener(name="OTHER", host="h", port=1)]}, ErrorCode.INVALID_REQUEST),
        ({"k_raft_version_feature": KRaftVersionFeature(min_supported_version=2, max_supported_version=1)},
         ErrorCode.INVALID_REQUEST),
        ({"k_raft_version_feature": KRaftVersionFeature(min_supported_version=1, max_supported_version=1)},
         ErrorCode.INVALID_REQUEST),  # leaves out the static quorum's kraft.version 0
        ({"voter_id": 9}, ErrorCode.VOTER_NOT_FOUND),
    ],
)  # fmt: skip
def test_the_leader_refuses_a_bad_update_as_kafka_does(changes: dict[str, object], error: int) -> None:
    sim = _settled()
    leader = sim.leader()
    assert leader is not None
    assert _answer(leader, _request(leader, **changes))[0] == error


def test_epochs_and_followers_answer_with_the_current_leader() -> None:
    sim = _settled()
    leader = sim.leader()
    assert leader is not None
    follower = sim.nodes[next(i for i in sim.ids if i != leader.node_id)]
    named = (leader.node_id, leader.epoch, "127.0.0.1", 9090 + leader.node_id)
    assert _answer(follower, _request(follower)) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, *named)
    old = _request(leader, current_leader_epoch=leader.epoch - 1)
    assert _answer(leader, old)[0] == ErrorCode.FENCED_LEADER_EPOCH
    new = _request(leader, current_leader_epoch=leader.epoch + 1)
    assert _answer(leader, new)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert _answer(None, _request(leader))[:3] == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, 0)  # not started


def _new_leader_before_its_high_watermark() -> RaftNode:
    """A leader elected over a log with committed entries, caught before any follower fetched."""
    sim = _settled()
    first = sim.leader()
    assert first is not None
    first.propose([b"x", b"y"], sim.now)
    sim.step(100)
    sim.kill(first.node_id)
    assert sim.run_until(lambda: sim.leader() is not None, 10_000)
    leader = sim.leader()
    assert leader is not None
    assert leader.high_watermark <= leader.epoch_start  # caught in the step it won
    return leader


def test_a_leader_waits_with_the_high_watermark_until_its_epoch_commits() -> None:
    leader = _new_leader_before_its_high_watermark()
    kept = leader.high_watermark
    assert kept > 0  # what it learnt as a follower: below what a voter may already hold
    req = _request(leader)
    assert _answer(leader, req)[0] == ErrorCode.REQUEST_TIMED_OUT
    follower = next(i for i in (1, 2, 3) if i != leader.node_id)
    out = leader.receive(follower, FetchRequest(follower, leader.epoch, kept, leader.log.last_epoch), 0)
    answer = next(s.message for s in out.sends if isinstance(s.message, FetchResponse))
    assert answer.error is Error.NONE and answer.high_watermark == -1
