"""The metadata image: what replaying the metadata log produces, and nothing else.

Strategy: one ``apply_*`` function per metadata record type, reached through the table
``APPLIERS`` (record class -> function). Replaying a log through :meth:`MetadataImage.apply`
rebuilds exactly the image the live controller had, because the live controller changes
its image only by applying the records it has just committed.

Rule 1: durable state (brokers, topics, partitions, features, the producer-id counter)
changes only here. Handlers read the image and propose records; they never write it.
(The one exception is soft: below 3.3-IV3 the heartbeat handler remembers a broker's
controlled-shutdown offset in ``BrokerInfo.cs_offset``, as Kafka keeps it in memory.)

Rule 2: replicas are indexed by (broker id, directory id), so failing a directory
touches only the partitions in it; per-broker leader counts are kept so no heartbeat
walks all partitions.

Invariants: the index, the leader counts and the directory-owner map (every online
directory of every broker, as Kafka's ``directoryToBroker``) agree with the partitions
and registrations (checked by ``ControllerState.check_invariants``).

Adding a record type: write ``apply_<record>(image, offset, record, version)`` and add one
row to ``APPLIERS``.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kraft_jbod import _accel
from kraft_jbod.controller import alter_partition as ap
from kraft_jbod.controller import features as fv
from kraft_jbod.controller import producer_ids as pids
from kraft_jbod.controller.acl_image import AclImage
from kraft_jbod.controller.config_image import ConfigImage
from kraft_jbod.controller.heartbeat import HbState
from kraft_jbod.controller.profiles import Profile
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.access_control_entry_record import AccessControlEntryRecord
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.clear_elr_record import ClearElrRecord
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.fence_broker_record import FenceBrokerRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.producer_ids_record import ProducerIdsRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.messages.register_controller_record import RegisterControllerRecord
from kraft_jbod.messages.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from kraft_jbod.messages.remove_topic_record import RemoveTopicRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.messages.unfence_broker_record import UnfenceBrokerRecord
from kraft_jbod.messages.unregister_broker_record import UnregisterBrokerRecord
from kraft_jbod.messages.unregister_controller_record import UnregisterControllerRecord
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.primitives import uuid_signed_key, uuid_to_base64url
from kraft_jbod.wire.records import METADATA_FRAME_VERSION
from kraft_jbod.wire.varint import write_unsigned_varint

NO_LEADER = -1
NO_LEADER_CHANGE = -2


def sorted_dirs(dirs: Iterable[uuid.UUID]) -> tuple[uuid.UUID, ...]:
    """Directory lists are kept in Kafka's ``Uuid.compareTo`` order (signed msb, lsb)."""
    return tuple(sorted(dirs, key=uuid_signed_key))


@dataclass(slots=True)
class ControllerInfo:
    """A controller's registration: the feature ranges it said it supports, and what a
    snapshot must write back (its listeners as (name, host, port, security protocol))."""

    controller_id: int
    incarnation_id: uuid.UUID
    features: dict[str, tuple[int, int]]
    endpoints: tuple[tuple[str, str, int, int], ...] = ()
    zk_migration_ready: bool = False


@dataclass(slots=True)
class BrokerInfo:
    """One registered broker, as the log says (plus ``cs_offset``, derived or soft)."""

    broker_id: int
    incarnation_id: uuid.UUID
    epoch: int
    reg_offset: int  # log offset of the RegisterBrokerRecord: the caught-up threshold
    listeners: tuple[tuple[str, str, int, int], ...]
    features: tuple[tuple[str, int, int], ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    registered_dirs: tuple[uuid.UUID, ...]  # LogDirs of the registration
    online_dirs: tuple[uuid.UUID, ...]  # registered minus reported offline
    online_set: frozenset[uuid.UUID]
    cs_offset: int = -1  # in memory: end of the batch that began controlled shutdown, else -1
    # KIP-1066: None until the broker first reports them (Kafka's "unknown"), then a list.
    cordoned_dirs: tuple[uuid.UUID, ...] | None = None

    @property
    def has_uncordoned_dirs(self) -> bool:
        """Kafka's hasUncordonedDirs: some online directory is not cordoned (or nothing is known)."""
        if not self.online_dirs or self.cordoned_dirs is None:
            return True
        return any(d not in self.cordoned_dirs for d in self.online_dirs)

    @property
    def active(self) -> bool:
        """Unfenced and not shutting down: may lead partitions."""
        return not self.fenced and not self.in_controlled_shutdown and self.cs_offset < 0

    @property
    def hb_state(self) -> HbState:
        """The heartbeat state machine's current state (Rule 1 of heartbeat.py).

        Controlled shutdown is the controller's in-memory state (``cs_offset``), as Kafka's
        heartbeat manager keeps it, not the durable flag: a registration replayed (an
        amended one included) or a controller that starts from its log forgets it, and the
        broker's next heartbeat is judged as an unfenced broker's."""
        if self.fenced:
            return HbState.FENCED
        if self.cs_offset >= 0:
            return HbState.CONTROLLED_SHUTDOWN
        return HbState.UNFENCED

    def durable(self) -> tuple[Any, ...]:
        return (
            self.incarnation_id,
            self.epoch,
            self.reg_offset,
            self.listeners,
            self.features,
            self.rack,
            self.fenced,
            self.in_controlled_shutdown,
            self.registered_dirs,
            self.online_dirs,
            self.cordoned_dirs,
        )


class Partition:
    """One partition; tuples of ints/uuids keep it small (a million of these fit in RAM)."""

    __slots__ = (
        "adding",
        "dirs",
        "elr",
        "isr",
        "last_known_elr",
        "leader",
        "leader_epoch",
        "leader_recovery_state",
        "partition_epoch",
        "partition_id",
        "removing",
        "replicas",
        "topic_id",
    )

    def __init__(
        self,
        topic_id: uuid.UUID,
        partition_id: int,
        replicas: tuple[int, ...],
        isr: tuple[int, ...],
        dirs: tuple[uuid.UUID, ...],
        leader: int,
        leader_epoch: int,
        partition_epoch: int,
        leader_recovery_state: int = ap.RECOVERED,
    ) -> None:
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.replicas = replicas
        self.isr = isr
        self.dirs = dirs
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.leader_recovery_state = leader_recovery_state  # 0 RECOVERED, 1 RECOVERING (KIP-704)
        # An ongoing reassignment (KIP-455; controller/apis/partitions.py): replicas being
        # added and being removed.
        self.adding: tuple[int, ...] = ()
        self.removing: tuple[int, ...] = ()
        # KIP-966: eligible leader replicas (left the ISR cleanly while it was below
        # min.insync.replicas) and the last known ELR (or, alone, the last leader).
        self.elr: tuple[int, ...] = ()
        self.last_known_elr: tuple[int, ...] = ()

    def dir_of(self, broker_id: int) -> uuid.UUID:
        return self.dirs[self.replicas.index(broker_id)]

    def durable(self) -> tuple[Any, ...]:
        return (
            self.replicas,
            self.isr,
            self.dirs,
            self.leader,
            self.leader_epoch,
            self.partition_epoch,
            self.leader_recovery_state,
            self.adding,
            self.removing,
            self.elr,
            self.last_known_elr,
        )

    def __repr__(self) -> str:
        return (
            f"Partition({uuid_to_base64url(self.topic_id)}-{self.partition_id} replicas={self.replicas} "
            f"isr={self.isr} leader={self.leader} dirs={[uuid_to_base64url(d) for d in self.dirs]})"
        )


# The slot of Partition each PartitionRecord field fills. The compiled snapshot loader and
# writer take the record's layout from its field plan and this map (kraft_jbod/_accel);
# the Python paths (apply_partition, snapshot._partition_record) write it out by name.
PARTITION_RECORD_SLOTS = {
    "partition_id": "partition_id",
    "topic_id": "topic_id",
    "replicas": "replicas",
    "isr": "isr",
    "removing_replicas": "removing",
    "adding_replicas": "adding",
    "leader": "leader",
    "leader_recovery_state": "leader_recovery_state",
    "leader_epoch": "leader_epoch",
    "partition_epoch": "partition_epoch",
    "directories": "dirs",
    "eligible_leader_replicas": "elr",
    "last_known_elr": "last_known_elr",
}


def _frame_prefix(api_key: int) -> bytes:
    out = bytearray([METADATA_FRAME_VERSION])
    write_unsigned_varint(out, api_key)
    return bytes(out)


assert PartitionRecord.API_KEY is not None
PARTITION_FRAME = _frame_prefix(PartitionRecord.API_KEY)
_accel.register_partition_class(
    Partition,
    PartitionRecord,
    PARTITION_RECORD_SLOTS,
    {"topic": "topic_id", "partition": "partition_id", "replicas": "replicas", "dirs": "dirs", "leader": "leader"},
    PARTITION_FRAME,
)


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, Partition]


def dir_online(profile: Profile, online: frozenset[uuid.UUID] | None, directory: uuid.UUID) -> bool:
    """Kafka's DirectoryId.isOnline over a broker's online directories (None: no such broker).

    UNASSIGNED and MIGRATING are online, LOST is not; an empty list (a registration from
    before JBOD) means every directory is online. The kip profile also counts an unknown
    directory of a single-directory broker as online (the KIP's caching rule).
    """
    if online and directory in online:  # the common case first (reserved ids are never registered)
        return True
    if directory == profile.unassigned or directory == profile.migrating:
        return True
    if directory == profile.lost or online is None:
        return False
    if not online or directory in online:
        return True
    return profile.single_dir_unknown_is_online and len(online) == 1


def offline_replicas(image: MetadataImage, p: Partition) -> list[int]:
    """Replicas a broker's metadata image calls offline (Kafka's MetadataCache.getOfflineReplicas):
    on an unregistered or fenced broker, or in a directory not among the broker's online ones
    (reported failed, or missing from a later registration)."""
    out: list[int] = []
    for b, d in zip(p.replicas, p.dirs, strict=True):
        reg = image.brokers.get(b)
        if reg is None or reg.fenced or not dir_online(image.profile, reg.online_set, d):
            out.append(b)
    return out


def kafka_table_order(keys: Iterable[int], slots: int) -> list[int]:
    """The order in which Kafka's controller iterates a TimelineHashMap of int keys (the
    broker registrations) holding ``keys``, given in insertion order, in ``slots`` slots.

    Its hash table takes a key's slot from the top bits of the key times a 64-bit
    Fibonacci constant, and its iterator walks the slots in order, each slot's keys last
    inserted first. Messages that name the first broker failing a check follow it.
    """
    order = {k: i for i, k in enumerate(keys)}
    shift = 65 - slots.bit_length()

    def slot(k: int) -> int:
        return ((k * -7046029254386353131) & 0xFFFFFFFFFFFFFFFF) >> shift

    return sorted(order, key=lambda k: (slot(k), -order[k]))


def kafka_table_slots(count: int) -> int:
    """The slot count of a Kafka TimelineHashMap after ``count`` puts of new keys: it starts
    at 2 and doubles before a put that would leave it more than 3/4 full (as
    ``apply_register`` grows ``broker_slots``)."""
    slots = 2
    for size in range(count):
        if (size + 1) * 0.75 > slots:
            slots *= 2
    return slots


def kafka_table_first(keys: Iterable[int], slots: int) -> int:
    """The first of ``keys`` (in insertion order) in Kafka's iteration of such a table:
    ``kafka_table_order(keys, slots)[0]`` without sorting them all."""
    shift = 65 - slots.bit_length()
    best: tuple[int, int] | None = None
    first = 0
    for i, k in enumerate(keys):
        rank = (((k * -7046029254386353131) & 0xFFFFFFFFFFFFFFFF) >> shift, -i)
        if best is None or rank < best:
            best, first = rank, k
    if best is None:
        raise ValueError("no keys")
    return first


_PARTITION_ORDER = operator.attrgetter("topic_id.int", "partition_id")  # (topic id as an int, partition)


def sorted_partitions(parts: Iterable[Partition]) -> list[Partition]:
    """Deterministic record order: set iteration order is not stable across runs."""
    return sorted(parts, key=_PARTITION_ORDER)


class MetadataImage:
    """Brokers, topics, partitions and features as the committed log says; see the module docstring."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        # durable
        self.features: dict[str, int] = {}
        self.brokers: dict[int, BrokerInfo] = {}
        # The slot count of Kafka's table of registrations (a TimelineHashMap): it starts at
        # 2 and doubles, never shrinking, so its iteration order depends on history.
        self.broker_slots = 2
        self.topics: dict[uuid.UUID, TopicInfo] = {}
        self.topic_names: dict[str, uuid.UUID] = {}
        # RegisterControllerRecord / UnregisterControllerRecord: id -> its registration.
        self.controllers: dict[int, ControllerInfo] = {}
        self.next_producer_id: int | None = None  # first id of the next block; None: no record yet
        self.configs = ConfigImage()  # dynamic configs (controller/config_image.py)
        self.acls = AclImage()  # ACLs (controller/acl_image.py)
        # derived from the durable state
        self.dir_owner: dict[uuid.UUID, int] = {}
        self.index: dict[int, dict[uuid.UUID, set[Partition]]] = {}
        self.leader_count: dict[int, int] = {}
        # Every partition without a leader (Kafka's partitionsWithNoLeader): the election
        # that unfencing any broker runs covers all of them.
        self.leaderless: set[Partition] = set()
        self.canon: dict[uuid.UUID, uuid.UUID] = {}
        # id() of every object in ``canon`` (they live as long as the image): whether a
        # directory in a record is already the canonical object costs an int hash, where
        # looking it up hashes a ``uuid.UUID`` in Python code.
        self.canon_ids: set[int] = set()
        # The topic the last PartitionChangeRecord named (records come topic by topic and
        # hold the topic's own id object): found again by identity, without hashing.
        self.last_topic: TopicInfo | None = None
        # index_move_dirs' last move: (broker, from, to, from's bucket, to's bucket).
        self.last_move: tuple[int, uuid.UUID, uuid.UUID, set[Partition], set[Partition]] | None = None
        self.partition_total = 0
        self.last_applied_offset = -1

    # ------------------------------------------------------------------ reads

    @property
    def metadata_version(self) -> int:
        """Finalized metadata.version; an empty log means 3.0-IV1 (level 1), as in Kafka."""
        return self.features.get(fv.METADATA_VERSION, fv.MV_3_0_IV1)

    def partitions(self) -> Iterator[Partition]:
        for topic in self.topics.values():
            yield from topic.partitions.values()

    def partition(self, topic_id: uuid.UUID, partition_id: int) -> Partition | None:
        topic = self.topics.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def replicas_in(self, broker_id: int, directory: uuid.UUID) -> set[Partition]:
        """Partitions with a replica on ``broker_id`` assigned to ``directory`` (a view)."""
        return self.index.get(broker_id, {}).get(directory, set())

    def broker_partitions(self, broker_id: int) -> list[Partition]:
        per = self.index.get(broker_id)
        if not per:
            return []
        out: list[Partition] = []
        for bucket in per.values():
            out.extend(bucket)
        return out

    def canonical(self, u: uuid.UUID) -> uuid.UUID:
        """One shared UUID object per directory id, so partitions hold references only."""
        got = self.canon.setdefault(u, u)
        if got is u:
            self.canon_ids.add(id(u))
        return got

    def durable_state(self) -> dict[str, Any]:
        """Everything the log determines, in comparable form (replay must reproduce it)."""
        return {
            "features": dict(self.features),
            "next_producer_id": self.next_producer_id,
            "configs": self.configs.durable(),
            "acls": self.acls.durable(),
            "brokers": {b: reg.durable() for b, reg in sorted(self.brokers.items())},
            "topics": {
                tid: (t.name, {pid: p.durable() for pid, p in sorted(t.partitions.items())})
                for tid, t in self.topics.items()
            },
        }

    # ------------------------------------------------------------------ apply

    def apply(self, offset: int, record: Message, version: int) -> None:
        """Apply one committed record at its log offset (records we do not model are skipped).

        Raises:
            StorageError: the record contradicts the image (unknown broker, topic or
                partition, bad Directories length); the log is not one we wrote.
        """
        applier = APPLIERS.get(type(record))
        if applier is not None:
            applier(self, offset, record, version)
        self.last_applied_offset = offset

    # ------------------------------------------------------------------ derived-state upkeep

    def require_broker(self, offset: int, broker_id: int, epoch: int, what: str) -> BrokerInfo:
        reg = self.brokers.get(broker_id)
        if reg is None or reg.epoch != epoch:
            raise StorageError(f"{what} at offset {offset} names broker {broker_id} epoch {epoch}, not registered")
        return reg

    def release_dirs(self, reg: BrokerInfo, dirs: Iterable[uuid.UUID] | None = None) -> None:
        """Forget ``reg`` as the owner of ``dirs`` (default: all its online dirs)."""
        for d in reg.online_dirs if dirs is None else dirs:
            if self.dir_owner.get(d) == reg.broker_id:
                del self.dir_owner[d]

    def index_add(self, p: Partition) -> None:
        index = self.index
        for b, d in zip(p.replicas, p.dirs, strict=True):
            per = index.get(b)
            if per is None:
                per = index[b] = {}
            bucket = per.get(d)
            if bucket is None:
                bucket = per[d] = set()
            bucket.add(p)

    def index_many(self, parts: list[Partition]) -> None:
        """``index_add`` for many partitions whose dirs are canonical objects.

        With the compiled codec the replicas are grouped by (broker, dir object) first:
        hashing ``uuid.UUID`` runs Python code, so it is done once per (broker, dir) pair
        instead of once per replica.
        """
        groups = _accel.group_replicas(parts)
        if groups is None:
            for p in parts:
                self.index_add(p)
            return
        index = self.index
        for b, d, plist in groups:
            target = index.get(b)
            if target is None:
                target = index[b] = {}
            known = target.get(d)
            if known is None:
                target[d] = set(plist)
            else:
                known.update(plist)

    def index_remove(self, p: Partition) -> None:
        index = self.index
        for b, d in zip(p.replicas, p.dirs, strict=True):
            per = index[b]
            bucket = per[d]
            bucket.discard(p)
            if not bucket:
                del per[d]
                self.last_move = None
                if not per:
                    del index[b]

    def index_move_dirs(self, p: Partition, dirs: tuple[uuid.UUID, ...]) -> None:
        """Give ``p`` the directories ``dirs`` (its replicas unchanged), moving in the index
        only the replicas whose directory changes: an AssignReplicasToDirs moves one of
        three, and hashing a ``uuid.UUID`` runs Python code."""
        index = self.index
        replicas, before = p.replicas, p.dirs
        for i in range(len(replicas)):
            old, new = before[i], dirs[i]
            if old is new or old.int == new.int:
                continue
            b = replicas[i]
            # An assignment moves a broker's replicas from one directory to another by the
            # thousand: the two buckets of the last move are used again while the broker and
            # directory objects are the same (index_remove forgets them when it drops a bucket).
            last = self.last_move
            if last is not None and last[0] == b and last[1] is old and last[2] is new:
                bucket, target = last[3], last[4]
            else:
                per = index[b]
                bucket = per[old]
                known = per.get(new)
                if known is None:
                    known = per[new] = set()
                target = known
            bucket.discard(p)
            target.add(p)
            if bucket:
                self.last_move = (b, old, new, bucket, target)
            else:
                del index[b][old]
                self.last_move = None
        p.dirs = dirs

    def set_leader(self, p: Partition, leader: int) -> None:
        counts = self.leader_count
        if p.leader >= 0:
            left = counts[p.leader] - 1
            if left:
                counts[p.leader] = left
            else:
                del counts[p.leader]
        if leader >= 0:
            counts[leader] = counts.get(leader, 0) + 1
            if p.leader < 0:
                self.leaderless.discard(p)
        else:
            self.leaderless.add(p)
        p.leader = leader

    def record_dirs(
        self, offset: int, replicas: tuple[int, ...], directories: list[uuid.UUID]
    ) -> tuple[uuid.UUID, ...]:
        if not directories:
            # A v0 record (or no assignment at all): the directory is unknown but the
            # replica was placed before JBOD, which is what MIGRATING means.
            migrating = self.canonical(self.profile.migrating)
            return (migrating,) * len(replicas)
        if len(directories) != len(replicas):
            raise StorageError(
                f"record at offset {offset}: {len(directories)} Directories for {len(replicas)} Replicas"
            )
        return tuple(self.canonical(d) for d in directories)

    def record_dirs_over(
        self, offset: int, dirs: tuple[uuid.UUID, ...], directories: list[uuid.UUID]
    ) -> tuple[uuid.UUID, ...]:
        """``record_dirs`` for the same replicas as a partition whose directories are ``dirs``:
        an entry that is one of those (canonical) objects is taken as it is, so only the
        directories that change are looked up (hashing a ``uuid.UUID`` runs Python code), and
        ``dirs`` itself comes back when nothing changes. The records the controller writes
        reuse its objects, so applying them hashes only the replica that moved."""
        n = len(dirs)
        if len(directories) != n or not directories:
            return self.record_dirs(offset, (0,) * n, directories)
        out = None
        canon_ids = self.canon_ids
        for i in range(n):
            d = directories[i]
            if d is not dirs[i]:
                if out is None:
                    out = list(dirs)
                out[i] = d if id(d) in canon_ids else self.canonical(d)
        return dirs if out is None else tuple(out)


# ---------------------------------------------------------------------- one function per record type


def apply_feature(img: MetadataImage, offset: int, rec: FeatureLevelRecord, version: int) -> None:
    if rec.feature_level == 0:
        img.features.pop(rec.name, None)
    else:
        img.features[rec.name] = rec.feature_level


def apply_register(img: MetadataImage, offset: int, rec: RegisterBrokerRecord, version: int) -> None:
    # Kafka's table grows before every put, a replacement included, past 3/4 full.
    if (len(img.brokers) + 1) * 0.75 > img.broker_slots:
        img.broker_slots *= 2
    old = img.brokers.get(rec.broker_id)
    if old is not None:
        img.release_dirs(old)
    dirs = sorted_dirs(img.canonical(d) for d in rec.log_dirs)
    reg = BrokerInfo(
        broker_id=rec.broker_id,
        incarnation_id=rec.incarnation_id,
        epoch=rec.broker_epoch,
        reg_offset=offset,
        listeners=tuple((e.name, e.host, e.port, e.security_protocol) for e in rec.end_points),
        features=tuple((f.name, f.min_supported_version, f.max_supported_version) for f in rec.features),
        rack=rec.rack,
        fenced=rec.fenced,
        in_controlled_shutdown=rec.in_controlled_shutdown,
        registered_dirs=dirs,
        online_dirs=dirs,
        online_set=frozenset(dirs),
        # The in-memory controlled shutdown starts afresh with every registration.
        cs_offset=-1,
        cordoned_dirs=None if rec.cordoned_log_dirs is None else tuple(rec.cordoned_log_dirs),
    )
    img.brokers[rec.broker_id] = reg
    for d in dirs:
        img.dir_owner[d] = rec.broker_id


def apply_unregister(img: MetadataImage, offset: int, rec: UnregisterBrokerRecord, version: int) -> None:
    reg = img.require_broker(offset, rec.broker_id, rec.broker_epoch, "UnregisterBrokerRecord")
    img.release_dirs(reg)
    del img.brokers[rec.broker_id]


def apply_fence(img: MetadataImage, offset: int, rec: FenceBrokerRecord, version: int) -> None:
    reg = img.require_broker(offset, rec.id, rec.epoch, "FenceBrokerRecord")
    reg.fenced = True
    reg.cs_offset = -1


def apply_unfence(img: MetadataImage, offset: int, rec: UnfenceBrokerRecord, version: int) -> None:
    reg = img.require_broker(offset, rec.id, rec.epoch, "UnfenceBrokerRecord")
    reg.fenced = False


def apply_registration_change(
    img: MetadataImage, offset: int, rec: BrokerRegistrationChangeRecord, version: int
) -> None:
    reg = img.require_broker(offset, rec.broker_id, rec.broker_epoch, "BrokerRegistrationChangeRecord")
    if rec.fenced == 1:
        reg.fenced = True
        reg.cs_offset = -1
    elif rec.fenced == -1:
        reg.fenced = False
    if rec.in_controlled_shutdown == 1:
        # Durable flag only: the in-memory offset is set by the controller that began the
        # shutdown, to the end of that batch (state.apply).
        reg.in_controlled_shutdown = True
    if rec.cordoned_log_dirs is not None:  # v3 (KIP-1066); null means "no change"
        reg.cordoned_dirs = tuple(img.canonical(d) for d in rec.cordoned_log_dirs)
    if rec.log_dirs:  # empty means "no change" (Kafka replays it that way)
        dirs = sorted_dirs(img.canonical(d) for d in rec.log_dirs)
        # A directory that is no longer listed is released (Kafka's updateDirectories):
        # another broker may register it from now on.
        img.release_dirs(reg, [d for d in reg.online_dirs if d not in frozenset(dirs)])
        reg.online_dirs = dirs
        reg.online_set = frozenset(dirs)
        for d in dirs:
            img.dir_owner.setdefault(d, rec.broker_id)


def apply_topic(img: MetadataImage, offset: int, rec: TopicRecord, version: int) -> None:
    if rec.topic_id in img.topics or rec.name in img.topic_names:
        raise StorageError(f"TopicRecord at offset {offset} re-creates topic {rec.name!r}")
    img.topics[rec.topic_id] = TopicInfo(rec.name, rec.topic_id, {})
    img.topic_names[rec.name] = rec.topic_id


def apply_partition(img: MetadataImage, offset: int, rec: PartitionRecord, version: int) -> None:
    topic = img.topics.get(rec.topic_id)
    if topic is None:
        raise StorageError(f"PartitionRecord at offset {offset} for unknown topic {rec.topic_id}")
    if rec.partition_id in topic.partitions:
        raise StorageError(f"PartitionRecord at offset {offset} re-creates partition {rec.partition_id}")
    replicas = tuple(rec.replicas)
    dirs = img.record_dirs(offset, replicas, rec.directories)
    p = Partition(
        topic.topic_id,
        rec.partition_id,
        replicas,
        tuple(rec.isr),
        dirs,
        NO_LEADER,
        rec.leader_epoch,
        rec.partition_epoch,
        rec.leader_recovery_state,
    )
    p.adding, p.removing = tuple(rec.adding_replicas), tuple(rec.removing_replicas)
    p.elr = tuple(rec.eligible_leader_replicas or ())
    p.last_known_elr = tuple(rec.last_known_elr or ())
    img.set_leader(p, rec.leader)
    topic.partitions[rec.partition_id] = p
    img.index_add(p)
    img.partition_total += 1


def apply_partition_change(img: MetadataImage, offset: int, rec: PartitionChangeRecord, version: int) -> None:
    topic = img.last_topic
    if topic is None or topic.topic_id is not rec.topic_id:
        topic = img.last_topic = img.topics.get(rec.topic_id)
    p = None if topic is None else topic.partitions.get(rec.partition_id)
    if p is None:
        raise StorageError(
            f"PartitionChangeRecord at offset {offset} for unknown partition {rec.topic_id}-{rec.partition_id}"
        )
    new_replicas = p.replicas if rec.replicas is None else tuple(rec.replicas)
    if rec.directories is not None:
        if new_replicas is p.replicas:
            new_dirs = img.record_dirs_over(offset, p.dirs, rec.directories)
        else:
            new_dirs = img.record_dirs(offset, new_replicas, rec.directories)
    elif rec.replicas is not None and new_replicas != p.replicas:
        # Replicas changed without Directories: keep known dirs, the rest unassigned.
        known = dict(zip(p.replicas, p.dirs, strict=True))
        unassigned = img.canonical(img.profile.unassigned)
        new_dirs = tuple(known.get(b, unassigned) for b in new_replicas)
    else:
        new_dirs = p.dirs
    if new_replicas is not p.replicas and new_replicas != p.replicas:
        img.index_remove(p)
        p.replicas, p.dirs = new_replicas, new_dirs
        img.index_add(p)
    elif new_dirs is not p.dirs:
        # (Not compared by value: index_move_dirs passes over equal entries, and comparing
        # the moved one would run uuid.UUID.__eq__.)
        img.index_move_dirs(p, new_dirs)
    if rec.isr is not None:
        p.isr = tuple(rec.isr)
    if rec.leader != NO_LEADER_CHANGE:
        img.set_leader(p, rec.leader)
        p.leader_epoch += 1
    if rec.leader_recovery_state != ap.NO_RECOVERY_CHANGE:
        p.leader_recovery_state = rec.leader_recovery_state
    if rec.adding_replicas is not None:
        p.adding = tuple(rec.adding_replicas)
    if rec.removing_replicas is not None:
        p.removing = tuple(rec.removing_replicas)
    if rec.eligible_leader_replicas is not None:
        p.elr = tuple(rec.eligible_leader_replicas)
    if rec.last_known_elr is not None:
        p.last_known_elr = tuple(rec.last_known_elr)
    p.partition_epoch += 1


def apply_clear_elr(img: MetadataImage, offset: int, rec: ClearElrRecord, version: int) -> None:
    """Empty ELR and last-known ELR of one topic (TopicName) or of every topic (empty name).

    As Kafka's replay, a partition that held any gets a new partition epoch (the record is
    a PartitionChangeRecord clearing both fields); a named topic that does not exist is an
    error in the log.
    """
    if rec.topic_name:
        tid = img.topic_names.get(rec.topic_name)
        if tid is None:
            raise StorageError(f"ClearElrRecord at offset {offset} for unknown topic {rec.topic_name!r}")
        topics = [img.topics[tid]]
    else:
        topics = list(img.topics.values())
    for topic in topics:
        for p in topic.partitions.values():
            if p.elr or p.last_known_elr:
                p.elr, p.last_known_elr = (), ()
                p.partition_epoch += 1


def apply_remove_topic(img: MetadataImage, offset: int, rec: RemoveTopicRecord, version: int) -> None:
    topic = img.topics.pop(rec.topic_id, None)
    if topic is None:
        raise StorageError(f"RemoveTopicRecord at offset {offset} for unknown topic {rec.topic_id}")
    img.last_topic = None
    del img.topic_names[topic.name]
    img.configs.drop_topic(topic.name)  # as Kafka's controller (deleteTopicConfigs)
    for p in topic.partitions.values():
        img.index_remove(p)
        img.set_leader(p, NO_LEADER)
        img.leaderless.discard(p)
    img.partition_total -= len(topic.partitions)


def apply_producer_ids(img: MetadataImage, offset: int, rec: ProducerIdsRecord, version: int) -> None:
    img.next_producer_id = pids.replayed(img.next_producer_id, rec.next_producer_id, offset)


def apply_config(img: MetadataImage, offset: int, rec: ConfigRecord, version: int) -> None:
    img.configs.apply(rec)


def apply_acl(img: MetadataImage, offset: int, rec: AccessControlEntryRecord, version: int) -> None:
    img.acls.apply_entry(rec)


def apply_remove_acl(img: MetadataImage, offset: int, rec: RemoveAccessControlEntryRecord, version: int) -> None:
    try:
        img.acls.apply_remove(rec, offset)
    except KeyError as exc:
        raise StorageError(str(exc.args[0])) from None


def apply_register_controller(img: MetadataImage, offset: int, rec: RegisterControllerRecord, version: int) -> None:
    """A controller's registration (replacing an earlier one): what each feature it supports."""
    img.controllers[rec.controller_id] = ControllerInfo(
        rec.controller_id,
        rec.incarnation_id,
        {f.name: (f.min_supported_version, f.max_supported_version) for f in rec.features},
        tuple((e.name, e.host, e.port, e.security_protocol) for e in rec.end_points),
        rec.zk_migration_ready,
    )


def apply_unregister_controller(img: MetadataImage, offset: int, rec: UnregisterControllerRecord, version: int) -> None:
    img.controllers.pop(rec.controller_id, None)


Applier = Callable[[MetadataImage, int, Any, int], None]

APPLIERS: dict[type[Message], Applier] = {
    FeatureLevelRecord: apply_feature,
    RegisterBrokerRecord: apply_register,
    UnregisterBrokerRecord: apply_unregister,
    FenceBrokerRecord: apply_fence,
    UnfenceBrokerRecord: apply_unfence,
    BrokerRegistrationChangeRecord: apply_registration_change,
    TopicRecord: apply_topic,
    PartitionRecord: apply_partition,
    PartitionChangeRecord: apply_partition_change,
    RemoveTopicRecord: apply_remove_topic,
    ProducerIdsRecord: apply_producer_ids,
    ConfigRecord: apply_config,
    AccessControlEntryRecord: apply_acl,
    RemoveAccessControlEntryRecord: apply_remove_acl,
    ClearElrRecord: apply_clear_elr,
    RegisterControllerRecord: apply_register_controller,
    UnregisterControllerRecord: apply_unregister_controller,
}
