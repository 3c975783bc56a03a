"""The KIP-858 controller as a pure state machine: requests in, records and responses out.

No I/O, no clock, no randomness, no asyncio. The server owns the log and the lock; per
request it calls :meth:`ControllerState.handle` (which only *proposes* records), appends
those records as one batch, then feeds each committed record back through
:meth:`ControllerState.apply`. Replaying a log through ``apply`` therefore rebuilds
exactly the state the live controller had.

Rule 1: durable state (brokers, topics, partitions, features) changes only in
``apply``. ``handle`` and ``tick`` may change soft state only: heartbeat times, reported
metadata offsets, the controlled-shutdown offset below 3.3-IV3.

Rule 2: records of one request are generated in order against a *draft* overlay, so a
later record in the same batch sees what the earlier ones did (fencing, then directory
failure in one heartbeat never elects a leader into the failed directory).

Rule 3: replicas are indexed by (broker id, directory id), so failing a directory
touches only the partitions in it; per-broker leader counts are kept so no heartbeat
walks all partitions.

Invariants (``check_invariants``): a leader is in its partition's ISR and Replicas, on a
registered active broker, in a directory that broker has online; an ISR is never empty;
Directories runs parallel to Replicas; the index, the leader counts and the
directory-owner map agree with the partitions and registrations.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from kraft_jbod.controller import alter_partition as ap
from kraft_jbod.controller import errors_codes as ec
from kraft_jbod.controller import features as fv
from kraft_jbod.controller import producer_ids as pids
from kraft_jbod.controller.apis import admin as admin_apis
from kraft_jbod.controller.apis.acls import AclImage
from kraft_jbod.controller.apis.configs import ConfigImage
from kraft_jbod.controller.heartbeat import HbEffect, HbState, classify, transition
from kraft_jbod.controller.placement import place_replicas
from kraft_jbod.controller.profiles import Profile, is_reserved_directory, profile_named
from kraft_jbod.errors import ConfigError, ProtocolError, StorageError
from kraft_jbod.messages.access_control_entry_record import AccessControlEntryRecord
from kraft_jbod.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraft_jbod.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
from kraft_jbod.messages.alter_partition_request import AlterPartitionRequest
from kraft_jbod.messages.alter_partition_request import PartitionData as AlterPartData
from kraft_jbod.messages.alter_partition_response import AlterPartitionResponse
from kraft_jbod.messages.alter_partition_response import PartitionData as AlterPartResult
from kraft_jbod.messages.alter_partition_response import TopicData as AlterTopicResult
from kraft_jbod.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    AssignReplicasToDirsResponse,
)
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    DirectoryData as AssignDirResult,
)
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    PartitionData as AssignPartResult,
)
from kraft_jbod.messages.assign_replicas_to_dirs_response import (
    TopicData as AssignTopicResult,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest
from kraft_jbod.messages.broker_registration_response import BrokerRegistrationResponse
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest
from kraft_jbod.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.describe_cluster_response import DescribeClusterBroker, DescribeClusterResponse
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.fence_broker_record import FenceBrokerRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.producer_ids_record import ProducerIdsRecord
from kraft_jbod.messages.register_broker_record import BrokerEndpoint, BrokerFeature, RegisterBrokerRecord
from kraft_jbod.messages.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from kraft_jbod.messages.remove_topic_record import RemoveTopicRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.messages.unfence_broker_record import UnfenceBrokerRecord
from kraft_jbod.messages.unregister_broker_record import UnregisterBrokerRecord
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from kraft_jbod.messages.unregister_broker_response import UnregisterBrokerResponse
from kraft_jbod.messages.zk_migration_state_record import ZkMigrationStateRecord
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.primitives import uuid_signed_key, uuid_to_base64url

RecordAndVersion = tuple[Message, int]

NO_LEADER = -1
NO_LEADER_CHANGE = -2

API_CREATE_TOPICS = 19
API_DELETE_TOPICS = 20
API_ALTER_PARTITION = 56
API_DESCRIBE_CLUSTER = 60
API_BROKER_REGISTRATION = 62
API_BROKER_HEARTBEAT = 63
API_UNREGISTER_BROKER = 64
API_ALLOCATE_PRODUCER_IDS = 67
API_ASSIGN_REPLICAS_TO_DIRS = 73

_HANDLED: dict[int, tuple[int, int]] = {
    API_CREATE_TOPICS: CreateTopicsRequest.VALID_VERSIONS,
    API_DELETE_TOPICS: DeleteTopicsRequest.VALID_VERSIONS,
    API_DESCRIBE_CLUSTER: DescribeClusterRequest.VALID_VERSIONS,
    API_BROKER_REGISTRATION: BrokerRegistrationRequest.VALID_VERSIONS,
    API_BROKER_HEARTBEAT: BrokerHeartbeatRequest.VALID_VERSIONS,
    API_UNREGISTER_BROKER: UnregisterBrokerRequest.VALID_VERSIONS,
    API_ASSIGN_REPLICAS_TO_DIRS: AssignReplicasToDirsRequest.VALID_VERSIONS,
    API_ALTER_PARTITION: AlterPartitionRequest.VALID_VERSIONS,
    API_ALLOCATE_PRODUCER_IDS: AllocateProducerIdsRequest.VALID_VERSIONS,
}

_MAX_PARTITIONS_PER_REQUEST = 10_000
_POLICY_VIOLATION = 44
_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")
_MAX_TOPIC_NAME = 249
# Namespace for deterministic topic ids (uuid5 of cluster id, name and log offset).
_TOPIC_ID_NAMESPACE = uuid.UUID("6d1e2f0a-5b7c-4c8e-9a3d-0f4b2e8c7a15")
_ENDPOINT_BROKERS = 1
_ENDPOINT_CONTROLLERS = 2


def _sorted_dirs(dirs: Iterable[uuid.UUID]) -> tuple[uuid.UUID, ...]:
    """Directory lists are kept in Kafka's ``Uuid.compareTo`` order (signed msb, lsb)."""
    return tuple(sorted(dirs, key=uuid_signed_key))


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
    cs_offset: int = -1  # offset of the record that started controlled shutdown

    @property
    def active(self) -> bool:
        """Unfenced and not shutting down: may lead partitions."""
        return not self.fenced and not self.in_controlled_shutdown and self.cs_offset < 0

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
        )


class Partition:
    """One partition; tuples of ints/uuids keep it small (a million of these fit in RAM)."""

    __slots__ = (
        "adding", "dirs", "isr", "leader", "leader_epoch", "leader_recovery_state", "partition_epoch",
        "partition_id", "removing", "replicas", "topic_id",
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
        # An ongoing reassignment (KIP-455): replicas being added and being removed.
        self.adding: tuple[int, ...] = ()
        self.removing: tuple[int, ...] = ()

    def dir_of(self, broker_id: int) -> uuid.UUID:
        return self.dirs[self.replicas.index(broker_id)]

    def durable(self) -> tuple[Any, ...]:
        return (
            self.replicas, self.isr, self.dirs, self.leader, self.leader_epoch, self.partition_epoch,
            self.leader_recovery_state, self.adding, self.removing,
        )

    def __repr__(self) -> str:
        return (
            f"Partition({uuid_to_base64url(self.topic_id)}-{self.partition_id} replicas={self.replicas} "
            f"isr={self.isr} leader={self.leader} dirs={[uuid_to_base64url(d) for d in self.dirs]})"
        )


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, Partition]


@dataclass
class Outcome:
    """What one request produced: the response, and records to commit before sending it."""

    response: Message
    records: list[RecordAndVersion]


class _Draft:
    """Overlay of the changes proposed so far in one handle()/tick() call (Rule 2)."""

    __slots__ = ("active", "online", "parts", "records")

    def __init__(self) -> None:
        self.records: list[RecordAndVersion] = []
        self.parts: dict[Partition, tuple[tuple[int, ...], int, tuple[uuid.UUID, ...]]] = {}
        self.active: dict[int, bool] = {}
        self.online: dict[int, frozenset[uuid.UUID]] = {}


class ControllerState:
    """The controller's metadata and the rules that change it. See the module docstring."""

    def __init__(
        self,
        *,
        cluster_id: str,
        node_id: int,
        profile: Literal["kafka", "kip"] = "kafka",
        session_timeout_ms: int = 9000,
        heartbeat_interval_ms: int = 2000,
        default_replication_factor: int = 1,
        num_partitions: int = 1,
        controller_endpoints: Iterable[tuple[str, int]] = (),
    ) -> None:
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.profile: Profile = profile_named(profile)
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.default_replication_factor = default_replication_factor
        self.default_num_partitions = num_partitions
        self.controller_endpoints = list(controller_endpoints)
        # durable
        self._features: dict[str, int] = {}
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[uuid.UUID, TopicInfo] = {}
        self._topic_names: dict[str, uuid.UUID] = {}
        self._next_producer_id: int | None = None  # first id of the next block; None: no record yet
        self.configs = ConfigImage()
        self.acls = AclImage()
        self.leader_epoch = 1  # the raft leader epoch; the server sets it (DescribeQuorum)
        # derived from the durable state (rebuilt by apply)
        self._dir_owner: dict[uuid.UUID, int] = {}
        self._index: dict[int, dict[uuid.UUID, set[Partition]]] = {}
        self._leader_count: dict[int, int] = {}
        self._canon: dict[uuid.UUID, uuid.UUID] = {}
        self._partition_total = 0
        self.last_applied_offset = -1
        # soft
        self._last_contact: dict[int, int] = {}
        self._metadata_offset: dict[int, int] = {}

    # ------------------------------------------------------------------ read-only views

    @property
    def metadata_version(self) -> int:
        """Finalized metadata.version; an empty log means 3.0-IV1 (level 1), as in Kafka."""
        return self._features.get(fv.METADATA_VERSION, fv.MV_3_0_IV1)

    @property
    def finalized_features(self) -> dict[str, int]:
        return dict(self._features)

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self._brokers

    @property
    def topics(self) -> dict[uuid.UUID, TopicInfo]:
        return self._topics

    def topic_id_of(self, name: str) -> uuid.UUID | None:
        return self._topic_names.get(name)

    def partitions(self) -> Iterator[Partition]:
        for topic in self._topics.values():
            yield from topic.partitions.values()

    def partition(self, topic_id: uuid.UUID, partition_id: int) -> Partition | None:
        topic = self._topics.get(topic_id)
        return None if topic is None else topic.partitions.get(partition_id)

    def replicas_in(self, broker_id: int, directory: uuid.UUID) -> set[Partition]:
        """Partitions with a replica on ``broker_id`` assigned to ``directory`` (a view)."""
        return self._index.get(broker_id, {}).get(directory, set())

    def broker_state(self, broker_id: int) -> HbState | None:
        reg = self._brokers.get(broker_id)
        return None if reg is None else self._current_state(reg)

    @property
    def next_producer_id(self) -> int | None:
        """First id of the next producer-id block; None before any ProducerIdsRecord."""
        return self._next_producer_id

    def handled_api_versions(self) -> dict[int, tuple[int, int]]:
        """Api key -> (min, max) this state machine answers; ApiVersions is the server's."""
        return {**_HANDLED, **admin_apis.HANDLED}

    # Views the admin API modules (controller/apis/) use.
    def new_draft(self) -> _Draft:
        return _Draft()

    def acceptable_leader(self, d: _Draft, broker_id: int, directory: uuid.UUID) -> bool:
        return self._acceptable_leader(d, broker_id, directory)

    def is_active(self, d: _Draft, broker_id: int) -> bool:
        return self._is_active(d, broker_id)

    def default_dir(self, broker_id: int) -> uuid.UUID:
        return self._default_dir(broker_id)

    def reported_offsets(self) -> dict[int, int]:
        return dict(self._metadata_offset)

    def durable_state(self) -> dict[str, Any]:
        """Everything the log determines, in comparable form (replay must reproduce it)."""
        return {
            "features": dict(self._features),
            "next_producer_id": self._next_producer_id,
            "configs": self.configs.durable(),
            "acls": self.acls.durable(),
            "brokers": {b: reg.durable() for b, reg in sorted(self._brokers.items())},
            "topics": {
                tid: (t.name, {pid: p.durable() for pid, p in sorted(t.partitions.items())})
                for tid, t in self._topics.items()
            },
        }

    # ------------------------------------------------------------------ bootstrap

    @staticmethod
    def bootstrap_records(metadata_version_level: int) -> list[RecordAndVersion]:
        """Records a fresh log starts with: metadata.version first, then ZK migration NONE.

        Written as one atomic batch without Begin/EndTransaction markers, so the
        FeatureLevelRecord is the log's first record.

        Raises:
            ConfigError: the level is below 3.3-IV0 or above what we support.
        """
        level = metadata_version_level
        if not fv.MINIMUM_BOOTSTRAP_LEVEL <= level <= fv.MAX_SUPPORTED_LEVEL:
            raise ConfigError(
                f"metadata.version {level} is outside the bootstrap range "
                f"{fv.MINIMUM_BOOTSTRAP_LEVEL}..{fv.MAX_SUPPORTED_LEVEL}"
            )
        records: list[RecordAndVersion] = [(FeatureLevelRecord(name=fv.METADATA_VERSION, feature_level=level), 0)]
        if level >= fv.MV_3_4_IV0:
            records.append((ZkMigrationStateRecord(zk_migration_state=0), 0))
        return records

    # ------------------------------------------------------------------ apply (durable)

    def apply(self, offset: int, record: Message, version: int) -> None:
        """Apply one committed record at its log offset.

        Raises:
            StorageError: the record contradicts the state (unknown broker, topic or
                partition, bad Directories length); the log is not one we wrote.
        """
        handler = _APPLY.get(type(record))
        if handler is not None:
            handler(self, offset, record, version)
        self.last_applied_offset = offset

    def _canonical(self, u: uuid.UUID) -> uuid.UUID:
        """One shared UUID object per directory id, so partitions hold references only."""
        return self._canon.setdefault(u, u)

    def _apply_feature(self, offset: int, rec: FeatureLevelRecord, version: int) -> None:
        if rec.feature_level == 0:
            self._features.pop(rec.name, None)
        else:
            self._features[rec.name] = rec.feature_level

    def _apply_register(self, offset: int, rec: RegisterBrokerRecord, version: int) -> None:
        old = self._brokers.get(rec.broker_id)
        if old is not None:
            for d in old.registered_dirs:
                if self._dir_owner.get(d) == rec.broker_id:
                    del self._dir_owner[d]
        dirs = _sorted_dirs(self._canonical(d) for d in rec.log_dirs)
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
            cs_offset=offset if rec.in_controlled_shutdown else -1,
        )
        self._brokers[rec.broker_id] = reg
        for d in dirs:
            self._dir_owner[d] = rec.broker_id

    def _require_broker(self, offset: int, broker_id: int, epoch: int, what: str) -> BrokerInfo:
        reg = self._brokers.get(broker_id)
        if reg is None or reg.epoch != epoch:
            raise StorageError(f"{what} at offset {offset} names broker {broker_id} epoch {epoch}, not registered")
        return reg

    def _apply_unregister(self, offset: int, rec: UnregisterBrokerRecord, version: int) -> None:
        reg = self._require_broker(offset, rec.broker_id, rec.broker_epoch, "UnregisterBrokerRecord")
        for d in reg.registered_dirs:
            if self._dir_owner.get(d) == rec.broker_id:
                del self._dir_owner[d]
        del self._brokers[rec.broker_id]
        self._last_contact.pop(rec.broker_id, None)
        self._metadata_offset.pop(rec.broker_id, None)

    def _apply_fence(self, offset: int, rec: FenceBrokerRecord, version: int) -> None:
        reg = self._require_broker(offset, rec.id, rec.epoch, "FenceBrokerRecord")
        reg.fenced = True
        reg.cs_offset = -1

    def _apply_unfence(self, offset: int, rec: UnfenceBrokerRecord, version: int) -> None:
        reg = self._require_broker(offset, rec.id, rec.epoch, "UnfenceBrokerRecord")
        reg.fenced = False

    def _apply_registration_change(self, offset: int, rec: BrokerRegistrationChangeRecord, version: int) -> None:
        reg = self._require_broker(offset, rec.broker_id, rec.broker_epoch, "BrokerRegistrationChangeRecord")
        if rec.fenced == 1:
            reg.fenced = True
            reg.cs_offset = -1
        elif rec.fenced == -1:
            reg.fenced = False
        if rec.in_controlled_shutdown == 1:
            reg.in_controlled_shutdown = True
            reg.cs_offset = offset
        if rec.log_dirs:  # empty means "no change" (Kafka replays it that way)
            dirs = _sorted_dirs(self._canonical(d) for d in rec.log_dirs)
            reg.online_dirs = dirs
            reg.online_set = frozenset(dirs)

    def _apply_topic(self, offset: int, rec: TopicRecord, version: int) -> None:
        if rec.topic_id in self._topics or rec.name in self._topic_names:
            raise StorageError(f"TopicRecord at offset {offset} re-creates topic {rec.name!r}")
        self._topics[rec.topic_id] = TopicInfo(rec.name, rec.topic_id, {})
        self._topic_names[rec.name] = rec.topic_id

    def _index_add(self, p: Partition) -> None:
        index = self._index
        for b, d in zip(p.replicas, p.dirs, strict=True):
            per = index.get(b)
            if per is None:
                per = index[b] = {}
            bucket = per.get(d)
            if bucket is None:
                bucket = per[d] = set()
            bucket.add(p)

    def _index_remove(self, p: Partition) -> None:
        index = self._index
        for b, d in zip(p.replicas, p.dirs, strict=True):
            per = index[b]
            bucket = per[d]
            bucket.discard(p)
            if not bucket:
                del per[d]
                if not per:
                    del index[b]

    def _set_leader(self, p: Partition, leader: int) -> None:
        counts = self._leader_count
        if p.leader >= 0:
            left = counts[p.leader] - 1
            if left:
                counts[p.leader] = left
            else:
                del counts[p.leader]
        if leader >= 0:
            counts[leader] = counts.get(leader, 0) + 1
        p.leader = leader

    def _apply_partition(self, offset: int, rec: PartitionRecord, version: int) -> None:
        topic = self._topics.get(rec.topic_id)
        if topic is None:
            raise StorageError(f"PartitionRecord at offset {offset} for unknown topic {rec.topic_id}")
        if rec.partition_id in topic.partitions:
            raise StorageError(f"PartitionRecord at offset {offset} re-creates partition {rec.partition_id}")
        replicas = tuple(rec.replicas)
        dirs = self._record_dirs(offset, replicas, rec.directories)
        p = Partition(
            topic.topic_id, rec.partition_id, replicas, tuple(rec.isr), dirs, NO_LEADER,
            rec.leader_epoch, rec.partition_epoch, rec.leader_recovery_state,
        )
        p.adding, p.removing = tuple(rec.adding_replicas), tuple(rec.removing_replicas)
        self._set_leader(p, rec.leader)
        topic.partitions[rec.partition_id] = p
        self._index_add(p)
        self._partition_total += 1

    def _record_dirs(
        self, offset: int, replicas: tuple[int, ...], directories: list[uuid.UUID]
    ) -> tuple[uuid.UUID, ...]:
        if not directories:
            # A v0 record (or no assignment at all): the directory is unknown but the
            # replica was placed before JBOD, which is what MIGRATING means.
            migrating = self._canonical(self.profile.migrating)
            return (migrating,) * len(replicas)
        if len(directories) != len(replicas):
            raise StorageError(
                f"record at offset {offset}: {len(directories)} Directories for {len(replicas)} Replicas"
            )
        return tuple(self._canonical(d) for d in directories)

    def _apply_partition_change(self, offset: int, rec: PartitionChangeRecord, version: int) -> None:
        p = self.partition(rec.topic_id, rec.partition_id)
        if p is None:
            raise StorageError(
                f"PartitionChangeRecord at offset {offset} for unknown partition "
                f"{rec.topic_id}-{rec.partition_id}"
            )
        new_replicas = p.replicas if rec.replicas is None else tuple(rec.replicas)
        if rec.directories is not None:
            new_dirs = self._record_dirs(offset, new_replicas, rec.directories)
        elif rec.replicas is not None and new_replicas != p.replicas:
            # Replicas changed without Directories: keep known dirs, the rest unassigned.
            known = dict(zip(p.replicas, p.dirs, strict=True))
            unassigned = self._canonical(self.profile.unassigned)
            new_dirs = tuple(known.get(b, unassigned) for b in new_replicas)
        else:
            new_dirs = p.dirs
        if new_replicas != p.replicas or new_dirs != p.dirs:
            self._index_remove(p)
            p.replicas, p.dirs = new_replicas, new_dirs
            self._index_add(p)
        if rec.isr is not None:
            p.isr = tuple(rec.isr)
        if rec.leader != NO_LEADER_CHANGE:
            self._set_leader(p, rec.leader)
            p.leader_epoch += 1
        if rec.leader_recovery_state != ap.NO_RECOVERY_CHANGE:
            p.leader_recovery_state = rec.leader_recovery_state
        if rec.adding_replicas is not None:
            p.adding = tuple(rec.adding_replicas)
        if rec.removing_replicas is not None:
            p.removing = tuple(rec.removing_replicas)
        p.partition_epoch += 1

    def _apply_config(self, offset: int, rec: ConfigRecord, version: int) -> None:
        self.configs.apply(rec)

    def _apply_acl(self, offset: int, rec: AccessControlEntryRecord, version: int) -> None:
        self.acls.apply_entry(rec)

    def _apply_remove_acl(self, offset: int, rec: RemoveAccessControlEntryRecord, version: int) -> None:
        try:
            self.acls.apply_remove(rec, offset)
        except KeyError as exc:
            raise StorageError(str(exc.args[0])) from None

    def _apply_producer_ids(self, offset: int, rec: ProducerIdsRecord, version: int) -> None:
        self._next_producer_id = pids.replayed(self._next_producer_id, rec.next_producer_id, offset)

    def _apply_remove_topic(self, offset: int, rec: RemoveTopicRecord, version: int) -> None:
        topic = self._topics.pop(rec.topic_id, None)
        if topic is None:
            raise StorageError(f"RemoveTopicRecord at offset {offset} for unknown topic {rec.topic_id}")
        del self._topic_names[topic.name]
        self.configs.drop_topic(topic.name)
        for p in topic.partitions.values():
            self._index_remove(p)
            self._set_leader(p, NO_LEADER)
        self._partition_total -= len(topic.partitions)

    # ------------------------------------------------------------------ draft helpers

    def _view(self, d: _Draft, p: Partition) -> tuple[tuple[int, ...], int, tuple[uuid.UUID, ...]]:
        got = d.parts.get(p)
        return got if got is not None else (p.isr, p.leader, p.dirs)

    def _is_active(self, d: _Draft, broker_id: int) -> bool:
        got = d.active.get(broker_id)
        if got is not None:
            return got
        reg = self._brokers.get(broker_id)
        return reg is not None and reg.active

    def _online_set(self, d: _Draft, broker_id: int) -> frozenset[uuid.UUID] | None:
        got = d.online.get(broker_id)
        if got is not None:
            return got
        reg = self._brokers.get(broker_id)
        return None if reg is None else reg.online_set

    def _dir_online(self, d: _Draft, broker_id: int, directory: uuid.UUID) -> bool:
        """Kafka's DirectoryId.isOnline (and the KIP's variant in the kip profile)."""
        prof = self.profile
        if directory == prof.unassigned or directory == prof.migrating:
            return True
        if directory == prof.lost:
            return False
        online = self._online_set(d, broker_id)
        if online is None:
            return False
        if not online or directory in online:
            return True
        return prof.single_dir_unknown_is_online and len(online) == 1

    def _acceptable_leader(self, d: _Draft, broker_id: int, directory: uuid.UUID) -> bool:
        return self._is_active(d, broker_id) and self._dir_online(d, broker_id, directory)

    def _elect(
        self, d: _Draft, p: Partition, isr: tuple[int, ...], dirs: tuple[uuid.UUID, ...], exclude: int
    ) -> int:
        """First replica (preferred order) in the ISR that may lead; clean elections only."""
        for b, directory in zip(p.replicas, dirs, strict=True):
            if b != exclude and b in isr and self._acceptable_leader(d, b, directory):
                return b
        return NO_LEADER

    def _change(
        self,
        d: _Draft,
        p: Partition,
        *,
        isr: tuple[int, ...] | None = None,
        leader: int = NO_LEADER_CHANGE,
        dirs: tuple[uuid.UUID, ...] | None = None,
    ) -> None:
        old_isr, old_leader, old_dirs = self._view(d, p)
        rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id)
        if isr is not None:
            rec.isr = list(isr)
        if leader != NO_LEADER_CHANGE:
            rec.leader = leader
        if dirs is not None:
            rec.directories = list(dirs)
        d.records.append((rec, fv.partition_change_record_version(self.metadata_version)))
        d.parts[p] = (
            old_isr if isr is None else isr,
            old_leader if leader == NO_LEADER_CHANGE else leader,
            old_dirs if dirs is None else dirs,
        )

    def _remove_from_isr(self, d: _Draft, p: Partition, broker_id: int) -> None:
        """Take ``broker_id`` out of the ISR and leadership; the last ISR member stays (leader -1)."""
        isr, leader, dirs = self._view(d, p)
        if broker_id not in isr and leader != broker_id:
            return
        new_isr = tuple(b for b in isr if b != broker_id) or isr
        keep = leader not in (NO_LEADER, broker_id)
        if keep and self._acceptable_leader(d, leader, dirs[p.replicas.index(leader)]):
            new_leader = leader
        else:
            new_leader = self._elect(d, p, new_isr, dirs, exclude=broker_id)
        if new_isr == isr and new_leader == leader:
            return
        leader_field = NO_LEADER_CHANGE if new_leader == leader else new_leader
        if leader_field == NO_LEADER_CHANGE and self.metadata_version < 12 and new_leader != NO_LEADER:
            leader_field = new_leader  # before 3.6-IV0 an ISR shrink bumps the leader epoch
        self._change(d, p, isr=None if new_isr == isr else new_isr, leader=leader_field)

    def _broker_partitions(self, broker_id: int) -> list[Partition]:
        per = self._index.get(broker_id)
        if not per:
            return []
        out: list[Partition] = []
        for bucket in per.values():
            out.extend(bucket)
        return out

    def _fence(self, d: _Draft, reg: BrokerInfo, *, with_record: bool = True) -> None:
        d.active[reg.broker_id] = False
        for p in self._sorted(self._broker_partitions(reg.broker_id)):
            self._remove_from_isr(d, p, reg.broker_id)
        if not with_record:
            return
        if fv.uses_registration_change_record(self.metadata_version):
            change = BrokerRegistrationChangeRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch, fenced=1)
            d.records.append((change, 0))
        else:
            d.records.append((FenceBrokerRecord(id=reg.broker_id, epoch=reg.epoch), 0))

    def _unfence(self, d: _Draft, reg: BrokerInfo) -> None:
        if fv.uses_registration_change_record(self.metadata_version):
            change = BrokerRegistrationChangeRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch, fenced=-1)
            d.records.append((change, 0))
        else:
            d.records.append((UnfenceBrokerRecord(id=reg.broker_id, epoch=reg.epoch), 0))
        d.active[reg.broker_id] = not reg.in_controlled_shutdown and reg.cs_offset < 0
        for p in self._sorted(self._broker_partitions(reg.broker_id)):
            isr, leader, dirs = self._view(d, p)
            if leader == NO_LEADER and reg.broker_id in isr:
                chosen = self._elect(d, p, isr, dirs, exclude=NO_LEADER_CHANGE)
                if chosen != NO_LEADER:
                    self._change(d, p, leader=chosen)

    def _dirs_offline(self, d: _Draft, reg: BrokerInfo, newly_offline: list[uuid.UUID]) -> None:
        """PartitionChangeRecords for every replica in the dirs, then one BRCR v2 (O(replicas in them))."""
        online = self._online_set(d, reg.broker_id) or frozenset()
        gone = frozenset(newly_offline)
        d.online[reg.broker_id] = online - gone
        per = self._index.get(reg.broker_id, {})
        for directory in newly_offline:
            for p in self._sorted(per.get(directory, ())):
                self._remove_from_isr(d, p, reg.broker_id)
        remaining = [x for x in reg.online_dirs if x not in gone]
        d.records.append(
            (BrokerRegistrationChangeRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch, log_dirs=remaining), 2)
        )

    @staticmethod
    def _sorted(parts: Iterable[Partition]) -> list[Partition]:
        """Deterministic record order: set iteration order is not stable across runs."""
        return sorted(parts, key=lambda p: (p.topic_id.int, p.partition_id))

    def _current_state(self, reg: BrokerInfo) -> HbState:
        if reg.fenced:
            return HbState.FENCED
        if reg.in_controlled_shutdown or reg.cs_offset >= 0:
            return HbState.CONTROLLED_SHUTDOWN
        return HbState.UNFENCED

    def _session_valid(self, broker_id: int, now_ms: int) -> bool:
        last = self._last_contact.setdefault(broker_id, now_ms)
        return now_ms - last <= self.session_timeout_ms

    # ------------------------------------------------------------------ handle

    def handle(
        self,
        api_key: int,
        api_version: int,
        request: Message,
        *,
        now_ms: int,
        next_offset: int,
        principal: str | None = None,
    ) -> Outcome:
        """Turn one decoded request into a response and the records it needs.

        Raises:
            ProtocolError: an api key or version this controller does not answer, or a
                body of the wrong type; Kafka closes the connection for these.
        """
        if api_key in admin_apis.HANDLED and api_key not in _HANDLED:
            lo, hi = admin_apis.HANDLED[api_key]
            if not lo <= api_version <= hi:
                raise ProtocolError(f"api key {api_key} version {api_version} is not supported")

            def inner(key: int, version: int, body: Message, principal: str | None = None) -> Outcome:
                return self.handle(key, version, body, now_ms=now_ms, next_offset=next_offset, principal=principal)

            response, records = admin_apis.handle(
                self, api_key, api_version, request, next_offset=next_offset, now_ms=now_ms, inner=inner,
                principal=principal,
            )
            return Outcome(response, records)
        versions = _HANDLED.get(api_key)
        if versions is None:
            raise ProtocolError(f"api key {api_key} is not handled by the controller")
        if not versions[0] <= api_version <= versions[1]:
            raise ProtocolError(f"api key {api_key} version {api_version} is not supported")
        if api_key == API_BROKER_HEARTBEAT and isinstance(request, BrokerHeartbeatRequest):
            return self._heartbeat(api_version, request, now_ms, next_offset)
        if api_key == API_BROKER_REGISTRATION and isinstance(request, BrokerRegistrationRequest):
            return self._register(api_version, request, now_ms, next_offset)
        if api_key == API_ASSIGN_REPLICAS_TO_DIRS and isinstance(request, AssignReplicasToDirsRequest):
            return self._assign(request)
        if api_key == API_CREATE_TOPICS and isinstance(request, CreateTopicsRequest):
            return self._create_topics(api_version, request, next_offset)
        if api_key == API_DELETE_TOPICS and isinstance(request, DeleteTopicsRequest):
            return self._delete_topics(api_version, request)
        if api_key == API_UNREGISTER_BROKER and isinstance(request, UnregisterBrokerRequest):
            return self._unregister(request)
        if api_key == API_DESCRIBE_CLUSTER and isinstance(request, DescribeClusterRequest):
            return self._describe_cluster(api_version, request)
        if api_key == API_ALTER_PARTITION and isinstance(request, AlterPartitionRequest):
            return self._alter_partition(api_version, request)
        if api_key == API_ALLOCATE_PRODUCER_IDS and isinstance(request, AllocateProducerIdsRequest):
            return self._allocate_producer_ids(request)
        raise ProtocolError(f"api key {api_key} got a {type(request).__name__} body")

    # -- BrokerRegistration

    def _register(self, api_version: int, req: BrokerRegistrationRequest, now_ms: int, next_offset: int) -> Outcome:
        def fail(code: int) -> Outcome:
            return Outcome(BrokerRegistrationResponse(error_code=code, broker_epoch=-1), [])

        if req.cluster_id != self.cluster_id:
            return fail(ec.INCONSISTENT_CLUSTER_ID)
        existing = self._brokers.get(req.broker_id)
        new_incarnation = existing is None or existing.incarnation_id != req.incarnation_id
        if existing is not None and new_incarnation and self._session_valid(req.broker_id, now_ms):
            return fail(ec.DUPLICATE_BROKER_REGISTRATION)
        if api_version >= 1 and req.is_migrating_zk_broker:
            return fail(ec.BROKER_ID_NOT_REGISTERED)
        mv = self.metadata_version
        jbod = fv.supports_jbod(mv)
        dirs = list(req.log_dirs) if api_version >= 2 else []
        if jbod:
            if not dirs:
                return fail(self.profile.empty_log_dirs_error)
            if any(is_reserved_directory(x) for x in dirs):
                return fail(ec.INVALID_REGISTRATION)
            if len(set(dirs)) != len(dirs):
                return fail(ec.INVALID_REGISTRATION)
            if any(self._dir_owner.get(x, req.broker_id) != req.broker_id for x in dirs):
                return fail(ec.INVALID_REGISTRATION)
        else:
            dirs = []
        if not self._features_ok(req):
            return fail(ec.UNSUPPORTED_VERSION)

        d = _Draft()
        if existing is not None and existing.active:
            if new_incarnation:
                # The old incarnation still leads partitions; move them before the new
                # registration (fenced) replaces it, so no leader sits on a fenced broker.
                self._fence(d, existing, with_record=False)
            elif jbod:
                dropped = [x for x in existing.online_dirs if x not in set(dirs)]
                if dropped:
                    d.online[existing.broker_id] = frozenset(dirs)
                    for directory in dropped:
                        for p in self._sorted(self._index.get(existing.broker_id, {}).get(directory, ())):
                            self._remove_from_isr(d, p, existing.broker_id)
        if new_incarnation or existing is None:
            epoch, fenced, ics = next_offset + len(d.records), True, False
        else:
            epoch, fenced, ics = existing.epoch, existing.fenced, existing.in_controlled_shutdown
        rec = RegisterBrokerRecord(
            broker_id=req.broker_id,
            incarnation_id=req.incarnation_id,
            broker_epoch=epoch,
            end_points=[BrokerEndpoint(x.name, x.host, x.port, x.security_protocol) for x in req.listeners],
            features=[BrokerFeature(f.name, f.min_supported_version, f.max_supported_version) for f in req.features],
            rack=req.rack,
            fenced=fenced,
            in_controlled_shutdown=ics,
            log_dirs=list(_sorted_dirs(dirs)),
        )
        d.records.append((rec, fv.register_broker_record_version(mv)))
        self._last_contact[req.broker_id] = now_ms
        return Outcome(BrokerRegistrationResponse(error_code=ec.NONE, broker_epoch=epoch), d.records)

    def _features_ok(self, req: BrokerRegistrationRequest) -> bool:
        finalized = dict(self._features)
        finalized[fv.METADATA_VERSION] = self.metadata_version
        finalized[fv.KRAFT_VERSION] = 0  # the live kraft.version of a static single voter
        listed = {f.name: (f.min_supported_version, f.max_supported_version) for f in req.features}
        if fv.METADATA_VERSION not in listed:
            listed[fv.METADATA_VERSION] = (1, 1)
        for name, (lo, hi) in listed.items():
            level = finalized.get(name, 0)
            if not lo <= level <= hi:
                return False
        return all(level == 0 or name in listed for name, level in finalized.items())

    # -- BrokerHeartbeat

    def _heartbeat(self, api_version: int, req: BrokerHeartbeatRequest, now_ms: int, next_offset: int) -> Outcome:
        reg = self._brokers.get(req.broker_id)
        if reg is None or reg.epoch != req.broker_epoch:
            return Outcome(BrokerHeartbeatResponse(error_code=ec.STALE_BROKER_EPOCH), [])
        b = reg.broker_id
        self._last_contact[b] = now_ms
        self._metadata_offset[b] = req.current_metadata_offset
        caught_up = req.current_metadata_offset >= reg.reg_offset
        state = self._current_state(reg)
        mv = self.metadata_version
        jbod = fv.supports_jbod(mv)
        offline = list(req.offline_log_dirs) if api_version >= 1 and jbod else []
        prof = self.profile
        if offline and prof.unknown_offline_dir_error is not None:
            registered = set(reg.registered_dirs)
            if any(x not in registered for x in offline):
                return Outcome(
                    BrokerHeartbeatResponse(
                        error_code=prof.unknown_offline_dir_error,
                        is_caught_up=caught_up,
                        is_fenced=state.fenced,
                        should_shut_down=False,
                    ),
                    [],
                )
        unfence_allowed = True
        if prof.fence_while_unassigned and jbod and len(reg.registered_dirs) >= 2:
            unfence_allowed = not self._index.get(b, {}).get(prof.unassigned)
        event = classify(
            state,
            want_fence=req.want_fence,
            want_shut_down=req.want_shut_down,
            caught_up=caught_up,
            unfence_allowed=unfence_allowed,
            leads_partitions=self._leader_count.get(b, 0) > 0,
            # Only a broker in controlled shutdown needs the O(brokers) scan; for the others
            # (cs_offset -1) the comparison is true whatever the lowest offset is.
            shutdown_offset_replayed=reg.cs_offset < 0 or reg.cs_offset <= self._lowest_active_offset(),
        )
        effect, next_state = transition(state, event)
        d = _Draft()
        if effect is HbEffect.FENCE:
            self._fence(d, reg)
        elif effect is HbEffect.UNFENCE:
            self._unfence(d, reg)
        elif effect is HbEffect.ENTER_CONTROLLED_SHUTDOWN:
            if mv >= fv.MV_3_3_IV3:
                d.records.append(
                    (BrokerRegistrationChangeRecord(broker_id=b, broker_epoch=reg.epoch, in_controlled_shutdown=1), 1)
                )
            self._fence(d, reg, with_record=False)
            if mv < fv.MV_3_3_IV3:
                # No durable flag before 3.3-IV3: remember the offset softly, like Kafka.
                reg.cs_offset = next_offset + len(d.records) - 1
        if offline:
            wanted = set(offline)
            newly = [x for x in reg.online_dirs if x in wanted]
            if newly:
                self._dirs_offline(d, reg, newly)
        resp = BrokerHeartbeatResponse(
            error_code=ec.NONE,
            is_caught_up=caught_up,
            is_fenced=next_state.fenced,
            should_shut_down=next_state.should_shut_down,
        )
        return Outcome(resp, d.records)

    def _lowest_active_offset(self) -> int:
        lowest: int | None = None
        for b, reg in self._brokers.items():
            if reg.active:
                off = self._metadata_offset.get(b, -1)
                lowest = off if lowest is None or off < lowest else lowest
        return (1 << 63) - 1 if lowest is None else lowest

    # -- AssignReplicasToDirs

    def _assign(self, req: AssignReplicasToDirsRequest) -> Outcome:
        if not fv.supports_jbod(self.metadata_version):
            return Outcome(AssignReplicasToDirsResponse(error_code=ec.UNSUPPORTED_VERSION), [])
        reg = self._brokers.get(req.broker_id)
        if reg is None or reg.epoch != req.broker_epoch:
            return Outcome(AssignReplicasToDirsResponse(error_code=ec.STALE_BROKER_EPOCH), [])
        b = reg.broker_id
        d = _Draft()
        to_offline: list[Partition] = []
        results: list[AssignDirResult] = []
        for dd in req.directories:
            directory = self._canonical(dd.id)
            offline = not self._dir_online(d, b, directory)
            topics_out: list[AssignTopicResult] = []
            for td in dd.topics:
                topic = self._topics.get(td.topic_id)
                parts_out: list[AssignPartResult] = []
                for pd in td.partitions:
                    code = ec.NONE
                    p = None if topic is None else topic.partitions.get(pd.partition_index)
                    if topic is None:
                        code = ec.UNKNOWN_TOPIC_ID
                    elif p is None:
                        code = ec.UNKNOWN_TOPIC_OR_PARTITION
                    elif b not in p.replicas:
                        code = ec.NOT_LEADER_OR_FOLLOWER
                    else:
                        _, _, dirs = self._view(d, p)
                        i = p.replicas.index(b)
                        if dirs[i] != directory:
                            self._change(d, p, dirs=(*dirs[:i], directory, *dirs[i + 1:]))
                        if offline:
                            to_offline.append(p)
                    parts_out.append(AssignPartResult(partition_index=pd.partition_index, error_code=code))
                topics_out.append(AssignTopicResult(topic_id=td.topic_id, partitions=parts_out))
            results.append(AssignDirResult(id=dd.id, topics=topics_out))
        for p in to_offline:
            self._remove_from_isr(d, p, b)
        return Outcome(AssignReplicasToDirsResponse(error_code=ec.NONE, directories=results), d.records)

    # -- UnregisterBroker

    def _unregister(self, req: UnregisterBrokerRequest) -> Outcome:
        reg = self._brokers.get(req.broker_id)
        if reg is None:
            return Outcome(
                UnregisterBrokerResponse(
                    error_code=ec.BROKER_ID_NOT_REGISTERED, error_message=f"Broker {req.broker_id} is not registered."
                ),
                [],
            )
        d = _Draft()
        self._fence(d, reg, with_record=False)
        d.records.append((UnregisterBrokerRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch), 0))
        return Outcome(UnregisterBrokerResponse(error_code=ec.NONE, error_message=None), d.records)

    # -- AllocateProducerIds

    def _allocate_producer_ids(self, req: AllocateProducerIdsRequest) -> Outcome:
        """One block of producer ids and the ProducerIdsRecord that makes it durable."""
        reg = self._brokers.get(req.broker_id)
        if reg is None or reg.epoch != req.broker_epoch:
            return Outcome(AllocateProducerIdsResponse(error_code=ec.STALE_BROKER_EPOCH), [])
        block = pids.next_block(self._next_producer_id)
        if block is None:
            return Outcome(AllocateProducerIdsResponse(error_code=pids.UNKNOWN_SERVER_ERROR), [])
        first, length = block
        rec = ProducerIdsRecord(broker_id=req.broker_id, broker_epoch=req.broker_epoch, next_producer_id=first + length)
        resp = AllocateProducerIdsResponse(error_code=ec.NONE, producer_id_start=first, producer_id_len=length)
        return Outcome(resp, [(rec, 0)])

    # -- AlterPartition

    def _alter_partition(self, api_version: int, req: AlterPartitionRequest) -> Outcome:
        """ISR and leader-recovery-state changes from a partition leader (rules in alter_partition.py).

        Entries are checked in request order against the partition as changed by earlier
        entries of the same request, so a repeated partition sees its own first change
        (and, carrying the old partition epoch, gets INVALID_UPDATE_VERSION).
        """
        reg = self._brokers.get(req.broker_id)
        if reg is None or reg.epoch != req.broker_epoch:
            return Outcome(AlterPartitionResponse(error_code=ec.STALE_BROKER_EPOCH), [])
        by_id = api_version >= 2
        mv = self.metadata_version
        record_version = fv.partition_change_record_version(mv)
        seen: dict[Partition, ap.PartitionView] = {}
        records: list[RecordAndVersion] = []
        topics_out: list[AlterTopicResult] = []
        empty = _Draft()
        for td in req.topics:
            out = AlterTopicResult(topic_name=td.topic_name if not by_id else "", topic_id=td.topic_id)
            topics_out.append(out)
            tid = td.topic_id if by_id else self._topic_names.get(td.topic_name)
            topic = None if tid is None else self._topics.get(tid)
            if topic is None:
                code = ec.UNKNOWN_TOPIC_ID if by_id else ec.UNKNOWN_TOPIC_OR_PARTITION
                out.partitions = [
                    AlterPartResult(partition_index=pd.partition_index, error_code=code) for pd in td.partitions
                ]
                continue
            for pd in td.partitions:
                p = topic.partitions.get(pd.partition_index)
                view = None if p is None else seen.get(p) or _partition_view(p)

                def eligibility(b: int, epoch: int, p: Partition | None = p) -> str | None:
                    return self._isr_ineligibility(empty, p, b, epoch)

                prop = _proposal(api_version, pd)
                verdict = ap.validate(req.broker_id, view, prop, api_version, eligibility)
                if verdict.error_code != ec.NONE or p is None or view is None:
                    out.partitions.append(
                        AlterPartResult(partition_index=pd.partition_index, error_code=verdict.error_code)
                    )
                    continue
                if (p.adding or p.removing) and p not in seen:
                    # An ongoing reassignment: Kafka's change builder may complete it here.
                    moved = admin_apis.reassignment_isr_change(self, p, [b for b, _ in prop.new_isr],
                                                               prop.leader_recovery_state)
                    if moved is not None:
                        rec, view = moved
                        records.append((rec, record_version))
                        seen[p] = view
                        if view.leader != req.broker_id:
                            out.partitions.append(AlterPartResult(partition_index=pd.partition_index,
                                                                  error_code=ec.NEW_LEADER_ELECTED))
                            continue
                        out.partitions.append(AlterPartResult(
                            partition_index=pd.partition_index, error_code=ec.NONE, leader_id=view.leader,
                            leader_epoch=view.leader_epoch, isr=list(view.isr),
                            leader_recovery_state=view.leader_recovery_state, partition_epoch=view.partition_epoch))
                        continue
                change = ap.plan_change(view, [b for b, _ in prop.new_isr], prop.leader_recovery_state, mv)
                if change is not None:
                    rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id)
                    if change.isr is not None:
                        rec.isr = list(change.isr)
                    rec.leader = change.leader
                    rec.leader_recovery_state = change.leader_recovery_state
                    records.append((rec, record_version))
                    view = seen[p] = change.apply_to(view)
                out.partitions.append(
                    AlterPartResult(
                        partition_index=pd.partition_index,
                        error_code=ec.NONE,
                        leader_id=view.leader,
                        leader_epoch=view.leader_epoch,
                        isr=list(view.isr),
                        leader_recovery_state=view.leader_recovery_state,
                        partition_epoch=view.partition_epoch,
                    )
                )
        return Outcome(AlterPartitionResponse(error_code=ec.NONE, topics=topics_out), records)

    def _isr_ineligibility(self, d: _Draft, p: Partition | None, broker_id: int, epoch: int) -> str | None:
        """Why ``broker_id`` may not be in ``p``'s ISR (Rule 8 of alter_partition.py), or None."""
        reg = self._brokers.get(broker_id)
        if reg is None:
            return "not registered"
        if reg.in_controlled_shutdown or reg.cs_offset >= 0:
            return "shutting down"
        if reg.fenced:
            return "fenced"
        if epoch != -1 and epoch != reg.epoch:
            return f"broker epoch {epoch} is not {reg.epoch}"
        if p is not None and broker_id in p.replicas:
            directory = p.dir_of(broker_id)
            if not self._dir_online(d, broker_id, directory):
                return f"directory {uuid_to_base64url(directory)} is offline"
        return None

    # -- DescribeCluster

    def _describe_cluster(self, api_version: int, req: DescribeClusterRequest) -> Outcome:
        endpoint_type = req.endpoint_type if api_version >= 1 else _ENDPOINT_BROKERS
        resp = DescribeClusterResponse(cluster_id=self.cluster_id, controller_id=-1)
        if api_version >= 1:
            resp.endpoint_type = endpoint_type
        if endpoint_type == _ENDPOINT_BROKERS:
            resp.controller_id = self.node_id
            for b, reg in sorted(self._brokers.items()):
                if reg.fenced or not reg.listeners:
                    continue
                _, host, port, _ = reg.listeners[0]
                resp.brokers.append(DescribeClusterBroker(broker_id=b, host=host, port=port, rack=reg.rack))
        elif endpoint_type == _ENDPOINT_CONTROLLERS:
            resp.controller_id = self.node_id
            for host, port in self.controller_endpoints:
                resp.brokers.append(DescribeClusterBroker(broker_id=self.node_id, host=host, port=port, rack=None))
        else:
            resp.error_code = ec.UNSUPPORTED_ENDPOINT_TYPE
            resp.error_message = f"unsupported endpoint type {endpoint_type}"
        return Outcome(resp, [])

    # -- CreateTopics

    def _default_dir(self, broker_id: int) -> uuid.UUID:
        """Kafka's ClusterControlManager.defaultDir (and the kip profile's variant)."""
        prof = self.profile
        if not fv.supports_jbod(self.metadata_version):
            return self._canonical(prof.migrating)
        reg = self._brokers.get(broker_id)
        if reg is None:
            return self._canonical(prof.unassigned)
        n = len(reg.online_dirs)
        if n == 0:
            return self._canonical(prof.migrating)
        if n == 1:
            return reg.online_dirs[0]
        return self._canonical(prof.unassigned)

    def _new_topic_id(self, name: str, next_offset: int) -> uuid.UUID:
        """Deterministic (replay needs no randomness), never reserved, never a '-' string."""
        salt = 0
        while True:
            u = uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{self.cluster_id}/{name}/{next_offset}/{salt}")
            salt += 1
            if is_reserved_directory(u) or u in self._topics or uuid_to_base64url(u).startswith("-"):
                continue
            return u

    def _create_topics(self, api_version: int, req: CreateTopicsRequest, next_offset: int) -> Outcome:
        # Kafka (KAFKA-17870) refuses the whole request past 10,000 new partitions, before
        # planning any: a NumPartitions of 2**31-1 must not be planned (found by the fuzzer).
        total = 0
        for t in req.topics:
            total += len(t.assignments) if t.assignments else (
                self.default_num_partitions if t.num_partitions == -1 else max(0, t.num_partitions)
            )
        if total > _MAX_PARTITIONS_PER_REQUEST:
            refused = [
                CreatableTopicResult(
                    name=t.name, error_code=_POLICY_VIOLATION,
                    error_message="Excessively large number of partitions per request.",
                )
                for t in req.topics
            ]
            return Outcome(CreateTopicsResponse(topics=refused), [])
        counts: dict[str, int] = {}
        for t in req.topics:
            counts[t.name] = counts.get(t.name, 0) + 1
        active = sorted(b for b, reg in self._brokers.items() if reg.active)
        d = _Draft()
        results: list[CreatableTopicResult] = []
        placed_so_far = self._partition_total
        for t in req.topics:
            res = CreatableTopicResult(name=t.name, error_message=None)
            results.append(res)
            if counts[t.name] > 1:
                res.error_code, res.error_message = ec.INVALID_REQUEST, "Duplicate topic name."
                continue
            err = _topic_name_error(t.name)
            if err is not None:
                res.error_code, res.error_message = ec.INVALID_TOPIC_EXCEPTION, err
                continue
            if t.name in self._topic_names:
                res.error_code, res.error_message = ec.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
                continue
            # Topic configs (controller/apis/configs.py): validated before placement, written
            # right after the TopicRecord, and listed in v5+ answers, as Kafka does.
            config_records = admin_apis.topic_config_records(self, t.name, [(c.name, c.value) for c in t.configs])
            if isinstance(config_records, tuple):
                res.error_code, res.error_message = config_records
                continue
            plan = self._plan_topic(t, active, placed_so_far)
            if isinstance(plan, tuple):
                res.error_code, res.error_message = plan
                continue
            placed_so_far += len(plan)
            rf = len(plan[0]) if plan else 0
            if api_version >= 5:
                res.num_partitions, res.replication_factor = len(plan), rf
                res.configs = admin_apis.created_topic_configs(self, config_records)
            if req.validate_only:
                continue
            topic_id = self._new_topic_id(t.name, next_offset + len(d.records))
            if api_version >= 7:
                res.topic_id = topic_id
            d.records.append((TopicRecord(name=t.name, topic_id=topic_id), 0))
            d.records.extend(config_records)
            pversion = fv.partition_record_version(self.metadata_version)
            for pid, replicas in enumerate(plan):
                dirs = [self._default_dir(b) for b in replicas]
                isr = [b for b in replicas if self._brokers.get(b) is not None and self._brokers[b].active]
                leader = NO_LEADER
                for b, directory in zip(replicas, dirs, strict=True):
                    if b in isr and self._dir_online(d, b, directory):
                        leader = b
                        break
                rec = PartitionRecord(
                    partition_id=pid, topic_id=topic_id, replicas=list(replicas), isr=isr,
                    leader=leader, leader_epoch=0, partition_epoch=0,
                    directories=dirs if pversion >= 1 else [],
                )
                d.records.append((rec, pversion))
        return Outcome(CreateTopicsResponse(topics=results), d.records)

    def _plan_topic(
        self, t: CreatableTopic, active: list[int], placed_so_far: int
    ) -> list[list[int]] | tuple[int, str]:
        """Replica lists for a new topic, or (error code, message)."""
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return ec.INVALID_REQUEST, "Both numPartitions or replicationFactor and replicasAssignments were set."
            by_index = {a.partition_index: a.broker_ids for a in t.assignments}
            if len(by_index) != len(t.assignments) or sorted(by_index) != list(range(len(by_index))):
                return ec.INVALID_REPLICA_ASSIGNMENT, "Partition indices must be 0..n-1 without gaps or repeats."
            plan: list[list[int]] = []
            for pid in range(len(by_index)):
                replicas = list(by_index[pid])
                if not replicas:
                    return ec.INVALID_REPLICA_ASSIGNMENT, f"Partition {pid} has no replicas."
                if len(set(replicas)) != len(replicas):
                    return ec.INVALID_REPLICA_ASSIGNMENT, f"Partition {pid} lists a broker twice."
                missing = [b for b in replicas if b not in self._brokers]
                if missing:
                    return ec.INVALID_REPLICA_ASSIGNMENT, f"Partition {pid} names unregistered brokers {missing}."
                if not any(b in active for b in replicas):
                    return ec.INVALID_REPLICA_ASSIGNMENT, (
                        f"All brokers specified for partition {pid} are fenced or in controlled shutdown."
                    )
                plan.append(replicas)
            return plan
        n = self.default_num_partitions if t.num_partitions == -1 else t.num_partitions
        rf = self.default_replication_factor if t.replication_factor == -1 else t.replication_factor
        if n <= 0:
            return ec.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."
        if rf <= 0:
            return ec.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        if rf > len(active):
            return ec.INVALID_REPLICATION_FACTOR, (
                f"Unable to replicate the partition {rf} time(s): only {len(active)} broker(s) "
                "are registered and unfenced."
            )
        return place_replicas(active, n, rf, start=placed_so_far, shift=placed_so_far // max(1, len(active)))

    # -- DeleteTopics

    def _delete_topics(self, api_version: int, req: DeleteTopicsRequest) -> Outcome:
        wanted: list[tuple[str | None, uuid.UUID | None]] = []
        if api_version >= 6:
            for s in req.topics:
                has_id = s.topic_id.int != 0
                wanted.append((s.name, s.topic_id if has_id else None))
        else:
            wanted = [(name, None) for name in req.topic_names]
        seen: dict[object, int] = {}
        for name, tid in wanted:
            if (name is None) != (tid is None):  # only well-formed entries count as repeats
                key = tid if tid is not None else name
                seen[key] = seen.get(key, 0) + 1
        d = _Draft()
        out: list[DeletableTopicResult] = []
        removed: set[uuid.UUID] = set()
        for name, tid in wanted:
            res = DeletableTopicResult(name=name, error_message=None)
            if api_version >= 6 and tid is not None:
                res.topic_id = tid
            out.append(res)
            key = tid if tid is not None else name
            if (name is not None and tid is not None) or (name is None and tid is None):
                res.error_code, res.error_message = ec.INVALID_REQUEST, "Give exactly one of topic name and topic id."
                continue
            if seen[key] > 1:
                res.error_code, res.error_message = ec.INVALID_REQUEST, "Duplicate topic in request."
                continue
            if tid is not None:
                topic = self._topics.get(tid)
                if topic is None:
                    res.error_code, res.error_message = ec.UNKNOWN_TOPIC_ID, "This server does not host this topic ID."
                    continue
                res.name = topic.name
            else:
                found = self._topic_names.get(name or "")
                if found is None:
                    res.error_code = ec.UNKNOWN_TOPIC_OR_PARTITION
                    res.error_message = "This server does not host this topic-partition."
                    continue
                topic = self._topics[found]
                if api_version >= 6:
                    res.topic_id = topic.topic_id
            if topic.topic_id in removed:
                continue
            removed.add(topic.topic_id)
            d.records.append((RemoveTopicRecord(topic_id=topic.topic_id), 0))
        return Outcome(DeleteTopicsResponse(responses=out), d.records)

    # ------------------------------------------------------------------ tick

    def tick(self, *, now_ms: int, next_offset: int) -> list[RecordAndVersion]:
        """Fence every unfenced broker whose session expired; records for one batch."""
        d = _Draft()
        for b, reg in sorted(self._brokers.items()):
            if reg.fenced:
                continue
            if not self._session_valid(b, now_ms):
                self._fence(d, reg)
        return d.records

    # ------------------------------------------------------------------ invariants

    def check_invariants(self) -> list[str]:
        """Every broken invariant, as readable lines (empty when all hold). O(partitions)."""
        problems: list[str] = []
        empty = _Draft()
        index_count = 0
        leaders: dict[int, int] = {}
        for topic in self._topics.values():
            if self._topic_names.get(topic.name) != topic.topic_id:
                problems.append(f"topic {topic.name!r} missing from the name map")
            for p in topic.partitions.values():
                where = f"{topic.name}-{p.partition_id}"
                if len(p.dirs) != len(p.replicas):
                    problems.append(f"{where}: {len(p.dirs)} dirs for {len(p.replicas)} replicas")
                    continue
                if len(set(p.replicas)) != len(p.replicas):
                    problems.append(f"{where}: repeated replica in {p.replicas}")
                if not p.isr:
                    problems.append(f"{where}: empty ISR")
                if not set(p.isr) <= set(p.replicas):
                    problems.append(f"{where}: ISR {p.isr} not within replicas {p.replicas}")
                for b, directory in zip(p.replicas, p.dirs, strict=True):
                    index_count += 1
                    if p not in self._index.get(b, {}).get(directory, ()):
                        problems.append(f"{where}: replica ({b}, {directory}) missing from the index")
                if p.leader != NO_LEADER:
                    leaders[p.leader] = leaders.get(p.leader, 0) + 1
                    if p.leader not in p.isr:
                        problems.append(f"{where}: leader {p.leader} not in ISR {p.isr}")
                    elif p.leader not in p.replicas:
                        problems.append(f"{where}: leader {p.leader} not a replica")
                    else:
                        reg = self._brokers.get(p.leader)
                        if reg is None or not reg.active:
                            problems.append(f"{where}: leader {p.leader} is not an active broker")
                        elif not self._dir_online(empty, p.leader, p.dir_of(p.leader)):
                            problems.append(f"{where}: leader {p.leader} is in offline dir {p.dir_of(p.leader)}")
        indexed = sum(len(bucket) for per in self._index.values() for bucket in per.values())
        if indexed != index_count:
            problems.append(f"index holds {indexed} replicas, partitions have {index_count}")
        if leaders != self._leader_count:
            problems.append(f"leader counts {self._leader_count} != actual {leaders}")
        owners = {x: b for b, reg in self._brokers.items() for x in reg.registered_dirs}
        if owners != self._dir_owner:
            problems.append("directory owner map out of date")
        for b, reg in self._brokers.items():
            if not reg.online_set <= set(reg.registered_dirs):
                problems.append(f"broker {b}: online dirs not within registered dirs")
        return problems


def _partition_view(p: Partition) -> ap.PartitionView:
    return ap.PartitionView(p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch, p.leader_recovery_state)


def _proposal(api_version: int, pd: AlterPartData) -> ap.Proposal:
    """Before v3 the ISR carries no broker epochs (-1: not checked), as Kafka converts it."""
    if api_version >= 3:
        isr = tuple((x.broker_id, x.broker_epoch) for x in pd.new_isr_with_epochs)
    else:
        isr = tuple((b, -1) for b in pd.new_isr)
    lrs = pd.leader_recovery_state if api_version >= 1 else ap.RECOVERED
    return ap.Proposal(pd.leader_epoch, pd.partition_epoch, isr, lrs)

def _topic_name_error(name: str) -> str | None:
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return "Topic name cannot be \".\" or \"..\""
    if len(name) > _MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {_MAX_TOPIC_NAME} characters"
    if not _TOPIC_NAME.fullmatch(name):
        return f"Topic name {name!r} is illegal: use only ASCII alphanumerics, '.', '_' and '-'"
    return None


_APPLY: dict[type, Any] = {
    FeatureLevelRecord: ControllerState._apply_feature,
    RegisterBrokerRecord: ControllerState._apply_register,
    UnregisterBrokerRecord: ControllerState._apply_unregister,
    FenceBrokerRecord: ControllerState._apply_fence,
    UnfenceBrokerRecord: ControllerState._apply_unfence,
    BrokerRegistrationChangeRecord: ControllerState._apply_registration_change,
    TopicRecord: ControllerState._apply_topic,
    PartitionRecord: ControllerState._apply_partition,
    PartitionChangeRecord: ControllerState._apply_partition_change,
    RemoveTopicRecord: ControllerState._apply_remove_topic,
    ProducerIdsRecord: ControllerState._apply_producer_ids,
    ConfigRecord: ControllerState._apply_config,
    AccessControlEntryRecord: ControllerState._apply_acl,
    RemoveAccessControlEntryRecord: ControllerState._apply_remove_acl,
}
