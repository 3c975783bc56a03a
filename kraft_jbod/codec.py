"""Kafka frames: size prefix, request/response headers and bodies, by api key.

Rules this module keeps (Apache Kafka's, see docs/protocol.md):

* A frame is a big-endian int32 size then that many bytes. Sizes above
  ``max_frame`` (100 MiB by default) or below the smallest header are refused
  before anything is allocated.
* Request header version: 2 when the api version is flexible, else 1, except
  ControlledShutdown v0 which uses header v0. ClientId is always a classic
  nullable string, even in header v2.
* Response header version: 1 when flexible, else 0, except ApiVersions whose
  responses always use header v0 (KIP-511), so a client can read the error of a
  version it guessed too high.
* Trailing bytes after a complete body are not an error here: real clients send
  them (librdkafka's all-topics MetadataRequest v12 carries 3). They are returned
  so callers can report them.

Every decode function raises only ``DecodeError``; encoders raise ``EncodeError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kraft_jbod import messages
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.request_header import RequestHeader
from kraft_jbod.messages.response_header import ResponseHeader
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.records import read_metadata_frame_header, write_metadata_frame_header

DEFAULT_MAX_FRAME = 100 * 1024 * 1024
_INT16_PAIR = struct.Struct(">hh")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")


def request_class(api_key: int) -> type[Message]:
    cls = messages.request_class(api_key)
    if cls is None:
        raise DecodeError(f"unknown api key {api_key}", api_key=api_key)
    return cls


def response_class(api_key: int) -> type[Message]:
    cls = messages.response_class(api_key)
    if cls is None:
        raise DecodeError(f"unknown api key {api_key}", api_key=api_key)
    return cls


def api_name(api_key: int) -> str:
    """``"BrokerHeartbeat"`` for 63; ``"Unknown(999)"`` for keys no schema defines."""
    entry = messages.REQUESTS.get(api_key)
    if entry is None:
        return f"Unknown({api_key})"
    return entry[1].removesuffix("Request")


def request_header_version(api_key: int, api_version: int, cls: Any = None) -> int:
    """The request header version (``cls``: the request class, when the caller has it)."""
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    if cls is None:
        cls = messages.request_class(api_key)
    if cls is not None and cls.is_flexible(api_version):
        return 2
    return 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    cls = messages.response_class(api_key)
    if cls is not None and cls.is_flexible(api_version):
        return 1
    return 0


def response_read_version(
    api_key: int, api_version: int, payload: bytes | bytearray | memoryview, body_offset: int = 4
) -> int:
    """The version to read a response body at: the request's, except KIP-511's fallback.

    An ApiVersions response whose ErrorCode (the first body field in every version) is
    UNSUPPORTED_VERSION carries a v0 body whatever version was asked for. This is the
    one place the rule lives; the connection, the capture decoder and the fuzzer ask it.
    """
    if (
        api_key == ApiKey.API_VERSIONS
        and len(payload) >= body_offset + 2
        and _INT16.unpack_from(payload, body_offset)[0] == ErrorCode.UNSUPPORTED_VERSION
    ):
        return 0
    return api_version


@dataclass(slots=True)
class DecodedRequest:
    header: RequestHeader
    header_version: int
    body: Any
    body_offset: int  # where the body starts inside the frame payload
    trailing: bytes  # bytes after a complete body (tolerated, reported)

    @property
    def api_key(self) -> int:
        return self.header.request_api_key

    @property
    def api_version(self) -> int:
        return self.header.request_api_version


@dataclass(slots=True)
class DecodedResponse:
    header: ResponseHeader
    header_version: int
    body: Any
    body_offset: int
    trailing: bytes


def peek_request(payload: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a request payload, without the size prefix."""
    if len(payload) < 8:
        raise DecodeError(f"request header needs 8 bytes, frame has {len(payload)}", offset=0)
    key, version = _INT16_PAIR.unpack_from(payload, 0)
    (corr,) = _INT32.unpack_from(payload, 4)
    return key, version, corr


def decode_request_header(payload: bytes | bytearray | memoryview) -> tuple[RequestHeader, int, int]:
    """The request header and its version, and the offset where the body starts."""
    key, version, _ = peek_request(payload)
    hv = request_header_version(key, version)
    header, pos = RequestHeader.read(payload, 0, hv)
    return header, hv, pos


def decode_request(payload: bytes | bytearray | memoryview) -> DecodedRequest:
    """Decode a request frame payload (the bytes after the int32 size).

    Raises:
        DecodeError: unknown api key, unsupported version, or malformed bytes.
    """
    header, hv, pos = decode_request_header(payload)
    cls = request_class(header.request_api_key)
    body, end = cls.read(payload, pos, header.request_api_version)
    return DecodedRequest(header, hv, body, pos, bytes(payload[end:]))


def decode_response(payload: bytes | bytearray | memoryview, api_key: int, api_version: int) -> DecodedResponse:
    """Decode a response payload; the api key and version come from its request.

    Raises:
        DecodeError: malformed bytes for that api key and version.
    """
    hv = response_header_version(api_key, api_version)
    header, pos = ResponseHeader.read(payload, 0, hv)
    cls = response_class(api_key)
    body, end = cls.read(payload, pos, api_version)
    return DecodedResponse(header, hv, body, pos, bytes(payload[end:]))


def encode_request(
    body: Message, api_version: int, correlation_id: int, client_id: str | None = "", *, framed: bool = True
) -> bytes:
    """A whole request: size prefix (when ``framed``), header and body.

    Raises:
        EncodeError: the body cannot be written at ``api_version``.
    """
    if body.API_KEY is None or body.SCHEMA_TYPE != "request":
        raise EncodeError(f"{type(body).__name__} is not a request")
    hv = request_header_version(body.API_KEY, api_version)
    header = RequestHeader(body.API_KEY, api_version, correlation_id, client_id)
    out = bytearray(b"\0\0\0\0") if framed else bytearray()
    header.write(out, hv)
    body.write(out, api_version)
    if framed:
        struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def encode_response(body: Message, api_version: int, correlation_id: int, *, framed: bool = True) -> bytes:
    """A whole response: size prefix (when ``framed``), header and body.

    Raises:
        EncodeError: the body cannot be written at ``api_version``.
    """
    if body.API_KEY is None or body.SCHEMA_TYPE != "response":
        raise EncodeError(f"{type(body).__name__} is not a response")
    hv = response_header_version(body.API_KEY, api_version)
    out = bytearray(b"\0\0\0\0") if framed else bytearray()
    ResponseHeader(correlation_id).write(out, hv)
    body.write(out, api_version)
    if framed:
        struct.pack_into(">i", out, 0, len(out) - 4)
    return bytes(out)


def frame_size(prefix: bytes | bytearray | memoryview, max_frame: int = DEFAULT_MAX_FRAME) -> int:
    """Validate the 4-byte size prefix of a frame.

    Raises:
        DecodeError: negative size, or larger than ``max_frame``.
    """
    size: int = _INT32.unpack_from(prefix, 0)[0]
    if size < 0:
        raise DecodeError(f"negative frame size {size}", offset=0)
    if size > max_frame:
        raise DecodeError(f"frame size {size} exceeds the limit of {max_frame}", offset=0)
    return size


# --------------------------------------------------------------------------- metadata records


def decode_metadata_record(value: bytes | bytearray | memoryview) -> tuple[Any, int]:
    """A framed metadata record (the value of a record in ``__cluster_metadata``).

    Returns the record and its version. Bytes left over are an error, as in Kafka.

    Raises:
        DecodeError: bad frame version, unknown record type, or malformed body.
    """
    _, api_key, version, pos = read_metadata_frame_header(value, 0)
    cls = messages.metadata_record_class(api_key)
    if cls is None:
        raise DecodeError(f"unknown metadata record type {api_key}", offset=0, api_key=api_key)
    record, end = cls.read(value, pos, version)
    if end != len(value):
        raise DecodeError(
            f"{len(value) - end} bytes of garbage after the record", offset=end, api_key=api_key, version=version
        )
    return record, version


def encode_metadata_record(record: Message, version: int) -> bytes:
    """Frame a metadata record: frame version 1, record type, version, body.

    Raises:
        EncodeError: not a metadata record, or not writable at ``version``.
    """
    if record.SCHEMA_TYPE != "metadata" or record.API_KEY is None:
        raise EncodeError(f"{type(record).__name__} is not a metadata record")
    out = bytearray()
    write_metadata_frame_header(out, record.API_KEY, version)
    record.write(out, version)
    return bytes(out)
