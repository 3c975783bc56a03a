"""The logic behind ``kraft-jbod codec decode`` and ``kraft-jbod codec roundtrip``.

Pure functions from inputs to JSON-ready dicts, then the two commands themselves
(``register``), which write only through :mod:`kraft_jbod.console`.
Decoded values use the JSON shape of Kafka's generated JSON converters (camelCase
schema names, uuids as base64url, bytes as base64), so they compare directly with
what Kafka's request logger prints.

Every ``kraft-jbod`` run imports this module to register the two commands, so the codec
(the generated message index, the codec backend, record batches) is imported inside the
functions that use it, never at the top: ``kraft-jbod --version`` must not pay for it.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from kraft_jbod import console
from kraft_jbod.errors import DecodeError, EncodeError, KraftJbodError

if TYPE_CHECKING:
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
    from kraft_jbod import codec
    from kraft_jbod.messages.request_header import RequestHeader
    from kraft_jbod.messages.response_header import ResponseHeader

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
    from kraft_jbod import codec
    from kraft_jbod.messages.releases import defined_in

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


class RoundtripTally:
    """Counts of ``codec roundtrip`` results (a plain class: dataclasses costs an import
    of inspect on every ``kraft-jbod`` run)."""

    __slots__ = ("differ", "exact", "failed")

    def __init__(self) -> None:
        self.exact = 0
        self.differ = 0
        self.failed = 0

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
    except RecursionError:
        # The json module recurses per nesting level; a line of 10^5 '[' is bad input, not a bug.
        result.update(error="not JSON we read: nested too deeply", error_type="InputError")
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


# --------------------------------------------------------------------------- the commands

ROUNDTRIP_EPILOG = """\
Input: one JSON object per line, the hex being a bare body (no size prefix, no header)
at the given version; kind is request, response, request_header or response_header:

  {"api_key": 63, "kind": "request", "version": 1, "hex": "0000000100000000..."}

Output: one JSON line per input line (byte_exact, the decoded value, or the error with
its field path), then "N byte-exact, M differ, K failed". Exit 1 when any differ or fail.
"""


def cmd_codec_decode(args: argparse.Namespace) -> int:
    text = args.hex
    if text == "-":
        text = sys.stdin.read()
    try:
        data = parse_hex(text)
    except ValueError as exc:
        return console.fail(str(exc))
    kind = "request_header" if args.kind == "header" else args.kind
    try:
        result = decode_command(data, kind=kind, api_key=args.api_key, version=args.version, framed=args.framed)
    except KraftJbodError as exc:
        console.json_line(
            {"error": str(exc), "field_path": getattr(exc, "field_path", ""), "offset": getattr(exc, "offset", None)}
        )
        return console.EXIT_FAILED
    console.line(json.dumps(result, indent=None if args.compact else 2, ensure_ascii=False))
    return console.EXIT_OK


def cmd_codec_roundtrip(args: argparse.Namespace) -> int:
    tally = RoundtripTally()
    try:
        stream: TextIO = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")
    except OSError as exc:
        return console.fail(f"cannot read {args.file}: {exc.strerror}")
    with stream:
        try:
            for result in roundtrip_lines(stream, tally):
                console.json_line(result)
        except UnicodeDecodeError as exc:
            return console.fail(f"{args.file} is not UTF-8 text: {exc.reason}")
    console.line(tally.summary())
    return console.EXIT_OK if tally.failed == 0 and tally.differ == 0 else console.EXIT_FAILED


def register(sub: Any) -> None:
    """Add ``codec decode`` and ``codec roundtrip`` to the main parser's subcommands."""
    codec_p = sub.add_parser("codec", help="decode and round-trip raw Kafka bytes")
    codec_sub = codec_p.add_subparsers(dest="codec_command", required=True)
    d = codec_sub.add_parser(
        "decode",
        help="decode a hex frame or body",
        description="Without --kind, HEX is a request frame (size prefix optional). "
        "With --kind and --version, HEX is a bare body; add --framed for a response frame.",
    )
    d.add_argument("hex", help="hex bytes, or - to read them from stdin")
    d.add_argument(
        "--kind",
        choices=["request", "response", "header", "request_header", "response_header"],
        help="what a bare HEX is; `header` is a request header (--version is the header version)",
    )
    d.add_argument("--api-key", type=int)
    d.add_argument("--version", type=int)
    d.add_argument("--framed", action="store_true", help="HEX is a response header + body (size optional)")
    d.add_argument("--compact", action="store_true", help="one-line JSON")
    d.set_defaults(func=cmd_codec_decode)
    r = codec_sub.add_parser(
        "roundtrip",
        help="decode and re-encode JSON lines of {api_key, kind, version, hex}",
        description="Decode every body and encode it again; report whether the bytes come back identical.",
        epilog=ROUNDTRIP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("file", help="JSON lines file, or - for stdin")
    r.set_defaults(func=cmd_codec_roundtrip)
