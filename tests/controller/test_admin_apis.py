"""The admin APIs a KRaft broker forwards (and KIP-919 clients send) against the state machine.

Every request and response crosses the wire at its version (the harness encodes both),
every record goes through the metadata-record codec, and each test ends with replay
equal to live state. Expected errors and messages are Kafka 4.4's
(ControllerApis, ConfigurationControlManager, AclControlManager, ReplicationControlManager,
FeatureControlManager, EnvelopeUtils).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kraft_jbod import codec
from kraft_jbod.controller import envelope as env
from kraft_jbod.messages.access_control_entry_record import AccessControlEntryRecord
from kraft_jbod.messages.alter_configs_request import AlterableConfig as LegacyConfig
from kraft_jbod.messages.alter_configs_request import AlterConfigsRequest
from kraft_jbod.messages.alter_configs_request import AlterConfigsResource as LegacyResource
from kraft_jbod.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kraft_jbod.messages.alter_partition_request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.create_acls_request import AclCreation, CreateAclsRequest
from kraft_jbod.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest
from kraft_jbod.messages.describe_acls_request import DescribeAclsRequest
from kraft_jbod.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest
from kraft_jbod.messages.describe_quorum_request import PartitionData as QuorumPartition
from kraft_jbod.messages.describe_quorum_request import TopicData as QuorumTopic
from kraft_jbod.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from kraft_jbod.messages.envelope_request import EnvelopeRequest
from kraft_jbod.messages.envelope_response import EnvelopeResponse
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraft_jbod.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from kraft_jbod.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kraft_jbod.wire.message import Message
from tests.controller.harness import Cluster, dir_id

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def started(n: int = 3, dirs: int = 1) -> Cluster:
    c = Cluster()
    for b in range(1, n + 1):
        c.start_broker(b, [dir_id(b, i) for i in range(dirs)])
    return c


def replay_equals_live(c: Cluster) -> None:
    live = c.state.durable_state()
    assert c.restart().durable_state() == live
    assert c.state.check_invariants() == []


def records_of(out: Any, kind: type) -> list[Any]:
    return [r for r, _ in out.records if isinstance(r, kind)]


# ----------------------------------------------------------------------------- Envelope


def _envelope(body: Message, version: int, **kw: Any) -> EnvelopeRequest:
    return env.envelope_of(body, version, correlation_id=77, client_id="client-7", **kw)


def test_envelope_carries_a_create_topics_and_its_records() -> None:
    c = started()
    req = CreateTopicsRequest(topics=[CreatableTopic("fwd", 3, 2)], timeout_ms=1000)
    out = c.call(58, 0, _envelope(req, 7, principal=env.Principal("User", "alice"), client_address="10.1.2.3"))
    resp = out.response
    assert isinstance(resp, EnvelopeResponse) and resp.error_code == 0 and resp.response_data is not None
    # The payload is a response header (correlation id of the inner request) and body.
    decoded = codec.decode_response(resp.response_data, 19, 7)
    assert decoded.header.correlation_id == 77
    assert decoded.body.topics[0].name == "fwd" and decoded.body.topics[0].error_code == 0
    assert len(records_of(out, PartitionRecord)) == 3
    assert c.state.topic_id_of("fwd") is not None
    replay_equals_live(c)


def test_envelope_inner_request_sees_the_principal(monkeypatch: pytest.MonkeyPatch) -> None:
    import dataclasses

    from kraft_jbod.controller import state as state_module

    c = started()
    seen: list[Any] = []
    route = state_module.ROUTES[44]

    def spy(ctx: Any, call: Any, req: Any) -> Any:
        seen.append(call.principal)
        return route.handler(ctx, call, req)

    monkeypatch.setitem(state_module.ROUTES, 44, dataclasses.replace(route, handler=spy))
    req = IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(BROKER, "", [AlterableConfig("a", 0, "1")])])
    out = c.call(58, 0, _envelope(req, 1, principal=env.Principal("User", "bob")))
    assert out.response.error_code == 0  # type: ignore[attr-defined]
    assert seen == ["User:bob"]
    # DescribeConfigs is answered by brokers themselves: Kafka does not forward it.
    describe = DescribeConfigsRequest(resources=[DescribeConfigsResource(BROKER, "", None)])
    assert c.call(58, 0, _envelope(describe, 4)).response.error_code == 42  # type: ignore[attr-defined]


def _raw_envelope(data: bytes, principal: bytes | None = None, address: bytes = b"\x7f\0\0\1") -> EnvelopeRequest:
    if principal is None:
        principal = env.encode_principal(env.Principal("User", "ANONYMOUS"))
    return EnvelopeRequest(request_data=data, request_principal=principal, client_host_address=address)


_GOOD = codec.encode_request(CreateTopicsRequest(topics=[], timeout_ms=1), 7, 1, "c", framed=False)
_HEARTBEAT = codec.encode_request(BrokerHeartbeatRequest(broker_id=1), 1, 1, "c", framed=False)
_NESTED = codec.encode_request(_raw_envelope(_GOOD), 0, 1, "c", framed=False)


@pytest.mark.parametrize(
    ("case", "envelope", "code"),
    [
        (
            "null principal",
            EnvelopeRequest(request_data=_GOOD, request_principal=None, client_host_address=b"\1\2\3\4"),
            97,
        ),
        ("truncated principal", _raw_envelope(_GOOD, principal=b"\0"), 97),
        ("unknown principal version", _raw_envelope(_GOOD, principal=b"\0\x05" + b"\0" * 8), 97),
        ("3-byte address", _raw_envelope(_GOOD, address=b"\1\2\3"), 42),
        ("empty address", _raw_envelope(_GOOD, address=b""), 42),
        ("short header", _raw_envelope(b"\0\x13\0"), 42),
        ("unknown api key", _raw_envelope(b"\x03\xe7\0\0\0\0\0\1\0\0"), 42),
        ("not forwardable (heartbeat)", _raw_envelope(_HEARTBEAT), 42),
        ("nested envelope", _raw_envelope(_NESTED), 42),
        (
            "version not served",
            _raw_envelope(
                codec.encode_request(CreateTopicsRequest(), 7, 1, "c", framed=False).replace(
                    b"\0\x13\0\x07", b"\0\x13\0\x63", 1
                )
            ),
            42,
        ),
        ("truncated body", _raw_envelope(_GOOD[:-2]), 42),
    ],
)
def test_malformed_envelopes_get_kafkas_error_and_change_nothing(
    case: str, envelope: EnvelopeRequest, code: int
) -> None:
    c = started(1)
    before = c.state.durable_state()
    out = c.call(58, 0, envelope)
    assert out.response.error_code == code, case  # type: ignore[attr-defined]
    assert out.response.response_data is None  # type: ignore[attr-defined]
    assert out.records == [] and c.state.durable_state() == before


def test_envelope_inner_parse_refusal_is_invalid_request() -> None:
    # CreateAcls with an UNKNOWN (0) operation is refused by Kafka's request parser.
    c = started(1)
    bad = CreateAclsRequest(creations=[AclCreation(2, "t", 3, "User:a", "*", 0, 3)])
    out = c.call(58, 0, _envelope(bad, 3))
    assert out.response.error_code == 42 and out.records == []  # type: ignore[attr-defined]


def test_principal_bytes_match_kafkas_layout() -> None:
    # int16 version 0, then DefaultPrincipalData v0 (flexible): compact strings + bool + tags.
    raw = env.encode_principal(env.Principal("User", "alice"))
    assert raw == b"\0\0" + b"\x05User" + b"\x06alice" + b"\0" + b"\0"
    assert env.decode_principal(raw) == env.Principal("User", "alice")


def test_not_controller_inside_becomes_the_envelope_error() -> None:
    from kraft_jbod.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse

    fwd = env.Forwarded(
        codec.decode_request_header(_GOOD)[0], CreateTopicsRequest(), env.Principal("User", "a"), "127.0.0.1"
    )
    wrapped = env.wrap(fwd, CreateTopicsResponse(topics=[CreatableTopicResult(name="x", error_code=41)]))
    assert wrapped.error_code == 41 and wrapped.response_data is None
    ok = env.wrap(fwd, CreateTopicsResponse(topics=[CreatableTopicResult(name="x", error_code=36)]))
    assert ok.error_code == 0 and env.unwrap_response(ok, 19, 7).topics[0].error_code == 36  # type: ignore[union-attr]


# ----------------------------------------------------------------------------- CreatePartitions


def _create_partitions(c: Cluster, *topics: CreatePartitionsTopic, validate_only: bool = False) -> Any:
    return c.call(37, 3, CreatePartitionsRequest(topics=list(topics), timeout_ms=1000, validate_only=validate_only))


def test_create_partitions_adds_partition_records() -> None:
    c = started()
    c.create_topic("t", 2, 2)
    tid = c.state.topic_id_of("t")
    out = _create_partitions(c, CreatePartitionsTopic("t", 5, None))
    assert [(r.name, r.error_code, r.error_message) for r in out.response.results] == [("t", 0, None)]
    recs = records_of(out, PartitionRecord)
    assert [r.partition_id for r in recs] == [2, 3, 4]
    for r in recs:
        assert r.topic_id == tid and len(r.replicas) == 2 and r.isr == r.replicas and r.leader == r.isr[0]
        assert r.leader_epoch == 0 and r.partition_epoch == 0 and len(r.directories) == 2
    assert sorted(c.state.topics[tid].partitions) == [0, 1, 2, 3, 4]  # type: ignore[index]
    replay_equals_live(c)


@pytest.mark.parametrize(
    ("topic", "code", "message"),
    [
        (CreatePartitionsTopic("t", 2, None), 37, "Topic already has 2 partition(s)."),
        (
            CreatePartitionsTopic("t", 1, None),
            37,
            "The topic t currently has 2 partition(s); 1 would not be an increase.",
        ),
        (CreatePartitionsTopic("nope", 3, None), 3, None),
        (
            CreatePartitionsTopic("t", 4, [CreatePartitionsAssignment([1, 2])]),
            39,
            "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
        ),
        (
            CreatePartitionsTopic("t", 3, [CreatePartitionsAssignment([1, 9])]),
            39,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            CreatePartitionsTopic("t", 3, [CreatePartitionsAssignment([1, 1])]),
            39,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            CreatePartitionsTopic("t", 3, [CreatePartitionsAssignment([1])]),
            39,
            "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent "
            "with previous partitions, which have 2 replica(s).",
        ),
        (
            CreatePartitionsTopic("t", 3, [CreatePartitionsAssignment([])]),
            39,
            "The manual partition assignment includes an empty replica list.",
        ),
    ],
)
def test_create_partitions_refusals(topic: CreatePartitionsTopic, code: int, message: str | None) -> None:
    c = started()
    c.create_topic("t", 2, 2)
    out = _create_partitions(c, topic)
    r = out.response.results[0]
    assert (r.error_code, r.error_message) == (code, message)
    assert out.records == []


def test_create_partitions_duplicates_first_and_validate_only() -> None:
    c = started()
    c.create_topic("a", 1, 1)
    c.create_topic("b", 1, 1)
    out = _create_partitions(
        c, CreatePartitionsTopic("b", 2, None), CreatePartitionsTopic("a", 2, None), CreatePartitionsTopic("b", 3, None)
    )
    assert [(r.name, r.error_code) for r in out.response.results] == [("b", 42), ("a", 0)]
    assert out.response.results[0].error_message == "Duplicate topic name."
    before = c.state.durable_state()
    out = _create_partitions(c, CreatePartitionsTopic("a", 9, None), validate_only=True)
    assert out.response.results[0].error_code == 0 and out.records == []
    assert c.state.durable_state() == before


def test_create_partitions_manual_assignment_on_fenced_brokers() -> None:
    c = started()
    c.create_topic("t", 1, 2)
    c.heartbeat(2, want_fence=True)
    c.heartbeat(3, want_fence=True)
    out = _create_partitions(c, CreatePartitionsTopic("t", 2, [CreatePartitionsAssignment([2, 3])]))
    r = out.response.results[0]
    assert r.error_code == 39
    assert r.error_message == (
        "All brokers specified in the manual partition assignment for partition 1 are fenced or in controlled shutdown."
    )
    out = _create_partitions(c, CreatePartitionsTopic("t", 2, [CreatePartitionsAssignment([2, 1])]))
    rec = records_of(out, PartitionRecord)[0]
    assert rec.replicas == [2, 1] and rec.isr == [1] and rec.leader == 1


# ----------------------------------------------------------------------------- configs


def _incremental(c: Cluster, *resources: AlterConfigsResource, validate_only: bool = False) -> Any:
    return c.call(44, 1, IncrementalAlterConfigsRequest(resources=list(resources), validate_only=validate_only))


def _describe(c: Cluster, rtype: int, name: str, keys: list[str] | None = None, version: int = 4) -> Any:
    req = DescribeConfigsRequest(resources=[DescribeConfigsResource(rtype, name, keys)], include_synonyms=True)
    return c.call(32, version, req).response.results[0]


def test_incremental_alter_configs_writes_config_records_and_describe_sees_them() -> None:
    c = started()
    c.create_topic("t", 1, 1)
    out = _incremental(
        c,
        AlterConfigsResource(
            TOPIC,
            "t",
            [
                AlterableConfig("retention.ms", SET, "1000"),
                AlterableConfig("cleanup.policy", APPEND, "compact"),
            ],
        ),
    )
    assert [(r.error_code, r.resource_name) for r in out.response.responses] == [(0, "t")]
    recs = records_of(out, ConfigRecord)
    assert [(r.resource_type, r.resource_name, r.name, r.value) for r in recs] == [
        (TOPIC, "t", "retention.ms", "1000"),
        (TOPIC, "t", "cleanup.policy", "delete,compact"),
    ]
    described = {e.name: e for e in _describe(c, TOPIC, "t").configs}
    assert described["retention.ms"].value == "1000" and described["retention.ms"].config_source == 1
    assert described["cleanup.policy"].value == "delete,compact"
    assert described["segment.ms"].value == "604800000" and described["segment.ms"].config_source == 5
    # The same value again writes nothing for a topic.
    again = _incremental(c, AlterConfigsResource(TOPIC, "t", [AlterableConfig("retention.ms", SET, "1000")]))
    assert again.records == []
    # SUBTRACT, then DELETE.
    _incremental(c, AlterConfigsResource(TOPIC, "t", [AlterableConfig("cleanup.policy", SUBTRACT, "delete")]))
    assert c.state.image.configs.get(TOPIC, "t")["cleanup.policy"] == "compact"
    _incremental(c, AlterConfigsResource(TOPIC, "t", [AlterableConfig("retention.ms", DELETE, None)]))
    assert "retention.ms" not in c.state.image.configs.get(TOPIC, "t")
    replay_equals_live(c)


def test_cluster_default_shows_as_a_synonym_and_broker_records_are_always_written() -> None:
    c = started()
    c.create_topic("t", 1, 1)
    for _ in range(2):
        out = _incremental(c, AlterConfigsResource(BROKER, "", [AlterableConfig("log.retention.ms", SET, "5")]))
        assert len(records_of(out, ConfigRecord)) == 1  # KAFKA-14136: brokers reload on every record
    entry = next(e for e in _describe(c, TOPIC, "t", ["retention.ms"]).configs)
    assert (entry.value, entry.config_source) == ("5", 3)
    assert [(s.name, s.source) for s in entry.synonyms] == [("log.retention.ms", 3), ("log.retention.ms", 5)]
    out = _incremental(c, AlterConfigsResource(BROKER, "2", [AlterableConfig("log.cleaner.threads", SET, "4")]))
    assert out.response.responses[0].error_code == 0
    own = {e.name: e for e in _describe(c, BROKER, "").configs}
    assert own["log.retention.ms"].config_source == 3


@pytest.mark.parametrize(
    ("resource", "code", "message"),
    [
        (
            AlterConfigsResource(TOPIC, "t", [AlterableConfig("no.such.config", SET, "1")]),
            40,
            "Unknown topic config name: no.such.config",
        ),
        (
            AlterConfigsResource(TOPIC, "t", [AlterableConfig("retention.ms", SET, "soon")]),
            40,
            "Invalid value soon for configuration retention.ms: Not a number of type LONG",
        ),
        (
            AlterConfigsResource(TOPIC, "t", [AlterableConfig("preallocate", SET, "yes")]),
            40,
            "Invalid value yes for configuration preallocate: Expected value to be either true or false",
        ),
        (
            AlterConfigsResource(TOPIC, "t", [AlterableConfig("min.insync.replicas", SET, "0")]),
            40,
            "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
        ),
        (
            AlterConfigsResource(TOPIC, "t", [AlterableConfig("cleanup.policy", SET, "forever")]),
            40,
            "Invalid value forever for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        (
            AlterConfigsResource(TOPIC, "t", [AlterableConfig("retention.ms", APPEND, "1")]),
            40,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        (
            AlterConfigsResource(TOPIC, "missing", [AlterableConfig("retention.ms", SET, "1")]),
            3,
            "The topic 'missing' does not exist.",
        ),
        (AlterConfigsResource(TOPIC, "bad name", [AlterableConfig("retention.ms", SET, "1")]), 17, None),
        (
            AlterConfigsResource(TOPIC, "", [AlterableConfig("retention.ms", SET, "1")]),
            42,
            "Default topic resources are not allowed.",
        ),
        (AlterConfigsResource(BROKER, "9", [AlterableConfig("x", SET, "1")]), 102, "No node with id 9 found."),
        (AlterConfigsResource(BROKER, "b1", [AlterableConfig("x", SET, "1")]), 42, "Unable to parse broker name b1"),
        (AlterConfigsResource(BROKER, "-3", [AlterableConfig("x", SET, "1")]), 42, "Invalid negative broker ID."),
        (AlterConfigsResource(99, "x", [AlterableConfig("x", SET, "1")]), 35, "Unknown resource type 99."),
        (
            AlterConfigsResource(BROKER_LOGGER, "1", [AlterableConfig("kafka", SET, "DEBUG")]),
            42,
            "Unexpected node id. Expected 3000, but got 1",
        ),
    ],
)
def test_incremental_alter_configs_refusals(resource: AlterConfigsResource, code: int, message: str | None) -> None:
    c = started()
    c.create_topic("t", 1, 1)
    before = c.state.durable_state()
    out = _incremental(c, resource, AlterConfigsResource(BROKER, "", [AlterableConfig("log.retention.ms", SET, "7")]))
    by_name = {(r.resource_type, r.resource_name): r for r in out.response.responses}
    bad = by_name[(resource.resource_type, resource.resource_name)]
    assert bad.error_code == code
    if message is not None:
        assert bad.error_message == message
    # The other resource of the same request still applies: one result per resource.
    assert by_name[(BROKER, "")].error_code == 0
    assert [(r.resource_type, r.resource_name) for r, _ in out.records] == [(BROKER, "")]  # type: ignore[attr-defined]
    assert c.state.durable_state()["topics"] == before["topics"]


def test_duplicate_resources_and_validate_only() -> None:
    c = started()
    c.create_topic("t", 1, 1)
    res = AlterConfigsResource(TOPIC, "t", [AlterableConfig("retention.ms", SET, "1")])
    out = _incremental(c, res, AlterConfigsResource(BROKER, "", [AlterableConfig("a", SET, "1")]), res, res)
    assert [(r.resource_type, r.error_code, r.error_message) for r in out.response.responses] == [
        (TOPIC, 42, "Duplicate resource."),
        (BROKER, 0, None),
    ]
    out = _incremental(
        c, AlterConfigsResource(TOPIC, "t", [AlterableConfig("retention.ms", SET, "9")]), validate_only=True
    )
    assert out.response.responses[0].error_code == 0 and out.records == []
    assert c.state.image.configs.get(TOPIC, "t") == {}


def test_legacy_alter_configs_replaces_the_set() -> None:
    c = started()
    c.create_topic("t", 1, 1)
    _incremental(
        c,
        AlterConfigsResource(
            TOPIC, "t", [AlterableConfig("retention.ms", SET, "1"), AlterableConfig("segment.ms", SET, "2")]
        ),
    )
    out = c.call(33, 2, AlterConfigsRequest(resources=[LegacyResource(TOPIC, "t", [LegacyConfig("segment.ms", "3")])]))
    assert out.response.responses[0].error_code == 0
    assert [(r.name, r.value) for r in records_of(out, ConfigRecord)] == [("segment.ms", "3"), ("retention.ms", None)]
    assert c.state.image.configs.get(TOPIC, "t") == {"segment.ms": "3"}
    bad = c.call(33, 2, AlterConfigsRequest(resources=[LegacyResource(BROKER_LOGGER, "3000", [])]))
    assert bad.response.responses[0].error_code == 42
    replay_equals_live(c)


def test_deleting_a_topic_drops_its_configs() -> None:
    c = started()
    c.create_topic("t", 1, 1)
    _incremental(c, AlterConfigsResource(TOPIC, "t", [AlterableConfig("retention.ms", SET, "1")]))
    c.call(20, 5, DeleteTopicsRequest(topic_names=["t"], timeout_ms=30_000))
    assert c.state.image.configs.get(TOPIC, "t") == {}
    c.create_topic("t", 1, 1)
    assert _describe(c, TOPIC, "t", ["retention.ms"]).configs[0].value == "604800000"
    replay_equals_live(c)


def test_describe_configs_errors() -> None:
    c = started()
    assert _describe(c, TOPIC, "nope").error_code == 3
    assert _describe(c, TOPIC, "a b").error_code == 17
    wrong = _describe(c, BROKER, "1")
    assert wrong.error_code == 42
    assert wrong.error_message == "Unexpected broker id, expected 3000 or empty string, but received 1"
    assert _describe(c, BROKER, "3000").error_code == 0


# ----------------------------------------------------------------------------- ACLs


def _acl(
    rtype: int = 2,
    name: str = "t",
    pattern: int = 3,
    principal: str = "User:alice",
    host: str = "*",
    op: int = 3,
    perm: int = 3,
) -> AclCreation:
    return AclCreation(rtype, name, pattern, principal, host, op, perm)


def test_create_and_delete_acls_write_their_records() -> None:
    c = started(1)
    out = c.call(30, 3, CreateAclsRequest(creations=[_acl(), _acl(), _acl(name="u", pattern=4)]))
    assert [r.error_code for r in out.response.results] == [0, 0, 0]
    recs = records_of(out, AccessControlEntryRecord)
    assert len(recs) == 2 and len({r.id for r in recs}) == 2  # the repeat is not written twice
    again = c.call(30, 3, CreateAclsRequest(creations=[_acl()]))
    assert again.response.results[0].error_code == 0 and again.records == []
    described = c.call(
        29,
        3,
        DescribeAclsRequest(
            resource_type_filter=1,
            resource_name_filter=None,
            pattern_type_filter=1,
            principal_filter=None,
            host_filter=None,
            operation=1,
            permission_type=1,
        ),
    ).response
    assert [(r.resource_name, r.pattern_type) for r in described.resources] == [("t", 3), ("u", 4)]
    # MATCH "u-orders" finds the PREFIXED "u" ACL; two filters matching it delete it once.
    match = DeleteAclsFilter(2, "u-orders", 2, None, None, 1, 1)
    out = c.call(31, 3, DeleteAclsRequest(filters=[match, match]))
    assert [len(f.matching_acls) for f in out.response.filter_results] == [1, 1]
    removed = records_of(out, RemoveAccessControlEntryRecord)
    assert len(removed) == 1
    assert [a.resource_name for _, a in c.state.image.acls.items()] == ["t"]
    replay_equals_live(c)


@pytest.mark.parametrize(
    ("creation", "message"),
    [
        (_acl(rtype=1), "Invalid resourceType ANY"),
        (_acl(pattern=2), "Invalid patternType MATCH"),
        (_acl(op=1), "Invalid operation ANY"),
        (_acl(perm=1), "Invalid permissionType ANY"),
        (_acl(name=""), "Invalid empty resource name"),
        (_acl(rtype=4, name="other"), "The only valid name for the CLUSTER resource is kafka-cluster"),
        (
            _acl(principal="alice"),
            "Could not parse principal from `alice` (no colon is present separating the "
            "principal type from the principal name)",
        ),
        (_acl(host=""), "Host pattern cannot be null or empty"),
    ],
)
def test_invalid_acl_creations(creation: AclCreation, message: str) -> None:
    c = started(1)
    out = c.call(30, 3, CreateAclsRequest(creations=[creation, _acl()]))
    assert [(r.error_code, r.error_message) for r in out.response.results] == [(42, message), (0, None)]
    assert len(out.records) == 1


def test_acl_requests_with_unknown_codes_are_not_parsed() -> None:
    from kraft_jbod.errors import ProtocolError

    c = started(1)
    with pytest.raises(ProtocolError):
        c.call(30, 3, CreateAclsRequest(creations=[_acl(op=0)]))
    with pytest.raises(ProtocolError):
        c.call(31, 3, DeleteAclsRequest(filters=[DeleteAclsFilter(0, None, 1, None, None, 1, 1)]))


# ----------------------------------------------------------------------------- ElectLeaders


def _elect(c: Cluster, kind: int, parts: list[tuple[str, list[int]]] | None) -> Any:
    tps = None if parts is None else [TopicPartitions(t, ps) for t, ps in parts]
    return c.call(43, 2, ElectLeadersRequest(election_type=kind, topic_partitions=tps, timeout_ms=1000))


def test_preferred_election_moves_leadership_back() -> None:
    c = started()
    c.create_topic("t", 1, 3)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 0)
    assert p is not None
    preferred = p.replicas[0]
    c.heartbeat(preferred, want_fence=True)
    c.heartbeat(preferred)  # unfenced again, but not leader and not in the ISR
    p = c.state.partition(tid, 0)
    assert p is not None and p.leader != preferred
    not_yet = _elect(c, 0, [("t", [0])]).response.replica_election_results[0].partition_result[0]
    assert not_yet.error_code == 80  # PREFERRED_LEADER_NOT_AVAILABLE: not in the ISR
    leader = p.leader
    alter = AlterPartitionRequest(
        broker_id=leader,
        broker_epoch=c.epoch(leader),
        topics=[
            TopicData(
                topic_id=tid,
                partitions=[
                    PartitionData(
                        partition_index=0,
                        leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch,
                        new_isr_with_epochs=[BrokerState(b, c.epoch(b)) for b in p.replicas],
                    )
                ],
            )
        ],
    )
    c.call(56, 3, alter)
    out = _elect(c, 0, [("t", [0]), ("nope", [0])])
    results = out.response.replica_election_results
    assert (results[0].partition_result[0].error_code, results[0].partition_result[0].error_message) == (0, None)
    assert results[1].partition_result[0].error_code == 3
    (rec,) = records_of(out, PartitionChangeRecord)
    assert rec.leader == preferred
    assert _elect(c, 0, None).response.replica_election_results[0].partition_result == []  # not needed: left out
    assert _elect(c, 0, [("t", [0])]).response.replica_election_results[0].partition_result[0].error_code == 84
    replay_equals_live(c)


def test_unclean_election_takes_a_replica_outside_the_isr() -> None:
    c = started(2)
    c.create_topic("t", 1, 2)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 0)
    assert p is not None
    first, second = p.leader, next(b for b in p.replicas if b != p.leader)
    c.heartbeat(second, want_fence=True)  # out of the ISR
    c.heartbeat(first, want_fence=True)  # last ISR member: no leader
    c.heartbeat(second)  # back, but not in the ISR
    assert c.state.partition(tid, 0).leader == -1  # type: ignore[union-attr]
    assert _elect(c, 0, [("t", [0])]).response.replica_election_results[0].partition_result[0].error_code == 80
    out = _elect(c, 1, [("t", [0])])
    assert out.response.replica_election_results[0].partition_result[0].error_code == 0
    (rec,) = records_of(out, PartitionChangeRecord)
    assert rec.leader == second and rec.isr == [second] and rec.leader_recovery_state == 1
    assert _elect(c, 1, [("t", [0])]).response.replica_election_results[0].partition_result[0].error_code == 84
    bad = _elect(c, 7, [("t", [0])]).response
    assert bad.error_code == 42 and bad.replica_election_results[0].partition_result[0].error_code == 42
    replay_equals_live(c)


# ----------------------------------------------------------------------------- reassignments


def _reassign(c: Cluster, topic: str, pid: int, replicas: list[int] | None) -> Any:
    req = AlterPartitionReassignmentsRequest(topics=[ReassignableTopic(topic, [ReassignablePartition(pid, replicas)])])
    return c.call(45, 0, req)


def _list(c: Cluster, topics: list[tuple[str, list[int]]] | None = None) -> Any:
    req = ListPartitionReassignmentsRequest(
        topics=None if topics is None else [ListPartitionReassignmentsTopics(t, ps) for t, ps in topics]
    )
    return c.call(46, 0, req).response


def test_reassignment_adds_then_completes_when_the_new_replica_joins_the_isr() -> None:
    c = started(3, dirs=2)
    c.create_topic("t", 1, 2, version=7)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 0)
    assert p is not None
    old = list(p.replicas)
    new = next(b for b in (1, 2, 3) if b not in old)
    target = [new, old[0]]
    out = _reassign(c, "t", 0, target)
    assert out.response.responses[0].partitions[0].error_code == 0
    (rec,) = records_of(out, PartitionChangeRecord)
    assert rec.replicas == [*target, old[1]] and rec.adding_replicas == [new] and rec.removing_replicas == [old[1]]
    assert rec.leader == -2 and len(rec.directories) == 3  # nothing leaves yet: no epoch bump
    listed = _list(c)
    assert [
        (t.name, [(x.partition_index, x.adding_replicas, x.removing_replicas) for x in t.partitions])
        for t in listed.topics
    ] == [("t", [(0, [new], [old[1]])])]
    assert _list(c, [("t", [0, 5]), ("nope", [0])]).topics[0].partitions[0].partition_index == 0
    replay_equals_live(c)
    # The leader reports the new replica caught up: the reassignment completes in that record.
    p = c.state.partition(tid, 0)
    assert p is not None
    leader = p.leader
    isr = [*p.isr, new]
    alter = AlterPartitionRequest(
        broker_id=leader,
        broker_epoch=c.epoch(leader),
        topics=[
            TopicData(
                topic_id=tid,
                partitions=[
                    PartitionData(
                        partition_index=0,
                        leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch,
                        new_isr_with_epochs=[BrokerState(b, c.epoch(b)) for b in isr],
                    )
                ],
            )
        ],
    )
    out = c.call(56, 3, alter)
    (done,) = records_of(out, PartitionChangeRecord)
    assert done.replicas == target and done.adding_replicas == [] and done.removing_replicas == []
    p = c.state.partition(tid, 0)
    assert p is not None and list(p.replicas) == target and set(p.isr) == set(target)
    assert p.adding == () and p.removing == ()
    if leader == old[1]:  # the leader was removed: it is told a new one was elected
        assert out.response.topics[0].partitions[0].error_code == 108
    assert _list(c).topics == []
    replay_equals_live(c)


def test_reorder_completes_at_once_and_cancel_reverts() -> None:
    c = started(3)
    c.create_topic("t", 1, 2)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 0)
    assert p is not None
    flipped = list(reversed(p.replicas))
    out = _reassign(c, "t", 0, flipped)
    (rec,) = records_of(out, PartitionChangeRecord)
    assert rec.replicas == flipped and rec.adding_replicas is None and _list(c).topics == []
    assert _reassign(c, "t", 0, None).response.responses[0].partitions[0].error_code == 85
    spare = next(b for b in (1, 2, 3) if b not in flipped)
    _reassign(c, "t", 0, [spare, flipped[0]])
    out = _reassign(c, "t", 0, None)
    assert out.response.responses[0].partitions[0].error_code == 0
    p = c.state.partition(tid, 0)
    assert p is not None and list(p.replicas) == flipped and p.adding == () and p.removing == ()
    refused = _reassign(c, "t", 0, [1, 9]).response.responses[0].partitions[0]
    assert refused.error_code == 39
    assert _reassign(c, "t", 4, [1]).response.responses[0].partitions[0].error_code == 3
    replay_equals_live(c)


# ----------------------------------------------------------------------------- UpdateFeatures


def _features(c: Cluster, *updates: tuple[str, int, int], version: int = 1, validate_only: bool = False) -> Any:
    req = UpdateFeaturesRequest(
        feature_updates=[FeatureUpdateKey(n, lvl, upgrade_type=t) for n, lvl, t in updates],
        timeout_ms=1000,
        validate_only=validate_only,
    )
    return c.call(57, version, req)


def test_update_features() -> None:
    c = Cluster(level=20)
    c.start_broker(1, [dir_id(1, 0)])
    out = _features(c, ("metadata.version", 22, 1))
    assert out.response.error_code == 0 and [r.feature for r in out.response.results] == ["metadata.version"]
    assert out.response.results[0].error_message == "NONE"  # Kafka's ApiError.message() of success
    unknown = _features(c, ("no.such.feature", 0, 3), version=2).response
    assert unknown.error_code == 95 and unknown.error_message == (
        "The update failed for all features since the following feature had an error: "
        "Invalid update version 0 for feature no.such.feature. Feature no.such.feature not found."
    )
    assert records_of(out, FeatureLevelRecord)[0].feature_level == 22 and c.state.metadata_version == 22
    assert _features(c, ("metadata.version", 17, 2), version=2).response.results == []  # no metadata change 17..22
    assert c.state.metadata_version == 17
    refused = _features(c, ("metadata.version", 16, 2)).response
    assert refused.error_code == 95 and refused.results == []
    assert refused.error_message == (
        "The update failed for all features since the following feature had an error: Unsupported "
        "metadata.version downgrade from 17 to 16. Refusing to perform the requested downgrade because it might "
        "delete metadata information."
    )
    cases = [
        (
            ("metadata.version", 16, 1),
            "Can't downgrade the version of this feature without setting the upgrade "
            "type to either safe or unsafe downgrade.",
        ),
        (("metadata.version", 18, 2), "Can't downgrade to a newer version."),
        (("metadata.version", 40, 1), "Local controller 3000 only supports versions 7-30"),
        (("foo.version", 1, 1), "Local controller 3000 does not support this feature."),
        (("group.version", 2, 1), "Local controller 3000 only supports versions 0-1"),
        (("metadata.version", 18, 0), "The controller does not support the given upgrade type."),
        (("metadata.version", -1, 1), "A feature version cannot be less than 0."),
    ]
    for update, why in cases:
        resp = _features(c, update).response
        assert resp.error_code == 95 and resp.error_message.endswith(why), (update, resp.error_message)
    # Brokers must support the level too.
    c.register(2, [dir_id(2, 0)], mv_range=(1, 20))
    resp = _features(c, ("metadata.version", 21, 1)).response
    assert resp.error_message.endswith("Broker 2 only supports versions 1-20")
    before = c.state.durable_state()
    assert _features(c, ("metadata.version", 20, 1), validate_only=True).records == []
    assert c.state.durable_state() == before
    replay_equals_live(c)


# ----------------------------------------------------------------------------- DescribeQuorum


def test_describe_quorum() -> None:
    c = started(2)
    c.state.controller_endpoints = [("127.0.0.1", 9093)]
    req = DescribeQuorumRequest(topics=[QuorumTopic("__cluster_metadata", [QuorumPartition(0)])])
    resp = c.call(55, 2, req).response
    part = resp.topics[0].partitions[0]
    assert (part.error_code, part.leader_id, part.high_watermark) == (0, 3000, c.end_offset)
    assert [v.replica_id for v in part.current_voters] == [3000]
    assert part.current_voters[0].log_end_offset == c.end_offset
    assert [o.replica_id for o in part.observers] == [1, 2]
    assert [(n.node_id, [(x.host, x.port) for x in n.listeners]) for n in resp.nodes] == [(3000, [("127.0.0.1", 9093)])]
    wrong = c.call(55, 1, DescribeQuorumRequest(topics=[QuorumTopic("other", [QuorumPartition(0)])])).response
    assert wrong.topics[0].partitions[0].error_code == 3


def test_served_versions_include_the_admin_apis() -> None:
    served = Cluster().state.handled_api_versions()
    for key, rng in {
        29: (1, 3),
        30: (1, 3),
        31: (1, 3),
        32: (1, 4),
        33: (0, 2),
        37: (0, 3),
        43: (0, 2),
        44: (0, 1),
        45: (0, 1),
        46: (0, 0),
        55: (0, 2),
        57: (0, 2),
        58: (0, 0),
    }.items():
        assert served[key] == rng


def test_acl_id_is_not_random() -> None:
    a, b = started(1), started(1)
    ra = a.call(30, 3, CreateAclsRequest(creations=[_acl()])).records
    rb = b.call(30, 3, CreateAclsRequest(creations=[_acl()])).records
    assert [r.id for r, _ in ra] == [r.id for r, _ in rb]  # type: ignore[attr-defined]
    assert all(isinstance(r.id, uuid.UUID) for r, _ in ra)  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- CreateTopics with configs


def test_create_topics_with_configs_writes_config_records_after_the_topic() -> None:
    from kraft_jbod.messages.create_topics_request import CreatableTopicConfig
    from kraft_jbod.messages.topic_record import TopicRecord

    c = started()
    topic = CreatableTopic(
        "compacted",
        1,
        1,
        configs=[CreatableTopicConfig("cleanup.policy", "compact"), CreatableTopicConfig("retention.ms", "100")],
    )
    out = c.call(19, 7, CreateTopicsRequest(topics=[topic], timeout_ms=1))
    (res,) = out.response.topics  # type: ignore[attr-defined]
    assert res.error_code == 0
    kinds = [type(r).__name__ for r, _ in out.records]
    assert kinds[:3] == ["TopicRecord", "ConfigRecord", "ConfigRecord"] and set(kinds[3:]) == {"PartitionRecord"}
    assert isinstance(out.records[0][0], TopicRecord)
    listed = {x.name: (x.value, x.config_source) for x in res.configs}
    assert listed["cleanup.policy"] == ("compact", 1) and listed["segment.ms"] == ("604800000", 5)
    assert c.state.image.configs.get(TOPIC, "compacted") == {"cleanup.policy": "compact", "retention.ms": "100"}
    replay_equals_live(c)


@pytest.mark.parametrize(
    ("configs", "code", "message"),
    [
        ([("nope", "1")], 40, "Unknown topic config name: nope"),
        (
            [("retention.ms", None), ("segment.ms", None)],
            40,
            "Null value not supported for topic configs: retention.ms,segment.ms",
        ),
        ([("retention.ms", "x")], 40, "Invalid value x for configuration retention.ms: Not a number of type LONG"),
    ],
)
def test_create_topics_with_bad_configs(configs: list[tuple[str, str | None]], code: int, message: str) -> None:
    from kraft_jbod.messages.create_topics_request import CreatableTopicConfig

    c = started()
    topic = CreatableTopic("t", 1, 1, configs=[CreatableTopicConfig(k, v) for k, v in configs])
    out = c.call(19, 7, CreateTopicsRequest(topics=[topic], timeout_ms=1))
    (res,) = out.response.topics  # type: ignore[attr-defined]
    assert (res.error_code, res.error_message) == (code, message)
    assert out.records == []


def test_update_other_features_writes_their_level() -> None:
    from kraft_jbod.controller import features as fv
    from kraft_jbod.messages.broker_registration_request import Feature

    c = Cluster()
    c.start_broker(1, [dir_id(1, 0)])
    for level, kind in ((0, 2), (1, 1), (0, 2)):  # down (safe downgrade), up, down again
        out = _features(c, ("group.version", level, kind))
        assert out.response.error_code == 0, out.response.error_message
        assert [(r.name, r.feature_level) for r in records_of(out, FeatureLevelRecord)] == [("group.version", level)]
        assert c.state.finalized_features.get("group.version", 0) == level
    # A broker that does not list the feature: a level other than 0 is refused.
    others = [Feature(n, 0, hi) for n, hi in fv.IMPLEMENTED_MAX.items() if n != "group.version"]
    assert c.register(2, [dir_id(2, 0)], extra_features=others).response.error_code == 0  # type: ignore[attr-defined]
    refused = _features(c, ("group.version", 1, 1)).response
    assert refused.error_code == 95 and refused.error_message.endswith("Broker 2 does not support this feature.")
    replay_equals_live(c)


def test_a_feature_level_needs_the_levels_it_depends_on() -> None:
    # Kafka 4.4: eligible.leader.replicas.version 1 depends on metadata.version 23 (4.0-IV1),
    # judged against the levels the whole request would leave (found by the twin).
    c = Cluster(level=17)  # 3.7-IV2
    c.start_broker(1, [dir_id(1, 0)])
    for validate_only in (True, False):
        refused = _features(c, ("eligible.leader.replicas.version", 1, 1), validate_only=validate_only).response
        assert refused.error_code == 95
        assert refused.error_message == (
            "The update failed for all features since the following feature had an error: Invalid update version 1"
            " for feature eligible.leader.replicas.version. eligible.leader.replicas.version could not be set to 1"
            " because it depends on metadata.version level 23"
        )
    # With metadata.version raised in the same request, the dependency holds.
    out = _features(c, ("metadata.version", 23, 1), ("eligible.leader.replicas.version", 1, 1))
    assert out.response.error_code == 0, out.response.error_message
    assert c.state.finalized_features["eligible.leader.replicas.version"] == 1 and c.state.metadata_version == 23


def test_reassignment_v1_may_forbid_a_replication_factor_change() -> None:
    c = started(3)
    c.create_topic("t", 1, 2)
    req = AlterPartitionReassignmentsRequest(
        allow_replication_factor_change=False, topics=[ReassignableTopic("t", [ReassignablePartition(0, [1, 2, 3])])]
    )
    out = c.call(45, 1, req)
    r = out.response.responses[0].partitions[0]
    assert (r.error_code, r.error_message) == (38, "The replication factor is changed from 2 to 3")
    assert out.response.allow_replication_factor_change is False and out.records == []
    req.allow_replication_factor_change = True
    assert c.call(45, 1, req).response.responses[0].partitions[0].error_code == 0
    # In progress: the count is the replicas it will end with (3), whatever the list holds now.
    req.topics[0].partitions[0].replicas = [3, 2]
    req.allow_replication_factor_change = False
    r = c.call(45, 1, req).response.responses[0].partitions[0]
    assert (r.error_code, r.error_message) == (38, "The replication factor is changed from 3 to 2")
    replay_equals_live(c)


def test_create_partitions_takes_the_replication_factor_from_kafkas_first_partition() -> None:
    """Kafka reads the replication factor for new partitions from the first partition its
    table of the topic's partitions iterates (a TimelineHashMap: partition 2 of three, not
    partition 0). Found by the differential twin against Kafka 4.4's controller (docs/twin.md
    #23): a reassignment had given one partition another replica count."""
    from kraft_jbod.controller.image import kafka_table_first, kafka_table_slots

    assert kafka_table_first(range(3), kafka_table_slots(3)) == 2
    c = started()
    c.create_topic("t", 3, 1)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 2)
    assert p is not None
    other = next(b for b in c.state.brokers if b not in p.replicas)
    assert _reassign(c, "t", 2, [*p.replicas, other]).response.error_code == 0
    sizes = [len(c.state.partition(tid, pid).replicas) for pid in range(3)]  # type: ignore[union-attr]
    assert sizes == [1, 1, 2]
    brokers = sorted(c.state.brokers)[:2]
    one = _create_partitions(c, CreatePartitionsTopic("t", 4, [CreatePartitionsAssignment(brokers[:1])]))
    result = one.response.results[0]
    assert result.error_code == 39  # INVALID_REPLICA_ASSIGNMENT
    assert result.error_message.endswith("which have 2 replica(s).")
    two = _create_partitions(c, CreatePartitionsTopic("t", 4, [CreatePartitionsAssignment(brokers)]))
    assert two.response.results[0].error_code == 0


def test_min_isr_is_capped_by_partition_zeros_replica_count() -> None:
    """Kafka's getTopicEffectiveMinIsr caps min.insync.replicas by the replica count of the
    topic's partition 0, whichever partition changes. Here partition 1 finishes a move from
    broker 2 to broker 3 while partition 0 has one replica: min ISR is 1, so the ISR [3] needs
    no ELR (capping by partition 1's two replicas during the move gave min ISR 2 and ELR [2]).
    Found by the differential twin against Kafka 4.4's controller (docs/twin.md #24)."""
    from kraft_jbod.messages.create_topics_request import CreatableReplicaAssignment

    c = started()
    c.commit([(ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="2"), 0)])
    assignments = [CreatableReplicaAssignment(0, [1]), CreatableReplicaAssignment(1, [2])]
    topic = CreatableTopic(name="t", num_partitions=-1, replication_factor=-1, assignments=assignments)
    assert c.call(19, 7, CreateTopicsRequest(topics=[topic])).response.topics[0].error_code == 0  # type: ignore[attr-defined]
    tid = c.state.topic_id_of("t")
    assert tid is not None
    assert _reassign(c, "t", 1, [3]).response.error_code == 0
    p = c.state.partition(tid, 1)
    assert p is not None and (p.replicas, p.isr, p.leader) == ((3, 2), (2,), 2)
    alter = AlterPartitionRequest(
        broker_id=2,
        broker_epoch=c.epoch(2),
        topics=[
            TopicData(
                topic_id=tid,
                partitions=[
                    PartitionData(
                        partition_index=1,
                        leader_epoch=p.leader_epoch,
                        partition_epoch=p.partition_epoch,
                        new_isr_with_epochs=[BrokerState(b, c.epoch(b)) for b in (2, 3)],
                    )
                ],
            )
        ],
    )
    c.call(56, 3, alter)
    p = c.state.partition(tid, 1)
    assert p is not None and (p.replicas, p.isr, p.leader, p.elr) == ((3,), (3,), 3, ())
    assert c.state.check_invariants() == []
