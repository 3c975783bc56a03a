"""What the raft core needs of a replicated log, and an in-memory log that provides it.

The core sees a log as a sequence of :class:`~.messages.Entry` values (record batches) at
contiguous offsets from the log start offset (0 until a snapshot replaces a prefix). It
reads the epoch of each entry to answer "where does epoch E end?" (Kafka's leader-epoch
cache) and truncates when a leader says the tail diverges.

Snapshots: ``snapshots`` lists the ids (end offset, epoch) of the snapshots this voter
holds, oldest first (the shell keeps it in step with its snapshot files). A log whose
prefix a snapshot replaced starts at that snapshot's end offset (:meth:`MemoryLog.delete_before`,
Kafka's log start offset), and a follower that loaded a leader's snapshot starts its log
afresh there (:meth:`MemoryLog.reset_to`); the snapshot's epoch then stands for the epoch
of everything below the start (``last_epoch`` of an empty log, the epoch lookups).

Invariants of :class:`MemoryLog`: each entry starts where the previous one ends, from the
start offset; epochs never decrease along the log; an append must start at the log end; a
truncation never leaves part of a batch, and never goes below the start offset.
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

    @property
    def start_offset(self) -> int: ...

    @property
    def snapshots(self) -> list[tuple[int, int]]: ...

    def reset_to(self, offset: int, epoch: int) -> None: ...

    def add_snapshot(self, end_offset: int, epoch: int) -> None: ...


class LogError(ValueError):
    """An append that would break the log's invariants (a gap, or an epoch going back)."""


class MemoryLog:
    """A :class:`ReplicaLog` in a Python list, with the epoch cache beside it."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self._bases: list[int] = []  # each entry's first offset, for bisect
        self._epoch_starts: list[tuple[int, int]] = []  # (epoch, first offset), ascending
        self.truncations = 0  # bumped by every truncate_to that dropped entries
        self._start = 0  # the log start offset
        self._start_epoch = 0  # the epoch of the last offset below the start (a snapshot's)
        self._snapshots: list[tuple[int, int]] = []

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def start_epoch(self) -> int:
        return self._start_epoch

    @property
    def snapshots(self) -> list[tuple[int, int]]:
        """The snapshot ids (end offset, epoch) this voter holds, oldest first."""
        return self._snapshots

    def add_snapshot(self, end_offset: int, epoch: int) -> None:
        if (end_offset, epoch) not in self._snapshots:
            self._snapshots.append((end_offset, epoch))
            self._snapshots.sort()

    def forget_snapshots_below(self, end_offset: int) -> list[tuple[int, int]]:
        """Drop the ids of snapshots ending below ``end_offset``; the ids dropped."""
        gone = [s for s in self._snapshots if s[0] < end_offset]
        self._snapshots = [s for s in self._snapshots if s[0] >= end_offset]
        return gone

    @property
    def end_offset(self) -> int:
        return self.entries[-1].next_offset if self.entries else self._start

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else self._start_epoch

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
        keep = bisect.bisect_left(self._bases, max(self._start, offset))
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
        """Entries from the one holding ``offset`` (none below the start offset)."""
        if offset < self._start or offset >= self.end_offset:
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
            if self._start > 0 and epoch >= self._start_epoch:
                # Below the first epoch the log still holds: the snapshot's epoch, which
                # ends where the next epoch starts (or at the log end).
                return self._start_epoch, self._epoch_starts[0][1] if self._epoch_starts else self.end_offset
            return 0, 0
        found = self._epoch_starts[i - 1][0]
        end = self._epoch_starts[i][1] if i < len(self._epoch_starts) else self.end_offset
        return found, end

    def delete_before(self, offset: int) -> int:
        """Drop the entries below ``offset`` (a snapshot's end offset, at a batch boundary):
        the log start offset moves there (Kafka's, after a snapshot). How many went.

        Raises:
            LogError: ``offset`` is beyond the log end, or inside a batch.
        """
        if offset <= self._start:
            return 0
        if offset > self.end_offset:
            raise LogError(f"cannot start the log at {offset}: it ends at {self.end_offset}")
        keep = bisect.bisect_left(self._bases, offset)
        if keep < len(self.entries) and self._bases[keep] != offset:
            raise LogError(f"offset {offset} is inside the batch at {self.entries[keep - 1].offset}")
        self._start_epoch = self.entries[keep - 1].epoch
        self._start = offset
        del self.entries[:keep]
        del self._bases[:keep]
        self._epoch_starts = [(e, o) for e, o in self._epoch_starts if o >= offset]
        return keep

    def reset_to(self, offset: int, epoch: int) -> None:
        """Drop every entry and start the log afresh at ``offset``, everything below it being
        of ``epoch`` (a follower that loaded a leader's snapshot: Kafka's truncate-fully)."""
        if self.entries:
            self.truncations += 1
        self.entries.clear()
        self._bases.clear()
        self._epoch_starts.clear()
        self._start, self._start_epoch = offset, epoch
