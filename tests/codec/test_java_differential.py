"""Differential tests against Apache Kafka's own Java codec (kafka-clients 3.9.1).

For every request and response api key the jar knows and every version both sides
support (the versions Kafka 4.x removed included), hypothesis draws messages (unknown
tagged fields included) and ``tests/oracles/differential.py`` checks both directions,
byte-exact and JSON-equal. Kafka 4.4's versions: ``test_java_differential_44.py``.

A counter of checked (api key, kind, version) triples is asserted at the end so a
silently empty sweep fails.
"""

from __future__ import annotations

import pytest

from kraft_jbod import messages
from kraft_jbod.wire.message import Message
from tests.oracles.differential import java_ranges as _java_ranges_of
from tests.oracles.differential import older_json_names, respecified_versions, sweep
from tests.oracles.java_oracle import JavaOracle

CHECKED: set[tuple[str, int, int]] = set()


def _classes() -> list[tuple[str, int]]:
    out = []
    for key in sorted(messages.REQUESTS):
        out.append(("request", key))
    for key in sorted(messages.RESPONSES):
        out.append(("response", key))
    return out


@pytest.fixture(scope="module")
def java_ranges(java_oracle: JavaOracle) -> dict[int, tuple[int, int]]:
    return _java_ranges_of(java_oracle)


@pytest.mark.parametrize(("kind", "api_key"), _classes(), ids=lambda x: str(x))
def test_against_java(
    kind: str, api_key: int, java_oracle: JavaOracle, java_ranges: dict[int, tuple[int, int]]
) -> None:
    cls: type[Message] = messages.request_class(api_key) if kind == "request" else messages.response_class(api_key)
    if api_key not in java_ranges:
        # kafka-clients 3.9.1 predates this api; nothing Java can say about it.
        assert api_key > 0
        return
    jlo, jhi = java_ranges[api_key]
    lo, hi = max(jlo, cls.VALID_VERSIONS[0]), min(jhi, cls.VALID_VERSIONS[1])
    # Versions Kafka re-specified after 3.9 (share-group APIs changed v0 while unstable):
    # we follow 4.4 there, so 3.9.1 is not the judge of them.
    versions = [v for v in range(lo, hi + 1) if v not in respecified_versions(cls.NAME)]
    if not versions:
        assert respecified_versions(cls.NAME) >= set(range(lo, hi + 1)), f"no common versions for {cls.NAME}"
        return
    # 3.9.1 still uses the names some fields had before 4.x renamed them.
    sweep(
        java_oracle,
        kind,
        api_key,
        cls,
        versions,
        8,
        lambda v: CHECKED.add((kind, api_key, v)),
        older_json_names(cls.NAME),
    )


def test_sweep_covered_every_common_version(java_ranges: dict[int, tuple[int, int]]) -> None:
    expected = set()
    for kind, key in _classes():
        if key not in java_ranges:
            continue
        cls = messages.request_class(key) if kind == "request" else messages.response_class(key)
        lo, hi = max(java_ranges[key][0], cls.VALID_VERSIONS[0]), min(java_ranges[key][1], cls.VALID_VERSIONS[1])
        expected |= {(kind, key, v) for v in range(lo, hi + 1) if v not in respecified_versions(cls.NAME)}
    missing = expected - CHECKED
    assert not missing, f"{len(missing)} combinations not checked, e.g. {sorted(missing)[:5]}"
    # kafka-clients 3.9.1 and our union schemas share this many (kind, api key, version) triples.
    assert len(CHECKED) == len(expected) >= 645
    print(f"\nkafka-clients 3.9.1 oracle: {len(CHECKED)} (kind, api key, version) checked")
