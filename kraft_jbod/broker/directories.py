"""The broker's log directories on disk: failure detection, placement, replica folders.

Each log directory has the id from its meta.properties. A directory is *online* until it
fails, and a failed one never comes back in this process (Kafka's rule). It fails when
the probe cannot create, write, fsync and remove a small file in it (the directory was
removed, unmounted or made unwritable), when creating a replica folder in it fails, or on
an explicit command.

Replica folders use Kafka's names: ``<topic>-<partition>`` for a replica, and
``<topic>-<partition>.<32 hex>-future`` for the future replica of an intra-broker move;
each holds a ``partition.metadata`` file (``version: 0`` / ``topic_id: <base64url>``).

:func:`reconcile` is the KIP-858 "Replica management" table, pure: given this broker's
view of the image and what lies on disk, the folders to create and the assignments to
send.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kraft_jbod.broker.image import PartitionView
from kraft_jbod.wire.primitives import (
    MIGRATING_DIRECTORY,
    UNASSIGNED_DIRECTORY,
    uuid_to_base64url,
)

PROBE_NAME: Final = ".kraft-jbod-probe"
_REPLICA = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<part>[0-9]+)(?:\.(?P<uid>[0-9a-f]{32})-future)?$")
TopicPartition = tuple[uuid.UUID, int]


@dataclass
class LogDir:
    path: Path
    dir_id: uuid.UUID
    online: bool = True
    reason: str = ""
    replicas: set[TopicPartition] = field(default_factory=set)
    futures: set[TopicPartition] = field(default_factory=set)


def replica_folder(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def future_folder(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}-future"


class DirectoryManager:
    def __init__(
        self, dirs: Iterable[tuple[Path, uuid.UUID]], *, failed_at_start: dict[Path, str] | None = None
    ) -> None:
        self.dirs: dict[uuid.UUID, LogDir] = {d: LogDir(p, d) for p, d in dirs}
        # Log dirs unreadable at start-up (their ids unknown): offline, never registered.
        self.failed_at_start: dict[Path, str] = dict(failed_at_start or {})

    @property
    def any_offline(self) -> bool:
        """Kafka's LogManager.hasOfflineLogDirs: a dir failed now or at start-up."""
        return bool(self.failed_at_start) or any(not d.online for d in self.dirs.values())

    @property
    def online(self) -> list[LogDir]:
        return [d for d in self.dirs.values() if d.online]

    @property
    def offline_ids(self) -> list[uuid.UUID]:
        return [d.dir_id for d in self.dirs.values() if not d.online]

    def by_path(self, path: str | Path) -> LogDir | None:
        want = Path(path)
        for d in self.dirs.values():
            if d.path == want:
                return d
        return None

    def fail(self, dir_id: uuid.UUID, reason: str) -> bool:
        """Mark a directory failed; False if it was already offline or is unknown."""
        d = self.dirs.get(dir_id)
        if d is None or not d.online:
            return False
        d.online, d.reason = False, reason
        return True

    def probe(self) -> list[uuid.UUID]:
        """Write, fsync and remove a file in every online directory; the newly failed ones."""
        failed: list[uuid.UUID] = []
        for d in self.online:
            try:
                if not d.path.is_dir():
                    raise FileNotFoundError(f"{d.path} is gone")
                path = d.path / PROBE_NAME
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, b"ok")
                    os.fsync(fd)
                finally:
                    os.close(fd)
                os.unlink(path)
                if not os.access(d.path, os.W_OK):
                    raise PermissionError(f"{d.path} is not writable")
            except OSError as exc:
                self.fail(d.dir_id, str(exc))
                failed.append(d.dir_id)
        return failed

    def scan(self, topic_ids: dict[str, uuid.UUID]) -> None:
        """Find replica and future folders already on disk (after a restart)."""
        for d in self.online:
            try:
                names = os.listdir(d.path)
            except OSError:
                continue
            for name in names:
                m = _REPLICA.match(name)
                if m is None or m["topic"] not in topic_ids:
                    continue
                tp = (topic_ids[m["topic"]], int(m["part"]))
                (d.futures if m["uid"] else d.replicas).add(tp)

    def location(self, tp: TopicPartition) -> LogDir | None:
        for d in self.online:
            if tp in d.replicas:
                return d
        return None

    def future_location(self, tp: TopicPartition) -> LogDir | None:
        for d in self.online:
            if tp in d.futures:
                return d
        return None

    def choose(self) -> LogDir | None:
        """Kafka's placement: the online directory holding the fewest replicas."""
        online = self.online
        return min(online, key=lambda d: len(d.replicas) + len(d.futures)) if online else None

    def _write_partition(self, folder: Path, topic_id: uuid.UUID) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        meta = folder / "partition.metadata"
        with open(meta, "w", encoding="utf-8") as f:
            f.write(f"version: 0\ntopic_id: {uuid_to_base64url(topic_id)}\n")
            f.flush()
            os.fsync(f.fileno())

    def create(self, d: LogDir, tp: TopicPartition, topic: str) -> bool:
        """Create the replica folder; a failure fails the directory (False)."""
        try:
            self._write_partition(d.path / replica_folder(topic, tp[1]), tp[0])
        except OSError as exc:
            self.fail(d.dir_id, f"creating {topic}-{tp[1]}: {exc}")
            return False
        d.replicas.add(tp)
        return True

    def start_future(self, src: LogDir, dst: LogDir, tp: TopicPartition, topic: str) -> bool:
        """Copy the replica into a future folder of ``dst`` (the "catch up" of a move)."""
        try:
            for old in dst.path.glob(f"{replica_folder(topic, tp[1])}.*-future"):
                shutil.rmtree(old)
            target = dst.path / future_folder(topic, tp[1])
            shutil.copytree(src.path / replica_folder(topic, tp[1]), target)
            fd = os.open(target, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            self.fail(dst.dir_id, f"future replica of {topic}-{tp[1]}: {exc}")
            return False
        dst.futures.add(tp)
        return True

    def promote(self, src: LogDir, dst: LogDir, tp: TopicPartition, topic: str) -> bool:
        """Replace the replica in ``src`` by the future one in ``dst`` (final copy, rename, delete)."""
        try:
            futures = sorted(dst.path.glob(f"{replica_folder(topic, tp[1])}.*-future"))
            if not futures:
                raise FileNotFoundError(f"no future replica of {topic}-{tp[1]} in {dst.path}")
            main = src.path / replica_folder(topic, tp[1])
            for item in main.iterdir():  # catch up once more with appends blocked
                if item.is_file():
                    shutil.copy2(item, futures[-1] / item.name)
            os.replace(futures[-1], dst.path / replica_folder(topic, tp[1]))
        except OSError as exc:
            self.fail(dst.dir_id, f"promoting {topic}-{tp[1]}: {exc}")
            return False
        dst.futures.discard(tp)
        dst.replicas.add(tp)
        src.replicas.discard(tp)
        shutil.rmtree(src.path / replica_folder(topic, tp[1]), ignore_errors=True)
        return True


@dataclass(slots=True, frozen=True)
class Action:
    """``create`` a folder in ``directory`` and/or ``assign`` the partition to it."""

    tp: TopicPartition
    directory: uuid.UUID
    create: bool
    assign: bool
    why: str


def reconcile(
    broker_id: int,
    parts: Iterable[PartitionView],
    dirs: DirectoryManager,
    cordoned: frozenset[uuid.UUID] = frozenset(),
) -> list[Action]:
    """KIP-858 replica management for every partition this broker hosts (pure).

    Partitions being moved (a future replica exists) are left to the move protocol. A new
    replica goes to the least loaded online directory that is not cordoned (KIP-1066);
    only when every online directory is cordoned do cordoned ones take it.
    """
    actions: list[Action] = []
    ours = {d.dir_id: d for d in dirs.dirs.values()}
    any_offline = dirs.any_offline
    load = {d.dir_id: len(d.replicas) + len(d.futures) for d in dirs.online if d.dir_id not in cordoned}
    if not load:
        load = {d.dir_id: len(d.replicas) + len(d.futures) for d in dirs.online}

    def choose() -> uuid.UUID | None:
        # Kafka's placement (fewest replicas), counting the ones placed in this pass.
        if not load:
            return None
        best = min(load, key=lambda k: load[k])
        load[best] += 1
        return best

    for p in parts:
        assigned = p.dir_of(broker_id)
        if assigned is None:
            continue
        tp = (p.topic_id, p.partition_id)
        local = dirs.location(tp)
        future = dirs.future_location(tp)
        if future is not None:
            continue
        if assigned in (UNASSIGNED_DIRECTORY, MIGRATING_DIRECTORY):
            if local is not None:
                actions.append(Action(tp, local.dir_id, False, True, "already on disk"))
            elif assigned == MIGRATING_DIRECTORY and any_offline:
                continue  # Kafka creates a log for MIGRATING only while no dir is offline
            else:
                chosen = choose()
                if chosen is not None:
                    actions.append(Action(tp, chosen, True, True, "new replica"))
            continue
        target = ours.get(assigned)
        if target is not None and target.online:
            if local is None:
                actions.append(Action(tp, assigned, True, False, "assigned by metadata"))
            elif local.dir_id != assigned:
                actions.append(Action(tp, local.dir_id, False, True, "found in another directory"))
            continue
        if target is not None:
            continue  # assigned to one of our failed directories: the replica is offline
        # LOST or a directory we do not have
        if any_offline:
            continue  # it may live in a failed directory: do not refill the healthy ones
        if local is not None:
            actions.append(Action(tp, local.dir_id, False, True, "unknown directory in metadata"))
        else:
            chosen = choose()
            if chosen is not None:
                actions.append(Action(tp, chosen, True, True, "unknown directory in metadata"))
    return actions
