"""Pytest fixtures for the oracles; the top-level conftest imports them by name.

The Java oracle fixture fails rather than skips when Java or the kafka-clients wheel is missing:
CI installs both, so an absent oracle is a broken environment, not an optional feature.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.oracles.java_oracle import JavaOracle, java_available


@pytest.fixture(scope="session")
def java_oracle() -> Iterator[JavaOracle]:
    """One JVM running Kafka's own codec, shared by the whole test session."""
    reason = java_available()
    if reason is not None:
        pytest.fail(f"Java oracle unavailable: {reason}", pytrace=False)
    with JavaOracle() as oracle:
        yield oracle
