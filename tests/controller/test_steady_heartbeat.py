"""The steady heartbeat's short path (service Rule 5, server Rule 8) answers exactly as the
ordinary path does.

A connection of a real controller is fed bytes as a socket read would hand them over
(one whole frame per read, two frames in one read, a frame in pieces), and its answers
are compared with the ordinary encoder's bytes; the state machine's side of it
(``brokers.steady_heartbeat``) is checked to touch nothing when it declines.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod import codec
from kraft_jbod.connection import RequestReceived, ServerConnection
from kraft_jbod.controller.apis import brokers
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.controller.service import Connection
from kraft_jbod.errors import ProtocolError
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.request_header import RequestHeader
from tests.controller.test_server import CLUSTER, Client, make_config, register_and_unfence

VERSIONS = (0, 1, 2)


class FakeTransport(asyncio.Transport):
    """What a connection writes, kept; reading pauses counted."""

    def __init__(self) -> None:
        super().__init__()
        self.out: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 40000) if name in ("peername", "sockname") else default

    def write(self, data: Any) -> None:
        self.out.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ControllerServer]:
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, fsync=False) as s:
        yield s


async def _broker(server: ControllerServer, b: int) -> int:
    client = await Client.connect(server.addresses[0])
    try:
        return await register_and_unfence(client, b)
    finally:
        await client.close()


def _connection(server: ControllerServer) -> tuple[Connection, FakeTransport]:
    conn = Connection(server.service, "CONTROLLER", server, controller=True, steady=server._steady_heartbeat)
    transport = FakeTransport()
    conn.connection_made(transport)
    return conn, transport


def _expected(version: int, corr: int, caught_up: bool) -> bytes:
    """The ordinary encoder's bytes for the steady answer."""
    header = RequestHeader(request_api_key=63, request_api_version=version, correlation_id=corr, client_id="t")
    event = RequestReceived(header, None, b"")
    return ServerConnection({}).send_response(event, brokers.steady_response(caught_up))


def _answer(data: bytes, version: int) -> BrokerHeartbeatResponse:
    resp = codec.decode_response(data[4:], 63, version).body
    assert isinstance(resp, BrokerHeartbeatResponse)
    return resp


@pytest.mark.parametrize("version", VERSIONS)
async def test_a_steady_heartbeat_is_answered_with_the_ordinary_bytes(server: ControllerServer, version: int) -> None:
    epoch = await _broker(server, 1)
    conn, transport = _connection(server)
    sessions = server.state.ctx.sessions
    before = server.stats["steady_heartbeats"]
    for corr, offset in ((11, 1 << 40), (12, 0)):  # caught up, then behind its registration
        conn.data_received(codec.encode_request(BrokerHeartbeatRequest(1, epoch, offset), version, corr, "t"))
        assert transport.out[-1] == _expected(version, corr, offset >= epoch)
        assert sessions.metadata_offset[1] == offset
    assert server.stats["steady_heartbeats"] == before + 2
    assert not conn.in_flight and not conn.closed
    assert server.machine.image.brokers[1].epoch == epoch  # nothing written: still the same registration


async def test_the_short_path_touches_the_session(server: ControllerServer) -> None:
    epoch = await _broker(server, 1)
    sessions = server.state.ctx.sessions
    sessions.touch(1, epoch, -1_000_000)
    conn, transport = _connection(server)
    conn.data_received(codec.encode_request(BrokerHeartbeatRequest(1, epoch, 1 << 40), 1, 5, "t"))
    assert len(transport.out) == 1
    assert sessions.contact[1][1] >= 0


async def test_other_heartbeats_take_the_ordinary_path(server: ControllerServer) -> None:
    epoch = await _broker(server, 1)
    conn, transport = _connection(server)
    before = server.stats["steady_heartbeats"]
    conn.data_received(codec.encode_request(BrokerHeartbeatRequest(1, epoch + 5, 1 << 40), 1, 7, "t"))
    await asyncio.sleep(0)
    stale = _answer(transport.out[-1], 1)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    # A broker asking to be fenced writes a record: answered after the append, fenced.
    conn.data_received(codec.encode_request(BrokerHeartbeatRequest(1, epoch, 1 << 40, want_fence=True), 1, 8, "t"))
    for _ in range(200):
        if len(transport.out) == 2:
            break
        await asyncio.sleep(0.01)
    fenced = _answer(transport.out[-1], 1)
    assert fenced.error_code == 0 and fenced.is_fenced
    assert server.machine.image.brokers[1].fenced
    assert server.stats["steady_heartbeats"] == before


async def test_two_frames_in_one_read_are_both_answered_in_order(server: ControllerServer) -> None:
    epoch = await _broker(server, 1)
    conn, transport = _connection(server)
    frames = b"".join(codec.encode_request(BrokerHeartbeatRequest(1, epoch, 1 << 40), 1, c, "t") for c in (21, 22))
    conn.data_received(frames)
    for _ in range(200):
        if len(transport.out) == 2:
            break
        await asyncio.sleep(0.01)
    assert transport.out == [_expected(1, 21, True), _expected(1, 22, True)]


async def test_a_frame_in_pieces_is_answered_once_whole(server: ControllerServer) -> None:
    epoch = await _broker(server, 1)
    conn, transport = _connection(server)
    frame = codec.encode_request(BrokerHeartbeatRequest(1, epoch, 1 << 40), 1, 31, "t")
    conn.data_received(frame[:6])
    conn.data_received(frame[6:])
    assert transport.out == [_expected(1, 31, True)]


async def test_a_heartbeat_that_does_not_decode_closes_the_connection(server: ControllerServer) -> None:
    epoch = await _broker(server, 1)
    conn, transport = _connection(server)
    frame = codec.encode_request(BrokerHeartbeatRequest(1, epoch, 1 << 40), 1, 41, "t")
    cut = frame[4:-6]  # the body ends early
    errors = server.stats["protocol_errors"]
    conn.data_received(len(cut).to_bytes(4, "big") + cut)
    assert transport.out == [] and transport.closed and conn.closed
    assert server.stats["protocol_errors"] == errors + 1


async def test_a_version_the_listener_does_not_serve_closes_the_connection(server: ControllerServer) -> None:
    epoch = await _broker(server, 1)
    conn, transport = _connection(server)
    frame = bytearray(codec.encode_request(BrokerHeartbeatRequest(1, epoch, 1 << 40), 1, 51, "t"))
    frame[6:8] = (99).to_bytes(2, "big")  # api version 99
    conn.data_received(bytes(frame))
    assert transport.out == [] and conn.closed


def test_steady_heartbeat_declines_without_touching_anything() -> None:
    from tests.controller.harness import Cluster

    cluster = Cluster()
    cluster.start_broker(1)
    epoch = cluster.epoch(1)
    ctx = cluster.state.ctx
    contact = dict(ctx.sessions.contact)
    offsets = dict(ctx.sessions.metadata_offset)
    declined = [
        BrokerHeartbeatRequest(1, epoch + 1, 1 << 40),  # stale epoch
        BrokerHeartbeatRequest(2, epoch, 1 << 40),  # unknown broker
        BrokerHeartbeatRequest(1, epoch, 1 << 40, want_fence=True),
        BrokerHeartbeatRequest(1, epoch, 1 << 40, want_shut_down=True),
        BrokerHeartbeatRequest(1, epoch, 1 << 40, offline_log_dirs=[uuid.UUID(int=7)]),
    ]
    for req in declined:
        assert brokers.steady_heartbeat(ctx, 1, req, 123_456) is None, req
    assert ctx.sessions.contact == contact and ctx.sessions.metadata_offset == offsets
    assert brokers.steady_heartbeat(ctx, 1, BrokerHeartbeatRequest(1, epoch, 1 << 40), 123_456) is True
    assert ctx.sessions.contact[1] == (epoch, 123_456)


def test_whole_frame_takes_only_one_whole_frame_of_an_acceptable_size() -> None:
    conn = ServerConnection({63: (0, 2)}, max_frame=100)
    frame = codec.encode_request(BrokerHeartbeatRequest(1, 2, 3), 1, 4, "t")
    assert conn.whole_frame(frame) == frame[4:]
    assert conn.whole_frame(frame + frame) is None
    assert conn.whole_frame(frame[:-1]) is None
    assert conn.whole_frame(b"\x00\x00\x00\x04abcd") is None  # below the smallest header
    assert conn.whole_frame((200).to_bytes(4, "big") + bytes(200)) is None  # above max_frame
    conn.receive_data(frame[:3])
    assert conn.whole_frame(frame) is None  # bytes already buffered come first
    bad = ServerConnection({63: (0, 2)}, max_frame=100)
    bad.receive_data((200).to_bytes(4, "big"))
    with pytest.raises(ProtocolError):
        bad.next_payload()


async def test_behind_a_gate_that_checks_nothing_the_metrics_count_it_as_before(tmp_path: Path) -> None:
    from kraft_jbod.controller.extensions import Extensions

    ext = Extensions()
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, fsync=False, extensions=ext) as server:
        epoch = await _broker(server, 1)
        labels = {"api": "BrokerHeartbeat", "error": "0", "listener": "CONTROLLER"}
        counted = ext.metrics.requests.get(labels)
        conn, transport = _connection(server)
        assert conn.gate is not None
        steady = server.stats["steady_heartbeats"]
        conn.data_received(codec.encode_request(BrokerHeartbeatRequest(1, epoch, 1 << 40), 1, 61, "t"))
        assert transport.out == [_expected(1, 61, True)]
        assert server.stats["steady_heartbeats"] == steady + 1
        assert ext.metrics.requests.get(labels) == counted + 1
        assert conn.gate.broker_id == 1  # type: ignore[attr-defined]


async def test_a_gate_with_sasl_keeps_heartbeats_on_the_ordinary_path(tmp_path: Path) -> None:
    from kraft_jbod.controller.extensions import Extensions, ListenerSecurity
    from kraft_jbod.security.credentials import CredentialStore

    ext = Extensions(listeners={"CONTROLLER": ListenerSecurity(sasl=("PLAIN",))}, credentials=CredentialStore())
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, fsync=False, extensions=ext) as server:
        conn, transport = _connection(server)
        assert conn.gate is not None and not conn.gate.admits_unseen(63)
        conn.data_received(codec.encode_request(BrokerHeartbeatRequest(1, 1, 1 << 40), 1, 71, "t"))
        await asyncio.sleep(0.05)
        assert server.stats["steady_heartbeats"] == 0
        assert transport.closed or not transport.out or _answer(transport.out[-1], 1).error_code != 0
