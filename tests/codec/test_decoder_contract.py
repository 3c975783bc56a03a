"""The decoder contract: whatever the bytes, the only exception is DecodeError.

Every decoder of every message and version gets arbitrary bytes and mutated valid
encodings (bit flips, truncations, inserted bytes, huge length fields). A
DecodeError must say which api key, version and offset it is about.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod import messages
from kraft_jbod.errors import DecodeError
from kraft_jbod.fuzz import strategies
from kraft_jbod.wire.message import Message

ALL = sorted(messages.BY_NAME)


def _decode_only_raises_decode_error(cls: type[Message], data: bytes, version: int) -> None:
    try:
        cls.decode(data, version)
    except DecodeError as exc:
        assert exc.version == version
        assert exc.message == cls.NAME
        assert exc.offset is None or 0 <= exc.offset <= len(data)


@pytest.mark.parametrize("name", ALL)
def test_arbitrary_bytes(name: str) -> None:
    cls = messages.by_name(name)
    lo, hi = cls.VALID_VERSIONS

    @settings(suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.integers(lo, hi), st.binary(max_size=64))
    def check(version: int, data: bytes) -> None:
        _decode_only_raises_decode_error(cls, data, version)

    check()


@pytest.mark.parametrize("name", ALL)
def test_mutated_valid_encodings(name: str) -> None:
    cls = messages.by_name(name)
    lo, hi = cls.VALID_VERSIONS

    @settings(suppress_health_check=list(HealthCheck), deadline=None)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        version = data.draw(st.integers(lo, hi))
        raw = bytearray(data.draw(strategies.message(cls, version)).encode(version))
        mutation = data.draw(st.sampled_from(["flip", "truncate", "insert", "huge"]))
        if raw and mutation == "flip":
            i = data.draw(st.integers(0, len(raw) - 1))
            raw[i] ^= 1 << data.draw(st.integers(0, 7))
        elif mutation == "truncate":
            del raw[data.draw(st.integers(0, len(raw))) :]
        elif mutation == "insert":
            i = data.draw(st.integers(0, len(raw)))
            raw[i:i] = data.draw(st.binary(min_size=1, max_size=4))
        elif raw:
            i = data.draw(st.integers(0, max(len(raw) - 4, 0)))
            raw[i : i + 4] = b"\x7f\xff\xff\xff"[: len(raw) - i]
        _decode_only_raises_decode_error(cls, bytes(raw), version)

    check()


def test_unknown_version_is_a_decode_error() -> None:
    cls = messages.request_class(63)
    with pytest.raises(DecodeError, match="can't read version 99 of BrokerHeartbeatRequest"):
        cls.decode(b"", 99)


def test_declared_length_checked_before_allocating() -> None:
    # A compact array claiming 2**31 elements in a 30-byte body must fail on the count, at once.
    cls = messages.request_class(73)  # AssignReplicasToDirs v0: BrokerId, BrokerEpoch, then Directories
    body = bytes(12) + b"\xff\xff\xff\xff\x07" + bytes(13)
    with pytest.raises(DecodeError, match="array of 2147483646 elements but only 13 bytes remain") as info:
        cls.decode(body, 0)
    assert info.value.field_path == "Directories"
    assert info.value.offset == 17
