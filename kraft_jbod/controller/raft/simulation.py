"""Several :class:`~.node.RaftNode` voters on an in-memory network, in simulated time.

A discrete-event loop: messages take a random latency, may be dropped, are cut by
partitions, and wait in a queue while their receiver is paused. Killing a node throws its
object away; restarting builds a new one over the same log and ``quorum-state`` store, as a
crashed process restarts from its metadata directory. Everything is driven by one seed.

The :class:`Checker` watches the run for the safety properties of a quorum:

* at most one leader per epoch;
* an entry once committed (below a leader's high watermark) is never replaced or lost: every
  later leader holds it, and no log holds a different entry at its offset;
* every acknowledged proposal (committed in the epoch it was proposed) is in the final logs.

Failover figures (election times from a leader's loss to the next leader) come from
:func:`run_failovers`, which the tests and ``tools/bench/bench_quorum_failover.py`` use.

With ``dynamic=True`` the quorum runs at kraft.version 1: every node has a directory id,
the first ``n`` start from that bootstrap voter set (``--initial-controllers``), and
:meth:`Simulation.add_node` starts one with none (``--no-initial-controllers``) that
observes until :meth:`Simulation.add_voter` makes it a voter; :meth:`Simulation.remove_voter`
takes one out. Voter sets travel in the log in :class:`SimVoterCodec`'s encoding.
"""

from __future__ import annotations

import heapq
import itertools
import random
import statistics
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from kraft_jbod.controller.raft.election_store import MemoryElectionStore
from kraft_jbod.controller.raft.messages import Entry, Error, Message, Outbox
from kraft_jbod.controller.raft.node import RaftNode, Role, Timing
from kraft_jbod.controller.raft.replica_log import MemoryLog
from kraft_jbod.controller.raft.voter_set import VoterKey, VoterSet

_VOTERS_TAG = b"VOTERS "


class SimVoterCodec:
    """A voter set as ``VOTERS id:directory,...`` in a control entry (the simulation's
    stand-in for a VotersRecord batch)."""

    def voters_entry(self, offset: int, epoch: int, voters: VoterSet) -> Entry:
        return Entry(offset, epoch, _VOTERS_TAG + b",".join(str(k).encode() for k in voters), control=True)

    def voters_in(self, entry: Entry) -> VoterSet | None:
        if not entry.control or not entry.payload.startswith(_VOTERS_TAG):
            return None
        keys = []
        for item in entry.payload[len(_VOTERS_TAG) :].decode().split(","):
            node, _, directory = item.partition(":")
            keys.append(VoterKey(int(node), uuid.UUID(directory) if directory else None))
        return VoterSet.of(keys)


class SafetyViolation(AssertionError):
    """The quorum broke one of the :class:`Checker`'s properties."""


@dataclass(slots=True)
class Network:
    """Latency, loss and who can reach whom."""

    min_latency_ms: int = 1
    max_latency_ms: int = 5
    drop_rate: float = 0.0
    blocked: set[tuple[int, int]] = field(default_factory=set)  # (from, to) pairs cut

    def cut(self, a: int, b: int) -> None:
        self.blocked |= {(a, b), (b, a)}

    def isolate(self, node: int, others: list[int]) -> None:
        for o in others:
            if o != node:
                self.cut(node, o)

    def heal(self) -> None:
        self.blocked.clear()


@dataclass(slots=True)
class Checker:
    committed: dict[int, Entry] = field(default_factory=dict)
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> leader
    acknowledged: dict[int, bytes] = field(default_factory=dict)  # offset -> payload
    newest_epoch: int = 0

    # Per node: (entries already compared with the committed ones, the log's truncation count then).
    verified: dict[int, tuple[int, int]] = field(default_factory=dict)

    def observe(self, nodes: dict[int, RaftNode]) -> None:
        for node in nodes.values():
            log = node.log
            assert isinstance(log, MemoryLog)
            if node.role is Role.LEADER:
                known = self.leaders.setdefault(node.epoch, node.node_id)
                if known != node.node_id:
                    raise SafetyViolation(f"two leaders in epoch {node.epoch}: {known} and {node.node_id}")
                if node.epoch > self.newest_epoch:
                    # Just elected: it must hold everything committed in earlier epochs.
                    self.newest_epoch = node.epoch
                    for offset, entry in self.committed.items():
                        if offset >= log.end_offset or log.entries[offset] != entry:
                            raise SafetyViolation(f"leader {node.node_id} epoch {node.epoch} lacks committed {entry}")
                for offset in range(len(self.committed), node.high_watermark):
                    self.committed[offset] = log.entries[offset]
            done, truncations = self.verified.get(node.node_id, (0, -1))
            if truncations != log.truncations:
                done = 0  # the log was cut: compare it again from the start
            # A follower may still hold a stale tail at committed offsets until the leader has
            # it truncated; what it has itself marked committed must match.
            upto = min(len(self.committed), node.high_watermark, log.end_offset)
            for offset in range(done, upto):
                if log.entries[offset] != self.committed[offset]:
                    raise SafetyViolation(f"node {node.node_id} holds {log.entries[offset]} at committed {offset}")
            self.verified[node.node_id] = (max(done, upto), log.truncations)


class Simulation:
    """``n`` voters (ids 1..n) on one :class:`Network`, time in integer milliseconds."""

    def __init__(
        self,
        n: int = 3,
        *,
        seed: int = 0,
        timing: Timing | None = None,
        network: Network | None = None,
        dynamic: bool = False,
    ) -> None:
        self.rng = random.Random(seed)
        self.timing = timing or Timing()
        self.network = network or Network()
        self.now = 0
        self.ids = list(range(1, n + 1))
        self.logs = {i: MemoryLog() for i in self.ids}
        self.stores = {i: MemoryElectionStore() for i in self.ids}
        self.dynamic = dynamic
        self.codec = SimVoterCodec() if dynamic else None
        self.directories = {i: uuid.UUID(int=self.rng.getrandbits(128)) for i in self.ids} if dynamic else {}
        # What each node was formatted with: the initial voter set, or empty (a joiner).
        initial = VoterSet.of(VoterKey(i, self.directories.get(i)) for i in self.ids)
        self.bootstrap: dict[int, VoterSet] = {i: initial for i in self.ids}
        self.voter_changes: list[tuple[str, int, Error]] = []  # (add/remove, node, answer)
        self.nodes: dict[int, RaftNode] = {}
        self.paused: set[int] = set()
        self.checker = Checker()
        self._queue: list[tuple[int, int, int, int, Message]] = []  # (due, seq, src, dst, msg)
        self._held: list[tuple[int, int, Message]] = []  # for paused nodes
        self._seq = itertools.count()
        self.delivered = 0
        self.dropped = 0
        for i in self.ids:
            self.start(i)

    # -- node lifecycle

    def start(self, node_id: int) -> None:
        self.nodes[node_id] = RaftNode(
            node_id,
            self.bootstrap[node_id] if self.dynamic else self.ids,
            self.logs[node_id],
            self.stores[node_id],
            rng=random.Random(self.rng.random()),
            now_ms=self.now,
            timing=self.timing,
            directory_id=self.directories.get(node_id),
            voter_codec=self.codec,
            bootstrap_peers=[i for i in self.ids if i != node_id and self.bootstrap[i]],
        )

    def add_node(self, node_id: int) -> None:
        """Start a new node formatted with no voter set (it observes): kraft.version 1 only."""
        if not self.dynamic or node_id in self.logs:
            raise ValueError(f"node {node_id}: needs a dynamic quorum and a new id")
        self.ids.append(node_id)
        self.logs[node_id] = MemoryLog()
        self.stores[node_id] = MemoryElectionStore()
        self.directories[node_id] = uuid.UUID(int=self.rng.getrandbits(128))
        self.bootstrap[node_id] = VoterSet(frozenset())
        self.start(node_id)

    def add_voter(self, node_id: int, limit_ms: int = 10_000) -> Error:
        """Ask the leader to add ``node_id`` (retrying while it answers REQUEST_TIMED_OUT, as
        kafka-metadata-quorum's user would); the final answer."""
        return self._change_voters("add", node_id, limit_ms)

    def remove_voter(self, node_id: int, limit_ms: int = 10_000) -> Error:
        return self._change_voters("remove", node_id, limit_ms)

    def _change_voters(self, kind: str, node_id: int, limit_ms: int) -> Error:
        key = VoterKey(node_id, self.directories[node_id])
        deadline = self.now + limit_ms
        answer = Error.REQUEST_TIMED_OUT
        while self.now < deadline:
            leader = self.leader()
            if leader is None or leader.voter_change_pending:
                self.step(10)
                continue
            if kind == "add":
                reply = leader.add_voter(key, self.now)
                if reply.pending:
                    # The ApiVersions round trip to the new voter: it supports kraft.version 0-1.
                    self.step(self.network.max_latency_ms * 2)
                    leader.add_voter_versions(reply.change_id, (0, 1) if node_id in self.nodes else None, self.now)
            else:
                reply = leader.remove_voter(key, self.now)
            change = reply.change_id
            while self.now < deadline:
                done = [e for c, e, _ in leader.voter_change_results if c == change]
                if done:
                    answer = done[0]
                    break
                self.step(1)
            if answer is not Error.REQUEST_TIMED_OUT:
                break
            self.step(50)
        self.voter_changes.append((kind, node_id, answer))
        return answer

    def kill(self, node_id: int) -> None:
        self.nodes.pop(node_id, None)
        self.paused.discard(node_id)

    def pause(self, node_id: int) -> None:
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        self.paused.discard(node_id)
        held, self._held = self._held, []
        for src, dst, msg in held:
            if dst == node_id:
                self._deliver(src, dst, msg)
            else:
                self._held.append((src, dst, msg))

    def leader(self) -> RaftNode | None:
        live = [n for i, n in self.nodes.items() if n.role is Role.LEADER and i not in self.paused]
        return max(live, key=lambda n: n.epoch) if live else None

    # -- the loop

    def _send(self, src: int, out: Outbox) -> None:
        for send in out.sends:
            if (src, send.destination) in self.network.blocked or self.rng.random() < self.network.drop_rate:
                self.dropped += 1
                continue
            latency = self.rng.randint(self.network.min_latency_ms, self.network.max_latency_ms)
            heapq.heappush(self._queue, (self.now + latency, next(self._seq), src, send.destination, send.message))

    def _deliver(self, src: int, dst: int, msg: Message) -> None:
        node = self.nodes.get(dst)
        if node is None:
            self.dropped += 1
            return
        if dst in self.paused:
            self._held.append((src, dst, msg))
            return
        self.delivered += 1
        self._send(dst, node.receive(src, msg, self.now))

    def step(self, ms: int = 1) -> None:
        """Advance time by ``ms``, delivering what falls due and ticking every live node."""
        end = self.now + ms
        while self.now < end:
            self.now += 1
            while self._queue and self._queue[0][0] <= self.now:
                _, _, src, dst, msg = heapq.heappop(self._queue)
                if (src, dst) in self.network.blocked:
                    self.dropped += 1
                    continue
                self._deliver(src, dst, msg)
            for i, node in list(self.nodes.items()):
                if i not in self.paused:
                    self._send(i, node.tick(self.now))
            self.checker.observe({i: n for i, n in self.nodes.items()})

    def run_until(self, predicate: Callable[[], bool], limit_ms: int) -> bool:
        deadline = self.now + limit_ms
        while self.now < deadline:
            if predicate():
                return True
            self.step()
        return predicate()

    def propose(self, payload: bytes) -> tuple[int, int] | None:
        """Offer a write to the leader: (offset, epoch), or None when there is no leader."""
        node = self.leader()
        if node is None:
            return None
        return node.propose([payload], self.now), node.epoch

    def acknowledge(self, pending: list[tuple[int, int, bytes]]) -> list[tuple[int, int, bytes]]:
        """Move proposals now committed in their own epoch to the checker; return the rest."""
        still = []
        for offset, epoch, payload in pending:
            node = self.leader()
            if node is not None and node.epoch == epoch and offset < node.high_watermark:
                self.checker.acknowledged[offset] = payload
            elif node is not None and node.epoch > epoch:
                continue  # never acknowledged: the client would have seen its write time out
            else:
                still.append((offset, epoch, payload))
        return still

    def lost(self) -> int:
        """Acknowledged proposals missing from the longest live log."""
        logs = [self.logs[i] for i in self.nodes]
        best = max(logs, key=lambda log: log.end_offset)
        return sum(
            1
            for offset, payload in self.checker.acknowledged.items()
            if offset >= best.end_offset or best.entries[offset].payload != payload
        )


@dataclass(slots=True)
class FailoverReport:
    failovers: int
    election_ms: list[int]
    committed: int
    acknowledged: int
    lost: int
    epochs: int
    voters_added: int = 0
    voters_removed: int = 0

    @property
    def median_ms(self) -> float:
        return statistics.median(self.election_ms) if self.election_ms else float("nan")

    @property
    def worst_ms(self) -> int:
        return max(self.election_ms) if self.election_ms else -1


def run_failovers(
    failovers: int,
    *,
    seed: int = 0,
    voters: int = 3,
    how: str = "kill",
    drop_rate: float = 0.0,
    load_ms: int = 300,
    limit_ms: int = 20_000,
    dynamic: bool = False,
) -> FailoverReport:
    """Elect, write for ``load_ms``, lose the leader (``how``: kill, pause, isolate, resign),
    time the next election, bring the old leader back; ``failovers`` times.

    Raises:
        SafetyViolation: a property of :class:`Checker` broke, or no leader within ``limit_ms``.
    """
    sim = Simulation(voters, seed=seed, network=Network(drop_rate=drop_rate), dynamic=dynamic)
    pending: list[tuple[int, int, bytes]] = []
    election_ms: list[int] = []
    counter = itertools.count()
    changed = {"add": 0, "remove": 0}
    if not sim.run_until(lambda: sim.leader() is not None, limit_ms):
        raise SafetyViolation("no first leader")
    for round_no in range(failovers):
        for _ in range(load_ms // 5):
            got = sim.propose(b"w%d" % next(counter))
            if got is not None:
                pending.append((got[0], got[1], b"w%d" % (next(counter) - 1)))
            sim.step(5)
            pending = sim.acknowledge(pending)
        if dynamic:
            _change_voters(sim, round_no, voters, changed, limit_ms)
            pending = sim.acknowledge(pending)
        old = sim.leader()
        if old is None:
            if not sim.run_until(lambda: sim.leader() is not None, limit_ms):
                raise SafetyViolation("no leader")
            continue
        old_id, old_epoch, lost_at = old.node_id, old.epoch, sim.now
        if how == "kill":
            sim.kill(old_id)
        elif how == "pause":
            sim.pause(old_id)
        elif how == "isolate":
            sim.network.isolate(old_id, sim.ids)
        elif how == "resign":
            sim._send(old_id, old.resign(sim.now))
        else:
            raise ValueError(f"unknown failover {how!r}")

        def elected(old_epoch: int = old_epoch) -> bool:
            n = sim.leader()
            return n is not None and n.epoch > old_epoch

        if not sim.run_until(elected, limit_ms):
            raise SafetyViolation(f"no new leader within {limit_ms} ms after losing {old_id}")
        election_ms.append(sim.now - lost_at)
        if how == "kill":
            sim.start(old_id)
        elif how == "pause":
            sim.resume(old_id)
        elif how == "isolate":
            sim.network.heal()
    sim.step(500)
    pending = sim.acknowledge(pending)
    return FailoverReport(
        failovers=len(election_ms),
        election_ms=election_ms,
        committed=len(sim.checker.committed),
        acknowledged=len(sim.checker.acknowledged),
        lost=sim.lost(),
        epochs=max(n.epoch for n in sim.nodes.values()),
        voters_added=changed["add"],
        voters_removed=changed["remove"],
    )


def _change_voters(sim: Simulation, round_no: int, floor: int, changed: dict[str, int], limit_ms: int) -> None:
    """Even rounds: a new node joins and is added. Odd rounds: while more than ``floor`` vote,
    one is removed (every second removal the leader, which then resigns).

    Raises:
        SafetyViolation: the change was refused, or no leader afterwards.
    """
    if round_no % 2 == 0:
        new_id = max(sim.ids) + 1
        sim.add_node(new_id)
        sim.step(200)  # it finds the leader and catches up as an observer
        answer = sim.add_voter(new_id, limit_ms)
        kind = "add"
    else:
        leader = sim.leader()
        if leader is None or len(leader.voters) <= floor:
            return
        victim = leader.node_id if round_no % 4 == 3 else max(v for v in leader.voters if v != leader.node_id)
        answer = sim.remove_voter(victim, limit_ms)
        kind = "remove"
    if answer is not Error.NONE:
        raise SafetyViolation(f"{kind} voter refused: {answer.name}")
    changed[kind] += 1
    if not sim.run_until(lambda: sim.leader() is not None, limit_ms):
        raise SafetyViolation(f"no leader after {kind}")
