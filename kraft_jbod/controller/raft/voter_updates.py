"""UpdateRaftVoter (api 82) on a quorum voter, static (kraft.version 0) or dynamic (1).

A voter of Kafka 4.4 tells every new leader its endpoints and the kraft.version range it
supports (UpdateRaftVoter), even in a static quorum: the leader keeps that in memory, so a
later upgrade to kraft.version 1 can write a VotersRecord naming every voter's endpoints.
A voter of ours that leads must answer it as Kafka's leader does, or Kafka's voter logs an
error for every leader it follows.

Rules (the order of Kafka's checks):

Rule 1: a cluster id other than ours: INCONSISTENT_CLUSTER_ID.
Rule 2: the request's leader epoch below ours FENCED_LEADER_EPOCH, above ours
UNKNOWN_LEADER_EPOCH; ours but not the leader NOT_LEADER_OR_FOLLOWER.
Rule 3: no voter directory id, no endpoint on the quorum's listener, or a kraft.version
range that is negative or inverted: INVALID_REQUEST; a range that leaves out 0 too, but
only once Rule 4 passed.
Rule 4: the leader whose high watermark has not reached its epoch's first record yet:
REQUEST_TIMED_OUT (the voter retries).
Rule 5: a voter id not in the static set: VOTER_NOT_FOUND. Otherwise NONE; nothing is
written (at kraft.version 0 the leader holds the endpoints in memory only, and ours knows
them from ``controller.quorum.voters`` already).

Rule 6: in a dynamic quorum (kraft.version 1) Rules 1-3 come first (Rule 3 without the
kraft.version 0 range check), then the leader's node records the voter's new endpoint and
range in a new VotersRecord (node.py, Rules U1-U5); ``record`` hands both to the shell's
codec just before that record is built.

Every answer names the current leader, its epoch and its endpoint on the quorum listener.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kraft_jbod.controller.raft.node import RaftNode
from kraft_jbod.controller.raft.voter_set import VoterKey
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.update_raft_voter_request import UpdateRaftVoterRequest
from kraft_jbod.messages.update_raft_voter_response import CurrentLeader, UpdateRaftVoterResponse

#: The kraft.version of a static quorum.
STATIC_KRAFT_VERSION = 0


def answer_update_voter(
    node: RaftNode | None,
    req: UpdateRaftVoterRequest,
    *,
    cluster_id: str,
    listener: str,
    endpoints: Mapping[int, tuple[str, str, int]],
    now_ms: int = 0,
    record: Callable[[tuple[str, str, int], tuple[int, int]], None] | None = None,
) -> UpdateRaftVoterResponse:
    """The answer of voter ``node`` (None: not started) to ``req`` (see the rules above);
    ``now_ms`` is the node's clock (a dynamic quorum's leader appends at that time)."""
    epoch, leader = (node.epoch, node.leader_id) if node is not None else (0, -1)
    _, host, port = endpoints.get(leader, ("", "", 0))
    current = CurrentLeader(leader_id=leader, leader_epoch=epoch, host=host, port=port)

    def answer(code: int) -> UpdateRaftVoterResponse:
        return UpdateRaftVoterResponse(error_code=code, current_leader=current)

    if req.cluster_id is not None and req.cluster_id != cluster_id:
        return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)  # Rule 1
    if req.current_leader_epoch < epoch:
        return answer(ErrorCode.FENCED_LEADER_EPOCH)  # Rule 2
    if req.current_leader_epoch > epoch:
        return answer(ErrorCode.UNKNOWN_LEADER_EPOCH)
    if node is None or not node.is_leader:
        return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    versions = req.k_raft_version_feature
    if (
        req.voter_directory_id.int == 0
        or not any(li.name == listener for li in req.listeners)
        or versions.min_supported_version < 0
        or versions.max_supported_version < versions.min_supported_version
    ):
        return answer(ErrorCode.INVALID_REQUEST)  # Rule 3
    if node.dynamic:  # Rule 6
        endpoint = next((li.name, li.host, li.port) for li in req.listeners if li.name == listener)
        supported = (versions.min_supported_version, versions.max_supported_version)
        reply = node.update_voter(
            VoterKey(req.voter_id, req.voter_directory_id),
            supported,
            now_ms,
            record=None if record is None else (lambda: record(endpoint, supported)),
        )
        return answer(int(reply.error if reply.error is not None else ErrorCode.NONE))
    if node.high_watermark <= node.epoch_start:
        return answer(ErrorCode.REQUEST_TIMED_OUT)  # Rule 4
    if not versions.min_supported_version <= STATIC_KRAFT_VERSION <= versions.max_supported_version:
        return answer(ErrorCode.INVALID_REQUEST)  # Rule 3, checked after Rule 4 as Kafka does
    if req.voter_id not in node.voters:
        return answer(ErrorCode.VOTER_NOT_FOUND)  # Rule 5
    return answer(ErrorCode.NONE)
