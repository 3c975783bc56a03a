"""Fixtures of the differential twin: Kafka's own KRaft controller, found or built once.

Kafka's controller comes from the broker build (:mod:`tools.kafka_broker`, cached under the
user cache; ``KRAFT_JBOD_KAFKA_HOME`` points at another). Without it the twin tests skip with
the reason and how to get it, except under ``CI=true``, where they fail: CI must run them.
"""

from __future__ import annotations

import pytest

from kraft_jbod.errors import ConfigError
from kraft_jbod.realkafka.distribution import KafkaDistribution, open_distribution
from tools.kafka_broker import BrokerBuildUnavailable, locate
from tools.kafka_oracle import in_ci


def require_kafka_controller() -> KafkaDistribution:
    """Kafka's build with its controller, or a skip (a failure under ``CI=true``) saying why."""
    try:
        return open_distribution(locate())
    except (BrokerBuildUnavailable, ConfigError) as exc:
        if in_ci():
            pytest.fail(f"CI=true and Kafka's controller is unavailable: {exc}", pytrace=False)
        pytest.skip(f"Kafka's controller unavailable: {exc}")


@pytest.fixture(scope="session")
def kafka_dist() -> KafkaDistribution:
    return require_kafka_controller()
