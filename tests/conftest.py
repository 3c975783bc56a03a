"""Suite-wide configuration: hypothesis profiles and shared fixtures.

Profiles, chosen with ``KRAFT_JBOD_HYPOTHESIS_PROFILE``:

* ``ci`` (default): derandomized and bounded, so CI is repeatable and quick;
* ``dev``: random, a few more examples;
* ``long``: the fuzz-length run (thousands of examples per property).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.oracles.fixtures import java_oracle

settings.register_profile(
    "ci",
    max_examples=60,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("dev", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile(
    "long",
    max_examples=20_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("KRAFT_JBOD_HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """Commands run in-process (``demo``, ``fuzz``) configure the root logger with the
    stderr of the moment, which pytest closes after the test; a record logged later (py4j's
    connection finalizer, at garbage collection) then failed to write to it ("Logging
    error ... I/O operation on closed file"). The root logger is put back after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in root.handlers[:]:
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)


__all__ = ["java_oracle"]
