"""Fake-broker configuration: Kafka's broker properties, Kafka's names and defaults.

Reads what a ``process.roles=broker`` node needs (protocol-notes §8.1): ``node.id``,
``log.dirs``/``metadata.log.dir``, ``controller.quorum.voters`` (static quorum) or
``controller.quorum.bootstrap.servers`` (a dynamic quorum at kraft.version 1: the leader and
the voter set are learnt by fetching; ``controller.listener.names`` picks the voter endpoint),
``listeners`` and ``advertised.listeners`` (what the registration advertises; when
unset, the broker advertises its controller's client listeners, learned by
DescribeConfigs, and ``listeners`` only if the controller has none: see
:mod:`~kraft_jbod.broker.advertise`), the heartbeat and session timings,
``log.dir.failure.timeout.ms`` and ``controller.quorum.fetch.snapshot.max.bytes``; our
own ``kraft.jbod.probe.interval.ms`` (how often each directory is probed),
``kraft.jbod.control.listener`` (host:port of the local command endpoint) and
``kraft.jbod.controlled.shutdown.timeout.ms`` (how long a controlled shutdown waits for
the controller's ShouldShutDown, default 300000), ``kraft.jbod.broker.release`` (the
Kafka release whose feature ranges it registers, :mod:`~kraft_jbod.broker.releases`),
``kraft.jbod.serve.clients`` (default true: serve clients on the PLAINTEXT ``listeners``,
:mod:`~kraft_jbod.broker.listener`); and
Kafka 4.4's ``cordoned.log.dirs`` (KIP-1066). Pure: parsing only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kraft_jbod.broker import releases
from kraft_jbod.errors import ConfigError
from kraft_jbod.properties import Listener, load_properties, parse_listeners, parse_override
from kraft_jbod.storage import StorageLayout

_VOTER = re.compile(r"^(\d+)@(\[[0-9A-Fa-f:.]+\]|[^:@\s]+):(\d+)$")
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:@\s\[\]]+):(\d+)$")


@dataclass(slots=True, frozen=True)
class Voter:
    node_id: int
    host: str
    port: int


@dataclass(slots=True, frozen=True)
class BrokerConfig:
    node_id: int
    layout: StorageLayout
    voters: tuple[Voter, ...]
    listeners: tuple[Listener, ...]
    rack: str | None = None
    heartbeat_interval_ms: int = 2000
    session_timeout_ms: int = 9000
    registration_timeout_ms: int = 60000
    failure_timeout_ms: int = 30000
    # How long a controlled shutdown waits for ShouldShutDown before stopping anyway (our own).
    shutdown_timeout_ms: int = 300000
    request_timeout_ms: int = 2000
    probe_interval_ms: int = 1000
    control_listener: tuple[str, int] | None = None
    # Kafka 4.4's cordoned.log.dirs (KIP-1066): log dirs that take no new replica; "*"
    # stands for every log dir. Sent in heartbeats once caught up, at metadata.version
    # 4.3-IV0 and later.
    cordoned_log_dirs: tuple[Path, ...] = ()
    # Kafka's advertised.listeners, () when unset. The fake broker serves no client traffic
    # itself, so when unset it advertises its controller's client listeners (broker/advertise.py),
    # where real clients' follow-up connections get answers; set, it wins.
    advertised_listeners: tuple[Listener, ...] = ()
    # controller.quorum.bootstrap.servers: where an observer sends its first Fetch when there
    # are no static voters; the first of controller.listener.names picks the leader's endpoint.
    bootstrap_servers: tuple[tuple[str, int], ...] = ()
    controller_listener: str | None = None
    # controller.quorum.fetch.snapshot.max.bytes: the slice a FetchSnapshot asks for.
    fetch_snapshot_max_bytes: int = 1024 * 1024
    # kraft.jbod.broker.release: the Kafka release whose feature ranges the broker registers
    # (broker/releases.py).
    release: str = "4.4"
    # kraft.jbod.serve.clients: bind the PLAINTEXT entries of ``listeners`` and answer clients
    # there (broker/listener.py), advertising them; false: serve nothing and advertise the
    # controller's client listener (broker/advertise.py).
    serve_clients: bool = True
    # The properties the broker was started with, for DescribeConfigs of its own node.
    properties: tuple[tuple[str, str], ...] = ()
    # listener.security.protocol.map, by listener name (a name is its own protocol when absent).
    protocols: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> BrokerConfig:
        """Raises ConfigError naming the key and value it cannot use."""
        p = {k: v.strip() for k, v in props.items()}
        roles = {r.strip() for r in p.get("process.roles", "broker").split(",") if r.strip()}
        if roles != {"broker"}:
            raise ConfigError(f"process.roles={p.get('process.roles')!r}: the fake broker runs process.roles=broker")
        layout = StorageLayout.from_properties(p)
        voters = _voters(p.get("controller.quorum.voters", ""))
        bootstrap = _bootstrap_servers(p.get("controller.quorum.bootstrap.servers", ""))
        if not voters and not bootstrap:
            raise ConfigError(
                "set controller.quorum.voters (a static quorum) or controller.quorum.bootstrap.servers (a dynamic one)"
            )
        ctl_names = [n.strip() for n in p.get("controller.listener.names", "").split(",") if n.strip()]
        if any(v.node_id == layout.node_id for v in voters):
            raise ConfigError(f"node.id {layout.node_id} must not be a voter of controller.quorum.voters")
        listeners = parse_listeners(p.get("listeners", "PLAINTEXT://localhost:9092"))
        advertised = _advertised_listeners(p.get("advertised.listeners", ""), listeners)
        control = _control_listener(p.get("kraft.jbod.control.listener", ""))
        cordoned = _cordoned(p.get("cordoned.log.dirs", ""), layout.log_dirs)
        return cls(
            node_id=layout.node_id,
            layout=layout,
            voters=tuple(voters),
            listeners=tuple(listeners),
            rack=p.get("broker.rack") or None,
            heartbeat_interval_ms=_int(p, "broker.heartbeat.interval.ms", 2000),
            session_timeout_ms=_int(p, "broker.session.timeout.ms", 9000),
            registration_timeout_ms=_int(p, "initial.broker.registration.timeout.ms", 60000),
            failure_timeout_ms=_int(p, "log.dir.failure.timeout.ms", 30000),
            shutdown_timeout_ms=_int(p, "kraft.jbod.controlled.shutdown.timeout.ms", 300000),
            request_timeout_ms=_int(p, "controller.quorum.request.timeout.ms", 2000),
            probe_interval_ms=_int(p, "kraft.jbod.probe.interval.ms", 1000),
            control_listener=control,
            advertised_listeners=tuple(advertised),
            cordoned_log_dirs=cordoned,
            bootstrap_servers=tuple(bootstrap),
            controller_listener=ctl_names[0] if ctl_names else None,
            fetch_snapshot_max_bytes=_int(p, "controller.quorum.fetch.snapshot.max.bytes", 1024 * 1024),
            release=_release(p.get("kraft.jbod.broker.release") or releases.DEFAULT_RELEASE),
            serve_clients=_bool(p, "kraft.jbod.serve.clients", True),
            properties=tuple(sorted(p.items())),
            protocols=_protocols(p.get("listener.security.protocol.map", "")),
        )

    def protocol_of(self, listener: str) -> str:
        """The security protocol of a listener name (listener.security.protocol.map)."""
        return dict(self.protocols).get(listener.upper(), listener.upper())


def _voters(text: str) -> list[Voter]:
    """controller.quorum.voters: ``ID@HOST:PORT`` entries, comma-separated."""
    voters = []
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        m = _VOTER.match(item)
        if m is None:
            raise ConfigError(f"controller.quorum.voters: {item!r} is not ID@HOST:PORT")
        voters.append(Voter(int(m[1]), m[2].strip("[]"), int(m[3])))
    return voters


def _bootstrap_servers(text: str) -> list[tuple[str, int]]:
    """controller.quorum.bootstrap.servers: ``HOST:PORT`` entries, comma-separated."""
    bootstrap = []
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        hp = _HOST_PORT.match(item)
        if hp is None or not 0 < int(hp[2]) <= 65535:
            raise ConfigError(f"controller.quorum.bootstrap.servers: {item!r} is not HOST:PORT")
        bootstrap.append((hp[1].strip("[]"), int(hp[2])))
    return bootstrap


def _advertised_listeners(text: str, listeners: Sequence[Listener]) -> list[Listener]:
    """advertised.listeners: each names one of ``listeners`` with a reachable host and port."""
    if not text:
        return []
    advertised = parse_listeners(text, "advertised.listeners")
    names = {li.name for li in listeners}
    for li in advertised:
        if li.name not in names:
            raise ConfigError(f"advertised.listeners: {li.name} is not a listener name of listeners")
        if li.port == 0 or li.host in ("", "0.0.0.0", "::"):
            raise ConfigError(f"advertised.listeners: {li.name} needs a host and a port clients can reach")
    return advertised


def _control_listener(text: str) -> tuple[str, int] | None:
    """kraft.jbod.control.listener: ``[HOST]:PORT`` (host 127.0.0.1 when left out)."""
    if not text:
        return None
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        raise ConfigError(f"kraft.jbod.control.listener: {text!r} is not HOST:PORT")
    return (host or "127.0.0.1", int(port))


def _cordoned(text: str, log_dirs: Sequence[Path]) -> tuple[Path, ...]:
    """Kafka's cordonedLogDirs(): a list without duplicates, each entry one of log.dirs,
    or ``*`` for all of them."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    if "*" in entries:
        return tuple(log_dirs)
    if len(set(entries)) != len(entries):
        raise ConfigError(f"cordoned.log.dirs: {text!r} lists a directory twice")
    out = []
    for e in entries:
        if Path(e) not in log_dirs:
            raise ConfigError(f"cordoned.log.dirs: {e!r} is not one of log.dirs")
        out.append(Path(e))
    return tuple(out)


def _bool(p: Mapping[str, str], key: str, default: bool) -> bool:
    text = (p.get(key) or "").strip().lower()
    if not text:
        return default
    if text not in ("true", "false"):
        raise ConfigError(f"{key}: {p[key]!r} is not true or false")
    return text == "true"


def _protocols(text: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        if not sep or not name.strip() or not proto.strip():
            raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
        out.append((name.strip().upper(), proto.strip().upper()))
    return tuple(out)


def _release(text: str) -> str:
    releases.supported_features(text)  # raises ConfigError naming the known releases
    return text


def _int(p: Mapping[str, str], key: str, default: int) -> int:
    text = p.get(key)
    if text is None or text == "":
        return default
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        raise ConfigError(f"{key}: {text!r} is not a positive integer")
    return int(text)


def load(path: Path, overrides: Sequence[str] = ()) -> BrokerConfig:
    """Raises ConfigError for an unreadable file, a bad override or an unusable value."""
    props = load_properties(path)
    for item in overrides:
        k, v = parse_override(item)
        props[k] = v
    return BrokerConfig.from_properties(props)
