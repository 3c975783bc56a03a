"""The mutators: sites match the real encoder, each operator breaks what it says it breaks."""

from __future__ import annotations

import random
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod import codec, messages
from kraft_jbod.errors import DecodeError
from kraft_jbod.fuzz import mutators, strategies
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Listener

REQUEST_KEYS = sorted(messages.REQUESTS)


def heartbeat_frame() -> mutators.Frame:
    body = BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=5, current_metadata_offset=10, offline_log_dirs=[uuid.UUID(int=7), uuid.UUID(int=9)]
    )
    return mutators.build_frame(body, 1, 42)


def registration_frame(version: int) -> mutators.Frame:
    body = BrokerRegistrationRequest(
        broker_id=1,
        cluster_id="abc",
        listeners=[Listener("PLAINTEXT", "h", 9092, 0)],
        log_dirs=[uuid.UUID(int=5)] if version >= 2 else [],
    )
    return mutators.build_frame(body, version, 7)


def payload_of(data: bytes) -> bytes:
    split = mutators.split_frames(data)
    assert len(split.frames) == 1, split
    return split.frames[0]


@pytest.mark.parametrize("key", REQUEST_KEYS)
def test_trace_matches_the_generated_encoder(key: int) -> None:
    cls = messages.request_class(key)
    lo, hi = cls.VALID_VERSIONS
    for version in range(lo, hi + 1):
        for i in range(3):
            msg = strategies.random_message(cls, version, random.Random(f"{key}:{version}:{i}"))
            traced = mutators.trace(msg, version)
            assert traced.exact, (cls.NAME, version)
            assert traced.data == msg.encode(version)
            for site in traced.sites:
                assert 0 <= site.offset and site.offset + site.width <= len(traced.data)


def test_frame_is_a_real_request() -> None:
    frame = heartbeat_frame()
    decoded = codec.decode_request(frame.payload)
    assert decoded.body == frame.body
    assert frame.framed()[:4] == struct.pack(">i", len(frame.payload))
    kinds = {s.kind for s in frame.sites}
    # header ClientId (int16), the tagged section with OfflineLogDirs (compact count inside it)
    assert {mutators.STR16, mutators.TAGCOUNT, mutators.TAG, mutators.TAGSIZE, mutators.UCOUNT} <= kinds


def test_length_overflow_declares_more_than_the_frame_holds() -> None:
    for seed in range(40):
        frame = registration_frame(3)
        mutant = mutators.mutate(frame, random.Random(seed), only="length_overflow")
        assert mutant.ops == ["length_overflow"]
        payload = payload_of(mutant.data)
        with pytest.raises(DecodeError):
            codec.decode_request(payload)


def test_null_in_non_nullable_fields_is_refused_by_decoders() -> None:
    refused = 0
    for seed in range(40):
        mutant = mutators.mutate(registration_frame(3), random.Random(seed), only="null_not_nullable")
        try:
            codec.decode_request(payload_of(mutant.data))
        except DecodeError:
            refused += 1
    assert refused == 40


def test_huge_counts_never_allocate_and_are_refused() -> None:
    for seed in range(30):
        mutant = mutators.mutate(heartbeat_frame(), random.Random(seed), only="huge_count")
        with pytest.raises(DecodeError):
            codec.decode_request(payload_of(mutant.data))


def test_overlong_varints() -> None:
    styles = set()
    for seed in range(60):
        frame = heartbeat_frame()
        mutant = mutators.mutate(frame, random.Random(seed), only="varint_overlong")
        assert mutant.data != frame.framed()
        try:
            codec.decode_request(payload_of(mutant.data))
            styles.add("accepted")
        except DecodeError:
            styles.add("refused")
    assert "refused" in styles  # six or more bytes, or more than 32 bits, must be refused


def test_tag_operators_make_sections_a_reader_must_judge() -> None:
    outcomes = {"refused": 0, "accepted": 0}
    for seed in range(80):
        frame = heartbeat_frame()
        mutant = mutators.mutate(frame, random.Random(seed), only="tags")
        assert mutant.ops == ["tags"]
        try:
            codec.decode_request(payload_of(mutant.data))
            outcomes["accepted"] += 1
        except DecodeError:
            outcomes["refused"] += 1
    # unknown tags are legal (kept), wrong sizes and known tags at a bad version are not
    assert outcomes["refused"] > 0 and outcomes["accepted"] > 0


def test_wrong_version_tag_is_refused() -> None:
    # BrokerHeartbeat v0 knows tag 0 (OfflineLogDirs) only from v1: reading it at v0 fails.
    frame = mutators.build_frame(BrokerHeartbeatRequest(broker_id=1), 0, 1)
    for seed in range(200):
        mutant = mutators.mutate(frame, random.Random(seed), only="tags")
        payload = payload_of(mutant.data)
        if payload.endswith(b"\x00") or b"\x01\x00" not in payload[-20:]:
            continue
        try:
            codec.decode_request(payload)
        except DecodeError as exc:
            if "not valid for version" in str(exc):
                return
    pytest.fail("no wrong-version tag produced in 200 seeds")


def test_header_and_key_operators() -> None:
    frame = heartbeat_frame()
    for seed in range(20):
        payload = payload_of(mutators.mutate(frame, random.Random(seed), only="api_key").data)
        assert struct.unpack_from(">h", payload)[0] not in messages.REQUESTS or struct.unpack_from(">h", payload)[
            0
        ] in (4, 5, 6)
        payload = payload_of(mutators.mutate(frame, random.Random(seed), only="kip511").data)
        key, version, _ = codec.peek_request(payload)
        assert key == 18 and version >= 5
        payload = payload_of(mutators.mutate(frame, random.Random(seed), only="header_version").data)
        assert (
            payload[frame.header_len :] != frame.payload[frame.header_len :]
            or payload[: frame.header_len] != frame.payload[: frame.header_len]
        )


def test_frame_level_operators_and_split() -> None:
    frame = heartbeat_frame()
    whole = frame.framed()
    assert mutators.split_frames(whole) == mutators.Split((frame.payload,), "clean")
    assert mutators.split_frames(whole[:-1]).tail == "partial"
    assert mutators.split_frames(struct.pack(">i", -1) + b"xx").tail == "invalid"
    assert mutators.split_frames(struct.pack(">i", 3) + b"abc").tail == "invalid"
    assert mutators.split_frames(whole + whole) == mutators.Split((frame.payload, frame.payload), "clean")
    tails = set()
    for seed in range(40):
        tails.add(mutators.split_frames(mutators.mutate(frame, random.Random(seed), only="frame_prefix").data).tail)
    assert tails == {"partial", "invalid"}
    pipelined = mutators.mutate(frame, random.Random(1), only="pipeline").data
    assert len(mutators.split_frames(pipelined).frames) == 2


def test_truncation_shortens_the_payload() -> None:
    frame = heartbeat_frame()
    for seed in range(30):
        data = mutators.mutate(frame, random.Random(seed), only="truncate").data
        split = mutators.split_frames(data)
        if split.tail == "clean":
            assert len(split.frames[0]) < len(frame.payload)
        else:
            assert split.tail == "invalid"  # cut inside the 8-byte header: no request at all


def test_mutation_is_reproducible_from_the_seed() -> None:
    frame = registration_frame(3)
    a = [mutators.mutate(frame, random.Random(s)) for s in range(50)]
    b = [mutators.mutate(frame, random.Random(s)) for s in range(50)]
    assert [m.data for m in a] == [m.data for m in b]
    assert len({m.data for m in a}) > 40
    assert all(m.ops for m in a)


@settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_any_operator_on_any_request_gives_bytes_and_describes(data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(REQUEST_KEYS))
    cls = messages.request_class(key)
    version = data.draw(st.integers(*cls.VALID_VERSIONS))
    msg = data.draw(strategies.message(cls, version))
    op = data.draw(st.sampled_from(sorted(mutators.OPERATORS)))
    frame = mutators.build_frame(msg, version, 3)
    mutant = mutators.mutate(frame, random.Random(data.draw(st.integers(0, 1 << 30))), only=op)
    assert isinstance(mutant.data, bytes)
    split = mutators.split_frames(mutant.data)
    assert split.tail in ("clean", "partial", "invalid")
    described = mutators.describe(mutant.data)
    assert isinstance(described, list)
    for payload in split.frames:
        try:
            codec.decode_request(payload)
        except DecodeError:
            pass  # the decoder contract: DecodeError and nothing else


def test_seeded_generator_is_deterministic_and_valid() -> None:
    for key in REQUEST_KEYS:
        cls = messages.request_class(key)
        version = cls.VALID_VERSIONS[1]
        a = strategies.random_message(cls, version, random.Random(key))
        b = strategies.random_message(cls, version, random.Random(key))
        assert a == b
        assert cls.decode(a.encode(version), version).encode(version) == a.encode(version)
    with pytest.raises(ValueError):
        strategies.random_message(BrokerHeartbeatRequest, 99, random.Random(0))
