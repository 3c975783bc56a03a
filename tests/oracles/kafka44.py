"""Find the Kafka 4.4 oracle build (Kafka's own classes compiled from ``../shared/kafka``).

A small locator until the interop tests' one (``tools/kafka_oracle.py``, which also builds
it) is on this branch. It looks, in order, at ``KAFKA_ORACLE_DIR``,
``KRAFT_JBOD_KAFKA_ORACLE`` and ``<repo>/.cache/kafka-4.4``; an oracle directory holds
a ``classpath`` file (the jar first, then its libraries) as ``build.sh`` writes it.
The fixture skips with the reason when none is found, except under ``CI=true``, where a
missing oracle fails the tests: CI must run them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.oracles.java_oracle import JavaOracle

REPO_ROOT: Final = Path(__file__).resolve().parents[2]
ENV_VARS: Final = ("KAFKA_ORACLE_DIR", "KRAFT_JBOD_KAFKA_ORACLE")
DEFAULT_DIR: Final = REPO_ROOT / ".cache" / "kafka-4.4"


class OracleMissing(Exception):
    """No usable Kafka 4.4 oracle directory; the message says where we looked."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def _candidates() -> list[Path]:
    dirs = [Path(os.environ[v]) for v in ENV_VARS if os.environ.get(v)]
    return [*dirs, DEFAULT_DIR]


def locate() -> list[Path]:
    """The class path of the first oracle directory found.

    Raises:
        OracleMissing: none of the candidates holds a complete build.
    """
    tried: list[str] = []
    for d in _candidates():
        cp = d / "classpath"
        if not cp.is_file():
            tried.append(f"{d} (no classpath file)")
            continue
        entries = [Path(e) for e in cp.read_text(encoding="utf-8").strip().split(os.pathsep) if e]
        missing = [e for e in entries if not e.exists()]
        if not entries or missing:
            tried.append(f"{d} (missing {missing[:2]})")
            continue
        return entries
    raise OracleMissing(
        "Kafka 4.4 oracle not found: looked in " + "; ".join(tried) + ". Build it with "
        "`../shared/kafka/build.sh -p .venv -o .cache/kafka-4.4` or set KAFKA_ORACLE_DIR."
    )


@pytest.fixture(scope="session")
def java_oracle_44() -> Iterator[JavaOracle]:
    """One JVM running Kafka 4.4's generated message classes."""
    try:
        classpath = locate()
    except OracleMissing as exc:
        if in_ci():
            pytest.fail(f"CI=true and {exc}", pytrace=False)
        pytest.skip(str(exc))
    with JavaOracle(classpath=classpath) as oracle:
        yield oracle
