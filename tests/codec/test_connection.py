"""Sans-I/O connections: framing, Kafka's close-on-unknown rules, KIP-511 fallback, pairing."""

from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kraft_jbod import codec
from kraft_jbod.connection import (
    NEED_DATA,
    ApiVersionsFallback,
    ClientConnection,
    ConnectionClosed,
    RemoteProtocolError,
    RequestReceived,
    ResponseReceived,
    ServerConnection,
)
from kraft_jbod.errors import EncodeError, ProtocolError
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraft_jbod.messages.create_topics_response import CreatableTopicResult, CreateTopicsResponse
from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.messages.request_header import RequestHeader
from kraft_jbod.wire.message import Message

SUPPORTED = {63: (0, 1), 62: (0, 4)}


def heartbeat(broker_id: int = 1) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=5, current_metadata_offset=7, want_fence=True)


def test_request_split_across_every_byte_boundary() -> None:
    frame = codec.encode_request(heartbeat(), 1, 42, "cli")
    for cut in range(1, len(frame) + 1):  # b"" would mean end of stream
        conn = ServerConnection(SUPPORTED)
        conn.receive_data(frame[:cut])
        if cut < len(frame):
            assert conn.next_event() is NEED_DATA
            conn.receive_data(frame[cut:])
        ev = conn.next_event()
        assert isinstance(ev, RequestReceived)
        assert (ev.api_key, ev.api_version, ev.correlation_id) == (63, 1, 42)
        assert ev.body == heartbeat()
        assert ev.header.client_id == "cli"
        assert conn.next_event() is NEED_DATA


def test_many_requests_in_one_chunk_come_out_in_order() -> None:
    data = b"".join(codec.encode_request(heartbeat(i), 1, i, "c") for i in range(20))
    conn = ServerConnection(SUPPORTED)
    conn.receive_data(data)
    seen = []
    while isinstance(ev := conn.next_event(), RequestReceived):
        seen.append((ev.correlation_id, ev.body.broker_id))
    assert seen == [(i, i) for i in range(20)]


def test_unknown_api_key_closes() -> None:
    conn = ServerConnection(SUPPORTED)
    conn.receive_data(codec.encode_request(MetadataRequest(topics=None), 12, 9, "c"))
    with pytest.raises(RemoteProtocolError) as info:
        conn.next_event()
    assert info.value.error_code is None
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (3, 12, 9)
    # A dead connection stays dead, even if more bytes arrive.
    conn.receive_data(codec.encode_request(heartbeat(), 1, 10, "c"))
    with pytest.raises(ProtocolError):
        conn.next_event()


def test_version_outside_range_closes() -> None:
    conn = ServerConnection({63: (0, 0)})
    conn.receive_data(codec.encode_request(heartbeat(), 1, 1, "c"))
    with pytest.raises(RemoteProtocolError) as info:
        conn.next_event()
    assert info.value.api_key == 63 and info.value.api_version == 1


def test_key_never_defined_closes() -> None:
    conn = ServerConnection(SUPPORTED)
    conn.receive_data(struct.pack(">ihhih", 10, 999, 0, 1, -1))
    with pytest.raises(RemoteProtocolError) as info:
        conn.next_event()
    assert info.value.api_key == 999


def test_malformed_body_closes() -> None:
    good = codec.encode_request(heartbeat(), 1, 3, "c")
    bad = good[:-3]
    bad = struct.pack(">i", len(bad) - 4) + bad[4:]
    conn = ServerConnection(SUPPORTED)
    conn.receive_data(bad)
    with pytest.raises(RemoteProtocolError, match="does not decode"):
        conn.next_event()


@pytest.mark.parametrize("size", [-1, 0, 7, 1001])
def test_bad_frame_sizes_refused_on_the_prefix(size: int) -> None:
    conn = ServerConnection(SUPPORTED, max_frame=1000)
    conn.receive_data(struct.pack(">i", size))
    with pytest.raises(RemoteProtocolError, match="frame size"):
        conn.next_event()
    assert conn.buffered == 0


def test_frame_at_limit_is_accepted() -> None:
    frame = codec.encode_request(heartbeat(), 1, 3, "c")
    conn = ServerConnection(SUPPORTED, max_frame=len(frame) - 4)
    conn.receive_data(frame)
    assert isinstance(conn.next_event(), RequestReceived)


def test_api_versions_fallback_for_too_new_version() -> None:
    conn = ServerConnection(SUPPORTED, api_versions_range=(0, 3))
    # v4 (flexible, header v2): we claim to support only up to 3 -> not parsed.
    frame = codec.encode_request(ApiVersionsRequest("x", "1"), 4, 77, "c")
    conn.receive_data(frame)
    ev = conn.next_event()
    assert isinstance(ev, ApiVersionsFallback)
    assert (ev.api_version, ev.correlation_id) == (4, 77)
    body = ApiVersionsResponse(error_code=35, api_keys=[ApiVersion(18, 0, 3)])
    out = conn.send_response(ev, body)
    # Response header v0 then a v0 body.
    assert out == struct.pack(">ii", len(out) - 4, 77) + body.encode(0)


def test_api_versions_fallback_for_version_no_schema_knows() -> None:
    conn = ServerConnection(SUPPORTED)
    # Version 99 is flexible per schema rules: header v2 with an empty tag section, garbage body.
    payload = struct.pack(">hhih", 18, 99, 5, 1) + b"c" + b"\x00" + b"\xff\xfe"
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    ev = conn.next_event()
    assert isinstance(ev, ApiVersionsFallback) and ev.api_version == 99


def test_end_of_stream() -> None:
    conn = ServerConnection(SUPPORTED)
    frame = codec.encode_request(heartbeat(), 1, 1, "c")
    conn.receive_data(frame + frame[:5])
    conn.receive_data(b"")
    assert isinstance(conn.next_event(), RequestReceived)
    ev = conn.next_event()
    assert ev == ConnectionClosed(5)


def test_client_pairs_responses_and_server_answers() -> None:
    client = ClientConnection(client_id="broker-1")
    server = ServerConnection(SUPPORTED)
    server.receive_data(client.send_request(heartbeat(), 1) + client.send_request(heartbeat(2), 0))
    out = b""
    while isinstance(ev := server.next_event(), RequestReceived):
        resp = BrokerHeartbeatResponse(is_fenced=ev.body.broker_id == 1)
        out += server.send_response(ev, resp)
    client.receive_data(out)
    r1 = client.next_event()
    r2 = client.next_event()
    assert isinstance(r1, ResponseReceived) and isinstance(r2, ResponseReceived)
    assert (r1.correlation_id, r1.api_version, r1.body.is_fenced) == (0, 1, True)
    assert (r2.correlation_id, r2.api_version, r2.body.is_fenced) == (1, 0, False)
    assert client.next_event() is NEED_DATA and client.in_flight == 0


def test_client_reads_unsupported_version_api_versions_at_v0() -> None:
    client = ClientConnection()
    req = client.send_request(ApiVersionsRequest("x", "1"), 4)
    server = ServerConnection(SUPPORTED, api_versions_range=(0, 3))
    server.receive_data(req)
    ev = server.next_event()
    assert isinstance(ev, ApiVersionsFallback)
    client.receive_data(server.send_response(ev, ApiVersionsResponse(35, [ApiVersion(18, 0, 3)])))
    resp = client.next_event()
    assert isinstance(resp, ResponseReceived)
    assert resp.api_version == 0 and resp.body.error_code == 35
    assert resp.body.api_keys == [ApiVersion(18, 0, 3)]


def test_client_rejects_unexpected_correlation_id() -> None:
    client = ClientConnection()
    client.send_request(heartbeat(), 1)
    client.receive_data(codec.encode_response(BrokerHeartbeatResponse(), 1, 12345))
    with pytest.raises(RemoteProtocolError, match="correlation id 12345"):
        client.next_event()


@given(st.binary(max_size=300), st.lists(st.integers(1, 50), max_size=10))
def test_arbitrary_bytes_raise_only_protocol_error(data: bytes, cuts: list[int]) -> None:
    conn = ServerConnection({**SUPPORTED, 3: (0, 12)}, max_frame=4096)
    pos = 0
    for step in [*cuts, len(data)]:
        conn.receive_data(data[pos : pos + step])
        pos += step
        try:
            for _ in range(len(data) + 2):  # bounded: each event consumes at least 4 bytes
                if conn.next_event() is NEED_DATA:
                    break
        except ProtocolError:
            return


@given(st.binary(min_size=4, max_size=200))
def test_prefix_with_hostile_body_only_protocol_error(body: bytes) -> None:
    conn = ServerConnection(SUPPORTED)
    payload = struct.pack(">hhi", 62, 4, 1) + body
    conn.receive_data(struct.pack(">i", len(payload)) + payload)
    try:
        ev = conn.next_event()
    except ProtocolError:
        return
    assert isinstance(ev, RequestReceived)


def test_uuid_fields_survive() -> None:
    d = uuid.uuid4()
    req = BrokerHeartbeatRequest(broker_id=1, broker_epoch=2, offline_log_dirs=[d])
    conn = ServerConnection(SUPPORTED)
    conn.receive_data(codec.encode_request(req, 1, 0, "c"))
    ev = conn.next_event()
    assert isinstance(ev, RequestReceived) and ev.body.offline_log_dirs == [d]


@pytest.mark.parametrize(
    ("body", "version"),
    [
        (BrokerHeartbeatResponse(is_fenced=False), 0),
        (BrokerHeartbeatResponse(is_caught_up=True), 1),
        (ApiVersionsResponse(api_keys=[ApiVersion(18, 0, 4)]), 3),
        (ApiVersionsResponse(api_keys=[ApiVersion(18, 0, 4)]), 0),
        (CreateTopicsResponse(topics=[CreatableTopicResult(name="t", error_message=None)]), 4),
        (CreateTopicsResponse(topics=[CreatableTopicResult(name="t", error_message=None)]), 5),
    ],
)
def test_send_response_matches_codec(body: Message, version: int) -> None:
    key = body.API_KEY
    assert key is not None
    header = RequestHeader(key, version, 1234, "c")
    ev = RequestReceived(header, None, b"")
    assert ServerConnection({}).send_response(ev, body) == codec.encode_response(body, version, 1234)


def test_send_response_refuses_a_request_body() -> None:
    ev = RequestReceived(RequestHeader(63, 1, 1, "c"), None, b"")
    with pytest.raises(EncodeError):
        ServerConnection({}).send_response(ev, heartbeat())


def test_trailing_bytes_are_reported_not_fatal() -> None:
    frame = codec.encode_request(heartbeat(), 1, 3, "c") + b"xyz"
    frame = struct.pack(">i", len(frame) - 4) + frame[4:]
    conn = ServerConnection(SUPPORTED)
    conn.receive_data(frame)
    ev = conn.next_event()
    assert isinstance(ev, RequestReceived) and ev.trailing == b"xyz" and ev.body == heartbeat()
