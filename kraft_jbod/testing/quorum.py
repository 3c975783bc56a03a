"""A quorum of raft voters in this process, with failover on demand, for tests.

``async with LocalQuorum(tmp_path, voters=3) as quorum:`` starts the voters on 127.0.0.1
(ports picked by the system), each with its own metadata directory under ``tmp_path``
(``voter-<id>``: the ``quorum-state`` file and ``__cluster_metadata-0``). Then:

* :meth:`LocalQuorum.wait_for_leader` returns the leader once one leads (optionally in an
  epoch above a given one), or raises ``TimeoutError``;
* :meth:`kill` / :meth:`restart`, :meth:`pause` / :meth:`resume`, :meth:`isolate` /
  :meth:`heal` and :meth:`move_leadership` lose or move the leader at a moment you choose;
* :meth:`write` appends records through the leader and :meth:`wait_committed` waits until a
  majority holds them; :meth:`logs` reads every voter's log from disk afterwards.

Election times are in :attr:`elections` (milliseconds from a failover to the next leader).

``LocalQuorum(tmp_path, voters=3, dynamic=True)`` runs kraft.version 1: each voter gets a
directory id and starts from the initial voter set (as ``--initial-controllers``);
:meth:`LocalQuorum.add_voter` starts a new voter formatted with none (as
``--no-initial-controllers``), lets it catch up as an observer and has the leader add it
(AddRaftVoter); :meth:`LocalQuorum.remove_voter` has the leader remove one (RemoveRaftVoter),
the leader itself included (it resigns once that commits).

:class:`ControllerQuorum` is the same with N full controllers (``ControllerServer`` and its
state machine on each voter, the metadata log being the raft log): :meth:`ControllerQuorum.
wait_for_active` returns the active controller, :meth:`~ControllerQuorum.kill` /
:meth:`~ControllerQuorum.restart` lose and bring back a controller, and
:attr:`~ControllerQuorum.voters_property` is the ``controller.quorum.voters`` value brokers take.
``ControllerQuorum(folder, dynamic=True)`` runs its controllers at kraft.version 1 (each with
a directory id, formatted with the initial voter set): :meth:`ControllerQuorum.add_controller`
starts a controller formatted with none, which follows as an observer, and has the active
controller add it (AddRaftVoter over the wire); :meth:`ControllerQuorum.remove_controller`
removes one (RemoveRaftVoter), the active controller included.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.raft.file_log import FileReplicaLog
from kraft_jbod.controller.raft.messages import Entry, Error
from kraft_jbod.controller.raft.node import NotLeaderError, Role, Timing
from kraft_jbod.controller.raft.seat import QuorumSeat, request_once
from kraft_jbod.controller.raft.voter import RaftVoter
from kraft_jbod.controller.raft.voter_set import VoterKey, VoterSet
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.add_raft_voter_request import AddRaftVoterRequest
from kraft_jbod.messages.add_raft_voter_request import Listener as AddListener
from kraft_jbod.messages.remove_raft_voter_request import RemoveRaftVoterRequest

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
#: Faster than Kafka's defaults (1 s election, 2 s fetch timeout) so tests run in seconds,
#: slow enough for a loaded 2-core machine.
TEST_TIMING = Timing(election_timeout_ms=300, fetch_timeout_ms=600, election_backoff_max_ms=200, retry_ms=100)


class LocalQuorum:
    def __init__(
        self,
        directory: Path,
        *,
        voters: int = 3,
        timing: Timing = TEST_TIMING,
        fsync: bool = False,
        seed: int = 0,
        dynamic: bool = False,
    ) -> None:
        self.directory = directory
        self.ids = list(range(1, voters + 1))
        self.dynamic = dynamic
        self.directory_ids: dict[int, uuid.UUID] = {i: uuid.uuid4() for i in self.ids} if dynamic else {}
        # What each voter was formatted with (kraft.version 1): the initial set, or none.
        initial = VoterSet.of(VoterKey(i, self.directory_ids[i]) for i in self.ids) if dynamic else None
        self._initial: dict[int, VoterSet | None] = {i: initial for i in self.ids}
        self.voter_changes: list[tuple[str, int, float]] = []  # (add/remove, node, seconds taken)
        self._auto_join: set[int] = set()  # voters started with controller.quorum.auto.join.enable
        self.timing = timing
        self.fsync = fsync
        self.seed = seed
        self.voters: dict[int, RaftVoter] = {}
        self.addresses: dict[int, tuple[str, int]] = {}
        self.elections: list[int] = []
        self._lost_at: int | None = None

    async def __aenter__(self) -> LocalQuorum:
        for i in self.ids:
            v = self._voter(i, ("127.0.0.1", 0))
            await v.start()
            self.addresses[i] = v.addresses[i]
        for v in self.voters.values():
            v.connect(self.addresses)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for v in list(self.voters.values()):
            await v.kill()
        self.voters.clear()

    def _voter(self, node_id: int, address: tuple[str, int]) -> RaftVoter:
        v = RaftVoter(
            node_id,
            {node_id: address},
            self.directory / f"voter-{node_id}",
            cluster_id=CLUSTER_ID,
            timing=self.timing,
            seed=self.seed * 100 + node_id + len(self.elections) * 7,
            fsync=self.fsync,
            directory_id=self.directory_ids.get(node_id),
            initial_voters=self._initial.get(node_id),
            auto_join=node_id in self._auto_join,
        )
        self.voters[node_id] = v
        return v

    # ------------------------------------------------------------------ observing

    def leader(self) -> RaftVoter | None:
        """The live, unpaused, connected voter leading the highest epoch, if any."""
        best: RaftVoter | None = None
        for v in self.voters.values():
            node = v.node
            if node is None or node.role is not Role.LEADER or v.isolated or not v._running.is_set():
                continue
            if best is None or (best.node is not None and node.epoch > best.node.epoch):
                best = v
        return best

    async def wait_for_leader(self, *, above_epoch: int = -1, timeout: float = 30.0) -> RaftVoter:
        """The leader once one leads an epoch above ``above_epoch``.

        Raises:
            TimeoutError: none within ``timeout`` seconds (the message lists every voter).
        """
        deadline = time.monotonic() + timeout
        while True:
            v = self.leader()
            if v is not None and v.node is not None and v.node.epoch > above_epoch:
                if self._lost_at is not None:
                    self.elections.append(_ms() - self._lost_at)
                    self._lost_at = None
                return v
            if time.monotonic() > deadline:
                states = "; ".join(x.describe() for x in self.voters.values())
                raise TimeoutError(f"no leader above epoch {above_epoch} within {timeout} s: {states}")
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------------ failovers

    async def kill(self, node_id: int) -> None:
        self._lost_at = _ms()
        await self.voters[node_id].kill()

    async def restart(self, node_id: int) -> RaftVoter:
        """Start a killed voter again from its directory, on its old port."""
        old = self.voters[node_id]
        v = self._voter(node_id, self.addresses[node_id])
        v.rng.seed(old.rng.random())
        for attempt in range(50):
            try:
                await v.start()
                break
            except OSError:
                if attempt == 49:
                    raise
                await asyncio.sleep(0.1)
        v.connect(self.addresses)
        return v

    def pause(self, node_id: int) -> None:
        self._lost_at = _ms()
        self.voters[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.voters[node_id].resume()

    def isolate(self, node_id: int) -> None:
        self._lost_at = _ms()
        self.voters[node_id].isolate()

    def heal(self, node_id: int) -> None:
        self.voters[node_id].heal()

    def move_leadership(self, to: int | None = None) -> None:
        """The leader resigns, naming ``to`` (or the most caught-up voter) its successor."""
        v = self.leader()
        if v is not None:
            self._lost_at = _ms()
            v.resign(to)

    # ------------------------------------------------------------------ voter changes (kraft.version 1)

    async def add_voter(self, node_id: int, *, auto_join: bool = False, timeout: float = 30.0) -> RaftVoter:
        """Start voter ``node_id`` with no voter set (an observer of the quorum), then have the
        leader add it, retrying while the answer is REQUEST_TIMED_OUT (not caught up yet, or
        another change in flight) or the leader moved. ``auto_join``: the new voter asks the
        leader itself (controller.quorum.auto.join.enable); this waits until it votes.

        Raises:
            ValueError: a static quorum, or an id already used.
            RuntimeError: the leader refused for another reason (the error in the message).
            TimeoutError: not added within ``timeout`` seconds.
        """
        if not self.dynamic or node_id in self.voters:
            raise ValueError(f"add_voter({node_id}) needs a dynamic quorum and a new node id")
        self.ids.append(node_id)
        self.directory_ids[node_id] = uuid.uuid4()
        self._initial[node_id] = VoterSet(frozenset())
        if auto_join:
            self._auto_join.add(node_id)
        v = self._voter(node_id, ("127.0.0.1", 0))
        await v.start()
        self.addresses[node_id] = v.addresses[node_id]
        v.connect({i: a for i, a in self.addresses.items()})
        if auto_join:
            await self._until_voting(node_id, timeout)
            return v
        host, port = self.addresses[node_id]
        await self._change(
            "add", node_id, timeout, lambda leader: leader.add_voter(node_id, self.directory_ids[node_id], host, port)
        )
        return v

    async def reformat(self, node_id: int, *, timeout: float = 30.0) -> RaftVoter:
        """Kill voter ``node_id``, wipe its folder and start it again with a new directory id
        and no voter set, auto-joining: it has the leader remove its old key, then add it.
        Returns once it votes again under the new key."""
        import shutil

        if not self.dynamic:
            raise ValueError("reformat needs a dynamic quorum")
        await self.voters[node_id].kill()
        shutil.rmtree(self.directory / f"voter-{node_id}")
        self.directory_ids[node_id] = uuid.uuid4()
        self._initial[node_id] = VoterSet(frozenset())
        self._auto_join.add(node_id)
        v = self._voter(node_id, self.addresses[node_id])
        for attempt in range(50):
            try:
                await v.start()
                break
            except OSError:
                if attempt == 49:
                    raise
                await asyncio.sleep(0.1)
        v.connect(self.addresses)
        await self._until_voting(node_id, timeout)
        return v

    async def _until_voting(self, node_id: int, timeout: float) -> None:
        started = time.monotonic()
        key = VoterKey(node_id, self.directory_ids[node_id])
        while True:
            leader = self.leader()
            if leader is not None and leader.node is not None and leader.node.voter_set.is_voter(key):
                if leader.node.high_watermark > leader.node.voter_history.latest_offset:
                    self.voter_changes.append(("join", node_id, time.monotonic() - started))
                    return
            if time.monotonic() - started > timeout:
                states = "; ".join(x.describe() for x in self.voters.values())
                raise TimeoutError(f"voter {node_id} did not join within {timeout} s: {states}")
            await asyncio.sleep(0.02)

    async def remove_voter(self, node_id: int, *, timeout: float = 30.0) -> None:
        """Have the leader remove voter ``node_id`` (which keeps running, as an observer).

        Raises:
            ValueError: a static quorum. RuntimeError / TimeoutError: as :meth:`add_voter`.
        """
        if not self.dynamic:
            raise ValueError("remove_voter needs a dynamic quorum")
        leader = self.leader()
        removing_leader = leader is not None and leader.node_id == node_id and leader.node is not None
        epoch = leader.node.epoch if removing_leader and leader is not None and leader.node is not None else -1
        if removing_leader:
            self._lost_at = _ms()  # the leader resigns once its removal commits
        await self._change(
            "remove", node_id, timeout, lambda leader: leader.remove_voter(node_id, self.directory_ids[node_id])
        )
        if removing_leader:
            await self.wait_for_leader(above_epoch=epoch, timeout=timeout)  # its successor

    async def _change(self, kind: str, node_id: int, timeout: float, ask: Any) -> None:
        started = time.monotonic()
        deadline = started + timeout
        while True:
            leader = await self.wait_for_leader(timeout=max(0.1, deadline - time.monotonic()))
            error, message = await ask(leader)
            if error is Error.NONE:
                self.voter_changes.append((kind, node_id, time.monotonic() - started))
                return
            if error not in (Error.REQUEST_TIMED_OUT, Error.NOT_LEADER_OR_FOLLOWER):
                raise RuntimeError(f"{kind} voter {node_id}: {error.name} {message}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{kind} voter {node_id}: still {error.name} after {timeout} s ({message})")
            await asyncio.sleep(0.05)

    def voter_set(self) -> frozenset[int]:
        """The leader's voter set in force (the node ids)."""
        v = self.leader()
        return v.node.voters if v is not None and v.node is not None else frozenset()

    # ------------------------------------------------------------------ data

    async def write(self, payloads: list[bytes], *, timeout: float = 30.0) -> tuple[int, int]:
        """Append through the current leader: (first offset, epoch). Retries across elections."""
        deadline = time.monotonic() + timeout
        while True:
            v = await self.wait_for_leader(timeout=max(0.1, deadline - time.monotonic()))
            try:
                assert v.node is not None
                return v.propose(payloads), v.node.epoch
            except NotLeaderError:
                await asyncio.sleep(0.01)

    async def wait_committed(self, offset: int, epoch: int, *, timeout: float = 10.0) -> bool:
        """True once the leader of ``epoch`` has a high watermark past ``offset``; False if the
        epoch ended first (the write may or may not survive: it was never acknowledged)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.leader()
            if v is not None and v.node is not None:
                if v.node.epoch != epoch:
                    return False
                if v.node.high_watermark > offset:
                    return True
            await asyncio.sleep(0.005)
        return False

    def logs(self) -> dict[int, list[Entry]]:
        """Every voter's log as on disk (open it read-only while the quorum is stopped)."""
        out = {}
        for i in self.ids:
            log = FileReplicaLog(self.directory / f"voter-{i}", fsync=False)
            out[i] = list(log.entries)
            log.close()
        return out


class ControllerQuorum:
    """N controllers, each a voter, on 127.0.0.1: ``async with ControllerQuorum(folder) as q``.

    ``props`` are extra controller properties (every controller gets them). ``external``
    names voters this quorum does not start (id -> (host, port)), such as Kafka's own
    controller in a mixed quorum: they are in every controller's voter set and in
    :attr:`voters_property`, and :meth:`leader_view` tells when one of them leads.
    """

    def __init__(
        self,
        directory: Path,
        *,
        voters: int = 3,
        timing: Timing = TEST_TIMING,
        fsync: bool = False,
        seed: int = 0,
        first_id: int = 3000,
        props: dict[str, str] | None = None,
        metadata_version: int | None = None,
        external: dict[int, tuple[str, int]] | None = None,
        dynamic: bool = False,
        external_directory_ids: dict[int, uuid.UUID] | None = None,
    ) -> None:
        self.directory = directory
        self.dynamic = dynamic
        self.external = dict(external or {})
        self.metadata_version = metadata_version  # of a new quorum (None: the default level)
        self.ids = list(range(first_id, first_id + voters))
        # kraft.version 1: each controller's directory id and what it was formatted with.
        self.directory_ids: dict[int, uuid.UUID] = {i: uuid.uuid4() for i in self.ids} if dynamic else {}
        # External voters of the initial set (Kafka's controller formatted with the same list).
        self.directory_ids.update(external_directory_ids or {})
        initial = VoterSet.of(VoterKey(i, d) for i, d in self.directory_ids.items()) if dynamic else None
        self._initial: dict[int, VoterSet | None] = {i: initial for i in self.ids}
        self.voter_changes: list[tuple[str, int, float]] = []  # (add/remove, node, seconds taken)
        self.timing = timing
        self.fsync = fsync
        self.seed = seed
        self.props = dict(props or {})
        self.servers: dict[int, ControllerServer] = {}
        self.addresses: dict[int, tuple[str, int]] = {}
        self.elections: list[int] = []
        self._lost_at: int | None = None
        self._starts = 0

    @property
    def voters_property(self) -> str:
        """``controller.quorum.voters`` naming every controller (for brokers)."""
        every = {**self.external, **self.addresses}
        return ",".join(f"{i}@{h}:{p}" for i, (h, p) in sorted(every.items()))

    def config(self, node_id: int) -> ControllerConfig:
        port = self.addresses.get(node_id, ("127.0.0.1", 0))[1]
        return ControllerConfig.from_properties(
            {
                "node.id": str(node_id),
                "process.roles": "controller",
                "listeners": f"CONTROLLER://127.0.0.1:{port}",
                "controller.listener.names": "CONTROLLER",
                "metadata.log.dir": str(self.directory / f"controller-{node_id}"),
                **self.props,
            }
        )

    async def __aenter__(self) -> ControllerQuorum:
        for i in self.ids:
            server = await self._start(i)
            self.addresses[i] = server.addresses[0]
        for server in self.servers.values():
            _seat(server).connect(self.all_voters)
        return self

    @property
    def all_voters(self) -> dict[int, tuple[str, int]]:
        """Every voter's address: ours and the external ones."""
        return {**self.external, **self.addresses}

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for i in list(self.servers):
            await self.kill(i, record=False)

    async def _start(self, node_id: int) -> ControllerServer:
        self._starts += 1
        seat = QuorumSeat(
            node_id,
            {**self.external, **{i: self.addresses.get(i, ("127.0.0.1", 0)) for i in self.ids}},
            timing=self.timing,
            seed=self.seed * 100 + node_id + self._starts * 7,
            fsync=self.fsync,
            directory_id=self.directory_ids.get(node_id),
            initial_voters=self._initial.get(node_id),
        )
        server = self._server(node_id, seat)
        for attempt in range(50):
            try:
                await server.start()
                break
            except Exception:
                if attempt == 49 or node_id not in self.addresses:
                    raise
                server = self._server(node_id, seat)
                await asyncio.sleep(0.1)
        self.servers[node_id] = server
        return server

    def _server(self, node_id: int, seat: QuorumSeat) -> ControllerServer:
        return ControllerServer(
            self.config(node_id),
            cluster_id=CLUSTER_ID,
            fsync=self.fsync,
            quorum=seat,
            metadata_version=self.metadata_version,
        )

    # ------------------------------------------------------------------ observing

    def active(self) -> ControllerServer | None:
        """The active controller in the highest epoch, if any."""
        best: tuple[int, ControllerServer] | None = None
        for server in self.servers.values():
            seat = _seat(server)
            if seat.active and (best is None or seat.active_epoch > best[0]):
                best = (seat.active_epoch, server)
        return None if best is None else best[1]

    async def wait_for_active(self, *, above_epoch: int = -1, timeout: float = 30.0) -> ControllerServer:
        """The active controller once one is active in an epoch above ``above_epoch``.

        Raises:
            TimeoutError: none within ``timeout`` seconds (the message lists every voter).
        """
        deadline = time.monotonic() + timeout
        while True:
            server = self.active()
            if server is not None and _seat(server).active_epoch > above_epoch:
                if self._lost_at is not None:
                    self.elections.append(_ms() - self._lost_at)
                    self._lost_at = None
                return server
            if time.monotonic() > deadline:
                states = "; ".join(f"{i}: {_describe(_seat(s).voter)}" for i, s in self.servers.items())
                raise TimeoutError(f"no active controller above epoch {above_epoch} within {timeout} s: {states}")
            await asyncio.sleep(0.01)

    def leader_view(self) -> tuple[int, int] | None:
        """(leader id, epoch) once every running controller of ours names the same leader
        in the same epoch and that leader, if ours, is active in it; None otherwise."""
        views = set()
        for server in self.servers.values():
            seat = _seat(server)
            node = None if seat.voter is None else seat.voter.node
            if node is None:
                return None
            views.add((node.leader_id, node.epoch))
        if len(views) != 1:
            return None
        leader, epoch = next(iter(views))
        if leader < 0:
            return None
        mine = self.servers.get(leader)
        if mine is not None and not (_seat(mine).active and _seat(mine).active_epoch == epoch):
            return None
        if leader not in self.servers and leader in self.ids:
            return None  # a killed controller of ours cannot lead
        return leader, epoch

    async def wait_for_leader_view(self, *, above_epoch: int = -1, timeout: float = 30.0) -> tuple[int, int]:
        """:meth:`leader_view` once it names an epoch above ``above_epoch`` (the leader may be
        an external voter); counted in :attr:`elections` as :meth:`wait_for_active` is.

        Raises:
            TimeoutError: no agreed leader within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            view = self.leader_view()
            if view is not None and view[1] > above_epoch:
                if self._lost_at is not None:
                    self.elections.append(_ms() - self._lost_at)
                    self._lost_at = None
                return view
            if time.monotonic() > deadline:
                states = "; ".join(f"{i}: {_describe(_seat(s).voter)}" for i, s in self.servers.items())
                raise TimeoutError(f"no agreed leader above epoch {above_epoch} within {timeout} s: {states}")
            await asyncio.sleep(0.01)

    def mark_lost(self) -> None:
        """Start the clock of an election for a leader lost outside this quorum (an external one)."""
        self._lost_at = _ms()

    @staticmethod
    def epoch_of(server: ControllerServer) -> int:
        return _seat(server).active_epoch

    # ------------------------------------------------------------------ failovers

    async def kill(self, node_id: int, *, record: bool = True) -> None:
        """Lose a controller as ``kill -9`` would (its voter first, then its sockets)."""
        server = self.servers.pop(node_id)
        if record:
            self._lost_at = _ms()
        await _seat(server).kill()
        await server.close()

    async def restart(self, node_id: int) -> ControllerServer:
        """Start a killed controller again from its folder, on its old port."""
        server = await self._start(node_id)
        _seat(server).connect(self.all_voters)
        return server

    def state_of(self, node_id: int) -> Any:
        return self.servers[node_id].state

    # ------------------------------------------------------------------ voter changes (kraft.version 1)

    def voter_set(self) -> frozenset[int]:
        """The voter set in force as the active controller's raft node has it."""
        server = self.active()
        return frozenset() if server is None else _seat(server).voter_ids()

    async def add_controller(self, node_id: int, *, timeout: float = 60.0) -> ControllerServer:
        """Start controller ``node_id`` formatted with no voter set (an observer that fetches
        the log), then send AddRaftVoter to the active controller until it answers NONE
        (REQUEST_TIMED_OUT while the newcomer catches up, NOT_LEADER_OR_FOLLOWER while the
        leadership moves).

        Raises:
            ValueError: a static quorum, or an id already used.
            RuntimeError: refused for another reason. TimeoutError: not added in time.
        """
        if not self.dynamic or node_id in self.ids or node_id in self.external:
            raise ValueError(f"add_controller({node_id}) needs a dynamic quorum and a new node id")
        self.ids.append(node_id)
        self.directory_ids[node_id] = uuid.uuid4()
        self._initial[node_id] = VoterSet(frozenset())
        server = await self._start(node_id)
        self.addresses[node_id] = server.addresses[0]
        _seat(server).connect(self.all_voters)
        host, port = self.addresses[node_id]
        request = AddRaftVoterRequest(
            cluster_id=CLUSTER_ID,
            timeout_ms=self.timing.request_timeout_ms,
            voter_id=node_id,
            voter_directory_id=self.directory_ids[node_id],
            listeners=[AddListener(name="CONTROLLER", host=host, port=port)],
            ack_when_committed=True,
        )
        await self._change("add", node_id, request, 1, timeout)
        return server

    async def remove_controller(self, node_id: int, *, timeout: float = 60.0) -> None:
        """Send RemoveRaftVoter for ``node_id`` to the active controller until it answers
        NONE; the removed controller goes on as an observer. Removing the active controller
        waits for its successor (counted in :attr:`elections`).

        Raises:
            ValueError: a static quorum. RuntimeError / TimeoutError: as :meth:`add_controller`.
        """
        if not self.dynamic:
            raise ValueError("remove_controller needs a dynamic quorum")
        active = self.active()
        epoch = -1 if active is None else _seat(active).active_epoch
        removing_active = active is not None and _seat(active).node_id == node_id
        request = RemoveRaftVoterRequest(
            cluster_id=CLUSTER_ID, voter_id=node_id, voter_directory_id=self.directory_ids[node_id]
        )
        lost = _ms()  # the leader resigns once its removal commits
        await self._change("remove", node_id, request, 0, timeout)
        if removing_active:
            await self.wait_for_active(above_epoch=epoch, timeout=timeout)
            self.elections.append(_ms() - lost)

    async def _change(self, kind: str, node_id: int, request: Any, version: int, timeout: float) -> None:
        started = time.monotonic()
        deadline = started + timeout
        while True:
            # The raft leader answers, ours or an external voter.
            leader, _ = await self.wait_for_leader_view(timeout=max(0.1, deadline - time.monotonic()))
            try:
                answer = await asyncio.wait_for(
                    request_once(self.all_voters[leader], request, version), max(0.1, deadline - time.monotonic())
                )
                code = getattr(answer, "error_code", None)
                message = getattr(answer, "error_message", None)
            except (OSError, TimeoutError) as exc:
                code, message = None, repr(exc)
            if code == 0:
                self.voter_changes.append((kind, node_id, time.monotonic() - started))
                return
            if code is not None and code not in (Error.REQUEST_TIMED_OUT, Error.NOT_LEADER_OR_FOLLOWER):
                raise RuntimeError(f"{kind} controller {node_id}: error {code} {message}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{kind} controller {node_id}: still error {code} after {timeout} s ({message})")
            await asyncio.sleep(0.05)


def _ms() -> int:
    return time.monotonic_ns() // 1_000_000


def _seat(server: ControllerServer) -> QuorumSeat:
    """The seat this quorum gave ``server`` (the server itself sees only its protocol)."""
    seat = server.quorum
    assert isinstance(seat, QuorumSeat)
    return seat


def _describe(voter: Any) -> str:
    node = None if voter is None else voter.node
    if node is None or not node.dynamic:
        return "down" if voter is None else str(voter.describe())
    # kraft.version 1: which voter set this node sees, and whether it is in it.
    voting = "voter" if node.is_voter else "observer"
    return f"{node.describe()} {voting} of {sorted(node.voters)}"
