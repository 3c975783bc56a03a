"""Fair, bounded service of many connections on one event loop: nothing a peer sends can
starve the others or make the controller buffer without limit.

Strategy:

* A :class:`Connection` only *frames* what it reads (the sans-I/O
  :class:`~kraft_jbod.connection.ServerConnection` checks each size prefix first) and
  queues whole, undecoded frames, at most :data:`QUEUED_FRAMES` of them; a full queue
  pauses reading. Decoding and handling happen in :class:`Service`, in event-loop turns of at
  most :data:`TURN_SECONDS`, so socket I/O and timers run at least that often.
* Rule 1 (fairness): connections with a queued frame and no request in flight wait in a
  round-robin queue; serving one request puts the connection back at the end. A broker's
  BrokerRegistration or BrokerHeartbeat on an authenticated controller connection goes
  through a priority queue served first: client floods cannot delay the heartbeats that
  keep brokers unfenced.
* Rule 2 (no long stalls): a frame above :data:`DECODE_OFF_LOOP_BYTES` is decoded in a
  worker thread; a request naming more topics than ``kraft.jbod.max.topics.per.request``
  is refused from its header and array count alone, before its body is decoded
  (Kafka's own ceiling is 10,000 records per operation).
* Rule 3 (memory): a frame's whole size is reserved from the ``queued.max.request.bytes``
  budget the moment its size prefix arrives (as Kafka's memory pool does); a connection
  that cannot reserve stops reading until others' requests are served. Before SASL
  authentication the frame limit is ``sasl.server.max.receive.size`` (512 KiB).
* Rule 3b: a peer that does not read its responses is served no further once its
  transport's write buffer passes the high-water mark (``pause_writing``); its queue then
  fills and reading pauses, so the backpressure reaches the peer's own socket.
* Rule 4 (connections): ``max.connections`` and ``max.connections.per.ip`` refuse new
  connections at accept; ``connections.max.idle.ms`` closes connections with nothing in
  flight and no traffic for that long; running out of file descriptors is reported once
  per interval, not as one traceback per failed accept.
* Rule 5 (the short path): a read that holds exactly one whole request, on a connection
  with nothing queued or in flight while no other connection waits to be served, is
  served from those bytes at once, as the queue would serve it (the frame's size checked
  the same way, its memory reserved and released in one go, no buffer). A
  BrokerHeartbeat there goes first to the sink's ``steady`` answer (the controller's
  Rule 8), which answers a steady heartbeat straight from its bytes or leaves the frame
  to the ordinary path untouched. A gate that would act on the request (SASL, ACLs,
  fault rules) keeps it on the ordinary path; otherwise the gate is told of the answer
  (the broker behind the connection, the response metrics) as it would have been.
* A peer's bytes never crash the server: a protocol error closes only that connection,
  with a log line naming the peer, api key and version.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import struct
import time
from collections.abc import Callable
from typing import Any, Final

from kraft_jbod import codec
from kraft_jbod.connection import (
    ApiVersionsFallback,
    ConnectionClosed,
    RemoteProtocolError,
    RequestReceived,
    ServerConnection,
)
from kraft_jbod.controller import routes
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.seams import Extensions, Gate, Sink, Tap, TapConnection
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.varint import read_unsigned_varint

log = logging.getLogger(__name__)

API_VERSIONS: Final = ApiKey.API_VERSIONS
API_VERSIONS_RANGE: Final = routes.API_VERSIONS_RANGE
# Requests whose body starts with the array of topics they act on (checked before decoding).
TOPIC_ARRAY_KEYS: Final = routes.COUNTED_TOPIC_KEYS
PRIORITY_KEYS: Final = routes.PRIORITY_KEYS
# Whole frames a connection may have queued besides the one in flight.
QUEUED_FRAMES: Final = 4
# Frames above this are decoded in a worker thread, off the event loop.
DECODE_OFF_LOOP_BYTES: Final = 256 * 1024
# One event-loop turn serves requests for at most this long before sockets are polled again.
TURN_SECONDS: Final = 0.001
# At most one line per this many seconds for each kind of refused connection.
LOG_INTERVAL_S: Final = 10.0
_BE_i = struct.Struct(">i")
BROKER_HEARTBEAT: Final = int(ApiKey.BROKER_HEARTBEAT)
_REQUEST_START = struct.Struct(">hhi")  # api key, api version, correlation id
# Rule 5: (connection, frame payload, api version, correlation id) -> answered; False: the
# ordinary path serves the frame (nothing was done).
SteadyHeartbeat = Callable[["Connection", bytes, int, int], bool]


def api_versions_fallback() -> ApiVersionsResponse:
    """KIP-511: the v0 answer to an ApiVersions request above the versions we read."""
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[ApiVersion(API_VERSIONS, *API_VERSIONS_RANGE)]
    )


class _RateLimitedLog:
    """One warning per interval and kind, with a count of what was suppressed."""

    def __init__(self, interval: float = LOG_INTERVAL_S) -> None:
        self.interval = interval
        self._last: dict[str, float] = {}
        self._suppressed: collections.Counter[str] = collections.Counter()

    def warn(self, kind: str, msg: str, *args: object) -> None:
        now = time.monotonic()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._suppressed[kind] += 1
            return
        self._last[kind] = now
        extra = self._suppressed.pop(kind, 0)
        log.warning(msg + (f" ({extra} more since the last report)" if extra else ""), *args)


def leading_array_count(payload: bytes, api_key: int, api_version: int) -> int | None:
    """The element count of the array a request body starts with (topics for CreateTopics,
    DeleteTopics, CreatePartitions), read without decoding the body; None if unreadable."""
    try:
        _header, _hv, pos = codec.decode_request_header(payload)
        cls = codec.request_class(api_key)
        if cls.is_flexible(api_version):
            n, _ = read_unsigned_varint(payload, pos)
            return n - 1
        if len(payload) < pos + 4:
            return None
        return int(_BE_i.unpack_from(payload, pos)[0])
    except (DecodeError, KeyError, ValueError):
        return None


def oversized_refusal(api_key: int, count: int, limit: int) -> Message:
    """Kafka's POLICY_VIOLATION answer to a request naming more than ``limit`` topics.

    The entries are not echoed: their names were never decoded (that is the point).
    """
    cls: Any = codec.response_class(api_key)
    resp = cls()
    message = f"Unable to perform excessively large batch operation: {count} topics, the limit is {limit}."
    if hasattr(resp, "error_code"):
        resp.error_code = ErrorCode.POLICY_VIOLATION
        if hasattr(resp, "error_message"):
            resp.error_message = message
    return resp  # type: ignore[no-any-return]


class Service:
    """The socket layer of one server: scheduling, budgets, limits (see the module docstring)."""

    def __init__(
        self,
        config: ControllerConfig,
        *,
        extensions: Extensions | None,
        tap: Tap | None,
        stats: collections.Counter[str],
        on_response: Callable[[str, RequestReceived, Message], object] | None = None,
    ) -> None:
        self.config = config
        # Told of every response sent (the controller's story log names refusals).
        self.on_response = on_response
        self.extensions = extensions
        self.tap = tap
        self.stats = stats
        self.budget = config.queued_max_request_bytes if config.queued_max_request_bytes > 0 else None
        self.reserved = 0
        self.connections: set[Connection] = set()
        self.per_ip: collections.Counter[str] = collections.Counter()
        self._priority: collections.deque[Connection] = collections.deque()
        self._ready: collections.deque[Connection] = collections.deque()
        self._memory_waiters: collections.deque[Connection] = collections.deque()
        self._scheduled = False
        self._inline = False
        self._closing = False
        self.warnings = _RateLimitedLog()
        self._sweeper: asyncio.Task[None] | None = None
        self._previous_handler: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        loop = self._loop = asyncio.get_running_loop()
        self._previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._loop_exception)
        if self.config.connections_max_idle_ms > 0:
            self._sweeper = loop.create_task(self._sweep_idle(), name="controller-idle-sweeper")

    def close(self) -> None:
        self._closing = True
        if self._sweeper is not None:
            self._sweeper.cancel()
        for conn in list(self.connections):
            conn.close()
        # The handler stays installed: asyncio's accept back-off may still fire on a closed
        # listener (see _loop_exception); everything else goes to the previous handler.

    def _loop_exception(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
            # asyncio's accept loop backs off on its own; one line per interval is enough.
            self.stats["accept_errors"] += 1
            self.warnings.warn("accept", "refusing new connections: %s (%d open)", exc.strerror, len(self.connections))
            return
        if self._closing and isinstance(exc, ValueError) and "_start_serving" in repr(context.get("handle")):
            # The accept back-off timer fired after the listener closed: nothing to restart.
            return
        if self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    async def _sweep_idle(self) -> None:
        idle_s = self.config.connections_max_idle_ms / 1000
        step = min(max(idle_s / 4, 0.01), 5.0)
        while True:
            await asyncio.sleep(step)
            now = time.monotonic()
            for conn in list(self.connections):
                if not conn.in_flight and not conn.frames and now - conn.last_active > idle_s:
                    self.stats["idle_closed"] += 1
                    log.info("closing %s: idle for more than %d ms", conn.peer, self.config.connections_max_idle_ms)
                    conn.close()

    # ------------------------------------------------------------------ admission

    def admit_connection(self, conn: Connection, ip: str) -> bool:
        """Rule 4 at accept; False: refuse (the caller closes)."""
        if len(self.connections) >= self.config.max_connections:
            self.stats["connections_refused"] += 1
            self.warnings.warn(
                "max", "refusing a connection from %s: max.connections=%d reached", ip, self.config.max_connections
            )
            return False
        if self.per_ip[ip] >= self.config.max_connections_per_ip:
            self.stats["connections_refused"] += 1
            self.warnings.warn(
                "per-ip",
                "refusing a connection from %s: max.connections.per.ip=%d reached",
                ip,
                self.config.max_connections_per_ip,
            )
            return False
        self.connections.add(conn)
        self.per_ip[ip] += 1
        return True

    def forget(self, conn: Connection, ip: str | None) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            if ip is not None:
                self.per_ip[ip] -= 1
                if self.per_ip[ip] <= 0:
                    del self.per_ip[ip]

    # ------------------------------------------------------------------ memory (Rule 3)

    def reserve(self, size: int) -> bool:
        if self.budget is None or self.reserved == 0 or self.reserved + size <= self.budget:
            self.reserved += size
            return True
        return False

    def release(self, size: int) -> None:
        self.reserved -= size
        while self._memory_waiters and not self._closing:
            conn = self._memory_waiters[0]
            if conn.closed or not conn.waiting_for_memory:
                self._memory_waiters.popleft()
                continue
            if not conn.try_reserve():
                break
            self._memory_waiters.popleft()

    def wait_for_memory(self, conn: Connection) -> None:
        self.stats["memory_waits"] += 1
        self._memory_waiters.append(conn)

    # ------------------------------------------------------------------ scheduling (Rules 1-2)

    def ready(self, conn: Connection) -> None:
        """``conn`` has a frame queued and nothing in flight: serve it now when nobody else
        waits (the common case: no extra loop turn per heartbeat), else queue it."""
        if conn.scheduled or conn.closed or conn.write_paused:
            return
        if not (self._scheduled or self._inline or self._priority or self._ready):
            self._inline = True
            try:
                conn.serve_next()
            finally:
                self._inline = False
            return
        conn.scheduled = True
        first = conn.frames[0]
        key = (first[0] << 8) | first[1]
        if key in PRIORITY_KEYS and conn.controller and conn.authenticated:
            self._priority.append(conn)
        else:
            self._ready.append(conn)
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)

    def _turn(self) -> None:
        """Serve queued requests, one per connection in turn, for at most TURN_SECONDS (so
        sockets are polled between turns and a heartbeat that just arrived waits at most
        that long), then yield to the loop (call_soon) if more are waiting."""
        self._scheduled = False
        deadline = time.perf_counter() + TURN_SECONDS
        while self._priority or self._ready:
            conn = (self._priority or self._ready).popleft()
            conn.scheduled = False
            if conn.closed or conn.in_flight or not conn.frames or conn.write_paused:
                continue  # write_paused: resume_writing queues it again
            conn.serve_next()
            if time.perf_counter() >= deadline:
                break
        if (self._priority or self._ready) and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._turn)


class Connection(asyncio.Protocol):
    """One connection of any listener; its requests go to the listener's :class:`Sink`.

    At most one request of it is inside the sink at a time (Kafka mutes a channel until
    its response is sent), so responses leave in request order.
    """

    def __init__(
        self, service: Service, listener: str, sink: Sink, *, controller: bool, steady: SteadyHeartbeat | None = None
    ) -> None:
        self.service = service
        self.listener = listener
        self.sink = sink
        self.controller = controller
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.ip: str | None = None
        self.local: tuple[str, int] = ("", 0)
        self.tapped: TapConnection | None = None
        self.in_flight = False
        self.closed = False
        self.scheduled = False
        self.eof = False
        self.waiting_for_memory = False
        self.write_paused = False  # the peer does not read its responses: serve it no more
        self.frames: collections.deque[bytes] = collections.deque()
        self.queued_bytes = 0
        self.granted = 0  # bytes reserved for the frame being assembled
        self.last_active = time.monotonic()
        self._paused = False
        cfg = service.config
        ext = service.extensions
        self.gate: Gate | None = None if ext is None else ext.new_gate(self)
        # Rule 5: the sink's answer to a steady BrokerHeartbeat straight from its bytes (not
        # while the gate would act on it: authentication, ACLs and faults see those requests).
        self.steady = steady
        served = dict(sink.served())
        self.conn = ServerConnection(
            served if self.gate is None else self.gate.supported(served),
            api_versions_range=API_VERSIONS_RANGE,
            max_frame=cfg.socket_request_max_bytes,
        )
        self._sync_frame_limit()

    @property
    def authenticated(self) -> bool:
        return self.gate is None or self.gate.authenticated

    def _sync_frame_limit(self) -> None:
        cfg = self.service.config
        limit = cfg.socket_request_max_bytes
        if not self.authenticated:
            limit = min(limit, cfg.sasl_server_max_receive_size)
        if self.conn.max_frame != limit:
            self.conn.max_frame = limit

    def peercert(self) -> dict[str, Any] | None:
        cert = None if self.transport is None else self.transport.get_extra_info("peercert")
        return cert if isinstance(cert, dict) else None

    # ------------------------------------------------------------------ transport callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        ip = str(peer[0]) if isinstance(peer, tuple) else self.peer
        local = transport.get_extra_info("sockname")
        if isinstance(local, tuple):
            self.local = (str(local[0]), int(local[1]))
        if self.service._closing or not self.service.admit_connection(self, ip):
            self.closed = True
            transport.abort()
            return
        self.ip = ip
        tap = self.service.tap
        if tap is not None and isinstance(peer, tuple):
            self.tapped = tap.open((str(peer[0]), int(peer[1])), self.local)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._release_all()
        self.service.forget(self, self.ip)
        if self.tapped is not None:
            self.tapped.close()
            self.tapped = None

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_active = time.monotonic()
        if self.tapped is not None:
            self.tapped.received(data)
        service = self.service
        if not (
            self.in_flight
            or self.frames
            or self.granted
            or self.waiting_for_memory
            or self.write_paused
            or service._scheduled
            or service._inline
            or service._priority
            or service._ready
        ) and (service.budget is None or service.reserved == 0 or service.reserved + len(data) - 4 <= service.budget):
            # Rule 5: one whole request read and nobody waiting: serve it from these bytes,
            # as the queue would at once (its memory reserved and released in one go).
            payload = self.conn.whole_frame(data)
            if payload is not None:
                service._inline = True
                try:
                    self._serve(payload)
                finally:
                    service._inline = False
                return
        self.conn.receive_data(data)
        self._read_frames()

    def pause_writing(self) -> None:
        # The transport's buffer passed its high-water mark: no more requests of this peer
        # are served until it reads, so unread responses cannot pile up without bound.
        self.write_paused = True
        self.service.stats["write_pauses"] += 1

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.frames and not self.in_flight:
            self.service.ready(self)

    def eof_received(self) -> bool:
        self.eof = True
        self.conn.receive_data(b"")
        self._read_frames()
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._release_all()
            if self.transport is not None:
                self.transport.close()

    def _release_all(self) -> None:
        held = self.queued_bytes + self.granted
        self.frames.clear()
        self.queued_bytes = self.granted = 0
        if held:
            self.service.release(held)

    # ------------------------------------------------------------------ framing and memory

    def _read_frames(self) -> None:
        """Move whole frames from the framer to the queue; reserve memory for the next one."""
        while not self.closed and len(self.frames) < QUEUED_FRAMES:
            if self.waiting_for_memory:
                break
            if self.granted == 0 and self.conn.pending_size >= 0 and not self.try_reserve():
                break
            try:
                payload = self.conn.next_payload()
            except RemoteProtocolError as exc:
                self._protocol_error(exc)
                return
            if isinstance(payload, ConnectionClosed):
                if not self.frames and not self.in_flight:
                    self.close()
                break
            if not isinstance(payload, bytes):
                break  # NEED_DATA
            size = len(payload)
            self.queued_bytes += size
            if self.granted > size:
                self.service.release(self.granted - size)
            elif self.granted < size:
                self.service.reserved += size - self.granted  # reserved lazily (cannot happen with a prefix)
            self.granted = 0
            self.frames.append(payload)
        self._flow()
        if self.frames and not self.in_flight:
            self.service.ready(self)

    def try_reserve(self) -> bool:
        """Reserve the whole frame whose prefix has arrived (Rule 3); False: wait."""
        size = self.conn.pending_size
        if size < 0 or size > self.conn.max_frame or size < 0:
            return True  # nothing to reserve, or the framer refuses it on the next read
        if self.service.reserve(size):
            self.granted = size
            if self.waiting_for_memory:
                self.waiting_for_memory = False
                self._flow()
                asyncio.get_running_loop().call_soon(self._read_frames)
            return True
        if not self.waiting_for_memory:
            self.waiting_for_memory = True
            self.service.wait_for_memory(self)
        return False

    def _flow(self) -> None:
        """Pause reading while the queue is full or memory is short; resume otherwise."""
        if self.transport is None or self.closed:
            return
        stop = len(self.frames) >= QUEUED_FRAMES or self.waiting_for_memory
        if stop and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        elif not stop and self._paused:
            self._paused = False
            self.transport.resume_reading()

    def _protocol_error(self, exc: RemoteProtocolError) -> None:
        self.service.stats["protocol_errors"] += 1
        key = "?" if exc.api_key is None else f"{exc.api_key} ({codec.api_name(exc.api_key)})"
        ver = "?" if exc.api_version is None else str(exc.api_version)
        log.warning("closing connection from %s: api key %s version %s: %s", self.peer, key, ver, exc.reason)
        self.close()

    # ------------------------------------------------------------------ serving (called by Service)

    def serve_next(self) -> None:
        """Take the next queued frame: refuse it from its header, or decode it (off the
        loop when large) and hand it on."""
        was_full = len(self.frames) >= QUEUED_FRAMES
        payload = self.frames.popleft()
        self.queued_bytes -= len(payload)
        self.service.release(len(payload))
        self.in_flight = True
        if was_full or self._paused:
            # Room in the queue again. Otherwise reading stopped for want of data (the next
            # data_received reads on) or of memory (try_reserve's grant does): nothing to do.
            self._read_frames()
        self._serve(payload)

    def _serve(self, payload: bytes) -> None:
        """Serve one frame payload: a steady heartbeat answered by the sink at once, else
        refused from its header, or decoded (off the loop when large) and handed on."""
        self.in_flight = True
        key, version, corr = _REQUEST_START.unpack_from(payload, 0)  # the framer let no frame below 8 bytes in
        if (
            key == BROKER_HEARTBEAT
            and self.steady is not None
            and len(payload) <= DECODE_OFF_LOOP_BYTES
            and (self.gate is None or self.gate.admits_unseen(key))
            and self.steady(self, payload, version, corr)
        ):
            return
        if key in TOPIC_ARRAY_KEYS:
            limit = self.service.config.max_topics_per_request
            count = leading_array_count(payload, key, version)
            if count is not None and count > limit:
                self._refuse_oversized(payload, key, version, count, limit)
                return
        if len(payload) > DECODE_OFF_LOOP_BYTES:
            self.service.stats["decoded_off_loop"] += 1
            fut = asyncio.get_running_loop().run_in_executor(None, self.conn.decode_payload, payload)
            fut.add_done_callback(self._decoded)
            return
        try:
            ev = self.conn.decode_payload(payload)
        except RemoteProtocolError as exc:
            self._protocol_error(exc)
            return
        self._handle(ev)

    def _decoded(self, fut: asyncio.Future[RequestReceived | ApiVersionsFallback]) -> None:
        if self.closed:
            return
        try:
            ev = fut.result()
        except RemoteProtocolError as exc:
            self._protocol_error(exc)
            return
        except Exception:
            log.exception("closing %s: bug decoding a request", self.peer)
            self.close()
            return
        self._handle(ev)

    def _refuse_oversized(self, payload: bytes, key: int, version: int, count: int, limit: int) -> None:
        self.service.stats["refused_oversized"] += 1
        log.warning(
            "refusing %s v%d from %s: %d topics, above kraft.jbod.max.topics.per.request=%d (not decoded)",
            codec.api_name(key),
            version,
            self.peer,
            count,
            limit,
        )
        try:
            header, _hv, _pos = codec.decode_request_header(payload)
        except DecodeError as exc:
            self._protocol_error(
                RemoteProtocolError(f"header does not decode: {exc}", api_key=key, api_version=version)
            )
            return
        self.respond(RequestReceived(header, None, b""), oversized_refusal(key, count, limit))

    def _handle(self, ev: RequestReceived | ApiVersionsFallback) -> None:
        if self.closed:
            return
        if isinstance(ev, ApiVersionsFallback):
            self._send(self.conn.send_response(ev, api_versions_fallback()))
            self._done()
            return
        if ev.api_key == API_VERSIONS:
            request = ev.body
            assert isinstance(request, ApiVersionsRequest)  # the codec decodes key 18 to it
            body = self.sink.api_versions_response(ev.api_version, request)
            self._send(self.conn.send_response(ev, body if self.gate is None else self.gate.api_versions(body)))
            self._done()
            return
        # The gate (extensions: SASL, ACLs, faults) may answer, close, delay or stall.
        if self.gate is None or self.gate.admit(ev, self._proceed(ev)):
            self.sink.dispatch(self, ev)

    def answered(self, data: bytes) -> None:
        """Rule 5: the framed response to the request in flight, encoded by the sink that
        answered it straight from its bytes (a steady heartbeat): send it and read on."""
        self.service.stats["responses"] += 1
        if self.transport is not None and not self.closed:
            self.last_active = time.monotonic()
            if self.tapped is not None:
                self.tapped.sent(data)
            self.transport.write(data)
        if self.frames or self._paused or self.eof or self.waiting_for_memory or self.closed:
            self._done()
        else:
            # Nothing queued, reading on, no SASL (the sink answers only then): _done's
            # frame limit stays and its read finds no whole frame (each one is moved to the
            # queue as it arrives), so being free for the next request is all there is.
            self.in_flight = False

    def handle_decoded(self, ev: RequestReceived) -> None:
        """Rule 5: a request the sink decoded for a quick answer and then left to the
        ordinary path: on as if :meth:`serve_next` had decoded it."""
        self._handle(ev)

    def protocol_error(self, exc: RemoteProtocolError) -> None:
        """A frame the sink decoded does not decode: close as :meth:`serve_next` would."""
        self._protocol_error(exc)

    def _proceed(self, ev: RequestReceived) -> Callable[[], None]:
        return lambda: self.sink.dispatch(self, ev)

    def _send(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.last_active = time.monotonic()
            if self.tapped is not None:
                self.tapped.sent(data)
            self.transport.write(data)

    def _done(self) -> None:
        self.in_flight = False
        if self.closed:
            return
        self._sync_frame_limit()
        if self.frames:
            self.service.ready(self)
        elif self.eof:
            self.close()
        else:
            self._read_frames()

    def respond(self, event: RequestReceived, body: Message) -> None:
        """Send the response to the request in flight and read on."""
        if self.closed:
            return
        try:
            data = self.conn.send_response(event, body)
        except EncodeError as exc:
            log.error(
                "closing %s: the %s v%d response does not encode: %s",
                self.peer,
                codec.api_name(event.api_key),
                event.api_version,
                exc,
            )
            self.close()
            return
        self.service.stats["responses"] += 1
        if self.service.on_response is not None:
            self.service.on_response(self.peer, event, body)
        if self.gate is not None:
            self.gate.on_response(event, body)
        self._send(data)
        self._done()
