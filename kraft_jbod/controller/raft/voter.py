"""The asyncio shell of one raft voter: TCP between voters, a ticker, a durable log.

:class:`RaftVoter` wraps a :class:`~.node.RaftNode`. It listens on its controller listener
for Vote, BeginQuorumEpoch, EndQuorumEpoch and Fetch (and ApiVersions, which a Kafka voter
sends first), and keeps one outbound connection per other voter. Everything the node decides
comes back as an :class:`~.messages.Outbox`: responses go back on the connection the
request came in on, requests go to the peer's link.

Rules:

Rule 1: the node is only touched from the event loop, one call at a time; the log's
fsync happens inside the call, so nothing leaves before the write it depends on is durable.
Rule 2: a link sends one request at a time and waits for its answer up to
``Timing.retry_ms * 4``; a peer that does not answer costs a reconnect, never a stuck
voter. A link queue holds at most ``_LINK_QUEUE`` requests; older ones are dropped (the
node resends what still matters on its own schedule).
Rule 3: a peer's bytes never crash the voter: a protocol error closes that connection.

At kraft.version 1 (``initial_voters`` given: the ``--initial-controllers`` set, or an empty
one for a voter formatted with ``--no-initial-controllers``) the node keeps its voter set in
the log (:class:`~.voters_codec.VotersRecordCodec`), links to peers it learns from a
VotersRecord as they appear, and this shell serves AddRaftVoter (80) and RemoveRaftVoter (81):
:meth:`add_voter` asks the new voter for its ApiVersions (its supported kraft.version range)
as Kafka's leader does, and both answer once the node says (node.py, Rules V1-V9). It also
serves UpdateRaftVoter (82) by recording the voter's new endpoint (node.py, Rules U1-U5),
and, as a follower voter, sends UpdateRaftVoter to the leader once per fetch timeout while
its own entry in the newest VotersRecord (endpoint, kraft.version range) differs from its
listener and range: a voter restarted on another port gets its new endpoint into the log.

Failover controls for tests (:mod:`kraft_jbod.testing.quorum` drives them): :meth:`kill`
(sockets and tasks gone, as a SIGKILL), :meth:`pause` / :meth:`resume` (no ticks and no
message handled, as a SIGSTOP: peers' bytes wait in the sockets), :meth:`isolate` /
:meth:`heal` (every message in or out dropped), and :meth:`resign` (move leadership).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from kraft_jbod.connection import (
    NEED_DATA,
    ApiVersionsFallback,
    ClientConnection,
    ConnectionClosed,
    RequestReceived,
    ResponseReceived,
    ServerConnection,
)
from kraft_jbod.controller.raft import messages as core
from kraft_jbod.controller.raft import wire
from kraft_jbod.controller.raft.election_store import FileElectionStore
from kraft_jbod.controller.raft.file_log import FileReplicaLog
from kraft_jbod.controller.raft.node import RaftNode, Role, Timing
from kraft_jbod.controller.raft.voter_set import VoterKey, VoterSet
from kraft_jbod.controller.raft.voter_updates import answer_update_voter
from kraft_jbod.controller.raft.voters_codec import DEFAULT_SUPPORTED, VotersRecordCodec
from kraft_jbod.errors import KraftJbodError
from kraft_jbod.messages.add_raft_voter_request import AddRaftVoterRequest
from kraft_jbod.messages.add_raft_voter_request import Listener as AddListener
from kraft_jbod.messages.add_raft_voter_response import AddRaftVoterResponse
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse, SupportedFeatureKey
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.leader_change_message import LeaderChangeMessage
from kraft_jbod.messages.leader_change_message import Voter as LeaderChangeVoter
from kraft_jbod.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from kraft_jbod.messages.remove_raft_voter_response import RemoveRaftVoterResponse
from kraft_jbod.messages.update_raft_voter_request import KRaftVersionFeature as UpdateVersions
from kraft_jbod.messages.update_raft_voter_request import Listener as UpdateListener
from kraft_jbod.messages.update_raft_voter_request import UpdateRaftVoterRequest
from kraft_jbod.wire.message import Message

log = logging.getLogger(__name__)

_LINK_QUEUE: Final = 64
_TICK_MS: Final = 10
#: What the voter listener serves (ApiVersions for Kafka's client handshake).
SERVED: Final = {
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.FETCH: (13, 17),
    ApiKey.VOTE: (0, 2),
    ApiKey.BEGIN_QUORUM_EPOCH: (0, 1),
    ApiKey.END_QUORUM_EPOCH: (0, 1),
    ApiKey.UPDATE_RAFT_VOTER: (0, 0),
    ApiKey.ADD_RAFT_VOTER: (0, 1),
    ApiKey.REMOVE_RAFT_VOTER: (0, 0),
}
#: The kraft.version range a voter of ours supports (ApiVersions' SupportedFeatures).
KRAFT_VERSIONS: Final = (0, 1)
_ZERO: Final = uuid.UUID(int=0)
_CORE_CODES: Final = frozenset(int(e) for e in core.Error)
_KRAFT_FEATURE: Final = SupportedFeatureKey(
    name="kraft.version", min_version=KRAFT_VERSIONS[0], max_version=KRAFT_VERSIONS[1]
)
_SOURCE_OF = {
    core.VoteRequest: lambda m: m.candidate_id,
    core.BeginQuorumEpochRequest: lambda m: m.leader_id,
    core.EndQuorumEpochRequest: lambda m: m.leader_id,
    core.FetchRequest: lambda m: m.replica_id,
}
_RESPONSES = (core.VoteResponse, core.BeginQuorumEpochResponse, core.EndQuorumEpochResponse, core.FetchResponse)


def leader_change_payload(leader: int, voters: frozenset[int], granted: frozenset[int]) -> bytes:
    """The LeaderChangeMessage (version 0) a new leader's epoch starts with."""
    msg = LeaderChangeMessage(
        version=0,
        leader_id=leader,
        voters=[LeaderChangeVoter(voter_id=v) for v in sorted(voters)],
        granting_voters=[LeaderChangeVoter(voter_id=v) for v in sorted(granted)],
    )
    return msg.encode(0)


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class RaftVoter:
    """One voter of a static quorum (``voters``: node id -> (host, port) of every voter)."""

    def __init__(
        self,
        node_id: int,
        voters: Mapping[int, tuple[str, int]],
        directory: Path,
        *,
        cluster_id: str,
        timing: Timing | None = None,
        listener: str = "CONTROLLER",
        seed: int | None = None,
        fsync: bool = True,
        directory_id: uuid.UUID | None = None,
        initial_voters: VoterSet | None = None,
        auto_join: bool = False,
    ) -> None:
        self.node_id = node_id
        self.addresses = dict(voters)
        # kraft.version 1 when given (may be empty: a controller that joins by AddRaftVoter).
        self.directory_id = directory_id
        self.initial_voters = initial_voters
        self._learned: dict[int, tuple[str, str, int]] = {}  # from VotersRecords and AddRaftVoter
        self.codec = VotersRecordCodec(self._learned) if initial_voters is not None else None
        self.directory = directory
        self.cluster_id = cluster_id
        self.timing = timing or Timing()
        self.listener = listener
        self.rng = random.Random(seed)
        self.fsync = fsync
        self.node: RaftNode | None = None
        self.log: FileReplicaLog | None = None
        self.isolated = False
        self._running = asyncio.Event()  # cleared while paused
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._links: dict[int, asyncio.Queue[core.Message]] = {}
        self._changed = asyncio.Event()
        self._stopped = False
        self.protocol_errors = 0
        # controller.quorum.auto.join.enable: an observer asks the leader to add it.
        self.auto_join = auto_join
        self._join_at = 0
        self._joining = False
        self.join_answers: list[tuple[str, core.Error]] = []  # (add/remove, answer) of each attempt
        self._updating = False
        self.update_answers: list[int] = []  # the error code of each UpdateRaftVoter this voter sent

    @property
    def endpoints(self) -> dict[int, tuple[str, str, int]]:
        known = dict(self._learned)
        known.update({i: (self.listener, h, p) for i, (h, p) in self.addresses.items()})
        return known

    def _address(self, peer: int) -> tuple[str, int] | None:
        if peer in self.addresses:
            return self.addresses[peer]
        learned = self._learned.get(peer)
        return (learned[1], learned[2]) if learned is not None else None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Bind the listener (port 0 picks one: read :attr:`addresses` after)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.log = FileReplicaLog(self.directory, fsync=self.fsync)
        host, port = self.addresses[self.node_id]
        self._server = await asyncio.start_server(self._serve, host, port)
        sock = self._server.sockets[0].getsockname()
        self.addresses[self.node_id] = (host, sock[1])
        self._running.set()

    def attach(self) -> None:
        """Open the log without a listener of its own: a controller's listener hands this
        voter the raft requests it receives (:meth:`answer`)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.log = FileReplicaLog(self.directory, fsync=self.fsync)
        self._running.set()

    def answer(self, ev: RequestReceived | ApiVersionsFallback) -> Message | None:
        """The answer to one raft request received elsewhere (None: drop the connection).

        Raises:
            KraftJbodError: a malformed or foreign request.
        """
        if not self._running.is_set():
            return None  # paused: as a frozen process, nothing is answered
        return self._answer(ev)

    def connect(self, addresses: Mapping[int, tuple[str, int]]) -> None:
        """Learn every voter's address, build the node and start ticking and linking."""
        assert self.log is not None, "start() first"
        self.addresses.update(addresses)
        if self.codec is not None:
            self._learned.update({i: (self.listener, h, p) for i, (h, p) in self.addresses.items()})
        self.node = RaftNode(
            self.node_id,
            self.initial_voters if self.initial_voters is not None else self.addresses,
            self.log,
            FileElectionStore(self.directory),
            rng=self.rng,
            now_ms=_now_ms(),
            timing=self.timing,
            start_of_epoch=leader_change_payload,
            directory_id=self.directory_id,
            voter_codec=self.codec,
            bootstrap_peers=[p for p in self.addresses if p != self.node_id],
        )
        for peer in self.addresses:
            if peer != self.node_id:
                self._open_link(peer)
        self._spawn(self._ticker())

    def _open_link(self, peer: int) -> asyncio.Queue[core.Message]:
        queue: asyncio.Queue[core.Message] = asyncio.Queue(_LINK_QUEUE)
        self._links[peer] = queue
        self._spawn(self._link(peer, queue))
        return queue

    def _spawn(self, coro: object) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def kill(self) -> None:
        """Stop at once, as a killed process: no EndQuorumEpoch, nothing flushed beyond fsyncs."""
        self._stopped = True
        if self._server is not None:
            self._server.close()
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            # Bounded: Python 3.11's wait_for may swallow a cancel that races its inner
            # future; such a task then sees _stopped and ends on its next turn.
            await asyncio.wait(tasks, timeout=2)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        self._server = None
        if self.log is not None:
            self.log.close()
        self.node = None

    async def close(self) -> None:
        """Graceful stop: a leader resigns first (EndQuorumEpoch), then :meth:`kill`."""
        if self.node is not None and self.node.is_leader:
            self._dispatch(self.node.resign(_now_ms()))
            await asyncio.sleep(self.timing.retry_ms / 1000)
        await self.kill()

    def pause(self) -> None:
        self._running.clear()

    def resume(self) -> None:
        self._running.set()
        self._changed.set()

    def isolate(self) -> None:
        self.isolated = True

    def heal(self) -> None:
        self.isolated = False

    def resign(self, successor: int | None = None) -> None:
        """Move leadership away (to ``successor`` first, if given)."""
        if self.node is not None:
            self._dispatch(self.node.resign(_now_ms(), () if successor is None else (successor,)))

    def propose(self, payloads: list[bytes]) -> int:
        """Append as the leader; the first entry's offset (NotLeaderError otherwise)."""
        assert self.node is not None
        return self.node.propose(payloads, _now_ms())

    # ------------------------------------------------------------------ the loop

    def _dispatch(self, out: core.Outbox) -> None:
        if self.isolated:
            return
        for send in out.sends:
            if isinstance(send.message, _RESPONSES):
                continue
            queue = self._links.get(send.destination)
            if queue is None:
                if self._stopped or send.destination == self.node_id or self._address(send.destination) is None:
                    continue
                queue = self._open_link(send.destination)  # a voter learned from a VotersRecord
            if queue.full():
                queue.get_nowait()  # Rule 2: the oldest goes
            queue.put_nowait(send.message)

    async def _ticker(self) -> None:
        while not self._stopped:
            await self._running.wait()
            node = self.node
            if node is None:
                return
            self._dispatch(node.tick(_now_ms()))
            if self.auto_join:
                self._maybe_join(node)
            self._maybe_update_voter(node)
            await asyncio.sleep(_TICK_MS / 1000)

    def _maybe_join(self, node: RaftNode) -> None:
        """Kafka's auto-join: an observer that follows a leader asks it, once per fetch
        timeout, to add this replica (AddRaftVoter, not waiting for the commit); when its
        node id votes under another directory id (a reformatted disk), to remove that first."""
        now = _now_ms()
        if self._join_at == 0:
            self._join_at = now + self.timing.fetch_timeout_ms
        if (
            self._joining
            or now < self._join_at
            or not node.dynamic
            or node.is_voter
            or node.role is not Role.FOLLOWER
            or self._address(node.leader_id) is None
        ):
            return
        self._join_at = now + self.timing.fetch_timeout_ms
        self._joining = True
        stale = node.voter_set.key_of(self.node_id)
        self._spawn(self._join(node.leader_id, stale))

    async def _join(self, leader: int, stale: VoterKey | None) -> None:
        address = self._address(leader)
        host, port = self.addresses[self.node_id]
        body: Message
        if stale is not None:
            kind = "remove"
            body = RemoveRaftVoterRequest(
                cluster_id=self.cluster_id, voter_id=self.node_id, voter_directory_id=stale.directory_id or _ZERO
            )
        else:
            kind = "add"
            body = AddRaftVoterRequest(
                cluster_id=self.cluster_id,
                timeout_ms=self.timing.request_timeout_ms,
                voter_id=self.node_id,
                voter_directory_id=self.directory_id or _ZERO,
                listeners=[AddListener(name=self.listener, host=host, port=port)],
                ack_when_committed=False,
            )
        writer: asyncio.StreamWriter | None = None
        try:
            assert address is not None
            timeout = self.timing.request_timeout_ms / 1000 * 2
            reader, stream = await asyncio.wait_for(asyncio.open_connection(*address), timeout)
            writer = stream
            conn = ClientConnection(client_id=f"raft-voter-{self.node_id}")
            stream.write(conn.send_request(body, 0 if kind == "remove" else 1))
            await stream.drain()
            answer = await asyncio.wait_for(self._read_response(reader, conn), timeout)
            code = getattr(answer, "error_code", None)
            if isinstance(code, int):
                self.join_answers.append(
                    (kind, core.Error(code) if code in _CORE_CODES else core.Error.INVALID_REQUEST)
                )
        except (OSError, TimeoutError, KraftJbodError) as exc:
            log.info("voter %d: auto-join %s to voter %d failed: %r", self.node_id, kind, leader, exc)
        finally:
            if writer is not None:
                writer.close()
            self._joining = False

    def _maybe_update_voter(self, node: RaftNode) -> None:
        """Kafka's follower voter at kraft.version 1: once per update-voter period (node.py's
        :meth:`~.node.RaftNode.update_voter_due`), when its entry in the newest VotersRecord
        does not name its listener and kraft.version range, ask the leader to record them."""
        if self.codec is None or self.directory_id is None or self._updating:
            return
        if not node.update_voter_due(_now_ms()):
            return
        host, port = self.addresses[self.node_id]
        mine = ((self.listener, host, port), DEFAULT_SUPPORTED)
        leader = self._address(node.leader_id)
        if self.codec.recorded.get(self.node_id) == mine or leader is None:
            return
        body = UpdateRaftVoterRequest(
            cluster_id=self.cluster_id,
            current_leader_epoch=node.epoch,
            voter_id=self.node_id,
            voter_directory_id=self.directory_id,
            listeners=[UpdateListener(name=self.listener, host=host, port=port)],
            k_raft_version_feature=UpdateVersions(
                min_supported_version=DEFAULT_SUPPORTED[0], max_supported_version=DEFAULT_SUPPORTED[1]
            ),
        )
        self._updating = True
        self._spawn(self._update_voter(node.leader_id, leader, body))

    async def _update_voter(self, leader: int, address: tuple[str, int], body: UpdateRaftVoterRequest) -> None:
        writer: asyncio.StreamWriter | None = None
        try:
            timeout = self.timing.request_timeout_ms / 1000
            reader, stream = await asyncio.wait_for(asyncio.open_connection(*address), timeout)
            writer = stream
            conn = ClientConnection(client_id=f"raft-voter-{self.node_id}")
            stream.write(conn.send_request(body, 0))
            await stream.drain()
            answer = await asyncio.wait_for(self._read_response(reader, conn), timeout)
            code = getattr(answer, "error_code", None)
            if isinstance(code, int):
                self.update_answers.append(code)
                if code != 0:
                    log.info("voter %d: UpdateRaftVoter to voter %d answered %d", self.node_id, leader, code)
        except (OSError, TimeoutError, KraftJbodError) as exc:
            log.info("voter %d: UpdateRaftVoter to voter %d failed: %r", self.node_id, leader, exc)
        finally:
            if writer is not None:
                writer.close()
            self._updating = False

    def _recorded_update(self, node_id: int, endpoint: tuple[str, str, int], supported: tuple[int, int]) -> None:
        """UpdateRaftVoter accepted on this leader: the next VotersRecord names the voter's
        new endpoint, and this voter reaches it there from now on."""
        assert self.codec is not None
        self.codec.update(node_id, endpoint, supported)
        if node_id != self.node_id and node_id in self.addresses:
            self.addresses[node_id] = (endpoint[1], endpoint[2])

    async def _link(self, peer: int, queue: asyncio.Queue[core.Message]) -> None:
        """Rule 2: one request in flight to ``peer``; reconnect on any trouble."""
        writer: asyncio.StreamWriter | None = None
        reader: asyncio.StreamReader | None = None
        conn: ClientConnection | None = None
        timeout = self.timing.retry_ms * 4 / 1000
        while not self._stopped:
            request = await queue.get()
            await self._running.wait()
            if self.isolated or self.node is None:
                continue
            try:
                if writer is None:
                    address = self._address(peer)
                    if address is None:
                        raise ConnectionError(f"no address for voter {peer}")
                    host, port = address
                    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
                    conn = ClientConnection(client_id=f"raft-voter-{self.node_id}")
                assert reader is not None and writer is not None and conn is not None
                _, version, body = wire.request_to_wire(
                    request, cluster_id=self.cluster_id, destination=peer, endpoints=self.endpoints
                )
                writer.write(conn.send_request(body, version))
                await writer.drain()
                answer = await asyncio.wait_for(self._read_response(reader, conn), timeout)
                await self._running.wait()
                if answer is None or self.isolated or self.node is None:
                    raise ConnectionError(f"voter {peer} closed the connection")
                self._learn_leader(answer)
                resp = wire.response_from_wire(request, answer, source=peer)
                if resp is not None:
                    self._dispatch(self.node.receive(peer, resp, _now_ms()))
            except (OSError, TimeoutError, ConnectionError, KraftJbodError) as exc:
                if isinstance(exc, KraftJbodError):
                    self.protocol_errors += 1
                    log.warning("voter %d: bad answer from voter %d: %s", self.node_id, peer, exc)
                if writer is not None:
                    writer.close()
                writer = reader = None
                conn = None
                await asyncio.sleep(min(0.05, self.timing.retry_ms / 1000))
        if writer is not None:
            writer.close()

    def _learn_leader(self, answer: Message) -> None:
        """kraft.version 1: an observer that knows only the bootstrap servers learns the
        leader's endpoint from a Fetch answer's NodeEndpoints (Kafka's does the same)."""
        if self.codec is None:
            return
        for endpoint in getattr(answer, "node_endpoints", None) or ():
            if endpoint.node_id >= 0 and self._address(endpoint.node_id) is None:
                self._learned[endpoint.node_id] = (self.listener, endpoint.host, endpoint.port)

    @staticmethod
    async def _read_response(reader: asyncio.StreamReader, conn: ClientConnection) -> Message | None:
        while True:
            ev = conn.next_event()
            if isinstance(ev, ResponseReceived):
                body: Message = ev.body
                return body
            if isinstance(ev, ConnectionClosed):
                return None
            assert ev is NEED_DATA
            data = await reader.read(65536)
            if not data:
                return None
            conn.receive_data(data)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Rule 3: one inbound connection; a protocol error closes it."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        conn = ServerConnection(
            {k: v for k, v in SERVED.items() if k != ApiKey.API_VERSIONS},
            api_versions_range=SERVED[ApiKey.API_VERSIONS],
        )
        try:
            while True:
                ev = conn.next_event()
                if ev is NEED_DATA:
                    data = await reader.read(65536)
                    if not data:
                        return
                    conn.receive_data(data)
                    continue
                if isinstance(ev, ConnectionClosed):
                    return
                await self._running.wait()
                assert isinstance(ev, RequestReceived | ApiVersionsFallback)
                if isinstance(ev, RequestReceived) and ev.api_key in (ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER):
                    body: Message | None = await self.answer_voter_change(ev.body)
                else:
                    body = self._answer(ev)
                if body is None:
                    return
                writer.write(conn.send_response(ev, body))
                await writer.drain()
        except (KraftJbodError, ConnectionError, OSError) as exc:
            self.protocol_errors += 1
            log.info("voter %d: closing a connection: %s", self.node_id, exc)
        except asyncio.CancelledError:
            pass  # kill(): the connection goes with the voter
        finally:
            writer.close()

    def _answer(self, ev: RequestReceived | ApiVersionsFallback) -> Message | None:
        if ev.api_key == ApiKey.API_VERSIONS or isinstance(ev, ApiVersionsFallback):
            return ApiVersionsResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION if isinstance(ev, ApiVersionsFallback) else 0,
                api_keys=[ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in SERVED.items()],
                throttle_time_ms=0,
                # Kafka lists features whose range starts at 0 (kraft.version's does) only
                # from ApiVersions v4 on; a leader adding a voter asks at v4.
                supported_features=[_KRAFT_FEATURE] if ev.api_version >= 4 else [],
            )
        node = self.node
        if self.isolated or node is None or ev.api_key not in SERVED:
            return None  # dropped: the peer sees a closed connection, as through a cut cable
        if ev.api_key == ApiKey.UPDATE_RAFT_VOTER:
            voter_id = ev.body.voter_id
            return answer_update_voter(
                node,
                ev.body,
                cluster_id=self.cluster_id,
                listener=self.listener,
                endpoints=self.endpoints,
                now_ms=_now_ms(),
                record=None
                if self.codec is None
                else lambda endpoint, supported: self._recorded_update(voter_id, endpoint, supported),
            )
        msg = wire.request_from_wire(ev.api_key, ev.body, cluster_id=self.cluster_id)
        if isinstance(msg, int):
            raise KraftJbodError(f"api {ev.api_key}: error {msg} for a malformed or foreign request")
        source = _SOURCE_OF[type(msg)](msg)
        out = node.receive(source, msg, _now_ms())
        answer = next((s.message for s in out.sends if isinstance(s.message, _RESPONSES)), None)
        self._dispatch(out)
        if answer is None:
            return None
        return wire.response_to_wire(
            answer, version=ev.api_version, endpoints=self.endpoints, timestamp_ms=int(time.time() * 1000)
        )

    # ------------------------------------------------------------------ voter changes

    async def add_voter(
        self, node_id: int, directory_id: uuid.UUID, host: str, port: int, *, ack_when_committed: bool = True
    ) -> tuple[core.Error, str]:
        """AddRaftVoter on this voter (the leader): the answer, after the new voter's
        ApiVersions and the VotersRecord's commit (node.py Rules V1-V9)."""
        node = self.node
        if node is None:
            return core.Error.NOT_LEADER_OR_FOLLOWER, ""
        reply = node.add_voter(VoterKey(node_id, directory_id), _now_ms(), ack_when_committed=ack_when_committed)
        if not reply.pending:
            return reply.error or core.Error.NONE, reply.message
        self._learned[node_id] = (self.listener, host, port)
        supported = await self._kraft_versions_of(host, port)
        if self.node is node:
            node.add_voter_versions(reply.change_id, supported, _now_ms())
            self._dispatch(node.tick(_now_ms()))
        return await self._change_answer(node, reply.change_id)

    async def remove_voter(self, node_id: int, directory_id: uuid.UUID | None) -> tuple[core.Error, str]:
        """RemoveRaftVoter on this voter (the leader): the answer once the change commits."""
        node = self.node
        if node is None:
            return core.Error.NOT_LEADER_OR_FOLLOWER, ""
        reply = node.remove_voter(VoterKey(node_id, directory_id), _now_ms())
        if not reply.pending:
            return reply.error or core.Error.NONE, reply.message
        self._dispatch(node.tick(_now_ms()))
        return await self._change_answer(node, reply.change_id)

    async def _change_answer(self, node: RaftNode, change_id: int) -> tuple[core.Error, str]:
        # The node answers every change: committed, timed out (request_timeout_ms) or the
        # epoch lost; the bound here only covers a voter killed meanwhile.
        deadline = time.monotonic() + self.timing.request_timeout_ms / 1000 * 2 + 1
        while time.monotonic() < deadline:
            for done_id, error, message in node.voter_change_results:
                if done_id == change_id:
                    return error, message
            await asyncio.sleep(_TICK_MS / 1000)
        return core.Error.REQUEST_TIMED_OUT, "the voter stopped before answering"

    async def _kraft_versions_of(self, host: str, port: int) -> tuple[int, int] | None:
        """The kraft.version range a voter-to-be supports (its ApiVersions); None: no answer."""
        timeout = self.timing.request_timeout_ms / 1000
        writer: asyncio.StreamWriter | None = None
        try:
            reader, stream = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
            writer = stream
            conn = ClientConnection(client_id=f"raft-voter-{self.node_id}")
            stream.write(
                conn.send_request(ApiVersionsRequest(client_software_name="kraft-jbod", client_software_version="1"), 4)
            )
            await stream.drain()
            answer = await asyncio.wait_for(self._read_response(reader, conn), timeout)
        except (OSError, TimeoutError, KraftJbodError) as exc:
            log.info("voter %d: no ApiVersions from %s:%d: %r", self.node_id, host, port, exc)
            return None
        finally:
            if writer is not None:
                writer.close()
        if not isinstance(answer, ApiVersionsResponse) or answer.error_code != 0:
            log.info("voter %d: ApiVersions from %s:%d answered %r", self.node_id, host, port, answer)
            return None
        for feature in answer.supported_features:
            if feature.name == "kraft.version":
                return feature.min_version, feature.max_version
        return None

    async def answer_voter_change(self, body: Message) -> Message:
        """AddRaftVoter / RemoveRaftVoter received on the voter listener, in Kafka's order:
        the cluster id, leadership, the voter's key and (Add) an endpoint on our listener,
        then the node's rules."""
        node = self.node
        leads = node is not None and node.is_leader
        if isinstance(body, AddRaftVoterRequest):
            listener = next((li for li in body.listeners if li.name == self.listener), None)
            if body.cluster_id is not None and body.cluster_id != self.cluster_id:
                error, message = core.Error.INCONSISTENT_CLUSTER_ID, ""
            elif not leads:
                error, message = core.Error.NOT_LEADER_OR_FOLLOWER, ""
            elif body.voter_directory_id.int == 0:
                error, message = core.Error.INVALID_REQUEST, "Add voter request didn't include a valid voter"
            elif listener is None:
                error, message = (
                    core.Error.INVALID_REQUEST,
                    f"Add voter request didn't include the endpoint for the default listener {self.listener}",
                )
            else:
                error, message = await self.add_voter(
                    body.voter_id,
                    body.voter_directory_id,
                    listener.host,
                    listener.port,
                    ack_when_committed=body.ack_when_committed,
                )
            return AddRaftVoterResponse(error_code=int(error), error_message=message or None)
        assert isinstance(body, RemoveRaftVoterRequest)
        if body.cluster_id is not None and body.cluster_id != self.cluster_id:
            error, message = core.Error.INCONSISTENT_CLUSTER_ID, ""
        elif not leads:
            error, message = core.Error.NOT_LEADER_OR_FOLLOWER, ""
        elif body.voter_directory_id.int == 0:
            error, message = core.Error.INVALID_REQUEST, "Remove voter request didn't include a valid voter"
        else:
            error, message = await self.remove_voter(body.voter_id, body.voter_directory_id)
        return RemoveRaftVoterResponse(error_code=int(error), error_message=message or None)

    # ------------------------------------------------------------------ observing

    @property
    def role(self) -> Role | None:
        return self.node.role if self.node is not None else None

    def describe(self) -> str:
        return self.node.describe() if self.node is not None else f"node {self.node_id} down"
