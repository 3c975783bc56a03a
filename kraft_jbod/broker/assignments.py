"""The AssignReplicasToDirs queue: batching, one request in flight, retries (sans-I/O).

Strategy, as Kafka's AssignmentsManager (3.9/HEAD): assignments wait in ``ready`` keyed
by partition, so a newer one replaces an older one. One request is in flight at a time
with at most :data:`MAX_PER_REQUEST` partitions, grouped by directory then topic. A send
waits :data:`DISPATCH_DELAY_MS` after the oldest ready entry (batching), none when more
than a request's worth is ready, and the exponential backoff after global failures.

Invariants: a partition is in ``ready`` or ``in_flight`` (or both, when a newer
assignment came while the older one was sent; the newer wins on requeue). ``queued``
(the QueuedReplicaToDirAssignments metric) counts distinct partitions in either. A
per-partition error or a partition missing from the answer puts it back; a global error
puts back everything sent, unless a newer assignment replaced it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Final

from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.assign_replicas_to_dirs_response import AssignReplicasToDirsResponse

MAX_PER_REQUEST: Final = 2250
DISPATCH_DELAY_MS: Final = 100
BACKOFF_MAX_MS: Final = 10_000
TopicPartition = tuple[uuid.UUID, int]


@dataclass(slots=True, frozen=True)
class Assignment:
    topic_id: uuid.UUID
    partition: int
    directory: uuid.UUID
    queued_ms: int
    reason: str = "placement"

    @property
    def key(self) -> TopicPartition:
        return (self.topic_id, self.partition)


class AssignmentQueue:
    def __init__(self) -> None:
        self.ready: dict[TopicPartition, Assignment] = {}
        self.in_flight: dict[TopicPartition, Assignment] = {}
        self.failures = 0
        self.requests_sent = 0
        self._last_failure_ms = 0

    @property
    def queued(self) -> int:
        return len(self.ready.keys() | self.in_flight.keys())

    def add(self, a: Assignment) -> None:
        self.ready[a.key] = a

    def cancel(self, key: TopicPartition) -> None:
        """Drop a queued assignment (an in-flight one is answered but no longer retried)."""
        self.ready.pop(key, None)

    def pending(self, key: TopicPartition) -> Assignment | None:
        return self.ready.get(key) or self.in_flight.get(key)

    def send_at(self) -> int | None:
        """Monotonic ms at which the next request is due; None with nothing to send."""
        if self.in_flight or not self.ready:
            return None
        if self.failures:
            backoff: int = min(BACKOFF_MAX_MS, 100 << min(self.failures, 10))
            return self._last_failure_ms + backoff
        if len(self.ready) > MAX_PER_REQUEST:
            return 0
        return min(a.queued_ms for a in self.ready.values()) + DISPATCH_DELAY_MS

    def build(self, broker_id: int, broker_epoch: int) -> AssignReplicasToDirsRequest | None:
        """Move up to MAX_PER_REQUEST ready entries in flight and build their request."""
        if self.in_flight or not self.ready:
            return None
        chosen = list(self.ready.values())[:MAX_PER_REQUEST]
        by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for a in chosen:
            del self.ready[a.key]
            self.in_flight[a.key] = a
            by_dir.setdefault(a.directory, {}).setdefault(a.topic_id, []).append(a.partition)
        self.requests_sent += 1
        return AssignReplicasToDirsRequest(
            broker_id=broker_id,
            broker_epoch=broker_epoch,
            directories=[
                DirectoryData(
                    id=d,
                    topics=[
                        TopicData(topic_id=t, partitions=[PartitionData(p) for p in sorted(ps)]) for t, ps in ts.items()
                    ],
                )
                for d, ts in by_dir.items()
            ],
        )

    def _requeue(self, a: Assignment) -> None:
        if a.key not in self.ready:
            self.ready[a.key] = a

    def on_failure(self, now_ms: int) -> None:
        """A timeout, disconnect or top-level error: everything sent goes back."""
        for a in self.in_flight.values():
            self._requeue(a)
        self.in_flight.clear()
        self.failures += 1
        self._last_failure_ms = now_ms

    def on_response(self, resp: AssignReplicasToDirsResponse, now_ms: int) -> list[Assignment]:
        """Per-partition outcome; returns the assignments the controller accepted."""
        if resp.error_code != 0:
            self.on_failure(now_ms)
            return []
        done: list[Assignment] = []
        for d in resp.directories:
            for t in d.topics:
                for p in t.partitions:
                    a = self.in_flight.get((t.topic_id, p.partition_index))
                    if a is None or a.directory != d.id:
                        continue
                    del self.in_flight[a.key]
                    if p.error_code == 0:
                        done.append(a)
                    else:
                        self._requeue(a)
        for a in self.in_flight.values():  # missing from the answer
            self._requeue(a)
        self.in_flight.clear()
        self.failures = 0
        return done
