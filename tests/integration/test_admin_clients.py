"""Real admin clients (librdkafka via confluent-kafka, kafka-python) against the client listener.

They create, alter, grow, describe and delete topics, with the records committed by the
controller; with no broker registered they get Kafka's answer (INVALID_REPLICATION_FACTOR)
at once instead of waiting for a controller. Each client call runs in a thread with its
own timeout, so a hang fails the test instead of blocking it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kraft_jbod.pytest_plugin import KraftCluster

TIMEOUT = 15.0


def _confluent(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "socket.timeout.ms": 10000})


def _confluent_create(bootstrap: str, name: str, partitions: int, rf: int) -> Exception | None:
    from confluent_kafka.admin import NewTopic

    admin = _confluent(bootstrap)  # kept alive until the future resolves
    futures = admin.create_topics([NewTopic(name, partitions, rf)], request_timeout=10)
    try:
        futures[name].result(timeout=TIMEOUT)
    except Exception as exc:  # the client's KafkaException carries the broker's error
        return exc
    return None


async def test_librdkafka_without_brokers_gets_invalid_replication_factor(kraft_cluster: KraftCluster) -> None:
    started = time.monotonic()
    exc = await asyncio.to_thread(_confluent_create, kraft_cluster.bootstrap, "early", 1, 1)
    assert exc is not None
    err = exc.args[0]
    assert err.code() == 38 and err.str().startswith("Unable to replicate the partition 1 time(s)")
    assert time.monotonic() - started < TIMEOUT


def _kafka_python_create(bootstrap: str, name: str, partitions: int, rf: int) -> Any:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return admin.create_topics({name: {"num_partitions": partitions, "replication_factor": rf}}, raise_errors=False)
    finally:
        admin.close()


async def test_kafka_python_without_brokers_gets_invalid_replication_factor(kraft_cluster: KraftCluster) -> None:
    resp = await asyncio.to_thread(_kafka_python_create, kraft_cluster.bootstrap, "early", 1, 1)
    [topic] = resp["topics"]
    assert (topic["name"], topic["error_code"]) == ("early", 38)
    assert topic["error_message"].startswith("Unable to replicate the partition 1 time(s)")


def _confluent_admin_story(bootstrap: str) -> dict[str, Any]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourceType,
    )

    admin = _confluent(bootstrap)
    out: dict[str, Any] = {}
    new = NewTopic("orders", 2, 2, config={"cleanup.policy": "compact"})
    admin.create_topics([new], request_timeout=10)["orders"].result(timeout=TIMEOUT)
    resource = ConfigResource(
        ResourceType.TOPIC,
        "orders",
        incremental_configs=[ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result(timeout=TIMEOUT)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")])
    configs = next(iter(described.values())).result(timeout=TIMEOUT)
    out["retention"] = (configs["retention.ms"].value, configs["retention.ms"].source)
    out["cleanup"] = configs["cleanup.policy"].value
    admin.create_partitions([NewPartitions("orders", 5)])["orders"].result(timeout=TIMEOUT)
    try:
        admin.create_partitions([NewPartitions("orders", 3)])["orders"].result(timeout=TIMEOUT)
    except KafkaException as exc:
        out["shrink"] = exc.args[0].code()
    out["partitions"] = len(admin.list_topics(timeout=TIMEOUT).topics["orders"].partitions)
    admin.delete_topics(["orders"], request_timeout=10)["orders"].result(timeout=TIMEOUT)
    return out


async def test_librdkafka_admin_story(kraft_cluster: KraftCluster) -> None:
    for b in (1, 2, 3):
        await kraft_cluster.add_broker(b, dirs=2)
    out = await asyncio.to_thread(_confluent_admin_story, kraft_cluster.bootstrap)
    assert out["retention"] == ("3600000", 1)  # ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert out["cleanup"] == "compact"  # set at creation
    assert out["shrink"] == 37 and out["partitions"] == 5
    state = kraft_cluster.server.state
    assert state.topic_id_of("orders") is None  # deleted, and the configs with it
    assert state.image.configs.get(2, "orders") == {}


def _kafka_python_admin_story(bootstrap: str) -> dict[str, Any]:
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        out: dict[str, Any] = {}
        out["create"] = admin.create_topics(
            {"events": {"num_partitions": 1, "replication_factor": 3}}, raise_errors=False
        )
        out["alter"] = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "events", {"cleanup.policy": "compact"})]
        )
        out["describe"] = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "events")])
        out["grow"] = admin.create_partitions({"events": 4}, raise_errors=False)
        out["shrink"] = admin.create_partitions({"events": 2}, raise_errors=False)
        out["delete"] = admin.delete_topics(["events"], raise_errors=False)
        return out
    finally:
        admin.close()


async def test_kafka_python_admin_story(kraft_cluster: KraftCluster) -> None:
    for b in (1, 2, 3):
        await kraft_cluster.add_broker(b, dirs=2)
    out = await asyncio.to_thread(_kafka_python_admin_story, kraft_cluster.bootstrap)
    assert [(t["name"], t["error_code"], t["num_partitions"]) for t in out["create"]["topics"]] == [("events", 0, 1)]
    assert out["alter"] == {"topic": {"events": "OK"}}
    entry = out["describe"]["topic"]["events"]["cleanup.policy"]
    assert (entry["value"], entry["config_source"], entry["config_type"]) == ("compact", "DYNAMIC_TOPIC_CONFIG", "LIST")
    assert [(r.name, r.error_code) for r in out["grow"].results] == [("events", 0)]
    assert [(r.error_code, r.error_message) for r in out["shrink"].results] == [
        (37, "The topic events currently has 4 partition(s); 2 would not be an increase.")
    ]
    assert [(t["name"], t["error_code"]) for t in out["delete"]["topics"]] == [("events", 0)]
    assert kraft_cluster.server.state.topic_id_of("events") is None
