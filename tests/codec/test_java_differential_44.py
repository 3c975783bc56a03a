"""Differential tests against Kafka 4.4's own generated message classes.

The oracle is the jar built from ``../shared/kafka`` (``tests/oracles/kafka44.py`` finds
it). For every request and response api key 4.4 defines and every version it defines,
hypothesis draws messages and ``tests/oracles/differential.py`` checks both directions,
byte-exact and JSON-equal. The closing test asserts that no (kind, api key, version)
4.4 defines went unchecked, so a silently short sweep fails. Versions 4.4 dropped
(KIP-896) are checked against kafka-clients 3.9.1 in ``test_java_differential.py``.
"""

from __future__ import annotations

import pytest

from kraft_jbod import messages
from kraft_jbod.wire.message import Message
from tests.oracles.differential import java_ranges, sweep
from tests.oracles.java_oracle import JavaOracle
from tests.oracles.kafka44 import java_oracle_44  # noqa: F401  (fixture)

CHECKED: set[tuple[str, int, int]] = set()


def _classes() -> list[tuple[str, int]]:
    return [("request", k) for k in sorted(messages.REQUESTS)] + [("response", k) for k in sorted(messages.RESPONSES)]


@pytest.fixture(scope="module")
def ranges_44(java_oracle_44: JavaOracle) -> dict[int, tuple[int, int]]:  # noqa: F811
    return java_ranges(java_oracle_44)


@pytest.mark.parametrize(("kind", "api_key"), _classes(), ids=lambda x: str(x))
def test_against_kafka_44(
    kind: str,
    api_key: int,
    java_oracle_44: JavaOracle,  # noqa: F811
    ranges_44: dict[int, tuple[int, int]],
) -> None:
    cls: type[Message] = messages.request_class(api_key) if kind == "request" else messages.response_class(api_key)
    if api_key not in ranges_44:
        # Only the ZooKeeper-era keys 4-7: 4.4 defines no version of them.
        assert api_key in (4, 5, 6, 7), f"Kafka 4.4 does not know api key {api_key}"
        return
    lo, hi = ranges_44[api_key]
    # Our union must hold every version 4.4 defines.
    assert cls.VALID_VERSIONS[0] <= lo and hi <= cls.VALID_VERSIONS[1], (cls.NAME, lo, hi)
    sweep(java_oracle_44, kind, api_key, cls, list(range(lo, hi + 1)), 4, lambda v: CHECKED.add((kind, api_key, v)))


def test_every_version_kafka_44_defines_was_checked(ranges_44: dict[int, tuple[int, int]]) -> None:
    expected = {
        (kind, key, v)
        for kind, key in _classes()
        if key in ranges_44
        for v in range(ranges_44[key][0], ranges_44[key][1] + 1)
    }
    missing = expected - CHECKED
    assert not missing, f"{len(missing)} combinations not checked, e.g. {sorted(missing)[:5]}"
    keys = {key for _, key, _ in CHECKED}
    assert set(range(88, 95)) <= keys and len(CHECKED) == len(expected)
    print(f"\nKafka 4.4 oracle: {len(CHECKED)} (kind, api key, version) checked over {len(keys)} api keys")
