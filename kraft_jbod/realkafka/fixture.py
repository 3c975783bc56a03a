"""The pytest plugin's ``kraft_real_cluster`` fixture: real Kafka brokers in a user's tests.

``kraft_real_cluster(brokers=2, log_dirs=2, controller="mock", ...)`` (any
:class:`~kraft_jbod.realkafka.cluster.ClusterSpec` field) starts a cluster under the test's
``tmp_path`` and returns its :class:`~kraft_jbod.realkafka.cluster.RealCluster`; every
cluster the test started is stopped at teardown, brokers before the controller.

Which Kafka: ``KRAFT_JBOD_KAFKA_HOME`` or the project's cached build of Kafka 4.4
(:func:`kraft_jbod.realkafka.commands.find_kafka`). Without Java or a Kafka, a test asking for
the fixture is skipped with the reason and what to install; nothing else is affected.
Imported only when a test asks for the fixture, so the plugin stays light.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kraft_jbod.errors import ConfigError
from kraft_jbod.realkafka.cluster import ClusterSpec, RealCluster
from kraft_jbod.realkafka.commands import find_kafka
from kraft_jbod.realkafka.distribution import KafkaDistribution, open_distribution


def _distribution() -> KafkaDistribution:
    if shutil.which("java") is None:
        pytest.skip("kraft_real_cluster needs Java 17 (java on PATH or JAVA_HOME) to run Kafka")
    try:
        return open_distribution(find_kafka(None))
    except ConfigError as exc:
        pytest.skip(f"kraft_real_cluster needs a Kafka distribution: {exc}")


def real_cluster_factory(tmp_path: Path) -> Iterator[Callable[..., RealCluster]]:
    dist = _distribution()
    made: list[RealCluster] = []

    def make(**spec: object) -> RealCluster:
        cluster = RealCluster(dist, tmp_path / f"kafka-cluster-{len(made)}", ClusterSpec(**spec))  # type: ignore[arg-type]
        made.append(cluster)
        cluster.__enter__()
        return cluster

    try:
        yield make
    finally:
        for cluster in reversed(made):
            cluster.close()
