"""The logic behind ``kraft-jbod codec decode`` and ``kraft-jbod codec roundtrip``.

Pure functions from inputs to JSON-ready dicts; ``cli.py`` does the printing.
Decoded values use the JSON shape of Kafka's generated JSON converters (camelCase
schema names, uuids as base64url, bytes as base64), so they compare directly with
what Kafka's request logger prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kraft_jbod import codec
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.messages.releases import defined_in
from kraft_jbod.messages.request_header import RequestHeader
from kraft_jbod.messages.response_header import ResponseHeader
from kraft_jbod.wire.message import Message

KINDS = ("request", "response", "request_header", "response_header")


_API_KINDS = ("request", "response")


def parse_hex(text: str) -> bytes:
    """Hex with optional spaces, colons or a 0x prefix.

    Raises:
        ValueError: not hex.
    """
    cleaned = "".join(text.split()).replace(":", "")
    if cleaned.lower().startswith("0x"):
        cleaned = cleaned[2:]
    try:
        return bytes.fromhex(cleaned)
    except ValueError:
        raise ValueError(f"not hex: {text[:60]!r}") from None


def strip_size_prefix(data: bytes) -> bytes:
    """Drop a leading int32 size when it matches the rest of the buffer exactly."""
    if len(data) >= 4 and int.from_bytes(data[:4], "big", signed=True) == len(data) - 4:
        return data[4:]
    return data


def _error_dict(exc: DecodeError | EncodeError) -> dict[str, Any]:
    d: dict[str, Any] = {"error": str(exc), "error_type": type(exc).__name__, "field_path": exc.field_path}
    if isinstance(exc, DecodeError):
        d["offset"] = exc.offset
    return d


def body_class(kind: str, api_key: int | None) -> type[Message]:
    """Raises DecodeError for an unknown kind or api key."""
    if kind == "request_header":
        return RequestHeader
    if kind == "response_header":
        return ResponseHeader
    if api_key is None:
        raise DecodeError(f"--api-key is needed to decode a bare {kind} body")
    if kind == "request":
        return codec.request_class(api_key)
    if kind == "response":
        return codec.response_class(api_key)
    raise DecodeError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")


def decode_command(
    data: bytes, *, kind: str | None, api_key: int | None, version: int | None, framed: bool
) -> dict[str, Any]:
    """Decode what ``kraft-jbod codec decode`` was given.

    Raises:
        DecodeError: the bytes do not decode as described.
    """
    if kind is None or (kind == "request" and api_key is None):
        payload = strip_size_prefix(data)
        req = codec.decode_request(payload)
        return {
            "kind": "request",
            "api_key": req.api_key,
            "api_name": codec.api_name(req.api_key),
            "version": req.api_version,
            "defined_in": defined_in(req.api_key, req.api_version),
            "header_version": req.header_version,
            "header": req.header.to_json(req.header_version),
            "body": req.body.to_json(req.api_version),
            "trailing_bytes": req.trailing.hex(),
        }
    if version is None:
        raise DecodeError("--version is needed with --kind")
    if kind == "response" and framed:
        if api_key is None:
            raise DecodeError("--api-key is needed to decode a response frame")
        resp = codec.decode_response(strip_size_prefix(data), api_key, version)
        return {
            "kind": "response",
            "api_key": api_key,
            "api_name": codec.api_name(api_key),
            "version": version,
            "defined_in": defined_in(api_key, version),
            "header_version": resp.header_version,
            "header": resp.header.to_json(resp.header_version),
            "body": resp.body.to_json(version),
            "trailing_bytes": resp.trailing.hex(),
        }
    cls = body_class(kind, api_key)
    value, end = cls.read(data, 0, version)
    return {
        "kind": kind,
        "api_key": cls.API_KEY,
        "api_name": cls.NAME,
        "version": version,
        **({"defined_in": defined_in(cls.API_KEY, version)} if kind in _API_KINDS and cls.API_KEY is not None else {}),
        "body": value.to_json(version),
        "trailing_bytes": data[end:].hex(),
    }


@dataclass
class RoundtripTally:
    exact: int = 0
    differ: int = 0
    failed: int = 0

    def summary(self) -> str:
        return f"{self.exact} byte-exact, {self.differ} differ, {self.failed} failed"


def roundtrip_line(line: str, lineno: int) -> dict[str, Any]:
    """One result for one input line; never raises for bad input."""
    result: dict[str, Any] = {"line": lineno}
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        result.update(error=f"not JSON: {exc.msg} at column {exc.colno}", error_type="InputError")
        return result
    if not isinstance(item, dict):
        result.update(error="each line must be a JSON object", error_type="InputError")
        return result
    kind = item.get("kind")
    api_key = item.get("api_key")
    version = item.get("version")
    result.update(api_key=api_key, kind=kind, version=version)
    if kind not in KINDS:
        result.update(error=f"kind must be one of {', '.join(KINDS)}", error_type="InputError")
        return result
    if not isinstance(version, int) or isinstance(version, bool):
        result.update(error="version must be an integer", error_type="InputError")
        return result
    if kind in ("request", "response") and (not isinstance(api_key, int) or isinstance(api_key, bool)):
        result.update(error="api_key must be an integer", error_type="InputError")
        return result
    try:
        data = parse_hex(str(item.get("hex", "")))
    except ValueError as exc:
        result.update(error=str(exc), error_type="InputError")
        return result
    try:
        cls = body_class(kind, api_key)
        value = cls.decode(data, version)
        again = value.encode(version)
    except (DecodeError, EncodeError) as exc:
        result.update(_error_dict(exc))
        return result
    result["byte_exact"] = again == data
    result["value"] = value.to_json(version)
    if again != data:
        result["reencoded"] = again.hex()
    return result


def roundtrip_lines(lines: Iterable[str], tally: RoundtripTally) -> Iterator[dict[str, Any]]:
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        r = roundtrip_line(line, lineno)
        if "error" in r:
            tally.failed += 1
        elif r["byte_exact"]:
            tally.exact += 1
        else:
            tally.differ += 1
        yield r
