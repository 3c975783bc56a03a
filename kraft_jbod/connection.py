"""Sans-I/O Kafka connections: bytes in, events out, bytes to send back. No sockets, no clocks.

Strategy (h11's, adapted to Kafka's int32-framed requests):

* ``receive_data(data)`` only appends to a buffer; ``receive_data(b"")`` records end of
  stream. ``next_event()`` does the work: it returns one event, or ``NEED_DATA`` when the
  buffer holds no whole frame, or :class:`ConnectionClosed` once the peer has closed and
  every whole frame before the close has been handed out.
* The 4-byte size prefix is checked the moment it arrives: a negative size, one below the
  smallest header, or one above ``max_frame`` raises before a single byte of the body is
  buffered for it, so a hostile size costs nothing.
* A server connection answers in order, like Kafka: the caller turns each request event
  into response bytes with :meth:`ServerConnection.send_response`.

Rules for requests, as Apache Kafka's SocketServer applies them:

* Rule 1: an api key the listener does not serve, or a version outside its range, is a
  :class:`RemoteProtocolError` with ``error_code=None``: Kafka closes without answering.
* Rule 2: ApiVersions (key 18) is the exception (KIP-511). Any version counts as enabled;
  one above what we support is not parsed but yields :class:`ApiVersionsFallback`, which
  the server answers with a v0 body carrying UNSUPPORTED_VERSION and its ranges.
* Rule 3: a header or body that does not decode closes the connection (error_code None).
  Bytes after a complete body are tolerated (real clients send them) and reported.

``next_event()`` raises only :class:`RemoteProtocolError` (a ``ProtocolError``); after it
has raised, the connection is dead and every further call raises again.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from kraft_jbod import codec, messages
from kraft_jbod.errors import DecodeError, EncodeError, ProtocolError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.request_header import RequestHeader
from kraft_jbod.messages.response_header import ResponseHeader
from kraft_jbod.wire.message import Message

DEFAULT_MAX_FRAME: Final = codec.DEFAULT_MAX_FRAME
# api key, api version, correlation id: the fixed part every request header starts with.
_MIN_REQUEST_SIZE: Final = 8
# a response header v0 is just the correlation id.
_MIN_RESPONSE_SIZE: Final = 4
_BE_i = struct.Struct(">i")
_BE_h = struct.Struct(">h")
_BE_ii = struct.Struct(">ii")


# Class lookups go through importlib in the generated registry; a request path that
# runs thousands of times a second keeps its own cache (the registry never changes).
_REQUEST_CLASSES: dict[int, Any] = {}
_RESPONSE_CLASSES: dict[int, Any] = {}


def _request_cls(api_key: int) -> Any:
    try:
        return _REQUEST_CLASSES[api_key]
    except KeyError:
        cls = _REQUEST_CLASSES[api_key] = messages.request_class(api_key)
        return cls


def _response_cls(api_key: int) -> Any:
    try:
        return _RESPONSE_CLASSES[api_key]
    except KeyError:
        cls = _RESPONSE_CLASSES[api_key] = messages.response_class(api_key)
        return cls


_HEADER_VERSIONS: dict[tuple[int, int], int] = {}


def _header_version(api_key: int, api_version: int, cls: Any) -> int:
    try:
        return _HEADER_VERSIONS[(api_key, api_version)]
    except KeyError:
        hv = _HEADER_VERSIONS[(api_key, api_version)] = codec.request_header_version(api_key, api_version, cls)
        return hv


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NEED_DATA: Final = _Sentinel("NEED_DATA")
"""``next_event()`` needs more bytes before it can produce an event."""

NeedData = _Sentinel


class RemoteProtocolError(ProtocolError):
    """The peer broke the protocol; carries what is known of the offending frame for the log."""

    def __init__(
        self,
        reason: str,
        *,
        error_code: int | None = None,
        api_key: int | None = None,
        api_version: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        super().__init__(reason, error_code=error_code)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(slots=True, frozen=True)
class RequestReceived:
    """A whole, decoded request. ``raw`` is the frame payload (no size prefix)."""

    header: RequestHeader
    body: Any
    raw: bytes
    trailing: bytes = b""

    @property
    def api_key(self) -> int:
        return int(self.header.request_api_key)

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)

    @property
    def correlation_id(self) -> int:
        return int(self.header.correlation_id)


@dataclass(slots=True, frozen=True)
class ApiVersionsFallback:
    """An ApiVersions request at a version we do not support (KIP-511); its body was not parsed.

    The server answers it with a v0 ApiVersionsResponse carrying UNSUPPORTED_VERSION.
    """

    header: RequestHeader
    raw: bytes

    @property
    def api_key(self) -> int:
        return ApiKey.API_VERSIONS

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)

    @property
    def correlation_id(self) -> int:
        return int(self.header.correlation_id)


@dataclass(slots=True, frozen=True)
class ResponseReceived:
    """A decoded response, paired with the request it answers."""

    correlation_id: int
    api_key: int
    api_version: int
    header: ResponseHeader
    body: Any
    raw: bytes
    trailing: bytes = b""


@dataclass(slots=True, frozen=True)
class ConnectionClosed:
    """The peer closed. ``unread_bytes`` counts bytes of a partial frame lost with it."""

    unread_bytes: int = 0


ServerEvent = RequestReceived | ApiVersionsFallback | ConnectionClosed | _Sentinel
ClientEvent = ResponseReceived | ConnectionClosed | _Sentinel


class _Framer:
    """Shared buffering: splits the stream into frame payloads, guarding sizes first."""

    __slots__ = ("_buf", "_closed", "_dead", "_max_frame", "_min_size", "_need")

    def __init__(self, max_frame: int, min_size: int) -> None:
        if max_frame < min_size:
            raise ValueError(f"max_frame {max_frame} is below the smallest frame ({min_size} bytes)")
        self._buf = bytearray()
        self._closed = False
        self._dead: RemoteProtocolError | None = None
        self._max_frame = max_frame
        self._min_size = min_size
        self._need = -1  # payload size of the frame being assembled, -1 before its prefix

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._closed:
            if data:
                raise RuntimeError("receive_data() after end of stream")
            return
        if not data:
            self._closed = True
            return
        self._buf += data

    @property
    def buffered(self) -> int:
        return len(self._buf)

    @property
    def pending_size(self) -> int:
        """Payload size of the frame being assembled (its prefix has arrived), else -1."""
        if self._need < 0 and len(self._buf) >= 4:
            (size,) = _BE_i.unpack_from(self._buf, 0)
            return int(size)
        return self._need

    @property
    def max_frame(self) -> int:
        return self._max_frame

    @max_frame.setter
    def max_frame(self, value: int) -> None:
        if value < self._min_size:
            raise ValueError(f"max_frame {value} is below the smallest frame ({self._min_size} bytes)")
        self._max_frame = value

    def next_payload(self) -> bytes | _Sentinel | ConnectionClosed:
        if self._dead is not None:
            raise self._dead
        buf = self._buf
        if self._need < 0:
            if len(buf) < 4:
                return ConnectionClosed(len(buf)) if self._closed else NEED_DATA
            (size,) = _BE_i.unpack_from(buf, 0)
            if size < self._min_size or size > self._max_frame:
                # Decided on the prefix alone: nothing is buffered for an oversized frame.
                kind = "below the smallest header" if size < self._min_size else f"above the limit of {self._max_frame}"
                self._fail(RemoteProtocolError(f"frame size {size} is {kind}"))
            self._need = size
        end = 4 + self._need
        if len(buf) < end:
            return ConnectionClosed(len(buf)) if self._closed else NEED_DATA
        payload = bytes(buf[4:end])
        del buf[:end]
        self._need = -1
        return payload

    def whole_frame(self, data: bytes) -> bytes | None:
        """The payload of ``data`` when it is exactly one whole frame of an acceptable size
        and nothing is buffered (the common read of a request/response peer), taken without
        going through the buffer; None otherwise (then :meth:`feed` it: the buffer's path
        reports a bad size exactly as before)."""
        if self._buf or self._need >= 0 or self._closed or self._dead is not None or len(data) < 4:
            return None
        (size,) = _BE_i.unpack_from(data, 0)
        if size != len(data) - 4 or size < self._min_size or size > self._max_frame:
            return None
        return data[4:]

    def _fail(self, exc: RemoteProtocolError) -> NoReturn:
        self._dead = exc
        self._buf.clear()
        raise exc

    def fail(self, exc: RemoteProtocolError) -> NoReturn:
        self._fail(exc)


class ServerConnection:
    """The server side of one Kafka connection.

    ``supported`` maps each api key this listener serves to its (min, max) versions;
    ApiVersions needs no entry (its range comes from ``api_versions_range``).
    """

    def __init__(
        self,
        supported: Mapping[int, tuple[int, int]],
        *,
        api_versions_range: tuple[int, int] = (0, 4),
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self._framer = _Framer(max_frame, _MIN_REQUEST_SIZE)
        # The payload of bytes read from the peer when they are exactly one whole frame of
        # an acceptable size and nothing is buffered; None otherwise, and then the caller
        # hands them to receive_data as usual (which checks the size as always). Saves the
        # buffer's copy and bookkeeping on the common read of one request.
        self.whole_frame: Callable[[bytes], bytes | None] = self._framer.whole_frame
        self.supported = dict(supported)
        self.api_versions_range = api_versions_range
        self.requests_received = 0

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Buffer bytes from the peer; ``b""`` means the peer closed its side."""
        self._framer.feed(data)

    @property
    def buffered(self) -> int:
        return self._framer.buffered

    @property
    def pending_size(self) -> int:
        """Payload size of the frame being assembled once its size prefix is in, else -1."""
        return self._framer.pending_size

    @property
    def max_frame(self) -> int:
        return self._framer.max_frame

    @max_frame.setter
    def max_frame(self, value: int) -> None:
        """Change the frame limit from the next frame on (e.g. larger once authenticated)."""
        self._framer.max_frame = value

    def next_event(self) -> RequestReceived | ApiVersionsFallback | ConnectionClosed | _Sentinel:
        """The next event; raises only :class:`RemoteProtocolError` (error_code None: close)."""
        payload = self._framer.next_payload()
        if not isinstance(payload, bytes):
            return payload
        try:
            return self.decode_payload(payload)
        except RemoteProtocolError as exc:
            self._framer.fail(exc)

    def next_payload(self) -> bytes | ConnectionClosed | _Sentinel:
        """The next whole frame payload, undecoded (a server may decode it later, elsewhere,
        with :meth:`decode_payload`); raises only :class:`RemoteProtocolError`."""
        return self._framer.next_payload()

    def decode_payload(self, payload: bytes) -> RequestReceived | ApiVersionsFallback:
        """Decode one frame payload from :meth:`next_payload`. Pure: safe in a worker thread.

        Raises:
            RemoteProtocolError: the frame breaks Rules 1-3 (close the connection).
        """
        key, version, corr = codec.peek_request(payload)
        if key != ApiKey.API_VERSIONS:
            header, body, end = self.decode_request(payload, key, version, corr)
            return RequestReceived(header, body, payload, payload[end:] if end < len(payload) else b"")
        lo, hi = self.api_versions_range
        if not lo <= version <= hi:
            try:
                header, _hv, _pos = codec.decode_request_header(payload)
            except DecodeError as exc:
                raise RemoteProtocolError(
                    f"ApiVersions v{version} header does not decode: {exc}",
                    api_key=key,
                    api_version=version,
                    correlation_id=corr,
                ) from None
            self.requests_received += 1
            return ApiVersionsFallback(header, payload)
        header, body, end = self._decode(payload, key, version, corr)
        return RequestReceived(header, body, payload, payload[end:] if end < len(payload) else b"")

    def decode_request(self, payload: bytes, key: int, version: int, corr: int) -> tuple[RequestHeader, Any, int]:
        """The header, the body and the offset after the body of a request other than
        ApiVersions, whose key, version and correlation id :func:`codec.peek_request` read;
        what :meth:`decode_payload` does for it, with the same checks and errors, without
        building the event (a server answering the request at once has no use for it).

        Raises:
            RemoteProtocolError: the frame breaks Rule 1 or 3 (close the connection).
        """
        rng = self.supported.get(key)
        if rng is None:
            raise RemoteProtocolError(
                f"api key {key} ({codec.api_name(key)}) is not served on this listener",
                api_key=key,
                api_version=version,
                correlation_id=corr,
            )
        if not rng[0] <= version <= rng[1]:
            raise RemoteProtocolError(
                f"{codec.api_name(key)} v{version} is outside the supported range {rng[0]}-{rng[1]}",
                api_key=key,
                api_version=version,
                correlation_id=corr,
            )
        return self._decode(payload, key, version, corr)

    def _decode(self, payload: bytes, key: int, version: int, corr: int) -> tuple[RequestHeader, Any, int]:
        cls = _request_cls(key)
        if cls is None:
            raise RemoteProtocolError(
                f"api key {key} is unknown", api_key=key, api_version=version, correlation_id=corr
            )
        try:
            header, pos = RequestHeader.read(payload, 0, _header_version(key, version, cls))
            body, end = cls.read(payload, pos, version)
        except DecodeError as exc:
            raise RemoteProtocolError(
                f"{codec.api_name(key)} v{version} does not decode: {exc}",
                api_key=key,
                api_version=version,
                correlation_id=corr,
            ) from None
        self.requests_received += 1
        return header, body, end

    def send_response(self, request: RequestReceived | ApiVersionsFallback, body: Message) -> bytes:
        """The framed bytes answering ``request`` with ``body``.

        For an :class:`ApiVersionsFallback` the body is written at v0, as KIP-511 requires.

        Raises:
            EncodeError: ``body`` cannot be written at the request's version.
        """
        version = 0 if isinstance(request, ApiVersionsFallback) else request.api_version
        key = body.API_KEY
        if key is None or body.SCHEMA_TYPE != "response":
            raise EncodeError(f"{type(body).__name__} is not a response")
        cls = _response_cls(key)
        flexible = key != ApiKey.API_VERSIONS and cls is not None and cls.is_flexible(version)
        out = bytearray(8)
        _BE_ii.pack_into(out, 0, 0, request.correlation_id)
        if flexible:
            out.append(0)  # response header v1: an empty tagged-field section
        body.write(out, version)
        _BE_i.pack_into(out, 0, len(out) - 4)
        return bytes(out)


class ClientConnection:
    """The client side of one Kafka connection: numbers requests and pairs their responses.

    Responses must arrive in request order, as Kafka sends them; anything else is a
    protocol error. An ApiVersions response carrying UNSUPPORTED_VERSION is read at v0
    whatever version was asked for (KIP-511).
    """

    def __init__(
        self,
        *,
        client_id: str | None = "kraft-jbod",
        max_frame: int = DEFAULT_MAX_FRAME,
        first_correlation_id: int = 0,
    ) -> None:
        self._framer = _Framer(max_frame, _MIN_RESPONSE_SIZE)
        self.client_id = client_id
        self._next_corr = first_correlation_id
        # correlation id -> (api key, version), in send order.
        self._in_flight: dict[int, tuple[int, int]] = {}

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def send_request(self, body: Message, version: int) -> bytes:
        """Frame ``body`` at ``version`` with the next correlation id; returns the bytes to send.

        Raises:
            EncodeError: ``body`` is not a request or cannot be written at ``version``.
        """
        corr = self._next_corr
        data = codec.encode_request(body, version, corr, self.client_id)
        assert body.API_KEY is not None  # encode_request checked it
        self._in_flight[corr] = (body.API_KEY, version)
        self._next_corr = corr + 1 if corr < 0x7FFFFFFF else 0
        return data

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        self._framer.feed(data)

    def next_event(self) -> ResponseReceived | ConnectionClosed | _Sentinel:
        """The next response; raises only :class:`RemoteProtocolError`."""
        payload = self._framer.next_payload()
        if not isinstance(payload, bytes):
            return payload
        (corr,) = _BE_i.unpack_from(payload, 0)
        oldest = next(iter(self._in_flight), None)
        if oldest is None or corr != oldest:
            self._framer.fail(
                RemoteProtocolError(f"response with correlation id {corr}, expected {oldest}", correlation_id=corr)
            )
        key, version = self._in_flight.pop(corr)
        read_version = codec.response_read_version(key, version, payload)
        try:
            decoded = codec.decode_response(payload, key, read_version)
        except DecodeError as exc:
            self._framer.fail(
                RemoteProtocolError(
                    f"{codec.api_name(key)} v{read_version} response does not decode: {exc}",
                    api_key=key,
                    api_version=read_version,
                    correlation_id=corr,
                )
            )
        return ResponseReceived(corr, key, read_version, decoded.header, decoded.body, payload, decoded.trailing)


def supported_range(api_key: int) -> tuple[int, int]:
    """Every version our codecs can read for ``api_key``; a convenience for tests and tools.

    Raises:
        KeyError: no schema defines ``api_key``.
    """
    cls = messages.request_class(api_key)
    if cls is None:
        raise KeyError(api_key)
    lo, hi = cls.VALID_VERSIONS
    return int(lo), int(hi)
