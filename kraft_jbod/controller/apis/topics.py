"""Topics and partitions: CreateTopics (19), DeleteTopics (20), AlterPartition (56).

CreateTopics plans every topic of a request against the draft (so names and placement
counts of earlier topics in the request count), writes a TopicRecord and one
PartitionRecord per partition, and refuses the whole request past 10,000 partitions as
Kafka does (KAFKA-17870). DeleteTopics writes one RemoveTopicRecord per distinct topic.
AlterPartition applies the pure rules of :mod:`kraft_jbod.controller.alter_partition`.
"""

from __future__ import annotations

import dataclasses
import random
import re
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from kraft_jbod.controller import alter_partition as ap
from kraft_jbod.controller import features as fv
from kraft_jbod.controller.apis import configs, partition_ops
from kraft_jbod.controller.apis import partitions as pb
from kraft_jbod.controller.context import Call, ControllerContext, Outcome, RecordAndVersion, Sliced
from kraft_jbod.controller.draft import Draft
from kraft_jbod.controller.image import NO_LEADER, Partition, TopicInfo
from kraft_jbod.controller.limits import (
    EXCESSIVE_BATCH,
    EXCESSIVE_PARTITIONS,
    MAX_PARTITIONS_PER_REQUEST,
    MAX_RECORDS_PER_USER_OP,
)
from kraft_jbod.controller.placement import PlacementError, StripedPlacer
from kraft_jbod.controller.profiles import is_reserved_directory
from kraft_jbod.messages.alter_partition_request import AlterPartitionRequest
from kraft_jbod.messages.alter_partition_request import PartitionData as AlterPartData
from kraft_jbod.messages.alter_partition_response import AlterPartitionResponse
from kraft_jbod.messages.alter_partition_response import PartitionData as AlterPartResult
from kraft_jbod.messages.alter_partition_response import TopicData as AlterTopicResult
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest
from kraft_jbod.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.remove_topic_record import RemoveTopicRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.wire.primitives import uuid_to_base64url

_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_NAME = 249
# Namespace for deterministic topic ids (uuid5 of cluster id, name and log offset).
_TOPIC_ID_NAMESPACE = uuid.UUID("6d1e2f0a-5b7c-4c8e-9a3d-0f4b2e8c7a15")


# ---------------------------------------------------------------------- CreateTopics


def new_topic_id(ctx: ControllerContext, name: str, next_offset: int) -> uuid.UUID:
    """Deterministic (replay needs no randomness), never reserved, never a '-' string."""
    salt = 0
    while True:
        u = uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{ctx.cluster_id}/{name}/{next_offset}/{salt}")
        salt += 1
        if is_reserved_directory(u) or u in ctx.image.topics or uuid_to_base64url(u).startswith("-"):
            continue
        return u


def handle_create_topics(ctx: ControllerContext, call: Call, req: CreateTopicsRequest) -> Outcome:
    img = ctx.image
    api_version, next_offset = call.api_version, call.next_offset
    # Kafka (KAFKA-17870) refuses the whole request past 10,000 new partitions, before
    # planning any: a NumPartitions of 2**31-1 must not be planned (found by the fuzzer).
    if _requested_partitions(ctx, req) > MAX_PARTITIONS_PER_REQUEST:
        return Outcome(CreateTopicsResponse(topics=_refuse_all(req, EXCESSIVE_PARTITIONS)), [])
    counts: dict[str, int] = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    d = Draft(ctx)
    facts: dict[int, tuple[uuid.UUID, bool, bool]] = {}  # per broker, see _broker_facts
    results: list[CreatableTopicResult] = []
    would_write = 0  # records, counted for validate-only requests too
    for t in req.topics:
        res = CreatableTopicResult(name=t.name, error_message=None)
        results.append(res)
        refused = _name_error(img.topic_names, t.name, counts[t.name])
        if refused is not None:
            res.error_code, res.error_message = refused
            continue
        # Topic configs (apis/configs.py): checked before placement, written right after the
        # TopicRecord, listed in v5+ answers, as Kafka does.
        config_records = configs.creation_records(ctx, t.name, [(c.name, c.value) for c in t.configs])
        if isinstance(config_records, tuple):
            res.error_code, res.error_message = config_records
            continue
        plan = plan_topic(ctx, t, next_offset + len(d.records))
        if isinstance(plan, tuple):
            res.error_code, res.error_message = plan
            continue
        # A min.insync.replicas among them brings a ClearElrRecord for the topic when ELR is
        # on: Kafka builds topic configs as an IncrementalAlterConfigs of the new resource.
        clears = configs.clear_elr_records(ctx, config_records)
        would_write += 1 + len(config_records) + len(clears) + len(plan)
        rf = len(plan[0]) if plan else 0
        if api_version >= 5:
            res.num_partitions, res.replication_factor = len(plan), rf
            res.configs = configs.created_topic_configs(ctx, config_records)
        # Kafka draws the id before it looks at ValidateOnly, so a validated topic's answer
        # carries an id too (one that names nothing).
        topic_id = new_topic_id(ctx, t.name, next_offset + len(d.records))
        if api_version >= 7:
            res.topic_id = topic_id
        if req.validate_only:
            continue
        d.records.append((TopicRecord(name=t.name, topic_id=topic_id), 0))
        d.records.extend(config_records)
        d.records.extend(clears)
        _draft_partitions(ctx, d, topic_id, plan, facts)
    if would_write > MAX_RECORDS_PER_USER_OP:
        return Outcome(CreateTopicsResponse(topics=_refuse_all(req, EXCESSIVE_BATCH)), [])
    return Outcome(CreateTopicsResponse(topics=results), d.records)


def _requested_partitions(ctx: ControllerContext, req: CreateTopicsRequest) -> int:
    """How many partitions the request would create, counted before planning any."""
    total = 0
    for t in req.topics:
        if t.assignments:
            total += len(t.assignments)
        else:
            total += ctx.default_num_partitions if t.num_partitions == -1 else max(0, t.num_partitions)
    return total


def _name_error(topic_names: Mapping[str, object], name: str, times_named: int) -> tuple[int, str] | None:
    """Kafka's refusals of a topic by its name: named twice, invalid, or taken."""
    if times_named > 1:
        return ErrorCode.INVALID_REQUEST, "Duplicate topic name."
    err = topic_name_error(name)
    if err is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, err
    if name in topic_names:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
    return None


def _draft_partitions(
    ctx: ControllerContext,
    d: Draft,
    topic_id: uuid.UUID,
    plan: list[list[int]],
    facts: dict[int, tuple[uuid.UUID, bool, bool]],
) -> None:
    """The PartitionRecords of a new topic: every replica on its broker's default
    directory, the active ones in the ISR, the first that may lead as leader."""
    pversion = fv.partition_record_version(ctx.image.metadata_version)
    for pid, replicas in enumerate(plan):
        rows = [facts[b] if b in facts else _broker_facts(ctx, d, b, facts) for b in replicas]
        dirs = [row[0] for row in rows]
        isr = [b for b, row in zip(replicas, rows, strict=True) if row[1]]
        # the first replica in the ISR whose directory is online
        leader = next((b for b, row in zip(replicas, rows, strict=True) if row[2]), NO_LEADER)
        rec = PartitionRecord(
            partition_id=pid,
            topic_id=topic_id,
            replicas=list(replicas),
            isr=isr,
            leader=leader,
            leader_epoch=0,
            partition_epoch=0,
            directories=dirs if pversion >= 1 else [],
        )
        d.records.append((rec, pversion))


def _broker_facts(
    ctx: ControllerContext, d: Draft, broker_id: int, facts: dict[int, tuple[uuid.UUID, bool, bool]]
) -> tuple[uuid.UUID, bool, bool]:
    """(default directory, active, may lead from it) of a broker, kept in ``facts``: a
    CreateTopics asks the same of each broker for every partition, and nothing it reads
    changes while the request is handled."""
    directory = partition_ops.default_dir(ctx, broker_id)
    reg = ctx.image.brokers.get(broker_id)
    active = reg is not None and reg.active
    row = facts[broker_id] = (directory, active, active and d.dir_online(broker_id, directory))
    return row


def _refuse_all(req: CreateTopicsRequest, message: str) -> list[CreatableTopicResult]:
    return [
        CreatableTopicResult(name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=message)
        for t in req.topics
    ]


def plan_topic(ctx: ControllerContext, t: CreatableTopic, next_offset: int) -> list[list[int]] | tuple[int, str]:
    """Replica lists for a new topic, or (error code, message), with Kafka's checks and texts."""
    brokers = ctx.image.brokers
    if t.assignments:
        if t.replication_factor != -1:
            return ErrorCode.INVALID_REQUEST, (
                "A manual partition assignment was specified, but replication factor was not set to -1."
            )
        if t.num_partitions != -1:
            return ErrorCode.INVALID_REQUEST, (
                "A manual partition assignment was specified, but numPartitions was not set to -1."
            )
        by_index: dict[int, list[int]] = {}
        rf: int | None = None
        for a in t.assignments:
            if a.partition_index in by_index:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"Found multiple manual partition assignments for partition {a.partition_index}"
                )
            problem = _manual_assignment_problem(ctx, list(a.broker_ids), rf)
            if problem is not None:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
            rf = len(a.broker_ids)
            if not any(brokers[b].active for b in a.broker_ids):
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (
                    f"All brokers specified in the manual partition assignment for partition "
                    f"{a.partition_index} are fenced or in controlled shutdown."
                )
            by_index[a.partition_index] = list(a.broker_ids)
        if sorted(by_index) != list(range(len(by_index))):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
        return [by_index[i] for i in range(len(by_index))]
    if t.replication_factor < -1 or t.replication_factor == 0:
        return ErrorCode.INVALID_REPLICATION_FACTOR, (
            "Replication factor must be larger than 0, or -1 to use the default value."
        )
    if t.num_partitions < -1 or t.num_partitions == 0:
        return ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
    n = ctx.default_num_partitions if t.num_partitions == -1 else t.num_partitions
    rf = ctx.default_replication_factor if t.replication_factor == -1 else t.replication_factor
    # Kafka draws from an unseeded Random; ours is seeded by the request so it replays.
    rng = random.Random(f"{ctx.cluster_id}/{t.name}/{next_offset}")
    try:
        plan = StripedPlacer(partition_ops.usable_brokers(ctx), rng).place(n, rf)
    except PlacementError as e:
        return ErrorCode.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {rf} time(s): {e}"
    for replicas in plan:
        if not any(brokers[b].active for b in replicas):
            return ErrorCode.INVALID_REPLICATION_FACTOR, (
                f"Unable to replicate the partition {rf} time(s): All brokers are currently fenced "
                "or in controlled shutdown."
            )
    return plan


def _manual_assignment_problem(ctx: ControllerContext, replicas: list[int], rf: int | None) -> str | None:
    """Kafka's validateManualPartitionAssignment, in its order (brokers checked sorted by id)."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    prev: int | None = None
    for b in sorted(replicas):
        reg = ctx.image.brokers.get(b)
        if reg is None:
            return f"The manual partition assignment includes broker {b}, but no such broker is registered."
        if not reg.has_uncordoned_dirs:
            return f"The manual partition assignment includes broker {b}, but all its log directories are cordoned."
        if b == prev:
            return f"The manual partition assignment includes the broker {b} more than once."
        prev = b
    if rf is not None and len(replicas) != rf:
        return (
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this "
            f"is not consistent with previous partitions, which have {rf} replica(s)."
        )
    return None


def topic_name_error(name: str) -> str | None:
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > _MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {_MAX_TOPIC_NAME} characters"
    if not _TOPIC_NAME.fullmatch(name):
        return f"Topic name {name!r} is illegal: use only ASCII alphanumerics, '.', '_' and '-'"
    return None


# ---------------------------------------------------------------------- DeleteTopics


def handle_delete_topics(ctx: ControllerContext, call: Call, req: DeleteTopicsRequest) -> Outcome:
    img = ctx.image
    api_version = call.api_version
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    if api_version >= 6:
        for s in req.topics:
            has_id = s.topic_id.int != 0
            wanted.append((s.name, s.topic_id if has_id else None))
    else:
        wanted = [(name, None) for name in req.topic_names]
    seen: dict[object, int] = {}
    for name, tid in wanted:
        if (name is None) != (tid is None):  # only well-formed entries count as repeats
            key = tid if tid is not None else name
            seen[key] = seen.get(key, 0) + 1
    records: list[RecordAndVersion] = []
    out: list[DeletableTopicResult] = []
    removed: set[uuid.UUID] = set()
    for name, tid in wanted:
        res = DeletableTopicResult(name=name, error_message=None)
        if api_version >= 6 and tid is not None:
            res.topic_id = tid
        out.append(res)
        key = tid if tid is not None else name
        if (name is not None and tid is not None) or (name is None and tid is None):
            res.error_code, res.error_message = (
                ErrorCode.INVALID_REQUEST,
                "Give exactly one of topic name and topic id.",
            )
            continue
        if seen[key] > 1:
            res.error_code, res.error_message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
            continue
        if tid is not None:
            topic = img.topics.get(tid)
            if topic is None:
                res.error_code, res.error_message = (
                    ErrorCode.UNKNOWN_TOPIC_ID,
                    "This server does not host this topic ID.",
                )
                continue
            res.name = topic.name
        else:
            found = img.topic_names.get(name or "")
            if found is None:
                res.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                res.error_message = "This server does not host this topic-partition."
                continue
            topic = img.topics[found]
            if api_version >= 6:
                res.topic_id = topic.topic_id
        if topic.topic_id in removed:
            continue
        removed.add(topic.topic_id)
        if len(records) >= MAX_RECORDS_PER_USER_OP:
            # Kafka catches its bounded list's overflow per topic as an unexpected error:
            # the first 10,000 topics are deleted, the rest answer UNKNOWN_SERVER_ERROR.
            res.error_code, res.error_message = ErrorCode.UNKNOWN_SERVER_ERROR, None
            continue
        records.append((RemoveTopicRecord(topic_id=topic.topic_id), 0))
    return Outcome(DeleteTopicsResponse(responses=out), records)


# ---------------------------------------------------------------------- AlterPartition


def handle_alter_partition(ctx: ControllerContext, call: Call, req: AlterPartitionRequest) -> Outcome:
    """ISR and leader-recovery-state changes from a partition leader (rules in alter_partition.py).

    Entries are checked in request order against the partition as changed by earlier
    entries of the same request, so a repeated partition sees its own first change
    (and, carrying the old partition epoch, gets INVALID_UPDATE_VERSION).
    """
    img = ctx.image
    reg = img.brokers.get(req.broker_id)
    if reg is None or reg.epoch != req.broker_epoch:
        return Outcome(AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), [])
    by_id = call.api_version >= 2
    alter = _AlterPass(ctx, req.broker_id, call.api_version)
    topics_out: list[AlterTopicResult] = []
    for td in req.topics:
        out = AlterTopicResult(topic_name=td.topic_name if not by_id else "", topic_id=td.topic_id)
        topics_out.append(out)
        tid = td.topic_id if by_id else img.topic_names.get(td.topic_name)
        topic = None if tid is None else img.topics.get(tid)
        if topic is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID if by_id else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            out.partitions = [
                AlterPartResult(partition_index=pd.partition_index, error_code=code) for pd in td.partitions
            ]
            continue
        out.partitions.extend(alter.partition(topic, pd) for pd in td.partitions)
    return Outcome(AlterPartitionResponse(error_code=ErrorCode.NONE, topics=topics_out), alter.records)


class _AlterPass:
    """One AlterPartition request's pass over its partitions: ``seen`` holds each
    partition as changed by earlier entries, ``records`` the changes in request order."""

    def __init__(self, ctx: ControllerContext, broker_id: int, api_version: int) -> None:
        self.ctx = ctx
        self.broker_id = broker_id
        self.api_version = api_version
        self.mv = ctx.image.metadata_version
        self.record_version = fv.partition_change_record_version(self.mv)
        self.elr_on = pb.elr_enabled(ctx.image)
        self.empty = Draft(ctx)
        self.seen: dict[Partition, ap.PartitionView] = {}
        self.records: list[RecordAndVersion] = []

    def partition(self, topic: TopicInfo, pd: AlterPartData) -> AlterPartResult:
        """Check one entry against the partition as it stands, and record its change."""
        p = topic.partitions.get(pd.partition_index)
        view = None if p is None else self.seen.get(p) or _partition_view(p)
        empty = self.empty

        def eligibility(b: int, epoch: int, p: Partition | None = p) -> str | None:
            return isr_ineligibility(empty, p, b, epoch)

        prop = _proposal(self.api_version, pd)
        verdict = ap.validate(self.broker_id, view, prop, self.api_version, eligibility)
        if verdict.error_code != ErrorCode.NONE or p is None or view is None:
            return AlterPartResult(partition_index=pd.partition_index, error_code=verdict.error_code)
        new_isr = [b for b, _ in prop.new_isr]
        if (p.adding or p.removing) and p not in self.seen:
            # An ongoing reassignment: Kafka's change builder may complete it here.
            moved = partition_ops.reassignment_isr_change(self.ctx, p, new_isr, prop.leader_recovery_state)
            if moved is not None:
                rec_moved, view = moved
                self.records.append((rec_moved, self.record_version))
                self.seen[p] = view
                if view.leader != self.broker_id:
                    return AlterPartResult(partition_index=pd.partition_index, error_code=ErrorCode.NEW_LEADER_ELECTED)
                return _accepted(pd, view)
        change = ap.plan_change(view, new_isr, prop.leader_recovery_state, self.mv)
        new_elr = self._new_elr(topic, p, view, new_isr) if self.elr_on else None
        if change is None and new_elr is not None:
            change = ap.Change(None, ap.NO_LEADER_CHANGE, ap.NO_RECOVERY_CHANGE)
        if change is not None:
            rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id)
            if change.isr is not None:
                rec.isr = list(change.isr)
            rec.leader = change.leader
            rec.leader_recovery_state = change.leader_recovery_state
            rec.eligible_leader_replicas = new_elr
            self.records.append((rec, self.record_version))
            view = self.seen[p] = change.apply_to(view)
        return _accepted(pd, view)

    def _new_elr(self, topic: TopicInfo, p: Partition, view: ap.PartitionView, new_isr: list[int]) -> list[int] | None:
        """KIP-966: members leaving the ISR below min ISR join the ELR (Kafka's builder);
        None when the ELR stays as it is."""
        target = pb.target_elr(
            view.isr,
            p.elr,
            new_isr,
            pb.effective_min_isr(self.ctx.image.configs, topic.name, pb.min_isr_cap(topic.partitions)),
        )
        return None if target == list(p.elr) else target


def _accepted(pd: AlterPartData, view: ap.PartitionView) -> AlterPartResult:
    """The answer to an accepted entry: the partition as it now stands."""
    return AlterPartResult(
        partition_index=pd.partition_index,
        error_code=ErrorCode.NONE,
        leader_id=view.leader,
        leader_epoch=view.leader_epoch,
        isr=list(view.isr),
        leader_recovery_state=view.leader_recovery_state,
        partition_epoch=view.partition_epoch,
    )


def split_alter_partition(req: AlterPartitionRequest, limit: int) -> Sliced | None:
    """Cut an AlterPartition naming more than ``limit`` partitions into requests of at most
    that many, in request order (server.py Rule 4), built one at a time as the server asks;
    None when it names no more.

    A leader shrinking the ISR of 10^6 partitions after a follower died sends one such
    request. Each slice sees the slices before it applied, as one pass sees the changes
    of the request's earlier entries: a repeated partition carrying the old partition
    epoch gets INVALID_UPDATE_VERSION either way. A topic cut in two is one entry again;
    a topic without partitions goes with the entries before it.
    """
    if sum(len(t.partitions) for t in req.topics) <= limit:
        return None
    continues: list[bool] = []  # does the slice's first topic continue the previous slice's last?

    def bodies() -> Iterator[Any]:
        cur: list[Any] = []
        at: int | None = None  # topic index of cur's last entry
        first: int | None = None
        before: int | None = None
        count = 0

        def place(ti: int) -> None:
            nonlocal at, first
            if at != ti:
                cur.append(dataclasses.replace(req.topics[ti], partitions=[]))
                at = ti
            if first is None:
                first = ti

        def flush() -> Any:
            nonlocal cur, at, first, before, count
            continues.append(before is not None and before == first)
            before, body = at, dataclasses.replace(req, topics=cur)
            cur, at, first, count = [], None, None, 0
            return body

        for ti, td in enumerate(req.topics):
            if not td.partitions:
                place(ti)
            i = 0
            while i < len(td.partitions):
                if count == limit:
                    yield flush()
                take = td.partitions[i : i + limit - count]
                place(ti)
                cur[-1].partitions.extend(take)
                count += len(take)
                i += len(take)
        if cur:
            yield flush()

    return Sliced(bodies(), lambda responses: _merge_alter_partition(responses, continues))


def _merge_alter_partition(responses: list[Any], continues: list[bool]) -> AlterPartitionResponse:
    for resp in responses:
        if resp.error_code != ErrorCode.NONE:
            return AlterPartitionResponse(error_code=resp.error_code)
    out: list[AlterTopicResult] = []
    for resp, same_topic in zip(responses, continues, strict=False):
        for j, t in enumerate(resp.topics):
            if j == 0 and same_topic and out:
                out[-1].partitions.extend(t.partitions)
            else:
                out.append(t)
    return AlterPartitionResponse(error_code=ErrorCode.NONE, topics=out)


def isr_ineligibility(d: Draft, p: Partition | None, broker_id: int, epoch: int) -> str | None:
    """Why ``broker_id`` may not be in ``p``'s ISR (Rule 8 of alter_partition.py), or None."""
    reg = d.image.brokers.get(broker_id)
    if reg is None:
        return "not registered"
    if reg.in_controlled_shutdown or reg.cs_offset >= 0:
        return "shutting down"
    if reg.fenced:
        return "fenced"
    if epoch != -1 and epoch != reg.epoch:
        return f"broker epoch {epoch} is not {reg.epoch}"
    if p is not None and broker_id in p.replicas:
        directory = p.dir_of(broker_id)
        if not d.dir_online(broker_id, directory):
            return f"directory {uuid_to_base64url(directory)} is offline"
    return None


def _partition_view(p: Partition) -> ap.PartitionView:
    return ap.PartitionView(p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.leader_recovery_state)


def _proposal(api_version: int, pd: AlterPartData) -> ap.Proposal:
    """Before v3 the ISR carries no broker epochs (-1: not checked), as Kafka converts it."""
    if api_version >= 3:
        isr = tuple((x.broker_id, x.broker_epoch) for x in pd.new_isr_with_epochs)
    else:
        isr = tuple((b, -1) for b in pd.new_isr)
    lrs = pd.leader_recovery_state if api_version >= 1 else ap.RECOVERED
    return ap.Proposal(pd.leader_epoch, pd.partition_epoch, isr, lrs)
