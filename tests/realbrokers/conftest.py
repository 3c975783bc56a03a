"""Fixtures of the real-broker scenarios: Kafka 4.4 built from ../shared/kafka, clusters of it.

The Kafka is ``KRAFT_JBOD_KAFKA_HOME`` (a distribution or a build) or the project's build of
Kafka 4.4 (``tools/kafka_broker.py``, cached under the user cache; ``make test`` builds it).
Without it these tests skip with the reason and how to get it, except under ``CI=true``,
where they fail: CI must run them.

``real_cluster(controller=..., **spec)`` starts a :class:`~kraft_jbod.realkafka.cluster.RealCluster`
in the test's folder and stops it (brokers first) at teardown; every broker log is then read
for WARN/ERROR lines the scenario did not declare benign (``cluster.benign``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kraft_jbod.errors import ConfigError
from kraft_jbod.realkafka import logs
from kraft_jbod.realkafka.cluster import ClusterSpec, RealCluster
from kraft_jbod.realkafka.distribution import KafkaDistribution, open_distribution
from tools.kafka_broker import BrokerBuildUnavailable, locate
from tools.kafka_oracle import in_ci


@pytest.fixture(scope="session")
def kafka_dist() -> KafkaDistribution:
    try:
        return open_distribution(locate())
    except (BrokerBuildUnavailable, ConfigError) as exc:
        if in_ci():
            pytest.fail(f"CI=true and no real Kafka broker is available: {exc}", pytrace=False)
        pytest.skip(f"no real Kafka broker: {exc}")


class Cluster(RealCluster):
    """A test's cluster: what its logs may say beyond :data:`logs.ALWAYS` is in ``benign``."""

    benign: list[logs.Benign]


@pytest.fixture
def real_cluster(kafka_dist: KafkaDistribution, tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    made: list[Cluster] = []

    def make(**spec: object) -> Cluster:
        cluster = Cluster(kafka_dist, tmp_path / f"cluster-{len(made)}", ClusterSpec(**spec))  # type: ignore[arg-type]
        cluster.benign = []
        made.append(cluster)
        cluster.__enter__()
        return cluster

    yield make
    reports: list[str] = []
    for cluster in made:
        # the scenario's life and the shutdown are judged apart: shutdown has its own noise
        lives = {b.node_id: b.process.log_text(this_run=False) for b in cluster.brokers.values()}
        cluster.close()
        for broker in cluster.brokers.values():
            life = lives[broker.node_id]
            shutdown = broker.process.log_text(this_run=False)[len(life) :]
            found = logs.problems(life, cluster.benign) + logs.problems(shutdown, [*cluster.benign, *logs.SHUTDOWN])
            reports += [f"broker {broker.node_id}: {line[:400]}" for line in found]
    assert not reports, "WARN/ERROR lines no scenario step explains:\n" + "\n".join(reports)
