"""Hypothesis strategies for every generated message, built from the field tables.

``message(cls, version)`` draws a valid instance of ``cls`` for that version:
values fit their wire types, nulls appear only where the version allows them,
fields absent at the version keep their defaults (so the value encodes), tagged
fields are sometimes set and sometimes left at their default, and in flexible
versions each struct may carry unknown tagged fields (tags that no field of that
struct uses, ascending and unique, as a decoder would hand them back).

Users can reuse these in their own property tests::

    from hypothesis import given
    from kraft_jbod.fuzz import strategies
    from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest

    @given(strategies.message(BrokerHeartbeatRequest, 1))
    def test_roundtrip(msg):
        assert BrokerHeartbeatRequest.decode(msg.encode(1), 1) == msg
"""

from __future__ import annotations

import random
import sys
import uuid
from typing import Any

from hypothesis import strategies as st

from kraft_jbod.wire.message import FieldInfo, Message, Struct
from kraft_jbod.wire.primitives import INT_RANGES, uuid_from_bytes

MAX_ARRAY = 3
MAX_TEXT = 12


def uuids() -> st.SearchStrategy[uuid.UUID]:
    """Any 128-bit value, with the reserved directory ids and extremes favoured."""
    return st.one_of(
        st.sampled_from([0, 1, 2, (1 << 128) - 1, 1 << 127]),
        st.integers(0, (1 << 128) - 1),
    ).map(lambda n: uuid_from_bytes(n.to_bytes(16, "big")))


def scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        return st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False, width=64)
    if kind == "string":
        return st.text(max_size=MAX_TEXT)
    if kind in ("bytes", "records"):
        return st.binary(max_size=24)
    if kind == "uuid":
        return uuids()
    raise ValueError(f"no strategy for {kind}")


def _field_value(f: FieldInfo, version: int, depth: int) -> st.SearchStrategy[Any]:
    if f.type.startswith("[]"):
        if f.struct is not None:
            elem: st.SearchStrategy[Any] = struct_value(f.struct, version, depth + 1)
        else:
            elem = scalar(f.type[2:])
        size = 0 if depth > 3 else MAX_ARRAY
        base: st.SearchStrategy[Any] = st.lists(elem, max_size=size)
    elif f.struct is not None:
        base = struct_value(f.struct, version, depth + 1)
    else:
        base = scalar(f.type)
    if f.is_nullable(version):
        base = st.one_of(st.none(), base)
    return base


def unknown_tags(cls: type[Struct]) -> st.SearchStrategy[tuple[tuple[int, bytes], ...]]:
    used = {f.tag for f in cls._FIELDS if f.tag is not None}
    # Java cannot re-emit tag 2**31-1 (its raw-tag writer uses it as the end sentinel).
    tag = st.one_of(st.integers(0, 40), st.integers(41, (1 << 31) - 2)).filter(lambda t: t not in used)
    return st.lists(st.tuples(tag, st.binary(max_size=8)), max_size=2, unique_by=lambda t: t[0]).map(
        lambda items: tuple(sorted(items))
    )


_STRUCT_CACHE: dict[tuple[type[Struct], int, int], st.SearchStrategy[Any]] = {}


def struct_value(cls: type[Struct], version: int, depth: int = 0) -> st.SearchStrategy[Any]:
    """Instances of a generated struct valid at ``version`` (strategies are cached)."""
    key = (cls, version, depth)
    cached = _STRUCT_CACHE.get(key)
    if cached is None:
        cached = _STRUCT_CACHE[key] = _build_struct_value(cls, version, depth)
    return cached


def _build_struct_value(cls: type[Struct], version: int, depth: int) -> st.SearchStrategy[Any]:
    flexible = _flexible(cls, version)
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls._FIELDS:
        if not f.present(version):
            continue
        value = _field_value(f, version, depth)
        if f.is_tagged(version):
            # Tagged fields are often absent on the wire: keep the default half the time.
            value = st.one_of(st.builds(f.default), value)
        parts[f.attr] = value
    if flexible:
        parts["unknown_tagged_fields"] = st.one_of(st.just(()), unknown_tags(cls))
    return st.fixed_dictionaries(parts).map(lambda kw: cls(**kw))


def message(cls: type[Message], version: int) -> st.SearchStrategy[Any]:
    """Valid instances of a generated top-level message class at ``version``."""
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        raise ValueError(f"{cls.NAME} has no version {version} (valid {lo}-{hi})")
    return struct_value(cls, version)


_OWNERS: dict[type[Struct], type[Message] | None] = {}


def _owner(cls: type[Struct]) -> type[Message] | None:
    """The message owning a struct: structs know their flexibility only through it, and
    the generated module of a struct holds exactly one Message subclass."""
    if cls not in _OWNERS:
        module = sys.modules[cls.__module__]
        found = [
            v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Message) and v is not Message
        ]
        _OWNERS[cls] = found[0] if found else None
    return _OWNERS[cls]


def _flexible(cls: type[Struct], version: int) -> bool:
    owner = cls if isinstance(cls, type) and issubclass(cls, Message) else _owner(cls)
    return owner is not None and owner.is_flexible(version)


# --------------------------------------------------------------------------- seeded generation
#
# The live fuzzer needs the same values as the strategies above, but drawn from a plain
# ``random.Random`` so every frame is reproducible from (seed, index) without running
# hypothesis' engine per frame. Same rules: values fit their wire types, nulls only where
# the version allows, tagged fields sometimes left at default, unknown tags in flexible
# versions, ascending and unique.

_FAVOURED_INTS = (0, 1, -1)
_TEXT_ALPHABET = "abcxyz019._-é€"


def _random_scalar(kind: str, rng: random.Random) -> Any:
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        roll = rng.random()
        if roll < 0.3:
            return max(lo, min(hi, rng.choice(_FAVOURED_INTS)))
        if roll < 0.4:
            return rng.choice((lo, hi))
        if roll < 0.8:
            return max(lo, min(hi, rng.randint(-4, 1000)))
        return rng.randint(lo, hi)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.choice((0.0, 1.5, -2.0, 1e300, rng.uniform(-1e6, 1e6)))
    if kind == "string":
        return "".join(rng.choice(_TEXT_ALPHABET) for _ in range(rng.randint(0, MAX_TEXT)))
    if kind in ("bytes", "records"):
        return rng.randbytes(rng.randint(0, 24))
    if kind == "uuid":
        if rng.random() < 0.3:
            return uuid_from_bytes(rng.choice((0, 1, 2, (1 << 128) - 1)).to_bytes(16, "big"))
        return uuid_from_bytes(rng.randbytes(16))
    raise ValueError(f"no generator for {kind}")


def _random_field(f: FieldInfo, version: int, depth: int, rng: random.Random) -> Any:
    if f.is_nullable(version) and rng.random() < 0.15:
        return None
    if f.type.startswith("[]"):
        size = 0 if depth > 3 else rng.randint(0, MAX_ARRAY)
        if f.struct is not None:
            return [random_struct(f.struct, version, rng, depth + 1) for _ in range(size)]
        return [_random_scalar(f.type[2:], rng) for _ in range(size)]
    if f.struct is not None:
        return random_struct(f.struct, version, rng, depth + 1)
    return _random_scalar(f.type, rng)


def random_unknown_tags(cls: type[Struct], rng: random.Random) -> tuple[tuple[int, bytes], ...]:
    """Up to two unknown tags of ``cls``, ascending and unique, never a tag a field uses."""
    used = {f.tag for f in cls._FIELDS if f.tag is not None}
    tags: set[int] = set()
    for _ in range(rng.randint(0, 2)):
        tag = rng.randint(0, 40) if rng.random() < 0.8 else rng.randint(41, (1 << 31) - 2)
        if tag not in used:
            tags.add(tag)
    return tuple((t, rng.randbytes(rng.randint(0, 8))) for t in sorted(tags))


def random_struct(cls: type[Struct], version: int, rng: random.Random, depth: int = 0) -> Any:
    """A value of ``cls`` valid at ``version``, drawn from ``rng`` (deterministic per seed)."""
    kwargs: dict[str, Any] = {}
    for f in cls._FIELDS:
        if not f.present(version):
            continue
        if f.is_tagged(version) and rng.random() < 0.5:
            continue  # left at its default: absent from the wire
        kwargs[f.attr] = _random_field(f, version, depth, rng)
    if _flexible(cls, version) and rng.random() < 0.2:
        kwargs["unknown_tagged_fields"] = random_unknown_tags(cls, rng)
    return cls(**kwargs)


def random_message(cls: type[Message], version: int, rng: random.Random) -> Any:
    """A valid instance of a top-level message at ``version``, drawn from ``rng``.

    Raises:
        ValueError: ``version`` is outside ``cls.VALID_VERSIONS``.
    """
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        raise ValueError(f"{cls.NAME} has no version {version} (valid {lo}-{hi})")
    return random_struct(cls, version, rng)
