"""A controller's seat in a quorum: its raft voter, the committed log, active or standby.

A :class:`QuorumSeat` joins one :class:`~kraft_jbod.controller.server.ControllerServer` to
a :class:`~.voter.RaftVoter` that shares the controller's listener (one port per
controller, as Kafka's: the voters' Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch come
in beside the brokers' requests). The raft log is the metadata log: every record the
controller writes is a batch appended through the voter, and the controller's own
``MetadataLog`` holds the committed prefix of it, batch for batch and byte for byte (the
copy brokers fetch from and a restart replays).

Rules:

Rule 1: only committed batches reach the state machine. :meth:`follow` copies every batch
below the high watermark into the controller's log and applies its records, on every
controller alike; the leader's one writer appends a batch through the voter and waits until
it has been applied this way (a majority holds it) before answering.
Rule 2: a controller is *active* while its voter leads and it has applied everything up to
and including its own epoch's first batch (the LeaderChange its election wrote): so it
serves with the whole state of every earlier leader, as Kafka's controller waits for its
epoch's first commit. Brokers' sessions start afresh then (Kafka's activate()).
Rule 4: every controller registers with the active one (ControllerRegistration, api 70:
its id, a fresh incarnation id per start, its controller listener and supported features)
once the committed metadata.version has controller registrations (3.7-IV0), and again
whenever the committed image does not hold its current incarnation; only to a leader that
has committed a batch of its own epoch (Kafka's controller is active only from then on,
and answers NOT_CONTROLLER, logging an error, before).
Rule 3: on a controller that is not active every controller API answers NOT_CONTROLLER
(DescribeQuorum, a raft API in Kafka, NOT_LEADER_OR_FOLLOWER in its partition),
observers' Fetch answers NOT_LEADER_OR_FOLLOWER naming the leader and its endpoint, and
nothing is written; a write whose leader lost its epoch before the commit is not answered
(the connection closes, the broker retries with the new leader).
Rule 5: UpdateRaftVoter (api 82) is the raft layer's, answered by every voter as Kafka's
raft client does (the voter's ``voter_updates``), not by the controller.
Rule 6: DescribeQuorum (api 55), a raft API in Kafka, is answered by the seat: on the active
controller with every voter's fetch state as its raft leader recorded it (log end offset,
last fetch and last caught-up times, wall clock) and the brokers as observers; elsewhere
NOT_LEADER_OR_FOLLOWER in the partition.
Rule 8 (kraft.version 1, ``initial_voters`` given: the ``--initial-controllers`` set, or
an empty one for a controller formatted with ``--no-initial-controllers``): the voter set in
force is the newest VotersRecord of the log (the raft node's), not ``voters``, which then
only names the controllers this one knows an address of (the bootstrap servers; a voter
learns the others from VotersRecords and AddRaftVoter). AddRaftVoter (80) and
RemoveRaftVoter (81) are the raft layer's as in Kafka: the raft leader answers them
(``voter.py``), active controller or not, and every other controller NOT_LEADER_OR_FOLLOWER.
A controller outside the voter set (never added, or removed) is an observer: it follows
the log and applies it like a standby but never becomes active; a removed leader resigns
once its removal commits (node.py) and goes on as an observer, as Kafka's. Until a new
controller has registered (ControllerRegistration) its Fetch is served like a broker's, from
the committed log; from then on (and for every voter of the set) by the raft node, whose
leader must see it reach its log end before adding it.
Rule 7: every controller snapshots its committed state when the snapshot policy says so
(the follow loop waits meanwhile, so the image holds still) and tells its raft log; the log
below a snapshot goes only by Kafka's retention rule (``retention.py``), in the raft log and
the committed copy alike. A follower the leader answers with a SnapshotId downloads that
snapshot with FetchSnapshot (``snapshot_download.py`` checks every answer), reads it back
whole, then in one step of the loop reloads the controller's image from it, starts its
committed copy and raft log at its end, and fetches on. A restarted controller whose raft
log starts past its committed copy loads its own snapshot there the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft_jbod import codec
from kraft_jbod.connection import NEED_DATA, ClientConnection, RequestReceived, ResponseReceived
from kraft_jbod.controller import features as fv
from kraft_jbod.controller import replication, routes
from kraft_jbod.controller import snapshot as snapshots
from kraft_jbod.controller.apis.quorum import Observer, describe_quorum, describe_quorum_elsewhere
from kraft_jbod.controller.image import MetadataImage
from kraft_jbod.controller.log import RecordAndVersion, encode_data_batches
from kraft_jbod.controller.raft import messages as core
from kraft_jbod.controller.raft import wire
from kraft_jbod.controller.raft.node import Timing
from kraft_jbod.controller.raft.replica_log import LogError
from kraft_jbod.controller.raft.retention import SnapshotFacts, retention_cut
from kraft_jbod.controller.raft.snapshot_download import SnapshotDownload, SnapshotFetchError
from kraft_jbod.controller.raft.voter import SERVED, RaftVoter
from kraft_jbod.controller.raft.voter_set import VoterSet
from kraft_jbod.errors import DecodeError, KraftJbodError, StorageError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.controller_registration_request import ControllerRegistrationRequest, Feature, Listener
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.voters_record import VotersRecord
from kraft_jbod.wire.records import read_record_batch

if TYPE_CHECKING:
    from kraft_jbod.controller.seams import StateMachine
    from kraft_jbod.controller.server import ControllerServer
    from kraft_jbod.controller.service import Connection

log = logging.getLogger(__name__)

_FOLLOW_MS = 5  # how often the committed tail is looked at
_REGISTER_MS = 200  # how often an unregistered controller tries ControllerRegistration again
_FETCHING_DIR = "fetching-snapshot"  # where a leader's snapshot is downloaded, beside the log
_RAFT_KEYS = (ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH)
_NO_DIRECTORY = uuid.UUID(int=0)
#: Directory (under metadata.log.dir) of the voter's own files: its log and quorum-state.
RAFT_DIR = "quorum"
#: In RAFT_DIR: the voter set a new log was formatted with (``--initial-controllers``, or none
#: for ``--no-initial-controllers``): a CRC-32 then the VotersRecord (version 0). Its presence
#: makes the controller's seat kraft.version 1 (Rule 8) on every start.
BOOTSTRAP_VOTERS = "bootstrap-voters"


def write_bootstrap_voters(metadata_log_dir: Path, record: VotersRecord, *, fsync: bool = True) -> Path:
    """Write the bootstrap voter set of a new log (written whole, then renamed into place)."""
    directory = metadata_log_dir / RAFT_DIR
    directory.mkdir(parents=True, exist_ok=True)
    payload = record.encode(0)
    path = directory / BOOTSTRAP_VOTERS
    part = path.with_suffix(".tmp")
    with open(part, "wb") as out:
        out.write(zlib.crc32(payload).to_bytes(4, "big") + payload)
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    os.replace(part, path)
    return path


def read_bootstrap_voters(metadata_log_dir: Path) -> VotersRecord | None:
    """The bootstrap voter set written at format time; None: a static or single-voter log.

    Raises:
        StorageError: the file is there but torn or does not decode.
    """
    path = metadata_log_dir / RAFT_DIR / BOOTSTRAP_VOTERS
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None  # not formatted with one (a file in the way is the server's to report)
    except OSError as exc:
        raise StorageError(f"{path}: {exc.strerror or exc}") from None
    if len(data) < 6 or zlib.crc32(data[4:]) != int.from_bytes(data[:4], "big"):
        raise StorageError(f"{path}: torn or corrupt (CRC mismatch)")
    try:
        return VotersRecord.decode(data[4:], 0)
    except (DecodeError, ValueError) as exc:
        raise StorageError(f"{path}: does not decode: {exc}") from None


class QuorumSeat:
    """One controller's voter (see the module docstring). ``voters``: id -> (host, port) of
    every voter's controller listener; this controller's port may be 0 until it binds."""

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, tuple[str, int]],
        *,
        timing: Timing | None = None,
        seed: int | None = None,
        fsync: bool = True,
        directory_id: uuid.UUID | None = None,
        initial_voters: VoterSet | None = None,
        auto_join: bool = False,
    ) -> None:
        self.node_id = node_id
        self.voters = dict(voters)
        # kraft.version 1 (Rule 8) when initial_voters is given.
        self.directory_id = directory_id
        self.initial_voters = initial_voters
        self.auto_join = auto_join
        self._changes: set[asyncio.Task[None]] = set()  # AddRaftVoter / RemoveRaftVoter in flight
        self.timing = timing
        self.seed = seed
        self.fsync = fsync
        self.voter: RaftVoter | None = None
        self.active = False
        self.active_epoch = -1
        self.activations = 0
        self._server: ControllerServer | None = None
        self._machine: StateMachine | None = None
        self._applied = asyncio.Event()
        self._closing = False
        self.incarnation_id = uuid.uuid4()
        self.registrations_sent = 0
        self.committed_epoch = -1  # the leader epoch of the last batch applied
        # Snapshots (Rule 7): the download under way, what was loaded, when retention last ran.
        self._download: asyncio.Task[None] | None = None
        self.snapshots_loaded: list[tuple[int, int]] = []
        self.snapshot_load_ms: list[int] = []
        self._applied_since_snapshot = False
        self._retention_checked = 0.0
        # Wall clock minus the raft core's monotonic clock, for the times DescribeQuorum reports.
        self._wall_offset_ms = int(time.time() * 1000) - _mono_ms()

    # ------------------------------------------------------------------ lifecycle

    def open(self, server: ControllerServer, machine: StateMachine) -> None:
        """Attach to a starting controller (its listener is bound, its log replayed)."""
        self._server, self._machine = server, machine
        ctx = getattr(machine, "ctx", None)
        if ctx is not None:
            # Every voter must have registered before a feature changes (Kafka's check).
            ctx.quorum_node_ids = tuple(sorted(self.voters if self.initial_voters is None else self.initial_voters.ids))
        if self.dynamic:
            machine.kraft_version = 1  # ApiVersions finalizes it (Rule 8)
        if self.voters.get(self.node_id, ("", 0))[1] == 0 and server.addresses:
            host, port = server.addresses[0]
            self.voters[self.node_id] = (self.voters.get(self.node_id, (host, 0))[0] or host, port)
        self.voter = RaftVoter(
            self.node_id,
            {self.node_id: self.voters[self.node_id]},
            server.config.metadata_log_dir / RAFT_DIR,
            cluster_id=server.cluster_id,
            timing=self.timing,
            listener=server.config.controller_listener_names[0],
            seed=self.seed,
            fsync=self.fsync,
            directory_id=self.directory_id,
            initial_voters=self.initial_voters,
            auto_join=self.auto_join,
        )
        self.voter.attach()
        self._open_snapshots(server)
        if all(port > 0 for _, port in self.voters.values()):
            self.voter.connect(self.voters)

    @property
    def dynamic(self) -> bool:
        """kraft.version 1: the voter set lives in the log (Rule 8)."""
        return self.initial_voters is not None

    def connect(self, voters: Mapping[int, tuple[str, int]]) -> None:
        """Learn every voter's address (a quorum whose ports were chosen at bind) and start."""
        assert self.voter is not None, "open() first"
        self.voters.update(voters)
        if self.voter.node is None:
            self.voter.connect(self.voters)

    def voter_ids(self) -> frozenset[int]:
        """The voter set in force, as this controller's raft node knows it."""
        node = None if self.voter is None else self.voter.node
        if node is None:
            return frozenset(self.voters if self.initial_voters is None else self.initial_voters.ids)
        return node.voters

    def _endpoint(self, node_id: int) -> tuple[str, int] | None:
        if node_id in self.voters:
            return self.voters[node_id]
        learned = None if self.voter is None else self.voter.endpoints.get(node_id)
        return None if learned is None else (learned[1], learned[2])

    async def close(self) -> None:
        """Graceful: a leader resigns first (its voter's EndQuorumEpoch)."""
        self._closing = True
        self.active = False
        self._stop_download()
        if self.voter is not None:
            await self.voter.close()

    async def kill(self) -> None:
        """As ``kill -9``: the voter goes silent at once, nothing resigned."""
        self._closing = True
        self.active = False
        self._stop_download()
        if self.voter is not None:
            await self.voter.kill()

    def _stop_download(self) -> None:
        if self._download is not None and not self._download.done():
            self._download.cancel()
        for change in list(self._changes):
            change.cancel()  # a voter change in flight is not answered by a stopped controller

    @property
    def directory(self) -> Path:
        assert self.voter is not None
        return self.voter.directory

    # ------------------------------------------------------------------ serving

    def served(self) -> dict[int, tuple[int, int]]:
        return {k: v for k, v in SERVED.items() if k in _RAFT_KEYS}

    def dispatch(self, conn: Connection, ev: RequestReceived) -> bool:
        """Take the requests that are the quorum's business; False: the controller's."""
        voter = self.voter
        # UpdateRaftVoter too: Kafka's raft client answers it, not its controller (Rule 5).
        raft_only = ev.api_key in _RAFT_KEYS or ev.api_key == ApiKey.UPDATE_RAFT_VOTER
        if raft_only or (ev.api_key == ApiKey.FETCH and self._from_voter(ev)):
            answer = None if voter is None else voter.answer(ev)
            if answer is None:
                conn.close()
            else:
                conn.respond(ev, answer)
            return True
        if (
            ev.api_key == ApiKey.FETCH_SNAPSHOT
            and voter is not None
            and voter.node is not None
            and voter.node.is_leader
        ):
            # A raft API: the raft leader serves its snapshots before its controller is
            # active (a voter it named a snapshot to may be what its first commit waits for).
            voter.node.snapshot_served(getattr(ev.body, "replica_id", -1), _mono_ms())
            try:
                answer = self._serve_snapshot(ev, voter.node.epoch)
            except OSError as exc:  # a snapshot file unreadable: this fetcher retries elsewhere
                log.warning("controller %d: serving FetchSnapshot failed: %s", self.node_id, exc)
                conn.close()
                return True
            conn.respond(ev, answer)
            return True
        if ev.api_key in (ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT):
            if self._leads():
                return False  # the controller's fetch service answers from the committed log
            if ev.api_key == ApiKey.FETCH:
                conn.respond(ev, self._redirect_fetch(ev))
            else:
                conn.respond(ev, routes.error_response(ev.api_key, ev.body, ErrorCode.NOT_LEADER_OR_FOLLOWER))
            return True
        if ev.api_key in (ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER) and self.dynamic and voter is not None:
            # Rule 8: the raft leader's business, answered once the change commits.
            task = asyncio.get_running_loop().create_task(self._voter_change(conn, ev, voter))
            self._changes.add(task)
            task.add_done_callback(self._changes.discard)
            return True
        if ev.api_key == ApiKey.DESCRIBE_QUORUM and self.active:
            answer = self._describe_quorum(ev)
            if answer is not None:
                conn.respond(ev, answer)
                return True
        if not self.active:
            if ev.api_key == ApiKey.DESCRIBE_QUORUM:
                # A raft API in Kafka: a voter that does not lead answers it itself.
                conn.respond(ev, describe_quorum_elsewhere(ev.body))
                return True
            self.not_controller(conn, ev)
            return True
        return False

    async def _voter_change(self, conn: Connection, ev: RequestReceived, voter: RaftVoter) -> None:
        try:
            answer = await voter.answer_voter_change(ev.body)
        except (KraftJbodError, OSError) as exc:
            log.warning("controller %d: %s failed: %s", self.node_id, codec.api_name(ev.api_key), exc)
            conn.close()
            return
        conn.respond(ev, answer)

    def _serve_snapshot(self, ev: RequestReceived, epoch: int) -> Any:
        server = self._server
        assert server is not None
        host, port = self.voters[self.node_id]
        return replication.handle_fetch_snapshot(
            ev.body,
            ev.api_version,
            cluster_id=server.cluster_id,
            leader=replication.Leader(self.node_id, epoch, host, port),
            directory=server.config.metadata_partition_dir,
        )

    def _describe_quorum(self, ev: RequestReceived) -> Any:
        """Rule 6: the active controller describes every voter as its raft leader saw it
        fetch, and the brokers as observers (None: not leading after all)."""
        voter, server, machine = self.voter, self._server, self._machine
        node = None if voter is None else voter.node
        if node is None or not node.is_leader or server is None or machine is None:
            return None
        wall = int(time.time() * 1000)

        def to_wall(t: int) -> int:
            # One fixed offset per seat: a time reported twice reads the same both times.
            return -1 if t < 0 else t + self._wall_offset_ms

        def directory_of(v: int) -> uuid.UUID:
            key = node.voter_set.key_of(v) if self.dynamic else None
            return _NO_DIRECTORY if key is None or key.directory_id is None else key.directory_id

        followers = [
            Observer(v, p.end_offset, to_wall(p.last_fetch_ms), to_wall(p.last_caught_up_ms), directory_of(v))
            for v, p in sorted(node.progress.items())
            if v in node.voters
        ]
        ctx = getattr(machine, "ctx", None)
        offsets = ctx.sessions.metadata_offset if ctx is not None else {}
        observers = [Observer(b, offsets.get(b, -1)) for b in sorted(machine.image.brokers)]
        listener = server.config.controller_listener_names[0]
        endpoints = {v: self._endpoint(v) for v in node.voters}
        return describe_quorum(
            ev.api_version,
            ev.body,
            node_id=self.node_id,
            leader_epoch=node.epoch,
            end_offset=node.log.end_offset,
            now_ms=wall,
            observers=observers,
            listeners=[(listener, *self.voters[self.node_id])],
            directory_id=directory_of(self.node_id),
            high_watermark=node.leader_high_watermark,
            followers=followers,
            follower_listeners={
                v: [(listener, *a)] for v, a in endpoints.items() if v != self.node_id and a is not None
            },
        )

    def not_controller(self, conn: Connection, ev: RequestReceived) -> None:
        """Rule 3: a controller API on a controller that is not active."""
        try:
            body = routes.error_response(ev.api_key, ev.body, ErrorCode.NOT_CONTROLLER)
        except KraftJbodError:
            conn.close()  # an api with no error code to carry it
            return
        conn.respond(ev, body)

    def _from_voter(self, ev: RequestReceived) -> bool:
        body = ev.body
        state = getattr(body, "replica_state", None)
        replica = state.replica_id if state is not None else getattr(body, "replica_id", -1)
        if replica in self.voters:
            return True
        # Rule 8: a voter learned from the log, or a controller that registered (one
        # catching up to be added: the raft leader must see its fetches), not a broker.
        # Before it registers it catches up from the committed log, as a broker does.
        node = None if self.voter is None else self.voter.node
        if not self.dynamic or node is None:
            return False
        return replica in node.voters or (self._machine is not None and replica in self._machine.image.controllers)

    def _leads(self) -> bool:
        node = None if self.voter is None else self.voter.node
        return node is not None and node.is_leader and self.active

    def _redirect_fetch(self, ev: RequestReceived) -> Any:
        voter = self.voter
        node = None if voter is None else voter.node
        epoch, leader = (node.epoch, node.leader_id) if node is not None else (0, -1)
        try:
            msg = wire.request_from_wire(ev.api_key, ev.body, cluster_id="")
            offset = msg.fetch_offset if isinstance(msg, core.FetchRequest) else 0
        except KraftJbodError:
            offset = 0
        answer = core.FetchResponse(leader, epoch, core.Error.NOT_LEADER_OR_FOLLOWER, offset)
        endpoints = voter.endpoints if voter is not None else {}
        return wire.response_to_wire(
            answer, version=ev.api_version, endpoints=endpoints, timestamp_ms=int(time.time() * 1000)
        )

    # ------------------------------------------------------------------ writing (the leader)

    async def commit(self, records: list[RecordAndVersion], cause: Any = None) -> None:
        """Rule 1 on the leader: append through the voter, wait until applied.

        Raises:
            StorageError: this controller lost its epoch before the records were committed.
        """
        voter, server = self.voter, self._server
        assert voter is not None and server is not None and server.log is not None
        node = voter.node
        if node is None or not self.active:
            raise StorageError("not the active controller any more")
        epoch = node.epoch
        ts = int(time.time() * 1000)

        def build(base: int, at_epoch: int) -> list[core.Entry]:
            return [
                core.Entry(b, at_epoch, b"", count=n, raw=raw)
                for b, n, raw in encode_data_batches(records, base_offset=base, epoch=at_epoch, timestamp_ms=ts)
            ]

        first = node.propose_entries(build)
        end = first + len(records)
        server.stats["batches"] += 1
        server.stats["records"] += len(records)
        while server.log.end_offset < end:
            now = voter.node
            if now is None or not now.is_leader or now.epoch != epoch or self._closing:
                raise StorageError(f"lost leadership of epoch {epoch} before offset {end - 1} was committed")
            self._applied.clear()
            try:
                await asyncio.wait_for(self._applied.wait(), 0.05)
            except TimeoutError:
                pass

    # ------------------------------------------------------------------ following (everyone)

    async def follow(self) -> None:
        """Rules 1, 2 and 4: copy and apply what is committed; become active or standby;
        register with the active controller."""
        registering = asyncio.get_running_loop().create_task(self._register_loop())
        try:
            await self._follow()
        finally:
            registering.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await registering

    async def _follow(self) -> None:
        while not self._closing:
            try:
                self._step()
                await self._maybe_snapshot()
            except Exception:
                log.exception("controller %d: following the quorum failed; it serves nothing more", self.node_id)
                # As a controller whose state rejects committed records: it stops serving.
                self.active = False
                if self._server is not None:
                    self._server.fatal = self._server.fatal or RuntimeError("quorum follower failed")
                return
            await asyncio.sleep(_FOLLOW_MS / 1000)

    def _step(self) -> None:
        voter, server, machine = self.voter, self._server, self._machine
        if voter is None or server is None or machine is None or server.log is None:
            return
        node, rlog = voter.node, voter.log
        if node is None or rlog is None:
            return
        clog = server.log
        if self.dynamic:
            ctx = getattr(machine, "ctx", None)
            if ctx is not None:
                ctx.quorum_node_ids = tuple(sorted(node.voters))  # the set in force (Rule 8)
        if clog.end_offset < rlog.start_offset:
            # The raft log starts past our committed copy: the snapshot at its start (ours,
            # after a restart) holds what lies between (Rule 7).
            self._install_local(rlog.start_offset)
        wanted = node.snapshot_wanted
        if wanted is not None and (self._download is None or self._download.done()):
            self._download = asyncio.get_running_loop().create_task(self._load_snapshot(wanted, node.epoch))
        committed = min(node.high_watermark, rlog.end_offset)
        applied_any = False
        while clog.end_offset < committed:
            entries = rlog.read(clog.end_offset, 64)
            if not entries or entries[0].offset != clog.end_offset:
                raise StorageError(
                    f"the raft log has no batch at {clog.end_offset} (committed up to {committed}); "
                    "the committed copy and the raft log disagree"
                )
            for e in entries:
                if e.offset >= committed:
                    break
                assert e.raw is not None
                clog.append_raw(e.raw)
                server.snapshots.policy.committed(len(e.raw))
                self._applied_since_snapshot = True
                self.committed_epoch = e.epoch
                if not e.control:
                    self._apply(e, machine, server)
                else:
                    # The image has seen the log up to here too: a snapshot taken now ends
                    # after this control batch, in its epoch (Kafka's snapshot id).
                    machine.image.last_applied_offset = e.next_offset - 1
                applied_any = True
        if applied_any:
            server.fetches.notify()
            self._applied.set()
        self._role_change(node.is_leader, node.epoch, node.epoch_start if node.is_leader else -1, clog.end_offset)

    # ------------------------------------------------------------------ snapshots (Rule 7)

    def _open_snapshots(self, server: ControllerServer) -> None:
        """Tell the raft log which snapshots this controller holds; the seat cleans by
        Kafka's retention rather than the single controller's at-once deletion."""
        server.snapshots.clean_at_once = False
        for leftover in (server.config.metadata_partition_dir / _FETCHING_DIR).glob("*"):
            leftover.unlink()  # a download a crash interrupted
        rlog = None if self.voter is None else self.voter.log
        if rlog is None:
            return
        for sid in snapshots.list_snapshots(server.config.metadata_partition_dir):
            rlog.add_snapshot(sid.end_offset, sid.epoch)
            if sid.end_offset == rlog.start_offset:
                rlog.set_start_epoch(sid.epoch)

    async def _maybe_snapshot(self) -> None:
        """Every controller snapshots its committed state when the policy says so (the
        follow loop waits meanwhile, so the image holds still), then applies retention."""
        server, machine, voter = self._server, self._machine, self.voter
        if server is None or machine is None or server.log is None or voter is None or voter.log is None:
            return
        if self._applied_since_snapshot:
            self._applied_since_snapshot = False
            clog = server.log
            if not clog.batches:
                return
            # The snapshot's last contained timestamp is its last batch's (checked on restart).
            ts = clog.batch_max_timestamp(clog.batches[-1])
            sid = await server.snapshots.after_commit(clog, machine, ts, lambda: None, counted=True)
            if sid is not None and voter.log is not None:
                voter.log.add_snapshot(sid.end_offset, sid.epoch)
                self._retention_checked = 0.0
        if time.monotonic() - self._retention_checked >= 1.0:
            self._retention_checked = time.monotonic()
            self._apply_retention()

    def _apply_retention(self) -> None:
        """Kafka's rule: with two snapshots or more, while log plus snapshots exceed
        ``metadata.max.retention.bytes`` (or the oldest snapshot is older than
        ``metadata.max.retention.ms``), the log starts at the next snapshot; older snapshots
        and the raft log and committed copy below the new start go."""
        server, voter = self._server, self.voter
        if server is None or server.log is None or voter is None or voter.log is None:
            return
        rlog, clog, directory = voter.log, server.log, server.config.metadata_partition_dir
        facts = []
        for end, epoch in rlog.snapshots:
            path = directory / snapshots.SnapshotId(end, epoch).file_name
            try:
                facts.append(
                    SnapshotFacts(
                        (end, epoch), path.stat().st_size, snapshots.read_header(path).last_contained_log_timestamp
                    )
                )
            except (OSError, KraftJbodError):
                return  # a snapshot file gone or unreadable: clean nothing now
        cut = retention_cut(
            facts,
            rlog.bytes_from,
            retention_bytes=server.config.retention_bytes,
            retention_ms=server.config.retention_ms,
            now_ms=int(time.time() * 1000),
            start_offset=rlog.start_offset,
        )
        if cut is None or cut[0] > min(clog.end_offset, rlog.end_offset):
            return
        try:
            rlog.delete_before(cut[0])
            for end, epoch in rlog.forget_snapshots_below(cut[0]):
                (directory / snapshots.SnapshotId(end, epoch).file_name).unlink(missing_ok=True)
            if cut[0] == clog.end_offset:
                clog.roll()
            clog.delete_segments_below(cut[0])
        except (LogError, KraftJbodError, OSError) as exc:
            log.error("controller %d: deleting the log below snapshot %s failed: %s", self.node_id, cut, exc)
            return
        log.info(
            "controller %d: log start offset %d (raft log), %d (committed copy) after snapshot %s",
            self.node_id,
            rlog.start_offset,
            clog.start_offset,
            cut,
        )

    async def _load_snapshot(self, wanted: tuple[int, int], epoch: int) -> None:
        """Fetch the leader's snapshot ``wanted`` with FetchSnapshot, check it, install it."""
        voter, server = self.voter, self._server
        node = None if voter is None else voter.node
        if node is None or server is None or voter is None:
            return
        started = time.monotonic()
        download = SnapshotDownload(wanted, replica_id=self.node_id, leader_epoch=epoch, cluster_id=server.cluster_id)
        sid = snapshots.SnapshotId(*wanted)
        directory = server.config.metadata_partition_dir
        # Written under its final name in a side folder (the reader checks the name), moved
        # into place only once whole and read back.
        part = directory / _FETCHING_DIR / sid.file_name
        try:
            part.parent.mkdir(exist_ok=True)
            with open(part, "wb") as out:
                while not download.done:
                    now = voter.node
                    if now is None or now.snapshot_wanted != wanted or self._closing:
                        return  # the epoch moved on: the next leader names its own
                    address = self._endpoint(now.leader_id)
                    if address is None:
                        raise SnapshotFetchError(f"no address for the leader {now.leader_id}")
                    answer = await asyncio.wait_for(request_once(address, download.request(), 1), 5.0)
                    if answer is None:
                        raise SnapshotFetchError("the leader closed the connection")
                    chunk = download.accept(answer)  # Rule 1 of snapshot_download: checked first
                    out.write(chunk)
                    now.snapshot_progress(_mono_ms())
                out.flush()
                if self.fsync:
                    os.fsync(out.fileno())
            contents = snapshots.read_snapshot(part)
            if (contents.snapshot_id.end_offset, contents.snapshot_id.epoch) != wanted:
                raise SnapshotFetchError(f"the snapshot holds id {contents.snapshot_id}, not {wanted}")
            os.replace(part, directory / sid.file_name)
            now = voter.node
            if now is None or now.snapshot_wanted != wanted:
                return
            self._install(sid, contents)
            self.snapshot_load_ms.append(int((time.monotonic() - started) * 1000))
            log.info(
                "controller %d: loaded the leader's snapshot %s (%d bytes) in %d ms",
                self.node_id,
                sid.file_name,
                download.size,
                self.snapshot_load_ms[-1],
            )
        except (SnapshotFetchError, KraftJbodError, OSError, TimeoutError) as exc:
            log.warning("controller %d: fetching snapshot %s failed: %s", self.node_id, wanted, exc)
            now = voter.node
            if now is not None:
                now.snapshot_abandoned(_mono_ms())
        finally:
            part.unlink(missing_ok=True)

    def _install_local(self, start: int) -> None:
        """Load our own snapshot at the raft log's start (a restart after a cut)."""
        server, voter = self._server, self.voter
        assert server is not None and voter is not None and voter.log is not None
        match = [s for s in voter.log.snapshots if s[0] == start]
        if not match:
            raise StorageError(f"the raft log starts at {start} and no snapshot ends there")
        sid = snapshots.SnapshotId(*match[-1])
        self._install(sid, snapshots.read_snapshot(server.config.metadata_partition_dir / sid.file_name))

    def _install(self, sid: snapshots.SnapshotId, contents: snapshots.SnapshotContents) -> None:
        """The controller's state becomes the snapshot's, its committed copy starts at the
        snapshot's end, and the raft node goes on from there (all in one step of the loop)."""
        server, machine, voter = self._server, self._machine, self.voter
        assert server is not None and machine is not None and server.log is not None and voter is not None
        clog = server.log
        if clog.end_offset < sid.end_offset:
            fresh = MetadataImage(machine.image.profile)
            snapshots.load_image(fresh, contents)
            machine.image = fresh
            ctx = getattr(machine, "ctx", None)
            if ctx is not None:
                ctx.image = fresh
            clog.roll()
            clog.delete_segments_below(clog.end_offset)
            clog.start_at(sid.end_offset)
            clog.leader_epoch = max(clog.leader_epoch, sid.epoch)
            self.committed_epoch = sid.epoch
        server.snapshots.latest = max(server.snapshots.latest or (0, 0), (sid.end_offset, sid.epoch))
        node = voter.node
        if node is not None:
            node.snapshot_loaded(sid.end_offset, sid.epoch, _mono_ms())
        elif voter.log is not None:
            voter.log.add_snapshot(sid.end_offset, sid.epoch)
        self.snapshots_loaded.append((sid.end_offset, sid.epoch))
        server.fetches.notify()
        self._applied.set()

    @staticmethod
    def _apply(entry: core.Entry, machine: StateMachine, server: ControllerServer) -> None:
        assert entry.raw is not None
        try:
            batch, _ = read_record_batch(entry.raw, 0)
            decoded = []
            for rec in batch.records:
                if rec.value is None:
                    raise DecodeError(f"metadata record at offset {entry.offset + rec.offset_delta} has no value")
                decoded.append((entry.offset + rec.offset_delta, *codec.decode_metadata_record(rec.value)))
        except DecodeError as exc:
            raise StorageError(f"committed batch at offset {entry.offset} does not decode: {exc}") from None
        for offset, record, version in decoded:
            machine.apply(offset, record, version)
        server.story.committed([(r, v) for _, r, v in decoded], None)

    def _role_change(self, leads: bool, epoch: int, epoch_start: int, applied_end: int) -> None:
        server, machine = self._server, self._machine
        assert server is not None and machine is not None and server.log is not None
        if self.active and (not leads or epoch != self.active_epoch):
            self.active = False
            log.info("controller %d: standby (epoch %d)", self.node_id, epoch)
        if not self.active and leads and applied_end > epoch_start >= 0:
            # Rule 2: everything before our epoch is applied; sessions start now.
            sessions = getattr(getattr(machine, "ctx", None), "sessions", None)
            if sessions is not None:
                sessions.activated = False
            server.log.leader_epoch = max(server.log.leader_epoch, epoch)
            machine.leader_epoch = epoch
            self.active, self.active_epoch = True, epoch
            self.activations += 1
            log.info("controller %d: active in epoch %d at offset %d", self.node_id, epoch, applied_end)

    # ------------------------------------------------------------------ registration (Rule 4)

    def _registered(self) -> bool:
        machine = self._machine
        if machine is None:
            return False
        info = machine.image.controllers.get(self.node_id)
        return info is not None and info.incarnation_id == self.incarnation_id

    async def _register_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(_REGISTER_MS / 1000)
            voter, machine, server = self.voter, self._machine, self._server
            node = None if voter is None else voter.node
            if node is None or machine is None or server is None:
                continue
            leader_at = self._endpoint(node.leader_id)
            if leader_at is None:
                continue
            if self.committed_epoch != node.epoch:
                continue  # the leader has not committed its epoch's first batch: not serving yet
            if machine.metadata_version < fv.MV_3_7_IV0 or self._registered():
                continue
            host, port = server.addresses[0]
            request = ControllerRegistrationRequest(
                controller_id=self.node_id,
                incarnation_id=self.incarnation_id,
                zk_migration_ready=False,
                listeners=[Listener(name=server.config.controller_listener_names[0], host=host, port=port)],
                features=[
                    Feature(name=name, min_supported_version=lo, max_supported_version=hi)
                    for name, (lo, hi) in sorted(fv.SUPPORTED_FEATURES.items())
                ],
            )
            self.registrations_sent += 1
            try:
                answer = await asyncio.wait_for(request_once(leader_at, request, 0), 2.0)
            except (OSError, TimeoutError, KraftJbodError) as exc:
                log.debug("controller %d: ControllerRegistration: %s", self.node_id, exc)
                continue
            code = getattr(answer, "error_code", -1)
            if code not in (0, ErrorCode.NOT_CONTROLLER):
                log.warning("controller %d: ControllerRegistration answered error %d", self.node_id, code)


def _mono_ms() -> int:
    return time.monotonic_ns() // 1_000_000


async def request_once(address: tuple[str, int], body: Any, version: int) -> Any:
    """One request on a fresh connection; the response body (None: closed without one)."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        conn = ClientConnection(client_id="controller-registration")
        writer.write(conn.send_request(body, version))
        await writer.drain()
        while True:
            ev = conn.next_event()
            if isinstance(ev, ResponseReceived):
                return ev.body
            if ev is not NEED_DATA:
                return None
            data = await reader.read(65536)
            if not data:
                return None
            conn.receive_data(data)
    finally:
        writer.close()
