"""Two controllers driven as one: the mock and Kafka's own KRaft controller, side by side.

Strategy: :class:`Pair` starts both with :class:`~kraft_jbod.realkafka.cluster.RealCluster`
(``brokers=0``: the controller alone) at the same metadata.version, sends every request to
each over the wire (:func:`kraft_jbod.realkafka.probe.call`, our codec, a fresh connection),
and keeps one :class:`Side` per controller holding what is legitimately different between
them: the topic ids each one chose and the broker epochs (log offsets) each one handed out.
Requests are built per side by a callable, so "the current epoch of broker 7" or "the id of
topic a" means each controller's own value.

Rule: the harness never reads the mock's state; everything compared comes over the wire or
from the metadata log on disk (:mod:`tests.twin.image`).

A pair is reused across sequences (Kafka's controller takes seconds to start); each sequence
uses fresh broker ids and topic names and tears its brokers and topics down at the end. After
a sequence that disagreed the pair is restarted, since the two states may have drifted apart.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kraft_jbod.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kraft_jbod.realkafka import probe
from kraft_jbod.realkafka.cluster import ClusterSpec, RealCluster
from kraft_jbod.realkafka.distribution import KafkaDistribution
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.primitives import uuid_to_base64url
from tests.twin.image import Image, LogTail, diff

# Long enough that no session expires during a random run; the scripted expiry test uses
# its own pair with a short timeout.
LONG_SESSION_MS = 3_600_000
SIDES = ("mock", "kafka")
# uuids the harness put into requests (filled by the state machine)
SENT_IDS: set[uuid.UUID] = set()
CLUSTER_UUID = uuid.UUID("7a1e0c5b-3d2f-4e6a-9b8c-0d1e2f3a4b5c")
SAFE_DOWNGRADE = 2


def parse_level(label: str) -> tuple[str, dict[str, int]]:
    """A twin level: a metadata.version, optionally with feature levels after slashes
    (``4.3-IV0/eligible.leader.replicas.version=0``: ELR off where it is on by default)."""
    version, *extras = label.split("/")
    features: dict[str, int] = {}
    for extra in extras:
        name, sep, level = extra.partition("=")
        if not sep or not level.isdigit():
            raise ValueError(f"twin level {label!r}: {extra!r} is not FEATURE=LEVEL")
        features[name] = int(level)
    return version, features


class Side:
    """One controller of the pair and what the harness knows of its own ids and epochs."""

    def __init__(self, kind: str, cluster: RealCluster) -> None:
        self.kind = kind
        self.cluster = cluster
        assert cluster.controller is not None
        self.address = cluster.controller.address
        self.tail = LogTail(cluster.controller.metadata_log_dir())
        self.image = Image()
        self.topic_ids: dict[str, uuid.UUID] = {}  # name -> id, from CreateTopics answers and the log
        self.epochs: dict[int, int] = {}  # broker id -> current epoch (from the last accepted registration)
        self.ordinals: dict[int, int] = {}  # epoch -> ordinal in the order registrations were accepted

    def call(self, body: Message, version: int) -> Any:
        return probe.call(self.address, body, version, timeout=60.0)

    def epoch_ordinal(self, broker_id: int, epoch: int) -> object:
        return self.ordinals.get(epoch, f"unmapped:{epoch}")

    def accept_registration(self, broker_id: int, epoch: int) -> None:
        self.epochs[broker_id] = epoch
        self.ordinals.setdefault(epoch, len(self.ordinals))

    def refresh_image(self) -> None:
        for _offset, record, version in self.tail.read():
            self.image.apply(record, version)
            if type(record).__name__ == "TopicRecord":
                self.topic_ids[record.name] = record.topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        for name, tid in self.topic_ids.items():
            if tid == topic_id:
                return name
        return None


class Pair:
    """The mock and Kafka's controller at one metadata.version, started once, reused."""

    def __init__(
        self,
        dist: KafkaDistribution,
        workdir: Path,
        *,
        metadata_version: str,
        session_ms: int = LONG_SESSION_MS,
    ) -> None:
        self.dist = dist
        self.workdir = workdir
        self.label = metadata_version
        self.metadata_version, self.features = parse_level(metadata_version)
        self.session_ms = session_ms
        self.sides: dict[str, Side] = {}
        self._clusters: list[RealCluster] = []
        self.starts = 0
        self.dirty = False  # set by a disagreement: the next sequence restarts the pair
        self._senders = ThreadPoolExecutor(max_workers=len(SIDES), thread_name_prefix="twin-send")

    def start(self) -> None:
        self.close()
        self.starts += 1
        self.dirty = False
        root = self.workdir / f"pair-{self.starts}"
        shutil.rmtree(root, ignore_errors=True)
        cluster_id = uuid_to_base64url(CLUSTER_UUID)  # the same on both sides: identical requests
        common = {
            "broker.session.timeout.ms": str(self.session_ms),
            # the periodic unclean election (a timer: out of reach, see docs/twin.md)
            "unclean.leader.election.interval.ms": str(LONG_SESSION_MS),
        }
        # Kafka's controller moves leaders back to preferred replicas on its own every 5 minutes
        # (auto.leader.rebalance.enable); the mock has no such timer, and a step must not race it.
        # Kafka's controller holds each write for controller.quorum.append.linger.ms (25 ms) to
        # batch it with others; the harness sends one request at a time, so that wait is pure
        # delay (three quarters of a step's time). Batching decides nothing compared here.
        kafka_only = {"auto.leader.rebalance.enable": "false", "controller.quorum.append.linger.ms": "0"}
        specific: dict[str, dict[str, str]] = {"kafka": kafka_only, "mock": {}}
        for kind in SIDES:
            spec = ClusterSpec(
                brokers=0,
                controller=kind,
                metadata_version=self.metadata_version,
                cluster_id=cluster_id,
                controller_overrides={**common, **specific[kind]},
            )
            cluster = RealCluster(self.dist, root / kind, spec)
            self._clusters.append(cluster)
            cluster.start()
            self.sides[kind] = Side(kind, cluster)
        self.wait_images_settle()
        if self.features:
            self.set_features()

    def set_features(self) -> None:
        """Bring both controllers to the level's feature levels (a safe downgrade, the way an
        operator turns ELR off), then wait until both logs say so."""
        keys = [FeatureUpdateKey(n, lvl, upgrade_type=SAFE_DOWNGRADE) for n, lvl in sorted(self.features.items())]
        for side in self.sides.values():
            answer = side.call(UpdateFeaturesRequest(feature_updates=keys, timeout_ms=30_000), 1)
            if answer.error_code != 0:
                raise AssertionError(f"{side.kind}: setting {self.features} failed: {answer.error_message}")
        deadline = time.monotonic() + 60
        while True:
            for side in self.sides.values():
                side.refresh_image()
            if all(s.image.features.get(n, 0) == lvl for s in self.sides.values() for n, lvl in self.features.items()):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the logs did not reach {self.features} within 60 s")
            time.sleep(0.1)

    def wait_images_settle(self) -> None:
        """Until both logs hold their bootstrap records (Kafka writes them after it starts listening)."""
        deadline = time.monotonic() + 60
        while True:
            for side in self.sides.values():
                side.refresh_image()
            if all(s.image.features.get("metadata.version") for s in self.sides.values()):
                return
            if time.monotonic() > deadline:
                raise AssertionError("a controller wrote no metadata.version within 60 s")
            time.sleep(0.1)

    def close(self, *, final: bool = False) -> None:
        if final:
            self._senders.shutdown(wait=True)
        for cluster in self._clusters:
            cluster.close()
        self._clusters.clear()
        self.sides.clear()

    @property
    def cluster_id(self) -> str:
        return next(iter(self.sides.values())).cluster.cluster_id

    def send(self, build: Callable[[Side], tuple[Message, int]]) -> dict[str, Any]:
        """Build the request for each side and send it to both at once (each controller's
        answer time overlaps the other's); the raw answers by side."""
        requests = {kind: build(side) for kind, side in self.sides.items()}
        futures = {kind: self._senders.submit(side.call, *requests[kind]) for kind, side in self.sides.items()}
        return {kind: future.result() for kind, future in futures.items()}

    def images(self) -> dict[str, dict[str, Any]]:
        out = {}
        for kind, side in self.sides.items():
            side.refresh_image()
            out[kind] = side.image.normalised(side.epoch_ordinal)
        return out

    def image_diff(self) -> list[str]:
        imgs = self.images()
        return diff(imgs["mock"], imgs["kafka"])


def plain(value: Any, side: Side) -> Any:
    """An answer as plain data with the free parts normalised: topic ids by name, broker epochs
    by ordinal, throttle times dropped, lists of result structs sorted (Kafka builds some
    answers from hash maps)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            if f.name in ("unknown_tagged_fields", "throttle_time_ms"):
                continue
            v = getattr(value, f.name)
            if f.name == "broker_epoch" and isinstance(v, int) and v >= 0:
                out[f.name] = side.epoch_ordinal(-1, v)
            else:
                out[f.name] = plain(v, side)
        return out
    if isinstance(value, uuid.UUID):
        if value.int == 0:
            return "ZERO"
        name = side.topic_name(value)
        if name is not None:
            return f"topic:{name}"
        # Ids the harness sent (directories, the unknown topic) are the same on both sides;
        # any other is one a controller drew for nothing (a validate-only topic): free.
        return str(value) if value in SENT_IDS else "fresh-id"
    if isinstance(value, list):
        items = [plain(v, side) for v in value]
        if items and all(isinstance(i, dict) for i in items):
            items.sort(key=repr)
        return items
    return value
