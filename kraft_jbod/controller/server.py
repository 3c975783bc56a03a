"""The asyncio shell of the controller: sockets around :class:`ServerConnection`, one writer.

Strategy:

* Each TCP connection is an ``asyncio.Protocol`` feeding a sans-I/O
  :class:`~kraft_jbod.connection.ServerConnection`. Partial frames just sit in its buffer,
  so a slow or half-sending peer costs only its own memory and never blocks the loop.
* A connection has at most one request in the controller at a time (Kafka mutes a
  channel until its response is sent), which keeps responses in request order. While
  one is in flight and more than ``_PAUSE_BUFFERED`` bytes wait, reading is paused.
* ApiVersions is answered here (KIP-511 fallback included). Everything else goes to the
  pure :class:`ControllerState`, serialised by one queue:

  Rule 1: ``handle()`` runs only when no append is in flight, so it always sees every
  record that was appended (and applied) before it. (Rule 6 is the one exception: a
  heartbeat whose answer is sent only when it writes nothing.)
  Rule 2: records returned by ``handle()`` or ``tick()`` are appended as ONE batch and
  fsync'd (in a worker thread, so the loop keeps serving I/O), then ``apply()``'d at their
  offsets, and only then is the response written. A failed append closes that
  connection without a response; the state never sees records the log does not hold.
  Rule 3: a request that produces no records is handled and answered inline when the
  queue is idle: the common heartbeat never waits for a thread hop.
  Rule 4: a request whose work grows with its size (``StateMachine.split``: an
  AssignReplicasToDirs or AlterPartition naming more than ``MAX_PARTITIONS_PER_SLICE``
  partitions) is
  handled one slice at a time, each slice a whole turn of Rules 1-2 (handled, committed,
  applied); then the request goes to the back of the queue, so what arrived meanwhile
  (heartbeats) waits for one slice, not for the whole request. The answer merges the
  slices' responses and is sent after the last one.
  Rule 5: while a snapshot is written (in a thread: seconds at 10^6 partitions) the
  worker waits for it and the image must hold still, but it is also complete: every
  appended record is applied. Requests are handled then as if the worker were idle; those
  that write nothing (heartbeats of steady brokers) are answered at once, and the first
  that writes keeps its outcome at the head of the queue until the snapshot is done.
  Rule 6: while an append is in flight (the write and fsync of one batch or slice:
  hundreds of milliseconds on a slow disk), a BrokerHeartbeat is handled against the image
  as last applied, and answered when it writes nothing: it is ordered before the batch
  being written, which nobody has been answered about yet. A heartbeat that would write
  (fence, unfence, shutdown, offline directories) is dropped and handled again in its turn
  after the append; its only effect so far, the session's contact time, is set again then.
  Rule 7 (group commit): when the worker takes a request that writes and more requests
  wait behind it (they arrived while the previous append was on disk), it takes them
  too: each is handled and its records applied at their offsets in turn, so each sees
  the ones before it as Rule 1 wants, then all the records are appended as one write
  with ONE fsync, and only then is each answered, in order. A request that writes
  nothing joins as well (its answer may rest on the records before it). The group stops
  at a tick, at a request taken in slices, and at ``_GROUP_MAX_RECORDS`` records (and
  there is none on a quorum of several controllers, whose commit is the raft log's). The
  applied state runs ahead of the log only while that append is in flight; Rule 6 is off
  then (nothing is answered from it) and a failed append is fatal: the state holds
  records the log does not, so the controller stops instead of answering from it. A
  request alone keeps Rule 2 as written (a failed append closes only its connection).
  Rule 8 (the steady heartbeat's short path): a BrokerHeartbeat that arrives alone (the
  service's Rule 5) while the worker is idle with nothing queued but a tick (a heartbeat
  answered before a waiting tick is one that arrived in time for it, as in Rule 5), or
  while an append is in flight (where Rule 6 would answer it at once, from the same
  image), when no snapshot is written and this controller is a single voter with the
  built-in state machine, is decoded, judged by ``apis/brokers.steady_heartbeat`` (the
  function the ordinary handler asks first: one definition of steady) and, when steady,
  answered with bytes encoded once per (version, IsCaughtUp) by the ordinary encoder: no
  event object, no queue, no Outcome. Anything else it leaves to the ordinary path
  (already decoded, nothing done). The story tells refusals only, and a steady answer is
  none, so it is not told; the response count and the gate's metrics are kept.

* A peer's bytes never crash the server: a protocol error or a bug while handling one
  request closes only that connection, with a log line naming the peer, api key and
  version.
* On close: listeners stop, connections close, the in-flight append finishes, the log is
  fsync'd and closed.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import gc
import logging
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_jbod import codec
from kraft_jbod.clock import SYSTEM_CLOCK, Clock
from kraft_jbod.connection import (
    RemoteProtocolError,
    RequestReceived,
)
from kraft_jbod.controller import api_versions, features, replication, voters
from kraft_jbod.controller import snapshot as snapshots
from kraft_jbod.controller.apis import brokers, configs
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.context import ControllerContext, Sliced
from kraft_jbod.controller.fetch_service import FetchService
from kraft_jbod.controller.limits import MAX_RECORDS_PER_BATCH
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.seams import (
    Extensions,
    Outcome,
    QuorumSeatView,
    RecordAndVersion,
    Sink,
    StateFactory,
    StateMachine,
    Tap,
)
from kraft_jbod.controller.service import API_VERSIONS_RANGE, Connection, Service
from kraft_jbod.controller.snapshot_driver import SnapshotDriver
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.controller.story import Story
from kraft_jbod.errors import ConfigError, EncodeError, KraftJbodError, ProtocolError, StorageError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.api_versions_response import (
    ApiVersionsResponse,
)
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.storage.meta import ensure_metadata_dir, read_meta_properties
from kraft_jbod.wire.primitives import uuid_from_base64url, uuid_to_base64url

log = logging.getLogger(__name__)

META_PROPERTIES = "meta.properties"
# From this many partitions a full GC collection over the image is a pause worth avoiding.
_FREEZE_PARTITIONS = 50_000
_FREEZE_AFTER_RECORDS = 1_000  # a commit this large may have grown the image: freeze again
# Rule 7: a group stops taking requests once it holds this many records (one data batch).
_GROUP_MAX_RECORDS = MAX_RECORDS_PER_BATCH
_BROKER_HEARTBEAT = int(ApiKey.BROKER_HEARTBEAT)
_BE_ii = struct.Struct(">ii")


def _wall_ms() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------- meta.properties


def _apply_all(machine: StateMachine, base: int, records: Sequence[RecordAndVersion]) -> None:
    """Apply ``records`` at ``base``, ``base + 1``, ...: in one call where the state machine
    takes a whole batch (``ControllerState.apply_batch``), else one record at a time."""
    apply_batch = getattr(machine, "apply_batch", None)
    if apply_batch is not None:
        apply_batch(base, records)
        return
    for i, (record, version) in enumerate(records):
        machine.apply(base + i, record, version)


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form (base64url of a random UUID, 22 characters)."""
    return uuid_to_base64url(uuid.uuid4())


def check_cluster_id(text: str) -> str:
    """Validate a cluster id as ``kafka-storage format -t`` does (a Kafka UUID string).

    Raises:
        ConfigError: not 22 base64url characters.
    """
    try:
        uuid_from_base64url(text)
    except ValueError as exc:
        raise ConfigError(f"cluster id {text!r} is not a valid Kafka UUID: {exc}") from None
    return text


def ensure_meta_properties(directory: Path, node_id: int, cluster_id: str | None) -> str:
    """Read ``meta.properties`` of the metadata dir, or write it (as ``kafka-storage format``).

    Returns the cluster id in force. One writer of the file: :mod:`kraft_jbod.storage.meta`.

    Raises:
        StorageError: the file is unreadable, or holds another node id or cluster id.
    """
    if directory.exists() and not directory.is_dir():
        raise StorageError(f"metadata.log.dir {directory} is a file, not a directory")
    path = directory / META_PROPERTIES
    if path.is_dir():
        raise StorageError(f"{path} is a directory, not a file")
    return ensure_metadata_dir(directory, node_id, cluster_id)


# --------------------------------------------------------------------------- the server


@dataclass(slots=True)
class _Work:
    proto: Connection | None  # None for a tick
    event: RequestReceived | None
    outcome: Outcome | None  # already computed inline
    # Rule 4: the request's slices once it has been split, the next slice's body (None:
    # not drawn yet) and the responses so far.
    sliced: Sliced | None = None
    split_checked: bool = False
    next_body: Any = None
    responses: list[Any] = field(default_factory=list)


class ControllerServer:
    """The controller: ``async with ControllerServer(config) as server: server.addresses``.

    ``state_factory`` builds the state machine (default: ``ControllerState``); tests may
    pass their own. ``tick_interval_ms`` is how often ``tick()`` runs for session fencing.
    """

    def __init__(
        self,
        config: ControllerConfig,
        *,
        cluster_id: str | None = None,
        metadata_version: int | None = None,
        kraft_version: int = 0,
        fsync: bool = True,
        tick_interval_ms: int | None = None,
        state_factory: StateFactory | None = None,
        clock: Clock | None = None,
        extensions: Extensions | None = None,
        tap: Tap | None = None,
        quorum: QuorumSeatView | None = None,
    ) -> None:
        self.config = config
        # Several voters (controller/quorum_seat.py): the metadata log is the raft log, this
        # controller is active only while its voter leads.
        self.quorum = quorum
        # capture/tap.py FrameTap: every frame exchanged goes to a pcapng and/or UDP mirror.
        self.tap = tap
        # Integration-testing hooks (controller/extensions.py); the clock drives session
        # timeouts and the tick loop, so tests advance time instead of sleeping.
        self.extensions = extensions
        self.clock: Clock = clock or (extensions.clock if extensions is not None else SYSTEM_CLOCK)
        self._requested_cluster_id = check_cluster_id(cluster_id) if cluster_id is not None else None
        self.cluster_id = ""
        self.metadata_version = features.DEFAULT_LEVEL if metadata_version is None else metadata_version
        # kraft.version of a NEW log (controller/voters.py chooses it); an existing log keeps its own.
        self.kraft_version = kraft_version
        self._fsync = fsync
        self._tick_ms = tick_interval_ms or max(10, min(250, config.session_timeout_ms // 10))
        self._state_factory = state_factory
        self._state: StateMachine | None = None
        self.log: MetadataLog | None = None
        self._servers: list[asyncio.Server] = []
        self.addresses: list[tuple[str, int]] = []
        # (listener name, host, port) of every socket bound, controller and client listeners.
        self.bound: list[tuple[str, str, int]] = []
        self._queue: collections.deque[_Work] = collections.deque()
        self._busy = False
        self._answering = False
        self._appending = False  # Rule 6
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closing = False
        self.fatal: BaseException | None = None
        self._stopped = asyncio.Event()
        self.supported: dict[int, tuple[int, int]] = {}
        self.stats = collections.Counter[str]()
        self._last_noop_ms: int | None = None
        # Rule 8: the built-in state machine's context (None: no short path), and the
        # steady answers' encoded bytes after the size and correlation id.
        self._steady_ctx: ControllerContext | None = None
        self._steady_tails: dict[tuple[int, bool], bytes] = {}
        # Snapshot driving (controller/snapshot_driver.py) and metadata replication to
        # observers (controller/fetch_service.py), each beside the one writer.
        self.snapshots = SnapshotDriver(
            config.metadata_partition_dir,
            snapshots.SnapshotPolicy(config.snapshot_max_bytes, config.snapshot_interval_ms),
            clock=self.clock,
            fsync=fsync,
            stats=self.stats,
        )
        self.fetches = FetchService(
            node_id=config.node_id,
            metadata_dir=config.metadata_partition_dir,
            stats=self.stats,
            cluster_id=lambda: self.cluster_id,
            latest_snapshot=lambda: self.snapshots.latest,
        )
        # Logs what committed records and refused requests mean (controller/story.py).
        self.story = Story()
        self.service = Service(
            config,
            extensions=extensions,
            tap=tap,
            stats=self.stats,
            on_response=lambda peer, ev, body: self.story.responded(peer, ev.api_key, ev.api_version, body),
        )

    @property
    def state(self) -> Any:
        """The state machine (``Any`` to readers: tests and views read its tables)."""
        return self._state

    @property
    def snapshot_policy(self) -> snapshots.SnapshotPolicy:
        return self.snapshots.policy

    @property
    def fetch_waiter(self) -> replication.FetchWaiter:
        return self.fetches.waiter

    @property
    def machine(self) -> StateMachine:
        assert self._state is not None, "the server has not started"
        return self._state

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> ControllerServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Recover the log, replay it into the state, bootstrap an empty log, listen.

        Controller listeners are bound first (not yet accepting), so a port in use fails
        before anything is written to disk.

        Raises:
            StorageError: the metadata dir or log cannot be used.
            ConfigError: a listener cannot bind (the message names it and why).
        """
        cfg = self.config
        self.service.start()
        if self._state_factory is None:
            self._state_factory = ControllerState
        controller_servers = len(self._servers)
        try:
            for listener in cfg.controller_listeners:
                ctx = None if self.extensions is None else self.extensions.ssl_context(listener.name)
                bound = await self.open_listener(
                    listener.name, listener.bind_host, listener.port, self, ctx, start_serving=False
                )
                self.addresses.extend(bound)
            self.cluster_id = ensure_meta_properties(cfg.metadata_log_dir, cfg.node_id, self._requested_cluster_id)
            loop = asyncio.get_running_loop()
            self.log = await loop.run_in_executor(
                None, lambda: MetadataLog.open(cfg.metadata_partition_dir, fsync=self._fsync)
            )
        except BaseException:
            for srv in self._servers:
                srv.close()
            self.service.close()
            raise
        try:
            self._state = machine = self._state_factory(
                cluster_id=self.cluster_id,
                node_id=cfg.node_id,
                profile=cfg.semantics,
                session_timeout_ms=cfg.session_timeout_ms,
                heartbeat_interval_ms=cfg.heartbeat_interval_ms,
                default_replication_factor=cfg.default_replication_factor,
                num_partitions=cfg.num_partitions,
                unclean_check_interval_ms=cfg.unclean_check_interval_ms,
            )
            # Restart from the newest snapshot plus the log after it (controller/snapshot.py).
            quorum = voters.QuorumState()
            done = snapshots.restart(
                machine,
                self.log,
                cfg.metadata_partition_dir,
                on_record=lambda record, version: self.story.committed(((record, version),), tell=False),
                on_quorum=quorum.from_snapshot,
            )
            restored, replayed = done.snapshot, done.replayed
            # A large image lives as long as the controller: out of the cyclic collector's
            # sight (see _freeze_heap). The load made no cyclic garbage
            # (snapshot.collector_paused), so there is nothing to collect first.
            self._freeze_heap(collect_young=False)
            # A new leader epoch per start, as a raft leader gets on election; at kraft.version 1
            # its control batch also carries the voter set when the log has none or ours changed.
            if self.quorum is not None:
                # The raft voter writes the epochs' control batches and the first leader the
                # bootstrap records (quorum_seat.py): nothing is written here. The seat also
                # drives the snapshots (every controller its own, Kafka's retention).
                self.quorum.open(self, machine)
            else:
                self._start_single_voter(machine, quorum, restored, replayed)
            self.snapshots.restored(restored)
        except BaseException:
            for s in self._servers:
                s.close()
            self.service.close()
            self.log.close()
            raise
        try:
            self.fetches.log = self.log
            self.supported = self._served_versions()
            for srv in self._servers[controller_servers:]:
                await srv.start_serving()
            # DescribeCluster(controllers) answers with the addresses actually bound.
            machine.controller_endpoints = list(self.addresses)
            machine.leader_epoch = self.log.leader_epoch  # DescribeQuorum reports it
            ctx = getattr(machine, "ctx", None)
            if ctx is not None and self.quorum is None:  # a seat sets its own voters
                ctx.quorum_node_ids = tuple(sorted(cfg.quorum_voters))  # must register before upgrades
            if self.extensions is not None:
                await self.extensions.start(self)
            # DescribeConfigs of this node lists what it bound, client listeners included (a
            # fake broker without advertised.listeners advertises those). Set before the
            # worker starts, so no request sees it unset.
            machine.static_configs = configs.static_listener_configs(self.bound, cfg.controller_listener_names)
            if type(machine) is ControllerState and self.quorum is None:
                self._steady_ctx = machine.ctx  # Rule 8
        except BaseException:
            for s in self._servers:
                s.close()
            self.service.close()
            self.log.close()
            raise
        self._tasks.append(asyncio.create_task(self._worker(), name="controller-worker"))
        self._tasks.append(asyncio.create_task(self._ticker(), name="controller-ticker"))
        if self.quorum is not None:
            self._tasks.append(asyncio.create_task(self.quorum.follow(), name="controller-quorum"))

    def _start_single_voter(
        self, machine: StateMachine, quorum: voters.QuorumState, restored: snapshots.SnapshotId | None, replayed: int
    ) -> None:
        """The single voter's start: a new leader epoch, its control batch, the bootstrap
        records of a new log."""
        assert self.log is not None
        cfg = self.config
        # A new leader epoch per start, as a raft leader gets on election; at kraft.version 1
        # its control batch also carries the voter set when the log has none or ours changed.
        self.log.leader_epoch = max(1, self.log.last_epoch + 1)
        self.kraft_version = self._quorum_state(quorum, restored)
        # Our VotersRecord entry only matters at kraft.version 1 (it may resolve a host name).
        local = (
            self._local_voter()
            if quorum.kraft_version >= 1
            else voters.LocalVoter(cfg.node_id, voters.NO_DIRECTORY, ())
        )
        control, current = voters.start_of_epoch_records(quorum, local)
        self.log.append_control(control, timestamp_ms=_wall_ms())
        machine.kraft_version, machine.voters = quorum.kraft_version, current
        if replayed == 0 and restored is None:
            boot = list(machine.bootstrap_records(self.metadata_version))
            base = self.log.append(boot, timestamp_ms=_wall_ms())
            for i, (record, version) in enumerate(boot):
                machine.apply(base + i, record, version)
            log.info(
                "bootstrapped metadata log at metadata.version %s, kraft.version %d",
                features.name_of(self.metadata_version),
                quorum.kraft_version,
            )
        else:
            log.info(
                "replayed %d records from %s (end offset %d, epoch %d)",
                replayed,
                cfg.metadata_partition_dir,
                self.log.end_offset,
                self.log.leader_epoch,
            )

    def _quorum_state(self, quorum: voters.QuorumState, restored: snapshots.SnapshotId | None) -> int:
        """Feed the log's control records after the snapshot into ``quorum``; a new log
        takes the kraft.version asked for. Returns the kraft.version in force."""
        assert self.log is not None
        for _, ctype, msg in self.log.control_records(0 if restored is None else restored.end_offset):
            quorum.feed(ctype, msg)
        if restored is None and not quorum.seen:
            quorum.kraft_version = self.kraft_version
        elif quorum.kraft_version != self.kraft_version:
            log.info(
                "metadata log is at kraft.version %d; the level asked for a new log is not used", quorum.kraft_version
            )
        return quorum.kraft_version

    def _local_voter(self) -> voters.LocalVoter:
        """This controller's VotersRecord entry: node id, metadata dir id, controller listeners."""
        cfg = self.config
        meta = read_meta_properties(cfg.metadata_log_dir)
        directory = voters.NO_DIRECTORY if meta is None or meta.directory_id is None else meta.directory_id
        hosts = {li.name: li.host for li in cfg.controller_listeners}
        return voters.LocalVoter(
            cfg.node_id, directory, voters.listener_endpoints(cfg.controller_listener_names, self.bound, hosts)
        )

    async def open_listener(
        self,
        name: str,
        host: str | None,
        port: int,
        sink: Sink,
        ssl_context: ssl.SSLContext | None,
        *,
        start_serving: bool = True,
    ) -> list[tuple[str, int]]:
        """Listen on ``host:port`` with this server's connection class and read loop,
        handing requests to ``sink``; returns every address bound.

        Raises:
            ConfigError: the address cannot be bound (in use, not local, no permission).
        """
        loop = asyncio.get_running_loop()
        controller = sink is self

        steady = self._steady_heartbeat if controller else None

        def factory() -> Connection:
            return Connection(self.service, name, sink, controller=controller, steady=steady)

        servers = []
        try:
            if not host:
                # Every interface: IPv4 and IPv6 on ONE port, so the port announced is the port
                # both families reach (asyncio alone picks a free port per family for port 0).
                for sock in wildcard_sockets(port):
                    servers.append(
                        await loop.create_server(factory, sock=sock, ssl=ssl_context, start_serving=start_serving)
                    )
            else:
                servers.append(
                    await loop.create_server(
                        factory, host=host, port=port, ssl=ssl_context, start_serving=start_serving
                    )
                )
        except OSError as exc:
            for srv in servers:
                srv.close()
            where = f"[{host}]:{port}" if host and ":" in host else f"{host or '*'}:{port}"
            raise ConfigError(f"listener {name}: cannot listen on {where}: {exc.strerror or exc}") from None
        except BaseException:
            for srv in servers:
                srv.close()
            raise
        self._servers.extend(servers)
        out = []
        for srv in servers:
            for sock in srv.sockets:
                sockname = sock.getsockname()
                out.append((str(sockname[0]), int(sockname[1])))
        self.bound.extend((name, h, p) for h, p in out)
        return out

    # ------------------------------------------------------------------ the controller as a sink

    def served(self) -> Mapping[int, tuple[int, int]]:
        return self.supported

    def _served_versions(self) -> dict[int, tuple[int, int]]:
        out: dict[int, tuple[int, int]] = {}
        for key, (lo, hi) in dict(self.machine.handled_api_versions()).items():
            cls = codec.request_class(key)
            vlo, vhi = cls.VALID_VERSIONS
            lo, hi = max(lo, vlo), min(hi, vhi)
            if lo <= hi and key != ApiKey.API_VERSIONS:
                out[key] = (lo, hi)
        # Observers replicate the log through Fetch (>= v13: topic ids) as a KRaft broker does.
        out[ApiKey.FETCH] = replication.FETCH_VERSIONS
        out[ApiKey.FETCH_SNAPSHOT] = replication.FETCH_SNAPSHOT_VERSIONS
        if self.quorum is not None:
            out.update(self.quorum.served())
        return out

    async def close(self) -> None:
        """Stop listening, drop connections, finish the in-flight append, fsync and close the log."""
        if self._closing:
            await self._stopped.wait()
            return
        self._closing = True
        if self.quorum is not None:
            await self.quorum.close()
        if self.extensions is not None:
            await self.extensions.close()
        self.fetches.close()
        for s in self._servers:
            s.close()
        self.service.close()
        # Let the worker finish what it holds (an append in a thread cannot be cancelled).
        self._wake.set()
        for task in self._tasks:
            if task.get_name() == "controller-ticker":
                task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        for s in self._servers:
            await s.wait_closed()
        if self.log is not None:
            self.log.close()
        self._stopped.set()

    async def wait_stopped(self) -> None:
        await self._stopped.wait()

    # ------------------------------------------------------------------ ApiVersions

    def api_versions_response(self, version: int, request: ApiVersionsRequest) -> ApiVersionsResponse:
        """The controller listener's ApiVersions answer (controller/api_versions.py)."""
        finalized: dict[str, int] | None = None
        level = self.machine.metadata_version
        if level > 0:
            finalized = dict(self.machine.finalized_features, **{features.METADATA_VERSION: level})
            finalized[features.KRAFT_VERSION] = self.machine.kraft_version
        assert self.log is not None
        return api_versions.build(
            version,
            request,
            self.supported,
            api_versions_range=API_VERSIONS_RANGE,
            cluster_id=self.state.cluster_id,
            node_id=self.state.node_id,
            supported_features=features.SUPPORTED_FEATURES,
            finalized_features=finalized,
            finalized_epoch=self.log.end_offset - 1,
        )

    def dispatch(self, conn: Connection, ev: RequestReceived) -> None:
        """Hand a request on: Fetch to the replication path, the rest to the state machine."""
        if self.quorum is not None and self.quorum.dispatch(conn, ev):
            return  # a voter's request, a redirected observer, or NOT_CONTROLLER on a standby
        if ev.api_key in (ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT):
            self.serve_fetch(conn, ev)
        else:
            self.submit(conn, ev)

    # ------------------------------------------------------------------ Rule 8

    def _steady_heartbeat(self, conn: Connection, payload: bytes, version: int, corr: int) -> bool:
        """Rule 8: answer a steady BrokerHeartbeat from its bytes; False (nothing done) when
        the worker is not idle, True once the request is answered or handed on."""
        ctx = self._steady_ctx
        if ctx is None or self.fatal is not None or self._closing or self.snapshots.writing:
            return False
        if not self._appending and (self._busy or (self._queue and not self._ticks_only())):
            return False
        if not ctx.sessions.activated:
            return False
        try:
            header, body, end = conn.conn.decode_request(payload, _BROKER_HEARTBEAT, version, corr)
        except RemoteProtocolError as exc:
            conn.protocol_error(exc)
            return True
        caught_up = brokers.steady_heartbeat(ctx, version, body, self.clock.monotonic_ms())
        if caught_up is None:
            conn.handle_decoded(RequestReceived(header, body, payload, payload[end:] if end < len(payload) else b""))
            return True
        tail = self._steady_tails.get((version, caught_up))
        if tail is None:
            # Encoded once by the ordinary encoder: the bytes are the ordinary path's.
            event = RequestReceived(header, body, payload)
            tail = self._steady_tails[(version, caught_up)] = conn.conn.send_response(
                event, brokers.steady_response(caught_up)
            )[8:]
        self.stats["steady_heartbeats"] += 1
        if self._appending:
            self.stats["heartbeats_during_append"] += 1  # as Rule 6 counts the ones it answers
        if conn.gate is not None:
            conn.gate.answered_unseen(_BROKER_HEARTBEAT, body.broker_id, brokers.steady_response(caught_up))
        conn.answered(_BE_ii.pack(len(tail) + 4, corr) + tail)
        return True

    def _ticks_only(self) -> bool:
        """Rule 8: whether the queue holds ticks alone (the ticker queues one at a time)."""
        return all(work.proto is None for work in self._queue)

    # ------------------------------------------------------------------ the one writer

    def submit(self, proto: Connection, event: RequestReceived) -> None:
        """Hand a request to the state machine (Rules 1-3 of the module docstring)."""
        if self.fatal is not None or self._closing:
            proto.close()
            return
        if self.snapshots.writing:
            self._queue.append(_Work(proto, event, None))
            self._answer_reads()  # Rule 5
            return
        if self._appending and event.api_key == ApiKey.BROKER_HEARTBEAT:
            self._queue.append(_Work(proto, event, None))
            self._answer_heartbeats()  # Rule 6
            if self._queue:
                self._wake.set()
            return
        if not self._busy and not self._queue:
            work = _Work(proto, event, None)
            if self._split(work):
                self._queue.append(work)  # Rule 4: the worker takes it one slice at a time
                self._wake.set()
                return
            outcome = self._call_handle(proto, event)
            if outcome is None:
                return
            if not outcome.records:
                proto.respond(event, outcome.response)
                return
            self._busy = True  # Rule 1: no handle() until these records are applied
            self._queue.append(_Work(proto, event, outcome))
        else:
            self._queue.append(_Work(proto, event, None))
        self._wake.set()

    def _answer_reads(self) -> None:
        """Rule 5: while a snapshot is written, handle the queued requests in order and answer
        those that write nothing. The first that writes keeps its outcome in the queue (it is
        committed once the snapshot is done) and everything after it waits, as do sliced
        requests; ticks wait too (a heartbeat answered before a waiting tick is one that
        arrived in time for it anyway)."""
        if self._answering:
            return  # a response sent below let its connection submit the next request
        self._answering = True
        kept: collections.deque[_Work] = collections.deque()
        blocked = False
        try:
            while self._queue:
                work = self._queue.popleft()
                proto, event = work.proto, work.event
                if blocked or proto is None or event is None:
                    kept.append(work)
                    continue
                if work.outcome is not None or self._split(work):
                    blocked = True
                    kept.append(work)
                    continue
                if proto.closed:
                    continue
                outcome = self._call_handle(proto, event)
                if outcome is None:
                    continue
                if outcome.records:
                    work.outcome = outcome
                    blocked = True
                    kept.append(work)
                    continue
                proto.respond(event, outcome.response)  # may submit more: this loop takes it
        finally:
            kept.extend(self._queue)
            self._queue = kept
            self._answering = False

    def _answer_heartbeats(self) -> None:
        """Rule 6: while an append is in flight, answer the queued BrokerHeartbeats that write
        nothing, from the image as last applied; the rest of the queue keeps its order, and a
        heartbeat that would write is handled again, in turn, after the append."""
        if self._answering:
            return
        self._answering = True
        kept: collections.deque[_Work] = collections.deque()
        try:
            while self._queue:
                work = self._queue.popleft()
                proto, event = work.proto, work.event
                if (
                    proto is None
                    or event is None
                    or work.outcome is not None
                    or event.api_key != ApiKey.BROKER_HEARTBEAT
                ):
                    kept.append(work)  # the worker's, in order (records decided are committed)
                    continue
                if proto.closed:
                    continue
                outcome = self._call_handle(proto, event)
                if outcome is None:
                    continue
                if outcome.records:
                    # Computed without the records being appended: dropped, handled again
                    # after them. Only the session's contact time was touched, as it will be again.
                    kept.append(work)
                    continue
                self.stats["heartbeats_during_append"] += 1
                proto.respond(event, outcome.response)  # may submit more: this loop takes it
        finally:
            kept.extend(self._queue)
            self._queue = kept
            self._answering = False

    def _freeze_heap(self, *, collect_young: bool = True) -> None:
        """Move what lives now out of the cyclic collector's sight when the image is large:
        at start (or every full collection walks the image: seconds at 10^6 partitions,
        with nothing answered) and after each slice of a large request (whose records
        replace a partition object per entry). Reference counting still frees what is
        dropped later; only cycles among frozen objects would outlive them, and young
        cycles are collected first. Small images (every test's) are left alone: freezing
        is process-wide."""
        if self._state is not None and self._state.image.partition_total >= _FREEZE_PARTITIONS:
            if collect_young:
                gc.collect(1)
            gc.freeze()

    def _split(self, work: _Work) -> bool:
        """Rule 4: whether ``work`` is a request to take in slices (then ``work.sliced`` holds
        them). Asks the state machine once per request; one without ``split`` never slices."""
        if not work.split_checked:
            work.split_checked = True
            event = work.event
            if event is not None:
                try:
                    work.sliced = self.machine.split(event.api_key, event.api_version, event.body)
                except Exception:
                    # Not sliced: the ordinary handle() judges the request (and logs any bug).
                    log.exception("bug while slicing %s", codec.api_name(event.api_key))
        return work.sliced is not None

    async def _run_slice(self, work: _Work) -> None:
        """Rule 4: handle and commit the next slice of ``work``; requeue it behind what
        waits, or answer with the merged responses after the last slice (or an error)."""
        proto, event, sliced = work.proto, work.event, work.sliced
        assert proto is not None and event is not None and sliced is not None
        body = work.next_body if work.next_body is not None else next(sliced.bodies)
        work.next_body = None
        outcome = self._call_handle(proto, event, body)
        if outcome is None:
            return  # refused or a bug: the connection is closed
        if outcome.records:
            try:
                await self._commit(list(outcome.records), body)
            except (StorageError, EncodeError, OSError) as exc:
                log.error(
                    "closing %s without a response: appending the records of a slice of %s v%d failed: %s",
                    proto.peer,
                    codec.api_name(event.api_key),
                    event.api_version,
                    exc,
                )
                proto.close()
                return
            except Exception:
                proto.close()
                return
        work.responses.append(outcome.response)
        self._freeze_heap()
        failed = getattr(outcome.response, "error_code", 0) != 0
        if not failed and not proto.closed:
            work.next_body = next(sliced.bodies, None)
        if work.next_body is not None:
            self.stats["request_slices"] += 1
            # Let the loop read what arrived while this slice ran (handle and apply hold the
            # loop), so those requests queue before the next slice, not behind it.
            await asyncio.sleep(0)
            self._queue.append(work)
            return
        # After an error the rest is never cut: the merged answer is that error.
        proto.respond(event, sliced.merge(work.responses))

    def _call_handle(
        self, proto: Connection, event: RequestReceived, body: Any = None, next_offset: int | None = None
    ) -> Outcome | None:
        assert self.log is not None
        if self.quorum is not None and not self.quorum.active:
            self.quorum.not_controller(proto, event)  # leadership moved while it waited
            return None
        machine = self._state  # not self.machine: asked for every request
        assert machine is not None, "the server has not started"
        try:
            return machine.handle(
                event.api_key,
                event.api_version,
                event.body if body is None else body,
                now_ms=self.clock.monotonic_ms(),
                next_offset=self.log.end_offset if next_offset is None else next_offset,
                principal=None,
            )
        except ProtocolError as exc:
            log.warning(
                "closing %s: %s v%d refused: %s", proto.peer, codec.api_name(event.api_key), event.api_version, exc
            )
        except Exception:
            self.stats["handler_bugs"] += 1
            log.exception(
                "closing %s: bug while handling %s v%d (correlation id %d)",
                proto.peer,
                codec.api_name(event.api_key),
                event.api_version,
                event.correlation_id,
            )
        proto.close()
        return None

    async def _commit(self, records: list[RecordAndVersion], cause: Any = None) -> None:
        """Rule 2: append as one batch and fsync off the loop, then apply at their offsets."""
        assert self.log is not None
        if self.quorum is not None:
            await self.quorum.commit(records, cause)
            return
        log_ = self.log
        ts = _wall_ms()
        appending = asyncio.get_running_loop().run_in_executor(None, lambda: log_.append(records, timestamp_ms=ts))
        self._appending = True
        try:
            self._answer_heartbeats()  # Rule 6
            base = await appending
        finally:
            self._appending = False
        self.stats["batches"] += 1
        self.stats["records"] += len(records)
        self.fetches.notify()
        try:
            _apply_all(self.machine, base, records)
        except Exception as exc:
            # The log holds records the state cannot take: replay would fail the same way.
            self.fatal = exc
            log.critical("state rejected committed records at offset %d; stopping", base, exc_info=True)
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.close()))
            raise
        self.story.committed(records, cause)
        if len(records) >= _FREEZE_AFTER_RECORDS:
            self._freeze_heap()  # a large batch added to the image: keep it out of full collections
        await self._maybe_snapshot(ts)

    def _group_waits(self, records: int) -> bool:
        """Rule 7: whether the request at hand (writing ``records``) should take the next
        queued request into its append. Never on a quorum: there the records go through the
        raft log (the seat's commit), not straight to this log."""
        if self.quorum is not None:
            return False
        return records < _GROUP_MAX_RECORDS and bool(self._queue) and self._joins_group(self._queue[0])

    def _joins_group(self, work: _Work) -> bool:
        # Ticks, requests taken in slices and outcomes computed earlier (against the state
        # without the group's records) wait for their own turn.
        return work.proto is not None and work.event is not None and work.outcome is None and not self._split(work)

    async def _commit_group(self, first: _Work, outcome: Outcome) -> None:
        """Rule 7: ``first`` (handled, records not applied) and the requests queued behind it,
        each handled and applied in turn, appended with one fsync, then answered in order."""
        assert self.log is not None
        log_ = self.log
        base = log_.end_offset
        records: list[RecordAndVersion] = []
        members: list[tuple[_Work, Outcome, int]] = []  # the request, its outcome, its record count
        work: _Work | None = first
        while work is not None:
            members.append((work, outcome, len(outcome.records)))
            if outcome.records:
                if not self._apply_ahead(base + len(records), outcome.records):
                    self._close_members(members)
                    return
                records.extend(outcome.records)
            work = None
            while len(records) < _GROUP_MAX_RECORDS and self._queue and self._joins_group(self._queue[0]):
                candidate = self._queue.popleft()
                assert candidate.proto is not None and candidate.event is not None
                if candidate.proto.closed:
                    continue
                handled = self._call_handle(candidate.proto, candidate.event, next_offset=base + len(records))
                if handled is not None:
                    work, outcome = candidate, handled
                    break
        ts = _wall_ms()
        try:
            got = await asyncio.get_running_loop().run_in_executor(None, lambda: log_.append(records, timestamp_ms=ts))
            if got != base:
                raise StorageError(f"the group's records landed at offset {got}, not {base}")
        except Exception as exc:
            self._group_failed(exc, base, members)
            return
        self.stats["batches"] += 1
        self.stats["records"] += len(records)
        self.stats["group_commits"] += 1
        self.stats["group_requests"] += len(members)
        self.fetches.notify()
        at = 0
        for member, _, count in members:
            if count:
                assert member.event is not None
                self.story.committed(records[at : at + count], member.event.body)
            at += count
        if len(records) >= _FREEZE_AFTER_RECORDS:
            self._freeze_heap()
        try:
            await self._maybe_snapshot(ts)
        except Exception as exc:  # as a lone request's: its records stay, its connection closes
            log.error("closing %d grouped requests without a response: snapshot failed: %s", len(members), exc)
            self._close_members(members)
            return
        for member, out, _ in members:
            assert member.proto is not None and member.event is not None
            member.proto.respond(member.event, out.response)

    def _apply_ahead(self, offset: int, records: Sequence[RecordAndVersion]) -> bool:
        """Rule 7: apply a group member's records before they are on disk, so the next
        member is handled against them. False (and the controller stopping) when the state
        rejects them: it may hold part of them now."""
        try:
            _apply_all(self.machine, offset, records)
        except Exception as exc:
            self.fatal = exc
            log.critical("state rejected records at offset %d; stopping", offset, exc_info=True)
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.close()))
            return False
        return True

    @staticmethod
    def _close_members(members: list[tuple[_Work, Outcome, int]]) -> None:
        for member, _, _ in members:
            if member.proto is not None:
                member.proto.close()

    def _group_failed(self, exc: BaseException, base: int, members: list[tuple[_Work, Outcome, int]]) -> None:
        """Rule 7: the state already holds the group's records and the log does not: stop."""
        self.fatal = exc
        log.critical(
            "appending %d grouped requests at offset %d failed, the state is ahead of the log; stopping: %s",
            len(members),
            base,
            exc,
        )
        self._close_members(members)
        asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(self.close()))

    async def _maybe_snapshot(self, ts: int) -> None:
        """Snapshot the image when the policy says so (controller/snapshot_driver.py). The
        worker is the only writer of the state, so the image holds still while it is written."""
        assert self.log is not None
        await self.snapshots.after_commit(self.log, self.machine, ts, self._answer_reads)

    def serve_fetch(self, proto: Connection, event: RequestReceived) -> None:
        """Fetch/FetchSnapshot go to the replication side (controller/fetch_service.py)."""
        self.fetches.serve(proto, event)

    async def _worker(self) -> None:
        while True:
            if not self._queue:
                self._busy = False
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            self._busy = True
            work = self._queue.popleft()
            proto, event, outcome = work.proto, work.event, work.outcome
            if self.fatal is not None:
                if proto is not None:
                    proto.close()
                continue
            if proto is not None and event is not None:
                if outcome is None:
                    if proto.closed:
                        continue
                    if self._split(work):
                        await self._run_slice(work)
                        continue
                    outcome = self._call_handle(proto, event)
                    if outcome is None:
                        continue
                if outcome.records and self._group_waits(len(outcome.records)):
                    await self._commit_group(work, outcome)  # Rule 7
                    continue
                if outcome.records:
                    try:
                        await self._commit(list(outcome.records), event.body)
                    except (StorageError, EncodeError, OSError) as exc:
                        log.error(
                            "closing %s without a response: appending the records of %s v%d failed: %s",
                            proto.peer,
                            codec.api_name(event.api_key),
                            event.api_version,
                            exc,
                        )
                        proto.close()
                        continue
                    except Exception:
                        proto.close()
                        continue
                proto.respond(event, outcome.response)
            else:
                await self._run_tick()

    async def _run_tick(self) -> None:
        assert self.log is not None
        if self.quorum is not None and not self.quorum.active:
            return  # a standby fences nobody and writes nothing
        try:
            now = self.clock.monotonic_ms()
            if self.quorum is not None and features.METADATA_VERSION not in self.machine.image.features:
                records = list(self.machine.bootstrap_records(self.metadata_version))  # a new quorum
            else:
                records = list(self.machine.tick(now_ms=now, next_offset=self.log.end_offset))
        except Exception:
            log.exception("bug in tick()")
            return
        records += self._noop_due(now)
        if records:
            try:
                await self._commit(records)
            except (KraftJbodError, OSError) as exc:
                log.error("appending tick records failed: %s", exc)
            except Exception:
                pass

    def _noop_due(self, now: int) -> list[Any]:
        """A NoOpRecord every ``metadata.max.idle.interval.ms`` (0: never), as Kafka's controller's
        periodic writeNoOpRecord task: brokers see the log advance while nothing else happens.
        Only from 3.3-IV1, the first metadata.version that has the record."""
        interval = self.config.idle_interval_ms
        if interval <= 0 or self.state.metadata_version < features.MV_3_3_IV1:
            return []
        if self._last_noop_ms is None:
            self._last_noop_ms = now
        if now - self._last_noop_ms < interval:
            return []
        self._last_noop_ms = now
        return [(NoOpRecord(), 0)]

    async def _ticker(self) -> None:
        # Ticks go through the worker's queue like requests, so Rule 1 holds for them too.
        while not self._closing:
            await self.clock.sleep(self._tick_ms / 1000)
            if not any(w.proto is None for w in self._queue):
                self._queue.append(_Work(None, None, None))
                self._wake.set()


def wildcard_sockets(port: int, attempts: int = 20) -> list[socket.socket]:
    """Listening sockets for every interface on one port: IPv6 ``::`` (v6-only) and IPv4
    ``0.0.0.0``; port 0 picks a port free in both families. IPv4 alone where IPv6 is off.

    Raises:
        OSError: the port (or, for port 0, every port tried) cannot be bound in both families.
    """
    last: OSError | None = None
    for _ in range(attempts if port == 0 else 1):
        socks: list[socket.socket] = []
        try:
            chosen = port
            if socket.has_ipv6:
                try:
                    s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
                except OSError:
                    s6 = None
                if s6 is not None:
                    socks.append(s6)
                    s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                    s6.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    try:
                        s6.bind(("::", chosen))
                    except OSError as exc:
                        if exc.errno != errno.EADDRNOTAVAIL:
                            raise
                        socks.remove(s6)
                        s6.close()
                    else:
                        chosen = int(s6.getsockname()[1])
            s4 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s4)
            s4.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s4.bind(("0.0.0.0", chosen))
            for s in socks:
                s.listen(128)
                s.setblocking(False)
            return socks
        except OSError as exc:
            last = exc
            for s in socks:
                s.close()
    assert last is not None
    raise last
