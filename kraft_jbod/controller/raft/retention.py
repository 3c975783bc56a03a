"""Kafka's metadata log retention: when the log prefix below a snapshot may go.

A voter keeps every snapshot it took or loaded and the log from its start. Kafka's rule,
checked after snapshots (:func:`retention_cut`):

* Nothing goes while fewer than two snapshots exist: the newest always stays, and the log
  start never passes it.
* Size: while the log (from its start) plus every snapshot kept exceeds
  ``metadata.max.retention.bytes``, the oldest snapshot goes and the log starts at the next
  one's end offset (the bytes of the log below it go with it). -1: no size limit.
* Age: then, while the oldest snapshot's last contained record is older than
  ``metadata.max.retention.ms``, the same. -1: no age limit.

Followers' progress plays no part: a voter whose fetch falls below the new log start is
answered with the newest snapshot's id and loads it (FetchSnapshot), as with Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SnapshotFacts:
    snapshot_id: tuple[int, int]  # (end offset, epoch)
    size_bytes: int
    last_contained_ms: int  # the wall-clock time of its last record (its header's)


def retention_cut(
    snapshots: Sequence[SnapshotFacts],
    log_bytes_from: Callable[[int], int],
    *,
    retention_bytes: int,
    retention_ms: int,
    now_ms: int,
    start_offset: int,
) -> tuple[int, int] | None:
    """The snapshot id the log should start at (its end offset the new log start), or None.

    ``snapshots`` oldest first; ``log_bytes_from(offset)``: the log's bytes from ``offset``
    to its end."""
    ordered = sorted(snapshots, key=lambda f: f.snapshot_id)
    cut: tuple[int, int] | None = None
    i = 0
    total = sum(f.size_bytes for f in ordered)
    start = start_offset
    if retention_bytes >= 0:
        while i < len(ordered) - 1 and log_bytes_from(start) + total > retention_bytes:
            total -= ordered[i].size_bytes
            i += 1
            cut = ordered[i].snapshot_id
            start = max(start, cut[0])
    if retention_ms >= 0:
        while i < len(ordered) - 1 and now_ms - ordered[i].last_contained_ms > retention_ms:
            i += 1
            cut = ordered[i].snapshot_id
    if cut is None or cut[0] <= start_offset:
        return None
    return cut
