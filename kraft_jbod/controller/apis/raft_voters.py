"""AddRaftVoter (80), RemoveRaftVoter (81), UpdateRaftVoter (82): KIP-853 voter changes.

This controller is the only voter of its quorum and never changes the voter set, but it
answers these requests with the errors Kafka 4.4's leader (KafkaRaftClient and its
Add/Remove/UpdateVoterHandler) gives where the outcome is the same, instead of closing the
connection:

* Rule 1: a ClusterId other than ours: INCONSISTENT_CLUSTER_ID.
* Rule 2 (Update only): a CurrentLeaderEpoch below ours FENCED_LEADER_EPOCH, above ours
  UNKNOWN_LEADER_EPOCH.
* Rule 3: AddRaftVoter without a directory id, or without an endpoint on the listener the
  request came in on (Kafka checks the default listener; we check every controller
  listener of ours): INVALID_REQUEST.
* Rule 4: at kraft.version 0, Add and Remove: UNSUPPORTED_VERSION (Kafka's answer for a
  static quorum).
* Rule 5: at kraft.version 1, Remove: the set keeps at least one voter, so removing the
  only one, or one not in the set, is VOTER_NOT_FOUND, exactly as Kafka. Add: a voter id
  already in the set is DUPLICATE_VOTER, as Kafka.
* Rule 6 (a divergence, docs/divergences.md): where Kafka would write a new VotersRecord
  (adding a new voter, updating a voter's endpoints) we answer UNSUPPORTED_VERSION with a
  message saying so; Update of a voter not in the set is VOTER_NOT_FOUND as in Kafka.
"""

from __future__ import annotations

from typing import Any

from kraft_jbod.controller.context import Call, ControllerContext, Outcome
from kraft_jbod.messages.add_raft_voter_response import AddRaftVoterResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.remove_raft_voter_response import RemoveRaftVoterResponse
from kraft_jbod.messages.update_raft_voter_response import CurrentLeader, UpdateRaftVoterResponse

_SINGLE_VOTER = "this controller runs a single-voter quorum and does not change its voter set"


def _cluster_error(ctx: ControllerContext, cluster_id: str | None) -> str | None:
    # Kafka's hasValidClusterId: a null id is accepted (older clients).
    if cluster_id is not None and cluster_id != ctx.cluster_id:
        return f'The given id "{cluster_id}" does not match the cluster id "{ctx.cluster_id}"'
    return None


def _static(kind: str, ctx: ControllerContext) -> str:
    return f"Cluster doesn't support {kind} voter because the kraft.version feature is {ctx.kraft_version}"


def _voter_ids(ctx: ControllerContext) -> dict[int, Any]:
    return {} if ctx.voters is None else {v.voter_id: v for v in ctx.voters.voters}


def handle_add_voter(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    def answer(code: int, message: str | None) -> Outcome:
        return Outcome(AddRaftVoterResponse(error_code=code, error_message=message), [])

    bad_cluster = _cluster_error(ctx, req.cluster_id)
    if bad_cluster is not None:
        return answer(ErrorCode.INCONSISTENT_CLUSTER_ID, bad_cluster)
    if req.voter_directory_id.int == 0:
        return answer(ErrorCode.INVALID_REQUEST, "Add voter request didn't include a valid voter")
    names = {li.name for li in req.listeners}
    ours = {e.name for v in _voter_ids(ctx).values() for e in v.endpoints} or {"CONTROLLER"}
    if not names & ours:
        return answer(ErrorCode.INVALID_REQUEST, f"Add voter request didn't include an endpoint for {sorted(ours)}")
    if ctx.kraft_version < 1:
        return answer(ErrorCode.UNSUPPORTED_VERSION, _static("adding", ctx))
    if req.voter_id in _voter_ids(ctx):
        return answer(ErrorCode.DUPLICATE_VOTER, f"Voter {req.voter_id} is already part of the set of voters")
    return answer(ErrorCode.UNSUPPORTED_VERSION, f"Cannot add voter {req.voter_id}: {_SINGLE_VOTER}")


def handle_remove_voter(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    def answer(code: int, message: str | None) -> Outcome:
        return Outcome(RemoveRaftVoterResponse(error_code=code, error_message=message), [])

    bad_cluster = _cluster_error(ctx, req.cluster_id)
    if bad_cluster is not None:
        return answer(ErrorCode.INCONSISTENT_CLUSTER_ID, bad_cluster)
    if ctx.kraft_version < 1:
        return answer(ErrorCode.UNSUPPORTED_VERSION, _static("removing", ctx))
    # One voter: Kafka's VoterSet.removeVoter never empties the set, so this is always refused.
    return answer(
        ErrorCode.VOTER_NOT_FOUND,
        f"Cannot remove voter {req.voter_id} from the set of voters {sorted(_voter_ids(ctx))}",
    )


def handle_update_voter(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    endpoint = next(iter(ctx.controller_endpoints), ("", 0))
    for v in _voter_ids(ctx).values():
        if v.voter_id == ctx.node_id and v.endpoints:
            endpoint = (v.endpoints[0].host, v.endpoints[0].port)
    leader = CurrentLeader(leader_id=ctx.node_id, leader_epoch=ctx.leader_epoch, host=endpoint[0], port=endpoint[1])

    def answer(code: int) -> Outcome:
        return Outcome(UpdateRaftVoterResponse(error_code=code, current_leader=leader), [])

    if _cluster_error(ctx, req.cluster_id) is not None:
        return answer(ErrorCode.INCONSISTENT_CLUSTER_ID)
    if req.current_leader_epoch < ctx.leader_epoch:
        return answer(ErrorCode.FENCED_LEADER_EPOCH)
    if req.current_leader_epoch > ctx.leader_epoch:
        return answer(ErrorCode.UNKNOWN_LEADER_EPOCH)
    known = _voter_ids(ctx).get(req.voter_id)
    if ctx.kraft_version < 1:
        known = True if req.voter_id == ctx.node_id else None
    elif known is not None and known.voter_directory_id != req.voter_directory_id:
        known = None
    if known is None:
        return answer(ErrorCode.VOTER_NOT_FOUND)
    return answer(ErrorCode.UNSUPPORTED_VERSION)
