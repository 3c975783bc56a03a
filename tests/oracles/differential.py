"""The two-direction check every Java differential test runs, whatever the Kafka build.

* ours → Java: Java consumes exactly our bytes, re-encodes them to the same bytes, and its
  JSON converter prints the same value as our ``to_json``;
* Java → ours: Java builds the message from our JSON and encodes it; those bytes equal
  ours (unknown tags aside, since JSON cannot carry them) and decode to the same value.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod.fuzz import strategies
from kraft_jbod.wire.message import Message, Struct
from tests.oracles.java_oracle import JavaOracle
from tests.oracles.values import strip_unknown

VERSIONS_TABLE = Path(__file__).resolve().parents[2] / "schemas" / "versions.json"


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def older_json_names(message: str) -> dict[str, str]:
    """Our JSON key -> the key an older Kafka uses, for fields Kafka renamed without a
    wire change (schemas/versions.json records them)."""
    row = json.loads(VERSIONS_TABLE.read_text(encoding="utf-8"))["messages"].get(message, {})
    return {_camel(new): _camel(old) for old, new in row.get("renamed", {}).items()}


def respecified_versions(message: str, source: str = "snapshot-2024-10-25") -> set[int]:
    """Versions ``source`` (which kafka-clients 3.9 matches) lays out differently from the
    Kafka 4.4 schemas we follow (schemas/versions.json: Kafka changed them while unstable)."""
    row = json.loads(VERSIONS_TABLE.read_text(encoding="utf-8"))["messages"].get(message, {})
    return set(row.get("respecified", {}).get(source, []))


def rename_keys(value: Any, names: dict[str, str]) -> Any:
    if not names:
        return value
    if isinstance(value, dict):
        return {names.get(k, k): rename_keys(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [rename_keys(v, names) for v in value]
    return value


def _non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, list):
        return any(_non_finite(v) for v in value)
    if isinstance(value, Struct):
        return any(_non_finite(getattr(value, f.attr)) for f in value._FIELDS)
    return False


def java_ranges(oracle: JavaOracle) -> dict[int, tuple[int, int]]:
    """Per api key, the versions the Java build defines (keys it defines none of left out)."""
    return {a["api_key"]: (a["lowest"], a["highest"]) for a in oracle.apis() if 0 <= a["lowest"] <= a["highest"]}


def sweep(
    oracle: JavaOracle,
    kind: str,
    api_key: int,
    cls: type[Message],
    versions: list[int],
    examples: int,
    on_checked: Callable[[int], None],
    json_names: dict[str, str] | None = None,
) -> None:
    """Draw ``examples`` messages per version and check both directions for each.

    ``json_names`` maps our JSON keys to the peer's where its release used older names.
    """
    names = json_names or {}

    @settings(max_examples=examples, suppress_health_check=list(HealthCheck), deadline=None, database=None)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        drawn = [(v, data.draw(strategies.message(cls, v), label=f"v{v}")) for v in versions]
        ours = [(v, m, m.encode(v)) for v, m in drawn]
        replies = oracle.decode_many([(kind, api_key, v, b) for v, _, b in ours])  # type: ignore[misc]
        for (v, m, b), reply in zip(ours, replies, strict=True):
            where = f"{cls.NAME} v{v} {b.hex()}"
            assert reply["ok"], f"Java rejected our bytes: {reply.get('error')} ({where})"
            assert reply["consumed"] == reply["total"] == len(b), where
            assert bytes.fromhex(reply["reencoded"]) == b, f"Java re-encodes differently ({where})"
            theirs = rename_keys(m.to_json(v), names)
            assert reply["json"] == theirs, where
            plain = strip_unknown(m)
            on_checked(v)
            if _non_finite(plain):
                # Kafka's JSON converter writes NaN/Infinity as strings it then refuses to
                # read back, so this value cannot travel Java's way; bytes were checked above.
                continue
            java_bytes = oracle.encode_json(kind, api_key, v, theirs)  # type: ignore[arg-type]
            assert java_bytes == plain.encode(v), f"Java encodes our JSON differently ({where})"
            assert cls.decode(java_bytes, v) == plain, where

    check()
