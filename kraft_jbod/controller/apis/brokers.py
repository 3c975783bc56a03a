"""Broker lifecycle: BrokerRegistration (62), BrokerHeartbeat (63), UnregisterBroker (64), session expiry.

Registration checks, in Kafka's order (ClusterControlManager.registerBroker, described
in our words): cluster id, a live session of another incarnation, ZK migration, LogDirs
(required, not reserved, not repeated, not owned by another broker), then features. A new
incarnation gets a new epoch (the offset of its RegisterBrokerRecord) and starts fenced.

Heartbeats go through the table of :mod:`kraft_jbod.controller.heartbeat`; OfflineLogDirs
(v1, JBOD levels) take the directories offline after the state transition.
"""

from __future__ import annotations

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.context import Call, ControllerContext, Outcome, RecordAndVersion
from kraft_jbod.controller.draft import Draft
from kraft_jbod.controller.heartbeat import HbEffect, classify, transition
from kraft_jbod.controller.image import sorted_dirs, sorted_partitions
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
    if existing is not None and new_incarnation and ctx.sessions.valid(req.broker_id, now_ms, ctx.session_timeout_ms):
        return fail(ErrorCode.DUPLICATE_BROKER_REGISTRATION)
    if api_version >= 1 and req.is_migrating_zk_broker:
        return fail(ErrorCode.BROKER_ID_NOT_REGISTERED)
    mv = img.metadata_version
    jbod = fv.supports_jbod(mv)
    dirs = list(req.log_dirs) if api_version >= 2 else []
    if jbod:
        if not dirs:
            return fail(ctx.profile.empty_log_dirs_error)
        if any(is_reserved_directory(x) for x in dirs):
            return fail(ErrorCode.INVALID_REGISTRATION)
        if len(set(dirs)) != len(dirs):
            return fail(ErrorCode.INVALID_REGISTRATION)
        if any(img.dir_owner.get(x, req.broker_id) != req.broker_id for x in dirs):
            return fail(ErrorCode.INVALID_REGISTRATION)
    else:
        dirs = []
    if not features_ok(ctx, req):
        return fail(ErrorCode.UNSUPPORTED_VERSION)

    d = Draft(ctx)
    if existing is not None and existing.active:
        if new_incarnation:
            # The old incarnation still leads partitions; move them before the new
            # registration (fenced) replaces it, so no leader sits on a fenced broker.
            d.fence(existing, with_record=False)
        elif jbod:
            dropped = [x for x in existing.online_dirs if x not in set(dirs)]
            if dropped:
                d.online[existing.broker_id] = frozenset(dirs)
                for directory in dropped:
                    for p in sorted_partitions(img.index.get(existing.broker_id, {}).get(directory, ())):
                        d.remove_from_isr(p, existing.broker_id)
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
        log_dirs=list(sorted_dirs(dirs)),
    )
    d.records.append((rec, fv.register_broker_record_version(mv)))
    ctx.sessions.last_contact[req.broker_id] = now_ms
    return Outcome(BrokerRegistrationResponse(error_code=ErrorCode.NONE, broker_epoch=epoch), d.records)


def features_ok(ctx: ControllerContext, req: BrokerRegistrationRequest) -> bool:
    """Every finalized feature within the broker's range, and every broker range around a finalized level."""
    finalized = dict(ctx.image.features)
    finalized[fv.METADATA_VERSION] = ctx.metadata_version
    finalized[fv.KRAFT_VERSION] = 0  # the live kraft.version of a static single voter
    listed = {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features}
    if fv.METADATA_VERSION not in listed:
        listed[fv.METADATA_VERSION] = (1, 1)
    for name, (lo, hi) in listed.items():
        level = finalized.get(name, 0)
        if not lo <= level <= hi:
            return False
    return all(level == 0 or name in listed for name, level in finalized.items())


def handle_heartbeat(ctx: ControllerContext, call: Call, req: BrokerHeartbeatRequest) -> Outcome:
    img = ctx.image
    api_version, next_offset = call.api_version, call.next_offset
    reg = img.brokers.get(req.broker_id)
    if reg is None or reg.epoch != req.broker_epoch:
        return Outcome(BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), [])
    b = reg.broker_id
    ctx.sessions.last_contact[b] = call.now_ms
    ctx.sessions.metadata_offset[b] = req.current_metadata_offset
    caught_up = req.current_metadata_offset >= reg.reg_offset
    state = reg.hb_state
    mv = img.metadata_version
    jbod = fv.supports_jbod(mv)
    offline = list(req.offline_log_dirs) if api_version >= 1 and jbod else []
    prof = ctx.profile
    if offline and prof.unknown_offline_dir_error is not None:
        registered = set(reg.registered_dirs)
        if any(x not in registered for x in offline):
            return Outcome(
                BrokerHeartbeatResponse(
                    error_code=prof.unknown_offline_dir_error,
                    is_caught_up=caught_up,
                    is_fenced=state.fenced,
                    should_shut_down=False,
                ),
                [],
            )
    unfence_allowed = True
    if prof.fence_while_unassigned and jbod and len(reg.registered_dirs) >= 2:
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
    if effect is HbEffect.FENCE:
        d.fence(reg)
    elif effect is HbEffect.UNFENCE:
        d.unfence(reg)
    elif effect is HbEffect.ENTER_CONTROLLED_SHUTDOWN:
        if mv >= fv.MV_3_3_IV3:
            d.records.append(
                (BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=reg.epoch, in_controlled_shutdown=1), 1)
            )
        d.fence(reg, with_record=False)
        if mv < fv.MV_3_3_IV3:
            # No durable flag before 3.3-IV3: remember the offset softly, like Kafka.
            reg.cs_offset = next_offset + len(d.records) - 1
    if offline:
        wanted = set(offline)
        newly = [x for x in reg.online_dirs if x in wanted]
        if newly:
            d.dirs_offline(reg, newly)
    resp = BrokerHeartbeatResponse(
        error_code=ErrorCode.NONE,
        is_caught_up=caught_up,
        is_fenced=next_state.fenced,
        should_shut_down=next_state.should_shut_down,
    )
    return Outcome(resp, d.records)


def handle_unregister(ctx: ControllerContext, call: Call, req: UnregisterBrokerRequest) -> Outcome:
    reg = ctx.image.brokers.get(req.broker_id)
    if reg is None:
        return Outcome(
            UnregisterBrokerResponse(
                error_code=ErrorCode.BROKER_ID_NOT_REGISTERED,
                error_message=f"Broker {req.broker_id} is not registered.",
            ),
            [],
        )
    d = Draft(ctx)
    d.fence(reg, with_record=False)
    d.records.append((UnregisterBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch), 0))
    return Outcome(UnregisterBrokerResponse(error_code=ErrorCode.NONE, error_message=None), d.records)


def expire_sessions(ctx: ControllerContext, now_ms: int) -> list[RecordAndVersion]:
    """Fence every unfenced broker whose session expired; records for one batch."""
    d = Draft(ctx)
    for b, reg in sorted(ctx.image.brokers.items()):
        if reg.fenced:
            continue
        if not ctx.sessions.valid(b, now_ms, ctx.session_timeout_ms):
            d.fence(reg)
    return d.records
