"""A durable :class:`~.replica_log.ReplicaLog`: one segment file of Kafka record batches.

The file is ``<directory>/__cluster_metadata-0/00000000000000000000.log``, the name and
layout Kafka's log tools read (one batch per entry, see :mod:`.wire`). Every append is
written and fsync'd before :meth:`FileReplicaLog.append` returns (and encoded once, so
every voter stores and serves the same bytes), so an entry a leader
counted toward the high watermark survives a crash of this voter. A torn batch at the end
(a crash mid-write) is cut off on open; a truncation cuts the file at the first dropped
batch.
"""

from __future__ import annotations

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
        self.path = directory / PARTITION_DIR / SEGMENT
        self.path.parent.mkdir(parents=True, exist_ok=True)
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
