"""A follower's download of its leader's snapshot with FetchSnapshot (api 59), as a pure checker.

When the leader answers a Fetch with a SnapshotId (``RaftNode.snapshot_wanted``), the voter
loads that snapshot before it fetches on. :class:`SnapshotDownload` builds each
FetchSnapshot request (the snapshot id, the position reached, the leader epoch) and checks
each answer before a byte of it is kept; the shell (``seat.py``) sends the requests, writes
the chunks to a temporary file and installs the snapshot once it is whole.

Rules:

Rule 1: an answer is checked whole before anything is written: one topic
(``__cluster_metadata``) with one partition 0, no error, the snapshot id asked for, the
position asked for, a size that is positive, within ``max_size`` and the same in every
answer, and a chunk that is not empty and does not reach beyond the size. Anything else
raises :class:`SnapshotFetchError` naming what was wrong: the download is abandoned and the
follower fetches again (the leader names the snapshot anew, or a newer one).
Rule 2: the leader's errors (SNAPSHOT_NOT_FOUND when it has deleted that snapshot,
POSITION_OUT_OF_RANGE, NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
...) abandon the download the same way; the error code is kept for the caller.
"""

from __future__ import annotations

from typing import Final

from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fetch_snapshot_request import (
    FetchSnapshotRequest,
    PartitionSnapshot,
    SnapshotId,
    TopicSnapshot,
)
from kraft_jbod.messages.fetch_snapshot_response import FetchSnapshotResponse
from kraft_jbod.wire.constants import METADATA_PARTITION, METADATA_TOPIC

#: How much one answer may carry (Kafka's follower asks for the same by default).
CHUNK_BYTES: Final = 1024 * 1024
#: The largest snapshot a follower accepts (the metadata of ~10^7 partitions is far below it).
MAX_SNAPSHOT_BYTES: Final = 1 << 34


class SnapshotFetchError(Exception):
    """An answer that abandons the download (Rules 1 and 2); ``error_code`` when the leader sent one."""

    def __init__(self, message: str, error_code: int = 0) -> None:
        super().__init__(message)
        self.error_code = error_code


class SnapshotDownload:
    """The state of one download: the snapshot, the position reached, the size announced."""

    def __init__(
        self,
        snapshot_id: tuple[int, int],
        *,
        replica_id: int,
        leader_epoch: int,
        cluster_id: str,
        chunk_bytes: int = CHUNK_BYTES,
        max_size: int = MAX_SNAPSHOT_BYTES,
    ) -> None:
        self.snapshot_id = snapshot_id
        self.replica_id = replica_id
        self.leader_epoch = leader_epoch
        self.cluster_id = cluster_id
        self.chunk_bytes = chunk_bytes
        self.max_size = max_size
        self.position = 0
        self.size = -1

    @property
    def done(self) -> bool:
        return self.size > 0 and self.position == self.size

    def request(self) -> FetchSnapshotRequest:
        end, epoch = self.snapshot_id
        return FetchSnapshotRequest(
            cluster_id=self.cluster_id,
            replica_id=self.replica_id,
            max_bytes=self.chunk_bytes,
            topics=[
                TopicSnapshot(
                    name=METADATA_TOPIC,
                    partitions=[
                        PartitionSnapshot(
                            partition=METADATA_PARTITION,
                            current_leader_epoch=self.leader_epoch,
                            snapshot_id=SnapshotId(end_offset=end, epoch=epoch),
                            position=self.position,
                        )
                    ],
                )
            ],
        )

    def accept(self, resp: FetchSnapshotResponse) -> bytes:
        """The chunk the answer carries, once every check passed (Rule 1); the position moves on.

        Raises:
            SnapshotFetchError: the answer abandons the download (Rules 1 and 2).
        """
        if resp.error_code != ErrorCode.NONE:
            raise SnapshotFetchError(f"FetchSnapshot answered error {resp.error_code}", resp.error_code)
        if len(resp.topics) != 1 or resp.topics[0].name != METADATA_TOPIC or len(resp.topics[0].partitions) != 1:
            raise SnapshotFetchError("FetchSnapshot answer does not hold exactly the metadata partition")
        part = resp.topics[0].partitions[0]
        if part.index != METADATA_PARTITION:
            raise SnapshotFetchError(f"FetchSnapshot answer for partition {part.index}")
        if part.error_code != ErrorCode.NONE:
            raise SnapshotFetchError(f"FetchSnapshot answered error {part.error_code}", part.error_code)
        got = (part.snapshot_id.end_offset, part.snapshot_id.epoch)
        if got != self.snapshot_id:
            raise SnapshotFetchError(f"FetchSnapshot answer for snapshot {got}, not {self.snapshot_id}")
        if part.position != self.position:
            raise SnapshotFetchError(f"FetchSnapshot answer at position {part.position}, not {self.position}")
        if not 0 < part.size <= self.max_size:
            raise SnapshotFetchError(f"FetchSnapshot answer with size {part.size}")
        if self.size >= 0 and part.size != self.size:
            raise SnapshotFetchError(f"the snapshot's size changed from {self.size} to {part.size}")
        chunk = part.unaligned_records or b""
        if not chunk or self.position + len(chunk) > part.size:
            raise SnapshotFetchError(
                f"FetchSnapshot chunk of {len(chunk)} bytes at {self.position} for a snapshot of {part.size}"
            )
        self.size = part.size
        self.position += len(chunk)
        return chunk
