"""The fake broker's own client listener: asyncio around :mod:`~kraft_jbod.broker.client_api`.

Strategy: one :class:`asyncio.Server` per PLAINTEXT entry of ``listeners``; each connection
is a :class:`~kraft_jbod.connection.ServerConnection` whose served versions are refreshed
before every request (the forwarded admin APIs are known once the controller answered
ApiVersions on the forwarding channel). Requests on a connection are answered one at a
time, in order, as a Kafka broker answers them.

Invariants: a client's bytes never stop the broker: a frame that breaks the protocol closes
that connection only (the connection layer checks sizes before buffering a frame); a
forwarded request whose Envelope fails (controller unreachable, an Envelope error, an inner
response that does not answer this request) closes the connection too, so the client
retries elsewhere, as with a broker that went away. Produce with acks=0 gets no answer,
as Kafka sends none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import struct
from typing import Any, Protocol

from kraft_jbod.broker import client_api
from kraft_jbod.broker.image import MetadataImage
from kraft_jbod.connection import (
    NEED_DATA,
    ApiVersionsFallback,
    ConnectionClosed,
    RemoteProtocolError,
    RequestReceived,
    ServerConnection,
)
from kraft_jbod.controller import features as fv
from kraft_jbod.errors import KraftJbodError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.properties import Listener

log = logging.getLogger(__name__)
_BE_i = struct.Struct(">i")


class BrokerSide(Protocol):
    """What the listener needs from :class:`~kraft_jbod.broker.server.FakeBroker`."""

    node_id: int
    cluster_id: str
    image: MetadataImage

    def supported_features(self) -> dict[str, tuple[int, int]]: ...
    def static_properties(self) -> list[tuple[str, str]]: ...
    def log_dir_infos(self) -> list[client_api.DirInfo]: ...
    def alter_replica_log_dirs(self, body: Any) -> Any: ...
    async def controller_versions(self) -> dict[int, tuple[int, int]]: ...
    async def forward(self, raw: bytes, client_host: str) -> bytes: ...


class ClientListener:
    """``await start()`` binds; ``address`` is where it listens; ``close()`` stops it."""

    def __init__(self, broker: BrokerSide, listener: Listener) -> None:
        self.broker = broker
        self.listener = listener
        self.address: tuple[str, int] | None = None
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.StreamWriter] = set()

    async def start(self) -> tuple[str, int]:
        """Raises OSError when the address cannot be bound (as Kafka fails to start)."""
        self._server = await asyncio.start_server(self._serve, self.listener.bind_host, self.listener.port)
        sock = self._server.sockets[0].getsockname()
        self.address = (str(sock[0]), int(sock[1]))
        return self.address

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for w in list(self._conns):
                w.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        host = str(peer[0]) if peer else "127.0.0.1"
        conn = ServerConnection({}, api_versions_range=client_api.API_VERSIONS_RANGE)
        self._conns.add(writer)
        try:
            while True:
                chunk = await reader.read(65536)
                conn.receive_data(chunk)
                while True:
                    conn.supported = client_api.served(await self._controller_versions())
                    try:
                        ev = conn.next_event()
                    except RemoteProtocolError as exc:
                        log.info("broker %d: closing a client connection from %s: %s", self.broker.node_id, host, exc)
                        return
                    if ev is NEED_DATA:
                        break
                    if isinstance(ev, ConnectionClosed):
                        return
                    assert isinstance(ev, RequestReceived | ApiVersionsFallback)
                    out = await self._answer(conn, ev, host)
                    if out is None:
                        continue
                    writer.write(out)
                    await writer.drain()
                if not chunk:
                    return
        except (OSError, ConnectionError, _Close):
            return
        finally:
            self._conns.discard(writer)
            writer.close()

    async def _controller_versions(self) -> dict[int, tuple[int, int]]:
        try:
            return await self.broker.controller_versions()
        except KraftJbodError:
            return {}

    async def _answer(
        self, conn: ServerConnection, ev: RequestReceived | ApiVersionsFallback, host: str
    ) -> bytes | None:
        b = self.broker
        if isinstance(ev, ApiVersionsFallback):
            keys = [ApiVersion(ApiKey.API_VERSIONS, *client_api.API_VERSIONS_RANGE)]
            return conn.send_response(ev, ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys))
        key, version, body = ev.api_key, ev.api_version, ev.body
        name = self.listener.name
        resp: Any
        if key == ApiKey.API_VERSIONS:
            resp = client_api.api_versions_response(version, conn.supported, b.supported_features(), b.image)
        elif key == ApiKey.METADATA:
            resp = client_api.metadata_response(b.image, version, body, listener=name, cluster_id=b.cluster_id)
        elif key == ApiKey.DESCRIBE_CLUSTER:
            resp = client_api.describe_cluster_response(b.image, version, body, listener=name, cluster_id=b.cluster_id)
        elif key == ApiKey.DESCRIBE_CONFIGS:
            resp = client_api.describe_configs_response(
                b.image, version, body, node_id=b.node_id, properties=b.static_properties()
            )
        elif key == ApiKey.DESCRIBE_LOG_DIRS:
            mv = b.image.features.get(fv.METADATA_VERSION, 1)
            resp = client_api.describe_log_dirs_response(
                version, body, b.log_dir_infos(), cordon_supported=fv.supports_cordoned_dirs(mv)
            )
        elif key == ApiKey.ALTER_REPLICA_LOG_DIRS:
            resp = b.alter_replica_log_dirs(body)
        elif key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.FIND_COORDINATOR):
            if key == ApiKey.PRODUCE and body.acks == 0:
                return None
            log.info(
                "broker %d: refused %s from %s: %s",
                b.node_id,
                ApiKey(key).name,
                host,
                client_api.data_path_message(b.node_id),
            )
            resp = client_api.refusal(key, version, body, b.node_id)
        elif key in client_api.FORWARDABLE:
            try:
                inner = await b.forward(ev.raw, host)
            except KraftJbodError as exc:
                log.warning("broker %d: forwarding %s failed: %s", b.node_id, ApiKey(key).name, exc)
                raise _Close from None
            if len(inner) < 4 or _BE_i.unpack_from(inner, 0)[0] != ev.correlation_id:
                log.warning("broker %d: the controller's forwarded answer does not match the request", b.node_id)
                raise _Close
            return _BE_i.pack(len(inner)) + inner
        else:  # ServerConnection refuses what is not served: nothing else reaches here
            raise _Close
        return conn.send_response(ev, resp)


class _Close(Exception):
    """Close this client connection (and only it)."""
