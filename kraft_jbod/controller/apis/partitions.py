"""CreatePartitions, ElectLeaders, Alter/ListPartitionReassignments.

Every partition change goes through the change builder
(:mod:`kraft_jbod.controller.partition_change`, Kafka's PartitionChangeBuilder); its names
are re-exported here for the handlers that read them as ``partitions.X``.

Reassignment (KIP-455, as Kafka's ReplicationControlManager): the first record sets
Replicas to target + removing, and AddingReplicas/RemovingReplicas; AlterPartition
requests that bring the adding replicas into the ISR complete it (Rule 1). Cancelling
(null target) reverts to the original replicas, which needs an unclean election when
only adding replicas are in the ISR (refused unless unclean.leader.election.enable).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, Final

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.image import kafka_table_first, kafka_table_slots
from kraft_jbod.controller.limits import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP
from kraft_jbod.controller.partition_change import MV_3_6_IV0 as MV_3_6_IV0
from kraft_jbod.controller.partition_change import NO_LEADER as NO_LEADER
from kraft_jbod.controller.partition_change import NO_LEADER_CHANGE as NO_LEADER_CHANGE
from kraft_jbod.controller.partition_change import ONLINE as ONLINE
from kraft_jbod.controller.partition_change import PREFERRED as PREFERRED
from kraft_jbod.controller.partition_change import RECOVERED as RECOVERED
from kraft_jbod.controller.partition_change import RECOVERING as RECOVERING
from kraft_jbod.controller.partition_change import UNCLEAN as UNCLEAN
from kraft_jbod.controller.partition_change import PartView as PartView
from kraft_jbod.controller.partition_change import build_change as build_change
from kraft_jbod.controller.partition_change import complete_reassignment as complete_reassignment
from kraft_jbod.controller.partition_change import effective_min_isr as effective_min_isr
from kraft_jbod.controller.partition_change import elr_enabled as elr_enabled
from kraft_jbod.controller.partition_change import java_hash_set_order as java_hash_set_order
from kraft_jbod.controller.partition_change import min_isr_cap as min_isr_cap
from kraft_jbod.controller.partition_change import target_elr as target_elr
from kraft_jbod.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from kraft_jbod.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kraft_jbod.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from kraft_jbod.messages.create_partitions_response import CreatePartitionsResponse, CreatePartitionsTopicResult
from kraft_jbod.messages.elect_leaders_request import ElectLeadersRequest
from kraft_jbod.messages.elect_leaders_response import ElectLeadersResponse, PartitionResult, ReplicaElectionResult
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from kraft_jbod.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.wire.message import Message

RecordAndVersion = tuple[Message, int]

ELECTION_NOT_NEEDED: Final = ErrorCode.ELECTION_NOT_NEEDED
PREFERRED_LEADER_NOT_AVAILABLE: Final = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
ELIGIBLE_LEADERS_NOT_AVAILABLE: Final = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
NO_REASSIGNMENT_IN_PROGRESS: Final = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


class Ops:
    """What these handlers need of the controller state (kept small so it is easy to fake).

    ``st`` is the image; the callables read through the current draft.
    """

    def __init__(
        self,
        st: Any,
        *,
        view: Callable[[Any], PartView],
        acceptable: Callable[[int, uuid.UUID], bool],
        active: Callable[[int], bool],
        default_dir: Callable[[int], uuid.UUID],
        place: Callable[[int, int, int], list[list[int]] | tuple[int, str]],
    ) -> None:
        self.st = st
        self.view = view
        self.acceptable = acceptable
        self.active = active
        self.default_dir = default_dir
        self.place = place  # (start partition id, count, replication factor) -> replica lists or error

    @property
    def metadata_version(self) -> int:
        return int(self.st.metadata_version)

    def change(self, p: Any, **targets: Any) -> RecordAndVersion | None:
        image = getattr(self.st, "image", None)
        if image is not None and elr_enabled(image):
            targets.setdefault("elr_enabled", True)
            topic = image.topics[p.topic_id].name
            cap = min_isr_cap(image.topics[p.topic_id].partitions)
            targets.setdefault("min_isr", effective_min_isr(image.configs, topic, cap))
        rec = build_change(
            self.view(p),
            p.topic_id,
            p.partition_id,
            acceptable=self.acceptable,
            default_dir=self.default_dir,
            metadata_version=self.metadata_version,
            **targets,
        )
        return None if rec is None else (rec, fv.partition_change_record_version(self.metadata_version))


# ---------------------------------------------------------------------------- CreatePartitions


class _Refused(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _create_for_topic(ops: Ops, t: CreatePartitionsTopic, records: list[RecordAndVersion], cap: int) -> bool:
    """Append the PartitionRecords of ``t``'s new partitions, at most ``cap`` of them (the
    room left under the record bound); True when that cut some off. Placement is a prefix
    of the full one, so only what can be written is ever placed, whatever the count asked.
    """
    st = ops.st
    tid = st.topic_id_of(t.name)
    if tid is None:
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)  # Kafka's exception here carries no message
    parts = st.topics[tid].partitions
    have = len(parts)
    if t.count == have:
        raise _Refused(ErrorCode.INVALID_PARTITIONS, f"Topic already has {have} partition(s).")
    if t.count < have:
        raise _Refused(
            ErrorCode.INVALID_PARTITIONS,
            f"The topic {t.name} currently has {have} partition(s); {t.count} would not be an increase.",
        )
    additional = t.count - have
    if t.assignments is not None and len(t.assignments) != additional:
        raise _Refused(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but "
            f"only {len(t.assignments)} assignment(s) were specified.",
        )
    # Kafka takes the replication factor from the first partition its table of the topic's
    # partitions (a TimelineHashMap) iterates, not partition 0: they differ once a
    # reassignment changed some partition's replica count (docs/twin.md #23).
    rf = len(parts[kafka_table_first(parts, kafka_table_slots(len(parts)))].replicas) if parts else 0
    plans: list[list[int]]
    if t.assignments is not None:
        plans = []
        for i, a in enumerate(t.assignments):
            replicas = list(a.broker_ids)
            check_manual_assignment(st, replicas, rf)
            if not any(ops.active(b) for b in replicas):
                raise _Refused(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    "All brokers specified in the manual partition "
                    f"assignment for partition {have + i} are fenced or in controlled shutdown.",
                )
            plans.append(replicas)
    else:
        placed = ops.place(have, min(additional, cap), rf)
        if isinstance(placed, tuple):
            raise _Refused(*placed)
        plans = placed
    cut = additional > cap
    plans = plans[:cap]
    pversion = fv.partition_record_version(ops.metadata_version)
    jbod = fv.supports_jbod(ops.metadata_version)
    for i, replicas in enumerate(plans):
        isr = [b for b in replicas if ops.active(b)]
        if not isr:
            raise _Refused(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {rf} time(s): All "
                "brokers are currently fenced or in controlled shutdown.",
            )
        rec = PartitionRecord(
            partition_id=have + i,
            topic_id=tid,
            replicas=replicas,
            isr=isr,
            leader=isr[0],
            leader_epoch=0,
            partition_epoch=0,
            directories=[ops.default_dir(b) for b in replicas] if jbod and pversion >= 1 else [],
        )
        records.append((rec, pversion))
    return cut


def check_manual_assignment(st: Any, replicas: list[int], rf: int | None) -> None:
    """Kafka's validateManualPartitionAssignment.

    Raises:
        _Refused: INVALID_REPLICA_ASSIGNMENT with Kafka's message.
    """
    if not replicas:
        raise _Refused(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
        )
    previous = None
    for b in sorted(replicas):
        if b not in st.brokers:
            raise _Refused(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {b}, but no such broker is registered.",
            )
        if not getattr(st.brokers[b], "has_uncordoned_dirs", True):
            raise _Refused(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {b}, but all its log directories are cordoned.",
            )
        if b == previous:
            raise _Refused(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {b} more than once.",
            )
        previous = b
    if rf is not None and len(replicas) != rf:
        raise _Refused(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with "
            f"{len(replicas)} replica(s), but this is not consistent with previous partitions, which have "
            f"{rf} replica(s).",
        )


def create_partitions(
    ops: Ops, api_version: int, req: CreatePartitionsRequest
) -> tuple[CreatePartitionsResponse, list[RecordAndVersion]]:
    """CreatePartitions: duplicates first (INVALID_REQUEST), then one result per topic.

    Records of a topic are kept only when the whole topic succeeds; ``validate_only``
    writes nothing. New partitions are placed as new topics are and lead from the first
    active replica.
    """
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results: list[CreatePartitionsTopicResult] = []
    for name in dict.fromkeys(t.name for t in req.topics if counts[t.name] > 1):
        results.append(CreatePartitionsTopicResult(name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
    if sum(1 for t in req.topics if counts[t.name] == 1) > MAX_RECORDS_PER_USER_OP:
        # Kafka's result list is bounded too: past 10,000 topics the whole request fails.
        refused = [CreatePartitionsTopicResult(t.name, ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH) for t in req.topics]
        return CreatePartitionsResponse(results=refused), []
    records: list[RecordAndVersion] = []
    for t in req.topics:
        if counts[t.name] > 1:
            continue
        mine: list[RecordAndVersion] = []
        try:
            cut = _create_for_topic(ops, t, mine, MAX_RECORDS_PER_USER_OP - len(records))
        except _Refused as exc:
            results.append(CreatePartitionsTopicResult(t.name, exc.code, exc.message))
            continue
        records += mine
        if cut:
            # Kafka adds a topic's PartitionRecords one by one to its bounded list and
            # catches the overflow per topic as an unexpected error: the partitions that
            # fitted stay, the topic answers UNKNOWN_SERVER_ERROR (controller/limits.py).
            results.append(CreatePartitionsTopicResult(t.name, ErrorCode.UNKNOWN_SERVER_ERROR, None))
            continue
        results.append(CreatePartitionsTopicResult(t.name, 0, None))
    return CreatePartitionsResponse(results=results), [] if req.validate_only else records


# ---------------------------------------------------------------------------- ElectLeaders


def elect_one(ops: Ops, topic: str, pid: int, election: int, records: list[RecordAndVersion]) -> tuple[int, str | None]:
    st = ops.st
    tid = st.topic_id_of(topic)
    if tid is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    p = st.topics[tid].partitions.get(pid)
    if p is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{pid}"
    v = ops.view(p)
    if (election == PREFERRED and v.leader == v.replicas[0]) or (election == UNCLEAN and v.leader != NO_LEADER):
        return ELECTION_NOT_NEEDED, "Leader election not needed for topic partition."
    change = ops.change(p, election=election)
    if change is None:
        if election == PREFERRED:
            return PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available."
        return ELIGIBLE_LEADERS_NOT_AVAILABLE, "Eligible topic partition leaders are not available."
    records.append(change)
    return 0, None


def elect_leaders(
    ops: Ops, api_version: int, req: ElectLeadersRequest
) -> tuple[ElectLeadersResponse, list[RecordAndVersion]]:
    """ElectLeaders: PREFERRED (0) or UNCLEAN (1) elections, per partition.

    A null partition list means every partition, and then partitions that already have
    the wanted leader are left out of the answer. An unknown election type refuses every
    partition with INVALID_REQUEST.
    """
    election = req.election_type if api_version >= 1 else PREFERRED
    resp = ElectLeadersResponse()
    records: list[RecordAndVersion] = []
    if election not in (PREFERRED, UNCLEAN):
        why = f"Unknown election type {election}"
        resp.error_code = ErrorCode.INVALID_REQUEST if api_version >= 1 else 0
        for tp in req.topic_partitions or []:
            resp.replica_election_results.append(
                ReplicaElectionResult(
                    topic=tp.topic,
                    partition_result=[PartitionResult(p, ErrorCode.INVALID_REQUEST, why) for p in tp.partitions],
                )
            )
        return resp, []
    if req.topic_partitions is None:
        for _tid, topic in sorted(ops.st.topics.items(), key=lambda kv: kv[1].name):
            result = ReplicaElectionResult(topic=topic.name)
            resp.replica_election_results.append(result)
            for pid in sorted(topic.partitions):
                code, msg = elect_one(ops, topic.name, pid, election, records)
                if code != ELECTION_NOT_NEEDED:
                    result.partition_result.append(PartitionResult(pid, code, msg))
        return _bounded_elections(api_version, req, resp, records)
    for tp in req.topic_partitions:
        result = ReplicaElectionResult(topic=tp.topic)
        resp.replica_election_results.append(result)
        for pid in tp.partitions:
            code, msg = elect_one(ops, tp.topic, pid, election, records)
            result.partition_result.append(PartitionResult(pid, code, msg))
    return _bounded_elections(api_version, req, resp, records)


def _bounded_elections(
    api_version: int, req: ElectLeadersRequest, resp: ElectLeadersResponse, records: list[RecordAndVersion]
) -> tuple[ElectLeadersResponse, list[RecordAndVersion]]:
    """Kafka's bounded record list throws past 10,000 elections: the whole request fails
    with POLICY_VIOLATION, every named partition carrying it (none when all were asked)."""
    if len(records) <= MAX_RECORDS_PER_USER_OP:
        return resp, records
    refused = ElectLeadersResponse(error_code=ErrorCode.POLICY_VIOLATION if api_version >= 1 else 0)
    for tp in req.topic_partitions or []:
        refused.replica_election_results.append(
            ReplicaElectionResult(
                topic=tp.topic,
                partition_result=[
                    PartitionResult(p, ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH) for p in tp.partitions
                ],
            )
        )
    return refused, []


# ---------------------------------------------------------------------------- reassignments


def _reassign_one(
    ops: Ops, topic: str, pid: int, target: list[int] | None, allow_rf_change: bool = True
) -> RecordAndVersion | None:
    st = ops.st
    tid = st.topic_id_of(topic)
    if tid is None:
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic}.")
    p = st.topics[tid].partitions.get(pid)
    if p is None:
        raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {topic}:{pid}.")
    v = ops.view(p)
    if target is None:
        if not v.adding and not v.removing:
            # Kafka's text is the error's default message, which ApiError.fromThrowable turns
            # into a null message on the wire.
            raise _Refused(NO_REASSIGNMENT_IN_PROGRESS)
        original = [b for b in v.replicas if b not in v.adding]
        isr = [b for b in v.isr if b not in v.adding]
        unclean_on = st.configs.topic_flag(topic, "unclean.leader.election.enable")
        if not isr:
            if not unclean_on:
                raise _Refused(
                    ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Unable to revert partition assignment for {topic}:{pid} because it would require "
                    "an unclean leader election.",
                )
            isr = [original[0]]
        return ops.change(
            p,
            target_isr=isr,
            target_replicas=original,
            target_removing=[],
            target_adding=[],
            election=UNCLEAN if unclean_on else ONLINE,
        )
    check_manual_assignment(st, list(target), None)
    if not allow_rf_change:
        # KIP-860 (v1): the count of replicas the partition will end with may not change.
        current = (
            len((set(v.replicas) | set(v.adding)) - set(v.removing)) if v.adding or v.removing else len(v.replicas)
        )
        if current != len(target):
            raise _Refused(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"The replication factor is changed from {current} to {len(target)}",
            )
    removing = sorted(set(v.replicas) - set(target))
    adding = sorted(set(target) - set(v.replicas))
    replicas = list(target) + removing
    targets: dict[str, Any] = {}
    if replicas != list(v.replicas):
        targets["target_replicas"] = replicas
    if removing:
        targets["target_removing"] = removing
    if adding:
        targets["target_adding"] = adding
    return ops.change(p, **targets)


def alter_partition_reassignments(
    ops: Ops, api_version: int, req: AlterPartitionReassignmentsRequest
) -> tuple[AlterPartitionReassignmentsResponse, list[RecordAndVersion]]:
    """AlterPartitionReassignments: start, change or cancel (null replicas) reassignments."""
    allow = req.allow_replication_factor_change if api_version >= 1 else True
    resp = AlterPartitionReassignmentsResponse(error_code=0, error_message=None)
    if api_version >= 1:
        resp.allow_replication_factor_change = allow
    records: list[RecordAndVersion] = []
    for t in req.topics:
        tr = ReassignableTopicResponse(name=t.name)
        resp.responses.append(tr)
        for part in t.partitions:
            code, msg = 0, None
            try:
                rec = _reassign_one(
                    ops, t.name, part.partition_index, None if part.replicas is None else list(part.replicas), allow
                )
                if rec is not None:
                    if len(records) >= MAX_RECORDS_PER_USER_OP:
                        # Kafka catches its bounded list's overflow per partition as an
                        # unexpected error; the reassignments before it still happen.
                        raise _Refused(ErrorCode.UNKNOWN_SERVER_ERROR, None)
                    records.append(rec)
            except _Refused as exc:
                code, msg = exc.code, exc.message
            tr.partitions.append(ReassignablePartitionResponse(part.partition_index, code, msg))
    return resp, records


def list_partition_reassignments(
    st: Any, api_version: int, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    """Partitions with a reassignment in progress: all (null topics) or those named."""
    resp = ListPartitionReassignmentsResponse(error_code=0, error_message=None)

    def add(topic: Any, pids: Sequence[int]) -> None:
        ongoing = OngoingTopicReassignment(name=topic.name)
        for pid in pids:
            p = topic.partitions.get(pid)
            if p is None or not (p.adding or p.removing):
                continue
            ongoing.partitions.append(
                OngoingPartitionReassignment(
                    partition_index=pid,
                    replicas=list(p.replicas),
                    adding_replicas=list(p.adding),
                    removing_replicas=list(p.removing),
                )
            )
        if ongoing.partitions:
            resp.topics.append(ongoing)

    if req.topics is None:
        for _tid, topic in sorted(st.topics.items(), key=lambda kv: kv[1].name):
            add(topic, sorted(topic.partitions))
    else:
        for t in req.topics:
            tid = st.topic_id_of(t.name)
            if tid is not None:
                add(st.topics[tid], list(t.partition_indexes))
    return resp
