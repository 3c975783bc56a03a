"""Cluster operations the scenarios share: topics through a broker or the controller, leaders.

Topics are created two ways, as users do: through a broker with confluent-kafka's Admin
client (the broker forwards CreateTopics to the controller in an Envelope), and straight to
the controller's listener with our codec (CreateTopics is served by both controllers'
listeners). Waits are bounded and poll the brokers' own metadata.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kraft_jbod.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kraft_jbod.realkafka import probe
from kraft_jbod.realkafka.cluster import RealCluster, wait_until


def create_via_broker(
    cluster: RealCluster,
    topic: str,
    assignment: Sequence[Sequence[int]],
    configs: Mapping[str, str] | None = None,
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.realbrokers.clients import RDKAFKA_LOG

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "logger": RDKAFKA_LOG})
    futures = admin.create_topics(
        [
            NewTopic(
                topic,
                num_partitions=len(assignment),
                replication_factor=-1,
                replica_assignment=[list(r) for r in assignment],
                config=dict(configs or {}),
            )
        ],
        request_timeout=30,
    )
    futures[topic].result(timeout=60)
    wait_for_topic(cluster, topic, len(assignment))


def create_via_controller(
    cluster: RealCluster,
    topic: str,
    assignment: Sequence[Sequence[int]],
    configs: Mapping[str, str] | None = None,
    *,
    wait: bool = True,
    listener: str = "controller",
) -> int:
    """CreateTopics v7 on the controller listener (or, ``listener="client"``, on the mock's
    client listener, where admin tools without a broker send it); the topic's error code.
    With ``wait``, returns once every running broker knows the topic."""
    assert cluster.controller is not None
    address = cluster.controller.address if listener == "controller" else cluster.controller.client
    assert address is not None, f"the {cluster.controller.kind} controller has no {listener} listener"
    req = CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=topic,
                num_partitions=-1,
                replication_factor=-1,
                assignments=[
                    CreatableReplicaAssignment(partition_index=i, broker_ids=list(r)) for i, r in enumerate(assignment)
                ],
                configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
            )
        ],
        timeout_ms=30000,
    )
    resp = probe.call(address, req, 7, timeout=60)
    code = int(resp.topics[0].error_code)
    if code == 0 and wait:
        wait_for_topic(cluster, topic, len(assignment))
    return code


def wait_for_topic(cluster: RealCluster, topic: str, partitions: int, timeout: float = 60.0) -> probe.ClusterView:
    """Until every running broker knows ``topic`` with all partitions led."""

    def check() -> probe.ClusterView | None:
        views = [probe.metadata(b.address, [topic], timeout=5) for b in cluster.running_brokers()]
        ok = all(
            sum(1 for (t, _), p in v.partitions.items() if t == topic and p.leader >= 0 and p.error_code == 0)
            == partitions
            for v in views
        )
        return views[0] if ok else None

    return wait_until(f"topic {topic} with {partitions} led partitions", check, timeout)


def leaders(cluster: RealCluster, topic: str, via: int | None = None) -> dict[int, int]:
    view = cluster.metadata([topic], via=via)
    return {p: v.leader for (t, p), v in view.partitions.items() if t == topic}


def wait_for_replicas(cluster: RealCluster, broker_id: int, topic: str, count: int, timeout: float = 60.0) -> None:
    """Until broker ``broker_id`` holds ``count`` replicas of ``topic`` in its dirs (a follower
    creates its logs a little after the partition is led)."""
    address = cluster.brokers[broker_id].address

    def check() -> bool:
        dirs = probe.log_dirs(address).values()
        return sum(1 for d in dirs for t, _ in d.partitions if t == topic) >= count

    wait_until(f"broker {broker_id} holding {count} replicas of {topic}", check, timeout)
