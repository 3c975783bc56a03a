"""Benchmark: the mock controller against Kafka's own KRaft controller, phase by phase.

Both controllers run alone (no brokers: :class:`~kraft_jbod.realkafka.cluster.RealCluster`
with ``brokers=0``), Kafka's from the cached broker build, at metadata.version 4.3-IV0, and
receive the same requests over the wire from one asyncio client (our codec). Per phase the
controller process's CPU (user + system of every thread, from ``/proc/PID/stat``, read once
the process has gone quiet after the last answer) and the wall time from the first request
to the last answer are recorded. Every phase runs twice on fresh objects (other brokers,
other topics): ``cold`` first, then ``warm``, since Kafka's JIT compiles during the first.

Phases (issue 28):

* ``start``: process start (its start time in ``/proc``) -> the first heartbeat answered
  without error; no warm repetition within a round (each round is a fresh start).
* ``register``: 100 brokers register (v4, two directories for brokers 1-2, one for the
  rest) and heartbeat until unfenced; warm: brokers 101-200.
* ``heartbeats``: brokers 1-100 heartbeat every 2 s, staggered, each waiting for its
  answer (``--heartbeat-seconds``, 60 by default): CPU, p50/p99 latency, the load average
  at its start and end. The heartbeats come from a process of their own (one connection
  per broker, frames encoded once), so the measuring process adds nothing to them.
  ``--heartbeat-brokers N`` makes it brokers 1-N (those the register phase did not make
  register first, unmeasured; the issue's latency target is at 1,000).
* ``create``: CreateTopics of 100,000 partitions (manual assignments, 3 replicas), 9 topics
  of 1,000 partitions per request (at most 10,000 partitions and records per request, as
  Kafka's controller bounds); warm: 100,000 more.
* ``assign``: AssignReplicasToDirs of broker 1's 15,000 replicas (7,500 to each
  directory), in requests of 2,250 partitions as Kafka's broker sends them; warm: broker 2.
* ``offline7500``: broker 1's first directory (7,500 replicas, a third of them led by
  it) reported offline in a heartbeat, until its answer; warm: broker 2.
* ``offline50000``: the only directory of broker 3 (50,000 replicas); warm: broker 4.
* ``restart``: SIGTERM, start, until a heartbeat is answered without error (the log of
  200,000 partitions read back); warm: a second restart.
* ``catchup``: two real Kafka brokers (from the same build) start with empty metadata logs
  and catch up from the controller's log of the 100,000 partitions (200,000 after the warm
  ``create``), until both are unfenced (their own metadata lists both); warm: two other
  brokers, the first two stopped. The wall time includes the brokers' JVM start, the same
  on both sides.

``--phases`` measures some of them (``start`` always): the phases a chosen one stands on
still run, unreported (``create`` before ``assign``, ``offline*`` and ``restart``;
``assign`` before ``offline7500``; ``register`` always), and ``heartbeats`` is skipped
unless chosen.

Rounds alternate which controller goes first. The load average is recorded at each phase.
Prints, per phase, each side's median CPU and wall with their range, and the per-round
ratios mock/Kafka (median and range).

    python -m tools.bench.bench_vs_kafka [--rounds 3] [--heartbeat-seconds 60] [--phases register,assign]
        [--kafka DIR] [--json FILE]
    python -m tools.bench.bench_vs_kafka --from-json FILE   # the report of a saved run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import struct
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from kraft_jbod import codec
from kraft_jbod.controller import features as fv
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener
from kraft_jbod.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from kraft_jbod.realkafka.cluster import ClusterSpec, RealCluster
from kraft_jbod.realkafka.distribution import open_distribution
from kraft_jbod.wire.message import Message
from tools.kafka_broker import locate

FAR_AHEAD = 1 << 40
BROKERS = 100
PARTITIONS = 100_000
PER_TOPIC = 1_000
TOPICS_PER_REQUEST = 9
HALF = PARTITIONS // 2
SMALL = 15_000  # replicas of broker 1 (2): AssignReplicasToDirs, half of them failed
ASSIGN_BATCH = 2_250  # Kafka's broker: AssignmentsManager's most partitions per request
# What each phase needs done before it (run unreported when not chosen).
NEEDS = {
    "assign": {"create"},
    "offline7500": {"create", "assign"},
    "offline50000": {"create"},
    "restart": {"create"},
    "catchup": {"create"},
}
PHASES = (
    "start",
    "register",
    "heartbeats",
    "create",
    "assign",
    "offline7500",
    "offline50000",
    "restart",
    "catchup",
)
# Real brokers of the catchup phase: ids past every broker the other phases register.
CATCHUP_IDS = {"cold": (9001, 9002), "warm": (9003, 9004)}
_TICK = os.sysconf("SC_CLK_TCK")
_SIZE = struct.Struct(">i")


def _dirs(broker: int) -> list[uuid.UUID]:
    count = 2 if broker in (1, 2) else 1
    return [uuid.UUID(int=(broker << 64) | (0xD0 + i)) for i in range(count)]


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def _proc_start(pid: int) -> float:
    """The process's start on the monotonic clock (``/proc`` counts ticks since boot)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[19]) / _TICK


def _since_boot() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


def _quiet_cpu(pid: int) -> float:
    """The process's CPU once it stops working after an answer (at most 10 s of waiting)."""
    last = _proc_cpu(pid)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = _proc_cpu(pid)
        if now - last <= 0.02:
            return now
        last = now
    return last


class Conn:
    """One connection, one request in flight."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str) -> None:
        self.reader, self.writer, self.name = reader, writer, name
        self.correlation = 0

    @classmethod
    async def open(cls, address: tuple[str, int], name: str) -> Conn:
        reader, writer = await asyncio.open_connection(*address, limit=1 << 26)
        return cls(reader, writer, name)

    async def call(self, body: Message, version: int) -> Any:
        self.correlation += 1
        self.writer.write(codec.encode_request(body, version, self.correlation, self.name))
        (size,) = _SIZE.unpack(await self.reader.readexactly(4))
        payload = await self.reader.readexactly(size)
        assert body.API_KEY is not None
        return codec.decode_response(payload, body.API_KEY, version).body

    def close(self) -> None:
        self.writer.close()


def _replicas(i: int) -> list[int]:
    """Partition ``i`` of the first 100,000: brokers 1/3 in the first half, 2/4 in the
    second; each list rotated so that a third of the partitions are led by each replica."""
    half, j = divmod(i, HALF)
    small, big = 1 + half, 3 + half
    other = 5 + (j * 7) % (BROKERS - 4)
    third = 5 + (j * 7 + 1) % (BROKERS - 4)
    base = [small, big, other] if j < SMALL else [big, other, third]
    k = j % 3
    return base[k:] + base[:k]


def _replicas_warm(i: int) -> list[int]:
    return [5 + (i + k * 31) % (BROKERS - 4) for k in range(3)]


class Side:
    """One controller, its cluster, its epochs and topic ids."""

    def __init__(self, kind: str, cluster: RealCluster) -> None:
        self.kind = kind
        self.cluster = cluster
        assert cluster.controller is not None
        self.address = cluster.controller.address
        self.epochs: dict[int, int] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.conns: dict[int, Conn] = {}

    @property
    def pid(self) -> int:
        assert self.cluster.controller is not None and self.cluster.controller.process.pid is not None
        return self.cluster.controller.process.pid

    async def conn(self, broker: int) -> Conn:
        if broker not in self.conns:
            self.conns[broker] = await Conn.open(self.address, f"b{broker}")
        return self.conns[broker]

    def drop_conns(self) -> None:
        for c in self.conns.values():
            c.close()
        self.conns.clear()

    async def heartbeat(self, broker: int, offline: list[uuid.UUID] | None = None) -> Any:
        req = BrokerHeartbeatRequest(broker, self.epochs[broker], FAR_AHEAD, offline_log_dirs=offline or [])
        return await (await self.conn(broker)).call(req, 1)


def _measure(side: Side, loop: asyncio.AbstractEventLoop, work: Coroutine[Any, Any, Any]) -> dict[str, Any]:
    """Runs ``work``; the controller's CPU for it (until it goes quiet), wall and load."""
    cpu0, load = _proc_cpu(side.pid), os.getloadavg()[0]
    t0 = time.monotonic()
    extra = loop.run_until_complete(work)
    wall = time.monotonic() - t0
    cpu = _quiet_cpu(side.pid) - cpu0
    return {"cpu": cpu, "wall": wall, "load": load, **(extra or {})}


async def _register(side: Side, brokers: Sequence[int]) -> None:
    feats = [Feature(f.name, f.min_supported_version, f.max_supported_version) for f in fv.registration_features(4)]

    async def one(b: int) -> None:
        req = BrokerRegistrationRequest(
            broker_id=b,
            cluster_id=side.cluster.cluster_id,
            incarnation_id=uuid.UUID(int=b),
            listeners=[Listener("PLAINTEXT", "localhost", 9100 + b, 0)],
            features=feats,
            log_dirs=_dirs(b),
        )
        resp = await (await side.conn(b)).call(req, 4)
        if resp.error_code:
            raise RuntimeError(f"{side.kind}: broker {b} registration: {resp}")
        side.epochs[b] = resp.broker_epoch
        for _ in range(200):
            hb = await side.heartbeat(b)
            if hb.error_code:
                raise RuntimeError(f"{side.kind}: broker {b} heartbeat: {hb}")
            if not hb.is_fenced:
                return
            await asyncio.sleep(0.05)
        raise RuntimeError(f"{side.kind}: broker {b} never unfenced")

    await asyncio.gather(*(one(b) for b in brokers))


class _Beats(asyncio.Protocol):
    """One broker's heartbeats on its own connection, in the load process: one every
    ``interval`` from its first slot, each waiting for its answer (as a broker does), the
    next at the following slot; the latency of each from its send to its whole answer."""

    def __init__(self, broker: int, epoch: int, lat: list[float], errors: list[str]) -> None:
        self.broker = broker
        self.frame = bytearray(
            codec.encode_request(BrokerHeartbeatRequest(broker, epoch, FAR_AHEAD), 1, 0, f"b{broker}")
        )
        self.lat, self.errors = lat, errors
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()
        self.done = self.loop.create_future()
        self.sent = 0.0
        self.correlation = 0
        self.end = 0.0
        self.interval = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def begin(self, first: float, end: float, interval: float) -> None:
        """Send at ``first`` (the monotonic clock), then every ``interval`` until ``end``."""
        self.end, self.interval = end, interval
        self.loop.call_at(self.loop.time() + max(0.0, first - time.monotonic()), self._send)

    def _send(self) -> None:
        if time.monotonic() >= self.end or self.transport is None or self.transport.is_closing():
            self._finish()
            return
        self.correlation += 1
        _SIZE.pack_into(self.frame, 8, self.correlation)  # after the size, api key and version
        self.sent = time.perf_counter()
        self.transport.write(bytes(self.frame))

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) < 4:
            return
        (size,) = _SIZE.unpack_from(self.buf, 0)
        if len(self.buf) < 4 + size:
            return
        now = time.perf_counter()
        payload = bytes(self.buf[4 : 4 + size])
        del self.buf[: 4 + size]
        self.lat.append(now - self.sent)
        body = codec.decode_response(payload, BrokerHeartbeatRequest.API_KEY or 0, 1).body
        if body.error_code or body.is_fenced:
            self.errors.append(f"heartbeat {self.broker}: {body}")
            self._finish()
            return
        wait = self.interval - (now - self.sent) % self.interval
        self.loop.call_later(wait, self._send)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.errors.append(f"heartbeat {self.broker}: connection lost ({exc})")
        self._finish()

    def _finish(self) -> None:
        if not self.done.done():
            self.done.set_result(None)
        if self.transport is not None:
            self.transport.close()


async def _heartbeat_load(
    address: tuple[str, int], epochs: dict[int, int], seconds: float, interval: float, ready: Any, go: Any
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    lat: list[float] = []
    errors: list[str] = []
    beats: list[_Beats] = []
    for b, epoch in sorted(epochs.items()):
        _, proto = await loop.create_connection(lambda b=b, e=epoch: _Beats(b, e, lat, errors), *address)  # type: ignore[misc]
        beats.append(proto)
    ready.put(len(beats))
    while go.value == 0.0:
        await asyncio.sleep(0.005)
    start = float(go.value)
    for i, proto in enumerate(beats):
        proto.begin(start + i * interval / len(beats), start + seconds, interval)
    await asyncio.gather(*(proto.done for proto in beats))
    lat.sort()
    return {
        "count": len(lat),
        "p50_ms": 1000 * statistics.median(lat) if lat else float("nan"),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"),
        "errors": errors[:5],
        "load_end": os.getloadavg()[0],
    }


def _heartbeat_process(
    address: tuple[str, int], epochs: dict[int, int], seconds: float, interval: float, ready: Any, go: Any, out: Any
) -> None:
    out.put(asyncio.run(_heartbeat_load(address, epochs, seconds, interval, ready, go)))


def _heartbeats(side: Side, seconds: float, brokers: int = BROKERS, interval: float = 2.0) -> dict[str, Any]:
    """Brokers 1-``brokers`` heartbeat for ``seconds``, driven from a process of their own
    (a lean protocol per connection, frames encoded once) so the measuring process and its
    event loop add nothing to the latencies; the controller's CPU from the first send to
    its going quiet; the load average at the start and at the end."""
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    go = ctx.Value("d", 0.0)
    epochs = {b: side.epochs[b] for b in range(1, brokers + 1)}
    proc = ctx.Process(target=_heartbeat_process, args=(side.address, epochs, seconds, interval, ready, go, results))
    proc.start()
    try:
        if ready.get(timeout=300) != brokers:
            raise RuntimeError(f"{side.kind}: the heartbeat process did not connect every broker")
        cpu0, load = _proc_cpu(side.pid), os.getloadavg()[0]
        t0 = time.monotonic()
        go.value = t0
        got = results.get(timeout=seconds + 300)
        wall = time.monotonic() - t0
        cpu = _quiet_cpu(side.pid) - cpu0
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    if got["errors"]:
        raise RuntimeError(f"{side.kind}: {got['errors']}")
    return {"cpu": cpu, "wall": wall, "load": load, **got}


async def _create(side: Side, prefix: str, layout: Callable[[int], list[int]]) -> None:
    c = await side.conn(0)
    names = [f"{prefix}{t}" for t in range(PARTITIONS // PER_TOPIC)]
    for start in range(0, len(names), TOPICS_PER_REQUEST):
        topics = [
            CreatableTopic(
                name=name,
                num_partitions=-1,
                replication_factor=-1,
                assignments=[CreatableReplicaAssignment(p, layout(t * PER_TOPIC + p)) for p in range(PER_TOPIC)],
            )
            for t, name in enumerate(names[start : start + TOPICS_PER_REQUEST], start)
        ]
        resp = await c.call(CreateTopicsRequest(topics=topics, timeout_ms=120_000), 7)
        for r in resp.topics:
            if r.error_code:
                raise RuntimeError(f"{side.kind}: create {r.name}: {r.error_code} {r.error_message}")
            side.topic_ids[r.name] = r.topic_id


def _small_parts(half: int) -> list[tuple[str, int]]:
    """(topic, partition) of broker 1's (half 0) or 2's (half 1) replicas."""
    out = []
    for j in range(SMALL):
        i = half * HALF + j
        out.append((f"t{i // PER_TOPIC}", i % PER_TOPIC))
    return out


async def _assign(side: Side, broker: int) -> None:
    parts = _small_parts(broker - 1)
    d0, d1 = _dirs(broker)
    targets = [(d0 if k < SMALL // 2 else d1, tp) for k, tp in enumerate(parts)]
    c = await side.conn(broker)
    for start in range(0, len(targets), ASSIGN_BATCH):
        chunk = targets[start : start + ASSIGN_BATCH]
        by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
        for d, (topic, p) in chunk:
            by_dir.setdefault(d, {}).setdefault(side.topic_ids[topic], []).append(p)
        req = AssignReplicasToDirsRequest(
            broker_id=broker,
            broker_epoch=side.epochs[broker],
            directories=[
                DirectoryData(d, [TopicData(t, [PartitionData(p) for p in ps]) for t, ps in topics.items()])
                for d, topics in by_dir.items()
            ],
        )
        resp = await c.call(req, 0)
        if resp.error_code or any(p.error_code for d in resp.directories for t in d.topics for p in t.partitions):
            raise RuntimeError(f"{side.kind}: assign on broker {broker} refused: {str(resp)[:400]}")


async def _offline(side: Side, broker: int) -> None:
    hb = await side.heartbeat(broker, [_dirs(broker)[0]])
    if hb.error_code:
        raise RuntimeError(f"{side.kind}: offline heartbeat of {broker}: {hb}")


async def _ready(side: Side, broker: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            side.drop_conns()
            hb = await side.heartbeat(broker)
            if hb.error_code == 0:
                return
        except (OSError, asyncio.IncompleteReadError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{side.kind}: not answering heartbeats {timeout} s after a start")
        await asyncio.sleep(0.05)


def _restart(side: Side, loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
    node = side.cluster.controller
    assert node is not None
    side.drop_conns()
    side.cluster.restart_controller()
    started = _proc_start(side.pid)
    loop.run_until_complete(_ready(side, 5))
    wall = _since_boot() - started
    return {"cpu": _quiet_cpu(side.pid), "wall": wall, "load": os.getloadavg()[0]}


async def _catchup(side: Side, ids: Sequence[int]) -> None:
    """Start real brokers ``ids`` (fresh, empty metadata logs) and wait until both are
    unfenced; the blocking cluster calls run in a thread so the loop stays free."""

    def run() -> None:
        for b in ids:
            side.cluster.add_broker(b, start=False, log_dirs=1)
        for b in ids:
            side.cluster.start_broker(b, wait=False)
        for b in ids:
            side.cluster.wait_started(b)
        side.cluster.wait_unfenced(list(ids), timeout=900)

    await asyncio.to_thread(run)


def to_run(chosen: set[str]) -> set[str]:
    """The chosen phases, what they stand on, and ``start`` and ``register``."""
    run = {"start", "register", *chosen}
    for phase in chosen:
        run |= NEEDS.get(phase, set())
    return run


def one_side(
    kind: str,
    dist: Any,
    root: Path,
    heartbeat_seconds: float,
    heap_mb: int,
    chosen: set[str] | None = None,
    heartbeat_brokers: int = BROKERS,
) -> dict[str, Any]:
    chosen = set(PHASES) if chosen is None else chosen
    run = to_run(chosen)
    spec = ClusterSpec(
        brokers=0,
        controller=kind,
        metadata_version="4.3-IV0",
        heap_mb=heap_mb,
        start_timeout=900.0,  # the catchup phase's brokers replay 100,000-200,000 partitions first
        controller_overrides={"broker.session.timeout.ms": "3600000"}
        | ({"auto.leader.rebalance.enable": "false"} if kind == "kafka" else {}),
    )
    out: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    with RealCluster(dist, root / kind, spec) as cluster:
        side = Side(kind, cluster)
        started = _proc_start(side.pid)
        # a first registration tells when the controller answers (Kafka writes its
        # bootstrap records once it listens)
        side.epochs[BROKERS + 101] = -1

        async def first_answer() -> None:
            deadline = time.monotonic() + 300
            while True:
                side.drop_conns()
                try:
                    await _register(side, range(BROKERS + 101, BROKERS + 102))
                    return
                except (RuntimeError, OSError, asyncio.IncompleteReadError):
                    if time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.05)

        loop.run_until_complete(first_answer())
        out["start/cold"] = {
            "cpu": _quiet_cpu(side.pid),
            "wall": _since_boot() - started,
            "load": os.getloadavg()[0],
        }
        side.drop_conns()
        for label, brokers in (("cold", range(1, BROKERS + 1)), ("warm", range(BROKERS + 1, 2 * BROKERS + 1))):
            out[f"register/{label}"] = _measure(side, loop, _register(side, brokers))
        if "heartbeats" in run:
            # brokers beyond those the register phase made register first, unmeasured
            extra = [b for b in range(1, heartbeat_brokers + 1) if b not in side.epochs]
            for start in range(0, len(extra), BROKERS):
                loop.run_until_complete(_register(side, extra[start : start + BROKERS]))
            for label in ("cold", "warm"):
                out[f"heartbeats/{label}"] = _heartbeats(side, heartbeat_seconds, heartbeat_brokers)
        if "create" in run:
            out["create/cold"] = _measure(side, loop, _create(side, "t", _replicas))
            out["create/warm"] = _measure(side, loop, _create(side, "w", _replicas_warm))
        if "assign" in run:
            for label, broker in (("cold", 1), ("warm", 2)):
                out[f"assign/{label}"] = _measure(side, loop, _assign(side, broker))
        if "offline7500" in run:
            for label, broker in (("cold", 1), ("warm", 2)):
                out[f"offline7500/{label}"] = _measure(side, loop, _offline(side, broker))
        if "offline50000" in run:
            for label, broker in (("cold", 3), ("warm", 4)):
                out[f"offline50000/{label}"] = _measure(side, loop, _offline(side, broker))
        if "catchup" in run:
            for label, ids in CATCHUP_IDS.items():
                out[f"catchup/{label}"] = _measure(side, loop, _catchup(side, ids))
                for b in ids:
                    side.cluster.stop_broker(b)
        if "restart" in run:
            for label in ("cold", "warm"):
                out[f"restart/{label}"] = _restart(side, loop)
        out["rss_mb"] = cluster.resident_mb().get("controller")
        side.drop_conns()
    loop.close()
    return {k: v for k, v in out.items() if "/" not in k or k.split("/")[0] in chosen | {"start"}}


def _fmt(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def report(rounds: list[dict[str, dict[str, Any]]]) -> list[str]:
    """A markdown table: per phase, each side's median (range) and the per-round ratios."""
    lines = [
        "| phase | mock CPU s | Kafka CPU s | CPU mock/Kafka | mock wall s | Kafka wall s | wall mock/Kafka |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = [k for k in rounds[0]["mock"] if "/" in k]
    for key in keys:
        cols = []
        for what in ("cpu", "wall"):
            m = [r["mock"][key][what] for r in rounds]
            k = [r["kafka"][key][what] for r in rounds]
            ratio = [a / b for a, b in zip(m, k, strict=True) if b > 0]
            cols.append(f"{_fmt(m)} | {_fmt(k)} | **{_fmt(ratio)}**")
        lines.append(f"| {key} | {cols[0]} | {cols[1]} |")
    lines.append("")
    for kind in ("mock", "kafka"):
        for label in ("cold", "warm"):
            if f"heartbeats/{label}" not in rounds[0][kind]:
                continue
            hb = [r[kind][f"heartbeats/{label}"] for r in rounds]
            loads = [h["load"] for h in hb] + [h["load_end"] for h in hb if "load_end" in h]
            lines.append(
                f"* heartbeat latency, {kind} {label}: p50 {_fmt([h['p50_ms'] for h in hb])} ms,"
                f" p99 {_fmt([h['p99_ms'] for h in hb])} ms ({hb[0]['count']} heartbeats a round;"
                f" load average {min(loads):.1f}-{max(loads):.1f})"
            )
    loads = [v["load"] for r in rounds for side in r.values() for v in side.values() if isinstance(v, dict)]
    lines.append(f"* load average (1 min) at the phases: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    rss = {kind: [r[kind]["rss_mb"] for r in rounds if r[kind].get("rss_mb")] for kind in ("mock", "kafka")}
    lines.append(f"* controller RSS at the end, MB: mock {_fmt(rss['mock'])}, Kafka {_fmt(rss['kafka'])}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--heartbeat-seconds", type=float, default=60.0, help="each heartbeat phase (issue: 60)")
    ap.add_argument("--kafka", type=Path, default=None, help="Kafka build or distribution (default: the cached build)")
    ap.add_argument("--heap-mb", type=int, default=1024, help="Kafka controller heap")
    ap.add_argument("--only", choices=("mock", "kafka"), default=None, help="one side only (no ratios)")
    ap.add_argument(
        "--heartbeat-brokers", type=int, default=BROKERS, help="brokers heartbeating in that phase (issue: 1,000)"
    )
    ap.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, of {','.join(PHASES)} (default: all)")
    ap.add_argument("--json", type=Path, default=None, help="write every figure there")
    ap.add_argument("--from-json", type=Path, default=None, help="print the report of a saved run")
    args = ap.parse_args(argv)
    if args.from_json is not None:
        print("\n".join(report(json.loads(args.from_json.read_text()))))
        return 0
    if args.rounds < 1 or args.heartbeat_seconds <= 0 or args.heartbeat_brokers < 1:
        raise SystemExit("--rounds and --heartbeat-brokers must be >= 1 and --heartbeat-seconds > 0")
    chosen = {p.strip() for p in args.phases.split(",") if p.strip()}
    if not chosen or chosen - set(PHASES):
        raise SystemExit(f"--phases: choose among {', '.join(PHASES)} (got {args.phases!r})")
    dist = open_distribution(args.kafka or locate())
    rounds: list[dict[str, dict[str, Any]]] = []
    kinds = [args.only] if args.only else ["mock", "kafka"]
    with tempfile.TemporaryDirectory(prefix="bench-vs-kafka-") as tmp:
        for n in range(args.rounds):
            order = kinds if n % 2 == 0 else kinds[::-1]
            result: dict[str, dict[str, Any]] = {}
            for kind in order:
                t = time.monotonic()
                result[kind] = one_side(
                    kind,
                    dist,
                    Path(tmp) / f"r{n}",
                    args.heartbeat_seconds,
                    args.heap_mb,
                    chosen,
                    args.heartbeat_brokers,
                )
                print(f"round {n + 1} {kind}: {time.monotonic() - t:.0f} s", flush=True)
            rounds.append(result)
            if args.json:
                args.json.write_text(json.dumps(rounds, indent=1))
    if args.only:
        for key, v in rounds[0][args.only].items():
            print(key, v)
        return 0
    print("\n".join(report(rounds)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
