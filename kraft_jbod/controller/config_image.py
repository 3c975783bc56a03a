"""Dynamic configs as the metadata log says, and the topic configs Kafka knows.

The image part the replay of ConfigRecord changes: (resource type, name) -> {key: value},
a null value removing the key and a resource with no keys left disappearing. It sits
beside :mod:`~kraft_jbod.controller.image` (which owns one) and below the config APIs
(:mod:`~kraft_jbod.controller.apis.configs`), which validate against ``TOPIC_CONFIGS``
and propose the records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kraft_jbod.messages.config_record import ConfigRecord

# ConfigResource types (facts of Kafka's protocol) the image needs.
TOPIC: Final = 2
BROKER: Final = 4
# ConfigType codes of DescribeConfigs.
T_BOOLEAN, T_STRING, T_INT, T_LONG, T_DOUBLE, T_LIST = 1, 2, 3, 5, 6, 7
_LONG_MAX: Final = str(2**63 - 1)


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """One topic config: its type, default, broker synonym and accepted values."""

    type: int
    default: str | None
    synonym: str | None = None
    at_least: float | None = None
    one_of: tuple[str, ...] = ()


# Kafka 4.x topic configs (TopicConfig / LogConfig): names, types, defaults, broker synonyms.
TOPIC_CONFIGS: Final[dict[str, TopicConfig]] = {
    "cleanup.policy": TopicConfig(T_LIST, "delete", "log.cleanup.policy", one_of=("compact", "delete")),
    "compression.type": TopicConfig(
        T_STRING, "producer", "compression.type", one_of=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
    ),
    "compression.gzip.level": TopicConfig(T_INT, "-1", "compression.gzip.level"),
    "compression.lz4.level": TopicConfig(T_INT, "9", "compression.lz4.level"),
    "compression.zstd.level": TopicConfig(T_INT, "3", "compression.zstd.level"),
    "delete.retention.ms": TopicConfig(T_LONG, "86400000", "log.cleaner.delete.retention.ms", at_least=0),
    "errors.deadletterqueue.group.enable": TopicConfig(T_BOOLEAN, "false"),
    "file.delete.delay.ms": TopicConfig(T_LONG, "60000", "log.segment.delete.delay.ms", at_least=0),
    "flush.messages": TopicConfig(T_LONG, _LONG_MAX, "log.flush.interval.messages", at_least=1),
    "flush.ms": TopicConfig(T_LONG, _LONG_MAX, "log.flush.interval.ms", at_least=0),
    "follower.replication.throttled.replicas": TopicConfig(T_LIST, ""),
    "index.interval.bytes": TopicConfig(T_INT, "4096", "log.index.interval.bytes", at_least=0),
    "leader.replication.throttled.replicas": TopicConfig(T_LIST, ""),
    "local.retention.bytes": TopicConfig(T_LONG, "-2", "log.local.retention.bytes", at_least=-2),
    "local.retention.ms": TopicConfig(T_LONG, "-2", "log.local.retention.ms", at_least=-2),
    "max.compaction.lag.ms": TopicConfig(T_LONG, _LONG_MAX, "log.cleaner.max.compaction.lag.ms", at_least=1),
    "max.message.bytes": TopicConfig(T_INT, "1048588", "message.max.bytes", at_least=0),
    "message.timestamp.after.max.ms": TopicConfig(T_LONG, "3600000", "log.message.timestamp.after.max.ms", at_least=0),
    "message.timestamp.before.max.ms": TopicConfig(
        T_LONG, _LONG_MAX, "log.message.timestamp.before.max.ms", at_least=0
    ),
    "message.timestamp.type": TopicConfig(
        T_STRING, "CreateTime", "log.message.timestamp.type", one_of=("CreateTime", "LogAppendTime")
    ),
    "min.cleanable.dirty.ratio": TopicConfig(T_DOUBLE, "0.5", "log.cleaner.min.cleanable.ratio", at_least=0),
    "min.compaction.lag.ms": TopicConfig(T_LONG, "0", "log.cleaner.min.compaction.lag.ms", at_least=0),
    "min.insync.replicas": TopicConfig(T_INT, "1", "min.insync.replicas", at_least=1),
    "preallocate": TopicConfig(T_BOOLEAN, "false", "log.preallocate"),
    # -1 means "follow local.retention.*"
    "remote.copy.lag.bytes": TopicConfig(T_LONG, "-1", "log.remote.copy.lag.bytes", at_least=-1),
    "remote.copy.lag.ms": TopicConfig(T_LONG, "0", "log.remote.copy.lag.ms", at_least=-1),
    "remote.log.copy.disable": TopicConfig(T_BOOLEAN, "false"),
    "remote.log.delete.on.disable": TopicConfig(T_BOOLEAN, "false"),
    "remote.storage.enable": TopicConfig(T_BOOLEAN, "false"),
    "retention.bytes": TopicConfig(T_LONG, "-1", "log.retention.bytes"),
    "retention.ms": TopicConfig(T_LONG, "604800000", "log.retention.ms", at_least=-1),
    "segment.bytes": TopicConfig(T_INT, "1073741824", "log.segment.bytes", at_least=1048576),
    "segment.index.bytes": TopicConfig(T_INT, "10485760", "log.index.size.max.bytes", at_least=4),
    "segment.jitter.ms": TopicConfig(T_LONG, "0", "log.roll.jitter.ms", at_least=0),
    "segment.ms": TopicConfig(T_LONG, "604800000", "log.roll.ms", at_least=1),
    "unclean.leader.election.enable": TopicConfig(T_BOOLEAN, "false", "unclean.leader.election.enable"),
}


class ConfigImage:
    """Dynamic configs as the log says: (resource type, name) -> {key: value}."""

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[tuple[int, str], dict[str, str]] = {}

    def apply(self, rec: ConfigRecord) -> None:
        key = (rec.resource_type, rec.resource_name)
        configs = self._data.get(key)
        if rec.value is None:
            if configs is not None:
                configs.pop(rec.name, None)
                if not configs:
                    del self._data[key]
            return
        if configs is None:
            configs = self._data[key] = {}
        configs[rec.name] = rec.value

    def drop_topic(self, name: str) -> None:
        self._data.pop((TOPIC, name), None)

    def get(self, resource_type: int, name: str) -> dict[str, str]:
        return dict(self._data.get((resource_type, name), {}))

    def value(self, resource_type: int, name: str, key: str) -> str | None:
        return self._data.get((resource_type, name), {}).get(key)

    def durable(self) -> dict[tuple[int, str], dict[str, str]]:
        return {k: dict(v) for k, v in sorted(self._data.items())}

    def topic_flag(self, topic: str, key: str) -> bool:
        """A boolean topic config as it takes effect: topic value, cluster default, default."""
        spec = TOPIC_CONFIGS[key]
        value = self.value(TOPIC, topic, key)
        if value is None and spec.synonym is not None:
            value = self.value(BROKER, "", spec.synonym)
        return (value if value is not None else spec.default or "false").strip().lower() == "true"
