"""The integration-testing layer around :class:`ControllerServer`: one object, small hooks.

``ControllerServer(config, extensions=Extensions(...))`` turns on, per listener, what the
server itself does not know about:

* TLS (``ssl_context``) and SASL PLAIN/SCRAM (:mod:`kraft_jbod.security.sasl`);
* authorization: the controller APIs need their cluster operation
  (:data:`kraft_jbod.security.acl.REQUIRED`), else CLUSTER_AUTHORIZATION_FAILED (31) and
  the state machine never sees the request (others' data untouched);
* fault injection (:mod:`kraft_jbod.faults`), carried out here;
* metrics (requests by api key and error code, brokers, directories, the log) and the
  Prometheus + admin HTTP endpoint, StatsD;
* client listeners answering Metadata and DescribeCluster from the state
  (:mod:`kraft_jbod.controller.client_api`);
* the clock the server runs its timers on.

The server calls four hooks: ``ssl_context(listener)`` and ``start(server)``/``close()``
around its lifecycle, ``new_gate(proto)`` per connection. A :class:`Gate` sees every
request before the state machine (``admit``) and every response (``on_response``).

Order inside ``admit`` (Rule 1: SASL, Rule 2: authorization, Rule 3: faults): a peer
that has not authenticated cannot trigger faults, and a fault never bypasses an ACL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kraft_jbod import codec
from kraft_jbod.clock import SYSTEM_CLOCK, Clock, ManualClock
from kraft_jbod.connection import (
    NEED_DATA,
    ApiVersionsFallback,
    ConnectionClosed,
    RemoteProtocolError,
    RequestReceived,
    ServerConnection,
)
from kraft_jbod.controller import client_api
from kraft_jbod.errors import ConfigError, EncodeError
from kraft_jbod.faults import Action, FaultInjector, Fired, facts_of
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.metrics.http import HttpError, HttpServer, Request, Response
from kraft_jbod.metrics.registry import Labels, Registry
from kraft_jbod.security import sasl as sasl_mod
from kraft_jbod.security.acl import (
    CLUSTER_AUTHORIZATION_FAILED,
    TOPIC_AUTHORIZATION_FAILED,
    Authorizer,
)
from kraft_jbod.security.credentials import MECHANISMS, CredentialStore
from kraft_jbod.security.tls import TlsSettings, principal_from_peercert, server_context

log = logging.getLogger(__name__)

ANONYMOUS: Final = "User:ANONYMOUS"


@dataclass(slots=True)
class ListenerSecurity:
    """Security of one listener: TLS settings (None: plaintext) and SASL mechanisms (empty: none)."""

    tls: TlsSettings | None = None
    sasl: tuple[str, ...] = ()

    @property
    def protocol(self) -> str:
        return ("SASL_" if self.sasl else "") + ("SSL" if self.tls else "PLAINTEXT")


@dataclass(slots=True)
class ClientListener:
    name: str
    host: str = "127.0.0.1"
    port: int = 0
    advertised: str | None = None  # broker endpoint name listed in Metadata (None: first)


def _host_port(text: str, where: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ConfigError(f"{where}: {text!r} is not host:port")
    return host.strip("[]") or "127.0.0.1", int(port)


def error_response(api_key: int, body: Any, code: int, message: str | None = None) -> Any:
    """A response to ``body`` that carries ``code`` everywhere Kafka would put it.

    Raises:
        ConfigError: the api has no error code this function knows how to set.
    """
    cls = codec.response_class(api_key)
    resp: Any = cls()
    if api_key == ApiKey.BROKER_REGISTRATION:
        resp.broker_epoch = -1
    if hasattr(resp, "error_code"):
        resp.error_code = code
        if message is not None and hasattr(resp, "error_message"):
            resp.error_message = message
        return resp
    if api_key == ApiKey.CREATE_TOPICS:
        from kraft_jbod.messages.create_topics_response import CreatableTopicResult

        resp.topics = [
            CreatableTopicResult(name=t.name, error_code=code, error_message=message) for t in body.topics
        ]
        return resp
    if api_key == ApiKey.DELETE_TOPICS:
        from kraft_jbod.messages.delete_topics_response import DeletableTopicResult

        names = list(body.topic_names) + [t.name for t in body.topics]
        resp.responses = [
            DeletableTopicResult(name=n, error_code=code, error_message=message) for n in names
        ]
        return resp
    if api_key == client_api.API_METADATA:
        from kraft_jbod.messages.metadata_response import MetadataResponseTopic

        resp.topics = [
            MetadataResponseTopic(error_code=code, name=t.name, topic_id=t.topic_id) for t in (body.topics or ())
        ]
        return resp
    raise ConfigError(f"{codec.api_name(api_key)} responses have no error code to inject")


def _error_of(body: Any) -> int:
    code = getattr(body, "error_code", 0)
    return int(code) if isinstance(code, int) else 0


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
        statsd: tuple[str, int] | None = None,
        statsd_interval: float = 1.0,
    ) -> None:
        self.clock: Clock = clock or SYSTEM_CLOCK
        self.faults = faults or FaultInjector()
        self.registry = registry or Registry()
        self.credentials = credentials or CredentialStore()
        self.authorizer = authorizer
        self.listeners = {k.upper(): v for k, v in (listeners or {}).items()}
        self.client_listeners = list(client_listeners or [])
        self.admin = admin
        self.statsd = statsd
        self.statsd_interval = statsd_interval
        for name, sec in self.listeners.items():
            for m in sec.sasl:
                if m not in MECHANISMS:
                    raise ConfigError(f"listener {name}: unknown SASL mechanism {m!r}")
        self._ssl: dict[str, ssl.SSLContext] = {
            name: server_context(sec.tls) for name, sec in self.listeners.items() if sec.tls is not None
        }
        self.server: Any = None
        self.client_addresses: dict[str, tuple[str, int]] = {}
        self.admin_address: tuple[str, int] | None = None
        self._client_servers: list[asyncio.Server] = []
        self._client_protos: set[_ClientProtocol] = set()
        self._http: HttpServer | None = None
        self._statsd: Any = None
        self._pending: set[asyncio.Task[None]] = set()
        self._requests = self.registry.counter("requests_total", "requests answered, by api and error code")
        self._fired = self.registry.counter("fault_rules_fired_total", "fault rules fired, by rule and action")
        self._auth_failures = self.registry.counter("authentication_failures_total", "SASL failures by listener")
        self._denied = self.registry.counter("authorization_denied_total", "requests denied by the ACLs")
        self.faults.listeners.append(self._on_fired)

    # ------------------------------------------------------------------ settings file

    @classmethod
    def from_json(cls, doc: object, base_dir: Path = Path(".")) -> Extensions:
        """Settings from a parsed JSON document; relative paths are under ``base_dir``.

        Raises:
            ConfigError: an unknown key, a bad value or an unreadable file it names.
        """
        if not isinstance(doc, dict):
            raise ConfigError("extensions settings: expected an object")
        known = {"faults", "credentials", "acls", "listeners", "client_listeners", "admin", "statsd",
                 "statsd_interval", "manual_clock"}
        extra = set(doc) - known
        if extra:
            raise ConfigError(f"extensions settings: unknown key(s) {', '.join(sorted(extra))}")

        def path(v: object, where: str) -> Path:
            if not isinstance(v, str):
                raise ConfigError(f"{where}: expected a file path")
            p = Path(v)
            return p if p.is_absolute() else base_dir / p

        faults = FaultInjector()
        if isinstance(doc.get("faults"), str):
            faults.load_file(path(doc["faults"], "faults"))
        elif doc.get("faults") is not None:
            faults.load_json(doc["faults"])
        creds = CredentialStore.load(path(doc["credentials"], "credentials")) if doc.get("credentials") else None
        authz = Authorizer.load(path(doc["acls"], "acls")) if doc.get("acls") else None
        listeners: dict[str, ListenerSecurity] = {}
        raw_listeners = doc.get("listeners", {})
        if not isinstance(raw_listeners, dict):
            raise ConfigError("listeners: expected an object of listener name -> settings")
        for name, sec in raw_listeners.items():
            if not isinstance(sec, dict):
                raise ConfigError(f"listeners.{name}: expected an object")
            tls = None
            if sec.get("tls") is not None:
                t = dict(sec["tls"]) if isinstance(sec["tls"], dict) else sec["tls"]
                if isinstance(t, dict):
                    for k in ("certfile", "keyfile", "cafile"):
                        if isinstance(t.get(k), str):
                            t[k] = str(path(t[k], f"listeners.{name}.tls.{k}"))
                tls = TlsSettings.from_json(t, f"listeners.{name}.tls")
            mechs = sec.get("sasl", [])
            if not isinstance(mechs, list) or not all(isinstance(m, str) for m in mechs):
                raise ConfigError(f"listeners.{name}.sasl: expected a list of mechanisms")
            listeners[name.upper()] = ListenerSecurity(tls, tuple(m.upper() for m in mechs))
        clients = []
        for entry in doc.get("client_listeners", []):
            if not isinstance(entry, str) or "://" not in entry:
                raise ConfigError(f"client_listeners: {entry!r} is not NAME://host:port")
            name, _, hp = entry.partition("://")
            host, port = _host_port(hp, "client_listeners")
            clients.append(ClientListener(name.upper(), host, port))
        interval = doc.get("statsd_interval", 1.0)
        if isinstance(interval, bool) or not isinstance(interval, int | float) or interval <= 0:
            raise ConfigError("statsd_interval: expected a positive number of seconds")
        return cls(
            clock=ManualClock() if doc.get("manual_clock") else None,
            faults=faults,
            credentials=creds,
            authorizer=authz,
            listeners=listeners,
            client_listeners=clients,
            admin=_host_port(doc["admin"], "admin") if doc.get("admin") else None,
            statsd=_host_port(doc["statsd"], "statsd") if doc.get("statsd") else None,
            statsd_interval=float(interval),
        )

    @classmethod
    def load(cls, p: Path) -> Extensions:
        """Raises: ConfigError: unreadable or invalid settings."""
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read {p}: {exc.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{p} is not JSON: {exc}") from None
        return cls.from_json(doc, p.parent)

    # ------------------------------------------------------------------ server hooks

    def ssl_context(self, listener_name: str) -> ssl.SSLContext | None:
        return self._ssl.get(listener_name.upper())

    def security_of(self, listener_name: str) -> ListenerSecurity:
        return self.listeners.get(listener_name.upper(), ListenerSecurity())

    def new_gate(self, proto: Any) -> Gate:
        return Gate(self, proto, getattr(proto, "listener", "") or "")

    async def start(self, server: Any) -> None:
        """Open client listeners, the admin/metrics endpoint and StatsD; register gauges.

        Raises:
            OSError: a listener cannot bind.
        """
        self.server = server
        self._register_gauges()
        self._time_log_appends()
        loop = asyncio.get_running_loop()
        try:
            for cl in self.client_listeners:
                srv = await loop.create_server(
                    lambda cl=cl: _ClientProtocol(self, cl), host=cl.host, port=cl.port, ssl=self.ssl_context(cl.name)
                )
                self._client_servers.append(srv)
                sock = srv.sockets[0].getsockname()
                self.client_addresses[cl.name] = (str(sock[0]), int(sock[1]))
            if self.admin is not None:
                self._http = HttpServer(self.admin_routes(), host=self.admin[0], port=self.admin[1])
                await self._http.start()
                self.admin_address = self._http.address
            if self.statsd is not None:
                from kraft_jbod.metrics.statsd import StatsdEmitter

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
        for srv in self._client_servers:
            srv.close()
        for proto in list(self._client_protos):
            proto.close()
        for srv in self._client_servers:
            await srv.wait_closed()
        self._client_servers.clear()
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self._statsd is not None:
            await self._statsd.close()
            self._statsd = None

    # ------------------------------------------------------------------ metrics

    def _on_fired(self, event: Fired) -> None:
        self._fired.inc(labels={"rule": event.rule_id, "action": event.action.type})

    def count_response(self, listener: str, api_key: int, body: Any) -> None:
        self._requests.inc(labels={"api": codec.api_name(api_key), "error": _error_of(body), "listener": listener})

    def _register_gauges(self) -> None:
        reg = self.registry

        def state() -> Any:
            return None if self.server is None else self.server.state

        def per_state() -> dict[Labels, float]:
            st = state()
            out: dict[Labels, float] = {(("state", s),): 0.0 for s in ("FENCED", "UNFENCED", "CONTROLLED_SHUTDOWN")}
            if st is not None:
                for b in st.brokers:
                    hb = st.broker_state(b)
                    if hb is not None:
                        key = (("state", hb.value),)
                        out[key] = out.get(key, 0.0) + 1
            return out

        def fenced() -> float:
            st = state()
            return 0.0 if st is None else float(sum(1 for r in st.brokers.values() if r.fenced))

        def offline_dirs() -> dict[Labels, float]:
            st = state()
            out: dict[Labels, float] = {}
            if st is not None:
                for b, r in st.brokers.items():
                    out[(("broker", str(b)),)] = float(len(r.registered_dirs) - len(r.online_set))
            return out

        def queued() -> dict[Labels, float]:
            st = state()
            out: dict[Labels, float] = {}
            if st is not None:
                unassigned = st.profile.unassigned
                for b in st.brokers:
                    out[(("broker", str(b)),)] = float(len(st.replicas_in(b, unassigned)))
            return out

        def partitions() -> dict[Labels, float]:
            st = state()
            total = offline = 0
            if st is not None:
                for p in st.partitions():
                    total += 1
                    offline += p.leader < 0
            return {(("kind", "all"),): float(total), (("kind", "offline"),): float(offline)}

        def log_bytes() -> float:
            lg = None if self.server is None else self.server.log
            if lg is None:
                return 0.0
            total = 0
            paths = lg.segment_paths
            for p in paths() if callable(paths) else paths:
                try:
                    total += os.stat(p).st_size
                except OSError:
                    pass
            return float(total)

        def end_offset() -> float:
            lg = None if self.server is None else self.server.log
            return 0.0 if lg is None else float(lg.end_offset)

        reg.gauge("brokers", "registered brokers by heartbeat state", per_state)
        reg.gauge("fenced_brokers", "registered brokers that are fenced", fenced)
        reg.gauge("offline_directories", "registered log directories reported offline", offline_dirs)
        reg.gauge(
            "queued_replica_to_dir_assignments",
            "replicas the controller still sees in UNASSIGNED (assignments not yet received)",
            queued,
        )
        reg.gauge("partitions", "partitions, and those without a leader", partitions)
        reg.gauge("metadata_log_bytes", "bytes in the metadata log segments", log_bytes)
        reg.gauge("metadata_log_end_offset", "the metadata log end offset", end_offset)
        reg.gauge("fault_rules", "fault rules installed", lambda: float(len(self.faults)))

    def _time_log_appends(self) -> None:
        """Time ``MetadataLog.append`` (write + fsync) without changing the log class."""
        lg = None if self.server is None else self.server.log
        if lg is None or getattr(lg, "_kraft_jbod_timed", False):
            return
        original: Callable[..., int] = lg.append
        registry = self.registry

        def timed(*args: Any, **kwargs: Any) -> int:
            t0 = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                registry.observe("metadata_log_append_seconds", time.perf_counter() - t0)

        try:
            lg.append = timed
            lg._kraft_jbod_timed = True
        except AttributeError:  # a slotted log: no latency metric, nothing else lost
            log.info("metadata log does not allow timing appends; no fsync latency metric")

    # ------------------------------------------------------------------ admin channel

    def admin_routes(self) -> dict[tuple[str, str], Any]:
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
        if st is None:
            raise HttpError(409, "the controller has not started")
        view = client_api.cluster_view(st)
        view["controller_listeners"] = [f"{h}:{p}" for h, p in getattr(self.server, "addresses", [])]
        view["client_listeners"] = {n: f"{h}:{p}" for n, (h, p) in self.client_addresses.items()}
        return view

    def _http_status(self, req: Request) -> Response:
        return Response.of_json(self.cluster_view())

    def _http_add_faults(self, req: Request) -> Response:
        doc = req.json()
        items = doc.get("rules") if isinstance(doc, dict) and "rules" in doc else [doc]
        if not isinstance(items, list) or not items:
            raise HttpError(400, "expected a rule object or {\"rules\": [...]}")
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
            raise HttpError(400, "expected {\"ms\": <non-negative integer>}")
        woken = self.clock.advance(ms)
        return Response.of_json({"now_ms": self.clock.monotonic_ms(), "woken": woken})

    # ------------------------------------------------------------------ delayed work

    def later(self, ms: int, fn: Callable[[], None]) -> None:
        async def run() -> None:
            await self.clock.sleep(ms / 1000)
            fn()

        task = asyncio.ensure_future(run())
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)


class Gate:
    """One connection's view: SASL state, principal, the broker behind it; admits requests."""

    def __init__(self, ext: Extensions, proto: Any, listener: str) -> None:
        self.ext = ext
        self.proto = proto
        self.listener = listener.upper()
        sec = ext.security_of(self.listener)
        self.sasl = sasl_mod.SaslAuthenticator(sec.sasl, ext.credentials) if sec.sasl else None
        self.tls_principal: str | None = None
        self.broker_id: int | None = None

    @property
    def principal(self) -> str:
        if self.sasl is not None:
            return self.sasl.principal or ANONYMOUS
        if self.tls_principal is None:
            transport = getattr(self.proto, "transport", None)
            cert = None if transport is None else transport.get_extra_info("peercert")
            self.tls_principal = principal_from_peercert(cert)
        return self.tls_principal

    def supported(self, base: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        """The api keys the connection accepts: the server's plus SASL's on a SASL listener."""
        out = dict(base)
        if self.sasl is not None:
            out.update(sasl_mod.SASL_API_VERSIONS)
        return out

    def api_versions(self, body: ApiVersionsResponse) -> ApiVersionsResponse:
        if self.sasl is not None and body.error_code == 0:
            have = {k.api_key for k in body.api_keys}
            extra = [ApiVersion(k, lo, hi) for k, (lo, hi) in sasl_mod.SASL_API_VERSIONS.items() if k not in have]
            body.api_keys = sorted([*body.api_keys, *extra], key=lambda a: a.api_key)
        return body

    def on_response(self, event: Any, body: Any) -> None:
        self.ext.count_response(self.listener, event.api_key, body)

    def _respond(self, ev: RequestReceived, body: Any, close: bool = False) -> None:
        self.proto.respond(ev, body)
        if close:
            self.proto.close()

    def admit(self, ev: RequestReceived, proceed: Callable[[], None]) -> bool:
        """True: the caller handles ``ev`` as usual. False: done here (answered, closed,
        delayed, or stalled); ``proceed`` is called later for a delayed request."""
        key = ev.api_key
        # Rule 1: SASL.
        if self.sasl is not None:
            verdict = self.sasl.on_request(key, ev.api_version, ev.body)
            if not verdict.passes:
                if verdict.close:
                    self.ext._auth_failures.inc(labels={"listener": self.listener})
                    log.warning("%s on %s: %s", self.proto.peer, self.listener, verdict.reason)
                if verdict.response is not None:
                    self._respond(ev, verdict.response, verdict.close)
                else:
                    self.proto.close()
                return False
        broker = getattr(ev.body, "broker_id", None)
        if isinstance(broker, int) and not isinstance(broker, bool) and key in (62, 63, 73, 64):
            self.broker_id = broker
        # Rule 2: authorization.
        authz = self.ext.authorizer
        if authz is not None:
            denied = self._denied(authz, ev)
            if denied is not None:
                self.ext._denied.inc(labels={"api": codec.api_name(key), "principal": self.principal})
                log.warning("denied %s v%d from %s (%s) on %s", codec.api_name(key), ev.api_version,
                            self.principal, self.proto.peer, self.listener)
                self._respond(ev, denied)
                return False
        # Rule 3: faults.
        state = getattr(self.ext.server, "state", None)

        def topic_name(tid: Any) -> str | None:
            t = None if state is None else state.topics.get(tid)
            return None if t is None else str(t.name)

        facts = facts_of(key, ev.api_version, ev.body, listener=self.listener, connection_broker=self.broker_id,
                         topic_name=topic_name)
        rule = self.ext.faults.decide(facts)
        if rule is None:
            return True
        return self._carry_out(rule.action, ev, proceed)

    def _denied(self, authz: Authorizer, ev: RequestReceived) -> Any | None:
        key, principal = ev.api_key, self.principal
        host = self.proto.peer.rsplit(":", 1)[0]
        op = authz.required_for(key)
        if op is not None:
            if authz.authorize(principal, op, host=host):
                return None
            return error_response(key, ev.body, CLUSTER_AUTHORIZATION_FAILED,
                                  f"Principal {principal} lacks {op} on the cluster")
        if key in (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS):
            op = "CREATE" if key == ApiKey.CREATE_TOPICS else "DELETE"
            if authz.authorize(principal, op, host=host):
                return None
            names = [t.name for t in ev.body.topics] if key == ApiKey.CREATE_TOPICS else (
                list(ev.body.topic_names) + [t.name for t in ev.body.topics])
            if all(n is not None and authz.authorize(principal, op, "TOPIC", n, host=host) for n in names):
                return None
            return error_response(key, ev.body, TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        return None

    def _carry_out(self, action: Action, ev: RequestReceived, proceed: Callable[[], None]) -> bool:
        kind = action.type
        if kind == "drop":
            self.proto.close()
            return False
        if kind == "stall":
            return False  # never answered; the connection reads nothing more
        if kind == "delay":
            def resume() -> None:
                if not self.proto.closed:
                    proceed()
            self.ext.later(action.ms, resume)
            return False
        if kind in ("error", "refuse_registration", "stale_epoch"):
            code = ErrorCode.STALE_BROKER_EPOCH if kind == "stale_epoch" else action.error_code
            try:
                body = error_response(ev.api_key, ev.body, code)
            except ConfigError as exc:
                log.warning(
                    "fault on %s cannot be answered with an error (%s); closing", codec.api_name(ev.api_key), exc
                )
                self.proto.close()
                return False
            self._respond(ev, body)
            return False
        if kind == "fence" and ev.api_key == ApiKey.BROKER_HEARTBEAT:
            ev.body.want_fence = True
            return True
        if kind == "offline_dir" and ev.api_key == ApiKey.BROKER_HEARTBEAT and action.directory is not None:
            if ev.api_version < 1:
                log.warning("offline_dir fault needs BrokerHeartbeat v1+, got v%d; passed unchanged", ev.api_version)
            elif action.directory not in ev.body.offline_log_dirs:
                ev.body.offline_log_dirs.append(action.directory)
            return True
        log.warning("fault action %s does not apply to %s; passed unchanged", kind, codec.api_name(ev.api_key))
        return True


class _ClientProtocol(asyncio.Protocol):
    """A client listener connection: ApiVersions, Metadata, DescribeCluster, answered inline."""

    def __init__(self, ext: Extensions, listener: ClientListener) -> None:
        self.ext = ext
        self.cl = listener
        self.listener = listener.name
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.closed = False
        self.in_flight = False
        self.gate = ext.new_gate(self)
        max_frame = getattr(getattr(ext.server, "config", None), "socket_request_max_bytes", codec.DEFAULT_MAX_FRAME)
        self.conn = ServerConnection(self.gate.supported(dict(client_api.CLIENT_APIS)), max_frame=max_frame)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.ext._client_protos.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.ext._client_protos.discard(self)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            if self.transport is not None:
                self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.conn.receive_data(data)
        self._pump()

    def eof_received(self) -> bool:
        self.conn.receive_data(b"")
        self._pump()
        return False

    def _api_versions(self, version: int) -> ApiVersionsResponse:
        keys = [ApiVersion(ApiKey.API_VERSIONS, 0, 4)]
        keys += [ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(client_api.CLIENT_APIS.items())]
        return self.gate.api_versions(ApiVersionsResponse(error_code=0, api_keys=keys))

    def _pump(self) -> None:
        while not self.in_flight and not self.closed:
            try:
                ev = self.conn.next_event()
            except RemoteProtocolError as exc:
                log.warning("closing client connection from %s on %s: %s", self.peer, self.listener, exc.reason)
                self.close()
                return
            if ev is NEED_DATA:
                return
            if isinstance(ev, ConnectionClosed):
                self.close()
                return
            if isinstance(ev, ApiVersionsFallback):
                self._write(self.conn.send_response(
                    ev, ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION,
                                            api_keys=[ApiVersion(ApiKey.API_VERSIONS, 0, 4)])))
                continue
            assert isinstance(ev, RequestReceived)
            if ev.api_key == ApiKey.API_VERSIONS:
                self._write(self.conn.send_response(ev, self._api_versions(ev.api_version)))
                continue
            self.in_flight = True
            if self.gate.admit(ev, self._resumer(ev)):
                self._answer(ev)

    def _resumer(self, ev: RequestReceived) -> Callable[[], None]:
        return lambda: self._answer(ev)

    def _answer(self, ev: RequestReceived) -> None:
        state = getattr(self.ext.server, "state", None)
        if state is None:
            self.close()
            return
        may_describe = None
        authz = self.ext.authorizer
        if authz is not None:
            principal = self.gate.principal

            def may_describe(name: str) -> bool:
                return authz.authorize(principal, "DESCRIBE", "TOPIC", name)
        try:
            body = client_api.answer(state, ev.api_key, ev.api_version, ev.body, listener_name=self.cl.advertised,
                                     may_describe=may_describe)
        except Exception:
            log.exception("bug answering %s v%d from %s", codec.api_name(ev.api_key), ev.api_version, self.peer)
            self.close()
            return
        self.respond(ev, body)

    def respond(self, ev: RequestReceived, body: Any) -> None:
        if self.closed:
            return
        try:
            data = self.conn.send_response(ev, body)
        except EncodeError as exc:
            log.error("closing %s: %s v%d response does not encode: %s", self.peer, codec.api_name(ev.api_key),
                      ev.api_version, exc)
            self.close()
            return
        self.gate.on_response(ev, body)
        self._write(data)
        self.in_flight = False
        if not self.closed:
            asyncio.get_running_loop().call_soon(self._pump)

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.transport.write(data)
