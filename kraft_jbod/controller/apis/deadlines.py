"""Admin requests whose own deadline has passed before they are handled: REQUEST_TIMED_OUT.

Kafka's controller gives CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders and
AlterPartitionReassignments a deadline of "now + TimeoutMs" and fails the operation when its
turn comes after it. With TimeoutMs <= 0 the deadline has always passed by then, so every
item is answered REQUEST_TIMED_OUT (no message) and nothing is written; that case is
deterministic and answered here, before the handler runs. A positive TimeoutMs that a busy
Kafka controller misses depends on its queue; the mock has no queue and never misses one.

Found by the differential twin (tests/twin, docs/twin.md).
"""

from __future__ import annotations

from typing import Any

from kraft_jbod.messages.alter_partition_reassignments_request import AlterPartitionReassignmentsRequest
from kraft_jbod.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kraft_jbod.messages.create_partitions_request import CreatePartitionsRequest
from kraft_jbod.messages.create_partitions_response import CreatePartitionsResponse, CreatePartitionsTopicResult
from kraft_jbod.messages.create_topics_request import CreateTopicsRequest
from kraft_jbod.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest
from kraft_jbod.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from kraft_jbod.messages.elect_leaders_request import ElectLeadersRequest
from kraft_jbod.messages.elect_leaders_response import ElectLeadersResponse, PartitionResult, ReplicaElectionResult
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.wire.message import Message

TIMED_OUT = ErrorCode.REQUEST_TIMED_OUT


def expired_answer(request: Message) -> Message | None:
    """The answer to ``request`` when its TimeoutMs leaves no time at all, else None."""
    timeout = getattr(request, "timeout_ms", None)
    if timeout is None or timeout > 0:
        return None
    answer: Any = None
    if isinstance(request, CreateTopicsRequest):
        answer = CreateTopicsResponse(
            topics=[CreatableTopicResult(name=t.name, error_code=TIMED_OUT, error_message=None) for t in request.topics]
        )
    elif isinstance(request, DeleteTopicsRequest):
        names = [t.name for t in request.topics] if request.topics else list(request.topic_names)
        answer = DeleteTopicsResponse(
            responses=[DeletableTopicResult(name=n, error_code=TIMED_OUT, error_message=None) for n in names]
        )
    elif isinstance(request, CreatePartitionsRequest):
        answer = CreatePartitionsResponse(
            results=[CreatePartitionsTopicResult(name=t.name, error_code=TIMED_OUT) for t in request.topics]
        )
    elif isinstance(request, ElectLeadersRequest) and request.topic_partitions is not None:
        answer = ElectLeadersResponse(
            error_code=TIMED_OUT,
            replica_election_results=[
                ReplicaElectionResult(
                    topic=t.topic,
                    partition_result=[PartitionResult(p, TIMED_OUT, None) for p in t.partitions],
                )
                for t in request.topic_partitions
            ],
        )
    elif isinstance(request, AlterPartitionReassignmentsRequest):
        answer = AlterPartitionReassignmentsResponse(
            error_code=TIMED_OUT,
            error_message=None,
            responses=[
                ReassignableTopicResponse(
                    name=t.name,
                    partitions=[
                        ReassignablePartitionResponse(p.partition_index, TIMED_OUT, None) for p in t.partitions
                    ],
                )
                for t in request.topics
            ],
        )
    return answer  # type: ignore[no-any-return]
