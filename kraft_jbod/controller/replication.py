"""Serving ``__cluster_metadata`` to observers: the KRaft leader's side of Fetch.

The controller is the single voter and the leader of a static quorum, so every broker
that fetches is an observer and the high watermark is simply the log end offset (a
record is committed once our own fsync returned). :func:`handle_fetch` is pure: it looks
at the request, the log's batch index and the leader epoch, and decides either an answer
now or "park me" (a long poll with nothing to send yet). :class:`FetchWaiter` is the tiny
asyncio helper the server uses to park and wake those requests.

Rules, as Kafka's raft leader applies them (protocol-notes §8.2):

Rule 1: top-level errors carry no partitions: a different ClusterId is
ErrorCode.INCONSISTENT_CLUSTER_ID; anything but exactly one topic (the metadata topic id, or its
name before v13) with exactly partition 0 is ErrorCode.INVALID_REQUEST.
Rule 2: partition errors always carry CurrentLeader: negative MaxWaitMs, FetchOffset or
LastFetchedEpoch, or LastFetchedEpoch above CurrentLeaderEpoch are ErrorCode.INVALID_REQUEST; an
epoch below ours is ErrorCode.FENCED_LEADER_EPOCH (how a fresh observer learns the leader); above
ours is ErrorCode.UNKNOWN_LEADER_EPOCH; while shutting down, ErrorCode.BROKER_NOT_AVAILABLE.
Rule 3: offsets are checked against the epoch cache (the first offset of each epoch):
unless (offset 0, log start 0), the largest epoch <= LastFetchedEpoch must *be*
LastFetchedEpoch and end at or after FetchOffset, else the answer is DivergingEpoch
{that epoch, its end offset} and no records. A FetchOffset past the log end diverges too.
Rule 4: a valid fetch returns whole batches starting with the one holding FetchOffset,
contiguous, up to MaxBytes (at least one batch), with HW = log end. With nothing to
send and MaxWaitMs > 0 the request is parked until an append or the timeout.

We never write snapshots, so Fetch never answers with SnapshotId and FetchSnapshot always
answers ErrorCode.SNAPSHOT_NOT_FOUND (with the leader, so a confused observer re-fetches).
"""

from __future__ import annotations

import asyncio
import bisect
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from kraft_jbod.controller import snapshot as snapshots
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fetch_request import FetchPartition, FetchRequest
from kraft_jbod.messages.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from kraft_jbod.messages.fetch_response import SnapshotId as FetchSnapshotId
from kraft_jbod.messages.fetch_snapshot_request import FetchSnapshotRequest
from kraft_jbod.messages.fetch_snapshot_response import FetchSnapshotResponse, PartitionSnapshot, TopicSnapshot
from kraft_jbod.messages.fetch_snapshot_response import LeaderIdAndEpoch as SnapshotLeader
from kraft_jbod.messages.fetch_snapshot_response import NodeEndpoint as SnapshotNodeEndpoint
from kraft_jbod.messages.fetch_snapshot_response import SnapshotId as FetchSnapshotResponseId
from kraft_jbod.wire.constants import METADATA_PARTITION, METADATA_TOPIC, METADATA_TOPIC_ID

#: Fetch versions we serve: v13 is the first with topic ids, which KRaft brokers require.
FETCH_VERSIONS: Final = (13, 18)
FETCH_SNAPSHOT_VERSIONS: Final = (0, 1)

#: Kafka's raft client never reads more than this per fetch, whatever MaxBytes says.
MAX_FETCH_BYTES: Final = 8 * 1024 * 1024


class BatchIndex(Protocol):
    """What the handler reads from the log (``MetadataLog`` satisfies it)."""

    @property
    def end_offset(self) -> int: ...

    @property
    def batches(self) -> Sequence[_BatchLike]: ...

    def read(self, fetch_offset: int, max_bytes: int) -> bytes: ...


class _BatchLike(Protocol):
    @property
    def base_offset(self) -> int: ...

    @property
    def epoch(self) -> int: ...


@dataclass(slots=True, frozen=True)
class Leader:
    """Who answers: the node id, its raft epoch (>= 1) and its endpoint for v17 NodeEndpoints."""

    node_id: int
    epoch: int
    host: str = ""
    port: int = 0


@dataclass(slots=True)
class FetchAnswer:
    """A response to send now, or (``park_ms`` > 0) one to retry after an append or the timeout."""

    response: FetchResponse
    park_ms: int = 0


def epoch_starts(batches: Sequence[_BatchLike]) -> list[tuple[int, int]]:
    """The epoch cache: (epoch, first offset) for each epoch in the log, ascending."""
    out: list[tuple[int, int]] = []
    for b in batches:
        if not out or b.epoch != out[-1][0]:
            out.append((b.epoch, b.base_offset))
    return out


def end_offset_for_epoch(starts: Sequence[tuple[int, int]], requested: int, log_end: int) -> tuple[int, int]:
    """(epoch, end offset) of the largest epoch <= ``requested``, as Kafka's epoch cache answers.

    The end offset of an epoch is the first offset of the next one (the log end for the
    last). Below the first epoch the answer is (requested, first offset); with no epoch
    above ``requested`` and ``requested`` not the latest, (-1, -1).
    """
    if requested < 0:
        return -1, -1
    if starts and starts[-1][0] == requested:
        return requested, log_end
    epochs = [e for e, _ in starts]
    hi = bisect.bisect_right(epochs, requested)
    if hi >= len(starts):
        return -1, -1
    higher_start = starts[hi][1]
    if hi == 0:
        return requested, higher_start
    return starts[hi - 1][0], higher_start


def _partition(leader: Leader, error: int, **fields: object) -> PartitionData:
    part = PartitionData(
        partition_index=METADATA_PARTITION,
        error_code=error,
        high_watermark=-1,
        current_leader=LeaderIdAndEpoch(leader_id=leader.node_id, leader_epoch=leader.epoch),
        records=None,
    )
    for k, v in fields.items():
        setattr(part, k, v)
    return part


def _wrap(version: int, part: PartitionData, leader: Leader) -> FetchResponse:
    topic = FetchableTopicResponse(partitions=[part])
    if version >= 13:
        topic.topic_id = METADATA_TOPIC_ID
    else:
        topic.topic = METADATA_TOPIC
    resp = FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=[topic])
    if version >= 17 and leader.host:
        resp.node_endpoints = [NodeEndpoint(node_id=leader.node_id, host=leader.host, port=leader.port, rack=None)]
    return resp


def _request_error(request: FetchRequest, version: int) -> int:
    """The error a Fetch gets before any partition is looked at (0: none)."""
    if len(request.topics) != 1 or len(request.topics[0].partitions) != 1:
        return ErrorCode.INVALID_REQUEST
    topic = request.topics[0]
    right_topic = topic.topic_id == METADATA_TOPIC_ID if version >= 13 else topic.topic == METADATA_TOPIC
    if not right_topic or topic.partitions[0].partition != METADATA_PARTITION:
        return ErrorCode.INVALID_REQUEST
    return ErrorCode.NONE


def _partition_error(p: FetchPartition, max_wait_ms: int, leader: Leader, shutting_down: bool) -> int:
    """The error of the metadata partition's answer for the fetcher's position (0: none)."""
    if shutting_down:
        return ErrorCode.BROKER_NOT_AVAILABLE
    if (
        max_wait_ms < 0
        or p.fetch_offset < 0
        or p.last_fetched_epoch < 0
        or p.last_fetched_epoch > p.current_leader_epoch
    ):
        return ErrorCode.INVALID_REQUEST
    if p.current_leader_epoch < leader.epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if p.current_leader_epoch > leader.epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    return ErrorCode.NONE


def handle_fetch(
    request: FetchRequest,
    version: int,
    *,
    cluster_id: str,
    leader: Leader,
    log: BatchIndex,
    shutting_down: bool = False,
    snapshot: tuple[int, int] | None = None,
) -> FetchAnswer:
    """Decide the answer to one Fetch (module Rules 1-4). Never raises for a peer's values."""
    if request.cluster_id is not None and request.cluster_id != cluster_id:
        return FetchAnswer(FetchResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID, session_id=0))
    invalid = _request_error(request, version)
    if invalid:
        return FetchAnswer(FetchResponse(error_code=invalid, session_id=0))
    p = request.topics[0].partitions[0]
    code = _partition_error(p, request.max_wait_ms, leader, shutting_down)
    if code:
        return FetchAnswer(_wrap(version, _partition(leader, code), leader))

    end = log.end_offset
    hw = end  # single voter: every appended (fsync'd) record is committed
    start = getattr(log, "start_offset", 0)
    if p.fetch_offset < start and snapshot is not None:
        # Below the log start (segments deleted after a snapshot): as Kafka's leader, name
        # the newest snapshot; the follower then loads it with FetchSnapshot.
        part = _partition(
            leader,
            ErrorCode.NONE,
            high_watermark=hw,
            log_start_offset=start,
            snapshot_id=FetchSnapshotId(end_offset=snapshot[0], epoch=snapshot[1]),
        )
        return FetchAnswer(_wrap(version, part, leader))
    if p.fetch_offset != 0:
        starts = epoch_starts(log.batches)
        epoch, epoch_end = end_offset_for_epoch(starts, p.last_fetched_epoch, end)
        if epoch != p.last_fetched_epoch or epoch_end < p.fetch_offset:
            part = _partition(
                leader,
                ErrorCode.NONE,
                high_watermark=hw,
                log_start_offset=start,
                diverging_epoch=EpochEndOffset(epoch=epoch, end_offset=epoch_end),
            )
            return FetchAnswer(_wrap(version, part, leader))
    max_bytes = request.max_bytes if 0 < request.max_bytes < MAX_FETCH_BYTES else MAX_FETCH_BYTES
    records = log.read(p.fetch_offset, max_bytes) if p.fetch_offset < end else b""
    part = _partition(leader, ErrorCode.NONE, high_watermark=hw, log_start_offset=start, records=records)
    # KIP-1166 (v18): an observer whose high watermark is behind ours gets the answer at
    # once, so it learns the new high watermark without waiting for new records.
    hw_behind = version >= 18 and p.high_watermark < hw
    park = request.max_wait_ms if not records and request.max_wait_ms > 0 and not hw_behind else 0
    return FetchAnswer(_wrap(version, part, leader), park_ms=park)


def handle_fetch_snapshot(
    request: FetchSnapshotRequest,
    version: int,
    *,
    cluster_id: str,
    leader: Leader,
    directory: Path | None = None,
) -> FetchSnapshotResponse:
    """Serve a slice of a snapshot file in ``directory`` (Kafka's order: leader epoch checks,
    SNAPSHOT_NOT_FOUND for an unknown id, POSITION_OUT_OF_RANGE for a position outside the
    file, else up to MaxBytes from Position); INVALID_REQUEST for another partition."""
    if request.cluster_id is not None and request.cluster_id != cluster_id:
        return FetchSnapshotResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
    if (
        len(request.topics) != 1
        or request.topics[0].name != METADATA_TOPIC
        or len(request.topics[0].partitions) != 1
        or request.topics[0].partitions[0].partition != METADATA_PARTITION
    ):
        return FetchSnapshotResponse(error_code=ErrorCode.INVALID_REQUEST)
    p = request.topics[0].partitions[0]
    code = ErrorCode.SNAPSHOT_NOT_FOUND
    part = PartitionSnapshot(
        index=METADATA_PARTITION,
        error_code=code,
        current_leader=SnapshotLeader(leader_id=leader.node_id, leader_epoch=leader.epoch),
        unaligned_records=b"",
    )
    if p.current_leader_epoch < leader.epoch:
        part.error_code = ErrorCode.FENCED_LEADER_EPOCH
    elif p.current_leader_epoch > leader.epoch:
        part.error_code = ErrorCode.UNKNOWN_LEADER_EPOCH
    elif directory is not None and p.snapshot_id.end_offset >= 0 and p.snapshot_id.epoch >= 0:
        sid = snapshots.SnapshotId(p.snapshot_id.end_offset, p.snapshot_id.epoch)
        path = directory / sid.file_name
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if p.position < 0 or p.position >= size:
                    part.error_code = ErrorCode.POSITION_OUT_OF_RANGE
                else:
                    f.seek(p.position)
                    part.unaligned_records = f.read(max(0, min(request.max_bytes, size)))
                    part.error_code = ErrorCode.NONE
                    part.snapshot_id = FetchSnapshotResponseId(end_offset=sid.end_offset, epoch=sid.epoch)
                    part.size = size
                    part.position = p.position
        except FileNotFoundError:
            pass
    resp = FetchSnapshotResponse(
        error_code=ErrorCode.NONE, topics=[TopicSnapshot(name=METADATA_TOPIC, partitions=[part])]
    )
    if version >= 1 and leader.host:
        resp.node_endpoints = [SnapshotNodeEndpoint(node_id=leader.node_id, host=leader.host, port=leader.port)]
    return resp


class FetchWaiter:
    """Parks long-polling fetches until the log grows (``notify``) or their time is up.

    One generation counter: a waiter wakes when it moved past the generation it saw when
    the handler answered, so an append between that answer and the wait is never missed.
    """

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self.generation = 0
        self.closed = False

    def notify(self) -> None:
        """Wake every parked fetch (call after each append); cheap with nobody waiting."""
        self.generation += 1
        event, self._event = self._event, None
        if event is not None:
            event.set()

    def close(self) -> None:
        """Wake everyone for good (server shutdown)."""
        self.closed = True
        self.notify()

    async def wait(self, since_generation: int, timeout_ms: int) -> bool:
        """Wait until the generation moves past ``since_generation``; False on timeout."""
        if self.generation != since_generation or self.closed:
            return True
        if self._event is None:
            self._event = asyncio.Event()
        event = self._event
        try:
            await asyncio.wait_for(event.wait(), max(0, timeout_ms) / 1000)
        except TimeoutError:
            pass
        return self.generation != since_generation or self.closed
