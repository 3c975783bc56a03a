"""Kafka's wire rules where peers break: headers, varints, uuids, tags, worked examples.

Expected bytes are written out by hand from the rules (protocol-notes §4-5), so
these tests check our reading of the rules, while the Java differential sweep
checks our agreement with Kafka's code.
"""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod import codec
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.controlled_shutdown_request import ControlledShutdownRequest
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.messages.request_header import RequestHeader
from kraft_jbod.wire import primitives as p

U = uuid.UUID(int=(0x1234 << 64) | 0x5678)


def test_notes_heartbeat_v1_example() -> None:
    body = BrokerHeartbeatRequest(1, 10, 100, False, False, [U]).encode(1)
    assert body.hex() == ("00000001000000000000000a000000000000006400000100110200000000000012340000000000005678")
    assert BrokerHeartbeatRequest(1, 10, 100, False, False, []).encode(1).hex().endswith("000000")


def test_notes_heartbeat_v1_framed_example() -> None:
    frame = codec.encode_request(BrokerHeartbeatRequest(1, 10, 100, False, False, [U]), 1, 7, "1")
    assert frame[:4].hex() == "00000036"  # size 54
    assert frame[4:16].hex() == "003f00010000000700013100"
    decoded = codec.decode_request(frame[4:])
    assert decoded.header_version == 2 and decoded.header.client_id == "1"
    assert decoded.body.offline_log_dirs == [U]


def test_notes_registration_change_record_examples() -> None:
    unfence = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1)
    assert codec.encode_metadata_record(unfence, 0).hex() == "01110000000001000000000000000a010001ff"
    with_dirs = BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, log_dirs=[U])
    raw = codec.encode_metadata_record(with_dirs, 2)
    assert raw.hex() == "01110200000001000000000000000a01021102" + U.bytes.hex()
    assert codec.decode_metadata_record(raw) == (with_dirs, 2)


def test_notes_feature_level_record_frame() -> None:
    frame = codec.encode_metadata_record(FeatureLevelRecord(name="metadata.version", feature_level=17), 0)
    assert frame.hex() == "010c0011" + b"metadata.version".hex() + "001100"
    assert len(frame) == 23


def test_metadata_record_garbage_and_frame_version() -> None:
    frame = codec.encode_metadata_record(FeatureLevelRecord(name="x", feature_level=1), 0)
    with pytest.raises(DecodeError, match="garbage"):
        codec.decode_metadata_record(frame + b"\0")
    with pytest.raises(DecodeError, match=r"2\.8 preview"):
        codec.decode_metadata_record(b"\x00" + frame[1:])
    with pytest.raises(DecodeError, match="unknown metadata record type"):
        codec.decode_metadata_record(bytes.fromhex("01ff7f00"))


def test_request_header_client_id_stays_classic_in_v2() -> None:
    raw = RequestHeader(18, 3, 1, "ck").encode(2)
    assert raw.hex() == "00120003000000010002636b00"
    assert RequestHeader(18, 3, 1, None).encode(2).hex() == "0012000300000001ffff00"
    assert RequestHeader.decode(bytes.fromhex("0012000300000001ffff00"), 2).client_id is None


def test_header_versions() -> None:
    assert codec.request_header_version(63, 1) == 2
    assert codec.request_header_version(3, 8) == 1
    assert codec.request_header_version(3, 9) == 2
    assert codec.request_header_version(7, 0) == 0  # ControlledShutdown v0: no client id
    assert codec.request_header_version(7, 1) == 1
    assert codec.response_header_version(63, 1) == 1
    assert codec.response_header_version(3, 8) == 0
    assert codec.response_header_version(18, 3) == 0  # ApiVersions: always v0 (KIP-511)
    frame = codec.encode_request(ControlledShutdownRequest(broker_id=3), 0, 9, "ignored")
    assert frame[4:].hex() == "000700000000000900000003"


def test_api_versions_response_header_has_no_tags() -> None:
    body = ApiVersionsResponse(error_code=0, api_keys=[ApiVersion(18, 0, 4)])
    frame = codec.encode_response(body, 3, 5)
    assert frame[4:8].hex() == "00000005"
    assert frame[8:10].hex() == "0000"  # the body starts right after the correlation id
    assert codec.decode_response(frame[4:], 18, 3).body == body


def test_real_client_first_frames_decode() -> None:
    # Frames real clients sent (oracles.md §3): librdkafka, kafka-python, aiokafka, kafkajs.
    frames = {
        "000000440012000300000001000b636b2d70726f64756365720017636f6e666c75656e742d6b61666b612d707974686f6e16322e31362e312d72646b61666b612d322e31362e3000": (
            3,
            "ck-producer",
        ),
        "00000033001200040000000100136b61666b612d707974686f6e2d332e302e3132000d6b61666b612d707974686f6e07332e302e313200": (
            4,
            "kafka-python-3.0.12",
        ),
        "000000190012000000000001000f61696f6b61666b612d302e31342e30": (0, "aiokafka-0.14.0"),
        "000000170012000200000000000d6b61666b616a732d70726f6265": (2, "kafkajs-probe"),
    }
    for hexframe, (version, client_id) in frames.items():
        raw = bytes.fromhex(hexframe)
        req = codec.decode_request(raw[4:])
        assert (req.api_key, req.api_version, req.header.client_id) == (18, version, client_id)
        assert req.trailing == b""
        assert codec.encode_request(req.body, version, req.header.correlation_id, client_id) == raw
    ck = codec.decode_request(bytes.fromhex(next(iter(frames)))[4:]).body
    assert isinstance(ck, ApiVersionsRequest)
    assert (ck.client_software_name, ck.client_software_version) == ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0")


def test_trailing_bytes_are_tolerated_and_reported() -> None:
    # librdkafka 2.16's all-topics MetadataRequest v12 carries 3 trailing bytes.
    frame = codec.encode_request(MetadataRequest(topics=None), 12, 2, "rdkafka")
    req = codec.decode_request(frame[4:] + b"\x01\x00\x00")
    assert req.trailing == b"\x01\x00\x00" and req.body.topics is None
    with pytest.raises(DecodeError, match="3 trailing bytes"):
        MetadataRequest.decode(MetadataRequest(topics=None).encode(12) + b"\x01\x00\x00", 12)


def test_unknown_api_key_and_frame_size() -> None:
    with pytest.raises(DecodeError, match="unknown api key 999"):
        codec.decode_request(bytes.fromhex("03e7000000000001ffff"))
    with pytest.raises(DecodeError, match="exceeds the limit"):
        codec.frame_size(b"\x7f\xff\xff\xff")
    with pytest.raises(DecodeError, match="negative frame size"):
        codec.frame_size(b"\xff\xff\xff\xfe")
    assert codec.api_name(62) == "BrokerRegistration" and codec.api_name(999) == "Unknown(999)"


@pytest.mark.parametrize(
    ("raw", "value"),
    [("00", 0), ("7f", 127), ("8001", 128), ("ffffffff0f", 0xFFFFFFFF), ("8080808000", 0)],
)
def test_uvarint_values(raw: str, value: int) -> None:
    assert p.read_uvarint(bytes.fromhex(raw), 0, "f") == (value, len(raw) // 2)


def test_uvarint_limits_like_kafka() -> None:
    with pytest.raises(DecodeError, match="varint is too long") as info:
        p.read_uvarint(bytes.fromhex("8080808080"), 0, "Tags")  # a 6th byte would be needed
    assert info.value.field_path == "Tags"
    # Kafka's reader keeps 32 bits and drops the rest of a fifth byte.
    assert p.read_uvarint(bytes.fromhex("ffffffff1f"), 0, "f") == (0xFFFFFFFF, 5)
    with pytest.raises(DecodeError, match="truncated"):
        p.read_uvarint(bytes.fromhex("8080"), 0, "f")
    # A compact string whose length wraps like that is refused by the length check.
    with pytest.raises(DecodeError, match="exceeds 32767"):
        p.read_compact_string(bytes.fromhex("ffffffff1f"), 0, "Name")
    out = bytearray()
    with pytest.raises(EncodeError):
        p.write_uvarint(out, 1 << 32)
    with pytest.raises(EncodeError):
        p.write_uvarint(out, -1)


def test_uuid_helpers() -> None:
    u = uuid.UUID("11111111-2222-3333-4444-555555555555")
    assert p.uuid_to_base64url(u) == "ERERESIiMzNERFVVVVVVVQ"
    assert p.uuid_from_base64url("ERERESIiMzNERFVVVVVVVQ") == u
    with pytest.raises(ValueError):
        p.uuid_from_base64url("short")
    assert (p.MIGRATING_DIRECTORY.int, p.UNASSIGNED_DIRECTORY.int, p.LOST_DIRECTORY.int) == (0, 1, 2)
    assert p.uuid_to_base64url(p.UNASSIGNED_DIRECTORY) == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert p.is_reserved_directory_id(uuid.UUID(int=99)) and not p.is_reserved_directory_id(uuid.UUID(int=100))
    assert p.is_reserved_directory_id(uuid.UUID(int=1 << 63))  # msb 0, negative lsb
    assert not p.is_reserved_directory_id(uuid.UUID(int=1 << 64))
    # Signed ordering: an msb with the top bit set sorts before zero, as Java's compareTo does.
    high = uuid.UUID(int=1 << 127)
    assert sorted([p.UNASSIGNED_DIRECTORY, high], key=p.uuid_signed_key) == [high, p.UNASSIGNED_DIRECTORY]
    assert p.uuid_from_bytes(u.bytes) == u and hash(p.uuid_from_bytes(u.bytes)) == hash(u)


def test_unknown_tags_preserved_in_ascending_order() -> None:
    msg = BrokerHeartbeatRequest(1, 2, 3, False, False, [U], unknown_tagged_fields=((5, b"\x09"), (2, b"")))
    raw = msg.encode(1)
    # Section: 3 fields: tag 0 (known), then 2 and 5 (unknown), ascending.
    assert raw[22:].hex() == "03001102" + U.bytes.hex() + "0200050109"
    back = BrokerHeartbeatRequest.decode(raw, 1)
    assert back.unknown_tagged_fields == ((2, b""), (5, b"\x09"))
    with pytest.raises(EncodeError, match="collides"):
        BrokerHeartbeatRequest(1, 2, 3, False, False, [U], unknown_tagged_fields=((0, b""),)).encode(1)


def test_known_tag_at_version_without_field_is_rejected() -> None:
    v1 = BrokerHeartbeatRequest(1, 2, 3, False, False, [U]).encode(1)
    with pytest.raises(DecodeError, match="tag 0 is not valid for version 0"):
        BrokerHeartbeatRequest.decode(v1, 0)


def test_non_default_field_absent_at_version() -> None:
    with pytest.raises(EncodeError, match="non-default OfflineLogDirs at version 0"):
        BrokerHeartbeatRequest(offline_log_dirs=[U]).encode(0)
    # PreviousBrokerEpoch (v3+) is ignorable in BrokerRegistrationRequest: dropped at v2.
    from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest

    assert BrokerRegistrationRequest(previous_broker_epoch=7).encode(2) == BrokerRegistrationRequest().encode(2)
