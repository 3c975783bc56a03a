"""A small HTTP/1.1 server on asyncio streams: the Prometheus endpoint and the admin channel.

No framework: one request per connection (``Connection: close``), which is all a
Prometheus scrape or an admin ``curl`` needs.

Invariants (a peer's bytes never crash the server, nothing unbounded is buffered):

* the request line and headers together are at most 16 KiB, a body at most 1 MiB, and
  a body is read only after ``Content-Length`` has been checked;
* each connection has a read deadline of ``timeout`` seconds (real time: a stuck peer
  must not hold a socket forever whatever the controller clock says);
* a handler raising :class:`HttpError` answers with its status; any other exception is
  logged and answered with 500, and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024
MAX_BODY = 1024 * 1024
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
                if self.guard is not None:
                    self.guard(req)
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
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise HttpError(413, "headers too large") from None
        except asyncio.IncompleteReadError:
            raise HttpError(400, "incomplete request") from None
        if len(head) > MAX_HEAD:
            raise HttpError(413, "headers too large")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise HttpError(400, "malformed request line")
        method, target = parts[0].upper(), parts[1]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                k, sep, v = line.partition(":")
                if not sep:
                    raise HttpError(400, "malformed header")
                headers[k.strip().lower()] = v.strip()
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            raise HttpError(400, "bad Content-Length")
        length = int(length_text)
        if length > MAX_BODY:
            raise HttpError(413, f"body larger than {MAX_BODY} bytes")
        body = await reader.readexactly(length) if length else b""
        url = urllib.parse.urlsplit(target)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        return Request(method, urllib.parse.unquote(url.path), query, body, headers)
