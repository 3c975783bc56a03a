"""Controller configuration: Kafka's properties files, Kafka's names and defaults.

Two steps, both pure:

1. :func:`kraft_jbod.properties.parse_properties` reads the text as
   ``java.util.Properties.load`` does (shared with the broker and ``meta.properties``).
2. :meth:`ControllerConfig.from_properties` turns the strings into typed settings with
   Kafka's defaults, and raises :class:`ConfigError` naming the key and the value it
   could not use. Keys it does not know are kept in ``unknown`` and logged as warnings,
   as Kafka does ("supplied but isn't a known config").

Invariant: nothing here touches the network or the disk except :func:`load`, which reads
one file.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kraft_jbod.errors import ConfigError

# Properties text and listener lists have one home, shared by every node type.
from kraft_jbod.properties import Listener, load_properties, parse_listeners, parse_override, parse_properties

log = logging.getLogger(__name__)

Semantics = Literal["kafka", "kip"]

DEFAULT_SESSION_TIMEOUT_MS = 9000
DEFAULT_UNCLEAN_CHECK_INTERVAL_MS = 5 * 60 * 1000  # unclean.leader.election.interval.ms, as Kafka
DEFAULT_HEARTBEAT_INTERVAL_MS = 2000
DEFAULT_SOCKET_REQUEST_MAX_BYTES = 104857600
# Kafka accepts any positive value, but the first requests every peer sends (ApiVersions
# with the client's software name, a broker's registration with its listeners and log dirs,
# the metadata Fetch) take tens to hundreds of bytes: below this the controller would
# accept the setting and then close every connection without a word.
MIN_SOCKET_REQUEST_MAX_BYTES = 512
_INT32_MAX = 2**31 - 1
# Kafka's default is -1 (no budget). Ours is a budget a little above one largest frame, so
# a few peers cannot make the controller buffer gigabytes; -1 restores Kafka's behaviour.
DEFAULT_QUEUED_MAX_REQUEST_BYTES = 128 * 1024 * 1024
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 10 * 60 * 1000
# Kafka's sasl.server.max.receive.size: the frame limit before SASL authentication.
DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE = 524_288
# A request naming more topics than this is refused before it is decoded in full; Kafka
# caps what one operation may write at 10,000 records (QuorumController).
DEFAULT_MAX_TOPICS_PER_REQUEST = 10_000
DEFAULT_LOG_DIR = "/tmp/kafka-logs"  # Kafka's log.dir default

# Kafka settings a controller-only mock accepts without warning but does not act on.
_KNOWN_IGNORED = frozenset(
    {
        "log.dirs",
        "log.dir",
        "controller.quorum.election.timeout.ms",
        "controller.quorum.fetch.timeout.ms",
        "controller.quorum.request.timeout.ms",
        "controller.quorum.retry.backoff.ms",
        "advertised.listeners",
        "inter.broker.listener.name",
        "num.network.threads",
        "num.io.threads",
        "num.recovery.threads.per.data.dir",
        "socket.send.buffer.bytes",
        "socket.receive.buffer.bytes",
        "offsets.topic.replication.factor",
        "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr",
        "group.initial.rebalance.delay.ms",
        "log.retention.hours",
        "log.segment.bytes",
        "log.retention.check.interval.ms",
        "metadata.log.segment.bytes",
        "auto.create.topics.enable",
        "delete.topic.enable",
        "unstable.feature.versions.enable",
        "unstable.metadata.versions.enable",
    }
)
_KNOWN_USED = frozenset(
    {
        "node.id",
        "controller.quorum.auto.join.enable",
        "process.roles",
        "listeners",
        "controller.listener.names",
        "listener.security.protocol.map",
        "metadata.log.dir",
        "broker.session.timeout.ms",
        "unclean.leader.election.interval.ms",
        "broker.heartbeat.interval.ms",
        "socket.request.max.bytes",
        "queued.max.request.bytes",
        "connections.max.idle.ms",
        "max.connections",
        "max.connections.per.ip",
        "sasl.server.max.receive.size",
        "kraft.jbod.max.topics.per.request",
        "default.replication.factor",
        "num.partitions",
        "kraft.jbod.semantics",
        "metadata.log.max.record.bytes.between.snapshots",
        "metadata.log.max.snapshot.interval.ms",
        "metadata.max.retention.bytes",
        "metadata.max.retention.ms",
        "metadata.max.idle.interval.ms",
        "controller.quorum.voters",
        "controller.quorum.bootstrap.servers",
    }
)


__all__ = [
    "ControllerConfig",
    "Listener",
    "load",
    "load_properties",
    "parse_listeners",
    "parse_override",
    "parse_properties",
]


def _names(value: str) -> list[str]:
    return [v.strip().upper() for v in value.split(",") if v.strip()]


# --------------------------------------------------------------------------- typed config


@dataclass(slots=True)
class ControllerConfig:
    node_id: int
    listeners: list[Listener]
    controller_listener_names: list[str]
    metadata_log_dir: Path
    process_roles: tuple[str, ...] = ("controller",)
    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    # Kafka's periodic check for leaderless partitions of topics that allow unclean elections.
    unclean_check_interval_ms: int = DEFAULT_UNCLEAN_CHECK_INTERVAL_MS
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS
    socket_request_max_bytes: int = DEFAULT_SOCKET_REQUEST_MAX_BYTES
    # Bounds of the socket layer, Kafka's names (see DEFAULT_QUEUED_MAX_REQUEST_BYTES).
    queued_max_request_bytes: int = DEFAULT_QUEUED_MAX_REQUEST_BYTES
    connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS
    max_connections: int = _INT32_MAX
    max_connections_per_ip: int = _INT32_MAX
    sasl_server_max_receive_size: int = DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
    max_topics_per_request: int = DEFAULT_MAX_TOPICS_PER_REQUEST
    default_replication_factor: int = 1
    num_partitions: int = 1
    semantics: Semantics = "kafka"
    # Kafka's defaults: snapshot every 20 MiB of records or every hour; a NoOpRecord after 500 ms idle.
    snapshot_max_bytes: int = 20 * 1024 * 1024
    snapshot_interval_ms: int = 60 * 60 * 1000
    # Kafka's metadata log retention on a quorum (the log prefix below a snapshot goes once
    # log plus snapshots exceed the bytes, or the oldest snapshot the age; -1: no limit).
    retention_bytes: int = 100 * 1024 * 1024
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    idle_interval_ms: int = 500
    # The static quorum (controller.quorum.voters, id -> (host, port)) and the bootstrap
    # servers brokers are told about; an empty voters map means a dynamic quorum
    # (kraft.version 1, ``controller --standalone``): controller/voters.py.
    quorum_voters: dict[int, tuple[str, int]] = field(default_factory=dict)
    bootstrap_servers: list[tuple[str, int]] = field(default_factory=list)
    # controller.quorum.auto.join.enable: a controller outside the voter set asks to be added.
    quorum_auto_join: bool = False
    unknown: dict[str, str] = field(default_factory=dict)

    @property
    def controller_listeners(self) -> list[Listener]:
        """The listeners this controller serves, in ``listeners`` order."""
        return [li for li in self.listeners if li.name in self.controller_listener_names]

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ControllerConfig:
        """Typed settings from parsed properties, with Kafka's defaults.

        Raises:
            ConfigError: a missing required key or a value that cannot be used; the message
                names the key and the value.
        """
        p = {k: v.strip() for k, v in props.items()}
        roles = _process_roles(p)
        if "node.id" not in p:
            raise ConfigError("node.id is required in KRaft mode")
        node_id = _int(p, "node.id", 0)
        listeners, names = _controller_listeners(p)
        mdir = _metadata_log_dir(p)
        semantics = p.get("kraft.jbod.semantics", "kafka").lower()
        if semantics not in ("kafka", "kip"):
            raise ConfigError(f"kraft.jbod.semantics: {semantics!r} is not 'kafka' or 'kip'")
        socket_max, queued = _request_size_limits(p)
        idle = _long(p, "connections.max.idle.ms", DEFAULT_CONNECTIONS_MAX_IDLE_MS)
        quorum_voters = _checked_quorum_voters(p, node_id)
        bootstrap = _bootstrap_servers(p.get("controller.quorum.bootstrap.servers", ""))
        auto_join = p.get("controller.quorum.auto.join.enable", "false").lower()
        if auto_join not in ("true", "false"):
            raise ConfigError(f"controller.quorum.auto.join.enable: {auto_join!r} is not true or false")

        unknown = {k: v for k, v in props.items() if k not in _KNOWN_USED and k not in _KNOWN_IGNORED}
        for k in sorted(unknown):
            log.warning("the configuration %r was supplied but isn't a known config", k)

        return cls(
            node_id=node_id,
            listeners=listeners,
            controller_listener_names=names,
            metadata_log_dir=mdir,
            process_roles=roles,
            session_timeout_ms=_int(p, "broker.session.timeout.ms", 1, DEFAULT_SESSION_TIMEOUT_MS),
            unclean_check_interval_ms=_int(
                p, "unclean.leader.election.interval.ms", 1, DEFAULT_UNCLEAN_CHECK_INTERVAL_MS
            ),
            heartbeat_interval_ms=_int(p, "broker.heartbeat.interval.ms", 1, DEFAULT_HEARTBEAT_INTERVAL_MS),
            socket_request_max_bytes=socket_max,
            queued_max_request_bytes=queued,
            connections_max_idle_ms=idle,
            max_connections=_int(p, "max.connections", 0, _INT32_MAX),
            max_connections_per_ip=_int(p, "max.connections.per.ip", 0, _INT32_MAX),
            sasl_server_max_receive_size=_int(
                p, "sasl.server.max.receive.size", 8, DEFAULT_SASL_SERVER_MAX_RECEIVE_SIZE
            ),
            max_topics_per_request=_int(p, "kraft.jbod.max.topics.per.request", 1, DEFAULT_MAX_TOPICS_PER_REQUEST),
            default_replication_factor=_int(p, "default.replication.factor", 1, 1),
            num_partitions=_int(p, "num.partitions", 1, 1),
            semantics="kip" if semantics == "kip" else "kafka",
            snapshot_max_bytes=_int(p, "metadata.log.max.record.bytes.between.snapshots", 1, 20 * 1024 * 1024),
            snapshot_interval_ms=_int(p, "metadata.log.max.snapshot.interval.ms", 0, 60 * 60 * 1000),
            retention_bytes=_int(p, "metadata.max.retention.bytes", -1, 100 * 1024 * 1024),
            retention_ms=_int(p, "metadata.max.retention.ms", -1, 7 * 24 * 60 * 60 * 1000),
            idle_interval_ms=_int(p, "metadata.max.idle.interval.ms", 0, 500),
            quorum_voters=quorum_voters,
            bootstrap_servers=bootstrap,
            quorum_auto_join=auto_join == "true",
            unknown=unknown,
        )

    @property
    def metadata_partition_dir(self) -> Path:
        """Where the log segments live, as in Kafka: ``<metadata.log.dir>/__cluster_metadata-0``."""
        return self.metadata_log_dir / "__cluster_metadata-0"


def _process_roles(p: Mapping[str, str]) -> tuple[str, ...]:
    """process.roles, which must include the controller (the broker role is not served)."""
    roles_text = p.get("process.roles", "controller")
    roles = tuple(r.strip().lower() for r in roles_text.split(",") if r.strip())
    for r in roles:
        if r not in ("broker", "controller"):
            raise ConfigError(f"process.roles: unknown role {r!r} in {roles_text!r}")
    if "controller" not in roles:
        raise ConfigError(f"process.roles={roles_text!r}: this program runs the controller role only")
    if "broker" in roles:
        log.warning("process.roles includes broker: only the controller role is served")
    return roles


def _controller_listeners(p: Mapping[str, str]) -> tuple[list[Listener], list[str]]:
    """``listeners`` and ``controller.listener.names``: every name must be a listener,
    and a controller listener must be PLAINTEXT in the security protocol map."""
    listeners = parse_listeners(p.get("listeners", "PLAINTEXT://:9092"))
    if "controller.listener.names" not in p:
        raise ConfigError("controller.listener.names is required for a controller")
    names = _names(p["controller.listener.names"])
    if not names:
        raise ConfigError("controller.listener.names must name at least one listener")
    for n in names:
        if not any(li.name == n for li in listeners):
            raise ConfigError(
                f"controller.listener.names: {n} is not in listeners={p.get('listeners', 'PLAINTEXT://:9092')!r}"
            )
    for li in listeners:
        if li.name not in names:
            log.warning("listener %s is not a controller listener and is not served", li.name)
    if "listener.security.protocol.map" in p:
        mapping = {}
        for item in _names(p["listener.security.protocol.map"]):
            lname, sep, proto = item.partition(":")
            if not sep:
                raise ConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL")
            mapping[lname] = proto
        for n in names:
            if mapping.get(n, "PLAINTEXT") != "PLAINTEXT":
                raise ConfigError(f"listener.security.protocol.map: {n}:{mapping[n]} is not supported (PLAINTEXT only)")
    return listeners, names


def _metadata_log_dir(p: Mapping[str, str]) -> Path:
    """Kafka's choice: metadata.log.dir, else the first of log.dirs, else log.dir."""
    if p.get("metadata.log.dir"):
        return Path(p["metadata.log.dir"])
    if p.get("log.dirs") and _dirs(p["log.dirs"]):
        return Path(_dirs(p["log.dirs"])[0])
    return Path(p.get("log.dir") or DEFAULT_LOG_DIR)


def _request_size_limits(p: Mapping[str, str]) -> tuple[int, int]:
    """``(socket.request.max.bytes, queued.max.request.bytes)``, refused when no useful
    request could be read with them."""
    socket_max = _int(p, "socket.request.max.bytes", 1, DEFAULT_SOCKET_REQUEST_MAX_BYTES)
    if socket_max < MIN_SOCKET_REQUEST_MAX_BYTES:
        raise ConfigError(
            f"socket.request.max.bytes={socket_max} is below {MIN_SOCKET_REQUEST_MAX_BYTES}: even the first "
            "request of a client or broker (ApiVersions, BrokerRegistration) would not fit, so every "
            "connection would be closed; use at least 512 (Kafka's default is 104857600)"
        )
    queued = _long(p, "queued.max.request.bytes", DEFAULT_QUEUED_MAX_REQUEST_BYTES)
    if queued == 0 or queued < -1:
        raise ConfigError(f"queued.max.request.bytes: {queued} must be -1 (no budget) or positive")
    if 0 < queued < socket_max:
        raise ConfigError(
            f"socket.request.max.bytes={socket_max} is above queued.max.request.bytes={queued}: such a request "
            "could never be read; lower socket.request.max.bytes or raise queued.max.request.bytes"
        )
    return socket_max, queued


def _checked_quorum_voters(p: Mapping[str, str], node_id: int) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters, which must name this node when it names any."""
    quorum_voters = _quorum_voters(p.get("controller.quorum.voters", ""))
    if quorum_voters and node_id not in quorum_voters:
        raise ConfigError(
            f"controller.quorum.voters={p['controller.quorum.voters']!r} does not name node.id={node_id}: "
            "this controller is the quorum's only voter"
        )
    if len(quorum_voters) > 1:
        log.info("controller.quorum.voters names %d voters: this controller is one of them", len(quorum_voters))
    return quorum_voters


_VOTER = re.compile(r"^(\d+)@(\[[0-9A-Fa-f:.]+\]|[^:@\s\[\]]+):(\d+)$")
_HOST_PORT = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^:@\s\[\]]+):(\d+)$")


def _quorum_voters(text: str) -> dict[int, tuple[str, int]]:
    """Kafka's controller.quorum.voters: ``ID@HOST:PORT`` entries, comma-separated."""
    out: dict[int, tuple[str, int]] = {}
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        m = _VOTER.match(item)
        if m is None or not 0 <= int(m[3]) <= 65535:
            raise ConfigError(f"controller.quorum.voters: {item!r} is not ID@HOST:PORT")
        if int(m[1]) in out:
            raise ConfigError(f"controller.quorum.voters: voter {m[1]} is listed twice")
        out[int(m[1])] = (m[2].strip("[]"), int(m[3]))
    return out


def _bootstrap_servers(text: str) -> list[tuple[str, int]]:
    """Kafka's controller.quorum.bootstrap.servers: ``HOST:PORT`` entries, comma-separated."""
    out = []
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        m = _HOST_PORT.match(item)
        if m is None or not 0 < int(m[2]) <= 65535:
            raise ConfigError(f"controller.quorum.bootstrap.servers: {item!r} is not HOST:PORT")
        out.append((m[1].strip("[]"), int(m[2])))
    return out


def _dirs(value: str) -> list[str]:
    return [d.strip() for d in value.split(",") if d.strip()]


def _long(p: Mapping[str, str], key: str, default: int) -> int:
    if key not in p:
        return default
    text = p[key]
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ConfigError(f"{key}: {text!r} is not an integer")
    value = int(text)
    if not -(2**63) <= value < 2**63:
        raise ConfigError(f"{key}: {text!r} is outside the int64 range")
    return value


def _int(p: Mapping[str, str], key: str, minimum: int, default: int | None = None) -> int:
    if key not in p:
        if default is None:
            raise ConfigError(f"{key} is required")
        return default
    text = p[key]
    # Java's Integer.parseInt: optional sign then ASCII digits only.
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        raise ConfigError(f"{key}: {text!r} is not an integer")
    value = int(text)
    if value > _INT32_MAX or value < -_INT32_MAX - 1:
        raise ConfigError(f"{key}: {text!r} is outside the int32 range")
    if value < minimum:
        raise ConfigError(f"{key}: {text!r} must be at least {minimum}")
    return value


def load(path: Path, overrides: Sequence[str] = ()) -> ControllerConfig:
    """Read ``path``, apply ``--override key=value`` items in order, build the config.

    Raises:
        ConfigError: unreadable file, malformed override or unusable value.
    """
    props = load_properties(path)
    for item in overrides:
        key, value = parse_override(item)
        props[key] = value
    return ControllerConfig.from_properties(props)
