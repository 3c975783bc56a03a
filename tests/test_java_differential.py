"""Differential tests against Apache Kafka's own Java codec (kafka-clients 3.9.1).

For every request and response api key the jar knows and every version both sides
support, hypothesis draws messages (unknown tagged fields included) and checks both
directions:

* ours → Java: Java consumes exactly our bytes, re-encodes them to the same bytes,
  and its JSON converter prints the same value as our ``to_json``;
* Java → ours: Java builds the message from our JSON and encodes it; those bytes
  equal ours (unknown tags aside, since JSON cannot carry them) and decode to the
  same value.

A counter of checked (api key, kind, version) triples is asserted at the end so a
silently empty sweep fails.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod import messages
from kraft_jbod.fuzz import strategies
from kraft_jbod.wire.message import Message
from tests.oracles.java_oracle import JavaOracle
from tests.oracles.values import strip_unknown

CHECKED: set[tuple[str, int, int]] = set()


def _java_ranges(java_oracle: JavaOracle) -> dict[int, tuple[int, int]]:
    return {a["api_key"]: (a["lowest"], a["highest"]) for a in java_oracle.apis()}


def _classes() -> list[tuple[str, int]]:
    out = []
    for key in sorted(messages.REQUESTS):
        out.append(("request", key))
    for key in sorted(messages.RESPONSES):
        out.append(("response", key))
    return out


@pytest.fixture(scope="module")
def java_ranges(java_oracle: JavaOracle) -> dict[int, tuple[int, int]]:
    return _java_ranges(java_oracle)


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
    versions = list(range(lo, hi + 1))
    assert versions, f"no common versions for {cls.NAME}"

    @settings(max_examples=8, suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        drawn = [(v, data.draw(strategies.message(cls, v), label=f"v{v}")) for v in versions]
        ours = [(v, m, m.encode(v)) for v, m in drawn]
        replies = java_oracle.decode_many([(kind, api_key, v, b) for v, _, b in ours])  # type: ignore[misc]
        for (v, m, b), reply in zip(ours, replies, strict=True):
            where = f"{cls.NAME} v{v} {b.hex()}"
            assert reply["ok"], f"Java rejected our bytes: {reply.get('error')} ({where})"
            assert reply["consumed"] == reply["total"] == len(b), where
            assert bytes.fromhex(reply["reencoded"]) == b, f"Java re-encodes differently ({where})"
            assert reply["json"] == m.to_json(v), where
            # And the other direction: Java builds the message from our JSON.
            plain = strip_unknown(m)
            java_bytes = java_oracle.encode_json(kind, api_key, v, m.to_json(v))  # type: ignore[arg-type]
            assert java_bytes == plain.encode(v), f"Java encodes our JSON differently ({where})"
            assert cls.decode(java_bytes, v) == plain, where
            CHECKED.add((kind, api_key, v))

    check()


def test_sweep_covered_every_common_version(java_ranges: dict[int, tuple[int, int]]) -> None:
    expected = set()
    for kind, key in _classes():
        if key not in java_ranges:
            continue
        cls = messages.request_class(key) if kind == "request" else messages.response_class(key)
        lo, hi = max(java_ranges[key][0], cls.VALID_VERSIONS[0]), min(java_ranges[key][1], cls.VALID_VERSIONS[1])
        expected |= {(kind, key, v) for v in range(lo, hi + 1)}
    missing = expected - CHECKED
    assert not missing, f"{len(missing)} combinations not checked, e.g. {sorted(missing)[:5]}"
    # kafka-clients 3.9.1 and our schemas share 646 (kind, api key, version) triples.
    assert len(CHECKED) >= 600
