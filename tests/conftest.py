"""Suite-wide configuration: hypothesis profiles and shared fixtures.

Profiles, chosen with ``KRAFT_JBOD_HYPOTHESIS_PROFILE``:

* ``ci`` (default): derandomized and bounded, so CI is repeatable and quick;
* ``dev``: random, a few more examples;
* ``long``: the fuzz-length run (thousands of examples per property).
"""

from __future__ import annotations

import os

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

__all__ = ["java_oracle"]
