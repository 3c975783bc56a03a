"""The admin APIs a KRaft controller serves, and Envelope: handlers for ``ROUTES``.

Each ``handle_*`` here is a ``ROUTES`` row's handler (``(ctx, call, request) -> Outcome``)
that hands the request to its API-family module (configs, acls, partitions, features_api,
quorum, envelope) through :class:`AdminView`, the small read-only view of the controller
those modules are written against. Nothing here changes durable state: the records do,
through the image's appliers.

:data:`VERSIONS` are the versions served: Kafka 4.4's where it dropped old ones (KIP-896:
DescribeConfigs and the ACL APIs from v1), our schemas' newest otherwise.
"""

from __future__ import annotations

import random
import time
import uuid
from typing import Any, Final, cast

from kraft_jbod.controller import envelope as env
from kraft_jbod.controller.apis import acls, configs, features_api, partitions, quorum
from kraft_jbod.controller.context import Call, ControllerContext, Outcome
from kraft_jbod.controller.draft import Draft
from kraft_jbod.controller.placement import PlacementError, StripedPlacer
from kraft_jbod.errors import EncodeError, ProtocolError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.wire.message import Message

VERSIONS: Final[dict[int, tuple[int, int]]] = {
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_QUORUM: (0, 2),
    ApiKey.UPDATE_FEATURES: (0, 2),
    ApiKey.ENVELOPE: (0, 0),
}


class AdminView:
    """What the admin API modules read of the controller: the image plus its settings."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.image = ctx.image

    @property
    def cluster_id(self) -> str:
        return self.ctx.cluster_id

    @property
    def node_id(self) -> int:
        return self.ctx.node_id

    @property
    def metadata_version(self) -> int:
        return self.image.metadata_version

    @property
    def finalized_features(self) -> dict[str, int]:
        return dict(self.image.features)

    @property
    def brokers(self) -> Any:
        return self.image.brokers

    @property
    def static_configs(self) -> dict[str, str]:
        return self.ctx.static_configs

    @property
    def topics(self) -> Any:
        return self.image.topics

    @property
    def configs(self) -> configs.ConfigImage:
        return self.image.configs

    @property
    def acls(self) -> acls.AclImage:
        return self.image.acls

    def topic_id_of(self, name: str) -> uuid.UUID | None:
        return self.image.topic_names.get(name)


def view_of(state: Any) -> AdminView:
    """The view of a ControllerState (client listener reads)."""
    return AdminView(state.ctx)


def ops_of(ctx: ControllerContext, salt: int = 0) -> partitions.Ops:
    """The partition operations over the image (read through an empty draft)."""
    from kraft_jbod.controller.apis import topics

    draft = Draft(ctx)

    def view(p: Any) -> partitions.PartView:
        return partitions.PartView(
            p.replicas, p.isr, p.leader, p.dirs, p.adding, p.removing, p.leader_recovery_state, p.elr, p.last_known_elr
        )

    def place(start: int, count: int, rf: int) -> list[list[int]] | tuple[int, str]:
        # Kafka's striped placer, seeded by the request so that a replay gives the same layout.
        rng = random.Random(f"{ctx.cluster_id}/partitions/{salt}/{start}")
        try:
            return StripedPlacer(topics.usable_brokers(ctx), rng).place(count, rf)
        except PlacementError as exc:
            return ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)

    return partitions.Ops(
        AdminView(ctx),
        view=view,
        acceptable=lambda b, d: bool(draft.acceptable_leader(b, d)),
        active=lambda b: bool(draft.is_active(b)),
        default_dir=lambda b: topics.default_dir(ctx, b),
        place=place,
    )


# ---------------------------------------------------------------------------- ROUTES handlers


def handle_incremental_alter_configs(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(*configs.incremental_alter_configs(AdminView(ctx), call.api_version, req))


def handle_alter_configs(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(*configs.alter_configs(AdminView(ctx), call.api_version, req))


def handle_describe_configs(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(configs.describe_configs(AdminView(ctx), call.api_version, req), [])


def handle_create_partitions(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(*partitions.create_partitions(ops_of(ctx, call.next_offset), call.api_version, req))


def handle_elect_leaders(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(*partitions.elect_leaders(ops_of(ctx), call.api_version, req))


def handle_alter_reassignments(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(*partitions.alter_partition_reassignments(ops_of(ctx), call.api_version, req))


def handle_list_reassignments(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(partitions.list_partition_reassignments(AdminView(ctx), call.api_version, req), [])


def handle_create_acls(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(*acls.create_acls(AdminView(ctx), call.api_version, req, call.next_offset))


def handle_delete_acls(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(*acls.delete_acls(AdminView(ctx), call.api_version, req))


def handle_describe_acls(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(acls.describe_acls(AdminView(ctx), call.api_version, req), [])


def handle_update_features(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    return Outcome(*features_api.update_features(AdminView(ctx), call.api_version, req))


def handle_describe_quorum(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    # A read-only answer: Kafka reports wall-clock times, so this reads the wall clock
    # (nothing durable depends on it). Observers: the registered brokers, with the
    # metadata offset each last reported.
    offsets = ctx.sessions.metadata_offset
    observers = [quorum.Observer(b, offsets.get(b, -1)) for b in sorted(ctx.image.brokers)]
    resp = quorum.describe_quorum(
        call.api_version,
        req,
        node_id=ctx.node_id,
        leader_epoch=ctx.leader_epoch,
        end_offset=call.next_offset,
        now_ms=int(time.time() * 1000),
        observers=observers,
        listeners=[("CONTROLLER", h, p) for h, p in ctx.controller_endpoints],
        voters=ctx.voters if ctx.kraft_version >= 1 else None,
    )
    return Outcome(resp, [])


def handle_envelope(ctx: ControllerContext, call: Call, req: Any) -> Outcome:
    """Unwrap, handle the forwarded request as its client through ``ROUTES``, wrap the answer."""
    from kraft_jbod.controller.state import ROUTES

    served = {key: route.valid_versions for key, route in ROUTES.items()}
    fwd = env.unwrap(req, served)
    if not isinstance(fwd, env.Forwarded):
        return Outcome(fwd, [])
    route = ROUTES[fwd.api_key]
    if not isinstance(fwd.body, route.request_type):
        return Outcome(env.EnvelopeResponse(response_data=None, error_code=env.INVALID_REQUEST), [])
    inner_call = Call(
        api_version=fwd.api_version, now_ms=call.now_ms, next_offset=call.next_offset, principal=str(fwd.principal)
    )
    try:
        outcome = route.handler(ctx, inner_call, fwd.body)
        wrapped = env.wrap(fwd, outcome.response)
    except (ProtocolError, EncodeError):  # Kafka's parser refuses it, or it cannot be answered
        return Outcome(env.EnvelopeResponse(response_data=None, error_code=env.INVALID_REQUEST), [])
    return Outcome(wrapped, list(outcome.records))


# ---------------------------------------------------------------------------- hooks for other families


def reassignment_isr_change(ctx: ControllerContext, p: Any, new_isr: list[int], lrs: int) -> tuple[Message, Any] | None:
    """An AlterPartition ISR change on a reassigning partition (may complete it), or None.

    Returns the PartitionChangeRecord and alter_partition's ``PartitionView`` after it.
    """
    from kraft_jbod.controller.alter_partition import PartitionView

    # Ops.change passes ELR and the effective min ISR when ELR is on, as Kafka's
    # AlterPartition path builds its change with them.
    built = ops_of(ctx).change(p, target_isr=new_isr, target_lrs=lrs)
    if built is None:
        return None
    rec = cast(PartitionChangeRecord, built[0])
    changed = rec.leader != partitions.NO_LEADER_CHANGE
    view = PartitionView(
        tuple(p.replicas if rec.replicas is None else rec.replicas),
        tuple(p.isr if rec.isr is None else rec.isr),
        rec.leader if changed else p.leader,
        p.leader_epoch + 1 if changed else p.leader_epoch,
        p.partition_epoch + 1,
        p.leader_recovery_state if rec.leader_recovery_state == -1 else rec.leader_recovery_state,
    )
    return rec, view


def error_response(api_key: int, body: Any, code: int, message: str | None = None) -> Message | None:
    """The response carrying ``code`` for every entry of an admin request whose answer has
    no top-level error code (Kafka's getErrorResponse), or None for other apis."""
    from kraft_jbod.messages.alter_configs_response import AlterConfigsResourceResponse as LegacyResult
    from kraft_jbod.messages.alter_configs_response import AlterConfigsResponse
    from kraft_jbod.messages.create_acls_response import AclCreationResult, CreateAclsResponse
    from kraft_jbod.messages.create_partitions_response import CreatePartitionsResponse, CreatePartitionsTopicResult
    from kraft_jbod.messages.delete_acls_response import DeleteAclsFilterResult, DeleteAclsResponse
    from kraft_jbod.messages.describe_configs_response import DescribeConfigsResponse, DescribeConfigsResult
    from kraft_jbod.messages.incremental_alter_configs_response import (
        AlterConfigsResourceResponse,
        IncrementalAlterConfigsResponse,
    )

    if api_key == ApiKey.CREATE_ACLS:
        return CreateAclsResponse(results=[AclCreationResult(code, message) for _ in body.creations])
    if api_key == ApiKey.DELETE_ACLS:
        return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(code, message) for _ in body.filters])
    if api_key == ApiKey.DESCRIBE_CONFIGS:
        return DescribeConfigsResponse(
            results=[DescribeConfigsResult(code, message, r.resource_type, r.resource_name) for r in body.resources]
        )
    if api_key == ApiKey.ALTER_CONFIGS:
        return AlterConfigsResponse(
            responses=[LegacyResult(code, message, r.resource_type, r.resource_name) for r in body.resources]
        )
    if api_key == ApiKey.INCREMENTAL_ALTER_CONFIGS:
        return IncrementalAlterConfigsResponse(
            responses=[
                AlterConfigsResourceResponse(code, message, r.resource_type, r.resource_name) for r in body.resources
            ]
        )
    if api_key == ApiKey.CREATE_PARTITIONS:
        return CreatePartitionsResponse(
            results=[CreatePartitionsTopicResult(t.name, code, message) for t in body.topics]
        )
    return None
