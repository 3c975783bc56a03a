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
from kraft_jbod.controller.raft.voter_updates import answer_update_voter
from kraft_jbod.errors import KraftJbodError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.leader_change_message import LeaderChangeMessage
from kraft_jbod.messages.leader_change_message import Voter as LeaderChangeVoter
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
}
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
    ) -> None:
        self.node_id = node_id
        self.addresses = dict(voters)
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

    @property
    def endpoints(self) -> dict[int, tuple[str, str, int]]:
        return {i: (self.listener, h, p) for i, (h, p) in self.addresses.items()}

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
        self.node = RaftNode(
            self.node_id,
            self.addresses,
            self.log,
            FileElectionStore(self.directory),
            rng=self.rng,
            now_ms=_now_ms(),
            timing=self.timing,
            start_of_epoch=leader_change_payload,
        )
        for peer in self.addresses:
            if peer != self.node_id:
                queue: asyncio.Queue[core.Message] = asyncio.Queue(_LINK_QUEUE)
                self._links[peer] = queue
                self._spawn(self._link(peer, queue))
        self._spawn(self._ticker())

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
            queue = self._links.get(send.destination)
            if queue is None or isinstance(send.message, _RESPONSES):
                continue
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
            await asyncio.sleep(_TICK_MS / 1000)

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
                    host, port = self.addresses[peer]
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
            )
        node = self.node
        if self.isolated or node is None or ev.api_key not in SERVED:
            return None  # dropped: the peer sees a closed connection, as through a cut cable
        if ev.api_key == ApiKey.UPDATE_RAFT_VOTER:
            return answer_update_voter(
                node, ev.body, cluster_id=self.cluster_id, listener=self.listener, endpoints=self.endpoints
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

    # ------------------------------------------------------------------ observing

    @property
    def role(self) -> Role | None:
        return self.node.role if self.node is not None else None

    def describe(self) -> str:
        return self.node.describe() if self.node is not None else f"node {self.node_id} down"
