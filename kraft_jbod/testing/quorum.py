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
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import TracebackType

from kraft_jbod.controller.raft.file_log import FileReplicaLog
from kraft_jbod.controller.raft.messages import Entry
from kraft_jbod.controller.raft.node import NotLeaderError, Role, Timing
from kraft_jbod.controller.raft.voter import RaftVoter

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
#: Faster than Kafka's defaults (1 s election, 2 s fetch timeout) so tests run in seconds,
#: slow enough for a loaded 2-core machine.
TEST_TIMING = Timing(election_timeout_ms=300, fetch_timeout_ms=600, election_backoff_max_ms=200, retry_ms=100)


class LocalQuorum:
    def __init__(
        self, directory: Path, *, voters: int = 3, timing: Timing = TEST_TIMING, fsync: bool = False, seed: int = 0
    ) -> None:
        self.directory = directory
        self.ids = list(range(1, voters + 1))
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


def _ms() -> int:
    return time.monotonic_ns() // 1_000_000
