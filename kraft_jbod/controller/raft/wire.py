"""The raft core's messages as Kafka requests and responses, and log entries as record batches.

Pure translation, both ways, for the voter-to-voter APIs at the versions Kafka 4.4 sends:
Vote v2 (with PreVote, KIP-996), BeginQuorumEpoch v1 and EndQuorumEpoch v1 (with the
leader's endpoints, KIP-853), Fetch v17 (replica state, NodeEndpoints). Each entry of the
log travels as one record batch: its offset is the batch's base offset, its epoch the
partition leader epoch; a data entry is one record whose value is the payload, a control
entry a control batch whose one record is keyed LeaderChange (type 2).

A peer's response becomes a core response only with the request it answers (Kafka's
responses do not echo the fetch offset or the pre-vote flag): :func:`response_from_wire`
takes both. Anything malformed raises :class:`~kraft_jbod.errors.DecodeError`; the shell
closes that connection and the core never sees it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Final

from kraft_jbod.controller.raft import messages as core
from kraft_jbod.errors import DecodeError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from kraft_jbod.messages.begin_quorum_epoch_request import LeaderEndpoint as BeginLeaderEndpoint
from kraft_jbod.messages.begin_quorum_epoch_request import PartitionData as BeginPartition
from kraft_jbod.messages.begin_quorum_epoch_request import TopicData as BeginTopic
from kraft_jbod.messages.begin_quorum_epoch_response import BeginQuorumEpochResponse
from kraft_jbod.messages.begin_quorum_epoch_response import NodeEndpoint as BeginNodeEndpoint
from kraft_jbod.messages.begin_quorum_epoch_response import PartitionData as BeginRespPartition
from kraft_jbod.messages.begin_quorum_epoch_response import TopicData as BeginRespTopic
from kraft_jbod.messages.end_quorum_epoch_request import EndQuorumEpochRequest, ReplicaInfo
from kraft_jbod.messages.end_quorum_epoch_request import LeaderEndpoint as EndLeaderEndpoint
from kraft_jbod.messages.end_quorum_epoch_request import PartitionData as EndPartition
from kraft_jbod.messages.end_quorum_epoch_request import TopicData as EndTopic
from kraft_jbod.messages.end_quorum_epoch_response import EndQuorumEpochResponse
from kraft_jbod.messages.end_quorum_epoch_response import NodeEndpoint as EndNodeEndpoint
from kraft_jbod.messages.end_quorum_epoch_response import PartitionData as EndRespPartition
from kraft_jbod.messages.end_quorum_epoch_response import TopicData as EndRespTopic
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from kraft_jbod.messages.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from kraft_jbod.messages.fetch_response import SnapshotId as FetchSnapshotId
from kraft_jbod.messages.vote_request import PartitionData as VotePartition
from kraft_jbod.messages.vote_request import TopicData as VoteTopic
from kraft_jbod.messages.vote_request import VoteRequest
from kraft_jbod.messages.vote_response import NodeEndpoint as VoteNodeEndpoint
from kraft_jbod.messages.vote_response import PartitionData as VoteRespPartition
from kraft_jbod.messages.vote_response import TopicData as VoteRespTopic
from kraft_jbod.messages.vote_response import VoteResponse
from kraft_jbod.wire.constants import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.records import (
    ControlRecordKey,
    ControlRecordType,
    Record,
    RecordBatch,
    read_control_record_key,
    read_record_batch,
    write_control_record_key,
    write_record_batch,
)

#: The versions one voter sends another (Kafka 4.4's newest of each).
VERSIONS: Final = {
    ApiKey.VOTE: 2,
    ApiKey.BEGIN_QUORUM_EPOCH: 1,
    ApiKey.END_QUORUM_EPOCH: 1,
    ApiKey.FETCH: 17,
}
_CONTROL_ATTRIBUTE: Final = 0x20
_RAFT_CONTROL_TYPES: Final = (
    ControlRecordType.LEADER_CHANGE,
    ControlRecordType.KRAFT_VERSION,
    ControlRecordType.KRAFT_VOTERS,
)
_MAX_WAIT_MS: Final = 0  # the core paces its fetches itself
_NO_DIRECTORY: Final = uuid.UUID(int=0)

#: node id -> (listener name, host, port): where each voter listens.
Endpoints = Mapping[int, tuple[str, str, int]]


# --------------------------------------------------------------------------- entries


def encode_entries(entries: Sequence[core.Entry], *, timestamp_ms: int) -> bytes:
    """One record batch per entry, in order."""
    out = bytearray()
    for e in entries:
        if e.raw is not None:
            out += e.raw  # a peer's batch, exactly as it came
            continue
        if e.control:
            key = bytearray()
            write_control_record_key(key, ControlRecordKey(0, int(ControlRecordType.LEADER_CHANGE)))
            record = Record(offset_delta=0, key=bytes(key), value=e.payload)
            attributes = _CONTROL_ATTRIBUTE
        else:
            record = Record(offset_delta=0, value=e.payload)
            attributes = 0
        batch = RecordBatch.of(
            [record],
            base_offset=e.offset,
            base_timestamp=timestamp_ms,
            partition_leader_epoch=e.epoch,
            attributes=attributes,
        )
        write_record_batch(out, batch)
    return bytes(out)


def decode_entries(data: bytes) -> list[core.Entry]:
    """The entries of a ``records`` field, one per batch, each keeping its exact bytes (a
    partial batch at the end is dropped, as Kafka's fetcher does).

    Raises:
        DecodeError: bad bytes, or a control batch that is not a LeaderChange, KRaftVersion
            or VotersRecord.
    """
    entries: list[core.Entry] = []
    pos = 0
    while len(data) - pos >= 61:
        size = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        if size < 49 or len(data) - pos < 12 + size:
            break  # a partial batch at the end: fetch it whole next time
        start = pos
        batch, pos = read_record_batch(data, pos)
        if not batch.records:
            raise DecodeError(f"empty batch at offset {batch.base_offset}")
        rec = batch.records[0]
        control = batch.is_control
        if control:
            if rec.key is None:
                raise DecodeError(f"control batch at offset {batch.base_offset} without a key")
            key, _ = read_control_record_key(rec.key, 0)
            if key.type not in _RAFT_CONTROL_TYPES:
                raise DecodeError(f"control record type {key.type} at offset {batch.base_offset}")
        single = len(batch.records) == 1 and rec.offset_delta == 0 and batch.last_offset_delta == 0
        entries.append(
            core.Entry(
                batch.base_offset,
                batch.partition_leader_epoch,
                (rec.value or b"") if single else b"",
                control,
                count=batch.last_offset_delta + 1,
                raw=bytes(data[start:pos]),
            )
        )
    return entries


# --------------------------------------------------------------------------- requests out


def request_to_wire(
    msg: core.Message, *, cluster_id: str, destination: int, endpoints: Endpoints
) -> tuple[int, int, Message]:
    """(api key, version, body) of a core request. Raises TypeError for a response."""
    if isinstance(msg, core.VoteRequest):
        part = VotePartition(
            partition_index=METADATA_PARTITION,
            replica_epoch=msg.candidate_epoch,
            replica_id=msg.candidate_id,
            last_offset_epoch=msg.last_epoch,
            last_offset=msg.last_offset,
            pre_vote=msg.pre_vote,
            replica_directory_id=msg.candidate_directory_id or _NO_DIRECTORY,
            voter_directory_id=msg.voter_directory_id or _NO_DIRECTORY,
        )
        body: Message = VoteRequest(
            cluster_id=cluster_id,
            voter_id=destination,
            topics=[VoteTopic(topic_name=METADATA_TOPIC, partitions=[part])],
        )
        return ApiKey.VOTE, VERSIONS[ApiKey.VOTE], body
    if isinstance(msg, core.BeginQuorumEpochRequest):
        body = BeginQuorumEpochRequest(
            cluster_id=cluster_id,
            voter_id=destination,
            topics=[
                BeginTopic(
                    topic_name=METADATA_TOPIC,
                    partitions=[
                        BeginPartition(
                            partition_index=0,
                            voter_directory_id=msg.voter_directory_id or _NO_DIRECTORY,
                            leader_id=msg.leader_id,
                            leader_epoch=msg.epoch,
                        )
                    ],
                )
            ],
            leader_endpoints=[BeginLeaderEndpoint(name=n, host=h, port=p) for n, h, p in _of(endpoints, msg.leader_id)],
        )
        return ApiKey.BEGIN_QUORUM_EPOCH, VERSIONS[ApiKey.BEGIN_QUORUM_EPOCH], body
    if isinstance(msg, core.EndQuorumEpochRequest):
        body = EndQuorumEpochRequest(
            cluster_id=cluster_id,
            topics=[
                EndTopic(
                    topic_name=METADATA_TOPIC,
                    partitions=[
                        EndPartition(
                            partition_index=0,
                            leader_id=msg.leader_id,
                            leader_epoch=msg.epoch,
                            preferred_candidates=[ReplicaInfo(candidate_id=c) for c in msg.preferred_successors],
                        )
                    ],
                )
            ],
            leader_endpoints=[EndLeaderEndpoint(name=n, host=h, port=p) for n, h, p in _of(endpoints, msg.leader_id)],
        )
        return ApiKey.END_QUORUM_EPOCH, VERSIONS[ApiKey.END_QUORUM_EPOCH], body
    if isinstance(msg, core.FetchRequest):
        fetch_part = FetchPartition(
            partition=METADATA_PARTITION,
            current_leader_epoch=msg.epoch,
            fetch_offset=msg.fetch_offset,
            last_fetched_epoch=msg.last_fetched_epoch,
            log_start_offset=-1,
            partition_max_bytes=0,
            replica_directory_id=msg.replica_directory_id or _NO_DIRECTORY,
        )
        body = FetchRequest(
            cluster_id=cluster_id,
            replica_state=ReplicaState(replica_id=msg.replica_id, replica_epoch=-1),
            max_wait_ms=_MAX_WAIT_MS,
            min_bytes=0,
            max_bytes=8 * 1024 * 1024,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[fetch_part])],
            rack_id="",
        )
        return ApiKey.FETCH, VERSIONS[ApiKey.FETCH], body
    raise TypeError(f"not a request: {type(msg).__name__}")


def _directory(value: uuid.UUID) -> uuid.UUID | None:
    """A directory id off the wire: the zero UUID means none was sent (a static quorum)."""
    return None if value == _NO_DIRECTORY else value


def _of(endpoints: Endpoints, node_id: int) -> list[tuple[str, str, int]]:
    return [endpoints[node_id]] if node_id in endpoints else []


# --------------------------------------------------------------------------- requests in


def _one_partition(topics: Sequence[object], name_attr: str = "topic_name") -> object:
    if len(topics) != 1:
        raise DecodeError(f"expected one topic, got {len(topics)}")
    topic = topics[0]
    parts = getattr(topic, "partitions")  # noqa: B009 - the four request shapes share the layout
    if getattr(topic, name_attr) != METADATA_TOPIC or len(parts) != 1 or parts[0].partition_index != 0:
        raise DecodeError("the request does not name exactly __cluster_metadata-0")
    return parts[0]


def request_from_wire(api_key: int, body: Message, *, cluster_id: str) -> core.Message | int:
    """The core request in ``body``, or the error code to answer with at the top level."""
    got = getattr(body, "cluster_id", None)
    if got is not None and got != cluster_id:
        return ErrorCode.INCONSISTENT_CLUSTER_ID
    try:
        if isinstance(body, VoteRequest):
            p = _one_partition(body.topics)
            assert isinstance(p, VotePartition)
            return core.VoteRequest(
                p.replica_id,
                p.replica_epoch,
                p.last_offset_epoch,
                p.last_offset,
                p.pre_vote,
                candidate_directory_id=_directory(p.replica_directory_id),
                voter_directory_id=_directory(p.voter_directory_id),
            )
        if isinstance(body, BeginQuorumEpochRequest):
            bp = _one_partition(body.topics)
            assert isinstance(bp, BeginPartition)
            return core.BeginQuorumEpochRequest(
                bp.leader_id, bp.leader_epoch, voter_directory_id=_directory(bp.voter_directory_id)
            )
        if isinstance(body, EndQuorumEpochRequest):
            ep = _one_partition(body.topics)
            assert isinstance(ep, EndPartition)
            successors = tuple(c.candidate_id for c in ep.preferred_candidates) or tuple(ep.preferred_successors)
            return core.EndQuorumEpochRequest(ep.leader_id, ep.leader_epoch, successors)
        if isinstance(body, FetchRequest):
            if len(body.topics) != 1 or len(body.topics[0].partitions) != 1:
                raise DecodeError("expected one topic and one partition")
            topic = body.topics[0]
            if topic.topic_id != METADATA_TOPIC_ID or topic.partitions[0].partition != METADATA_PARTITION:
                raise DecodeError("the fetch does not name __cluster_metadata-0")
            fp = topic.partitions[0]
            replica = body.replica_state.replica_id if body.replica_state is not None else body.replica_id
            return core.FetchRequest(
                replica,
                fp.current_leader_epoch,
                fp.fetch_offset,
                fp.last_fetched_epoch,
                _directory(fp.replica_directory_id),
            )
    except DecodeError:
        return ErrorCode.INVALID_REQUEST
    return ErrorCode.INVALID_REQUEST


# --------------------------------------------------------------------------- responses out


def response_to_wire(msg: core.Message, *, version: int, endpoints: Endpoints, timestamp_ms: int) -> Message:
    """The Kafka response for a core response (with the leader's endpoint when known)."""
    if isinstance(msg, core.VoteResponse):
        vote = VoteResponse(
            error_code=0,
            topics=[
                VoteRespTopic(
                    topic_name=METADATA_TOPIC,
                    partitions=[
                        VoteRespPartition(
                            partition_index=0,
                            error_code=int(msg.error),
                            leader_id=msg.leader_id,
                            leader_epoch=msg.epoch,
                            vote_granted=msg.granted,
                        )
                    ],
                )
            ],
        )
        if version >= 1:
            vote.node_endpoints = [
                VoteNodeEndpoint(node_id=msg.leader_id, host=h, port=p) for _, h, p in _of(endpoints, msg.leader_id)
            ]
        return vote
    if isinstance(msg, core.BeginQuorumEpochResponse):
        begin = BeginQuorumEpochResponse(
            error_code=0,
            topics=[
                BeginRespTopic(
                    topic_name=METADATA_TOPIC,
                    partitions=[
                        BeginRespPartition(
                            partition_index=0,
                            error_code=int(msg.error),
                            leader_id=msg.leader_id,
                            leader_epoch=msg.epoch,
                        )
                    ],
                )
            ],
        )
        if version >= 1:
            begin.node_endpoints = [
                BeginNodeEndpoint(node_id=msg.leader_id, host=h, port=p) for _, h, p in _of(endpoints, msg.leader_id)
            ]
        return begin
    if isinstance(msg, core.EndQuorumEpochResponse):
        end = EndQuorumEpochResponse(
            error_code=0,
            topics=[
                EndRespTopic(
                    topic_name=METADATA_TOPIC,
                    partitions=[
                        EndRespPartition(
                            partition_index=0,
                            error_code=int(msg.error),
                            leader_id=msg.leader_id,
                            leader_epoch=msg.epoch,
                        )
                    ],
                )
            ],
        )
        if version >= 1:
            end.node_endpoints = [
                EndNodeEndpoint(node_id=msg.leader_id, host=h, port=p) for _, h, p in _of(endpoints, msg.leader_id)
            ]
        return end
    if isinstance(msg, core.FetchResponse):
        part = PartitionData(
            partition_index=METADATA_PARTITION,
            error_code=int(msg.error),
            high_watermark=msg.high_watermark,
            log_start_offset=msg.log_start_offset if msg.error == core.Error.NONE else -1,
            diverging_epoch=EpochEndOffset(epoch=msg.diverging_epoch, end_offset=msg.diverging_end_offset),
            snapshot_id=FetchSnapshotId(
                end_offset=-1 if msg.snapshot_id is None else msg.snapshot_id[0],
                epoch=-1 if msg.snapshot_id is None else msg.snapshot_id[1],
            ),
            current_leader=LeaderIdAndEpoch(leader_id=msg.leader_id, leader_epoch=msg.epoch),
            records=encode_entries(msg.entries, timestamp_ms=timestamp_ms) if msg.entries else None,
        )
        fetch = FetchResponse(
            error_code=0,
            session_id=0,
            responses=[FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[part])],
        )
        if version >= 17:
            fetch.node_endpoints = [
                NodeEndpoint(node_id=msg.leader_id, host=h, port=p, rack=None)
                for _, h, p in _of(endpoints, msg.leader_id)
            ]
        return fetch
    raise TypeError(f"not a response: {type(msg).__name__}")


# --------------------------------------------------------------------------- responses in


def _answer_partition(topics: Sequence[object]) -> object:
    if len(topics) != 1:
        raise DecodeError(f"response with {len(topics)} topics")
    parts = getattr(topics[0], "partitions")  # noqa: B009
    if len(parts) != 1:
        raise DecodeError(f"response with {len(parts)} partitions")
    return parts[0]


def response_from_wire(request: core.Message, body: Message, *, source: int) -> core.Message | None:
    """The core response to ``request`` in ``body``; None for a top-level error (nothing to
    learn: the core retries on its own).

    Raises:
        DecodeError: a response without exactly one partition, or bad records.
    """
    if getattr(body, "error_code", 0) != 0:
        return None
    if isinstance(request, core.VoteRequest) and isinstance(body, VoteResponse):
        p = _answer_partition(body.topics)
        assert isinstance(p, VoteRespPartition)
        return core.VoteResponse(
            source, p.leader_epoch, p.leader_id, p.vote_granted, request.pre_vote, _error(p.error_code)
        )
    if isinstance(request, core.BeginQuorumEpochRequest) and isinstance(body, BeginQuorumEpochResponse):
        bp = _answer_partition(body.topics)
        assert isinstance(bp, BeginRespPartition)
        return core.BeginQuorumEpochResponse(source, bp.leader_epoch, bp.leader_id, _error(bp.error_code))
    if isinstance(request, core.EndQuorumEpochRequest) and isinstance(body, EndQuorumEpochResponse):
        ep = _answer_partition(body.topics)
        assert isinstance(ep, EndRespPartition)
        return core.EndQuorumEpochResponse(source, ep.leader_epoch, ep.leader_id, _error(ep.error_code))
    if isinstance(request, core.FetchRequest) and isinstance(body, FetchResponse):
        fp = _answer_partition(body.responses)
        assert isinstance(fp, PartitionData)
        return core.FetchResponse(
            fp.current_leader.leader_id,
            fp.current_leader.leader_epoch,
            _error(fp.error_code),
            request.fetch_offset,
            high_watermark=fp.high_watermark,
            entries=tuple(decode_entries(fp.records or b"")),
            diverging_epoch=fp.diverging_epoch.epoch,
            diverging_end_offset=fp.diverging_epoch.end_offset,
            snapshot_id=(
                (fp.snapshot_id.end_offset, fp.snapshot_id.epoch)
                if fp.snapshot_id.end_offset >= 0 or fp.snapshot_id.epoch >= 0
                else None
            ),
            log_start_offset=max(0, fp.log_start_offset),
        )
    raise DecodeError(f"{type(body).__name__} does not answer {type(request).__name__}")


def _error(code: int) -> core.Error:
    try:
        return core.Error(code)
    except ValueError:
        return core.Error.INVALID_REQUEST
