"""What clients see: Metadata, DescribeCluster, DescribeConfigs, and the admin writes.

Pure functions of a :class:`~kraft_jbod.controller.state.ControllerState` (read-only), so
real clients (librdkafka, kafka-python, aiokafka, kcat, kafkajs) pointed at the client
listener list brokers and partitions and see leaders and ISRs move as the controller
fences brokers and fails directories. The rules follow a KRaft broker's metadata cache:

* Rule 1: only registered, unfenced brokers are listed (Kafka's "alive" brokers), each with
  its endpoint on the chosen listener name (default: its first endpoint). The controller id
  a client sees is the lowest listed broker id (clients then talk to a broker, as with a
  real KRaft cluster whose controllers are hidden), -1 when none is alive.
* Rule 2: a partition without a leader answers LEADER_NOT_AVAILABLE (5); its
  ``offline_replicas`` (v5+) are replicas on fenced or unregistered brokers or in a
  directory that is not among the broker's online ones (reported offline, or missing
  from its latest registration), as Kafka's metadata cache computes them.
* Rule 3: Metadata v0 with no topics, or v1+ with a null topic list, means every topic;
  an unknown name answers UNKNOWN_TOPIC_OR_PARTITION (3), an unknown id (v10+)
  UNKNOWN_TOPIC_ID (100). Topics are never auto-created.
* Rule 4: while no broker is alive, the listener lists itself (the controller's node id
  at the address the client reached) as the one broker and the controller, so admin
  clients send their requests here and get Kafka's answers (CreateTopics:
  INVALID_REPLICATION_FACTOR, "Unable to replicate the partition ...") instead of waiting for a
  controller that never appears.
* Rule 5: the admin APIs a broker forwards to its controller (:data:`WRITE_APIS`) go to
  the controller's state machine through the server's one writer, as if forwarded, so
  their records are committed before the answer. Reads (Metadata, DescribeCluster,
  DescribeConfigs, DescribeAcls, ListPartitionReassignments) are answered inline.

:func:`cluster_view` is the same picture as plain JSON (``kraft-jbod status``, the admin
endpoint, the pytest plugin).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Final

from kraft_jbod.controller import routes
from kraft_jbod.controller.apis import acls, configs, partitions
from kraft_jbod.controller.image import Partition, TopicInfo
from kraft_jbod.controller.image import offline_replicas as image_offline_replicas
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kraft_jbod.wire.primitives import uuid_to_base64url

API_METADATA: Final = ApiKey.METADATA
API_DESCRIBE_CLUSTER: Final = ApiKey.DESCRIBE_CLUSTER
API_DESCRIBE_CONFIGS: Final = ApiKey.DESCRIBE_CONFIGS
API_DESCRIBE_ACLS: Final = ApiKey.DESCRIBE_ACLS
API_LIST_PARTITION_REASSIGNMENTS: Final = ApiKey.LIST_PARTITION_REASSIGNMENTS
# What the client listener lists, and which of those go through the one writer: the
# routes' ``client`` and ``client_versions`` (controller/routes.py).
CLIENT_APIS: Final[dict[int, tuple[int, int]]] = routes.client_versions()
WRITE_APIS: Final[dict[int, tuple[int, int]]] = {k: v for k, v in CLIENT_APIS.items() if routes.is_client_write(k)}
LEADER_NOT_AVAILABLE: Final = ErrorCode.LEADER_NOT_AVAILABLE
UNKNOWN_TOPIC_OR_PARTITION: Final = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
UNKNOWN_TOPIC_ID: Final = ErrorCode.UNKNOWN_TOPIC_ID
MISMATCHED_ENDPOINT_TYPE: Final = ErrorCode.MISMATCHED_ENDPOINT_TYPE
TOPIC_AUTHORIZATION_FAILED: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED

TopicFilter = Callable[[str], bool]


def _endpoint(listeners: tuple[tuple[str, str, int, int], ...], name: str | None) -> tuple[str, int] | None:
    for lname, host, port, _proto in listeners:
        if name is None or lname.upper() == name.upper():
            return host, port
    return None


def alive_brokers(
    state: ControllerState, listener_name: str | None = None, self_endpoint: tuple[str, int] | None = None
) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of unfenced brokers with an endpoint on the listener (Rule 1).

    With none alive and ``self_endpoint`` given, the listener itself (Rule 4).
    """
    out = []
    for b, reg in sorted(state.brokers.items()):
        if reg.fenced:
            continue
        ep = _endpoint(reg.listeners, listener_name)
        if ep is not None:
            out.append((b, ep[0], ep[1], reg.rack))
    if not out and self_endpoint is not None:
        out.append((int(state.node_id), self_endpoint[0], self_endpoint[1], None))
    return out


def offline_replicas(state: ControllerState, p: Partition) -> list[int]:
    """Replicas on fenced/unregistered brokers or in a directory not online on the broker (Rule 2)."""
    return image_offline_replicas(state.image, p)


def _partition(state: ControllerState, p: Partition) -> MetadataResponsePartition:
    return MetadataResponsePartition(
        error_code=LEADER_NOT_AVAILABLE if p.leader < 0 else 0,
        partition_index=p.partition_id,
        leader_id=p.leader,
        leader_epoch=p.leader_epoch,
        replica_nodes=list(p.replicas),
        isr_nodes=list(p.isr),
        offline_replicas=offline_replicas(state, p),
    )


def _topic(state: ControllerState, topic: TopicInfo) -> MetadataResponseTopic:
    parts = [_partition(state, p) for _, p in sorted(topic.partitions.items())]
    return MetadataResponseTopic(error_code=0, name=topic.name, topic_id=topic.topic_id, partitions=parts)


def metadata_response(
    state: ControllerState,
    api_version: int,
    req: MetadataRequest,
    *,
    listener_name: str | None = None,
    may_describe: TopicFilter | None = None,
    self_endpoint: tuple[str, int] | None = None,
) -> MetadataResponse:
    """The Metadata answer (Rules 1-4); ``may_describe`` hides topics a principal may not see."""
    brokers = alive_brokers(state, listener_name, self_endpoint)
    resp = MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=b, host=h, port=port, rack=r) for b, h, port, r in brokers],
        cluster_id=state.cluster_id,
        controller_id=brokers[0][0] if brokers else -1,
    )
    everything = req.topics is None or (api_version == 0 and not req.topics)
    if everything:
        for _, topic in sorted(state.topics.items(), key=lambda kv: kv[1].name):
            if may_describe is None or may_describe(topic.name):
                resp.topics.append(_topic(state, topic))
        return resp
    for t in req.topics or ():
        if t.name is None and t.topic_id.int != 0:
            found = state.topics.get(t.topic_id)
            if found is None or (may_describe is not None and not may_describe(found.name)):
                resp.topics.append(MetadataResponseTopic(error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id))
            else:
                resp.topics.append(_topic(state, found))
            continue
        name = t.name or ""
        if may_describe is not None and not may_describe(name):
            resp.topics.append(MetadataResponseTopic(error_code=TOPIC_AUTHORIZATION_FAILED, name=name))
            continue
        tid = state.topic_id_of(name)
        if tid is None:
            resp.topics.append(MetadataResponseTopic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name))
        else:
            resp.topics.append(_topic(state, state.topics[tid]))
    return resp


def describe_cluster_response(
    state: ControllerState,
    api_version: int,
    req: DescribeClusterRequest,
    *,
    listener_name: str | None = None,
    self_endpoint: tuple[str, int] | None = None,
) -> DescribeClusterResponse:
    """DescribeCluster as a broker answers it: alive brokers; controllers are not exposed."""
    brokers = alive_brokers(state, listener_name, self_endpoint)
    resp = DescribeClusterResponse(
        cluster_id=state.cluster_id,
        controller_id=brokers[0][0] if brokers else -1,
        error_message=None,
    )
    if api_version >= 1:
        resp.endpoint_type = req.endpoint_type
        if req.endpoint_type != 1:
            resp.error_code = MISMATCHED_ENDPOINT_TYPE
            resp.error_message = (
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
            )
            return resp
    resp.brokers = [DescribeClusterBroker(broker_id=b, host=h, port=p, rack=r) for b, h, p, r in brokers]
    return resp


def is_write(api_key: int) -> bool:
    """True for the admin writes that go through the controller's writer (Rule 5)."""
    return routes.is_client_write(api_key)


def answer(state: ControllerState, api_key: int, api_version: int, body: Any, **kwargs: Any) -> Any:
    """The response to a client-listener read (Metadata, DescribeCluster, DescribeConfigs,
    DescribeAcls, ListPartitionReassignments).

    Raises:
        ValueError: ``api_key`` is not a read this listener answers.
        ProtocolError: a request Kafka cannot parse (the connection is closed).
    """
    if api_key == API_METADATA:
        return metadata_response(state, api_version, body, **kwargs)
    if api_key == API_DESCRIBE_CLUSTER:
        kwargs.pop("may_describe", None)
        return describe_cluster_response(state, api_version, body, **kwargs)
    if api_key == API_DESCRIBE_CONFIGS:
        return configs.describe_configs(state.ctx, api_version, body, any_broker=True)
    if api_key == API_DESCRIBE_ACLS:
        return acls.describe_acls(state.ctx, api_version, body)
    if api_key == API_LIST_PARTITION_REASSIGNMENTS:
        return partitions.list_partition_reassignments(state.ctx, api_version, body)
    raise ValueError(f"api key {api_key} is not a client-listener api")


def cluster_view(state: ControllerState) -> dict[str, Any]:
    """Brokers (state, directories), topics and partitions (leader, ISR, directories) as JSON."""
    brokers = []
    for b, reg in sorted(state.brokers.items()):
        hb = state.broker_state(b)
        brokers.append(
            {
                "id": b,
                "epoch": reg.epoch,
                "state": hb.value if hb is not None else "UNKNOWN",
                "fenced": reg.fenced,
                "in_controlled_shutdown": reg.in_controlled_shutdown or reg.cs_offset >= 0,
                "rack": reg.rack,
                "endpoints": [f"{n}://{h}:{p}" for n, h, p, _ in reg.listeners],
                "directories": [
                    {"id": uuid_to_base64url(d), "online": d in reg.online_set} for d in reg.registered_dirs
                ],
            }
        )
    topics = []
    for _, topic in sorted(state.topics.items(), key=lambda kv: kv[1].name):
        parts = []
        for pid, p in sorted(topic.partitions.items()):
            parts.append(
                {
                    "partition": pid,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": list(p.replicas),
                    "isr": list(p.isr),
                    "elr": list(p.elr),
                    "last_known_elr": list(p.last_known_elr),
                    "directories": [_dir_name(state, d) for d in p.dirs],
                    "offline_replicas": offline_replicas(state, p),
                }
            )
        topics.append({"name": topic.name, "id": uuid_to_base64url(topic.topic_id), "partitions": parts})
    return {
        "cluster_id": state.cluster_id,
        "metadata_version": state.metadata_version,
        "last_applied_offset": state.last_applied_offset,
        "brokers": brokers,
        "topics": topics,
    }


def _dir_name(state: ControllerState, d: uuid.UUID) -> str:
    prof = state.profile
    for label, reserved in (("UNASSIGNED", prof.unassigned), ("LOST", prof.lost), ("MIGRATING", prof.migrating)):
        if d == reserved:
            return label
    return uuid_to_base64url(d)


def render_text(view: dict[str, Any], paths: dict[int, dict[str, str]] | None = None) -> str:
    """The cluster view for people (``kraft-jbod status``).

    The controller knows directories by id only (BrokerRegistration carries no paths);
    ``paths`` (broker id -> directory id -> path, from the brokers' control endpoints) adds
    the path beside each id, since ``broker-ctl`` commands are usually typed with paths.
    """
    lines = [
        f"cluster {view['cluster_id']}  metadata.version {view['metadata_version']}  "
        f"offset {view['last_applied_offset']}",
        "",
        "brokers:",
    ]
    if not view["brokers"]:
        lines.append("  (none)")
    for b in view["brokers"]:
        known = (paths or {}).get(b["id"], {})
        dirs = (
            ", ".join(
                " ".join(
                    [d["id"], *([known[d["id"]]] if d["id"] in known else []), *([] if d["online"] else ["OFFLINE"])]
                )
                for d in b["directories"]
            )
            or "-"
        )
        lines.append(f"  {b['id']:>5}  {b['state']:<19} epoch {b['epoch']:<6} {' '.join(b['endpoints']) or '-'}")
        lines.append(f"         dirs: {dirs}")
    lines += ["", "partitions:"]
    if not view["topics"]:
        lines.append("  (none)")
    for t in view["topics"]:
        for p in t["partitions"]:
            lines.append(
                f"  {t['name']}-{p['partition']}  leader {p['leader']}  isr {p['isr']}  replicas {p['replicas']}  "
                f"dirs {p['directories']}" + (f"  offline {p['offline_replicas']}" if p["offline_replicas"] else "")
            )
    if view["brokers"] and paths is None:
        lines += [
            "",
            "directories are shown by id (the controller never sees paths); broker-ctl takes either an id or a "
            "path, and `kraft-jbod status --broker-ctl HOST:PORT` adds each broker's paths",
        ]
    return "\n".join(lines) + "\n"
