"""A small HTTP/1.1 server on asyncio streams: the Prometheus endpoint and the admin channel.

No framework: one request per connection (``Connection: close``), which is all a
Prometheus scrape or an admin ``curl`` needs.

Invariants (a peer's bytes never crash the server, nothing unbounded is buffered):

* the request line and headers together are at most 16 KiB, a body at most 1 MiB, and
  a body is read only after ``Content-Length`` has been checked;
* each connection has a read deadline of ``timeout`` seconds (real time: a stuck peer
  must not hold a socket forever whatever the controller clock says);
* the guard (the admin channel's token) sees the headers before anything else about them
  is judged: a caller without the token learns nothing from how a malformed header is
  answered. Only a request line that does not parse is refused before it;
* every malformed head is a 400 naming what is wrong, never a 500: header names are
  RFC 9110 tokens, values hold no control characters, ``Content-Length`` is ASCII digits
  (Python's ``isdigit``/``int`` also take ``²`` or Arabic-Indic digits), given once, and
  ``Transfer-Encoding`` is refused (nothing here reads chunked bodies);
* a handler raising :class:`HttpError` answers with its status; any other exception is
  logged and answered with 500, and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
# RFC 9110 token characters (header names) and the characters a field value may not hold.
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_ASCII_DIGITS = re.compile(r"[0-9]+")
_REASONS = {
    200: "OK",
    201: "Created",
    204: "No Content",
    400: "Bad Request",
    404: "Not Found",
    401: "Unauthorized",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
    421: "Misdirected Request",
    500: "Internal Server Error",
}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case

    def json(self) -> Any:
        """Raises: HttpError(400): the body is not JSON (or nests too deep to read)."""
        try:
            return json.loads(self.body or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise HttpError(400, f"body is not JSON: {exc}") from None
        except RecursionError:
            raise HttpError(400, "body is not usable JSON: nested too deeply") from None


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def of_json(cls, obj: Any, status: int = 200) -> Response:
        return cls(status, (json.dumps(obj, sort_keys=True) + "\n").encode())

    @classmethod
    def text(cls, text: str, content_type: str = "text/plain; version=0.0.4; charset=utf-8") -> Response:
        return cls(200, text.encode(), content_type)


Handler = Callable[[Request], Awaitable[Response] | Response]
# Runs before routing; raises HttpError to refuse a request (the admin channel's lock).
Guard = Callable[[Request], None]


class HttpServer:
    """Routes are ``(METHOD, path)`` exact, or ``(METHOD, "/prefix/*")`` for a prefix."""

    def __init__(
        self,
        routes: dict[tuple[str, str], Handler],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        timeout: float = 10.0,
        guard: Guard | None = None,
    ) -> None:
        self.routes = routes
        self.guard = guard
        self.host, self.port = host, port
        self.timeout = timeout
        self._server: asyncio.Server | None = None
        self.address: tuple[str, int] = (host, port)

    async def start(self) -> None:
        """Raises: OSError: cannot bind."""
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        sock = self._server.sockets[0].getsockname()
        self.address = (str(sock[0]), int(sock[1]))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> HttpServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _route(self, method: str, path: str) -> Handler:
        h = self.routes.get((method, path))
        if h is not None:
            return h
        for (m, p), handler in self.routes.items():
            if p.endswith("/*") and path.startswith(p[:-1]) and m == method:
                return handler
        if any(p == path or (p.endswith("/*") and path.startswith(p[:-1])) for _, p in self.routes):
            raise HttpError(405, f"{method} is not allowed on {path}")
        raise HttpError(404, f"no such path {path}")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                req = await asyncio.wait_for(self._read(reader), self.timeout)
                handler = self._route(req.method, req.path)
                result = handler(req)
                resp = await result if not isinstance(result, Response) else result
            except HttpError as exc:
                resp = Response.of_json({"error": exc.message}, exc.status)
            except TimeoutError:
                resp = Response.of_json({"error": "request not received in time"}, 408)
            except Exception:
                log.exception("bug in an HTTP handler")
                resp = Response.of_json({"error": "internal error"}, 500)
            head = (
                f"HTTP/1.1 {resp.status} {_REASONS.get(resp.status, 'Status')}\r\n"
                f"Content-Type: {resp.content_type}\r\nContent-Length: {len(resp.body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + resp.body)
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _read(self, reader: asyncio.StreamReader) -> Request:
        """Read one request: head, guard, then the body its checked ``Content-Length`` announces.

        Raises:
            HttpError: 400 for a malformed head or short body, 413 for one too large, or
                whatever the guard refuses with.
        """
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise HttpError(413, "headers too large") from None
        except asyncio.IncompleteReadError:
            raise HttpError(400, "incomplete request") from None
        if len(head) > MAX_HEAD:
            raise HttpError(413, "headers too large")
        lines = head[:-4].decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1.") or not parts[0] or not parts[1]:
            raise HttpError(400, "malformed request line")
        method, target = parts[0].upper(), parts[1]
        headers, problem = _parse_headers(lines[1:])
        try:
            url = urllib.parse.urlsplit(target)
            query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        except ValueError:
            raise HttpError(400, "malformed request target") from None
        req = Request(method, urllib.parse.unquote(url.path), query, b"", headers)
        # The guard first (Rule 1 of the admin channel: the token), so a caller without it
        # gets 401 whatever else is wrong with the head.
        if self.guard is not None:
            self.guard(req)
        if problem is not None:
            raise HttpError(400, problem)
        length = _content_length(headers)
        if not length:
            return req
        try:
            body = await reader.readexactly(length)
        except asyncio.IncompleteReadError as exc:
            raise HttpError(400, f"body of {len(exc.partial)} bytes, Content-Length says {length}") from None
        return Request(req.method, req.path, req.query, body, headers)


def _parse_headers(lines: list[str]) -> tuple[dict[str, str], str | None]:
    """Headers by lower-case name, and the first problem with them (None: well-formed).

    Well-formed lines are kept even after a bad one, so the guard can still find the token.
    """
    headers: dict[str, str] = {}
    problem: str | None = None
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.fullmatch(name):
            # Covers obs-fold continuation lines and "Name : value" (RFC 9112 says 400).
            problem = problem or "malformed header line"
            continue
        value = value.strip(" \t")
        key = name.lower()
        if _BAD_VALUE.search(value):
            problem = problem or f"control character in the {name} header"
            continue
        if key in headers:
            # Nothing this server serves needs a repeated header, and two Content-Length,
            # Host or token headers are ambiguous: which one a proxy used is unknowable.
            problem = problem or f"the {name} header is given twice"
            continue
        headers[key] = value
    return headers, problem


def _content_length(headers: dict[str, str]) -> int:
    """The body length the head announces.

    Raises:
        HttpError: 400 when it is not ASCII digits or a Transfer-Encoding is sent, 413 when
            it is over ``MAX_BODY``.
    """
    if "transfer-encoding" in headers:
        raise HttpError(400, "Transfer-Encoding is not supported: send Content-Length")
    text = headers.get("content-length", "0")
    if not _ASCII_DIGITS.fullmatch(text):
        raise HttpError(400, "bad Content-Length: expected ASCII digits")
    digits = text.lstrip("0")
    # Compare as text first: int() of thousands of digits is slow or refused by Python.
    if len(digits) > len(str(MAX_BODY)) or int(digits or "0") > MAX_BODY:
        raise HttpError(413, f"body larger than {MAX_BODY} bytes")
    return int(digits or "0")
