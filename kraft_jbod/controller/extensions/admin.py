"""The admin channel: the cluster view, fault rules, the manual clock and /metrics over HTTP.

Locked, because a fault rule can change the durable log and cut brokers off:

* Rule 1: every request carries the channel's token, ``Authorization: Bearer TOKEN``
  (or ``X-Kraft-Jbod-Token: TOKEN``). The token is configured (``admin_token``) or
  generated at start and written to a file created with mode 0600 (``admin_token_file``,
  default ``<metadata.log.dir>/admin.token``); a wrong or missing token is 401.
* Rule 2: a request with a body must say ``Content-Type: application/json`` (415 else):
  a browser cannot send that cross-site without a CORS preflight this server never
  grants.
* Rule 3: the ``Host`` header must name the bound address (or ``localhost`` for a
  loopback bind): a DNS-rebinding page gets 421.
* Rule 4: the channel binds loopback only unless ``admin_allow_remote`` is set.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
import secrets
from pathlib import Path
from typing import Any, Final

from kraft_jbod.clock import Clock, ManualClock
from kraft_jbod.controller import client_api
from kraft_jbod.controller.seams import ServerView
from kraft_jbod.errors import ConfigError
from kraft_jbod.faults import FaultInjector
from kraft_jbod.metrics.http import Handler, HttpError, HttpServer, Request, Response
from kraft_jbod.metrics.registry import Registry

log = logging.getLogger(__name__)

TOKEN_FILE_NAME: Final = "admin.token"
TOKEN_HEADER: Final = "x-kraft-jbod-token"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def write_token_file(path: Path, token: str) -> None:
    """Write ``token`` to ``path`` readable by its owner only (created 0600, replaced atomically).

    Raises:
        ConfigError: the file cannot be written.
    """
    tmp = path.with_name(path.name + ".tmp")
    try:
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(token + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write the admin token file {path}: {exc.strerror}") from None


class AdminChannel:
    """The HTTP admin endpoint of one server."""

    def __init__(
        self,
        address: tuple[str, int],
        *,
        faults: FaultInjector,
        registry: Registry,
        clock: Clock,
        token: str | None = None,
        token_file: Path | None = None,
        allow_remote: bool = False,
    ) -> None:
        if not allow_remote and not is_loopback(address[0]):
            raise ConfigError(
                f"admin: {address[0]} is not a loopback address; set admin_allow_remote to expose the channel"
            )
        if token is not None and len(token) < 16:
            raise ConfigError("admin_token: use at least 16 characters")
        self.bind = address
        self.faults = faults
        self.registry = registry
        self.clock = clock
        self.token = token
        self.token_file = token_file
        self.server: ServerView | None = None
        self.client_addresses: dict[str, tuple[str, int]] = {}
        self._http: HttpServer | None = None
        self.address: tuple[str, int] | None = None

    async def start(self, server: ServerView) -> None:
        """Generate/write the token, then listen.

        Raises:
            ConfigError: the token file cannot be written. OSError: cannot bind.
        """
        self.server = server
        if self.token is None:
            self.token = secrets.token_urlsafe(32)
            if self.token_file is None:
                self.token_file = server.config.metadata_log_dir / TOKEN_FILE_NAME
        if self.token_file is not None:
            write_token_file(self.token_file, self.token)
        self._http = HttpServer(self.routes(), host=self.bind[0], port=self.bind[1], guard=self.guard)
        await self._http.start()
        self.address = self._http.address

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    # ------------------------------------------------------------------ the lock

    def _hosts(self) -> set[str]:
        assert self.address is not None
        host, port = self.address
        names = {f"{host}:{port}", f"[{host}]:{port}"}
        if is_loopback(host):
            names |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
        return names

    def guard(self, req: Request) -> None:
        """Rules 1-3 of the module docstring; raises HttpError to refuse."""
        given = req.headers.get(TOKEN_HEADER)
        auth = req.headers.get("authorization", "")
        if given is None and auth[:7].lower() == "bearer ":
            given = auth[7:].strip()
        assert self.token is not None
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            raise HttpError(401, "missing or wrong admin token (see admin_token_file)")
        if req.headers.get("host", "") not in self._hosts():
            raise HttpError(421, "the Host header does not name this admin channel")
        # Runs before the body is read (metrics/http.py), so a body is known by its headers.
        announced = req.headers.get("content-length", "").lstrip("0") or "transfer-encoding" in req.headers
        if req.body or announced or req.method in ("POST", "PUT"):
            ctype = req.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if ctype != "application/json":
                raise HttpError(415, "the body must be sent as Content-Type: application/json")

    # ------------------------------------------------------------------ routes

    def routes(self) -> dict[tuple[str, str], Handler]:
        return {
            ("GET", "/metrics"): lambda req: Response.text(self.registry.prometheus()),
            ("GET", "/health"): lambda req: Response.of_json({"ok": True}),
            ("GET", "/status"): self._http_status,
            ("GET", "/faults"): lambda req: Response.of_json(self.faults.to_json()),
            ("GET", "/faults/history"): lambda req: Response.of_json([f.to_json() for f in self.faults.history]),
            ("POST", "/faults"): self._http_add_faults,
            ("PUT", "/faults"): self._http_replace_faults,
            ("DELETE", "/faults"): self._http_clear_faults,
            ("DELETE", "/faults/*"): self._http_remove_fault,
            ("POST", "/clock/advance"): self._http_advance,
        }

    def cluster_view(self) -> dict[str, Any]:
        st = None if self.server is None else self.server.state
        if self.server is None or st is None:
            raise HttpError(409, "the controller has not started")
        view = client_api.cluster_view(st)
        view["controller_listeners"] = [f"{h}:{p}" for h, p in self.server.addresses]
        view["client_listeners"] = {n: f"{h}:{p}" for n, (h, p) in self.client_addresses.items()}
        return view

    def _http_status(self, req: Request) -> Response:
        return Response.of_json(self.cluster_view())

    def _http_add_faults(self, req: Request) -> Response:
        doc = req.json()
        items = doc.get("rules") if isinstance(doc, dict) and "rules" in doc else [doc]
        if not isinstance(items, list) or not items:
            raise HttpError(400, 'expected a rule object or {"rules": [...]}')
        added = []
        try:
            for item in items:
                if not isinstance(item, dict):
                    raise ConfigError("a rule must be an object")
                added.append(self.faults.add(item).to_json())
        except ConfigError as exc:
            for r in added:  # all or nothing
                self.faults.remove(r["id"])
            raise HttpError(400, str(exc)) from None
        return Response.of_json({"added": added}, 201)

    def _http_replace_faults(self, req: Request) -> Response:
        try:
            self.faults.load_json(req.json())
        except ConfigError as exc:
            raise HttpError(400, str(exc)) from None
        return Response.of_json(self.faults.to_json())

    def _http_clear_faults(self, req: Request) -> Response:
        self.faults.clear()
        return Response.of_json(self.faults.to_json())

    def _http_remove_fault(self, req: Request) -> Response:
        rid = req.path.rsplit("/", 1)[-1]
        try:
            return Response.of_json({"removed": self.faults.remove(rid).to_json()})
        except ConfigError as exc:
            raise HttpError(404, str(exc)) from None

    def _http_advance(self, req: Request) -> Response:
        if not isinstance(self.clock, ManualClock):
            raise HttpError(409, "the controller runs on the system clock")
        doc = req.json()
        ms = doc.get("ms") if isinstance(doc, dict) else None
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise HttpError(400, 'expected {"ms": <non-negative integer>}')
        woken = self.clock.advance(ms)
        return Response.of_json({"now_ms": self.clock.monotonic_ms(), "woken": woken})
