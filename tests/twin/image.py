"""The metadata image of a controller's log, read while the controller runs, made comparable.

Strategy: :class:`LogTail` reads the segment files of ``__cluster_metadata-0`` from where it
stopped last time, batch by batch, and stops at the first incomplete batch (a write in
progress: the next read picks it up). It takes no lock: Kafka's controller holds none we could
share, and the mock's lock is for writers. :class:`Image` folds the records into plain dicts
with its own small replay, written from the record schemas, not from either controller's code,
so that a mistake in the mock's replay cannot hide a mistake in its records.

Rule: the fold keeps only what a broker's image holds (registrations, partitions, topics,
configs, features). The normalisations are applied in :meth:`Image.normalised`, in one place,
each with its reason (docs/twin.md lists them):

* topic ids are replaced by topic names (both controllers draw them at random or derive them);
* broker epochs are log offsets, and the two logs differ in what precedes a registration
  (Kafka's bootstrap transaction markers, RegisterControllerRecord, NoOpRecords every 500 ms):
  an epoch becomes the ordinal the harness gave it when the registration was answered;
* records that do not reach the image (NoOpRecord, Begin/EndTransactionRecord,
  RegisterControllerRecord, ProducerIdsRecord) are dropped; record order only matters through
  the image it builds, so the order inside a batch is free.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_jbod import codec
from kraft_jbod.errors import DecodeError
from kraft_jbod.wire.records import read_record_batch

ZERO = uuid.UUID(int=0)
# Records that carry no broker-visible state: Kafka writes them on its own clock or at
# activation, the mock writes none or others.
IGNORED = frozenset(
    {
        "NoOpRecord",
        "BeginTransactionRecord",
        "EndTransactionRecord",
        "RegisterControllerRecord",
        "ProducerIdsRecord",
    }
)


class LogTail:
    """Incremental reader of one metadata log directory (segment files named by base offset)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._segment: Path | None = None
        self._pos = 0

    def _segments(self) -> list[Path]:
        if not self.directory.is_dir():
            return []
        return sorted(p for p in self.directory.iterdir() if p.suffix == ".log" and p.stem.isdigit())

    def read(self) -> Iterator[tuple[int, Any, int]]:
        """(offset, record, version) of every data record written since the last call."""
        segments = self._segments()
        if self._segment is not None and self._segment in segments:
            segments = segments[segments.index(self._segment) :]
        else:
            self._pos = 0
        for seg in segments:
            if seg != self._segment:
                self._segment, self._pos = seg, 0
            data = seg.read_bytes()
            while self._pos < len(data):
                try:
                    batch, end = read_record_batch(data, self._pos)
                except DecodeError:
                    break  # a batch being written (or Kafka's preallocated zeros): read it next time
                self._pos = end
                if batch.is_control:
                    continue
                for rec in batch.records:
                    assert rec.value is not None
                    record, version = codec.decode_metadata_record(rec.value)
                    yield batch.base_offset + rec.offset_delta, record, version


def _merge(old: list[Any] | None, new: list[Any] | None) -> list[Any] | None:
    return old if new is None else list(new)


@dataclass
class Image:
    """A broker's view of the cluster, folded from records (raw ids and epochs)."""

    brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    topics: dict[uuid.UUID, str] = field(default_factory=dict)
    partitions: dict[tuple[uuid.UUID, int], dict[str, Any]] = field(default_factory=dict)
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    features: dict[str, int] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)

    def apply(self, record: Any, version: int) -> None:
        name = type(record).__name__
        if name in IGNORED:
            return
        handler: Callable[[Any], None] | None = getattr(self, "_" + name, None)
        if handler is None:
            self.unknown.append(name)
            return
        handler(record)

    # -- brokers
    def _RegisterBrokerRecord(self, r: Any) -> None:
        self.brokers[r.broker_id] = {
            "epoch": r.broker_epoch,
            "incarnation": r.incarnation_id,
            "fenced": bool(r.fenced),
            "controlled_shutdown": bool(r.in_controlled_shutdown),
            "rack": r.rack,
            "log_dirs": sorted(r.log_dirs),
            "cordoned": sorted(r.cordoned_log_dirs or []),
            "listeners": sorted((e.name, e.host, e.port, e.security_protocol) for e in r.end_points),
            "features": sorted((f.name, f.min_supported_version, f.max_supported_version) for f in r.features),
        }

    def _BrokerRegistrationChangeRecord(self, r: Any) -> None:
        b = self.brokers[r.broker_id]
        if r.fenced == 1:
            b["fenced"] = True
        elif r.fenced == -1:
            b["fenced"] = False
        if r.in_controlled_shutdown == 1:
            b["controlled_shutdown"] = True
        if r.log_dirs:
            b["log_dirs"] = sorted(r.log_dirs)
        if r.cordoned_log_dirs is not None:
            b["cordoned"] = sorted(r.cordoned_log_dirs)

    def _FenceBrokerRecord(self, r: Any) -> None:
        self.brokers[r.id]["fenced"] = True

    def _UnfenceBrokerRecord(self, r: Any) -> None:
        self.brokers[r.id]["fenced"] = False

    def _UnregisterBrokerRecord(self, r: Any) -> None:
        self.brokers.pop(r.broker_id, None)

    # -- topics and partitions
    def _TopicRecord(self, r: Any) -> None:
        self.topics[r.topic_id] = r.name

    def _RemoveTopicRecord(self, r: Any) -> None:
        name = self.topics.pop(r.topic_id)
        for key in [k for k in self.partitions if k[0] == r.topic_id]:
            del self.partitions[key]
        self.configs.pop((2, name), None)

    def _PartitionRecord(self, r: Any) -> None:
        self.partitions[(r.topic_id, r.partition_id)] = {
            "replicas": list(r.replicas),
            "isr": list(r.isr),
            "removing": list(r.removing_replicas),
            "adding": list(r.adding_replicas),
            "leader": r.leader,
            "recovery": r.leader_recovery_state,
            "leader_epoch": r.leader_epoch,
            "partition_epoch": r.partition_epoch,
            "directories": list(r.directories) if r.directories else [ZERO] * len(r.replicas),
            "elr": list(r.eligible_leader_replicas or []),
            "last_known_elr": list(r.last_known_elr or []),
        }

    def _PartitionChangeRecord(self, r: Any) -> None:
        p = self.partitions[(r.topic_id, r.partition_id)]
        p["isr"] = _merge(p["isr"], r.isr)
        if r.replicas is not None:
            p["replicas"] = list(r.replicas)
        if r.directories is not None:
            p["directories"] = list(r.directories)
        if all(d == ZERO for d in p["directories"]):
            # no directories known (MIGRATING): one per replica, as a broker's image holds them
            p["directories"] = [ZERO] * len(p["replicas"])
        p["removing"] = _merge(p["removing"], r.removing_replicas)
        p["adding"] = _merge(p["adding"], r.adding_replicas)
        if r.leader != -2:
            p["leader"] = r.leader
            p["leader_epoch"] += 1
        if r.leader_recovery_state != -1:
            p["recovery"] = r.leader_recovery_state
        p["elr"] = _merge(p["elr"], r.eligible_leader_replicas)
        p["last_known_elr"] = _merge(p["last_known_elr"], r.last_known_elr)
        p["partition_epoch"] += 1

    def _ClearElrRecord(self, r: Any) -> None:
        for (tid, _), p in self.partitions.items():
            if not r.topic_name or self.topics.get(tid) == r.topic_name:
                p["elr"], p["last_known_elr"] = [], []

    # -- configs and features
    def _ConfigRecord(self, r: Any) -> None:
        entry = self.configs.setdefault((r.resource_type, r.resource_name), {})
        if r.value is None:
            entry.pop(r.name, None)
            if not entry:
                del self.configs[(r.resource_type, r.resource_name)]
        else:
            entry[r.name] = r.value

    def _FeatureLevelRecord(self, r: Any) -> None:
        if r.feature_level == 0:
            self.features.pop(r.name, None)
        else:
            self.features[r.name] = r.feature_level

    # -- comparison
    def normalised(self, epoch_ordinal: Callable[[int, int], object]) -> dict[str, Any]:
        """The image with topic ids replaced by names and broker epochs by ordinals
        (``epoch_ordinal(broker_id, epoch)``)."""
        brokers = {bid: {**b, "epoch": epoch_ordinal(bid, b["epoch"])} for bid, b in sorted(self.brokers.items())}
        parts = {
            f"{self.topics[tid]}-{pid}": p
            for (tid, pid), p in sorted(self.partitions.items(), key=lambda kv: (self.topics[kv[0][0]], kv[0][1]))
        }
        return {
            "brokers": brokers,
            "topics": sorted(self.topics.values()),
            "partitions": parts,
            "configs": {f"{t}:{n}": dict(sorted(c.items())) for (t, n), c in sorted(self.configs.items())},
            "features": dict(sorted(self.features.items())),
            "unknown_records": sorted(set(self.unknown)),
        }


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Human-readable differences between two normalised values (first 20)."""
    out: list[str] = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a:
                out.append(f"{path}/{k}: only kafka has {b[k]!r}")
            elif k not in b:
                out.append(f"{path}/{k}: only mock has {a[k]!r}")
            else:
                out += diff(a[k], b[k], f"{path}/{k}")
    elif a != b:
        out.append(f"{path}: mock {a!r} != kafka {b!r}")
    return out[:20]
