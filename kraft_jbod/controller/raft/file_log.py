"""A durable :class:`~.replica_log.ReplicaLog`: one segment file of Kafka record batches.

The file is ``<directory>/__cluster_metadata-0/<start offset:020d>.log`` (``000...0.log``
until a snapshot replaces a prefix), the name and layout Kafka's log tools read (one batch
per entry, see :mod:`.wire`). Every append is
written and fsync'd before :meth:`FileReplicaLog.append` returns (and encoded once, so
every voter stores and serves the same bytes), so an entry a leader
counted toward the high watermark survives a crash of this voter. A torn batch at the end
(a crash mid-write) is cut off on open; a truncation cuts the file at the first dropped
batch.

A new log start (:meth:`FileReplicaLog.delete_before` after a snapshot,
:meth:`FileReplicaLog.reset_to` after loading a leader's snapshot) writes the kept batches
to a temporary file, fsyncs it, renames it to the new start's segment name and only then
removes the old segment; on open the segment with the highest start wins and leftovers go,
so a crash in between loses nothing.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kraft_jbod.controller.raft import wire
from kraft_jbod.controller.raft.messages import Entry
from kraft_jbod.controller.raft.replica_log import LogError, MemoryLog
from kraft_jbod.errors import DecodeError

PARTITION_DIR: Final = "__cluster_metadata-0"
SEGMENT: Final = "00000000000000000000.log"


class FileReplicaLog(MemoryLog):
    """The entries in memory (for reads) and on disk (for restarts), kept equal."""

    def __init__(self, directory: Path, *, fsync: bool = True) -> None:
        super().__init__()
        folder = directory / PARTITION_DIR
        folder.mkdir(parents=True, exist_ok=True)
        for leftover in folder.glob("*.log.tmp"):
            leftover.unlink()
        starts = sorted(int(p.name[:-4]) for p in folder.glob("*.log") if p.name[:-4].isdigit())
        start = starts[-1] if starts else 0
        for older in starts[:-1]:
            (folder / _segment_name(older)).unlink()  # superseded by a completed rewrite
        self.path = folder / _segment_name(start)
        self._start = start
        self.fsync = fsync
        self._positions: list[int] = []  # file position of each entry's batch
        data = self.path.read_bytes() if self.path.exists() else b""
        good = 0
        try:
            for e in wire.decode_entries(data):
                self._positions.append(good)
                super().append([e])
                assert e.raw is not None
                good += len(e.raw)
        except (DecodeError, LogError):
            pass  # a torn or foreign tail: keep what precedes it
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, good)
        self._size = good

    def append(self, entries: Sequence[Entry]) -> None:
        data = bytearray()
        positions = []
        stored = []
        now = int(time.time() * 1000)
        for e in entries:
            positions.append(self._size + len(data))
            raw = e.raw if e.raw is not None else wire.encode_entries([e], timestamp_ms=now)
            # Encoded once: the bytes written here are the bytes served to every peer.
            stored.append(e if e.raw is not None else dataclasses.replace(e, raw=raw))
            data += raw
        super().append(stored)  # checks the invariants before anything is written
        os.pwrite(self._fd, bytes(data), self._size)
        if self.fsync:
            os.fsync(self._fd)
        self._size += len(data)
        self._positions.extend(positions)

    def truncate_to(self, offset: int) -> None:
        before = len(self.entries)
        super().truncate_to(offset)
        keep = len(self.entries)
        if keep == before:
            return
        cut = self._positions[keep]
        os.ftruncate(self._fd, cut)
        if self.fsync:
            os.fsync(self._fd)
        self._size = cut
        del self._positions[keep:]

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def set_start_epoch(self, epoch: int) -> None:
        """The epoch below the start offset of a log opened there (its snapshot's, which
        the shell knows from the snapshot files)."""
        if self._start > 0:
            self._start_epoch = epoch

    def delete_before(self, offset: int) -> int:
        dropped = super().delete_before(offset)
        if dropped:
            self._rewrite()
        return dropped

    def reset_to(self, offset: int, epoch: int) -> None:
        super().reset_to(offset, epoch)
        self._rewrite()

    def _rewrite(self) -> None:
        """The kept entries into the segment named by the log start (see the module docstring)."""
        folder = self.path.parent
        target = folder / _segment_name(self._start)
        tmp = folder / (target.name + ".tmp")
        data = b"".join(e.raw or b"" for e in self.entries)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        os.replace(tmp, target)
        if self.fsync:
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        old, self.path = self.path, target
        os.close(self._fd)
        self._fd = fd
        if old != target:
            old.unlink(missing_ok=True)
        self._size = len(data)
        self._positions = []
        pos = 0
        for e in self.entries:
            self._positions.append(pos)
            pos += len(e.raw or b"")

    @property
    def size_bytes(self) -> int:
        return self._size

    def bytes_from(self, offset: int) -> int:
        """The bytes of the batches from the one holding ``offset`` to the end."""
        if offset < self._start:
            return self._size
        if offset >= self.end_offset:
            return 0
        i = bisect.bisect_right(self._bases, offset) - 1
        return 0 if i < 0 or i >= len(self._positions) else self._size - self._positions[i]


def _segment_name(start: int) -> str:
    return f"{start:020d}.log"
