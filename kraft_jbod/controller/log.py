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
* ``append`` writes whole batches and fsyncs before returning: once it has returned,
  the records survive a crash. A record set larger than ``MAX_RECORDS_PER_BATCH``
  (10,000, Kafka's controller batch bound) becomes several batches written with one
  ``write`` loop and one fsync, all or nothing. A failed write is cut back off the file,
  so the on-disk log never holds a partial batch that a later append would bury.
* Recovery on ``open`` trusts nothing: every batch is length-checked and CRC-checked
  (:func:`scan_segments`). Kafka truncates at the first invalid batch and counts on the
  other voters to copy back what it cut; a single-voter mock has no such copy, so only a
  torn tail is truncated (with a warning): an incomplete final batch at the physical end
  of the last segment with nothing valid after it, or a zero-filled remainder. Any other
  damage (a bad CRC even on the last batch, a bad length followed by more bytes, anything
  before the last batch) raises :class:`StorageError` naming the offset, file and byte,
  and nothing is changed on disk; ``kraft-jbod log recover DIR --truncate-at OFFSET``
  (:func:`truncate_at`) is the operator's explicit way to drop data, with a backup.
* PartitionLeaderEpoch never decreases along the log.
"""

from __future__ import annotations

import bisect
import fcntl
import logging
import os
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import crc32c

from kraft_jbod import _accel, codec, messages
from kraft_jbod.controller.limits import MAX_RECORDS_PER_BATCH
from kraft_jbod.errors import DecodeError, StorageError
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.records import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    LOG_OVERHEAD,
    METADATA_FRAME_VERSION,
    ControlRecordKey,
    ControlRecordType,
    Record,
    RecordBatch,
    read_control_record_key,
    read_record_batch,
    write_control_record_key,
    write_record_batch,
    write_value_batch,
)
from kraft_jbod.wire.varint import write_unsigned_varint

log = logging.getLogger(__name__)

RecordAndVersion = tuple[Message, int]
ControlRecordAndVersion = tuple[ControlRecordType, Message, int]
_ChunkWriter = Callable[[bytearray, int], None]  # appends one batch at a base offset

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
        # Called with the seconds each append took (write + fsync); the metrics set it.
        self.append_observer: Callable[[float], None] | None = None

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
        scan = scan_segments(self.directory)
        self._segments = scan.segments
        self._batches = scan.batches
        self._batch_bases = [b.base_offset for b in scan.batches]
        self.start_offset = self._segments[0].base_offset if self._segments else 0
        problem = scan.problem
        if problem is not None:
            seg = self._segments[problem.segment]
            if not problem.torn:
                raise StorageError(
                    f"metadata log damaged at offset {problem.offset} ({seg.path.name}, byte {problem.position}): "
                    f"{problem.reason}; nothing was changed. To keep offsets below {problem.offset} and lose the "
                    f"rest, run: kraft-jbod log recover {self.directory} --truncate-at {problem.offset}"
                )
            log.warning(
                "metadata log %s: %s a torn tail at offset %d (byte %d of %s, %d bytes): %s",
                self.directory,
                "ignoring" if self.read_only else "truncating",
                problem.offset,
                problem.position,
                seg.path.name,
                seg.size - problem.position,
                problem.reason,
            )
            if not self.read_only:
                self._truncate(seg.path, problem.position)
            self.truncated_bytes = seg.size - problem.position
            seg.size = problem.position
        self.end_offset = scan.end_offset

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
        """Append ``records`` atomically, fsync, and return the base offset of the first batch.

        Up to ``MAX_RECORDS_PER_BATCH`` records go in one data batch; a larger set is split
        into consecutive batches of that many (the last one shorter), written in one go
        with a single fsync, so either all of them are in the log or none is. An empty list
        writes nothing and returns the current end offset.

        Raises:
            EncodeError: a record cannot be written at its version (nothing is written).
            StorageError: the write or fsync failed; the log is then closed for writing.
        """
        if not records:
            return self.end_offset
        values = encode_metadata_values(records)
        epoch = self._leader_epoch
        chunks: list[tuple[int, _ChunkWriter]] = []
        for start in range(0, len(values), MAX_RECORDS_PER_BATCH):
            chunk = values[start : start + MAX_RECORDS_PER_BATCH]

            def write(out: bytearray, base: int, chunk: list[bytes] = chunk) -> None:
                write_value_batch(
                    out, chunk, base_offset=base, base_timestamp=timestamp_ms, partition_leader_epoch=epoch
                )

            chunks.append((len(chunk), write))
        return self._append_batches(chunks, attributes=0)

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
        batch = RecordBatch.of(
            recs,
            base_offset=self.end_offset,
            base_timestamp=timestamp_ms,
            partition_leader_epoch=self._leader_epoch,
            attributes=CONTROL_MASK,
        )
        return self._append_batches([(len(recs), lambda out, base: write_record_batch(out, batch))], CONTROL_MASK)

    def append_raw(self, data: bytes) -> int:
        """Append one record batch exactly as another voter's log holds it (a quorum's
        committed batch: its base offset must be this log's end), fsync, return its base offset.

        Raises:
            StorageError: the batch is not whole, starts elsewhere than the log end, goes back
                in epoch, or the write failed.
        """
        if self._broken is not None:
            raise StorageError(f"metadata log {self.directory} is unusable: {self._broken}")
        if self._fd is None:
            raise StorageError(f"metadata log {self.directory} is closed or read-only")
        try:
            batch, end = read_record_batch(data, 0)
        except DecodeError as exc:
            raise StorageError(f"a replicated batch does not decode: {exc}") from None
        if end != len(data) or batch.base_offset != self.end_offset:
            raise StorageError(
                f"a replicated batch at offset {batch.base_offset} ({len(data)} bytes) does not follow "
                f"the log end {self.end_offset}"
            )
        if batch.partition_leader_epoch < self.last_epoch:
            raise StorageError(f"a replicated batch of epoch {batch.partition_leader_epoch} after {self.last_epoch}")
        seg = self._segments[-1]
        try:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            self._undo(seg)
            raise StorageError(f"metadata log write failed at offset {batch.base_offset}: {exc.strerror}") from None
        info = BatchInfo(
            batch.base_offset,
            batch.base_offset + batch.last_offset_delta,
            batch.partition_leader_epoch,
            len(self._segments) - 1,
            seg.size,
            len(data),
            batch.is_control,
        )
        self._batches.append(info)
        self._batch_bases.append(info.base_offset)
        seg.size += len(data)
        self.end_offset = info.last_offset + 1
        self._leader_epoch = max(self._leader_epoch, info.epoch)
        return info.base_offset

    def _append_batches(self, chunks: list[tuple[int, _ChunkWriter]], attributes: int) -> int:
        # ``chunks``: per batch, its record count and what writes it at a base offset.
        # Every batch is encoded before anything is written, so an EncodeError leaves the
        # disk untouched; then one write loop and one fsync make the set atomic.
        if self._broken is not None:
            raise StorageError(f"metadata log {self.directory} is unusable: {self._broken}")
        if self._fd is None:
            raise StorageError(f"metadata log {self.directory} is closed or read-only")
        base = self.end_offset
        out = bytearray()
        spans: list[tuple[int, int, int, int]] = []  # (base offset, records, position in out, size)
        next_base = base
        for count, write in chunks:
            at = len(out)
            write(out, next_base)
            spans.append((next_base, count, at, len(out) - at))
            next_base += count
        started = time.perf_counter()
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
        for batch_base, count, at, size in spans:
            info = BatchInfo(
                batch_base,
                batch_base + count - 1,
                self._leader_epoch,
                len(self._segments) - 1,
                seg.size + at,
                size,
                bool(attributes & CONTROL_MASK),
            )
            self._batches.append(info)
            self._batch_bases.append(batch_base)
        seg.size += len(out)
        if self.append_observer is not None:
            self.append_observer(time.perf_counter() - started)
        self.end_offset = next_base
        return base

    def roll(self) -> bool:
        """Start a new active segment at the end offset (unless the active one is empty);
        True when one was started.

        The server rolls right after a snapshot, so every record the snapshot holds sits in
        segments :meth:`delete_segments_below` may delete, and a restart from that snapshot
        reads only what came after it.

        Raises:
            StorageError: the log is read-only, closed, or the new segment cannot be created.
        """
        if self.read_only or self._fd is None:
            raise StorageError("cannot roll a read-only or closed metadata log")
        if self._segments and self._segments[-1].size == 0:
            return False
        try:
            self._new_segment()
        except OSError as exc:
            raise StorageError(f"cannot start a new metadata log segment: {exc.strerror}") from None
        return True

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

    def start_at(self, offset: int) -> None:
        """Start a log that holds no batch at ``offset``: Kafka's ``truncateFullyAndStartAt``,
        which a start-up does when the latest snapshot is past the log's end. Afterwards the
        only segment is the empty one named ``offset``, and start and end offsets are ``offset``.

        The old (empty) segments are removed before the new one is created, so a crash in
        between leaves no segment at all, which the next start treats the same way.

        Raises:
            StorageError: the log holds a batch, is read-only or closed, or a file cannot be
                removed or created.
        """
        if self._batches or any(seg.size for seg in self._segments):
            raise StorageError(f"metadata log {self.directory} holds data: it cannot start at offset {offset}")
        if self.read_only or self._fd is None:
            raise StorageError("cannot restart a read-only or closed metadata log")
        if len(self._segments) == 1 and self._segments[0].base_offset == offset:
            return
        os.close(self._fd)
        self._fd = None
        try:
            for seg in self._segments:
                seg.path.unlink(missing_ok=True)
            _fsync_dir(self.directory)
            self._segments = []
            self.start_offset = self.end_offset = offset
            self._new_segment()
        except OSError as exc:
            self._broken = f"could not start the log at offset {offset}: {exc.strerror}"
            raise StorageError(f"metadata log {self.directory}: {self._broken}") from None

    def batch_max_timestamp(self, info: BatchInfo) -> int:
        """The MaxTimestamp field of a batch's header (what Kafka calls its append time).

        Raises:
            StorageError: the batch no longer reads back.
        """
        return batch_max_timestamp(self._segments[info.segment].path, info.position)

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

    def control_records(self, from_offset: int = 0) -> Iterator[tuple[int, int, Any]]:
        """(offset, control type, message) of every control record at or after ``from_offset``.

        Reads only the control batches (a few per start), never the data batches, so it adds
        nothing to a restart that replays millions of records.

        Raises:
            StorageError: a control batch no longer reads back or does not decode.
        """
        for info in self._batches:
            if not info.is_control or info.last_offset < from_offset:
                continue
            try:
                batch, _ = read_record_batch(self._batch_bytes(info), 0)
                for rec in batch.records:
                    offset = info.base_offset + rec.offset_delta
                    if offset >= from_offset:
                        ctype, msg = decode_control_record(rec)
                        yield offset, ctype, msg
            except DecodeError as exc:
                raise StorageError(f"control batch at offset {info.base_offset} does not decode: {exc}") from None

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


@dataclass(slots=True, frozen=True)
class Problem:
    """The first thing recovery cannot read: where it is, and whether it is a torn tail."""

    segment: int  # index into the scan's segments
    position: int  # byte in that segment where the unreadable batch starts
    offset: int  # the log offset that batch would hold
    reason: str
    torn: bool


@dataclass(slots=True)
class Scan:
    """What :func:`scan_segments` found: the readable prefix of the log and the first problem."""

    segments: list[_Segment]
    batches: list[BatchInfo]
    end_offset: int
    problem: Problem | None


# A valid batch needs at least a header; magic 2 sits at byte 16 of it.
_MAGIC_POS = 16
_CRC_POS = 17
_CRC_START = 21


def _whole_batch_with_bad_length(data: bytes, pos: int) -> bool:
    """True when the bytes from ``pos`` to the end are a complete batch whose CRC holds:
    then only its length field is wrong, which a torn write cannot produce."""
    if len(data) - pos < BATCH_HEADER_SIZE:
        return False
    (stored,) = struct.unpack_from(">I", data, pos + _CRC_POS)
    return bool(crc32c.crc32c(data[pos + _CRC_START :]) == stored)


def _valid_batch_after(data: bytes, pos: int, expected: int) -> int | None:
    """The position of a CRC-valid batch starting after ``pos`` with a plausible base offset."""
    start = pos + 1
    while True:
        m = data.find(b"\x02", start + _MAGIC_POS)
        if m < 0:
            return None
        p = m - _MAGIC_POS
        start = p + 1
        if len(data) - p < BATCH_HEADER_SIZE:
            return None
        base, length = _BE_qi.unpack_from(data, p)
        if base < expected or LOG_OVERHEAD + length < BATCH_HEADER_SIZE or p + LOG_OVERHEAD + length > len(data):
            continue
        try:
            read_record_batch(data, p)
        except DecodeError:
            continue
        return p


def scan_segments(directory: Path) -> Scan:
    """Read every segment of ``directory`` batch by batch (length, CRC, offsets, epochs).

    Stops at the first batch it cannot take. That is a *torn tail* (``problem.torn``) only
    when it is the last thing in the last segment and incomplete: fewer bytes than its
    length says, with nothing valid after it, or a zero-filled remainder. Anything else
    (a bad CRC, a bad length followed by more bytes, an offset or epoch out of order, any
    problem before the last segment's end) is damage. Changes nothing on disk.

    Raises:
        StorageError: the directory cannot be listed or a segment read, or a segment is missing.
    """
    try:
        names = sorted(p for p in directory.iterdir() if p.suffix == SEGMENT_SUFFIX and p.stem.isdigit())
    except OSError as exc:
        raise StorageError(f"cannot list metadata log directory {directory}: {exc.strerror}") from None
    segments = sorted((_Segment(int(p.stem), p, 0) for p in names), key=lambda s: s.base_offset)
    batches: list[BatchInfo] = []
    # The log start offset: 0, or where the oldest segment kept after a snapshot begins.
    expected = segments[0].base_offset if segments else 0
    last_epoch = -1
    for idx, seg in enumerate(segments):
        if seg.base_offset != expected:
            raise StorageError(
                f"segment {seg.path.name} starts at offset {seg.base_offset}, expected offset {expected}"
            )
        is_last = idx == len(segments) - 1
        try:
            data = seg.path.read_bytes()
        except OSError as exc:
            raise StorageError(f"cannot read {seg.path}: {exc.strerror}") from None
        seg.size = len(data)
        pos = 0
        while pos < len(data):
            reason, torn, read = _check_at(data, pos, expected, is_last)
            if read is not None:
                batch, end = read
                if batch.base_offset != expected:
                    reason = f"batch base offset {batch.base_offset} but expected {expected}"
                elif not batch.records or batch.last_offset_delta != len(batch.records) - 1:
                    reason = "batch offsets are not contiguous"
                elif batch.partition_leader_epoch < last_epoch:
                    reason = f"leader epoch {batch.partition_leader_epoch} after epoch {last_epoch}"
                else:
                    size = end - pos
                    batches.append(
                        BatchInfo(
                            expected, batch.last_offset, batch.partition_leader_epoch, idx, pos, size, batch.is_control
                        )
                    )
                    last_epoch = batch.partition_leader_epoch
                    expected = batch.last_offset + 1
                    pos = end
                    continue
            assert reason is not None
            return Scan(segments[: idx + 1], batches, expected, Problem(idx, pos, expected, reason, torn))
    return Scan(segments, batches, expected, None)


def _check_at(
    data: bytes, pos: int, expected: int, is_last: bool
) -> tuple[str | None, bool, tuple[RecordBatch, int] | None]:
    """(None, False, (batch, end)) when a whole batch that reads starts at ``pos``, else
    (reason, torn, None)."""
    remain = len(data) - pos
    if remain >= BATCH_HEADER_SIZE:
        _base, length = _BE_qi.unpack_from(data, pos)
        if BATCH_HEADER_SIZE <= LOG_OVERHEAD + length <= remain:
            try:
                return None, False, read_record_batch(data, pos)
            except DecodeError as exc:
                if any(data[pos:]):
                    return str(exc), False, None
    tail_ok = is_last  # only the last segment may end in a torn write
    if not any(data[pos:]):
        return f"{remain} zero bytes", tail_ok, None
    if remain < LOG_OVERHEAD:
        return f"{remain} bytes, less than a batch header", tail_ok, None
    base, length = _BE_qi.unpack_from(data, pos)
    size = LOG_OVERHEAD + length
    if size < BATCH_HEADER_SIZE:
        return f"invalid batch length {length}", False, None
    if size > remain:
        if base != expected:
            return f"batch base offset {base} but expected {expected}", False, None
        if remain > _MAGIC_POS and data[pos + _MAGIC_POS] != 2:
            return f"batch magic {data[pos + _MAGIC_POS]} is not 2", False, None
        if _whole_batch_with_bad_length(data, pos):
            return f"batch length {length} is wrong: a whole batch of {remain} bytes ends the file", False, None
        after = _valid_batch_after(data, pos, expected)
        if after is not None:
            return f"batch length {length} runs past a valid batch at byte {after}", False, None
        return f"batch of {size} bytes but only {remain} on disk", tail_ok, None
    return "unreadable batch", False, None  # not reached: every other case read above


@dataclass(slots=True, frozen=True)
class Truncation:
    """What :func:`truncate_at` did: bytes and segments cut, and where their copy is."""

    offset: int
    bytes_cut: int
    segments_removed: int
    backup: Path


def truncate_at(directory: Path, offset: int, *, now: str | None = None) -> Truncation:
    """Cut the log back to end at ``offset`` (a batch boundary at or before the first
    problem), keeping a copy of every byte cut under ``directory/recovery-<time>/``.

    For an operator who chooses to lose data after damage; the controller never does this
    on its own. The lock is held throughout; the backup is fsync'd before anything is cut.

    Raises:
        StorageError: the log is in use, ``offset`` is not a batch boundary of the readable
            prefix, there is nothing to cut, or a write fails (the message says what was done).
    """
    if not directory.is_dir():
        raise StorageError(f"metadata log directory {directory} does not exist")
    lock_fd = _take_lock(directory)
    try:
        scan = scan_segments(directory)
        bounds = {b.base_offset: (b.segment, b.position) for b in scan.batches}
        if scan.problem is not None:
            bounds[scan.end_offset] = (scan.problem.segment, scan.problem.position)
        elif scan.segments:
            bounds[scan.end_offset] = (len(scan.segments) - 1, scan.segments[-1].size)
        if offset not in bounds:
            where = "" if scan.problem is None else f"; the first problem is at offset {scan.problem.offset}"
            starts = sorted(bounds)
            below = [b for b in starts if b <= offset]
            hint = f" (the batch holding it starts at {below[-1]})" if below and offset < scan.end_offset else ""
            raise StorageError(
                f"--truncate-at {offset}: not a batch boundary of the readable log, which ends at offset "
                f"{scan.end_offset}{hint}{where}"
            )
        seg_idx, pos = bounds[offset]
        all_segments = sorted(
            (p for p in directory.iterdir() if p.suffix == SEGMENT_SUFFIX and p.stem.isdigit()),
            key=lambda p: int(p.stem),
        )
        cut_seg = scan.segments[seg_idx].path
        later = [p for p in all_segments if int(p.stem) > int(cut_seg.stem)]
        cut_size = cut_seg.stat().st_size - pos
        if cut_size == 0 and not later:
            raise StorageError(f"nothing to cut: the log already ends at offset {offset}")
        stamp = now or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        backup = directory / f"recovery-{stamp}-from-{offset}"
        try:
            backup.mkdir()
            with open(cut_seg, "rb") as f:
                f.seek(pos)
                tail = f.read()
            _write_synced(backup / f"{cut_seg.name}.from-byte-{pos}", tail)
            for p in later:
                _write_synced(backup / p.name, p.read_bytes())
            _fsync_dir(backup)
            _fsync_dir(directory)
        except OSError as exc:
            raise StorageError(f"cannot write the backup {backup}: {exc.strerror}; nothing was cut") from None
        try:
            fd = os.open(cut_seg, os.O_WRONLY)
            try:
                os.ftruncate(fd, pos)
                os.fsync(fd)
            finally:
                os.close(fd)
            for p in later:
                p.unlink()
            _fsync_dir(directory)
        except OSError as exc:
            raise StorageError(
                f"cutting the log at offset {offset} failed: {exc.strerror}; every byte is in {backup}"
            ) from None
        return Truncation(offset, sum(p.stat().st_size for p in backup.iterdir()), len(later), backup)
    finally:
        os.close(lock_fd)


# MaxTimestamp's place in a batch header: base offset 8, length 4, leader epoch 4, magic 1,
# CRC 4, attributes 2, last offset delta 4, base timestamp 8.
_MAX_TIMESTAMP_POS = 35
_BE_q = struct.Struct(">q")


def encode_data_batches(
    records: Sequence[RecordAndVersion], *, base_offset: int, epoch: int, timestamp_ms: int
) -> list[tuple[int, int, bytes]]:
    """``records`` as data batches of at most ``MAX_RECORDS_PER_BATCH``, the bytes
    :meth:`MetadataLog.append` would write from ``base_offset`` at ``epoch``: a list of
    (base offset, record count, batch bytes). Raises EncodeError for a record that cannot be written."""
    out: list[tuple[int, int, bytes]] = []
    base = base_offset
    values = encode_metadata_values(records)
    for start in range(0, len(values), MAX_RECORDS_PER_BATCH):
        chunk = values[start : start + MAX_RECORDS_PER_BATCH]
        data = bytearray()
        write_value_batch(data, chunk, base_offset=base, base_timestamp=timestamp_ms, partition_leader_epoch=epoch)
        out.append((base, len(chunk), bytes(data)))
        base += len(chunk)
    return out


# Per metadata record class, the bytes its framed value starts with (frame version and
# record type): what the compiled codec needs to frame a whole append in one call.
_FRAME_PREFIXES: dict[type, bytes] = {}


def encode_metadata_values(records: Sequence[RecordAndVersion]) -> list[bytes]:
    """Each record framed as ``codec.encode_metadata_record`` frames it (the value of a
    record in the log). The compiled codec does a whole list in one call, which matters
    when a failed directory makes 50,000 records; the Python path gives the same bytes and
    raises EncodeError for a record that cannot be written."""
    if not _FRAME_PREFIXES:
        for api_key in messages.METADATA_RECORDS:
            cls = messages.metadata_record_class(api_key)
            if cls is not None:
                prefix = bytearray([METADATA_FRAME_VERSION])
                write_unsigned_varint(prefix, api_key)
                _FRAME_PREFIXES[cls] = bytes(prefix)
    values = _accel.encode_metadata_values(records, _FRAME_PREFIXES) if isinstance(records, list) else None
    if values is None:
        values = [codec.encode_metadata_record(rec, ver) for rec, ver in records]
    return values


def batch_max_timestamp(path: Path, position: int) -> int:
    """The MaxTimestamp of the batch at ``position`` of segment ``path``.

    Raises:
        StorageError: the file cannot be read there.
    """
    try:
        with open(path, "rb") as f:
            f.seek(position + _MAX_TIMESTAMP_POS)
            raw = f.read(_BE_q.size)
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror}") from None
    if len(raw) != _BE_q.size:
        raise StorageError(f"{path.name} shrank under the log at byte {position}")
    return int(_BE_q.unpack(raw)[0])


def batch_holding(batches: Sequence[BatchInfo], offset: int) -> BatchInfo | None:
    """The batch of ``batches`` (in offset order) that holds ``offset``, None when none does."""
    i = bisect.bisect_right(batches, offset, key=lambda b: b.base_offset) - 1
    if i < 0 or batches[i].last_offset < offset:
        return None
    return batches[i]


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        written = 0
        while written < len(data):
            written += os.write(fd, view[written:])
        os.fsync(fd)
    finally:
        os.close(fd)


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


@contextmanager
def hold_lock(directory: Path) -> Iterator[None]:
    """Hold the log's ``.lock`` (a controller holds it while it runs) for an offline change.

    Raises:
        StorageError: another process holds it.
    """
    fd = _take_lock(directory)
    try:
        yield
    finally:
        os.close(fd)


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
