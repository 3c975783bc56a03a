"""The admin APIs a KRaft controller serves, and Envelope: the handlers their routes name.

Each ``handle_*`` here is a route's handler (``(ctx, call, request) -> Outcome``, typed by
its request class) that hands the request to its API-family module (configs, acls,
partitions, features_api, quorum, envelope) with the same
:class:`~kraft_jbod.controller.context.ControllerContext` every handler gets. Nothing here
changes durable state: the records do, through the image's appliers. The versions each
API serves live in its route (``controller/routes.py``).
"""

from __future__ import annotations

import time

from kraft_jbod.controller import envelope as env
from kraft_jbod.controller.apis import acls, configs, features_api, partition_ops, partitions, quorum
from kraft_jbod.controller.context import Call, ControllerContext, Outcome
from kraft_jbod.errors import EncodeError, ProtocolError
from kraft_jbod.messages.alter_configs_request import AlterConfigsRequest
from kraft_jbod.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from kraft_jbod.messages.create_acls_request import CreateAclsRequest
from kraft_jbod.messages.create_partitions_request import CreatePartitionsRequest
from kraft_jbod.messages.delete_acls_request import DeleteAclsRequest
from kraft_jbod.messages.describe_acls_request import DescribeAclsRequest
from kraft_jbod.messages.describe_configs_request import DescribeConfigsRequest
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest
from kraft_jbod.messages.elect_leaders_request import ElectLeadersRequest
from kraft_jbod.messages.envelope_request import EnvelopeRequest
from kraft_jbod.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from kraft_jbod.messages.list_partition_reassignments_request import ListPartitionReassignmentsRequest
from kraft_jbod.messages.update_features_request import UpdateFeaturesRequest


def handle_incremental_alter_configs(
    ctx: ControllerContext, call: Call, req: IncrementalAlterConfigsRequest
) -> Outcome:
    return Outcome(*configs.incremental_alter_configs(ctx, call.api_version, req))


def handle_alter_configs(ctx: ControllerContext, call: Call, req: AlterConfigsRequest) -> Outcome:
    return Outcome(*configs.alter_configs(ctx, call.api_version, req))


def handle_describe_configs(ctx: ControllerContext, call: Call, req: DescribeConfigsRequest) -> Outcome:
    return Outcome(configs.describe_configs(ctx, call.api_version, req), [])


def handle_create_partitions(ctx: ControllerContext, call: Call, req: CreatePartitionsRequest) -> Outcome:
    return Outcome(*partitions.create_partitions(partition_ops.ops_of(ctx, call.next_offset), call.api_version, req))


def handle_elect_leaders(ctx: ControllerContext, call: Call, req: ElectLeadersRequest) -> Outcome:
    return Outcome(*partitions.elect_leaders(partition_ops.ops_of(ctx), call.api_version, req))


def handle_alter_reassignments(ctx: ControllerContext, call: Call, req: AlterPartitionReassignmentsRequest) -> Outcome:
    return Outcome(*partitions.alter_partition_reassignments(partition_ops.ops_of(ctx), call.api_version, req))


def handle_list_reassignments(ctx: ControllerContext, call: Call, req: ListPartitionReassignmentsRequest) -> Outcome:
    return Outcome(partitions.list_partition_reassignments(ctx, call.api_version, req), [])


def handle_create_acls(ctx: ControllerContext, call: Call, req: CreateAclsRequest) -> Outcome:
    return Outcome(*acls.create_acls(ctx, call.api_version, req, call.next_offset))


def handle_delete_acls(ctx: ControllerContext, call: Call, req: DeleteAclsRequest) -> Outcome:
    return Outcome(*acls.delete_acls(ctx, call.api_version, req))


def handle_describe_acls(ctx: ControllerContext, call: Call, req: DescribeAclsRequest) -> Outcome:
    return Outcome(acls.describe_acls(ctx, call.api_version, req), [])


def handle_update_features(ctx: ControllerContext, call: Call, req: UpdateFeaturesRequest) -> Outcome:
    return Outcome(*features_api.update_features(ctx, call.api_version, req))


def handle_describe_quorum(ctx: ControllerContext, call: Call, req: DescribeQuorumRequest) -> Outcome:
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


def handle_envelope(ctx: ControllerContext, call: Call, req: EnvelopeRequest) -> Outcome:
    """Unwrap, handle the forwarded request as its client through the router, wrap the answer."""
    router = ctx.router
    if router is None:
        raise ProtocolError("Envelope needs a router to hand the forwarded request to")
    fwd = env.unwrap(req, router.served())
    if not isinstance(fwd, env.Forwarded):
        return Outcome(fwd, [])
    inner_call = Call(
        api_version=fwd.api_version, now_ms=call.now_ms, next_offset=call.next_offset, principal=str(fwd.principal)
    )
    try:
        outcome = router.route(ctx, inner_call, fwd.api_key, fwd.body)
        wrapped = env.wrap(fwd, outcome.response)
    except (ProtocolError, EncodeError):  # Kafka's parser refuses it, or it cannot be answered
        return Outcome(env.EnvelopeResponse(response_data=None, error_code=env.INVALID_REQUEST), [])
    return Outcome(wrapped, list(outcome.records))
