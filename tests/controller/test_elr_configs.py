"""ClearElrRecord after a min.insync.replicas change, as Kafka's ConfigurationControlManager
(createClearElrRecordsAsNeeded): only with eligible.leader.replicas.version >= 1; a topic
config clears that topic, a broker or cluster config every topic."""

from __future__ import annotations

from kraft_jbod.messages.alter_configs_request import AlterableConfig as LegacyConfig
from kraft_jbod.messages.alter_configs_request import AlterConfigsRequest
from kraft_jbod.messages.alter_configs_request import AlterConfigsResource as LegacyResource
from kraft_jbod.messages.clear_elr_record import ClearElrRecord
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from tests.controller.harness import Cluster, dir_id

TOPIC, BROKER = 2, 4


def _cluster(elr: bool) -> Cluster:
    c = Cluster(level=30 if elr else 25)  # 4.0-IV3 has no ELR by default
    for b in (1, 2, 3):
        c.start_broker(b, [dir_id(b, 0)])
    c.create_topic("t", 1, 3)
    c.create_topic("u", 1, 3)
    if elr:
        c.commit([(FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0)])
        for name in ("t", "u"):
            tid = c.state.image.topic_names[name]
            c.commit([(PartitionChangeRecord(partition_id=0, topic_id=tid, eligible_leader_replicas=[3]), 2)])
    return c


def _set(c: Cluster, rtype: int, name: str, value: str) -> list[tuple[str, str]]:
    req = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(rtype, name, [AlterableConfig("min.insync.replicas", 0, value)])]
    )
    out = c.call(44, 1, req)
    assert [r.error_code for r in out.response.responses] == [0]  # type: ignore[attr-defined]
    return [(type(r).__name__, getattr(r, "topic_name", getattr(r, "name", ""))) for r, _ in out.records]


def _elr(c: Cluster, name: str) -> tuple[int, ...]:
    return c.state.image.topics[c.state.image.topic_names[name]].partitions[0].elr


def test_topic_change_clears_that_topic_cluster_change_clears_all() -> None:
    c = _cluster(elr=True)
    assert _set(c, TOPIC, "t", "2") == [("ConfigRecord", "min.insync.replicas"), ("ClearElrRecord", "t")]
    assert (_elr(c, "t"), _elr(c, "u")) == ((), (3,))
    assert _set(c, BROKER, "", "2") == [("ConfigRecord", "min.insync.replicas"), ("ClearElrRecord", "")]
    assert _elr(c, "u") == ()
    live = c.state.durable_state()
    assert c.restart().durable_state() == live


def test_legacy_alter_configs_too_and_other_keys_clear_nothing() -> None:
    c = _cluster(elr=True)
    out = c.call(
        33,
        2,
        AlterConfigsRequest(
            resources=[
                LegacyResource(
                    TOPIC, "t", [LegacyConfig("min.insync.replicas", "2"), LegacyConfig("retention.ms", "5")]
                )
            ]
        ),
    )
    clears = [r for r, _ in out.records if isinstance(r, ClearElrRecord)]
    assert [r.topic_name for r in clears] == ["t"]
    assert isinstance(out.records[-1][0], ClearElrRecord)  # after the config records, as Kafka
    assert _set(c, TOPIC, "u", "1")[-1] == ("ClearElrRecord", "u")
    req = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(TOPIC, "u", [AlterableConfig("retention.ms", 0, "7")])]
    )
    assert all(isinstance(r, ConfigRecord) for r, _ in c.call(44, 1, req).records)


def test_without_elr_no_clear_record() -> None:
    c = _cluster(elr=False)
    assert _set(c, TOPIC, "t", "2") == [("ConfigRecord", "min.insync.replicas")]


def _alter(c: Cluster, rtype: int, name: str, op: int, value: str | None) -> tuple[int, str | None, int]:
    req = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(rtype, name, [AlterableConfig("min.insync.replicas", op, value)])]
    )
    out = c.call(44, 1, req)
    r = out.response.responses[0]  # type: ignore[attr-defined]
    return r.error_code, r.error_message, len(out.records)


SET, DELETE, INVALID_CONFIG = 0, 1, 40


def test_min_isr_transitions_kafka_refuses_while_elr_is_on() -> None:
    # Kafka's ConfigurationControlManager: with ELR on, no broker-level min.insync.replicas
    # at all, and the cluster-level one may change but not go away.
    c = _cluster(elr=True)
    broker_level = "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
    cluster_removal = "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
    assert _alter(c, BROKER, "1", SET, "2") == (INVALID_CONFIG, broker_level, 0)
    assert _alter(c, BROKER, "1", DELETE, None) == (INVALID_CONFIG, broker_level, 0)
    assert _alter(c, BROKER, "", DELETE, None) == (INVALID_CONFIG, cluster_removal, 0)
    assert _alter(c, BROKER, "", SET, "2")[0] == 0
    legacy = c.call(33, 2, AlterConfigsRequest(resources=[LegacyResource(BROKER, "", [])]))
    result = legacy.response.responses[0]  # type: ignore[attr-defined]
    assert (result.error_code, result.error_message, legacy.records) == (INVALID_CONFIG, cluster_removal, [])
    # Without ELR the same changes go through.
    off = _cluster(elr=False)
    assert _alter(off, BROKER, "1", SET, "2")[0] == 0
    assert _alter(off, BROKER, "", DELETE, None)[0] == 0
