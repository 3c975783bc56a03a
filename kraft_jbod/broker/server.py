"""The fake JBOD broker's asyncio shell: sockets and timers around the pure pieces.

Strategy: four TCP channels to the controller, as a real broker opens them (raft Fetch and
FetchSnapshot, "heartbeat" for registration and heartbeats, "directory-assignments", and
"forwarding" for the Envelopes of admin writes its clients send), each a
:class:`~kraft_jbod.connection.ClientConnection` that starts with ApiVersions and uses
the highest version both sides support. Five tasks drive the pure parts:

* fetch: :class:`~.follower.MetadataFollower` -> records (or a whole snapshot, when the
  controller's log starts past ours) -> :class:`~.image.MetadataImage`,
  then :func:`~.directories.reconcile` creates folders and queues assignments;
* lifecycle: register (retried with backoff until ``initial.broker.registration.timeout.ms``;
  advertising its own client listeners, or, without them and without
  ``advertised.listeners``, what the controller's client listeners are, :mod:`~.advertise`),
  then heartbeats through the :class:`~.lifecycle.Lifecycle` table; a directory failure
  sends one at once;
* assignments: the :class:`~.assignments.AssignmentQueue`, one request in flight;
* probe: every ``kraft.jbod.probe.interval.ms`` each online directory is probed;
* control: an optional local TCP endpoint taking one command per line
  (``fail-dir DIR``, ``move TOPIC PARTITION DIR``, ``status``, ``shutdown``), answering one
  JSON line; ``shutdown`` (and SIGTERM in the CLI) runs a controlled shutdown
  (:meth:`FakeBroker.begin_shutdown`).

Its own client listeners (:mod:`~.listener`, ``kraft.jbod.serve.clients``) answer clients
from the image, describe and move replicas between its dirs, and forward admin writes.
Start-up loads the dirs as Kafka's does (:func:`~kraft_jbod.storage.load_broker_dirs`).

Invariants: a peer's bytes never crash the broker: a channel that fails is closed and
reopened after a backoff. The broker stops on ``close()``, on a fatal follower error,
when registration times out, or by Rule 3 of the lifecycle (an unreported directory
failure under a partition it leads); ``exit_reason`` says which. Every notable step is
an event in ``events`` (and passed to ``on_event``) for timelines and tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import ipaddress
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraft_jbod.broker import advertise, client_api, releases
from kraft_jbod.broker import directories as dm
from kraft_jbod.broker.assignments import Assignment, AssignmentQueue
from kraft_jbod.broker.config import BrokerConfig, Voter
from kraft_jbod.broker.follower import FollowerFatal, MetadataFollower
from kraft_jbod.broker.image import MetadataImage
from kraft_jbod.broker.lifecycle import Effect, Input, Lifecycle, State
from kraft_jbod.broker.listener import ClientListener
from kraft_jbod.broker.snapshots import parse_snapshot
from kraft_jbod.connection import NEED_DATA, ClientConnection, ConnectionClosed, ResponseReceived
from kraft_jbod.controller import features as fv
from kraft_jbod.errors import KraftJbodError, StorageError
from kraft_jbod.messages.alter_replica_log_dirs_response import (
    AlterReplicaLogDirPartitionResult,
    AlterReplicaLogDirsResponse,
    AlterReplicaLogDirTopicResult,
)
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kraft_jbod.messages.default_principal_data import DefaultPrincipalData
from kraft_jbod.messages.envelope_request import EnvelopeRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.properties import Listener as ConfigListener
from kraft_jbod.storage import load_broker_dirs
from kraft_jbod.wire.primitives import uuid_from_base64url, uuid_signed_key, uuid_to_base64url

log = logging.getLogger(__name__)

OUR_VERSIONS: dict[int, tuple[int, int]] = {
    ApiKey.FETCH: (13, 17),
    ApiKey.FETCH_SNAPSHOT: (0, 1),
    ApiKey.BROKER_REGISTRATION: (2, 4),
    ApiKey.BROKER_HEARTBEAT: (0, 2),
    ApiKey.ASSIGN_REPLICAS_TO_DIRS: (0, 0),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ENVELOPE: (0, 0),
}


class ChannelError(KraftJbodError):
    """A channel to the controller failed (connect, timeout, close, protocol, version)."""


class UnsupportedApi(ChannelError):
    """The controller does not serve an api key at any version we speak (the channel stays open)."""


@dataclass(slots=True, frozen=True)
class BrokerEvent:
    ts_ms: int
    broker_id: int
    kind: str
    text: str


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class Channel:
    """One NodeToController-style connection: max one request in flight, ApiVersions first."""

    def __init__(self, name: str, addr: tuple[str, int], client_id: str, timeout_ms: int, tap: Any = None) -> None:
        self.name, self.addr, self.client_id, self.timeout_ms, self.tap = name, addr, client_id, timeout_ms, tap
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._conn: ClientConnection | None = None
        self._tapped: Any = None
        self.versions: dict[int, tuple[int, int]] = {}
        self._lock = asyncio.Lock()
        self._connected: tuple[str, int] | None = None  # addr of the open connection

    async def _open(self) -> None:
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(*self.addr), self.timeout_ms / 1000
            )
        except (OSError, TimeoutError) as exc:
            raise ChannelError(f"{self.name}: cannot connect to {self.addr[0]}:{self.addr[1]}: {exc}") from None
        self._conn = ClientConnection(client_id=self.client_id)
        self._connected = self.addr
        if self.tap is not None:
            local = self._writer.get_extra_info("sockname")  # type: ignore[union-attr]
            self._tapped = self.tap.open((str(local[0]), int(local[1])), self.addr)
        resp = await self._roundtrip(
            ApiVersionsRequest(client_software_name="kraft-jbod", client_software_version="0.1.0"), 3, None
        )
        if resp.error_code != 0:
            raise ChannelError(f"{self.name}: ApiVersions answered error {resp.error_code}")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    async def learn_versions(self) -> dict[int, tuple[int, int]]:
        """The controller's ApiVersions answer, connecting first if never connected.

        Raises:
            ChannelError: the controller cannot be reached.
        """
        if self.versions:
            return self.versions
        async with self._lock:
            if self._conn is None:
                try:
                    await self._open()
                except ChannelError:
                    self.close()
                    raise
                except KraftJbodError as exc:
                    self.close()
                    raise ChannelError(f"{self.name}: {exc}") from None
            return self.versions

    def version(self, key: int) -> int:
        lo, hi = OUR_VERSIONS[key]
        theirs = self.versions.get(key)
        if theirs is None or theirs[1] < lo or theirs[0] > hi:
            raise UnsupportedApi(f"{self.name}: the controller does not support api key {key} v{lo}-{hi}")
        return min(hi, theirs[1])

    async def _roundtrip(self, body: Any, version: int, timeout_ms: int | None) -> Any:
        assert self._conn is not None and self._writer is not None and self._reader is not None
        data = self._conn.send_request(body, version)
        self._writer.write(data)
        if self._tapped is not None:
            self._tapped.from_client(data)
        deadline = time.monotonic() + (timeout_ms or self.timeout_ms) / 1000
        while True:
            ev = self._conn.next_event()
            if isinstance(ev, ResponseReceived):
                return ev.body
            if isinstance(ev, ConnectionClosed):
                raise ChannelError(f"{self.name}: the controller closed the connection")
            assert ev is NEED_DATA
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ChannelError(f"{self.name}: request timed out")
            try:
                chunk = await asyncio.wait_for(self._reader.read(65536), remaining)
            except (OSError, TimeoutError) as exc:
                raise ChannelError(f"{self.name}: {exc or 'request timed out'}") from None
            if chunk and self._tapped is not None:
                self._tapped.from_server(chunk)
            self._conn.receive_data(chunk)

    async def call(self, key: int, build: Any, timeout_ms: int | None = None) -> Any:
        """Send ``build(version)`` (or ``build`` itself, a request body) and return the
        response body; reconnects as needed.

        Raises:
            ChannelError: anything went wrong; the connection is closed.
        """
        async with self._lock:
            try:
                if self._conn is not None and self._connected != self.addr:
                    self.close()  # retargeted (a new leader endpoint): reconnect there
                if self._conn is None:
                    await self._open()
                version = self.version(key)
                body = build(version) if callable(build) else build
                return await self._roundtrip(body, version, timeout_ms)
            except UnsupportedApi:
                raise  # nothing was sent: the connection is still good
            except ChannelError:
                self.close()
                raise
            except KraftJbodError as exc:
                self.close()
                raise ChannelError(f"{self.name}: {exc}") from None

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        if self._tapped is not None:
            self._tapped.close()
        self._reader = self._writer = self._conn = self._tapped = None


class FakeBroker:
    """``async with FakeBroker(config) as broker``; see the module docstring."""

    def __init__(
        self,
        config: BrokerConfig,
        *,
        tap: Any = None,
        on_event: Callable[[BrokerEvent], None] | None = None,
    ) -> None:
        self.config = config
        self.node_id = config.node_id
        self.tap = tap
        self.on_event = on_event
        self._controller_unreachable = False
        self.events: list[BrokerEvent] = []
        self.image = MetadataImage()
        self.queue = AssignmentQueue()
        self.exit_reason: str | None = None
        self.stopped = asyncio.Event()
        self.control_address: tuple[str, int] | None = None
        self.incarnation_id = uuid.uuid4()
        self._tasks: list[asyncio.Task[None]] = []
        self._wake_heartbeat = asyncio.Event()
        self._wake_assign = asyncio.Event()
        self._control: asyncio.Server | None = None
        self._moves: dict[dm.TopicPartition, tuple[uuid.UUID, uuid.UUID, bool]] = {}  # src, dst, acked
        self.cluster_id = ""
        self.dirs: dm.DirectoryManager
        self.follower: MetadataFollower
        self.lifecycle: Lifecycle
        self.metadata_dir_id: uuid.UUID | None = None
        self._shutdown_reason = ""
        self._shutdown_answered = False
        self._leader_known = asyncio.Event()
        self._leader_followed = False  # the controller channels went to a named leader once
        # What the registration advertises (broker/advertise.py), chosen before each attempt.
        self.advertised: advertise.Advertised | None = None
        # Its own client listeners (kraft.jbod.serve.clients), bound in start().
        self.client_listeners: list[ClientListener] = []
        self._scanned = False

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> FakeBroker:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def event(self, kind: str, text: str) -> None:
        ev = BrokerEvent(int(time.time() * 1000), self.node_id, kind, text)
        self.events.append(ev)
        log.info("broker %d: %s: %s", self.node_id, kind, text, extra={"event": kind, "broker": self.node_id})
        if self.on_event is not None:
            self.on_event(ev)

    async def start(self) -> None:
        """Load directory ids, start the tasks and the control endpoint.

        The directories are loaded as a Kafka 4.4 broker loads them
        (:func:`~kraft_jbod.storage.load_broker_dirs`): an unformatted or missing one stops
        the start, an unreadable one (a file in its place) stays offline and unregistered.

        Raises:
            StorageError: a directory is unformatted or missing, the directories are
                inconsistent or share an id, the metadata directory or every log directory
                is unreadable.
            OSError: a listener cannot bind.
        """
        cfg = self.config
        loaded = load_broker_dirs(cfg.layout)
        by_path = {r.path: r for r in loaded.results}
        self.cluster_id = loaded.cluster_id
        for r in loaded.results:
            if r.action != "kept":
                shown = uuid_to_base64url(r.meta.directory_id or uuid.UUID(int=0))
                self.event("storage", f"{r.path}: {r.action} ({shown})")
        failed = {d: why for d, why in loaded.failed if d in cfg.layout.log_dirs}
        for d, why in failed.items():
            log.error(
                "broker %d: log dir %s is offline from the start: %s",
                self.node_id,
                d,
                why,
                extra={"event": "dir-offline-at-start", "broker": self.node_id},
            )
            self.event("storage", f"{d}: offline from the start ({why})")
        log_dirs = []
        for p in cfg.layout.log_dirs:
            if p in failed:
                continue
            dir_id = by_path[p].meta.directory_id
            assert dir_id is not None
            log_dirs.append((p, dir_id))
        if not log_dirs:
            # Kafka: "Shutdown broker because none of the specified log dirs ... can be created or validated"
            raise StorageError(f"none of the log dirs {', '.join(map(str, cfg.layout.log_dirs))} can be read")
        self.dirs = dm.DirectoryManager(log_dirs, failed_at_start=failed)
        self.metadata_dir_id = by_path[cfg.layout.metadata_log_dir].meta.directory_id
        self.follower = MetadataFollower(
            cluster_id=self.cluster_id,
            node_id=self.node_id,
            directory_id=self.metadata_dir_id,
            snapshot_slice_bytes=cfg.fetch_snapshot_max_bytes,
        )
        # Kafka counts the configured log dirs (config.logDirs().size() > 1), failed ones too.
        multi = len(cfg.layout.log_dirs) > 1
        self.lifecycle = Lifecycle(self.node_id, multi_dir=multi, failure_timeout_ms=cfg.failure_timeout_ms)
        self.lifecycle.set_cordoned({self._find_dir(str(p)).dir_id for p in cfg.cordoned_log_dirs})
        # Static voters name the controller; otherwise the first Fetch goes to a bootstrap
        # server and the leader's endpoint is learnt from the answer (_follow_leader).
        addr = (cfg.voters[0].host, cfg.voters[0].port) if cfg.voters else cfg.bootstrap_servers[0]
        if cfg.voters:
            self._leader_known.set()
        timeout = cfg.request_timeout_ms
        self._raft = Channel("raft", addr, f"raft-client-{self.node_id}", timeout, self.tap)
        self._hb = Channel("heartbeat", addr, str(self.node_id), timeout, self.tap)
        self._assign = Channel("directory-assignments", addr, str(self.node_id), timeout, self.tap)
        self._forward = Channel("forwarding", addr, str(self.node_id), timeout, self.tap)
        if cfg.serve_clients:
            for li in cfg.listeners:
                if cfg.protocol_of(li.name) != "PLAINTEXT":
                    log.warning(
                        "broker %d: listener %s is %s; the fake broker serves clients on PLAINTEXT listeners only",
                        self.node_id,
                        li.name,
                        cfg.protocol_of(li.name),
                    )
                    continue
                server = ClientListener(self, li)
                try:
                    bound = await server.start()
                except OSError:
                    for other in self.client_listeners:
                        await other.close()
                    raise
                self.client_listeners.append(server)
                self.event("listener", f"serving clients on {li.name}://{bound[0]}:{bound[1]}")
        if cfg.control_listener is not None:
            self._control = await asyncio.start_server(self._serve_control, *cfg.control_listener)
            sock = self._control.sockets[0].getsockname()
            self.control_address = (str(sock[0]), int(sock[1]))
        loop = asyncio.get_running_loop()
        for name, coro in (
            ("fetch", self._fetch_loop()),
            ("lifecycle", self._lifecycle_loop()),
            ("assign", self._assign_loop()),
            ("probe", self._probe_loop()),
        ):
            self._tasks.append(loop.create_task(self._guard(name, coro), name=f"broker-{self.node_id}-{name}"))
        self.event("start", f"log dirs {', '.join(f'{p}={uuid_to_base64url(d)}' for p, d in log_dirs)}")

    async def _guard(self, name: str, coro: Any) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except FollowerFatal as exc:
            self.stop(f"fatal replication error: {exc}")
        except Exception as exc:  # a bug: stop the broker rather than limp on
            log.exception("broker %d: task %s failed", self.node_id, name)
            self.stop(f"task {name} failed: {exc!r}")

    def begin_shutdown(self, reason: str) -> str:
        """A controlled shutdown, as Kafka's broker runs one on SIGTERM.

        From RUNNING the broker enters PENDING_CONTROLLED_SHUTDOWN and heartbeats at once
        with WantShutDown; the controller moves leadership away and answers ShouldShutDown,
        and the lifecycle loop then stops the broker. In any other state (not registered
        yet, still fenced) there is nothing to hand over and the broker stops now. If the
        controller never agrees within ``kraft.jbod.controlled.shutdown.timeout.ms`` the
        broker stops anyway. Returns what happened, for the control endpoint.
        """
        if self.stopped.is_set():
            return "already stopped"
        if not hasattr(self, "lifecycle") or self.lifecycle.epoch < 0:
            self.stop(reason)
            return "stopped (not registered)"
        before = self.lifecycle.state
        effect = self.lifecycle.feed(Input.SHUTDOWN_REQUESTED)
        if self.lifecycle.state is not before:
            self.event("state", f"{before.value} -> {self.lifecycle.state.value}")
        if effect is Effect.STOP:
            self.stop(reason)
            return f"stopped (controlled shutdown skipped in state {before.value})"
        if before is State.PENDING_CONTROLLED_SHUTDOWN:
            return "controlled shutdown already under way"
        self._shutdown_reason = reason
        self._wake_heartbeat.set()
        loop = asyncio.get_running_loop()
        self._tasks.append(
            loop.create_task(
                self._guard("shutdown-timer", self._shutdown_timer()), name=f"broker-{self.node_id}-shutdown-timer"
            )
        )
        return "controlled shutdown started"

    @property
    def shutdown_started(self) -> bool:
        return bool(self._shutdown_reason)

    async def _shutdown_timer(self) -> None:
        await self._sleep(self.config.shutdown_timeout_ms, self.stopped)
        if not self.stopped.is_set():
            self.stop(f"controlled shutdown not approved within {self.config.shutdown_timeout_ms} ms")

    def stop(self, reason: str) -> None:
        """Stop the broker (idempotent); ``exit_reason`` keeps the first reason."""
        if self.exit_reason is None:
            self.exit_reason = reason
            self.event("stop", reason)
        self.stopped.set()

    async def close(self) -> None:
        self.stop("closed")
        current = asyncio.current_task()
        for t in self._tasks:
            if t is not current:
                t.cancel()
        for t in self._tasks:
            if t is not current:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
        if self._control is not None:
            self._control.close()
            await self._control.wait_closed()
        for server in self.client_listeners:
            await server.close()
        for name in ("_raft", "_hb", "_assign", "_forward"):
            ch = getattr(self, name, None)  # absent when start() failed before opening them
            if ch is not None:
                ch.close()

    async def _sleep(self, ms: float, wake: asyncio.Event | None = None) -> None:
        if wake is None:
            await asyncio.sleep(ms / 1000)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), ms / 1000)
        wake.clear()

    # ------------------------------------------------------------------ metadata

    async def _fetch_loop(self) -> None:
        while not self.stopped.is_set():
            snapshot = self.follower.download is not None
            try:
                if snapshot:
                    resp = await self._raft.call(ApiKey.FETCH_SNAPSHOT, self.follower.build_snapshot_request)
                else:
                    resp = await self._raft.call(
                        ApiKey.FETCH, self.follower.build_request, timeout_ms=self.config.request_timeout_ms + 1000
                    )
            except ChannelError as exc:
                log.debug("broker %d: fetch: %s", self.node_id, exc)
                self._next_voter()
                await self._sleep(100)
                continue
            try:
                if snapshot:
                    result = self.follower.on_snapshot_response(resp, parse=False)
                    if result.whole is not None:
                        # Decoding a large snapshot takes a while: off the event loop, so
                        # heartbeats keep going; installing it and loading the image stay
                        # together on the loop, so no heartbeat reports an offset before it.
                        d = result.whole
                        loaded = await asyncio.to_thread(parse_snapshot, bytes(d.data), d.end_offset, d.epoch)
                        result.snapshot = self.follower.install(loaded)
                else:
                    result = self.follower.on_response(resp)
            except KraftJbodError as exc:
                if isinstance(exc, FollowerFatal):
                    raise
                self.event("fetch-error", f"response refused: {exc}")
                await self._sleep(100)
                continue
            if result.new_leader:
                f = self.follower
                self.event("leader", f"controller {f.leader_id} leads the metadata quorum at epoch {f.epoch}")
            if not self.config.voters:
                self._follow_leader()
            elif len(self.config.voters) > 1:
                self._follow_voter(result.error_code)
            if result.error_code not in (0, ErrorCode.FENCED_LEADER_EPOCH):
                await self._sleep(100)
                continue
            if result.snapshot_requested is not None:
                end, epoch = result.snapshot_requested
                self.event(
                    "snapshot", f"fetching snapshot ({end}, {epoch}): our log ends at {self.follower.end_offset}"
                )
            published = False
            if result.snapshot is not None:
                snap = result.snapshot
                self.image.load_snapshot(snap.end_offset, snap.records)
                self.event(
                    "snapshot",
                    f"loaded snapshot ({snap.end_offset}, {snap.epoch}): {len(snap.records)} records, "
                    f"{snap.size} bytes; fetching on from offset {snap.end_offset}",
                )
                published = True
            if result.published:
                for offset, record, version in result.published:
                    self.image.apply(offset, record, version)
                published = True
            if published:
                if not self.lifecycle.image_published:
                    self.lifecycle.image_published = True
                    self.event("image", f"first metadata image published at offset {self.follower.published_offset}")
                self._after_metadata()

    def _follow_leader(self) -> None:
        """Without static voters: point every channel at the leader's endpoint once known
        (its VotersRecord entry, else the Fetch answer's NodeEndpoints), as Kafka's observer
        and its controller channels follow the raft leader."""
        addr = self.follower.leader_address(self.config.controller_listener)
        if addr is None:
            return
        if addr != self._hb.addr or not self._leader_known.is_set():
            self.event("leader-endpoint", f"controller {self.follower.leader_id} at {addr[0]}:{addr[1]}")
        for channel in (self._raft, self._hb, self._assign, self._forward):
            channel.addr = addr
        self._leader_known.set()

    def _follow_voter(self, error_code: int) -> None:
        """Several static voters: every channel goes to the voter the answers name as leader;
        a voter that names none sends the fetch on to the next voter. On a change of leader
        the fetch moves at once, the controller channels (heartbeat, assignments,
        forwarding) once the new leader answers with a known high watermark: before that its
        controller is not active yet (Kafka's answers NOT_CONTROLLER and logs an error)."""
        leader = next((v for v in self.config.voters if v.node_id == self.follower.leader_id), None)
        if leader is None or (
            error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER and self._raft.addr == (leader.host, leader.port)
        ):
            if error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                self._next_voter()
            return
        addr = (leader.host, leader.port)
        self._raft.addr = addr
        if addr != self._hb.addr:
            if self._leader_followed and not self.follower.leader_serving():
                return  # the old leader's channels stay until the new one serves
            self.event("leader-endpoint", f"controller {leader.node_id} at {addr[0]}:{addr[1]}")
            for channel in (self._hb, self._assign, self._forward):
                channel.addr = addr
        self._leader_followed = True

    def _next_voter(self) -> None:
        """The fetch channel tries the next static voter (the one it used is down or not leading)."""
        voters = [(v.host, v.port) for v in self.config.voters]
        if len(voters) < 2:
            return
        at = voters.index(self._raft.addr) if self._raft.addr in voters else -1
        self._raft.addr = voters[(at + 1) % len(voters)]

    def _quorum_config(self) -> BrokerConfig:
        """The config with the controller as its voter: the static one, or without static
        voters the leader learnt by fetching (``_follow_leader``), for code that asks it."""
        cfg = self.config
        addr = None if cfg.voters else self.follower.leader_address(cfg.controller_listener)
        if addr is None:
            return cfg
        return dataclasses.replace(cfg, voters=(Voter(self.follower.leader_id, addr[0], addr[1]),))

    def _after_metadata(self) -> None:
        me = self.image.brokers.get(self.node_id)
        if me is not None and me.epoch != self.lifecycle.epoch:
            return  # our registration is not in the image yet
        if not fv.supports_jbod(self.image.features.get(fv.METADATA_VERSION, 1)):
            return
        self._reconcile()

    def _reconcile(self) -> None:
        if not self._scanned:
            # The replica folders already on disk (a restart), found once the image names
            # their topics: they count for placement as Kafka's loaded logs do.
            self._scanned = True
            self.dirs.scan({name: tid for tid, name in self.image.topic_names.items()})
        multi = self.lifecycle.multi_dir
        cordoned = frozenset(self.lifecycle.configured_cordoned)
        for action in dm.reconcile(self.node_id, self.image.partitions_of(self.node_id), self.dirs, cordoned):
            tp = action.tp
            name = self.image.topic_names.get(tp[0], uuid_to_base64url(tp[0]))
            if action.create:
                d = self.dirs.dirs[action.directory]
                if not self.dirs.create(d, tp, name):
                    self._dir_failed(d.dir_id, d.reason)
                    continue
                self.event("replica", f"created {name}-{tp[1]} in {d.path}")
            if action.assign and multi:
                pending = self.queue.pending(tp)
                if pending is None or pending.directory != action.directory:
                    self.queue.add(Assignment(tp[0], tp[1], action.directory, _now_ms(), action.why))
                    self._wake_assign.set()

    # ------------------------------------------------------------------ registration, heartbeats

    def _registration(self, version: int) -> BrokerRegistrationRequest:
        feats = releases.registration_features(self.config.release, version)
        online = sorted((d.dir_id for d in self.dirs.online), key=uuid_signed_key)
        return BrokerRegistrationRequest(
            broker_id=self.node_id,
            cluster_id=self.cluster_id,
            incarnation_id=self.incarnation_id,
            listeners=[Listener(li.name, li.host or "localhost", li.port, 0) for li in self._advertised().listeners],
            features=feats,
            rack=self.config.rack,
            is_migrating_zk_broker=False,
            log_dirs=online,
            previous_broker_epoch=-1,
        )

    def _advertised(self) -> advertise.Advertised:
        if self.advertised is None:
            self.advertised = advertise.choose(self._quorum_config(), None)
        return self.advertised

    async def _learn_advertised(self) -> None:
        """Choose what the next registration advertises (broker/advertise.py): ask the
        controller for its client listeners unless advertised.listeners is set. Logs the
        choice when it changes: INFO, or one WARNING when clients would find nothing.

        Raises:
            ChannelError: the controller cannot be reached (the registration retries).
        """
        cfg = self._quorum_config()
        learned = None
        if self.client_listeners:
            self._advertise_own(cfg)
            return
        if not cfg.advertised_listeners:
            voter = cfg.voters[0]
            try:
                resp = await self._hb.call(ApiKey.DESCRIBE_CONFIGS, advertise.describe_request(voter.node_id))
                learned = advertise.from_describe_configs(resp, voter)
            except UnsupportedApi as exc:
                learned = advertise.Learned(problem=f"the controller does not serve DescribeConfigs ({exc})")
        chosen = advertise.choose(cfg, learned)
        previous, self.advertised = self.advertised, chosen
        if previous is not None and (previous.listeners, previous.source) == (chosen.listeners, chosen.source):
            return
        if chosen.warning is not None:
            log.warning(
                "broker %d: %s",
                self.node_id,
                chosen.warning,
                extra={"event": "advertise-unreachable", "broker": self.node_id},
            )
        self.event("advertise", f"{advertise.show(chosen.listeners)} (from {chosen.source})")

    def _advertise_own(self, cfg: BrokerConfig) -> None:
        """Serving clients: advertised.listeners when set, else the listeners as bound (a
        wildcard host becomes the host the broker reaches its controller at)."""
        if cfg.advertised_listeners:
            chosen = advertise.Advertised(cfg.advertised_listeners, "advertised.listeners")
        else:
            own = []
            for server in self.client_listeners:
                assert server.address is not None
                host = server.listener.host
                if host in ("", "0.0.0.0", "::"):
                    host = cfg.voters[0].host if cfg.voters else server.address[0]
                own.append(ConfigListener(server.listener.name, host, server.address[1]))
            chosen = advertise.Advertised(tuple(own), "its own listeners")
        previous, self.advertised = self.advertised, chosen
        if previous is None or previous.listeners != chosen.listeners:
            self.event("advertise", f"{advertise.show(chosen.listeners)} (from {chosen.source})")

    async def _register(self) -> bool:
        started = _now_ms()
        backoff = 100
        while not self.stopped.is_set():
            try:
                await self._learn_advertised()
                resp = await self._hb.call(ApiKey.BROKER_REGISTRATION, self._registration)
            except ChannelError as exc:
                resp, err = None, str(exc)
                if not self._controller_unreachable:
                    self._controller_unreachable = True
                    log.warning(
                        "broker %d: cannot reach the controller to register (retrying): %s",
                        self.node_id,
                        exc,
                        extra={"event": "controller-unreachable", "broker": self.node_id},
                    )
            if resp is not None and resp.error_code == 0:
                self.lifecycle.epoch = resp.broker_epoch
                self.event("registered", f"broker epoch {resp.broker_epoch}, LogDirs {len(self.dirs.online)}")
                return True
            if resp is not None:
                err = f"error {resp.error_code}"
                log.warning(
                    "broker %d: registration refused with error %d (retrying)",
                    self.node_id,
                    resp.error_code,
                    extra={"event": "registration-refused", "broker": self.node_id},
                )
            if _now_ms() - started > self.config.registration_timeout_ms:
                self.stop(f"registration failed for {self.config.registration_timeout_ms} ms: {err}")
                return False
            await self._sleep(backoff)
            backoff = min(backoff * 2, self.config.session_timeout_ms)
        return False

    async def _lifecycle_loop(self) -> None:
        while not self._leader_known.is_set():  # a dynamic quorum: wait for the first answer
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._leader_known.wait(), 0.1)
            if self.stopped.is_set():
                return
        if not await self._register():
            return
        lc = self.lifecycle
        while not self.stopped.is_set():
            self._check_failure_timeout()
            if self.stopped.is_set():
                return
            mv = self.image.features.get(fv.METADATA_VERSION, 1)
            req = lc.heartbeat(self.follower.published_offset, self.queue.queued, fv.supports_cordoned_dirs(mv))

            def build(version: int, req: BrokerHeartbeatRequest = req) -> BrokerHeartbeatRequest:
                # A controller without v2 cannot be at 4.3-IV0; drop the field rather than fail.
                if version < 2 and req.cordoned_log_dirs is not None:
                    return dataclasses.replace(req, cordoned_log_dirs=None)
                return req

            try:
                resp = await self._hb.call(ApiKey.BROKER_HEARTBEAT, build)
            except ChannelError as exc:
                if not self._controller_unreachable:
                    # Once per outage: the retries every few hundred ms stay at DEBUG.
                    self._controller_unreachable = True
                    log.warning(
                        "broker %d: cannot reach the controller (retrying): %s",
                        self.node_id,
                        exc,
                        extra={"event": "controller-unreachable", "broker": self.node_id},
                    )
                else:
                    log.debug("broker %d: heartbeat: %s", self.node_id, exc)
                await self._sleep(min(200, self.config.heartbeat_interval_ms), self._wake_heartbeat)
                continue
            if self._controller_unreachable:
                self._controller_unreachable = False
                log.info(
                    "broker %d: the controller answers again",
                    self.node_id,
                    extra={"event": "controller-reachable", "broker": self.node_id},
                )
            if resp.error_code == 0:
                newly = [d for d in req.offline_log_dirs if d not in lc.reported]
                before = lc.state
                for effect in lc.on_heartbeat(req, resp):
                    if effect is Effect.STOP:
                        self.stop(f"controlled shutdown complete ({self._shutdown_reason})")
                        return
                if lc.state is not before:
                    self.event("state", f"{before.value} -> {lc.state.value}")
                if newly:
                    self.event("reported", f"OfflineLogDirs {[uuid_to_base64url(d) for d in newly]} acknowledged")
            elif resp.error_code != ErrorCode.STALE_BROKER_EPOCH or lc.state is not State.STARTING:
                log.debug("broker %d: heartbeat error %d", self.node_id, resp.error_code)
            fast = lc.state in (State.STARTING, State.RECOVERY)
            if lc.state is State.PENDING_CONTROLLED_SHUTDOWN and resp.error_code == 0:
                # Kafka's broker asks again after 50 ms on the first answer that does not yet
                # let it go, then at the normal interval.
                fast = not self._shutdown_answered
                self._shutdown_answered = True
            interval = min(50, self.config.heartbeat_interval_ms) if fast else self.config.heartbeat_interval_ms
            await self._sleep(interval, self._wake_heartbeat)

    def _check_failure_timeout(self) -> None:
        overdue = set(self.lifecycle.overdue_failures(_now_ms()))
        if not overdue:
            return
        me = self.node_id
        leads = [p for p in self.image.partitions_of(me) if p.leader == me and p.dir_of(me) in overdue]
        if leads:
            self.lifecycle.feed(Input.DIR_FAILURE_TIMEOUT)
            self.stop(
                f"could not report failed log dirs {[uuid_to_base64url(d) for d in overdue]} within "
                f"log.dir.failure.timeout.ms={self.config.failure_timeout_ms} "
                f"while leading {len(leads)} partitions there"
            )

    # ------------------------------------------------------------------ directories

    async def _probe_loop(self) -> None:
        while not self.stopped.is_set():
            await self._sleep(self.config.probe_interval_ms)
            for dir_id in self.dirs.probe():
                self._dir_failed(dir_id, self.dirs.dirs[dir_id].reason)

    def _dir_failed(self, dir_id: uuid.UUID, reason: str) -> None:
        d = self.dirs.dirs.get(dir_id)
        if d is None:
            return
        self.dirs.fail(dir_id, reason)
        if not self.lifecycle.dir_failed(dir_id, _now_ms()):
            return
        self.event("dir-failed", f"{d.path} ({uuid_to_base64url(dir_id)}): {reason}")
        if dir_id == self.metadata_dir_id:
            self.lifecycle.feed(Input.METADATA_DIR_FAILED)
            self.stop(f"the metadata log directory {d.path} failed")
            return
        if not self.dirs.online:
            self.stop("every log directory failed")
            return
        for tp, (src, dst, acked) in list(self._moves.items()):
            if dir_id == dst:
                # The future replica is lost: cancel locally, or tell the controller it stays put.
                del self._moves[tp]
                self.queue.cancel(tp)
                if acked:
                    self.queue.add(Assignment(tp[0], tp[1], src, _now_ms(), "revert move"))
            elif dir_id == src:
                del self._moves[tp]
                self.queue.add(Assignment(tp[0], tp[1], src, _now_ms(), "revert move (source failed)"))
        for key, a in list(self.queue.ready.items()):
            if a.directory == dir_id and "revert" not in a.reason:
                self.queue.cancel(key)
        self._wake_heartbeat.set()
        self._wake_assign.set()

    def fail_directory(self, which: str, reason: str = "failed by command") -> str:
        """Fail a log directory named by path or base64url id. Returns what happened.

        Raises:
            KraftJbodError: no such directory.
        """
        d = self._find_dir(which)
        if not d.online:
            return f"{d.path} is already offline"
        self._dir_failed(d.dir_id, reason)
        return f"{d.path} failed"

    def cordon(self, which: str, on: bool) -> str:
        """Cordon (or uncordon) one log dir, as a change of cordoned.log.dirs does in Kafka:
        the next heartbeat goes at once and carries the new set.

        Raises:
            KraftJbodError: no such directory.
        """
        d = self._find_dir(which)
        now = set(self.lifecycle.configured_cordoned)
        (now.add if on else now.discard)(d.dir_id)
        self.lifecycle.set_cordoned(now)
        self._wake_heartbeat.set()
        verb = "cordoned" if on else "uncordoned"
        self.event("cordon", f"{d.path} {verb}; cordoned: {sorted(uuid_to_base64url(x) for x in now)}")
        return f"{verb} {d.path}"

    def _find_dir(self, which: str) -> dm.LogDir:
        d = self.dirs.by_path(which)
        if d is None:
            with contextlib.suppress(ValueError):
                d = self.dirs.dirs.get(uuid_from_base64url(which))
        if d is None:
            raise KraftJbodError(f"no log directory {which!r} on broker {self.node_id}")
        return d

    def move_replica(self, topic: str, partition: int, target: str) -> str:
        """Start an intra-broker move with the KIP's future-replica protocol.

        Raises:
            KraftJbodError: unknown topic/partition/directory, or nothing to move.
        """
        tid = self.image.topic_id(topic)
        if tid is None:
            raise KraftJbodError(f"unknown topic {topic!r}")
        tp = (tid, partition)
        src = self.dirs.location(tp)
        if src is None:
            raise KraftJbodError(f"{topic}-{partition} has no online replica on broker {self.node_id}")
        dst = self._find_dir(target)
        if not dst.online or dst is src:
            raise KraftJbodError(f"cannot move {topic}-{partition} to {dst.path}")
        if tp in self._moves:
            raise KraftJbodError(f"{topic}-{partition} is already moving")
        if not self.dirs.start_future(src, dst, tp, topic):
            self._dir_failed(dst.dir_id, dst.reason)
            raise KraftJbodError(f"cannot create the future replica in {dst.path}")
        self._moves[tp] = (src.dir_id, dst.dir_id, False)
        self.queue.add(Assignment(tid, partition, dst.dir_id, _now_ms(), "move"))
        self._wake_assign.set()
        self.event("move", f"{topic}-{partition}: future replica in {dst.path}, assignment queued")
        return f"moving {topic}-{partition} from {src.path} to {dst.path}"

    # ------------------------------------------------------------------ assignments

    def _valid(self, a: Assignment) -> bool:
        p = self.image.partitions.get(a.key)
        return p is not None and self.node_id in p.replicas

    async def _assign_loop(self) -> None:
        while not self.stopped.is_set():
            me = self.image.brokers.get(self.node_id)
            due = self.queue.send_at()
            if me is None or me.epoch != self.lifecycle.epoch or due is None:
                await self._sleep(200, self._wake_assign)
                continue
            wait = due - _now_ms()
            if wait > 0:
                await self._sleep(wait, self._wake_assign)
                continue
            for key, a in list(self.queue.ready.items()):
                if not self._valid(a):
                    self.queue.cancel(key)
            req = self.queue.build(self.node_id, me.epoch)
            if req is None:
                continue
            n = sum(len(t.partitions) for d in req.directories for t in d.topics)
            try:
                resp = await self._assign.call(ApiKey.ASSIGN_REPLICAS_TO_DIRS, req)
            except ChannelError as exc:
                self.queue.on_failure(_now_ms())
                log.debug("broker %d: assignments: %s", self.node_id, exc)
                continue
            done = self.queue.on_response(resp, _now_ms())
            self.event(
                "assigned",
                f"AssignReplicasToDirs: {len(done)}/{n} accepted, {self.queue.queued} still queued",
            )
            for a in done:
                self._assignment_done(a)
            self._wake_heartbeat.set()

    def _assignment_done(self, a: Assignment) -> None:
        move = self._moves.get(a.key)
        if move is None or a.reason != "move":
            return
        src_id, dst_id, _ = move
        src, dst = self.dirs.dirs[src_id], self.dirs.dirs[dst_id]
        name = self.image.topic_names.get(a.topic_id, uuid_to_base64url(a.topic_id))
        self._moves[a.key] = (src_id, dst_id, True)
        if not (src.online and dst.online):
            return
        if self.dirs.promote(src, dst, a.key, name):
            del self._moves[a.key]
            self.event("move", f"{name}-{a.partition}: future replica promoted in {dst.path}")
        else:
            self._dir_failed(dst_id, dst.reason)

    # ------------------------------------------------------------------ client listener

    def supported_features(self) -> dict[str, tuple[int, int]]:
        return releases.supported_features(self.config.release)

    def static_properties(self) -> list[tuple[str, str]]:
        return list(self.config.properties)

    async def controller_versions(self) -> dict[int, tuple[int, int]]:
        """What the controller serves (the forwarded admin APIs are offered at these)."""
        return await self._forward.learn_versions()

    async def forward(self, raw: bytes, client_host: str) -> bytes:
        """Send a client's request (header and body) to the controller in an Envelope, as
        Kafka's forwarding manager does; return the inner response (header and body).

        Raises:
            KraftJbodError: the controller cannot be reached or answered an Envelope error.
        """
        try:
            address = ipaddress.ip_address(client_host).packed
        except ValueError:
            address = bytes(4)
        principal = bytearray(b"\x00\x00")  # DefaultPrincipalData version 0
        DefaultPrincipalData(type="User", name="ANONYMOUS", token_authenticated=False).write(principal, 0)
        req = EnvelopeRequest(request_data=raw, request_principal=bytes(principal), client_host_address=address)
        resp = await self._forward.call(ApiKey.ENVELOPE, req)
        if resp.error_code != 0 or resp.response_data is None:
            raise KraftJbodError(f"the controller answered the Envelope with error {resp.error_code}")
        return bytes(resp.response_data)

    def log_dir_infos(self) -> list[client_api.DirInfo]:
        """Every log.dirs entry as DescribeLogDirs reports it (ReplicaManager.describeLogDirs)."""
        out = []
        cordoned = self.lifecycle.configured_cordoned
        for p in self.config.layout.log_dirs:
            d = self.dirs.by_path(p)
            path = str(Path(p).absolute())
            if d is None or not d.online:
                out.append(client_api.DirInfo(path, online=False))
                continue
            try:
                st = os.statvfs(d.path)
            except OSError:
                out.append(client_api.DirInfo(path, online=False))
                continue
            info = client_api.DirInfo(
                path,
                online=True,
                total_bytes=st.f_blocks * st.f_frsize,
                usable_bytes=st.f_bavail * st.f_frsize,
                cordoned=d.dir_id in cordoned,
            )
            for tp, future in [(tp, False) for tp in d.replicas] + [(tp, True) for tp in d.futures]:
                name = self.image.topic_names.get(tp[0])
                if name is None:
                    continue
                size = 0 if future else _log_bytes(d.path / dm.replica_folder(name, tp[1]))
                info.replicas.append((name, tp[1], size, future))
            out.append(info)
        return out

    def alter_replica_log_dirs(self, body: Any) -> AlterReplicaLogDirsResponse:
        """AlterReplicaLogDirs, per partition as Kafka's ReplicaManager.alterReplicaLogDirs."""
        results: dict[str, list[AlterReplicaLogDirPartitionResult]] = {}
        for entry in body.dirs:
            for t in entry.topics:
                for part in t.partitions:
                    code = self._alter_one(entry.path, t.name, part)
                    results.setdefault(t.name, []).append(AlterReplicaLogDirPartitionResult(part, code))
                    if code == 0:
                        self.event("alter-log-dir", f"{t.name}-{part} -> {entry.path}")
        return AlterReplicaLogDirsResponse(
            results=[AlterReplicaLogDirTopicResult(topic_name=n, partitions=ps) for n, ps in results.items()]
        )

    def _alter_one(self, path: str, topic: str, partition: int) -> int:
        if len(f"{topic}-{partition}.{'0' * 32}-future") > 255:
            return ErrorCode.INVALID_TOPIC_EXCEPTION
        target = next(
            (
                d
                for p in self.config.layout.log_dirs
                if str(Path(p).absolute()) == path
                for d in [self.dirs.by_path(p)]
                if d is not None
            ),
            None,
        )
        if target is None:
            configured = any(str(Path(p).absolute()) == path for p in self.config.layout.log_dirs)
            # A configured dir unreadable since start-up is offline; anything else is not ours.
            return ErrorCode.KAFKA_STORAGE_ERROR if configured else ErrorCode.LOG_DIR_NOT_FOUND
        if not target.online:
            return ErrorCode.KAFKA_STORAGE_ERROR
        if target.dir_id in self.lifecycle.configured_cordoned:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT
        tid = self.image.topic_id(topic)
        view = None if tid is None else self.image.partitions.get((tid, partition))
        if tid is None or view is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION  # Kafka: not in its metadata cache
        if self.node_id not in view.replicas:
            return ErrorCode.REPLICA_NOT_AVAILABLE  # Kafka: NOT_LEADER_OR_FOLLOWER, answered as this
        tp = (tid, partition)
        placed = view.dir_of(self.node_id)
        if placed in self.dirs.dirs and not self.dirs.dirs[placed].online:
            return ErrorCode.KAFKA_STORAGE_ERROR  # the replica lives in an offline dir
        moving = self._moves.get(tp)
        if moving is not None:
            if moving[1] == target.dir_id:
                return ErrorCode.NONE
            self._cancel_move(tp, topic)
        src = self.dirs.location(tp)
        if src is None:
            return ErrorCode.REPLICA_NOT_AVAILABLE
        if src is target:
            return ErrorCode.NONE
        if self.dirs.any_offline:
            return ErrorCode.KAFKA_STORAGE_ERROR  # Kafka creates no future log while a dir is offline
        try:
            self.move_replica(topic, partition, str(target.path))
        except KraftJbodError:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    def _cancel_move(self, tp: dm.TopicPartition, topic: str) -> None:
        """Drop a move in flight (its future replica), as Kafka does when the destination changes."""
        src, dst, acked = self._moves.pop(tp)
        self.queue.cancel(tp)
        d = self.dirs.dirs[dst]
        d.futures.discard(tp)
        for folder in d.path.glob(f"{dm.replica_folder(topic, tp[1])}.*-future"):
            shutil.rmtree(folder, ignore_errors=True)
        if acked:
            self.queue.add(Assignment(tp[0], tp[1], src, _now_ms(), "revert move"))
            self._wake_assign.set()

    # ------------------------------------------------------------------ status and control

    def status(self) -> dict[str, Any]:
        return {
            "broker_id": self.node_id,
            "state": self.lifecycle.state.value,
            "epoch": self.lifecycle.epoch,
            "metadata_offset": self.follower.published_offset,
            "snapshots_loaded": self.follower.snapshots_loaded,
            "QueuedReplicaToDirAssignments": self.queue.queued,
            "dirs": {
                str(d.path): {"id": uuid_to_base64url(d.dir_id), "online": d.online, "replicas": len(d.replicas)}
                for d in self.dirs.dirs.values()
            },
            "cordoned": sorted(str(self.dirs.dirs[d].path) for d in self.lifecycle.configured_cordoned),
            "offline_reported": sorted(uuid_to_base64url(d) for d in self.lifecycle.reported),
            "exit_reason": self.exit_reason,
        }

    async def _serve_control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                words = line.decode("utf-8", "replace").split()
                answer: dict[str, Any]
                try:
                    answer = {"ok": True, "result": self.control(words)}
                except KraftJbodError as exc:
                    answer = {"ok": False, "error": str(exc)}
                writer.write((json.dumps(answer) + "\n").encode())
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            writer.close()

    def control(self, words: list[str]) -> Any:
        """One control command (what the endpoint runs).

        Raises:
            KraftJbodError: an unknown command or bad arguments.
        """
        if words[:1] == ["status"] and len(words) == 1:
            return self.status()
        if words[:1] == ["fail-dir"] and len(words) == 2:
            return self.fail_directory(words[1])
        if words[:1] == ["move"] and len(words) == 4 and words[2].isdigit():
            return self.move_replica(words[1], int(words[2]), words[3])
        if words[:1] in (["cordon"], ["uncordon"]) and len(words) == 2:
            return self.cordon(words[1], words[0] == "cordon")
        if words[:1] == ["shutdown"] and len(words) == 1:
            return self.begin_shutdown("shutdown by command")
        raise KraftJbodError(
            f"unknown command {' '.join(words)!r}: try status, fail-dir DIR, move TOPIC PARTITION DIR, "
            "cordon DIR, uncordon DIR, shutdown"
        )


def _log_bytes(folder: Path) -> int:
    """A replica's size as Kafka's log.size counts it: the bytes of its segment files."""
    try:
        return sum(f.stat().st_size for f in folder.glob("*.log"))
    except OSError:
        return 0


def dir_paths(broker: FakeBroker) -> dict[uuid.UUID, Path]:
    return {d.dir_id: d.path for d in broker.dirs.dirs.values()}


__all__ = ["BrokerEvent", "Channel", "ChannelError", "FakeBroker", "StorageError", "UnsupportedApi", "dir_paths"]
