"""Real clients (librdkafka via confluent-kafka, kafka-python) list brokers and partitions on the
client listener and see the leader and ISR move when a directory fails."""

from __future__ import annotations

import asyncio
from typing import Any

from kraft_jbod.pytest_plugin import KraftCluster


async def _setup(cluster: KraftCluster) -> None:
    for b in (1, 2, 3):
        await cluster.add_broker(b, dirs=2)
    res = await cluster.create_topic("orders", partitions=3, replication_factor=3)
    assert res.error_code == 0
    assert await cluster.assign_all() == 9


def _librdkafka_metadata(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    return admin.list_topics(timeout=10)


async def test_librdkafka_sees_brokers_partitions_and_leader_change(kraft_cluster: KraftCluster) -> None:
    await _setup(kraft_cluster)
    md = await asyncio.to_thread(_librdkafka_metadata, kraft_cluster.bootstrap)
    assert sorted(md.brokers) == [1, 2, 3]
    assert md.cluster_id == kraft_cluster.server.cluster_id
    topic = md.topics["orders"]
    assert sorted(topic.partitions) == [0, 1, 2]
    p0 = topic.partitions[0]
    expected = kraft_cluster.partition("orders", 0)
    assert p0.leader == expected["leader"] and list(p0.isrs) == expected["isr"]
    assert sorted(p0.replicas) == [1, 2, 3]

    # Fail the directory holding partition 0's leader replica on that broker.
    leader = expected["leader"]
    directory = expected["directories"][expected["replicas"].index(leader)]
    sim = kraft_cluster.brokers[leader]
    await sim.fail_directory(sim.directory_index(directory))
    after = kraft_cluster.partition("orders", 0)
    assert after["leader"] != leader and leader not in after["isr"]

    md2 = await asyncio.to_thread(_librdkafka_metadata, kraft_cluster.bootstrap)
    p0b = md2.topics["orders"].partitions[0]
    assert p0b.leader == after["leader"]
    assert list(p0b.isrs) == after["isr"]
    assert leader not in list(p0b.isrs)


def _kafka_python_describe(bootstrap: str) -> tuple[list[int], list[dict[str, Any]]]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        cluster = admin.describe_cluster()
        brokers = sorted(b.get("node_id", b.get("broker_id")) for b in cluster["brokers"])
        topics = admin.describe_topics(["orders"])
        return brokers, topics
    finally:
        admin.close()


async def test_kafka_python_sees_isr_shrink_after_directory_failure(kraft_cluster: KraftCluster) -> None:
    await _setup(kraft_cluster)
    brokers, topics = await asyncio.to_thread(_kafka_python_describe, kraft_cluster.bootstrap)
    assert brokers == [1, 2, 3]
    parts = {p["partition_index"]: p for p in topics[0]["partitions"]}
    before = kraft_cluster.partition("orders", 1)
    assert parts[1]["leader_id"] == before["leader"] and parts[1]["isr_nodes"] == before["isr"]

    victim = kraft_cluster.brokers[before["leader"]]
    directory = before["directories"][before["replicas"].index(victim.broker_id)]
    await victim.fail_directory(victim.directory_index(directory))
    after = kraft_cluster.partition("orders", 1)
    assert victim.broker_id not in after["isr"]

    _, topics2 = await asyncio.to_thread(_kafka_python_describe, kraft_cluster.bootstrap)
    parts2 = {p["partition_index"]: p for p in topics2[0]["partitions"]}
    assert parts2[1]["leader_id"] == after["leader"] != before["leader"]
    assert parts2[1]["isr_nodes"] == after["isr"]
    assert victim.broker_id in parts2[1]["offline_replicas"]
