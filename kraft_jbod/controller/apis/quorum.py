"""DescribeQuorum (api 55): the metadata quorum as its leader sees it.

A single controller is the only voter and always the leader (KafkaRaftClient's answer on
the leader): the one partition ``__cluster_metadata-0`` with the leader id and
epoch, the high watermark (= the log end offset: one voter), the voter (its own fetch and
catch-up times are "now") and the observers, i.e. the brokers that replicate the log by
Fetch, with the offset each last reported. v2 adds the voter's directory id and its
listener endpoints (``nodes``). At kraft.version 1 both come from the VotersRecord in force
(Kafka's voter set: the metadata directory's id and the controller listeners it
advertised); at kraft.version 0 a static voter has no directory id (zero) and its
endpoints are the controller listeners bound.

A request that does not name exactly ``__cluster_metadata`` partition 0 answers
UNKNOWN_TOPIC_OR_PARTITION in each partition it names. On a voter of a quorum of several
that does not lead (:func:`describe_quorum_elsewhere`), the one partition answers
NOT_LEADER_OR_FOLLOWER and nothing else, as Kafka's raft client does on a follower; the
active controller of such a quorum (``raft/seat.py``) lists every voter after itself, with
the log end offset, last fetch and last caught-up times its raft leader recorded in this
epoch (-1 for a voter that has not fetched yet), its high watermark (-1 until established
in the epoch) and, at v2, every voter's controller listener (the voters' static endpoints).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest
from kraft_jbod.messages.describe_quorum_response import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.voters_record import VotersRecord

METADATA_TOPIC: Final = "__cluster_metadata"
_UNKNOWN_MESSAGE: Final = "This server does not host this topic-partition."
_NO_DIRECTORY: Final = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class Observer:
    node_id: int
    log_end_offset: int  # -1: never reported
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    directory_id: uuid.UUID = _NO_DIRECTORY  # a voter's, at kraft.version 1


def _names_the_metadata_partition(req: DescribeQuorumRequest) -> bool:
    return (
        len(req.topics) == 1
        and req.topics[0].topic_name == METADATA_TOPIC
        and len(req.topics[0].partitions) == 1
        and req.topics[0].partitions[0].partition_index == 0
    )


def _unknown_partitions(req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(
        error_code=0,
        error_message=None,
        topics=[
            TopicData(
                topic_name=t.topic_name,
                partitions=[
                    PartitionData(
                        partition_index=p.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        error_message=_UNKNOWN_MESSAGE,
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ],
    )


def describe_quorum_elsewhere(req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    """The answer of a voter that does not lead: NOT_LEADER_OR_FOLLOWER in the partition."""
    if not _names_the_metadata_partition(req):
        return _unknown_partitions(req)
    error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    part = PartitionData(partition_index=0, error_code=error, error_message=error.default_message)
    return DescribeQuorumResponse(
        error_code=0, error_message=None, topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[part])]
    )


def describe_quorum(
    api_version: int,
    req: DescribeQuorumRequest,
    *,
    node_id: int,
    leader_epoch: int,
    end_offset: int,
    now_ms: int,
    observers: Sequence[Observer] = (),
    listeners: Sequence[tuple[str, str, int]] = (),
    directory_id: uuid.UUID = _NO_DIRECTORY,
    voters: VotersRecord | None = None,
    high_watermark: int | None = None,
    followers: Sequence[Observer] = (),
    follower_listeners: Mapping[int, Sequence[tuple[str, str, int]]] | None = None,
) -> DescribeQuorumResponse:
    """The leader's DescribeQuorum answer (wall-clock ``now_ms`` for the voter's times).

    ``voters`` (kraft.version 1) replaces ``directory_id`` and ``listeners``. On a quorum of
    several, ``followers`` are the other voters as the leader last saw them fetch (after the
    leader in ``current_voters``, by id), ``follower_listeners`` their endpoints (``nodes``,
    v2) and ``high_watermark`` the leader's (-1 until established; default: ``end_offset``)."""
    if voters is not None:
        for v in voters.voters:
            if v.voter_id == node_id:
                directory_id = v.voter_directory_id
                listeners = [(e.name, e.host, e.port) for e in v.endpoints]
    if not _names_the_metadata_partition(req):
        return _unknown_partitions(req)

    def state(replica: int, leo: int, fetch: int, caught: int, directory: uuid.UUID) -> ReplicaState:
        rs = ReplicaState(
            replica_id=replica, log_end_offset=leo, last_fetch_timestamp=fetch, last_caught_up_timestamp=caught
        )
        if api_version >= 2:
            rs.replica_directory_id = directory
        return rs

    part = PartitionData(
        partition_index=0,
        error_code=0,
        error_message=None,
        leader_id=node_id,
        leader_epoch=leader_epoch,
        high_watermark=end_offset if high_watermark is None else high_watermark,
        current_voters=[state(node_id, end_offset, now_ms, now_ms, directory_id)]
        + [state(f.node_id, f.log_end_offset, f.last_fetch_ms, f.last_caught_up_ms, f.directory_id) for f in followers],
        observers=[
            state(o.node_id, o.log_end_offset, o.last_fetch_ms, o.last_caught_up_ms, o.directory_id) for o in observers
        ],
    )
    resp = DescribeQuorumResponse(
        error_code=0, error_message=None, topics=[TopicData(topic_name=METADATA_TOPIC, partitions=[part])]
    )
    if api_version >= 2:
        every = {node_id: listeners, **(follower_listeners or {})}
        resp.nodes = [
            Node(node_id=i, listeners=[Listener(name=n, host=h, port=p) for n, h, p in every.get(i, ())])
            for i in [node_id, *(f.node_id for f in followers)]
        ]
    return resp
