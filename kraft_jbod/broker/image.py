"""The broker's metadata image: cluster state rebuilt from replicated metadata records.

Pure: ``apply(offset, record, version)`` in log order is the only way in. The image keeps
what a broker needs to act on KIP-858 (brokers with their epochs and directories, topics,
partitions with Replicas/ISR/leader/Directories) and what tests compare against the
controller's own state.

Invariants: offsets applied are strictly increasing; a PartitionChangeRecord bumps the
partition epoch, and the leader epoch when it changes the leader (Kafka's merge rule);
null fields mean "unchanged", an empty Directories list on a PartitionRecord means every
replica is MIGRATING; Directories always runs parallel to Replicas. ``load_snapshot`` replaces the whole image
by a snapshot's records, which all count as applied at the snapshot's last offset (as
Kafka replays a snapshot).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

from kraft_jbod.errors import StorageError
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.fence_broker_record import FenceBrokerRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.messages.remove_topic_record import RemoveTopicRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.messages.unfence_broker_record import UnfenceBrokerRecord
from kraft_jbod.messages.unregister_broker_record import UnregisterBrokerRecord
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.primitives import MIGRATING_DIRECTORY

NO_LEADER_CHANGE = -2
TopicPartition = tuple[uuid.UUID, int]


@dataclass(slots=True)
class BrokerView:
    broker_id: int
    epoch: int
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: tuple[uuid.UUID, ...]
    online_dirs: tuple[uuid.UUID, ...]
    register_offset: int
    # (listener name, host, port) of its registration, and its rack: what Metadata lists.
    endpoints: tuple[tuple[str, str, int], ...] = ()
    rack: str | None = None


@dataclass(slots=True)
class PartitionView:
    topic_id: uuid.UUID
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    directories: tuple[uuid.UUID, ...]

    def dir_of(self, broker_id: int) -> uuid.UUID | None:
        try:
            return self.directories[self.replicas.index(broker_id)]
        except ValueError:
            return None


@dataclass
class MetadataImage:
    features: dict[str, int] = field(default_factory=dict)
    brokers: dict[int, BrokerView] = field(default_factory=dict)
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionView] = field(default_factory=dict)
    # (resource type, resource name) -> dynamic configs, from ConfigRecords (DescribeConfigs)
    configs: dict[tuple[int, str], dict[str, str]] = field(default_factory=dict)
    last_offset: int = -1
    records_applied: int = 0

    def topic_id(self, name: str) -> uuid.UUID | None:
        for tid, n in self.topic_names.items():
            if n == name:
                return tid
        return None

    def partitions_of(self, broker_id: int) -> Iterator[PartitionView]:
        for p in self.partitions.values():
            if broker_id in p.replicas:
                yield p

    def load_snapshot(self, end_offset: int, records: list[tuple[Message, int]]) -> None:
        """Replace the image, in place, by a snapshot ending at ``end_offset``.

        Raises:
            StorageError: a record naming something the snapshot does not hold.
        """
        self.features.clear()
        self.brokers.clear()
        self.topic_names.clear()
        self.partitions.clear()
        self.configs.clear()
        last = end_offset - 1
        for record, version in records:
            self.last_offset = last - 1  # every record counts as applied at the last offset
            self.apply(last, record, version)
        self.last_offset = last

    def apply(self, offset: int, record: Message, version: int) -> None:
        """Apply one committed record.

        Raises:
            StorageError: an offset out of order, or a record naming something unknown.
        """
        if offset <= self.last_offset:
            raise StorageError(f"record at offset {offset} after offset {self.last_offset}")
        self.last_offset = offset
        self.records_applied += 1
        if isinstance(record, FeatureLevelRecord):
            self._apply_feature_level(record)
        elif isinstance(record, RegisterBrokerRecord):
            self._apply_register_broker(offset, record)
        elif isinstance(record, UnregisterBrokerRecord):
            self.brokers.pop(record.broker_id, None)
        elif isinstance(record, BrokerRegistrationChangeRecord):
            self._apply_registration_change(offset, record)
        elif isinstance(record, FenceBrokerRecord):
            self._broker(record.id, offset).fenced = True
        elif isinstance(record, UnfenceBrokerRecord):
            self._broker(record.id, offset).fenced = False
        elif isinstance(record, TopicRecord):
            self.topic_names[record.topic_id] = record.name
        elif isinstance(record, ConfigRecord):
            self._apply_config(record)
        elif isinstance(record, RemoveTopicRecord):
            self._apply_remove_topic(record)
        elif isinstance(record, PartitionRecord):
            self._apply_partition(offset, record)
        elif isinstance(record, PartitionChangeRecord):
            self._apply_partition_change(offset, record)

    def _apply_feature_level(self, record: FeatureLevelRecord) -> None:
        if record.feature_level == 0:
            self.features.pop(record.name, None)
        else:
            self.features[record.name] = record.feature_level

    def _apply_register_broker(self, offset: int, record: RegisterBrokerRecord) -> None:
        dirs = tuple(record.log_dirs)
        self.brokers[record.broker_id] = BrokerView(
            record.broker_id,
            record.broker_epoch,
            record.fenced,
            record.in_controlled_shutdown,
            dirs,
            dirs,
            offset,
            tuple((e.name, e.host, e.port) for e in record.end_points),
            record.rack,
        )

    def _apply_registration_change(self, offset: int, record: BrokerRegistrationChangeRecord) -> None:
        b = self._broker(record.broker_id, offset)
        if record.fenced == 1:
            b.fenced = True
        elif record.fenced == -1:
            b.fenced = False
        if record.in_controlled_shutdown == 1:
            b.in_controlled_shutdown = True
        if record.log_dirs:
            b.online_dirs = tuple(record.log_dirs)

    def _apply_config(self, record: ConfigRecord) -> None:
        entry = self.configs.setdefault((record.resource_type, record.resource_name), {})
        if record.value is None:
            entry.pop(record.name, None)
        else:
            entry[record.name] = record.value

    def _apply_remove_topic(self, record: RemoveTopicRecord) -> None:
        name = self.topic_names.get(record.topic_id)
        if name is not None:
            self.configs.pop((2, name), None)  # a deleted topic's configs go with it
        self.topic_names.pop(record.topic_id, None)
        for tp in [tp for tp in self.partitions if tp[0] == record.topic_id]:
            del self.partitions[tp]

    def _apply_partition(self, offset: int, record: PartitionRecord) -> None:
        replicas = tuple(record.replicas)
        dirs = tuple(record.directories) or (MIGRATING_DIRECTORY,) * len(replicas)
        if len(dirs) != len(replicas):
            raise StorageError(f"PartitionRecord at offset {offset}: Directories not parallel to Replicas")
        self.partitions[(record.topic_id, record.partition_id)] = PartitionView(
            record.topic_id,
            record.partition_id,
            replicas,
            tuple(record.isr),
            record.leader,
            record.leader_epoch,
            record.partition_epoch,
            dirs,
        )

    def _apply_partition_change(self, offset: int, record: PartitionChangeRecord) -> None:
        p = self.partitions.get((record.topic_id, record.partition_id))
        if p is None:
            raise StorageError(f"PartitionChangeRecord at offset {offset} for an unknown partition")
        old = dict(zip(p.replicas, p.directories, strict=True))
        if record.replicas is not None:
            p.replicas = tuple(record.replicas)
        if record.directories is not None:
            p.directories = tuple(record.directories)
        elif record.replicas is not None:
            p.directories = tuple(old.get(b, uuid.UUID(int=1)) for b in p.replicas)
        if len(p.directories) != len(p.replicas):
            raise StorageError(f"PartitionChangeRecord at offset {offset}: Directories not parallel to Replicas")
        if record.isr is not None:
            p.isr = tuple(record.isr)
        if record.leader != NO_LEADER_CHANGE:
            p.leader = record.leader
            p.leader_epoch += 1
        p.partition_epoch += 1

    def _broker(self, broker_id: int, offset: int) -> BrokerView:
        b = self.brokers.get(broker_id)
        if b is None:
            raise StorageError(f"record at offset {offset} names unregistered broker {broker_id}")
        return b
