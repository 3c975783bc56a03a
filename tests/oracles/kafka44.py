"""The Kafka 4.4 oracle for tests: Kafka's own classes compiled from ``../shared/kafka``.

Finding and building it is :mod:`tools.kafka_oracle`'s job (``make test`` builds it into
``.cache/kafka-4.4``; ``KRAFT_JBOD_KAFKA_ORACLE`` points at another build, and
``KAFKA_ORACLE_DIR`` is accepted as an older name for it). :func:`require_kafka_oracle` is the
one place a test learns it is missing: it skips with the reason, except under ``CI=true``,
where a missing oracle fails the test because CI must run it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.oracles.java_oracle import JavaOracle
from tools.kafka_oracle import Oracle, OracleUnavailable, in_ci, locate, read_oracle


def require_kafka_oracle() -> Oracle:
    """The built oracle, or a skip (a failure under ``CI=true``) naming why it is missing."""
    try:
        legacy = os.environ.get("KAFKA_ORACLE_DIR")
        return read_oracle(Path(legacy)) if legacy else locate()
    except OracleUnavailable as exc:
        if in_ci():
            pytest.fail(f"CI=true and the Kafka 4.4 oracle is unavailable: {exc}", pytrace=False)
        pytest.skip(f"Kafka 4.4 oracle unavailable: {exc}")


@pytest.fixture(scope="session")
def java_oracle_44() -> Iterator[JavaOracle]:
    """One JVM running Kafka 4.4's generated message classes."""
    oracle = require_kafka_oracle()
    with JavaOracle(classpath=list(oracle.classpath)) as java:
        yield java
