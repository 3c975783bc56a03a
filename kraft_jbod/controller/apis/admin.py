"""The admin APIs a KRaft controller serves, and Envelope, wired to the controller state.

One table, :data:`HANDLED`, maps each api key to the versions served; :func:`handle`
dispatches to the API-family modules (configs, acls, partitions, features_api, quorum,
envelope). Each handler reads the image and proposes records; nothing here changes
durable state (the records do, through ``apply``).

Versions follow Kafka 4.4 where it dropped old ones (KIP-896: DescribeConfigs and the ACL
APIs from v1) and our schemas' newest otherwise.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, Final

from kraft_jbod.controller import envelope as env
from kraft_jbod.controller.apis import acls, configs, features_api, partitions, quorum
from kraft_jbod.controller.placement import place_replicas
from kraft_jbod.errors import EncodeError, ProtocolError
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.wire.message import Message

API_DESCRIBE_ACLS: Final = 29
API_CREATE_ACLS: Final = 30
API_DELETE_ACLS: Final = 31
API_DESCRIBE_CONFIGS: Final = 32
API_ALTER_CONFIGS: Final = 33
API_CREATE_PARTITIONS: Final = 37
API_ELECT_LEADERS: Final = 43
API_INCREMENTAL_ALTER_CONFIGS: Final = 44
API_ALTER_PARTITION_REASSIGNMENTS: Final = 45
API_LIST_PARTITION_REASSIGNMENTS: Final = 46
API_DESCRIBE_QUORUM: Final = 55
API_UPDATE_FEATURES: Final = 57
API_ENVELOPE: Final = env.API_ENVELOPE

HANDLED: Final[dict[int, tuple[int, int]]] = {
    API_DESCRIBE_ACLS: (1, 3),
    API_CREATE_ACLS: (1, 3),
    API_DELETE_ACLS: (1, 3),
    API_DESCRIBE_CONFIGS: (1, 4),
    API_ALTER_CONFIGS: (0, 2),
    API_CREATE_PARTITIONS: (0, 3),
    API_ELECT_LEADERS: (0, 2),
    API_INCREMENTAL_ALTER_CONFIGS: (0, 1),
    API_ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    API_LIST_PARTITION_REASSIGNMENTS: (0, 0),
    API_DESCRIBE_QUORUM: (0, 2),
    API_UPDATE_FEATURES: (0, 2),
    API_ENVELOPE: (0, 0),
}

RecordAndVersion = tuple[Message, int]


def ops_of(st: Any) -> partitions.Ops:
    """The partition operations over the state (views through an empty draft)."""
    draft = st.new_draft()

    def view(p: Any) -> partitions.PartView:
        return partitions.PartView(p.replicas, p.isr, p.leader, p.dirs, p.adding, p.removing,
                                   p.leader_recovery_state)

    def place(start: int, count: int, rf: int) -> list[list[int]] | tuple[int, str]:
        active = sorted(b for b, reg in st.brokers.items() if reg.active)
        if rf > len(active):
            return 38, (f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} "
                        f"cannot be reached because only {len(active)} broker(s) are registered.")
        return place_replicas(active, count, rf, start=start, shift=start // max(1, len(active)))

    return partitions.Ops(
        st, view=view,
        acceptable=lambda b, d: bool(st.acceptable_leader(draft, b, d)),
        active=lambda b: bool(st.is_active(draft, b)),
        default_dir=lambda b: uuid.UUID(int=st.default_dir(b).int),
        place=place,
    )


def _observers(st: Any) -> list[quorum.Observer]:
    offsets = st.reported_offsets()
    return [quorum.Observer(b, offsets.get(b, -1)) for b in sorted(st.brokers)]


def handle(
    st: Any, api_key: int, api_version: int, body: Any, *, next_offset: int, now_ms: int,
    inner: Callable[..., Any], principal: str | None = None,
) -> tuple[Message, list[RecordAndVersion]]:
    """(response, records) for one admin request.

    ``inner(api_key, api_version, body, principal=...)`` handles a request unwrapped from
    an Envelope (it is the state's own ``handle``) and returns its Outcome.

    Raises:
        ProtocolError: a request Kafka cannot parse at all (the connection is closed).
    """
    if api_key == API_INCREMENTAL_ALTER_CONFIGS:
        return configs.incremental_alter_configs(st, api_version, body)
    if api_key == API_ALTER_CONFIGS:
        return configs.alter_configs(st, api_version, body)
    if api_key == API_DESCRIBE_CONFIGS:
        return configs.describe_configs(st, api_version, body), []
    if api_key == API_CREATE_PARTITIONS:
        return partitions.create_partitions(ops_of(st), api_version, body)
    if api_key == API_ELECT_LEADERS:
        return partitions.elect_leaders(ops_of(st), api_version, body)
    if api_key == API_ALTER_PARTITION_REASSIGNMENTS:
        return partitions.alter_partition_reassignments(ops_of(st), api_version, body)
    if api_key == API_LIST_PARTITION_REASSIGNMENTS:
        return partitions.list_partition_reassignments(st, api_version, body), []
    if api_key == API_CREATE_ACLS:
        return acls.create_acls(st, api_version, body, next_offset)
    if api_key == API_DELETE_ACLS:
        return acls.delete_acls(st, api_version, body)
    if api_key == API_DESCRIBE_ACLS:
        return acls.describe_acls(st, api_version, body), []
    if api_key == API_UPDATE_FEATURES:
        return features_api.update_features(st, api_version, body)
    if api_key == API_DESCRIBE_QUORUM:
        # A read-only answer: Kafka reports wall-clock times, so this reads the wall clock
        # (nothing durable depends on it).
        wall_ms = int(time.time() * 1000)
        return quorum.describe_quorum(
            api_version, body, node_id=st.node_id, leader_epoch=int(getattr(st, "leader_epoch", 1)),
            end_offset=next_offset, now_ms=wall_ms, observers=_observers(st),
            listeners=[("CONTROLLER", h, p) for h, p in st.controller_endpoints],
        ), []
    if api_key == API_ENVELOPE:
        return _envelope(st, body, inner)
    raise ProtocolError(f"api key {api_key} is not an admin api")


def _envelope(st: Any, body: Any, inner: Callable[..., Any]) -> tuple[Message, list[RecordAndVersion]]:
    unwrapped = env.unwrap(body, st.handled_api_versions())
    if not isinstance(unwrapped, env.Forwarded):
        return unwrapped, []
    try:
        outcome = inner(unwrapped.api_key, unwrapped.api_version, unwrapped.body, principal=str(unwrapped.principal))
    except ProtocolError:
        return env.EnvelopeResponse(response_data=None, error_code=env.INVALID_REQUEST), []
    try:
        wrapped = env.wrap(unwrapped, outcome.response)
    except EncodeError:
        return env.EnvelopeResponse(response_data=None, error_code=env.INVALID_REQUEST), []
    return wrapped, list(outcome.records)


def reassignment_isr_change(st: Any, p: Any, new_isr: list[int], lrs: int) -> tuple[Message, Any] | None:
    """An AlterPartition ISR change on a reassigning partition (may complete it), or None.

    Returns the PartitionChangeRecord and the partition view after it (alter_partition's
    ``PartitionView``), for the AlterPartition answer.
    """
    from kraft_jbod.controller.alter_partition import PartitionView

    ops = ops_of(st)
    rec = partitions.build_change(
        ops.view(p), p.topic_id, p.partition_id, acceptable=ops.acceptable, default_dir=ops.default_dir,
        metadata_version=ops.metadata_version, target_isr=new_isr, target_lrs=lrs,
    )
    if rec is None:
        return None
    leader = p.leader if rec.leader == partitions.NO_LEADER_CHANGE else rec.leader
    epoch = p.leader_epoch if rec.leader == partitions.NO_LEADER_CHANGE else p.leader_epoch + 1
    view = PartitionView(
        tuple(p.replicas if rec.replicas is None else rec.replicas),
        tuple(p.isr if rec.isr is None else rec.isr), leader, epoch, p.partition_epoch + 1,
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

    if api_key == API_CREATE_ACLS:
        return CreateAclsResponse(results=[AclCreationResult(code, message) for _ in body.creations])
    if api_key == API_DELETE_ACLS:
        return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(code, message) for _ in body.filters])
    if api_key == API_DESCRIBE_CONFIGS:
        return DescribeConfigsResponse(results=[
            DescribeConfigsResult(code, message, r.resource_type, r.resource_name) for r in body.resources])
    if api_key == API_ALTER_CONFIGS:
        return AlterConfigsResponse(responses=[
            LegacyResult(code, message, r.resource_type, r.resource_name) for r in body.resources])
    if api_key == API_INCREMENTAL_ALTER_CONFIGS:
        return IncrementalAlterConfigsResponse(responses=[
            AlterConfigsResourceResponse(code, message, r.resource_type, r.resource_name) for r in body.resources])
    if api_key == API_CREATE_PARTITIONS:
        return CreatePartitionsResponse(results=[
            CreatePartitionsTopicResult(t.name, code, message) for t in body.topics])
    return None


def topic_config_records(
    st: Any, topic: str, configs_: list[tuple[str, str | None]]
) -> list[RecordAndVersion] | tuple[int, str | None]:
    """ConfigRecords of a topic being created (CreateTopics), or (error code, message)."""
    return configs.creation_records(st, topic, configs_)


def created_topic_configs(st: Any, records: list[RecordAndVersion]) -> list[Any]:
    """CreateTopics v5+ ``Configs``: every topic config of the new topic and its source."""
    from kraft_jbod.messages.create_topics_response import CreatableTopicConfigs

    overrides = {r.name: r.value for r, _ in records if isinstance(r, ConfigRecord) and r.value is not None}
    return [CreatableTopicConfigs(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
            for name, value, source in configs.effective_topic_configs(st, overrides)]
