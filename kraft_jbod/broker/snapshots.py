"""Downloading a KRaft snapshot from the leader, sans-I/O: FetchSnapshot slices in, an image out.

When a Fetch answer names a SnapshotId (our fetch offset is below the leader's log start,
because the segments we still needed were deleted after a snapshot), Kafka's raft client
stops fetching records and downloads that snapshot with FetchSnapshot, one slice at a time,
then truncates its log to the snapshot and fetches on from the snapshot's end offset.
:class:`SnapshotDownload` holds one download; :func:`parse_snapshot` turns the finished
bytes into the records an image is rebuilt from.

Rules, as ``KafkaRaftClient.handleFetchSnapshotResponse`` applies them:

Rule 1: each request asks for the bytes from ``Position`` = what we hold, up to
``controller.quorum.fetch.snapshot.max.bytes`` (Kafka's default 1 MiB).
Rule 2: an answer must name the snapshot id we asked for and start at the position we
asked from; its ``Size`` must be positive, the same in every answer, no more than
:data:`MAX_SNAPSHOT_BYTES`, and the bytes we hold plus the slice must not pass it. A slice
that breaks any of this is a :class:`~kraft_jbod.errors.DecodeError` and the download is
dropped (Kafka throws IllegalStateException; a fake broker must not die of a peer's
bytes, so it starts over from Fetch).
Rule 3: SNAPSHOT_NOT_FOUND, or a negative snapshot id, means the leader deleted the snapshot
meanwhile: drop the download and fetch again (the next answer names the newer snapshot).
Rule 4: the download is done when we hold ``Size`` bytes. The snapshot must then read as
whole v2 batches, contiguous offsets from 0, opening with a SnapshotHeaderRecord and
closing with a SnapshotFooterRecord; KRaftVersionRecord and VotersRecord are kept for the
quorum; every other control record is skipped, every data record decoded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from kraft_jbod import codec
from kraft_jbod.errors import DecodeError
from kraft_jbod.messages.fetch_snapshot_response import PartitionSnapshot
from kraft_jbod.messages.k_raft_version_record import KRaftVersionRecord
from kraft_jbod.messages.voters_record import VotersRecord
from kraft_jbod.wire.records import ControlRecordType, RecordBatch, iter_records, read_control_record_key

#: Kafka's QuorumConfig default for controller.quorum.fetch.snapshot.max.bytes.
DEFAULT_SLICE_BYTES: Final = 1024 * 1024
#: The largest snapshot we accept: the whole file is held in memory before it is loaded.
MAX_SNAPSHOT_BYTES: Final = 1024 * 1024 * 1024


@dataclass(slots=True)
class LoadedSnapshot:
    """A downloaded snapshot, decoded: its id, data records in file order, quorum records."""

    end_offset: int
    epoch: int
    records: list[tuple[Any, int]]
    kraft_version: int | None
    voters: VotersRecord | None
    size: int


@dataclass
class SnapshotDownload:
    """One snapshot being fetched (module Rules 1-3)."""

    end_offset: int
    epoch: int
    data: bytearray = field(default_factory=bytearray)
    size: int = -1  # from the first answer
    slices: int = 0

    @property
    def position(self) -> int:
        return len(self.data)

    def on_slice(self, part: PartitionSnapshot) -> bool:
        """Append one answer's slice (Rule 2); True once the snapshot is whole.

        Raises:
            DecodeError: the answer breaks Rule 2 (nothing of it is kept).
        """
        sid = part.snapshot_id
        if (sid.end_offset, sid.epoch) != (self.end_offset, self.epoch):
            raise DecodeError(
                f"FetchSnapshot answered snapshot ({sid.end_offset}, {sid.epoch}) "
                f"where ({self.end_offset}, {self.epoch}) was asked for"
            )
        if part.position != self.position:
            raise DecodeError(f"FetchSnapshot answered position {part.position} where {self.position} was asked for")
        if not 0 < part.size <= MAX_SNAPSHOT_BYTES:
            raise DecodeError(f"FetchSnapshot answered snapshot size {part.size} (accepted: 1..{MAX_SNAPSHOT_BYTES})")
        if self.size >= 0 and part.size != self.size:
            raise DecodeError(f"FetchSnapshot answered size {part.size} after size {self.size}")
        chunk = part.unaligned_records or b""
        if self.position + len(chunk) > part.size:
            raise DecodeError(
                f"FetchSnapshot slice of {len(chunk)} bytes at position {self.position} passes the size {part.size}"
            )
        if not chunk:
            raise DecodeError(f"FetchSnapshot answered no bytes at position {self.position} of {part.size}")
        self.size = part.size
        self.data += chunk
        self.slices += 1
        return self.position == self.size


def parse_snapshot(data: bytes | bytearray, end_offset: int, epoch: int) -> LoadedSnapshot:
    """Decode a whole snapshot (module Rule 4).

    Raises:
        DecodeError: a partial or corrupt batch, a gap in the offsets, a missing header or
            footer, or a record that does not decode.
    """
    records: list[tuple[Any, int]] = []
    kraft_version: int | None = None
    voters: VotersRecord | None = None
    expected = 0
    first_type: int | None = None
    last_type: int | None = None
    for entry in iter_records(bytes(data)):
        if not isinstance(entry, RecordBatch):
            raise DecodeError(f"snapshot ({end_offset}, {epoch}): a partial or legacy entry at offset {expected}")
        for rec in entry.records:
            offset = entry.base_offset + rec.offset_delta
            if offset != expected:
                raise DecodeError(f"snapshot ({end_offset}, {epoch}): record offset {offset} where {expected} was due")
            expected += 1
            if entry.is_control:
                if rec.key is None:
                    raise DecodeError(f"snapshot ({end_offset}, {epoch}): control record {offset} without a key")
                ctype = read_control_record_key(rec.key, 0)[0].type
                if first_type is None:
                    first_type = ctype
                last_type = ctype
                value = rec.value or b""
                if ctype in (ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS):
                    if len(value) < 2:
                        raise DecodeError(f"snapshot ({end_offset}, {epoch}): control record {offset} is too short")
                    version = int.from_bytes(value[:2], "big", signed=True)
                    if ctype == ControlRecordType.KRAFT_VERSION:
                        kraft_version = KRaftVersionRecord.decode(value, version).k_raft_version
                    else:
                        voters = VotersRecord.decode(value, version)
                continue
            if first_type is None:
                first_type = -1
            last_type = -1
            records.append(codec.decode_metadata_record(rec.value or b""))
    if first_type != ControlRecordType.SNAPSHOT_HEADER:
        raise DecodeError(f"snapshot ({end_offset}, {epoch}) does not open with a SnapshotHeaderRecord")
    if last_type != ControlRecordType.SNAPSHOT_FOOTER:
        raise DecodeError(f"snapshot ({end_offset}, {epoch}) does not close with a SnapshotFooterRecord")
    return LoadedSnapshot(end_offset, epoch, records, kraft_version, voters, len(data))
