"""What a client sees on a fake broker's own listener: pure answers from the broker's image.

A Kafka broker answers the cluster's read APIs from its metadata cache, describes and moves
its own log dirs, forwards the admin writes to the controller, and serves the data path.
The fake broker does the first three as Kafka does and refuses the data path at once with
a clear error (module Rule 6), so a producer or consumer pointed at it fails immediately
instead of retrying until its delivery timeout.

Rules (Kafka 4.4's KafkaApis, KRaftMetadataCache, ReplicaManager and LogManager):

Rule 1 (ApiVersions): the broker-owned APIs at the versions a 4.4 broker advertises
(``messages.releases``), the admin writes at the versions its controller serves them
(forwarded, Rule 5), and ``SupportedFeatures`` of its release (``kraft.jbod.broker.release``)
with the finalized levels of its image.
Rule 2 (Metadata, DescribeCluster): the alive (registered, unfenced) brokers that have an
endpoint on the listener the request came in on, each at its own registered address; the
controller id is the lowest of them (clients then send admin writes to a broker, which
forwards them). A partition without a leader answers LEADER_NOT_AVAILABLE; its offline
replicas are those on fenced or unknown brokers or in a directory not online on their
broker. Unknown topics are UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id); topics are
never auto-created. DescribeCluster v1+ with EndpointType CONTROLLER is MISMATCHED_ENDPOINT_TYPE.
Rule 3 (DescribeConfigs): BROKER with this broker's id (or "" for the defaults) lists its
static properties (STATIC_BROKER_CONFIG, sensitive ones hidden) and the dynamic configs of
its image; another id is INVALID_REQUEST ("Unexpected broker id ..."); TOPIC lists the
topic's dynamic configs, UNKNOWN_TOPIC_OR_PARTITION for a topic the image lacks.
Rule 4 (DescribeLogDirs): every ``log.dirs`` entry by absolute path: an offline one only
with KAFKA_STORAGE_ERROR; an online one with TotalBytes/UsableBytes of its filesystem,
IsCordoned (at metadata.version 4.3-IV0 and later), and the requested replicas it holds
(all with a null topic list), each with its size and whether it is a future replica.
Rule 6 (data path): Produce answers POLICY_VIOLATION for every partition, and Fetch,
ListOffsets and FindCoordinator answer with errors clients do not retry, each with a
message naming the fake broker; see :func:`refusal`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kraft_jbod.broker.image import MetadataImage, PartitionView
from kraft_jbod.messages import fetch_response as fr
from kraft_jbod.messages import find_coordinator_response as fc
from kraft_jbod.messages import list_offsets_response as lor
from kraft_jbod.messages import produce_response as pr
from kraft_jbod.messages import releases as api_releases
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from kraft_jbod.messages.describe_configs_request import DescribeConfigsRequest
from kraft_jbod.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from kraft_jbod.messages.describe_log_dirs_request import DescribeLogDirsRequest
from kraft_jbod.messages.describe_log_dirs_response import (
    DescribeLogDirsPartition,
    DescribeLogDirsResponse,
    DescribeLogDirsResult,
    DescribeLogDirsTopic,
)
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kraft_jbod.wire.primitives import LOST_DIRECTORY, MIGRATING_DIRECTORY, UNASSIGNED_DIRECTORY

# ApiKeys with forwardable=true in Kafka 4.4: what a broker sends on to its controller.
FORWARDABLE: Final[frozenset[int]] = frozenset(
    {19, 20, 30, 31, 33, 37, 38, 39, 40, 43, 44, 45, 46, 49, 51, 55, 57, 64, 67, 80, 81}
)
# What the broker answers itself (ApiVersions is served by the connection's own range).
OWNED: Final[tuple[int, ...]] = (
    ApiKey.METADATA,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.DESCRIBE_LOG_DIRS,
    ApiKey.ALTER_REPLICA_LOG_DIRS,
    ApiKey.PRODUCE,
    ApiKey.FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.FIND_COORDINATOR,
)
API_VERSIONS_RANGE: Final = (0, 4)
BROKER_RESOURCE: Final = 4
TOPIC_RESOURCE: Final = 2
STATIC_BROKER_CONFIG: Final = 4
DYNAMIC_BROKER_CONFIG: Final = 1
DYNAMIC_DEFAULT_BROKER_CONFIG: Final = 5
TOPIC_CONFIG: Final = 1
_RELEASE_44: Final = api_releases.RELEASES.index("4.4")


def release_range(api_key: int) -> tuple[int, int] | None:
    """The versions a Kafka 4.4 broker advertises for ``api_key`` (None: not advertised)."""
    for index, lo, hi in api_releases.ADVERTISED.get(api_key, ()):
        if index == _RELEASE_44:
            return lo, hi
    return None


def served(controller_versions: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """Api key -> versions this listener serves (Rule 1): the owned ones at 4.4's ranges, the
    forwardable ones at the intersection of 4.4's and the controller's."""
    out: dict[int, tuple[int, int]] = {}
    for key in OWNED:
        rng = release_range(key)
        if rng is not None:
            out[key] = rng
    for key in FORWARDABLE:
        mine, theirs = release_range(key), controller_versions.get(key)
        if mine is None or theirs is None:
            continue
        lo, hi = max(mine[0], theirs[0]), min(mine[1], theirs[1])
        if lo <= hi:
            out[key] = (lo, hi)
    return out


def api_versions_response(
    version: int, ranges: Mapping[int, tuple[int, int]], supported: Mapping[str, tuple[int, int]], image: MetadataImage
) -> ApiVersionsResponse:
    keys = [ApiVersion(ApiKey.API_VERSIONS, *API_VERSIONS_RANGE)]
    keys += [ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(ranges.items())]
    resp = ApiVersionsResponse(error_code=0, api_keys=keys)
    if version >= 3:
        resp.supported_features = [SupportedFeatureKey(n, lo, hi) for n, (lo, hi) in sorted(supported.items())]
        resp.finalized_features = [
            FinalizedFeatureKey(n, lvl, lvl) for n, lvl in sorted(image.features.items()) if lvl > 0
        ]
        resp.finalized_features_epoch = image.last_offset
    return resp


def alive_brokers(image: MetadataImage, listener: str) -> list[tuple[int, str, int, str | None]]:
    """(id, host, port, rack) of registered, unfenced brokers with an endpoint on ``listener``."""
    out = []
    for b, view in sorted(image.brokers.items()):
        if view.fenced:
            continue
        for name, host, port in view.endpoints:
            if name.upper() == listener.upper():
                out.append((b, host, port, view.rack))
                break
    return out


def offline_replicas(image: MetadataImage, p: PartitionView) -> list[int]:
    out = []
    for b, d in zip(p.replicas, p.directories, strict=True):
        view = image.brokers.get(b)
        if view is None or view.fenced:
            out.append(b)
        elif not _dir_online(d, view.online_dirs):
            out.append(b)
    return out


def _dir_online(d: uuid.UUID, online: tuple[uuid.UUID, ...]) -> bool:
    """Kafka's DirectoryId.isOnline: UNASSIGNED and MIGRATING count as online, LOST never;
    with no online dirs registered (a pre-3.7-IV2 registration) every dir counts as online."""
    if d in (UNASSIGNED_DIRECTORY, MIGRATING_DIRECTORY):
        return True
    if d == LOST_DIRECTORY:
        return False
    return not online or d in online


def _topic(image: MetadataImage, tid: uuid.UUID) -> MetadataResponseTopic:
    parts = sorted((p for (t, _), p in image.partitions.items() if t == tid), key=lambda p: p.partition_id)
    return MetadataResponseTopic(
        error_code=0,
        name=image.topic_names[tid],
        topic_id=tid,
        partitions=[
            MetadataResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE if p.leader < 0 else 0,
                partition_index=p.partition_id,
                leader_id=p.leader,
                leader_epoch=p.leader_epoch,
                replica_nodes=list(p.replicas),
                isr_nodes=list(p.isr),
                offline_replicas=offline_replicas(image, p),
            )
            for p in parts
        ],
    )


def metadata_response(
    image: MetadataImage, version: int, req: MetadataRequest, *, listener: str, cluster_id: str
) -> MetadataResponse:
    """Rule 2."""
    brokers = alive_brokers(image, listener)
    resp = MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=b, host=h, port=port, rack=r) for b, h, port, r in brokers],
        cluster_id=cluster_id,
        controller_id=brokers[0][0] if brokers else -1,
    )
    by_name = {n: t for t, n in image.topic_names.items()}
    if req.topics is None or (version == 0 and not req.topics):
        resp.topics = [_topic(image, by_name[n]) for n in sorted(by_name)]
        return resp
    for t in req.topics:
        if t.name is None and t.topic_id.int != 0:
            if t.topic_id in image.topic_names:
                resp.topics.append(_topic(image, t.topic_id))
            else:
                resp.topics.append(
                    MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=t.topic_id)
                )
            continue
        tid = by_name.get(t.name or "")
        if tid is None:
            resp.topics.append(MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=t.name))
        else:
            resp.topics.append(_topic(image, tid))
    return resp


def describe_cluster_response(
    image: MetadataImage, version: int, req: DescribeClusterRequest, *, listener: str, cluster_id: str
) -> DescribeClusterResponse:
    """Rule 2, DescribeCluster: a broker's answer; fenced brokers are listed at v2 when asked."""
    brokers = alive_brokers(image, listener)
    resp = DescribeClusterResponse(cluster_id=cluster_id, controller_id=brokers[0][0] if brokers else -1)
    if version >= 1:
        resp.endpoint_type = req.endpoint_type
        if req.endpoint_type != 1:
            resp.error_code = ErrorCode.MISMATCHED_ENDPOINT_TYPE
            resp.error_message = (
                "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
            )
            return resp
    resp.brokers = [DescribeClusterBroker(broker_id=b, host=h, port=p, rack=r) for b, h, p, r in brokers]
    if version >= 2 and req.include_fenced_brokers:
        for b, view in sorted(image.brokers.items()):
            if view.fenced:
                ep = next(((h, p) for n, h, p in view.endpoints if n.upper() == listener.upper()), None)
                if ep is not None:
                    resp.brokers.append(
                        DescribeClusterBroker(broker_id=b, host=ep[0], port=ep[1], rack=view.rack, is_fenced=True)
                    )
    return resp


def _sensitive(key: str) -> bool:
    return "password" in key or key.endswith(".secret") or "sasl.jaas.config" in key


def describe_configs_response(
    image: MetadataImage,
    version: int,
    req: DescribeConfigsRequest,
    *,
    node_id: int,
    properties: Iterable[tuple[str, str]],
) -> DescribeConfigsResponse:
    """Rule 3."""
    static = dict(properties)
    results = []
    for res in req.resources:
        wanted = None if res.configuration_keys is None else set(res.configuration_keys)
        out = DescribeConfigsResult(error_code=0, error_message=None, resource_type=res.resource_type)
        out.resource_name = res.resource_name
        entries: list[DescribeConfigsResourceResult] = []
        if res.resource_type == BROKER_RESOURCE and res.resource_name in ("", str(node_id)):
            merged: dict[str, tuple[str, int]] = {}
            if res.resource_name:
                merged.update({k: (v, STATIC_BROKER_CONFIG) for k, v in static.items()})
            merged.update({k: (v, DYNAMIC_DEFAULT_BROKER_CONFIG) for k, v in image.configs.get((4, ""), {}).items()})
            if res.resource_name:
                merged.update(
                    {k: (v, DYNAMIC_BROKER_CONFIG) for k, v in image.configs.get((4, str(node_id)), {}).items()}
                )
            for k, (v, source) in sorted(merged.items()):
                if wanted is None or k in wanted:
                    hidden = _sensitive(k)
                    entries.append(
                        DescribeConfigsResourceResult(
                            name=k,
                            value=None if hidden else v,
                            read_only=source == STATIC_BROKER_CONFIG,
                            config_source=source,
                            is_sensitive=hidden,
                            documentation=None,
                        )
                    )
        elif res.resource_type == BROKER_RESOURCE:
            out.error_code = ErrorCode.INVALID_REQUEST
            out.error_message = (
                f"Unexpected broker id, expected {node_id} or empty string, but received {res.resource_name}"
            )
        elif res.resource_type == TOPIC_RESOURCE:
            if image.topic_id(res.resource_name) is None:
                out.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                out.error_message = f"Topic {res.resource_name} does not exist"
            else:
                for k, v in sorted(image.configs.get((TOPIC_RESOURCE, res.resource_name), {}).items()):
                    if wanted is None or k in wanted:
                        entries.append(
                            DescribeConfigsResourceResult(
                                name=k, value=v, config_source=TOPIC_CONFIG, is_sensitive=False, documentation=None
                            )
                        )
        else:
            out.error_code = ErrorCode.INVALID_REQUEST
            out.error_message = f"Unsupported resource type {res.resource_type} on fake broker {node_id}"
        out.configs = entries
        results.append(out)
    return DescribeConfigsResponse(results=results)


@dataclass(slots=True)
class DirInfo:
    """One log dir as DescribeLogDirs reports it (the shell gathers it from disk)."""

    path: str  # absolute
    online: bool
    total_bytes: int = -1
    usable_bytes: int = -1
    cordoned: bool = False
    # (topic, partition, size in bytes, is future)
    replicas: list[tuple[str, int, int, bool]] = field(default_factory=list)


def describe_log_dirs_response(
    version: int, req: DescribeLogDirsRequest, dirs: Iterable[DirInfo], *, cordon_supported: bool
) -> DescribeLogDirsResponse:
    """Rule 4."""
    wanted: set[tuple[str, int]] | None = None
    if req.topics is not None:
        wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
    results = []
    for d in dirs:
        if not d.online:
            results.append(DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=d.path))
            continue
        topics: dict[str, list[DescribeLogDirsPartition]] = {}
        for topic, part, size, future in d.replicas:
            if wanted is None or (topic, part) in wanted:
                topics.setdefault(topic, []).append(
                    DescribeLogDirsPartition(
                        partition_index=part, partition_size=size, offset_lag=0, is_future_key=future
                    )
                )
        results.append(
            DescribeLogDirsResult(
                error_code=0,
                log_dir=d.path,
                topics=[
                    DescribeLogDirsTopic(
                        name=t, partitions=sorted(ps, key=lambda x: (x.partition_index, x.is_future_key))
                    )
                    for t, ps in sorted(topics.items())
                ],
                total_bytes=d.total_bytes,
                usable_bytes=d.usable_bytes,
                is_cordoned=d.cordoned and cordon_supported,
            )
        )
    return DescribeLogDirsResponse(error_code=0, results=results)


def data_path_message(node_id: int) -> str:
    return (
        f"kraft-jbod fake broker {node_id} has no data path (it imitates a broker's control plane only): "
        "produce to and consume from real Kafka brokers"
    )


def refusal(api_key: int, version: int, body: Any, node_id: int) -> Any:
    """Rule 6: the answer to a data-path request, built from the request's own topics."""
    text = data_path_message(node_id)
    if api_key == ApiKey.PRODUCE:
        return pr.ProduceResponse(
            responses=[
                pr.TopicProduceResponse(
                    name=t.name,
                    topic_id=t.topic_id,
                    partition_responses=[
                        pr.PartitionProduceResponse(
                            index=p.index, error_code=ErrorCode.POLICY_VIOLATION, base_offset=-1, error_message=text
                        )
                        for p in t.partition_data
                    ],
                )
                for t in body.topic_data
            ]
        )
    if api_key == ApiKey.FETCH:
        return fr.FetchResponse(
            error_code=ErrorCode.NONE,
            session_id=0,
            responses=[
                fr.FetchableTopicResponse(
                    topic=t.topic,
                    topic_id=t.topic_id,
                    partitions=[
                        fr.PartitionData(
                            partition_index=p.partition,
                            error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                            high_watermark=-1,
                            records=b"",
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ],
        )
    if api_key == ApiKey.LIST_OFFSETS:
        return lor.ListOffsetsResponse(
            topics=[
                lor.ListOffsetsTopicResponse(
                    name=t.name,
                    partitions=[
                        lor.ListOffsetsPartitionResponse(
                            partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        )
                        for p in t.partitions
                    ],
                )
                for t in body.topics
            ]
        )
    if api_key == ApiKey.FIND_COORDINATOR:
        if version >= 4:
            return fc.FindCoordinatorResponse(
                coordinators=[
                    fc.Coordinator(
                        key=k,
                        node_id=-1,
                        host="",
                        port=-1,
                        error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                        error_message=text,
                    )
                    for k in body.coordinator_keys
                ]
            )
        return fc.FindCoordinatorResponse(
            error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=text, node_id=-1, host="", port=-1
        )
    raise ValueError(f"api key {api_key} is not a data-path api")
