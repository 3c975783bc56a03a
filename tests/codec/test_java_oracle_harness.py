"""Checks of the Java oracle harness itself, against facts that do not come from our codec.

Expected values are worked out here by hand from the wire rules (big-endian integers, the
tagged-field section, base64url UUIDs) or taken from Kafka's schemas, so a bug in kraft_jbod
cannot hide a bug in the harness and vice versa.
"""

from __future__ import annotations

import base64
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.oracles import fixtures
from tests.oracles.java_oracle import (
    JAVA_SOURCE,
    JavaOracle,
    JavaOracleError,
    Kind,
    find_jar_dir,
    java_available,
)

# Re-bound rather than imported by name: a test parameter named like an imported fixture is a
# redefinition to ruff (F811), while a module-level assignment registers the same fixture.
java_oracle = fixtures.java_oracle

DIR_A = bytes.fromhex("1111111122223333" + "4444555555555555")
DIR_B = bytes.fromhex("aaaaaaaabbbbcccc" + "ddddeeeeeeeeeeee")

# BrokerHeartbeatRequest v1: brokerId=1, brokerEpoch=42, currentMetadataOffset=1000, wantFence and
# wantShutDown false, then a tagged section with one field: tag 0 (OfflineLogDirs), 33 bytes, a
# compact array of 2 UUIDs.
HEARTBEAT_FIXED = "00000001" + "000000000000002a" + "00000000000003e8" + "00" + "00"
HEARTBEAT_DIRS_TAG = "00" + "21" + "03" + DIR_A.hex() + DIR_B.hex()
HEARTBEAT_V1 = bytes.fromhex(HEARTBEAT_FIXED + "01" + HEARTBEAT_DIRS_TAG)


def uuid_json(raw: bytes) -> str:
    """Kafka's Uuid.toString(): unpadded base64url of the 16 bytes."""
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


HEARTBEAT_JSON = {
    "brokerId": 1,
    "brokerEpoch": 42,
    "currentMetadataOffset": 1000,
    "wantFence": False,
    "wantShutDown": False,
    "offlineLogDirs": [uuid_json(DIR_A), uuid_json(DIR_B)],
}


def test_decode_broker_heartbeat_v1(java_oracle: JavaOracle) -> None:
    reply = java_oracle.decode("request", 63, 1, HEARTBEAT_V1)
    assert reply["ok"] is True
    assert reply["consumed"] == reply["total"] == len(HEARTBEAT_V1) == 58
    assert reply["json"] == HEARTBEAT_JSON
    assert reply["json"]["offlineLogDirs"] == ["ERERESIiMzNERFVVVVVVVQ", "qqqqqru7zMzd3e7u7u7u7g"]
    assert bytes.fromhex(reply["reencoded"]) == HEARTBEAT_V1
    assert reply["unknown_tags"] == []


def test_encode_json_broker_heartbeat_v1(java_oracle: JavaOracle) -> None:
    assert java_oracle.encode_json("request", 63, 1, HEARTBEAT_JSON) == HEARTBEAT_V1


def test_heartbeat_v0_has_no_tagged_dirs(java_oracle: JavaOracle) -> None:
    # OfflineLogDirs is tagged in v1 only; at v0 a non-empty list cannot be written.
    assert java_oracle.encode_json("request", 63, 0, {**HEARTBEAT_JSON, "offlineLogDirs": []}) == (
        bytes.fromhex(HEARTBEAT_FIXED + "00")
    )
    with pytest.raises(JavaOracleError) as info:
        java_oracle.encode_json("request", 63, 0, HEARTBEAT_JSON)
    assert info.value.java_error is not None


def test_unknown_tagged_field_is_kept_and_reencoded(java_oracle: JavaOracle) -> None:
    # Two tagged fields in ascending order: the known tag 0 and an unknown tag 5 of 2 bytes.
    body = bytes.fromhex(HEARTBEAT_FIXED + "02" + HEARTBEAT_DIRS_TAG + "05" + "02" + "abcd")
    reply = java_oracle.decode("request", 63, 1, body)
    assert reply["ok"] is True
    assert reply["consumed"] == len(body)
    assert reply["unknown_tags"] == [[5, "abcd"]]
    assert bytes.fromhex(reply["reencoded"]) == body


def test_trailing_bytes_are_reported_not_consumed(java_oracle: JavaOracle) -> None:
    reply = java_oracle.decode("request", 63, 1, HEARTBEAT_V1 + b"\xff\xee")
    assert reply["ok"] is True
    assert (reply["consumed"], reply["total"]) == (58, 60)


@pytest.mark.parametrize(
    ("kind", "api_key", "version", "data", "error_class"),
    [
        ("request", 63, 1, HEARTBEAT_V1[:20], "java.nio.BufferUnderflowException"),
        ("request", 63, 1, b"", "java.nio.BufferUnderflowException"),
        # A compact array claiming 0x7e entries with 32 bytes left.
        ("request", 63, 1, bytes.fromhex(HEARTBEAT_FIXED + "01" + "00" + "21" + "7f") + DIR_A + DIR_B, None),
        ("request", 63, 2, HEARTBEAT_V1, "java.lang.IllegalArgumentException"),
        ("request", 999, 0, b"", "org.apache.kafka.common.errors.UnsupportedVersionException"),
        ("response_header", 0, 2, b"\x00\x00\x00\x01", "java.lang.IllegalArgumentException"),
    ],
)
def test_bad_input_is_an_answer_not_a_crash(
    java_oracle: JavaOracle, kind: Kind, api_key: int, version: int, data: bytes, error_class: str | None
) -> None:
    reply = java_oracle.decode(kind, api_key, version, data)
    assert reply["ok"] is False
    assert isinstance(reply["error"], str)
    if error_class is not None:
        assert reply["error"].startswith(error_class + ":")
    # The same JVM keeps answering.
    assert java_oracle.running
    assert java_oracle.decode("request", 63, 1, HEARTBEAT_V1)["json"] == HEARTBEAT_JSON


def test_malformed_requests_to_the_jvm_are_answered(java_oracle: JavaOracle) -> None:
    assert java_oracle.request({"op": "decode", "kind": "request", "api_key": 63, "version": 1, "hex": "zz"}) == {
        "ok": False,
        "error": 'java.lang.NumberFormatException: not a hexadecimal digit: "z" = 122',
    }
    assert java_oracle.request({"op": "no-such-op"})["ok"] is False
    assert java_oracle.request({"op": "decode", "kind": "body"})["ok"] is False
    with pytest.raises(JavaOracleError, match="mandatory"):
        java_oracle.encode_json("request", 63, 1, {"brokerId": 1})
    assert java_oracle.encode_json("request", 63, 1, HEARTBEAT_JSON) == HEARTBEAT_V1


def test_apis_lists_kip_858_keys(java_oracle: JavaOracle) -> None:
    apis = {api["api_key"]: api for api in java_oracle.apis()}
    ranges = {key: (api["name"], api["lowest"], api["highest"]) for key, api in apis.items()}
    assert ranges[62] == ("BrokerRegistration", 0, 4)
    assert ranges[63] == ("BrokerHeartbeat", 0, 1)
    assert ranges[73] == ("AssignReplicasToDirs", 0, 0)
    assert ranges[0] == ("Produce", 0, 11)
    assert ranges[18][0] == "ApiVersions"
    # The KRaft controller APIs are served on the controller listener.
    for key in (62, 63, 73):
        assert "CONTROLLER" in apis[key]["listeners"]
    assert apis[63]["request_flexible_versions"] == [0, 1]
    assert apis[63]["request_header_versions"] == [2, 2]
    # ApiVersions keeps response header v0 even where its body is flexible (v3+).
    assert set(apis[18]["response_header_versions"]) == {0}
    assert 3 in apis[18]["response_flexible_versions"]
    assert len(apis) > 70
    # Share groups (KIP-932) are unstable-only in 3.9: no stable version, shown as lowest - 1.
    assert (apis[78]["name"], apis[78]["highest_stable"], apis[78]["highest"]) == ("ShareFetch", -1, 0)
    for api in apis.values():
        assert 0 <= api["lowest"] <= api["highest"]
        assert api["lowest"] - 1 <= api["highest_stable"] <= api["highest"]
        assert len(api["request_header_versions"]) == api["highest"] - api["lowest"] + 1


def test_headers(java_oracle: JavaOracle) -> None:
    # Request header v2: api key 63, api version 1, correlation id 7, client id "c", no tags.
    header = bytes.fromhex("003f" + "0001" + "00000007" + "0001" + "63" + "00")
    reply = java_oracle.decode("request_header", 0, 2, header)
    assert reply["json"] == {"requestApiKey": 63, "requestApiVersion": 1, "correlationId": 7, "clientId": "c"}
    assert reply["consumed"] == len(header)
    assert java_oracle.decode("response_header", 0, 0, bytes.fromhex("0000002a"))["json"] == {"correlationId": 42}
    assert java_oracle.decode("response_header", 0, 1, bytes.fromhex("0000002a00"))["consumed"] == 5


def test_records_round_trip_through_json(java_oracle: JavaOracle) -> None:
    # The records field is opaque to the message codec, so any bytes round trip.
    records = bytes(range(40))
    produce = {
        "transactionalId": None,
        "acks": -1,
        "timeoutMs": 1000,
        "topicData": [{"name": "t", "partitionData": [{"index": 0, "records": base64.b64encode(records).decode()}]}],
    }
    body = java_oracle.encode_json("request", 0, 9, produce)
    # v9 is flexible: records are compact bytes (length + 1 as a varint) ahead of two empty
    # tagged sections (partition, topic) and the top-level one.
    assert body.endswith(bytes([len(records) + 1]) + records + b"\x00\x00\x00")
    reply = java_oracle.decode("request", 0, 9, body)
    assert reply["json"] == produce
    assert bytes.fromhex(reply["reencoded"]) == body

    fetch = {
        "throttleTimeMs": 0,
        "errorCode": 0,
        "sessionId": 0,
        "responses": [
            {
                "topic": "t",
                "partitions": [
                    {
                        "partitionIndex": 0,
                        "errorCode": 0,
                        "highWatermark": 10,
                        "lastStableOffset": 10,
                        "logStartOffset": 0,
                        "abortedTransactions": None,
                        "preferredReadReplica": -1,
                        "records": base64.b64encode(records).decode(),
                    }
                ],
            }
        ],
    }
    body = java_oracle.encode_json("response", 1, 11, fetch)
    reply = java_oracle.decode("response", 1, 11, body)
    assert reply["json"] == fetch
    assert bytes.fromhex(reply["reencoded"]) == body


def test_decode_many_keeps_order(java_oracle: JavaOracle) -> None:
    items: list[tuple[Kind, int, int, bytes]] = []
    for i in range(10_000):
        if i % 7 == 3:
            items.append(("request", 63, 1, HEARTBEAT_V1[: i % 50]))
        else:
            items.append(("response_header", 0, 0, i.to_bytes(4, "big")))
    replies = java_oracle.decode_many(items)
    assert len(replies) == len(items)
    for i, reply in enumerate(replies):
        if i % 7 == 3:
            assert reply["ok"] is False
        else:
            assert reply["json"] == {"correlationId": i}


def test_jars_are_found_without_importing_pyflink() -> None:
    assert java_available() is None
    jar_dir = find_jar_dir()
    assert jar_dir.parts[-2:] == ("pyflink", "lib")
    assert (jar_dir / "kafka-clients.jar").is_file()
    assert "pyflink" not in sys.modules


def test_compiled_classes_are_cached_by_source(tmp_path: Path) -> None:
    source = tmp_path / "KraftJbodOracle.java"
    source.write_bytes(JAVA_SOURCE.read_bytes())
    cache = tmp_path / "cache"
    with JavaOracle(source=source, cache_dir=cache) as first:
        assert first.encode_json("request", 63, 1, HEARTBEAT_JSON) == HEARTBEAT_V1
    builds = sorted(p.name for p in cache.iterdir())
    assert len(builds) == 1
    with JavaOracle(source=source, cache_dir=cache) as second:
        assert second.decode("request", 63, 1, HEARTBEAT_V1)["ok"] is True
    assert sorted(p.name for p in cache.iterdir()) == builds
    # A changed source gets a build of its own.
    source.write_text(JAVA_SOURCE.read_text() + "\n// changed\n")
    with JavaOracle(source=source, cache_dir=cache) as third:
        assert third.running
    assert len(list(cache.iterdir())) == 2
    assert not third.running


def test_a_dead_jvm_raises_instead_of_answering() -> None:
    with JavaOracle() as oracle:
        pid = oracle.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        while oracle.running:  # wait until the kill has landed, so no reply can still come
            time.sleep(0.01)
        with pytest.raises(JavaOracleError, match="Java oracle"):
            oracle.decode_many([("request", 63, 1, HEARTBEAT_V1)] * 100)
        assert not oracle.running
        with pytest.raises(JavaOracleError, match="closed"):
            oracle.decode("request", 63, 1, HEARTBEAT_V1)
