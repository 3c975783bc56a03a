"""The controller's metadata log on disk: Kafka's ``__cluster_metadata-0`` segment files.

Layout: one directory holding segment files named by their base offset in 20 digits
(``00000000000000000000.log``), each a plain sequence of record batches v2 (magic 2,
CRC-32C), the same bytes Kafka's KRaft leader writes: data batches hold framed metadata
records (frame version 1, key null, no headers), control batches hold control records
(key = version 0 + type, value = the message at its version, no frame). A ``.lock`` file
keeps a second process out.

Invariants:

* Offsets are contiguous from 0 across all batches and segments; each segment's name is
  the base offset of its first batch, and a new segment starts only on a batch boundary.
* ``append`` writes one whole batch and fsyncs before returning: once it has returned,
  the records survive a crash. A failed write is cut back off the file, so the on-disk
  log never holds a partial batch that a later append would bury.
* Recovery on ``open`` trusts nothing: every batch is length-checked and CRC-checked.
  A damaged last batch of the last segment (a torn write) is truncated with a warning;
  damage anywhere before that raises :class:`StorageError` naming the log offset, file and
  byte position, and nothing is changed on disk.
* PartitionLeaderEpoch never decreases along the log.
"""

from __future__ import annotations

import bisect
import fcntl
import logging
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraft_jbod import codec, messages
from kraft_jbod.errors import DecodeError, StorageError
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.records import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    LOG_OVERHEAD,
    ControlRecordKey,
    ControlRecordType,
    Record,
    RecordBatch,
    read_control_record_key,
    read_record_batch,
    write_control_record_key,
    write_record_batch,
)

log = logging.getLogger(__name__)

RecordAndVersion = tuple[Message, int]
ControlRecordAndVersion = tuple[ControlRecordType, Message, int]

METADATA_PARTITION_DIR = "__cluster_metadata-0"
SEGMENT_SUFFIX = ".log"
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_BE_qi = struct.Struct(">qi")
_LOCK_NAME = ".lock"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


@dataclass(slots=True, frozen=True)
class BatchInfo:
    """Where one batch lives: enough to serve reads without rescanning."""

    base_offset: int
    last_offset: int
    epoch: int
    segment: int  # index into MetadataLog._segments
    position: int
    size: int
    is_control: bool


@dataclass(slots=True)
class _Segment:
    base_offset: int
    path: Path
    size: int


def resolve_log_dir(directory: Path) -> Path:
    """``directory`` itself, or its ``__cluster_metadata-0`` child when it has one.

    Lets commands take either Kafka's metadata.log.dir or the partition directory.
    """
    child = directory / METADATA_PARTITION_DIR
    return child if child.is_dir() else directory


class MetadataLog:
    """An append-only, crash-safe metadata log. Not thread-safe: the server serialises calls."""

    def __init__(
        self,
        directory: Path,
        *,
        leader_epoch: int,
        segment_bytes: int,
        fsync: bool,
        lock_fd: int | None,
        read_only: bool = False,
    ) -> None:
        self.directory = directory
        self._leader_epoch = leader_epoch
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self._lock_fd = lock_fd
        self.read_only = read_only
        self._segments: list[_Segment] = []
        self._batches: list[BatchInfo] = []
        self._batch_bases: list[int] = []
        self.end_offset = 0
        self.start_offset = 0
        self._fd: int | None = None
        self._broken: str | None = None
        self.truncated_bytes = 0

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        leader_epoch: int = 1,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: bool = True,
        lock: bool = True,
        read_only: bool = False,
    ) -> MetadataLog:
        """Open (creating if needed) the log in ``directory`` and recover it.

        ``read_only`` (for dumps of a live log) takes no lock, creates nothing and never
        truncates: a torn tail is only reported and left out.

        Raises:
            StorageError: the directory cannot be used, another process holds it, or a
                batch before the tail is damaged (the message names the offset).
        """
        if leader_epoch < 0:
            raise StorageError(f"leader epoch must be >= 0, not {leader_epoch}")
        if segment_bytes < BATCH_HEADER_SIZE:
            raise StorageError(f"segment size {segment_bytes} is below one batch header")
        if read_only:
            if not directory.is_dir():
                raise StorageError(f"metadata log directory {directory} does not exist")
        else:
            try:
                directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create metadata log directory {directory}: {exc.strerror}") from None
        lock_fd = _take_lock(directory) if lock and not read_only else None
        self = cls(
            directory,
            leader_epoch=leader_epoch,
            segment_bytes=segment_bytes,
            fsync=fsync,
            lock_fd=lock_fd,
            read_only=read_only,
        )
        try:
            self._recover()
            if self._batches and self._batches[-1].epoch > self._leader_epoch:
                # Raft epochs only move forward: a leader never writes below what is on disk.
                self._leader_epoch = self._batches[-1].epoch
            if not read_only:
                self._open_active()
        except BaseException:
            self._release()
            raise
        return self

    def _recover(self) -> None:
        names = sorted(p for p in self.directory.iterdir() if p.suffix == SEGMENT_SUFFIX and p.stem.isdigit())
        for p in names:
            self._segments.append(_Segment(int(p.stem), p, 0))
        self._segments.sort(key=lambda s: s.base_offset)
        # The log start offset: 0, or where the oldest segment kept after a snapshot begins.
        expected = self._segments[0].base_offset if self._segments else 0
        self.start_offset = expected
        last_epoch = -1
        for idx, seg in enumerate(self._segments):
            if seg.base_offset != expected:
                raise StorageError(
                    f"segment {seg.path.name} starts at offset {seg.base_offset}, expected offset {expected}"
                )
            is_last = idx == len(self._segments) - 1
            data = seg.path.read_bytes()
            pos = 0
            while pos < len(data):
                torn_reason = None
                damage_reason = None
                remain = len(data) - pos
                if remain < LOG_OVERHEAD:
                    torn_reason = f"{remain} bytes, less than a batch header"
                else:
                    _base, length = _BE_qi.unpack_from(data, pos)
                    size = LOG_OVERHEAD + length
                    if size > remain:
                        torn_reason = f"batch of {size} bytes but only {remain} on disk"
                    elif size < BATCH_HEADER_SIZE:
                        if not any(data[pos:]):
                            torn_reason = "zero-filled tail"
                        else:
                            damage_reason = f"invalid batch length {length}"
                    else:
                        try:
                            batch, end = read_record_batch(data, pos)
                        except DecodeError as exc:
                            if is_last and pos + size == len(data):
                                torn_reason = str(exc)
                            else:
                                damage_reason = str(exc)
                        else:
                            if batch.base_offset != expected:
                                damage_reason = f"batch base offset {batch.base_offset} but expected {expected}"
                            elif not batch.records or batch.last_offset_delta != len(batch.records) - 1:
                                damage_reason = "batch offsets are not contiguous"
                            elif batch.partition_leader_epoch < last_epoch:
                                damage_reason = (
                                    f"leader epoch {batch.partition_leader_epoch} after epoch {last_epoch}"
                                )
                            else:
                                info = BatchInfo(
                                    expected,
                                    batch.last_offset,
                                    batch.partition_leader_epoch,
                                    idx,
                                    pos,
                                    size,
                                    batch.is_control,
                                )
                                self._batches.append(info)
                                self._batch_bases.append(expected)
                                last_epoch = batch.partition_leader_epoch
                                expected = batch.last_offset + 1
                                pos = end
                                continue
                if torn_reason is not None and is_last:
                    log.warning(
                        "metadata log %s: %s a torn tail at offset %d (byte %d of %s, %d bytes): %s",
                        self.directory,
                        "ignoring" if self.read_only else "truncating",
                        expected,
                        pos,
                        seg.path.name,
                        len(data) - pos,
                        torn_reason,
                    )
                    if not self.read_only:
                        self._truncate(seg.path, pos)
                    self.truncated_bytes = len(data) - pos
                    data = data[:pos]
                    break
                raise StorageError(
                    f"metadata log damaged at offset {expected} ({seg.path.name}, byte {pos}): "
                    f"{damage_reason or torn_reason}"
                )
            seg.size = len(data)
        self.end_offset = expected

    def _truncate(self, path: Path, size: int) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def _open_active(self) -> None:
        if not self._segments:
            self._new_segment()
        else:
            seg = self._segments[-1]
            self._fd = os.open(seg.path, os.O_WRONLY | os.O_APPEND)

    def _new_segment(self) -> None:
        path = self.directory / segment_name(self.end_offset)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = fd
        self._segments.append(_Segment(self.end_offset, path, os.fstat(fd).st_size))
        if self.fsync:
            _fsync_dir(self.directory)

    # ------------------------------------------------------------------ properties

    @property
    def leader_epoch(self) -> int:
        return self._leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        if epoch < self.last_epoch:
            raise StorageError(f"leader epoch {epoch} is below the log's last epoch {self.last_epoch}")
        self._leader_epoch = epoch

    @property
    def last_epoch(self) -> int:
        """PartitionLeaderEpoch of the last batch, 0 for an empty log (Kafka's convention)."""
        return self._batches[-1].epoch if self._batches else 0

    @property
    def batches(self) -> Sequence[BatchInfo]:
        return self._batches

    @property
    def segment_paths(self) -> list[Path]:
        return [s.path for s in self._segments]

    # ------------------------------------------------------------------ writing

    def append(self, records: Sequence[RecordAndVersion], *, timestamp_ms: int) -> int:
        """Append ``records`` as one data batch, fsync, and return its base offset.

        An empty list writes nothing and returns the current end offset.

        Raises:
            EncodeError: a record cannot be written at its version (nothing is written).
            StorageError: the write or fsync failed; the log is then closed for writing.
        """
        if not records:
            return self.end_offset
        recs = [
            Record(offset_delta=i, key=None, value=codec.encode_metadata_record(rec, ver))
            for i, (rec, ver) in enumerate(records)
        ]
        return self._append_batch(recs, timestamp_ms, 0)

    def append_control(self, records: Sequence[ControlRecordAndVersion], *, timestamp_ms: int) -> int:
        """Append one control batch (e.g. a LeaderChangeMessage), fsync, return its base offset.

        Raises:
            EncodeError: a record cannot be written (nothing is written).
            StorageError: the write or fsync failed.
        """
        if not records:
            return self.end_offset
        recs: list[Record] = []
        for i, (ctype, msg, ver) in enumerate(records):
            key = bytearray()
            write_control_record_key(key, ControlRecordKey(0, int(ctype)))
            recs.append(Record(offset_delta=i, key=bytes(key), value=msg.encode(ver)))
        return self._append_batch(recs, timestamp_ms, CONTROL_MASK)

    def _append_batch(self, recs: list[Record], timestamp_ms: int, attributes: int) -> int:
        if self._broken is not None:
            raise StorageError(f"metadata log {self.directory} is unusable: {self._broken}")
        if self._fd is None:
            raise StorageError(f"metadata log {self.directory} is closed or read-only")
        base = self.end_offset
        batch = RecordBatch.of(
            recs,
            base_offset=base,
            base_timestamp=timestamp_ms,
            partition_leader_epoch=self._leader_epoch,
            attributes=attributes,
        )
        out = bytearray()
        write_record_batch(out, batch)  # EncodeError leaves the disk untouched
        if self._segments[-1].size > 0 and self._segments[-1].size + len(out) > self.segment_bytes:
            try:
                self._new_segment()
            except OSError as exc:
                raise StorageError(f"cannot roll metadata log segment: {exc.strerror}") from None
        seg = self._segments[-1]
        try:
            written = 0
            view = memoryview(out)
            while written < len(out):
                written += os.write(self._fd, view[written:])
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            self._undo(seg)
            raise StorageError(f"metadata log write failed at offset {base}: {exc.strerror}") from None
        info = BatchInfo(
            base,
            base + len(recs) - 1,
            self._leader_epoch,
            len(self._segments) - 1,
            seg.size,
            len(out),
            bool(attributes & CONTROL_MASK),
        )
        seg.size += len(out)
        self._batches.append(info)
        self._batch_bases.append(base)
        self.end_offset = info.last_offset + 1
        return base

    def delete_segments_below(self, offset: int) -> int:
        """Delete the whole segments holding only offsets below ``offset`` (a snapshot's end
        offset), never the active one; the log start offset moves to the first kept segment.
        Returns how many were deleted.

        Raises:
            StorageError: a segment file cannot be removed (what was removed stays removed;
                the rest of the log is intact).
        """
        keep = 0
        while keep < len(self._segments) - 1 and self._segments[keep + 1].base_offset <= offset:
            keep += 1
        if keep == 0:
            return 0
        for seg in self._segments[:keep]:
            try:
                seg.path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StorageError(f"cannot delete metadata log segment {seg.path}: {exc.strerror}") from None
        del self._segments[:keep]
        first = bisect.bisect_left(self._batch_bases, self._segments[0].base_offset)
        self._batches = [
            BatchInfo(b.base_offset, b.last_offset, b.epoch, b.segment - keep, b.position, b.size, b.is_control)
            for b in self._batches[first:]
        ]
        self._batch_bases = self._batch_bases[first:]
        self.start_offset = self._segments[0].base_offset
        if self.fsync:
            _fsync_dir(self.directory)
        return keep

    def _undo(self, seg: _Segment) -> None:
        # Cut a partial write back off so the next append cannot land after garbage.
        try:
            assert self._fd is not None
            os.ftruncate(self._fd, seg.size)
            os.fsync(self._fd)
        except OSError as exc:
            self._broken = f"could not undo a failed write: {exc.strerror}"

    def flush(self) -> None:
        """fsync the active segment (appends already do; this is for fsync=False logs)."""
        if self._fd is not None:
            os.fsync(self._fd)

    # ------------------------------------------------------------------ reading

    def _batch_bytes(self, info: BatchInfo) -> bytes:
        seg = self._segments[info.segment]
        with open(seg.path, "rb") as f:
            f.seek(info.position)
            data = f.read(info.size)
        if len(data) != info.size:
            raise StorageError(f"{seg.path.name} shrank under the log at offset {info.base_offset}")
        return data

    def iter_batches(self, from_offset: int = 0) -> Iterator[tuple[BatchInfo, RecordBatch]]:
        """Every batch holding offsets at or after ``from_offset``, decoded, in offset order.

        Raises:
            StorageError: a batch no longer reads back (changed on disk since open).
        """
        first = 0
        if from_offset > 0 and self._batches:
            first = self._batches[max(0, bisect.bisect_right(self._batch_bases, from_offset) - 1)].segment
        for idx, seg in enumerate(self._segments):
            if idx < first:
                continue
            data = seg.path.read_bytes()[: seg.size]
            start = bisect.bisect_left([b.segment for b in self._batches], idx)
            for info in self._batches[start:]:
                if info.segment != idx:
                    break
                if info.last_offset < from_offset:
                    continue
                try:
                    batch, _ = read_record_batch(data, info.position)
                except DecodeError as exc:
                    raise StorageError(f"metadata log damaged at offset {info.base_offset}: {exc}") from None
                yield info, batch

    def replay(self, from_offset: int = 0) -> Iterator[tuple[int, Any, int]]:
        """(offset, record, version) for every data record at or after ``from_offset`` (a
        snapshot's end offset on restart), in order; control batches skipped.

        Raises:
            StorageError: a record does not decode (the message names its offset).
        """
        for info, batch in self.iter_batches(from_offset):
            if info.is_control:
                continue
            for rec in batch.records:
                offset = info.base_offset + rec.offset_delta
                if offset < from_offset:
                    continue
                if rec.value is None:
                    raise StorageError(f"metadata record at offset {offset} has no value")
                try:
                    record, version = codec.decode_metadata_record(rec.value)
                except DecodeError as exc:
                    raise StorageError(f"metadata record at offset {offset} does not decode: {exc}") from None
                yield offset, record, version

    def read(self, fetch_offset: int, max_bytes: int) -> bytes:
        """Raw batches from the one holding ``fetch_offset``: at least one whole batch, then
        more whole batches of the same segment while they fit in ``max_bytes``.

        ``fetch_offset == end_offset`` gives ``b""``.

        Raises:
            StorageError: ``fetch_offset`` is outside [0, end_offset].
        """
        if fetch_offset == self.end_offset:
            return b""
        if not self.start_offset <= fetch_offset < self.end_offset:
            raise StorageError(
                f"fetch offset {fetch_offset} is outside the log [{self.start_offset}, {self.end_offset}]"
            )
        i = bisect.bisect_right(self._batch_bases, fetch_offset) - 1
        first = self._batches[i]
        size = first.size
        j = i + 1
        while (
            j < len(self._batches)
            and self._batches[j].segment == first.segment
            and size + self._batches[j].size <= max_bytes
        ):
            size += self._batches[j].size
            j += 1
        seg = self._segments[first.segment]
        with open(seg.path, "rb") as f:
            f.seek(first.position)
            return f.read(size)

    def batch_containing(self, offset: int) -> BatchInfo:
        """The batch holding ``offset``.

        Raises:
            StorageError: no batch holds it.
        """
        if not self.start_offset <= offset < self.end_offset:
            raise StorageError(f"offset {offset} is outside the log [{self.start_offset}, {self.end_offset})")
        return self._batches[bisect.bisect_right(self._batch_bases, offset) - 1]

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """fsync and close; idempotent."""
        if self._fd is not None:
            try:
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def decode_control_record(rec: Record) -> tuple[int, Any]:
    """(control type, decoded message or raw bytes) of a control record.

    Raises:
        DecodeError: the key or a known message does not decode.
    """
    if rec.key is None:
        raise DecodeError("control record without a key")
    key, _ = read_control_record_key(rec.key, 0)
    value = rec.value or b""
    names = {
        ControlRecordType.LEADER_CHANGE: "LeaderChangeMessage",
        ControlRecordType.SNAPSHOT_HEADER: "SnapshotHeaderRecord",
        ControlRecordType.SNAPSHOT_FOOTER: "SnapshotFooterRecord",
        ControlRecordType.KRAFT_VERSION: "KRaftVersionRecord",
        ControlRecordType.KRAFT_VOTERS: "VotersRecord",
    }
    try:
        name = names.get(ControlRecordType(key.type))
    except ValueError:
        name = None
    cls = messages.by_name(name) if name else None
    if cls is None:
        return key.type, value
    # Control messages carry their own version as the first int16 of the value.
    version = struct.unpack_from(">h", value, 0)[0] if len(value) >= 2 else 0
    return key.type, cls.decode(value, version)


def _take_lock(directory: Path) -> int:
    path = directory / _LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StorageError(f"cannot create {path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StorageError(f"metadata log {directory} is in use by another process") from None
    return fd


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

