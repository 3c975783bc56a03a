"""Fixtures of the Kafka-code interop tests: the oracle, one JVM per module, a controller.

The oracle is Kafka 4.4 built from ``../shared/kafka/`` (``tools/kafka_oracle.py``; override
with ``KRAFT_JBOD_KAFKA_ORACLE``). Without it these tests skip with the reason and how to
get it, except under ``CI=true``, where a missing oracle fails them: CI must run them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.interop.harness import ControllerThread, InteropJvm
from tests.oracles.kafka44 import require_kafka_oracle
from tools.kafka_oracle import Oracle


@pytest.fixture(scope="session")
def kafka_oracle() -> Oracle:
    return require_kafka_oracle()


@pytest.fixture(scope="module")
def interop(kafka_oracle: Oracle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[InteropJvm]:
    """One JVM for the whole module (start-up is paid once)."""
    jvm = InteropJvm(kafka_oracle, tmp_path_factory.mktemp("interop-jvm"))
    try:
        yield jvm
    finally:
        jvm.close()
        _record_classes(jvm)


@pytest.fixture(autouse=True)
def _stop_kafka_brokers(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every Kafka broker a test started is stopped after it, passed or failed."""
    yield
    if "interop" in request.fixturenames:
        jvm: InteropJvm = request.getfixturevalue("interop")
        jvm("stop_all")


def _record_classes(jvm: InteropJvm) -> None:
    # For docs/interop.md's count: the union over modules lands in one file when asked to.
    target = os.environ.get("KRAFT_JBOD_INTEROP_CLASSES")
    if target:
        with open(target, "a") as f:
            for name in sorted(jvm.kafka_classes_loaded()):
                f.write(name + "\n")


@pytest.fixture
def controller_factory(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Callable[..., ControllerThread]]:
    """``controller_factory(metadata_version=..., semantics=...)``: started controllers, closed at
    teardown after the test's Kafka brokers (so Kafka never logs a lost controller at teardown)."""
    made: list[ControllerThread] = []

    def make(**kwargs: object) -> ControllerThread:
        ctl = ControllerThread(tmp_path / f"cluster-{len(made)}", **kwargs)  # type: ignore[arg-type]
        made.append(ctl)
        return ctl

    try:
        yield make
    finally:
        try:
            if "interop" in request.fixturenames:
                request.getfixturevalue("interop")("stop_all")
        finally:
            for ctl in made:
                ctl.close()
