"""Read-only requests answered from the image: DescribeCluster (60).

Forwarded admin requests (Envelope) and the KIP-919 controller-direct admin APIs belong
in modules next to this one, each with one ``Route`` in ``routes.ROUTES``.
"""

from __future__ import annotations

from kraft_jbod.controller.context import Call, ControllerContext, Outcome
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from kraft_jbod.messages.error_codes import ErrorCode

ENDPOINT_BROKERS = 1
ENDPOINT_CONTROLLERS = 2


def handle_describe_cluster(ctx: ControllerContext, call: Call, req: DescribeClusterRequest) -> Outcome:
    api_version = call.api_version
    endpoint_type = req.endpoint_type if api_version >= 1 else ENDPOINT_BROKERS
    resp = DescribeClusterResponse(cluster_id=ctx.cluster_id, controller_id=-1)
    if api_version >= 1:
        resp.endpoint_type = endpoint_type
    if endpoint_type == ENDPOINT_BROKERS:
        resp.controller_id = ctx.node_id
        for b, reg in sorted(ctx.image.brokers.items()):
            if reg.fenced or not reg.listeners:
                continue
            _, host, port, _ = reg.listeners[0]
            resp.brokers.append(DescribeClusterBroker(broker_id=b, host=host, port=port, rack=reg.rack))
    elif endpoint_type == ENDPOINT_CONTROLLERS:
        resp.controller_id = ctx.node_id
        for host, port in ctx.controller_endpoints:
            resp.brokers.append(DescribeClusterBroker(broker_id=ctx.node_id, host=host, port=port, rack=None))
    else:
        resp.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        resp.error_message = f"unsupported endpoint type {endpoint_type}"
    return Outcome(resp, [])
