"""Broker lifecycle: BrokerRegistration (62), BrokerHeartbeat (63), UnregisterBroker (64), session expiry.

Registration checks, in Kafka's order (ClusterControlManager.registerBroker, described
in our words): cluster id, a live session of another incarnation, ZK migration, LogDirs
(required, not reserved, not repeated, not owned by another broker), then features. A new
incarnation gets a new epoch (the offset of its RegisterBrokerRecord) and starts fenced.

Heartbeats go through the table of :mod:`kraft_jbod.controller.heartbeat`; OfflineLogDirs
(v1, JBOD levels) take the directories offline after the state transition.
"""

from __future__ import annotations

import uuid

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.context import Call, ControllerContext, Outcome, RecordAndVersion
from kraft_jbod.controller.draft import Draft
from kraft_jbod.controller.heartbeat import HbEffect, HbState, classify, transition
from kraft_jbod.controller.image import BrokerInfo
from kraft_jbod.controller.limits import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP
from kraft_jbod.controller.profiles import is_reserved_directory
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest
from kraft_jbod.messages.broker_registration_response import BrokerRegistrationResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.register_broker_record import BrokerEndpoint, BrokerFeature, RegisterBrokerRecord
from kraft_jbod.messages.unregister_broker_record import UnregisterBrokerRecord
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from kraft_jbod.messages.unregister_broker_response import UnregisterBrokerResponse


def handle_registration(ctx: ControllerContext, call: Call, req: BrokerRegistrationRequest) -> Outcome:
    def fail(code: int) -> Outcome:
        return Outcome(BrokerRegistrationResponse(error_code=code, broker_epoch=-1), [])

    img = ctx.image
    api_version, now_ms, next_offset = call.api_version, call.now_ms, call.next_offset
    if req.cluster_id != ctx.cluster_id:
        return fail(ErrorCode.INCONSISTENT_CLUSTER_ID)
    existing = img.brokers.get(req.broker_id)
    new_incarnation = existing is None or existing.incarnation_id != req.incarnation_id
    if (
        existing is not None
        and new_incarnation
        and ctx.sessions.valid(req.broker_id, existing.epoch, now_ms, ctx.session_timeout_ms)
    ):
        return fail(ErrorCode.DUPLICATE_BROKER_REGISTRATION)
    if api_version >= 1 and req.is_migrating_zk_broker:
        return fail(ErrorCode.BROKER_ID_NOT_REGISTERED)
    mv = img.metadata_version
    jbod = fv.supports_jbod(mv)
    dirs = list(req.log_dirs) if api_version >= 2 else []
    if not jbod:
        dirs = []
    elif (dirs_error := log_dirs_error(ctx, req.broker_id, dirs)) is not None:
        return fail(dirs_error)
    feature_error = features_error(ctx, req)
    if feature_error != ErrorCode.NONE:
        return fail(feature_error)

    d = Draft(ctx)
    if new_incarnation and d.elr_enabled() and (existing is None or req.previous_broker_epoch != existing.epoch):
        # KIP-966: an unclean shutdown (Kafka compares PreviousBrokerEpoch with the stored
        # epoch) takes the broker out of every ISR and ELR. Without a registration Kafka's
        # stored epoch is -2, never equal: a broker unregistered while in some ELR leaves it
        # when it registers again (found by the twin, docs/twin.md).
        d.unclean_shutdown(req.broker_id)
    elif existing is not None and existing.active and new_incarnation:
        # The old incarnation still leads partitions; move them before the new
        # registration (fenced) replaces it, so no leader sits on a fenced broker. An amended
        # registration (same incarnation) changes no partition, whatever its directories, as
        # in Kafka (found by the twin, docs/twin.md #15).
        d.fence(existing, with_record=False)
    if new_incarnation or existing is None:
        epoch, fenced, ics = next_offset + len(d.records), True, False
    else:
        epoch, fenced, ics = existing.epoch, existing.fenced, existing.in_controlled_shutdown
    rec = RegisterBrokerRecord(
        broker_id=req.broker_id,
        incarnation_id=req.incarnation_id,
        broker_epoch=epoch,
        end_points=[BrokerEndpoint(x.name, x.host, x.port, x.security_protocol) for x in req.listeners],
        features=[BrokerFeature(f.name, f.min_supported_version, f.max_supported_version) for f in req.features],
        rack=req.rack,
        fenced=fenced,
        in_controlled_shutdown=ics,
        log_dirs=dirs,  # in request order, as Kafka copies them (the image sorts)
    )
    d.records.append((rec, fv.register_broker_record_version(mv)))
    return Outcome(BrokerRegistrationResponse(error_code=ErrorCode.NONE, broker_epoch=epoch), d.records)


def log_dirs_error(ctx: ControllerContext, broker_id: int, dirs: list[uuid.UUID]) -> int | None:
    """Kafka's LogDirs checks at JBOD levels: present, not reserved, not repeated, not another
    broker's (online) directory. None when they pass."""
    if not dirs:
        return ctx.profile.empty_log_dirs_error
    if any(is_reserved_directory(x) for x in dirs) or len(set(dirs)) != len(dirs):
        return ErrorCode.INVALID_REGISTRATION
    if any(ctx.image.dir_owner.get(x, broker_id) != broker_id for x in dirs):
        return ErrorCode.INVALID_REGISTRATION
    return None


def features_error(ctx: ControllerContext, req: BrokerRegistrationRequest) -> ErrorCode:
    """Kafka's feature checks in its order: each listed range must hold the finalized level
    (UNSUPPORTED_VERSION), metadata.version must be listed (INVALID_REGISTRATION), and every
    finalized feature the broker leaves out must be at level 0 (UNSUPPORTED_VERSION)."""
    finalized = dict(ctx.image.features)
    finalized[fv.METADATA_VERSION] = ctx.metadata_version
    finalized[fv.KRAFT_VERSION] = ctx.kraft_version  # from the log's control records, not the image
    listed = {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features}
    for name, (lo, hi) in listed.items():
        if not lo <= finalized.get(name, 0) <= hi:
            return ErrorCode.UNSUPPORTED_VERSION
    if fv.METADATA_VERSION not in listed:
        return ErrorCode.INVALID_REGISTRATION
    if any(level != 0 and name not in listed for name, level in finalized.items()):
        return ErrorCode.UNSUPPORTED_VERSION
    return ErrorCode.NONE


def handle_heartbeat(ctx: ControllerContext, call: Call, req: BrokerHeartbeatRequest) -> Outcome:
    caught_up = steady_heartbeat(ctx, call.api_version, req, call.now_ms)
    if caught_up is not None:
        return Outcome(steady_response(caught_up), [])
    img = ctx.image
    reg = img.brokers.get(req.broker_id)
    if reg is None or reg.epoch != req.broker_epoch:
        return Outcome(BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), [])
    b = reg.broker_id
    ctx.sessions.touch(b, reg.epoch, call.now_ms)
    ctx.sessions.metadata_offset[b] = req.current_metadata_offset
    caught_up = req.current_metadata_offset >= reg.reg_offset
    mv = img.metadata_version
    offline = list(req.offline_log_dirs) if call.api_version >= 1 and fv.supports_jbod(mv) else []
    if offline:
        refused = _unknown_offline_dir_answer(ctx, reg, offline, caught_up)
        if refused is not None:
            return Outcome(refused, [])
    return _heartbeat_change(ctx, call, req, reg, caught_up, offline)


def steady_heartbeat(ctx: ControllerContext, api_version: int, req: BrokerHeartbeatRequest, now_ms: int) -> bool | None:
    """A steady heartbeat (most of them), done: the session touched and the broker's
    metadata offset noted; returns the answer's IsCaughtUp (the answer is
    :func:`steady_response` of it). None, with nothing done, for any other heartbeat (a
    stale epoch, an offline directory, a wish to fence or shut down, a broker not
    unfenced, cordoned directories changed): :func:`handle_heartbeat` takes those.

    The table leaves an unfenced broker that wants neither fence nor shutdown unfenced with
    no effect, whatever else holds; with no offline dir and no change of its cordoned dirs
    such a heartbeat writes nothing, so it is answered before the draft, the classifier
    and the unassigned-replica scan. The server answers it straight from its bytes too
    (controller/server.py, Rule 8), so this is the one place that says what "steady" is.
    """
    img = ctx.image
    reg = img.brokers.get(req.broker_id)
    if reg is None or reg.epoch != req.broker_epoch or reg.hb_state is not HbState.UNFENCED:
        return None
    if req.want_fence or req.want_shut_down:
        return None
    mv = img.metadata_version
    if api_version >= 1 and req.offline_log_dirs and fv.supports_jbod(mv):
        return None
    cordoned = req.cordoned_log_dirs if api_version >= 2 else None
    if cordoned is not None and fv.supports_cordoned_dirs(mv) and _cordoned_changed(reg.cordoned_dirs, cordoned):
        return None
    b = reg.broker_id
    sessions = ctx.sessions
    sessions.touch(b, reg.epoch, now_ms)
    sessions.metadata_offset[b] = req.current_metadata_offset
    return bool(req.current_metadata_offset >= reg.reg_offset)


def steady_response(caught_up: bool) -> BrokerHeartbeatResponse:
    """The answer to a steady heartbeat (see :func:`steady_heartbeat`)."""
    return BrokerHeartbeatResponse(
        error_code=ErrorCode.NONE, is_caught_up=caught_up, is_fenced=False, should_shut_down=False
    )


def _unknown_offline_dir_answer(
    ctx: ControllerContext, reg: BrokerInfo, offline: list[uuid.UUID], caught_up: bool
) -> BrokerHeartbeatResponse | None:
    """The profile's refusal of a heartbeat naming an offline directory the broker never
    registered, or None (the default profile accepts it)."""
    error = ctx.profile.unknown_offline_dir_error
    if error is None:
        return None
    registered = set(reg.registered_dirs)
    if all(x in registered for x in offline):
        return None
    return BrokerHeartbeatResponse(
        error_code=error, is_caught_up=caught_up, is_fenced=reg.hb_state.fenced, should_shut_down=False
    )


def _heartbeat_change(
    ctx: ControllerContext,
    call: Call,
    req: BrokerHeartbeatRequest,
    reg: BrokerInfo,
    caught_up: bool,
    offline: list[uuid.UUID],
) -> Outcome:
    """The full path of a heartbeat that may move the broker's state: classify it, take
    the table's transition, and draft the records of its effect, offline directories and
    cordoned directories."""
    img = ctx.image
    b = reg.broker_id
    mv = img.metadata_version
    state = reg.hb_state
    prof = ctx.profile
    unfence_allowed = True
    if prof.fence_while_unassigned and fv.supports_jbod(mv) and len(reg.registered_dirs) >= 2:
        unfence_allowed = not img.index.get(b, {}).get(prof.unassigned)
    event = classify(
        state,
        want_fence=req.want_fence,
        want_shut_down=req.want_shut_down,
        caught_up=caught_up,
        unfence_allowed=unfence_allowed,
        leads_partitions=img.leader_count.get(b, 0) > 0,
        # Only a broker in controlled shutdown needs the O(brokers) scan; for the others
        # (cs_offset -1) the comparison is true whatever the lowest offset is.
        shutdown_offset_replayed=reg.cs_offset < 0 or reg.cs_offset <= ctx.sessions.lowest_active_offset(img),
    )
    effect, next_state = transition(state, event)
    d = Draft(ctx)
    wanted = set(offline)
    newly = [x for x in reg.online_dirs if x in wanted]
    _draft_effect(d, reg, effect, newly, wanted, mv)
    if newly:
        # Kafka builds the directory step from the state before the heartbeat, as it built
        # the fencing, shutdown or unfencing step: a partition both steps change gets the
        # same record twice, and a broker an unfencing election just made leader is not
        # taken out again by the directory step. We do the same.
        step = Draft(ctx)
        step.dirs_offline(reg, newly)
        d.records.extend(step.records)
    cordoned = req.cordoned_log_dirs if call.api_version >= 2 else None
    if cordoned is not None and fv.supports_cordoned_dirs(mv) and _cordoned_changed(reg.cordoned_dirs, cordoned):
        # KIP-1066: recorded as sent whenever the set changes (or was unknown); nothing
        # else moves: assignment, ISR and fencing ignore cordoning, placement skips
        # brokers whose online directories are all cordoned.
        change = BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=reg.epoch, cordoned_log_dirs=list(cordoned))
        d.records.append((change, fv.registration_change_record_version(mv, cordoned=True)))
    if effect is HbEffect.ENTER_CONTROLLED_SHUTDOWN:
        _note_controlled_shutdown_batch(ctx, reg, call.next_offset, d.records)
    resp = BrokerHeartbeatResponse(
        error_code=ErrorCode.NONE,
        is_caught_up=caught_up,
        is_fenced=next_state.fenced,
        should_shut_down=next_state.should_shut_down,
    )
    return Outcome(resp, d.records)


def _draft_effect(
    d: Draft, reg: BrokerInfo, effect: HbEffect, newly: list[uuid.UUID], wanted: set[uuid.UUID], mv: int
) -> None:
    """Draft the records of the heartbeat table's effect (fence, unfence, or enter
    controlled shutdown); no effect drafts nothing."""
    b = reg.broker_id
    if effect is HbEffect.FENCE:
        d.fence(reg)
    elif effect is HbEffect.UNFENCE:
        if newly:
            # Kafka elects this broker for its leaderless partitions from the state before
            # the heartbeat, so one in a directory reported offline by the same heartbeat
            # gets it as leader (docs/divergences.md). We let the election see the
            # directories as offline already; the records keep Kafka's order.
            d.set_online(b, frozenset(reg.online_dirs) - wanted)
        d.unfence(reg)
    elif effect is HbEffect.ENTER_CONTROLLED_SHUTDOWN:
        # The durable flag is written once: a broker whose in-memory shutdown was forgotten
        # (an amended registration, a controller restart) enters again without it.
        if mv >= fv.MV_3_3_IV3 and not reg.in_controlled_shutdown:
            d.records.append(
                (BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=reg.epoch, in_controlled_shutdown=1), 1)
            )
        d.fence(reg, with_record=False)


def _note_controlled_shutdown_batch(
    ctx: ControllerContext, reg: BrokerInfo, next_offset: int, records: list[RecordAndVersion]
) -> None:
    """Note where the batch that begins a controlled shutdown ends.

    Kafka's controlled-shutdown offset is the END of the batch that began it (its
    processBatchEndOffset), not the offset of the registration change: every active
    broker must have replayed the whole batch. The handler only notes it, with the batch's
    first record; the replay of that record at that offset sets it, so an outcome that is
    dropped and handled again (server Rule 6) leaves no trace. A heartbeat that writes
    nothing is answered, never dropped: its offset (the last one written, as Kafka takes it
    then) is set at once.
    """
    batch_end = next_offset + len(records) - 1
    if records:
        ctx.sessions.cs_batch_end[reg.broker_id] = (next_offset, batch_end, records[0][0])
    else:
        reg.cs_offset = batch_end


def _cordoned_changed(known: tuple[uuid.UUID, ...] | None, reported: list[uuid.UUID]) -> bool:
    """Kafka's BrokerRegistration.cordonedDirChanged: unknown so far, or another set."""
    return known is None or set(known) != set(reported)


def handle_unregister(ctx: ControllerContext, call: Call, req: UnregisterBrokerRequest) -> Outcome:
    reg = ctx.image.brokers.get(req.broker_id)
    if reg is None:
        return Outcome(
            UnregisterBrokerResponse(
                error_code=ErrorCode.BROKER_ID_NOT_REGISTERED,
                error_message=f"Broker ID {req.broker_id} is not currently registered",
            ),
            [],
        )
    d = Draft(ctx)
    d.fence(reg, with_record=False)
    d.records.append((UnregisterBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch), 0))
    if len(d.records) > MAX_RECORDS_PER_USER_OP:
        # Kafka bounds this user operation too (BoundedList in unregisterBroker).
        resp = UnregisterBrokerResponse(error_code=ErrorCode.POLICY_VIOLATION, error_message=EXCESSIVE_BATCH)
        return Outcome(resp, [])
    # Kafka answers success with the schema default, an empty (not null) message.
    return Outcome(UnregisterBrokerResponse(error_code=ErrorCode.NONE), d.records)


def expire_sessions(ctx: ControllerContext, now_ms: int) -> list[RecordAndVersion]:
    """Fence every broker whose session expired; records for one batch.

    As Kafka 4.4 (maybeFenceOneStaleBroker), a broker fenced already (by WantFence, or
    never unfenced) that kept heartbeating is fenced again when it falls silent: its ISR
    memberships are revisited and a fencing registration change is written.
    """
    d = Draft(ctx)
    for b, epoch in ctx.sessions.pop_expired(now_ms, ctx.session_timeout_ms):
        reg = ctx.image.brokers.get(b)
        if reg is not None and reg.epoch == epoch:
            d.fence(reg)
    return d.records
