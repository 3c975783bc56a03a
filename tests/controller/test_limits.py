"""The 10,000-records-per-user-operation bound on every admin API (issue 12, item 5).

Each row is what Kafka 4.4's controller does for the same request, read from its code:
the records of a user operation go into a list bounded at 10,000 (QuorumController's
MAX_RECORDS_PER_USER_OP), and where the overflow is caught decides the answer
(controller/limits.py has the list). Rows sit just under or at the bound (accepted, all
the records in one batch of one append) and one record over it (Kafka's error and
message; nothing written, or for the APIs Kafka catches per item, exactly the first
10,000 records). The state is built from records directly so that each row stays fast.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.controller import envelope as env
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.messages.access_control_entry_record import AccessControlEntryRecord
from kraft_jbod.messages.alter_configs_request import AlterableConfig as LegacyConfig
from kraft_jbod.messages.alter_configs_request import AlterConfigsRequest
from kraft_jbod.messages.alter_configs_request import AlterConfigsResource as LegacyResource
from kraft_jbod.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kraft_jbod.messages.create_acls_request import AclCreation, CreateAclsRequest
from kraft_jbod.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kraft_jbod.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest
from kraft_jbod.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from kraft_jbod.messages.envelope_response import EnvelopeResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.wire.message import Message
from tests.controller.harness import Cluster, dir_id

CAP = 10_000
PV, ISE, IR = ErrorCode.POLICY_VIOLATION, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.INVALID_REQUEST
EXCESSIVE = "Unable to perform excessively large batch operation."
TOO_MANY_ACLS = "Cannot remove more than 10000 acls in a single delete operation."
BROKER, SET = 4, 0
TOPIC_RES, ALLOW, READ, LITERAL, ANY_RES, ANY_PATTERN, ANY_OP, ANY_PERM = 2, 3, 3, 3, 1, 1, 1, 1


def _cluster() -> Cluster:
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    return c


def _topics(c: Cluster, sizes: dict[str, int], *, leader: int = 2) -> None:
    """Topics whose partitions all have replicas [1, 2], ISR [1, 2] and ``leader``."""
    records: list[tuple[Message, int]] = []
    for n, (name, size) in enumerate(sizes.items()):
        tid = uuid.UUID(int=0xABC0 + n)
        records.append((TopicRecord(name=name, topic_id=tid), 0))
        for pid in range(size):
            rec = PartitionRecord(
                partition_id=pid,
                topic_id=tid,
                replicas=[1, 2],
                isr=[1, 2],
                leader=leader,
                leader_epoch=0,
                partition_epoch=0,
                directories=[dir_id(1, 0), dir_id(2, 0)],
            )
            records.append((rec, 2))
    c.commit(records)


def _acls(c: Cluster, n: int) -> None:
    c.commit([(AccessControlEntryRecord(uuid.UUID(int=i + 1), TOPIC_RES, f"t{i}", LITERAL, "User:a", "*", READ, ALLOW), 0)
              for i in range(n)])  # fmt: skip


def _acl(i: int) -> AclCreation:
    return AclCreation(TOPIC_RES, f"t{i}", LITERAL, "User:a", "*", READ, ALLOW)


ALL_ACLS = DeleteAclsFilter(ANY_RES, None, ANY_PATTERN, None, None, ANY_OP, ANY_PERM)


def _elect(sizes: dict[str, int]) -> ElectLeadersRequest:
    return ElectLeadersRequest(
        election_type=0, topic_partitions=[TopicPartitions(t, list(range(n))) for t, n in sizes.items()], timeout_ms=1
    )


def _reassign(sizes: dict[str, int]) -> AlterPartitionReassignmentsRequest:
    return AlterPartitionReassignmentsRequest(
        timeout_ms=1,
        topics=[ReassignableTopic(t, [ReassignablePartition(p, [2, 1]) for p in range(n)]) for t, n in sizes.items()],
    )


def _broker_configs(keys: list[str], *, validate_only: bool = False) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(BROKER, "", [AlterableConfig(k, SET, "2") for k in keys])],
        validate_only=validate_only,
    )


def _keys(n: int) -> list[str]:
    return [f"custom.key.{i}" for i in range(n)]


@dataclass(frozen=True)
class Row:
    name: str
    setup: Callable[[Cluster], None]
    api: int
    version: int
    request: Message
    written: int  # records the request writes (0 when refused whole)
    answers: Callable[[Any], list[tuple[int, str | None]]]  # (code, message) per item, in answer order
    expected: Sequence[tuple[int, str | None]]


def _elect_answers(r: Any) -> list[tuple[int, str | None]]:
    parts = [(p.error_code, p.error_message) for t in r.replica_election_results for p in t.partition_result]
    return [(r.error_code, None), *parts[-2:]]


def _reassign_answers(r: Any) -> list[tuple[int, str | None]]:
    parts = [(p.error_code, p.error_message) for t in r.responses for p in t.partitions]
    return [(r.error_code, r.error_message), *parts[-2:]]


def _config_answers(r: Any) -> list[tuple[int, str | None]]:
    return [(x.error_code, x.error_message) for x in r.responses]


def _topic_answers(r: Any) -> list[tuple[int, str | None]]:
    return [(x.error_code, x.error_message) for x in r.results]


def _delete_topic_answers(r: Any) -> list[tuple[int, str | None]]:
    return [(x.error_code, x.error_message) for x in r.responses][-2:]


def _create_acl_answers(r: Any) -> list[tuple[int, str | None]]:
    return sorted({(x.error_code, x.error_message) for x in r.results})


def _delete_acl_answers(r: Any) -> list[tuple[int, str | None]]:
    return [(x.error_code, x.error_message) for x in r.filter_results]


def _create_with_min_isr(partitions: int) -> CreateTopicsRequest:
    config = CreatableTopicConfig("min.insync.replicas", "1")
    return CreateTopicsRequest(topics=[CreatableTopic("m", partitions, 1, configs=[config])])


def _create_answers(r: Any) -> list[tuple[int, str | None]]:
    return [(x.error_code, x.error_message) for x in r.topics]


HALF = {"a": CAP // 2, "b": CAP // 2}
OVER = {"a": CAP // 2, "b": CAP // 2, "c": 1}
ROWS = [
    # CreateTopics: TopicRecord, ConfigRecord, the ClearElrRecord Kafka adds for a
    # min.insync.replicas config when ELR is on, then the PartitionRecords.
    Row("create topic, 10,000 records", lambda c: None, 19, 7, _create_with_min_isr(CAP - 3), CAP, _create_answers, [(0, None)]),
    Row("create topic, 10,001 records", lambda c: None, 19, 7, _create_with_min_isr(CAP - 2), 0, _create_answers, [(PV, EXCESSIVE)]),
    # ElectLeaders: caught nowhere, the whole request fails (every named partition too).
    Row("elect 10,000", lambda c: _topics(c, HALF), 43, 2, _elect(HALF), CAP, _elect_answers, [(0, None)] + [(0, None)] * 2),
    Row("elect 10,001", lambda c: _topics(c, OVER), 43, 2, _elect(OVER), 0, _elect_answers, [(PV, None)] + [(PV, EXCESSIVE)] * 2),
    Row("elect all, 10,001", lambda c: _topics(c, OVER), 43, 2, ElectLeadersRequest(0, None, 1), 0, _elect_answers, [(PV, None)]),
    # AlterPartitionReassignments: caught per partition; the first 10,000 happen.
    Row("reassign 10,000", lambda c: _topics(c, HALF), 45, 0, _reassign(HALF), CAP, _reassign_answers, [(0, None)] * 3),
    Row("reassign 10,001", lambda c: _topics(c, OVER), 45, 0, _reassign(OVER), CAP, _reassign_answers, [(0, None), (0, None), (ISE, None)]),
    # IncrementalAlterConfigs / AlterConfigs: the whole request fails, even ValidateOnly.
    Row("incremental 10,000", lambda c: None, 44, 1, _broker_configs(_keys(CAP)), CAP, _config_answers, [(0, None)]),
    Row("incremental 10,001", lambda c: None, 44, 1, _broker_configs(_keys(CAP + 1)), 0, _config_answers, [(PV, EXCESSIVE)]),
    Row("incremental 10,001, validate only", lambda c: None, 44, 1, _broker_configs(_keys(CAP + 1), validate_only=True), 0, _config_answers, [(PV, EXCESSIVE)]),
    Row(  # 10,000 ConfigRecords plus the ClearElrRecord a cluster min.insync.replicas change adds
        "incremental 10,000 + ClearElr", lambda c: None, 44, 1, _broker_configs([*_keys(CAP - 1), "min.insync.replicas"]), 0, _config_answers, [(PV, EXCESSIVE)],
    ),
    Row("legacy 10,000", lambda c: None, 33, 2, AlterConfigsRequest([LegacyResource(BROKER, "1", [LegacyConfig(k, "1") for k in _keys(CAP)])], False), CAP, _config_answers, [(0, None)]),
    Row("legacy 10,001", lambda c: None, 33, 2, AlterConfigsRequest([LegacyResource(BROKER, "1", [LegacyConfig(k, "1") for k in _keys(CAP + 1)])], False), 0, _config_answers, [(PV, EXCESSIVE)]),
    # CreatePartitions: caught per topic; the partitions that fitted stay.
    Row("partitions +10,000", lambda c: _topics(c, {"x": 1}), 37, 3, CreatePartitionsRequest([CreatePartitionsTopic("x", CAP + 1, None)], 1, False), CAP, _topic_answers, [(0, None)]),
    Row("partitions +10,001", lambda c: _topics(c, {"x": 1}), 37, 3, CreatePartitionsRequest([CreatePartitionsTopic("x", CAP + 2, None)], 1, False), CAP, _topic_answers, [(ISE, None)]),
    # A count near 2**31 places only what fits (Kafka would try to place them all).
    Row("partitions +2**31-2", lambda c: _topics(c, {"x": 1}), 37, 3, CreatePartitionsRequest([CreatePartitionsTopic("x", 2**31 - 1, None)], 1, False), CAP, _topic_answers, [(ISE, None)]),
    Row(
        "partitions +6,000 then +4,001", lambda c: _topics(c, {"x": 1, "y": 1}), 37, 3,
        CreatePartitionsRequest([CreatePartitionsTopic("x", 6_001, None), CreatePartitionsTopic("y", 4_002, None)], 1, False),
        CAP, _topic_answers, [(0, None), (ISE, None)],
    ),
    # DeleteTopics: caught per topic; the first 10,000 are deleted.
    Row("delete 10,000 topics", lambda c: _topics(c, {f"t{i}": 1 for i in range(CAP)}), 20, 5, DeleteTopicsRequest(topic_names=[f"t{i}" for i in range(CAP)], timeout_ms=1), CAP, _delete_topic_answers, [(0, None)] * 2),
    Row("delete 10,001 topics", lambda c: _topics(c, {f"t{i}": 1 for i in range(CAP + 1)}), 20, 5, DeleteTopicsRequest(topic_names=[f"t{i}" for i in range(CAP + 1)], timeout_ms=1), CAP, _delete_topic_answers, [(0, None), (ISE, None)]),
    # CreateAcls: the controller call fails, every creation carries POLICY_VIOLATION.
    Row("create 10,000 acls", lambda c: None, 30, 3, CreateAclsRequest([_acl(i) for i in range(CAP)]), CAP, _create_acl_answers, [(0, None)]),
    Row("create 10,001 acls, one repeated", lambda c: None, 30, 3, CreateAclsRequest([_acl(i) for i in range(CAP)] + [_acl(0)]), CAP, _create_acl_answers, [(0, None)]),
    Row("create 10,001 acls", lambda c: None, 30, 3, CreateAclsRequest([_acl(i) for i in range(CAP + 1)]), 0, _create_acl_answers, [(PV, EXCESSIVE)]),
    # A creation Kafka's AclApis refuses never reaches the controller and keeps its error.
    Row(
        "create 10,001 acls and an empty name", lambda c: None, 30, 3,
        CreateAclsRequest([*[_acl(i) for i in range(CAP + 1)], AclCreation(TOPIC_RES, "", LITERAL, "User:a", "*", READ, ALLOW)]),
        0, _create_acl_answers, [(IR, "Invalid empty resource name"), (PV, EXCESSIVE)],
    ),
    # DeleteAcls: INVALID_REQUEST for every filter; Kafka counts a match before it knows
    # whether another filter already removes that ACL.
    Row("delete 10,000 acls", lambda c: _acls(c, CAP), 31, 3, DeleteAclsRequest([ALL_ACLS]), CAP, _delete_acl_answers, [(0, None)]),
    Row("delete 10,001 acls", lambda c: _acls(c, CAP + 1), 31, 3, DeleteAclsRequest([ALL_ACLS, ALL_ACLS]), 0, _delete_acl_answers, [(IR, TOO_MANY_ACLS)] * 2),
    Row("delete 10,000 acls twice", lambda c: _acls(c, CAP), 31, 3, DeleteAclsRequest([ALL_ACLS, ALL_ACLS]), 0, _delete_acl_answers, [(IR, TOO_MANY_ACLS)] * 2),
]  # fmt: skip


def _one_append(tmp_path: Path, c: Cluster, records: list[tuple[Message, int]]) -> int:
    """Batches one append of ``records`` takes in a real metadata log."""
    with MetadataLog.open(tmp_path) as log:
        before = len(log.batches)
        log.append(records, timestamp_ms=c.now)
        return len(log.batches) - before


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_record_bound_per_user_operation(row: Row, tmp_path: Path) -> None:
    c = _cluster()
    row.setup(c)
    before = c.state.durable_state()
    out = c.call(row.api, row.version, row.request)
    assert row.answers(out.response) == list(row.expected)
    assert len(out.records) == row.written
    if row.written == 0:
        assert c.state.durable_state() == before
    else:
        assert _one_append(tmp_path, c, list(out.records)) == 1
    assert c.state.check_invariants() == []


def test_partial_create_partitions_keeps_the_first_partitions_of_the_crossing_topic() -> None:
    c = _cluster()
    _topics(c, {"x": 1, "y": 1})
    req = CreatePartitionsRequest(
        [CreatePartitionsTopic("x", 6_001, None), CreatePartitionsTopic("y", 4_002, None)], 1, False
    )
    c.call(37, 3, req)
    sizes = {t.name: len(t.partitions) for t in c.state.topics.values()}
    assert sizes == {"x": 6_001, "y": 4_001}  # y asked for 4,001 more, got 4,000


def test_the_bound_holds_inside_an_envelope() -> None:
    c = _cluster()
    inner = CreateAclsRequest([_acl(i) for i in range(CAP + 1)])
    out = c.call(58, 0, env.envelope_of(inner, 3, correlation_id=5, client_id="fwd"))
    assert isinstance(out.response, EnvelopeResponse) and out.response.error_code == 0
    assert out.records == []
    assert b"excessively large batch" in (out.response.response_data or b"")


@pytest.mark.parametrize(("level", "clear"), [(25, False), (26, True)])
def test_a_topic_created_with_min_isr_clears_its_elr_when_elr_is_on(level: int, clear: bool) -> None:
    """Kafka creates topic configs through IncrementalAlterConfigs, which appends a
    ClearElrRecord for min.insync.replicas (its loader accepts one for a topic created in
    the same batch)."""
    c = Cluster(level=level)
    c.start_broker(1)
    out = c.call(19, 7, _create_with_min_isr(2))
    kinds = [type(r).__name__ for r, _ in out.records]
    middle = ["ClearElrRecord"] if clear else []
    assert kinds == ["TopicRecord", "ConfigRecord", *middle, "PartitionRecord", "PartitionRecord"]
    if clear:
        assert out.records[2][0].topic_name == "m"  # type: ignore[attr-defined]
    live = c.state.durable_state()
    assert c.restart().durable_state() == live
