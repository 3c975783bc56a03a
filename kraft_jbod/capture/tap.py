"""A frame tap for servers: every byte a connection exchanges, to pcapng and/or over UDP.

Strategy: a server calls :meth:`FrameTap.open` when a connection is accepted and gets a
:class:`TapConnection`; it then hands it the bytes it received (:meth:`~TapConnection.received`)
and the bytes it wrote (:meth:`~TapConnection.sent`), and :meth:`~TapConnection.close` at the
end. All three are plain synchronous calls, safe inside ``asyncio.Protocol`` callbacks.

* pcapng: each connection becomes a synthetic TCP conversation (handshake, data segments
  with correct sequence numbers and checksums, FIN) through
  :class:`~.pcapng_writer.TcpConversation`, with the real addresses and wall-clock
  timestamps, so Wireshark, tshark and ``kraft-jbod decode`` read the file like a capture.
* UDP: each call becomes one or more datagrams (see :data:`MAGIC` for the layout) sent
  with asyncio-dgram to ``kraft-jbod capture listen``. A datagram carries the stream
  offset of its bytes, so the listener turns a lost datagram into a gap instead of
  misframing. Sending never blocks the server: datagrams wait in a bounded queue drained
  by one task, and when it is full they are dropped and counted (``dropped``).

Secrets: SaslAuthenticate (api key 36) carries PLAIN passwords and SCRAM proofs, salts
and signatures in ``auth_bytes``. Unless a tap is made with ``secrets=True``
(``--capture-secrets``), :class:`_SaslRedactor` overwrites those bytes with ``*`` in both
directions before anything is written or mirrored; frames keep their length and still
decode. A pcapng file the tap creates is readable by its owner only (0600).

Datagram layout (big-endian): ``MAGIC`` (4 bytes), kind (u8: 0 open, 1 client bytes,
2 server bytes, 3 close), connection serial (u32), stream offset (u64), timestamp in ns
(u64), then for *open* the UTF-8 text ``client_host:port->server_host:port``, for bytes the
data (at most :data:`MAX_CHUNK`), for *close* nothing.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import os
import struct
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Final

from kraft_jbod import codec
from kraft_jbod.capture.kafka import DecodedFrame, KafkaDecoder
from kraft_jbod.capture.pcapng_writer import PcapngWriter, TcpConversation
from kraft_jbod.capture.reassembly import Data, Gap, format_endpoint
from kraft_jbod.capture.streams import Flow, FlowEnd, Frame, FrameSplitter
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.messages.api_keys import ApiKey

if TYPE_CHECKING:
    # asyncio-dgram (the `net` extra) is imported only when mirroring over UDP: writing a
    # pcapng needs nothing beyond the base install.
    import asyncio_dgram

__all__ = ["MAGIC", "MAX_CHUNK", "FrameTap", "TapConnection", "TapDatagram", "TapListener", "parse_datagram"]

MAGIC: Final = b"KJT1"
KIND_OPEN: Final = 0
KIND_CLIENT: Final = 1
KIND_SERVER: Final = 2
KIND_CLOSE: Final = 3
#: Bytes of payload per datagram: well under the 65,507-byte UDP limit.
MAX_CHUNK: Final = 60_000
_HEAD = struct.Struct(">4sBIQQ")
_QUEUE_LIMIT: Final = 10_000
# Segment size of the synthetic TCP: large so a frame is few packets, small enough for
# one IPv4 packet.
_MSS: Final = 32_000


class TapDatagram:
    """One parsed tap datagram."""

    __slots__ = ("data", "kind", "offset", "serial", "timestamp_ns")

    def __init__(self, kind: int, serial: int, offset: int, timestamp_ns: int, data: bytes) -> None:
        self.kind = kind
        self.serial = serial
        self.offset = offset
        self.timestamp_ns = timestamp_ns
        self.data = data


def parse_datagram(raw: bytes) -> TapDatagram | None:
    """The datagram's fields, or ``None`` for anything that is not a tap datagram."""
    if len(raw) < _HEAD.size or raw[:4] != MAGIC:
        return None
    _magic, kind, serial, offset, ts = _HEAD.unpack_from(raw, 0)
    if kind > KIND_CLOSE:
        return None
    return TapDatagram(kind, serial, offset, ts, raw[_HEAD.size :])


def _ip(host: str, fallback: str) -> str:
    try:
        return str(ipaddress.ip_address(host.split("%", 1)[0]))
    except ValueError:
        return fallback


SASL_AUTHENTICATE: Final = ApiKey.SASL_AUTHENTICATE
# A SaslAuthenticate frame larger than this is not held back whole: it is blanked instead.
_REDACT_HOLD_LIMIT: Final = 1 << 20
_BE_i = struct.Struct(">i")
_BE_ih = struct.Struct(">ih")


def _starred(payload: bytes, pos: int, body: Any, version: int) -> bytes | None:
    """``payload`` with ``body.auth_bytes`` replaced by as many ``*``, or None if the
    re-encoded body would not have the same length (then the caller blanks it)."""
    secret = getattr(body, "auth_bytes", None)
    if not isinstance(secret, bytes | bytearray) or not secret:
        return payload
    body.auth_bytes = b"*" * len(secret)
    out = bytearray(payload[:pos])
    body.write(out, version)
    if len(out) > len(payload):
        return None
    out += payload[len(out) :]
    return bytes(out) if len(out) == len(payload) else None


class _SaslRedactor:
    """Blanks SASL secrets in one connection's two byte streams (see the module docstring).

    The client stream is followed frame by frame: a SaslAuthenticate frame is held until
    whole, then emitted with its auth bytes starred; every other byte passes at once. A
    stream that stops looking like Kafka frames passes unchanged (the server closes such a
    connection before any authentication can follow). Responses to the SaslAuthenticate
    correlation ids seen are starred the same way.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._passing = 0  # bytes of the current (non-SASL) frame still to pass through
        self._blanking = 0  # bytes of an oversized SASL frame still to replace with '*'
        self._raw = False
        self._pending: dict[int, int] = {}  # correlation id -> SaslAuthenticate version

    def client(self, data: bytes) -> bytes:
        if self._raw:
            return data
        out = bytearray()
        view = memoryview(data)
        i = 0
        while i < len(view):
            if self._blanking:
                n = min(self._blanking, len(view) - i)
                out += b"*" * n
                i += n
                self._blanking -= n
                continue
            if self._passing:
                n = min(self._passing, len(view) - i)
                out += view[i : i + n]
                i += n
                self._passing -= n
                continue
            need = 6 if len(self._buf) < 6 else 4 + _BE_i.unpack_from(self._buf, 0)[0]
            take = min(need - len(self._buf), len(view) - i) if need > len(self._buf) else 0
            self._buf += view[i : i + take]
            i += take
            if len(self._buf) < 6:
                continue
            size, key = _BE_ih.unpack_from(self._buf, 0)
            if size < 8:
                self._raw = True
                out += self._buf + view[i:]
                self._buf.clear()
                return bytes(out)
            if key != SASL_AUTHENTICATE:
                self._passing = 4 + size - len(self._buf)
                out += self._buf
                self._buf.clear()
                continue
            if len(self._buf) < 4 + size and size <= _REDACT_HOLD_LIMIT:
                continue  # hold the SASL frame until it is whole
            out += self._redact_request(bytes(self._buf[: 4 + size]), size)
            self._blanking = max(0, 4 + size - len(self._buf))
            self._buf.clear()
        return bytes(out)

    def _redact_request(self, frame: bytes, size: int) -> bytes:
        payload = frame[4:]
        try:
            if len(payload) < size:
                raise DecodeError("not whole")
            dec = codec.decode_request(payload)
            self._pending[int(dec.header.correlation_id)] = int(dec.header.request_api_version)
            starred = _starred(payload, dec.body_offset, dec.body, int(dec.header.request_api_version))
        except (DecodeError, EncodeError, AttributeError):
            starred = None
        if starred is None:
            starred = payload[:8] + b"*" * (len(payload) - 8)
        return frame[:4] + starred

    def server(self, data: bytes) -> bytes:
        if not self._pending:
            return data
        out = bytearray()
        pos = 0
        # The server writes whole response frames, one or more per call.
        while pos + 8 <= len(data):
            size, corr = struct.unpack_from(">ii", data, pos)
            end = pos + 4 + size
            if size < 4 or end > len(data):
                break
            payload = data[pos + 4 : end]
            version = self._pending.pop(corr, None)
            if version is not None:
                try:
                    dec = codec.decode_response(payload, SASL_AUTHENTICATE, version)
                    starred = _starred(payload, dec.body_offset, dec.body, version)
                except (DecodeError, EncodeError, AttributeError):
                    starred = None
                payload = starred if starred is not None else payload[:4] + b"*" * (len(payload) - 4)
            out += data[pos : pos + 4] + payload
            pos = end
        out += data[pos:]
        return bytes(out)


class TapConnection:
    """The tap's view of one server connection (see the module docstring)."""

    def __init__(self, tap: FrameTap, serial: int, client: tuple[str, int], server: tuple[str, int]) -> None:
        self.tap = tap
        self.serial = serial
        # Both ends of a pcap packet must be the same IP version.
        c_host = _ip(client[0], "127.0.0.1")
        s_host = _ip(server[0], "127.0.0.1")
        if ":" in c_host and ":" not in s_host:
            s_host = "::1" if s_host == "127.0.0.1" else "::ffff:" + s_host
        if ":" in s_host and ":" not in c_host:
            c_host = "::ffff:" + c_host
        self.client = (c_host, client[1])
        self.server = (s_host, server[1])
        self.name = f"{format_endpoint(*self.client)}->{format_endpoint(*self.server)}"
        self._redactor = None if tap.secrets else _SaslRedactor()
        self._offsets = [0, 0]
        self.closed = False
        self._conv: TcpConversation | None = None
        if tap.writer is not None:
            self._conv = TcpConversation(
                tap.writer, self.client, self.server, mss=_MSS, start_ns=time.time_ns(), step_ns=1
            )
        tap._send(KIND_OPEN, serial, 0, self.name.encode())

    def received(self, data: bytes) -> None:
        """Bytes the server read from the client."""
        self._bytes(0, data if self._redactor is None else self._redactor.client(data))

    def sent(self, data: bytes) -> None:
        """Bytes the server wrote to the client."""
        self._bytes(1, data if self._redactor is None else self._redactor.server(data))

    # Direction-neutral names for taps on the client side of a connection.
    from_client = received
    from_server = sent

    def _bytes(self, side: int, data: bytes) -> None:
        if self.closed or not data:
            return
        ts = time.time_ns()
        if self._conv is not None:
            try:
                self._conv.send("client" if side == 0 else "server", bytes(data), ts)
            except (EncodeError, OSError, ValueError):
                self.tap.errors += 1
        off = self._offsets[side]
        self._offsets[side] = off + len(data)
        kind = KIND_CLIENT if side == 0 else KIND_SERVER
        for i in range(0, len(data), MAX_CHUNK):
            self.tap._send(kind, self.serial, off + i, bytes(data[i : i + MAX_CHUNK]), ts)

    def close(self) -> None:
        """The connection ended (either side)."""
        if self.closed:
            return
        self.closed = True
        if self._conv is not None:
            try:
                self._conv.close(time.time_ns())
            except (EncodeError, OSError, ValueError):
                self.tap.errors += 1
        self.tap._send(KIND_CLOSE, self.serial, 0, b"")


def _private_file(path: Path) -> BinaryIO:
    """``path`` opened for writing, created 0600 (and set to 0600 if it existed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, "wb")


class FrameTap:
    """Writes the traffic of tapped connections to ``pcapng`` (a path or binary file)
    and/or mirrors it to ``udp`` (host, port).

    Use ``async with FrameTap(...) as tap`` (or :meth:`start` / :meth:`aclose`); the UDP
    side needs a running loop, the pcapng side does not.
    """

    def __init__(
        self, *, pcapng: str | Path | BinaryIO | None = None, udp: tuple[str, int] | None = None, secrets: bool = False
    ) -> None:
        """Raises: OSError: the pcapng file cannot be created."""
        self.secrets = secrets
        self._own_file = isinstance(pcapng, (str, Path))
        self._file: BinaryIO | None = _private_file(Path(pcapng)) if isinstance(pcapng, (str, Path)) else pcapng
        self.writer = PcapngWriter(self._file) if self._file is not None else None
        self.udp = udp
        self._stream: asyncio_dgram.DatagramClient | None = None
        self._queue: collections.deque[bytes] = collections.deque()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._serial = 0
        self.dropped = 0
        self.errors = 0
        self.sent_datagrams = 0

    async def __aenter__(self) -> FrameTap:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Open the UDP socket (when mirroring). Raises OSError if it cannot."""
        if self.udp is not None and self._stream is None:
            import asyncio_dgram

            self._stream = await asyncio_dgram.connect(self.udp)
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._drain())

    def open(self, client: tuple[str, int], server: tuple[str, int]) -> TapConnection:
        """Start tapping a connection from ``client`` to ``server`` (host, port)."""
        self._serial += 1
        return TapConnection(self, self._serial, client, server)

    def _send(self, kind: int, serial: int, offset: int, data: bytes, ts: int | None = None) -> None:
        if self._stream is None or self._wake is None:
            return
        if len(self._queue) >= _QUEUE_LIMIT:
            self.dropped += 1
            return
        stamp = time.time_ns() if ts is None else ts
        self._queue.append(_HEAD.pack(MAGIC, kind, serial, offset, stamp) + data)
        self._wake.set()

    async def _drain(self) -> None:
        import asyncio_dgram

        assert self._stream is not None and self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                raw = self._queue.popleft()
                try:
                    await self._stream.send(raw)
                    self.sent_datagrams += 1
                except (OSError, asyncio_dgram.TransportClosed):
                    # Nobody listening (ICMP port unreachable) must not stop the server.
                    self.dropped += 1

    async def flush(self) -> None:
        """Wait until every queued datagram was handed to the socket (bounded wait)."""
        for _ in range(1000):
            if not self._queue:
                return
            await asyncio.sleep(0.001)

    async def aclose(self) -> None:
        """Flush and close the UDP socket and the pcapng file."""
        await self.flush()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        if self._file is not None:
            self._file.flush()
            if self._own_file:
                self._file.close()
            self._file = None


class _Listened:
    __slots__ = ("flow", "next", "splitters")

    def __init__(self, name: str) -> None:
        ends = name.split("->", 1)
        self.flow = Flow(name, (ends[0], ends[-1]), ("client", "server"), "tap")
        self.splitters = [FrameSplitter(name, "client", synced=True), FrameSplitter(name, "server", synced=True)]
        self.next = [0, 0]


class TapListener:
    """Sans-I/O receiving end: tap datagrams in, :class:`~.kafka.DecodedFrame` out.

    Connections are keyed by the sender's address and the tap's serial. A datagram whose
    offset is past the expected one means datagrams were lost: the missing span becomes a
    gap (the frame it cuts comes out as truncated); one below it is a duplicate and is
    ignored. Bytes of a connection whose *open* was missed are decoded under the name
    ``?->?#serial``. Never raises for datagram content; ``ignored`` counts foreign ones.
    """

    def __init__(self, decoder: KafkaDecoder | None = None) -> None:
        self.decoder = decoder if decoder is not None else KafkaDecoder()
        self._conns: dict[tuple[object, int], _Listened] = {}
        self.ignored = 0

    def feed(self, raw: bytes, addr: object = None) -> list[DecodedFrame]:
        dg = parse_datagram(raw)
        if dg is None:
            self.ignored += 1
            return []
        key = (addr, dg.serial)
        if dg.kind == KIND_OPEN:
            name = dg.data.decode("utf-8", "replace")
            self._conns[key] = _Listened(name)
            return []
        conn = self._conns.get(key)
        if conn is None:
            if dg.kind == KIND_CLOSE:
                return []
            conn = self._conns[key] = _Listened(f"?->?#{dg.serial}")
        if dg.kind == KIND_CLOSE:
            del self._conns[key]
            return self._close(conn)
        side = 0 if dg.kind == KIND_CLIENT else 1
        exp = conn.next[side]
        sp = conn.splitters[side]
        out: list[DecodedFrame] = []
        frames: list[Frame] = []
        if dg.offset < exp:
            return out
        if dg.offset > exp:
            frames.extend(sp.feed(Gap(exp, dg.offset - exp)))
        frames.extend(sp.feed(Data(dg.offset, dg.data, dg.timestamp_ns, -1)))
        conn.next[side] = dg.offset + len(dg.data)
        for fr in frames:
            out.extend(self.decoder.feed(fr))
        return out

    def _close(self, conn: _Listened) -> list[DecodedFrame]:
        out: list[DecodedFrame] = []
        for sp in conn.splitters:
            for fr in sp.finish():
                out.extend(self.decoder.feed(fr))
        out.extend(self.decoder.feed(FlowEnd(conn.flow)))
        return out

    def finish(self) -> list[DecodedFrame]:
        """Close every open connection (the listener is stopping)."""
        out: list[DecodedFrame] = []
        for conn in self._conns.values():
            out.extend(self._close(conn))
        self._conns.clear()
        out.extend(self.decoder.finish())
        return out
