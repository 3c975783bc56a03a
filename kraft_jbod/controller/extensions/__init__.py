"""The integration-testing layer around :class:`ControllerServer`: one object, small modules.

``ControllerServer(config, extensions=Extensions(...))`` turns on, per listener, what the
server itself does not know about. Each concern has its module, all of them running on
the server's one read loop (``server.Connection``):

* :mod:`.security`: TLS contexts, SASL PLAIN/SCRAM per connection, ACL checks;
* :mod:`.faults`: fault rules (:mod:`kraft_jbod.faults`) carried out on requests;
* :mod:`.metrics`: counters and gauges, Prometheus and StatsD;
* :mod:`.admin`: the locked HTTP admin channel (cluster view, fault rules, clock);
* :mod:`.clients`: client listeners answering Metadata and DescribeCluster;
* :mod:`.gate`: the per-connection gate putting them in order (SASL, ACLs, faults).

The server calls the hooks of :class:`kraft_jbod.controller.seams.Extensions`:
``ssl_context(listener)``, ``start(server)``/``close()`` around its lifecycle and
``new_gate(conn)`` per connection.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraft_jbod.clock import SYSTEM_CLOCK, Clock, ManualClock
from kraft_jbod.controller.extensions.admin import AdminChannel, is_loopback
from kraft_jbod.controller.extensions.clients import ClientApiSink, ClientListener
from kraft_jbod.controller.extensions.faults import error_response
from kraft_jbod.controller.extensions.gate import Gate
from kraft_jbod.controller.extensions.metrics import ControllerMetrics
from kraft_jbod.controller.extensions.security import ListenerSecurity, Security
from kraft_jbod.controller.seams import Peer, ServerView
from kraft_jbod.errors import ConfigError
from kraft_jbod.faults import FaultInjector
from kraft_jbod.metrics.registry import Registry
from kraft_jbod.metrics.statsd import StatsdEmitter
from kraft_jbod.security.acl import Authorizer
from kraft_jbod.security.credentials import CredentialStore
from kraft_jbod.security.tls import TlsSettings

__all__ = ["ClientListener", "Extensions", "Gate", "ListenerSecurity", "error_response"]

log = logging.getLogger(__name__)

_KNOWN_KEYS = frozenset(
    {
        "faults",
        "credentials",
        "acls",
        "listeners",
        "client_listeners",
        "admin",
        "admin_token",
        "admin_token_file",
        "admin_allow_remote",
        "statsd",
        "statsd_interval",
        "manual_clock",
    }
)


def _settings_path(v: object, where: str, base_dir: Path) -> Path:
    """A file path of the settings; a relative one is under ``base_dir``."""
    if not isinstance(v, str):
        raise ConfigError(f"{where}: expected a file path")
    p = Path(v)
    return p if p.is_absolute() else base_dir / p


def _faults_from(spec: object, base_dir: Path) -> FaultInjector:
    """``faults``: a file of fault rules, the rules themselves, or none."""
    faults = FaultInjector()
    if isinstance(spec, str):
        faults.load_file(_settings_path(spec, "faults", base_dir))
    elif spec is not None:
        faults.load_json(spec)
    return faults


def _listeners_from(raw: object, base_dir: Path) -> dict[str, ListenerSecurity]:
    """``listeners``: listener name -> its TLS settings and SASL mechanisms."""
    if not isinstance(raw, dict):
        raise ConfigError("listeners: expected an object of listener name -> settings")
    listeners: dict[str, ListenerSecurity] = {}
    for name, sec in raw.items():
        if not isinstance(sec, dict):
            raise ConfigError(f"listeners.{name}: expected an object")
        tls = _listener_tls(name, sec.get("tls"), base_dir)
        mechs = sec.get("sasl", [])
        if not isinstance(mechs, list) or not all(isinstance(m, str) for m in mechs):
            raise ConfigError(f"listeners.{name}.sasl: expected a list of mechanisms")
        listeners[name.upper()] = ListenerSecurity(tls, tuple(m.upper() for m in mechs))
    return listeners


def _listener_tls(name: str, spec: object, base_dir: Path) -> TlsSettings | None:
    """A listener's ``tls`` settings, their file paths resolved under ``base_dir``."""
    if spec is None:
        return None
    t = dict(spec) if isinstance(spec, dict) else spec
    if isinstance(t, dict):
        for k in ("certfile", "keyfile", "cafile"):
            if isinstance(t.get(k), str):
                t[k] = str(_settings_path(t[k], f"listeners.{name}.tls.{k}", base_dir))
    return TlsSettings.from_json(t, f"listeners.{name}.tls")


def _client_listeners_from(entries: object) -> list[ClientListener]:
    """``client_listeners``: a list of ``NAME://host:port``."""
    if not isinstance(entries, list):
        raise ConfigError(f"client_listeners: expected a list of NAME://host:port, got {entries!r}")
    clients = []
    for entry in entries:
        if not isinstance(entry, str) or "://" not in entry:
            raise ConfigError(f"client_listeners: {entry!r} is not NAME://host:port")
        name, _, hp = entry.partition("://")
        host, port = _host_port(hp, "client_listeners")
        clients.append(ClientListener(name.upper(), host, port))
    return clients


def _flag(doc: dict[str, object], key: str) -> bool:
    """A true/false setting, false when absent."""
    value = doc.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{key}: expected true or false")
    return value


def _host_port(text: object, where: str) -> tuple[str, int]:
    if not isinstance(text, str):  # JSON gives any type: {"admin": 5} is a user's mistake
        raise ConfigError(f'{where}: {text!r} is not a "host:port" string')
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{where}: {text!r} is not host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


class Extensions:
    """Everything of the integration-testing layer for one server (see the module docstring)."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        faults: FaultInjector | None = None,
        registry: Registry | None = None,
        credentials: CredentialStore | None = None,
        authorizer: Authorizer | None = None,
        listeners: dict[str, ListenerSecurity] | None = None,
        client_listeners: list[ClientListener] | None = None,
        admin: tuple[str, int] | None = None,
        admin_token: str | None = None,
        admin_token_file: Path | None = None,
        admin_allow_remote: bool = False,
        statsd: tuple[str, int] | None = None,
        statsd_interval: float = 1.0,
    ) -> None:
        self.clock: Clock = clock or SYSTEM_CLOCK
        self.faults = faults or FaultInjector()
        self.registry = registry or Registry()
        self.security = Security(listeners, credentials, authorizer)
        self.client_listeners = list(client_listeners or [])
        self.admin = admin
        self.admin_token = admin_token
        self.admin_token_file = admin_token_file
        self.admin_allow_remote = admin_allow_remote
        self.statsd = statsd
        self.statsd_interval = statsd_interval
        if admin is not None and not admin_allow_remote and not is_loopback(admin[0]):
            raise ConfigError(
                f"admin: {admin[0]} is not a loopback address; set admin_allow_remote to expose the channel"
            )
        if admin_token is not None and len(admin_token) < 16:
            raise ConfigError("admin_token: use at least 16 characters")
        self.metrics = ControllerMetrics(self.registry, self.faults)
        self.server: ServerView | None = None
        self.client_addresses: dict[str, tuple[str, int]] = {}
        self.admin_channel: AdminChannel | None = None
        self._statsd: StatsdEmitter | None = None
        self._pending: set[asyncio.Task[None]] = set()

    @property
    def authorizer(self) -> Authorizer | None:
        return self.security.authorizer

    @property
    def credentials(self) -> CredentialStore:
        return self.security.credentials

    @property
    def listeners(self) -> dict[str, ListenerSecurity]:
        return self.security.listeners

    @property
    def admin_address(self) -> tuple[str, int] | None:
        return None if self.admin_channel is None else self.admin_channel.address

    # ------------------------------------------------------------------ settings file

    @classmethod
    def from_json(cls, doc: object, base_dir: Path = Path(".")) -> Extensions:
        """Settings from a parsed JSON document; relative paths are under ``base_dir``.

        Raises:
            ConfigError: an unknown key, a bad value or an unreadable file it names.
        """
        if not isinstance(doc, dict):
            raise ConfigError("extensions settings: expected an object")
        extra = set(doc) - _KNOWN_KEYS
        if extra:
            raise ConfigError(f"extensions settings: unknown key(s) {', '.join(sorted(extra))}")

        def path(v: object, where: str) -> Path:
            return _settings_path(v, where, base_dir)

        faults = _faults_from(doc.get("faults"), base_dir)
        creds = CredentialStore.load(path(doc["credentials"], "credentials")) if doc.get("credentials") else None
        authz = Authorizer.load(path(doc["acls"], "acls")) if doc.get("acls") else None
        listeners = _listeners_from(doc.get("listeners", {}), base_dir)
        clients = _client_listeners_from(doc.get("client_listeners", []))
        interval = doc.get("statsd_interval", 1.0)
        if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
            raise ConfigError("statsd_interval: expected a positive number of seconds")
        token = doc.get("admin_token")
        if token is not None and not isinstance(token, str):
            raise ConfigError("admin_token: expected a string")
        manual = _flag(doc, "manual_clock")
        remote = _flag(doc, "admin_allow_remote")
        return cls(
            clock=ManualClock() if manual else None,
            faults=faults,
            credentials=creds,
            authorizer=authz,
            listeners=listeners,
            client_listeners=clients,
            admin=_host_port(doc["admin"], "admin") if doc.get("admin") else None,
            admin_token=token,
            admin_token_file=path(doc["admin_token_file"], "admin_token_file") if doc.get("admin_token_file") else None,
            admin_allow_remote=remote,
            statsd=_host_port(doc["statsd"], "statsd") if doc.get("statsd") else None,
            statsd_interval=float(interval),
        )

    @classmethod
    def load(cls, p: Path) -> Extensions:
        """Raises: ConfigError: unreadable or invalid settings."""
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except IsADirectoryError:
            raise ConfigError(f"{p} is a directory, not a settings file") from None
        except OSError as exc:
            raise ConfigError(f"cannot read {p}: {exc.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError(f"{p} is not JSON: {exc}") from None
        return cls.from_json(doc, p.parent)

    # ------------------------------------------------------------------ server hooks

    def ssl_context(self, listener_name: str) -> ssl.SSLContext | None:
        return self.security.ssl_context(listener_name)

    def security_of(self, listener_name: str) -> ListenerSecurity:
        return self.security.of(listener_name)

    def new_gate(self, conn: Peer) -> Gate:
        return Gate(self, conn)

    def _may_describe(self, conn: Any) -> Callable[[str], bool] | None:
        authz = self.security.authorizer
        gate = getattr(conn, "gate", None)
        if authz is None or not isinstance(gate, Gate):
            return None
        principal = gate.principal
        return lambda name: authz.authorize(principal, "DESCRIBE", "TOPIC", name)

    async def start(self, server: ServerView) -> None:
        """Open client listeners, the admin/metrics endpoint and StatsD; register gauges.

        Raises:
            OSError: a listener cannot bind. ConfigError: the admin token file cannot be written.
        """
        self.server = server
        self.metrics.attach(server)
        try:
            for cl in self.client_listeners:
                sink = ClientApiSink(server, cl, self._may_describe)
                bound = await server.open_listener(cl.name, cl.host, cl.port, sink, self.ssl_context(cl.name))
                self.client_addresses[cl.name] = bound[0]
            if self.admin is not None:
                self.admin_channel = AdminChannel(
                    self.admin,
                    faults=self.faults,
                    registry=self.registry,
                    clock=self.clock,
                    token=self.admin_token,
                    token_file=self.admin_token_file,
                    allow_remote=self.admin_allow_remote,
                )
                self.admin_channel.client_addresses = self.client_addresses
                await self.admin_channel.start(server)
            if self.statsd is not None:
                self._statsd = StatsdEmitter(
                    self.registry, self.statsd, interval=self.statsd_interval, clock=self.clock
                )
                await self._statsd.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        for task in list(self._pending):
            task.cancel()
        if self.admin_channel is not None:
            await self.admin_channel.close()
        if self._statsd is not None:
            await self._statsd.close()
            self._statsd = None

    def cluster_view(self) -> dict[str, Any]:
        if self.admin_channel is None:
            raise ConfigError("no admin channel")
        return self.admin_channel.cluster_view()

    @property
    def admin_token_value(self) -> str | None:
        """The token in force once started (configured or generated)."""
        return None if self.admin_channel is None else self.admin_channel.token

    # ------------------------------------------------------------------ delayed work

    def later(self, ms: int, fn: Callable[[], None]) -> None:
        async def run() -> None:
            await self.clock.sleep(ms / 1000)
            fn()

        task = asyncio.ensure_future(run())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
