"""What the raft core needs of a replicated log, and an in-memory log that provides it.

The core sees a log as a sequence of :class:`~.messages.Entry` values (record batches) at
contiguous offsets from 0 (snapshots and log start offsets are the shell's business). It reads the epoch of
each entry to answer "where does epoch E end?" (Kafka's leader-epoch cache) and truncates
when a leader says the tail diverges.

Invariants of :class:`MemoryLog`: each entry starts where the previous one ends, from 0;
epochs never decrease along the log; an append must start at the log end; a truncation
never leaves part of a batch.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Protocol

from kraft_jbod.controller.raft.messages import Entry


class ReplicaLog(Protocol):
    """The log one voter holds (durable in a real shell, a list in tests)."""

    @property
    def end_offset(self) -> int: ...

    @property
    def last_epoch(self) -> int: ...

    def append(self, entries: Sequence[Entry]) -> None: ...

    def truncate_to(self, offset: int) -> None: ...

    def read(self, offset: int, max_entries: int) -> list[Entry]: ...

    def epoch_end(self, epoch: int) -> tuple[int, int]: ...


class LogError(ValueError):
    """An append that would break the log's invariants (a gap, or an epoch going back)."""


class MemoryLog:
    """A :class:`ReplicaLog` in a Python list, with the epoch cache beside it."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._bases: list[int] = []  # each entry's first offset, for bisect
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset), ascending
        self.truncations = 0  # bumped by every truncate_to that dropped entries

    @property
    def end_offset(self) -> int:
        return self.entries[-1].next_offset if self.entries else 0

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def append(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            if e.offset != self.end_offset or e.count < 1:
                raise LogError(f"append at offset {e.offset} ({e.count} records), log end is {self.end_offset}")
            if e.epoch < self.last_epoch:
                raise LogError(f"epoch {e.epoch} after epoch {self.last_epoch}")
            if not self._epoch_starts or self._epoch_starts[-1][0] != e.epoch:
                self._epoch_starts.append((e.epoch, e.offset))
            self.entries.append(e)
            self._bases.append(e.offset)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry holding ``offset`` or above (a batch across it goes whole)."""
        keep = bisect.bisect_left(self._bases, max(0, offset))
        if keep > 0 and self.entries[keep - 1].next_offset > offset:
            keep -= 1
        if keep < len(self.entries):
            self.truncations += 1
        del self.entries[keep:]
        del self._bases[keep:]
        end = self.end_offset
        while self._epoch_starts and self._epoch_starts[-1][1] >= end:
            self._epoch_starts.pop()

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        """Entries from the one holding ``offset``."""
        if offset < 0 or offset >= self.end_offset:
            return []
        first = bisect.bisect_right(self._bases, offset) - 1
        return self.entries[first : first + max_entries]

    def epoch_end(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= ``epoch`` in the log, the offset where it ends); (0, 0) if none.

        The end of an epoch is the first offset of the next epoch, or the log end for the last.
        """
        epochs = [e for e, _ in self._epoch_starts]
        i = bisect.bisect_right(epochs, epoch)
        if i == 0:
            return 0, 0
        found = self._epoch_starts[i - 1][0]
        end = self._epoch_starts[i][1] if i < len(self._epoch_starts) else self.end_offset
        return found, end
