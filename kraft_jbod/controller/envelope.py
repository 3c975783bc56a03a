"""Envelope (api 58): the requests a KRaft broker forwards to its controller, unwrapped.

A broker that receives an admin request it cannot carry out itself (CreateTopics,
IncrementalAlterConfigs, CreateAcls, ...) sends it on to the active controller inside an
Envelope: the client's whole request (header and body, no size prefix), the client's
principal (a version-prefixed ``DefaultPrincipalData``) and the client's IP address (4 or
16 bytes). The controller handles the inner request as if the client had sent it, and
answers with an Envelope response whose ``ResponseData`` is the inner response (header and
body, no size prefix).

Pure functions: :func:`unwrap` turns an Envelope into a :class:`Forwarded` or the error
Envelope response Kafka answers with; :func:`wrap` packs an inner response.

Rules (Kafka's EnvelopeUtils and ControllerApis, in this order):

* Rule 1: the principal must deserialize (a null or truncated principal, or an unknown
  DefaultPrincipalData version) else PRINCIPAL_DESERIALIZATION_FAILURE (97).
* Rule 2: the client address must be 4 or 16 bytes, else INVALID_REQUEST (42).
* Rule 3: the inner header must parse and name a known api, else INVALID_REQUEST.
* Rule 4: the inner api must be forwardable (Envelope itself is not: no nesting) and served
  here at that version, and its body must parse, else INVALID_REQUEST.
* Rule 5: an inner response that carries NOT_CONTROLLER becomes an Envelope error
  NOT_CONTROLLER with no payload, so the broker looks up the controller again.

Errors of Rules 1-4 are the Envelope's own error code with a null ``ResponseData``; the
inner request is never handled.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kraft_jbod import codec
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.default_principal_data import DefaultPrincipalData
from kraft_jbod.messages.envelope_request import EnvelopeRequest
from kraft_jbod.messages.envelope_response import EnvelopeResponse as EnvelopeResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.request_header import RequestHeader
from kraft_jbod.wire.message import Message

API_ENVELOPE: Final = ApiKey.ENVELOPE
NOT_CONTROLLER: Final = ErrorCode.NOT_CONTROLLER
INVALID_REQUEST: Final = ErrorCode.INVALID_REQUEST
PRINCIPAL_DESERIALIZATION_FAILURE: Final = ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE

# ApiKeys with forwardable=true in Kafka 4.4 (protocol-notes.md §8.2).
FORWARDABLE: Final[frozenset[int]] = frozenset(
    {
        19,
        20,
        30,
        31,
        33,
        37,
        38,
        39,
        40,
        43,
        44,
        45,
        46,
        49,
        51,
        55,
        57,
        64,
        67,
        80,
        81,
    }
)
_INT16: Final = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Principal:
    """A KafkaPrincipal: ``User:alice`` is type ``User``, name ``alice``."""

    type: str
    name: str
    token_authenticated: bool = False

    def __str__(self) -> str:
        return f"{self.type}:{self.name}"


@dataclass(frozen=True, slots=True)
class Forwarded:
    """A request unwrapped from an Envelope, with whom and where it came from."""

    header: RequestHeader
    body: Message
    principal: Principal
    client_address: str  # dotted IPv4 or IPv6 text

    @property
    def api_key(self) -> int:
        return int(self.header.request_api_key)

    @property
    def api_version(self) -> int:
        return int(self.header.request_api_version)


def encode_principal(principal: Principal) -> bytes:
    """The bytes a broker puts in ``RequestPrincipal`` (Kafka's DefaultKafkaPrincipalBuilder)."""
    data = DefaultPrincipalData(
        type=principal.type, name=principal.name, token_authenticated=principal.token_authenticated
    )
    out = bytearray(_INT16.pack(0))
    data.write(out, 0)
    return bytes(out)


def decode_principal(raw: bytes | None) -> Principal:
    """The principal of ``RequestPrincipal``.

    Raises:
        DecodeError: null, too short, an unknown version, or malformed data.
    """
    if raw is None:
        raise DecodeError("the envelope carries no principal")
    if len(raw) < 2:
        raise DecodeError(f"principal data needs a 2-byte version, got {len(raw)} byte(s)")
    (version,) = _INT16.unpack_from(raw, 0)
    lo, hi = DefaultPrincipalData.VALID_VERSIONS
    if not lo <= version <= hi:
        raise DecodeError(f"invalid principal data version {version}")
    data, _end = DefaultPrincipalData.read(raw, 2, version)
    return Principal(data.type, data.name, data.token_authenticated)


def _address(raw: bytes) -> str:
    if len(raw) not in (4, 16):
        raise DecodeError(f"client address has {len(raw)} bytes, not 4 or 16")
    return str(ipaddress.ip_address(raw))


def _error(code: int) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=None, error_code=code)


def unwrap(req: EnvelopeRequest, served: Mapping[int, tuple[int, int]]) -> Forwarded | EnvelopeResponse:
    """The forwarded request, or the Envelope error response (Rules 1-4).

    ``served`` maps the api keys this controller answers to their version ranges.
    """
    try:
        principal = decode_principal(req.request_principal)
    except DecodeError:
        return _error(PRINCIPAL_DESERIALIZATION_FAILURE)
    try:
        address = _address(req.client_host_address)
    except (DecodeError, ValueError):
        return _error(INVALID_REQUEST)
    data = req.request_data
    try:
        key, version, _corr = codec.peek_request(data)
        header, _hv, pos = codec.decode_request_header(data)
    except DecodeError:
        return _error(INVALID_REQUEST)
    rng = served.get(key)
    if key not in FORWARDABLE or rng is None or not rng[0] <= version <= rng[1]:
        return _error(INVALID_REQUEST)
    try:
        body, _end = codec.request_class(key).read(data, pos, version)
    except DecodeError:
        return _error(INVALID_REQUEST)
    return Forwarded(header, body, principal, address)


def _carries_not_controller(value: Any, depth: int = 0) -> bool:
    """True when any ``error_code`` in the response is NOT_CONTROLLER (Kafka's errorCounts)."""
    if depth > 8:
        return False
    if isinstance(value, list):
        return any(_carries_not_controller(v, depth + 1) for v in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return False
    if getattr(value, "error_code", None) == NOT_CONTROLLER:
        return True
    return any(
        _carries_not_controller(getattr(value, f.name), depth + 1)
        for f in dataclasses.fields(value)
        if f.name != "unknown_tagged_fields"
    )


def wrap(fwd: Forwarded, response: Message) -> EnvelopeResponse:
    """The Envelope response carrying ``response`` to ``fwd`` (Rule 5).

    Raises:
        EncodeError: ``response`` cannot be written at the forwarded request's version.
    """
    if _carries_not_controller(response):
        return _error(NOT_CONTROLLER)
    payload = codec.encode_response(response, fwd.api_version, fwd.header.correlation_id, framed=False)
    return EnvelopeResponse(response_data=payload, error_code=0)


def envelope_of(
    body: Message,
    api_version: int,
    *,
    correlation_id: int = 1,
    client_id: str | None = "broker",
    principal: Principal = Principal("User", "ANONYMOUS"),
    client_address: str = "127.0.0.1",
) -> EnvelopeRequest:
    """An Envelope around ``body`` as a broker builds one (for tests and tools).

    Raises:
        EncodeError: ``body`` cannot be written at ``api_version``.
    """
    try:
        packed = ipaddress.ip_address(client_address).packed
    except ValueError as exc:
        raise EncodeError(f"bad client address {client_address!r}: {exc}") from None
    return EnvelopeRequest(
        request_data=codec.encode_request(body, api_version, correlation_id, client_id, framed=False),
        request_principal=encode_principal(principal),
        client_host_address=packed,
    )


def unwrap_response(resp: EnvelopeResponse, api_key: int, api_version: int) -> Message | None:
    """The inner response of an Envelope response (None when it carries none).

    Raises:
        DecodeError: the payload is not a response of that api and version.
    """
    if resp.response_data is None:
        return None
    decoded = codec.decode_response(resp.response_data, api_key, api_version)
    body: Message = decoded.body
    return body
