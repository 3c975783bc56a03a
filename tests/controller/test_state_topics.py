"""CreateTopics, DeleteTopics, UnregisterBroker and DescribeCluster."""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller import features as fv
from kraft_jbod.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.remove_topic_record import RemoveTopicRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.messages.unregister_broker_record import UnregisterBrokerRecord
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from tests.controller.harness import Cluster, dir_id

UNASSIGNED = uuid.UUID(int=1)
MIGRATING = uuid.UUID(int=0)


def _cluster(profile: str = "kafka") -> Cluster:
    c = Cluster(profile=profile)
    c.start_broker(1, [dir_id(1, 0)])
    c.start_broker(2, [dir_id(2, 0), dir_id(2, 1)])
    c.start_broker(3, [dir_id(3, 0)])
    return c


def _topic(name: str, n: int = 1, rf: int = 1, assignments: list[list[int]] | None = None) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=n,
        replication_factor=rf,
        assignments=[CreatableReplicaAssignment(i, b) for i, b in enumerate(assignments or [])],
    )


CREATE_ERRORS = [
    ("empty name", [_topic("")], ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("dot", [_topic(".")], ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("bad char", [_topic("a/b")], ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("too long", [_topic("x" * 250)], ErrorCode.INVALID_TOPIC_EXCEPTION),
    ("duplicate in request", [_topic("d"), _topic("d")], ErrorCode.INVALID_REQUEST),
    ("zero partitions", [_topic("z", 0)], ErrorCode.INVALID_PARTITIONS),
    ("negative partitions", [_topic("z", -2)], ErrorCode.INVALID_PARTITIONS),
    ("zero rf", [_topic("z", 1, 0)], ErrorCode.INVALID_REPLICATION_FACTOR),
    ("rf above brokers", [_topic("z", 1, 4)], ErrorCode.INVALID_REPLICATION_FACTOR),
    ("assignment and counts", [_topic("z", 1, 1, [[1]])], ErrorCode.INVALID_REQUEST),
    (
        "assignment gap",
        [CreatableTopic("z", -1, -1, [CreatableReplicaAssignment(1, [1])])],
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
    ),
    ("assignment empty", [_topic("z", -1, -1, [[]])], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ("assignment repeat", [_topic("z", -1, -1, [[1, 1]])], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ("assignment unknown broker", [_topic("z", -1, -1, [[1, 9]])], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
]


@pytest.mark.parametrize(("case", "topics", "code"), CREATE_ERRORS, ids=[c for c, _, _ in CREATE_ERRORS])
def test_create_topic_errors(case: str, topics: list[CreatableTopic], code: int) -> None:
    c = _cluster()
    out = c.call(19, 7, CreateTopicsRequest(topics=topics))
    assert [t.error_code for t in out.response.topics] == [code] * len(topics)  # type: ignore[attr-defined]
    assert out.records == []


def test_existing_topic_and_fenced_only_assignment() -> None:
    c = _cluster()
    c.create_topic("t", 1, 1)
    out = c.create_topic("t", 1, 1)
    assert out.response.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS  # type: ignore[attr-defined]
    c.heartbeat(3, want_fence=True)
    out = c.call(19, 7, CreateTopicsRequest(topics=[_topic("f", -1, -1, [[3]])]))
    assert out.response.topics[0].error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", range(0, 8))
def test_create_topic_records_and_default_directories(version: int) -> None:
    c = _cluster()
    out = c.create_topic("t", 6, 3, version=version)
    res = out.response.topics[0]  # type: ignore[attr-defined]
    assert res.error_code == 0
    kinds = [type(r) for r, _ in out.records]
    assert kinds == [TopicRecord] + [PartitionRecord] * 6
    tid = out.records[0][0].topic_id  # type: ignore[attr-defined]
    if version >= 7:
        assert res.topic_id == tid
    expected = {1: dir_id(1, 0), 2: UNASSIGNED, 3: dir_id(3, 0)}
    for rec, ver in out.records[1:]:
        assert ver == fv.partition_record_version(fv.DEFAULT_LEVEL)
        assert isinstance(rec, PartitionRecord)
        assert rec.directories == [expected[b] for b in rec.replicas]
        assert rec.isr == rec.replicas and rec.leader == rec.replicas[0]
    assert c.state.check_invariants() == []


def test_kip_profile_new_partition_directories() -> None:
    c = _cluster("kip")
    out = c.create_topic("t", 3, 3)
    for rec, _ in out.records[1:]:
        assert isinstance(rec, PartitionRecord)
        want = {1: dir_id(1, 0), 2: uuid.UUID(int=0), 3: dir_id(3, 0)}
        assert rec.directories == [want[b] for b in rec.replicas]


def test_pre_jbod_partitions_are_v0_and_migrating() -> None:
    c = Cluster(level=16)
    c.start_broker(1, [])
    out = c.create_topic("t", 2, 1)
    assert {v for _, v in out.records[1:]} == {0}
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 0)
    assert p is not None and p.dirs == (MIGRATING,)


def test_validate_only_writes_nothing() -> None:
    c = _cluster()
    out = c.call(19, 7, CreateTopicsRequest(topics=[_topic("v", 3, 2)], validate_only=True))
    assert out.response.topics[0].error_code == 0 and out.records == []  # type: ignore[attr-defined]
    assert out.response.topics[0].num_partitions == 3  # type: ignore[attr-defined]


def test_delete_topics_by_name_and_id() -> None:
    c = _cluster()
    c.create_topic("a", 2, 2)
    c.create_topic("b", 1, 1)
    tid_b = c.state.topic_id_of("b")
    assert tid_b is not None
    out = c.call(20, 5, DeleteTopicsRequest(topic_names=["a", "nope", "a"], timeout_ms=30_000))
    codes = [r.error_code for r in out.response.responses]  # type: ignore[attr-defined]
    assert codes == [ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_REQUEST]
    out = c.call(20, 4, DeleteTopicsRequest(topic_names=["a"], timeout_ms=30_000))
    assert [type(r) for r, _ in out.records] == [RemoveTopicRecord]
    assert c.state.topic_id_of("a") is None
    out = c.call(
        20,
        6,
        DeleteTopicsRequest(
            topics=[
                DeleteTopicState(name=None, topic_id=tid_b),
                DeleteTopicState(name=None, topic_id=uuid.UUID(int=5 << 64)),
                DeleteTopicState(name="b", topic_id=tid_b),
            ],
            timeout_ms=30_000,
        ),
    )
    codes = [r.error_code for r in out.response.responses]  # type: ignore[attr-defined]
    assert codes == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INVALID_REQUEST]
    assert out.response.responses[0].name == "b"  # type: ignore[attr-defined]
    assert c.state.topics == {} and c.state.check_invariants() == []


def test_unregister() -> None:
    c = _cluster()
    c.create_topic("t", 3, 3)
    out = c.call(64, 0, UnregisterBrokerRequest(broker_id=9))
    assert out.response.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED  # type: ignore[attr-defined]
    out = c.call(64, 0, UnregisterBrokerRequest(broker_id=1))
    assert out.response.error_code == 0  # type: ignore[attr-defined]
    assert isinstance(out.records[-1][0], UnregisterBrokerRecord)
    assert 1 not in c.state.brokers
    assert all(p.leader != 1 and 1 not in p.isr for p in c.state.partitions())
    assert c.state.check_invariants() == []
    # its directory may now be registered by another broker
    assert c.register(4, [dir_id(1, 0)]).response.error_code == 0  # type: ignore[attr-defined]


def test_describe_cluster() -> None:
    c = _cluster()
    c.heartbeat(3, want_fence=True)
    out = c.call(60, 0, DescribeClusterRequest())
    resp = out.response
    assert resp.cluster_id == c.state.cluster_id  # type: ignore[attr-defined]
    assert [b.broker_id for b in resp.brokers] == [1, 2]  # type: ignore[attr-defined]
    assert resp.brokers[0].port == 9093  # type: ignore[attr-defined]
    out = c.call(60, 1, DescribeClusterRequest(endpoint_type=3))
    assert out.response.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE  # type: ignore[attr-defined]
    out = c.call(60, 1, DescribeClusterRequest(endpoint_type=2))
    assert out.response.brokers == []  # type: ignore[attr-defined]


def test_no_time_left_is_request_timed_out_and_writes_nothing() -> None:
    """TimeoutMs 0 (DeleteTopics' and CreatePartitions' schema default): Kafka's controller
    fails the operation past its deadline; every item REQUEST_TIMED_OUT, no message, no
    record. Found by the differential twin (docs/twin.md)."""
    from kraft_jbod.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic

    c = Cluster()
    c.start_broker(1)
    c.create_topic("a", 1, 1)
    out = c.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="a")]))
    assert [(r.name, r.error_code, r.error_message) for r in out.response.responses] == [  # type: ignore[attr-defined]
        ("a", ErrorCode.REQUEST_TIMED_OUT, None)
    ]
    assert out.records == []
    out = c.call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsTopic("a", 2, None)]))
    assert [(r.error_code, r.error_message) for r in out.response.results] == [(ErrorCode.REQUEST_TIMED_OUT, None)]  # type: ignore[attr-defined]
    assert out.records == []
    out = c.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="a")], timeout_ms=1))
    assert out.response.responses[0].error_code == ErrorCode.NONE  # type: ignore[attr-defined]
