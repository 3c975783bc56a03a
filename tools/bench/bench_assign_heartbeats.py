"""Heartbeat latency while one broker assigns 10^6 replicas to directories at once.

Issue 26: an AssignReplicasToDirs naming 10^6 partitions held the controller's event loop
for seconds, and every other broker's heartbeat waited (a session timeout away from being
fenced). The controller now takes such a request in slices (``controller/server.py``
Rule 4). This benchmark shows the effect on the heartbeats, in one run on one machine:

* Setup: a metadata snapshot with broker 1 (two directories) holding ``--partitions``
  single-replica partitions in its first directory, and ``--brokers`` more brokers, all
  unfenced. The controller (the real ``kraft-jbod controller`` process) starts from it.
* ``idle``: every other broker heartbeats on its own connection every ``--interval-ms``
  (staggered), for ``--idle`` seconds.
* ``during``: they keep heartbeating on that schedule while broker 1 sends one
  AssignReplicasToDirs moving every replica to its second directory; counted from the send
  until its answer arrives.

Each broker heartbeats as Kafka's brokers do (BrokerLifecycleManager): the next heartbeat
goes ``--interval-ms`` after the previous answer, so a stalled controller shows as long
latencies, and the gap between two contacts, which is what a session timeout measures, is
latency plus interval. Both modes run on fresh copies of
the same directory: ``slices`` (the controller as shipped, or with ``--slice N``
partitions per slice) and ``one pass`` (the same controller with the slice size set past
the request's size, i.e. the behaviour before slicing).
Wall-clock figures on a shared machine move with its load; compare the two modes of one
run. Nothing is asserted.

Run: ``python -m tools.bench.bench_assign_heartbeats [--partitions 1000000] [--brokers 100]
[--interval-ms 500] [--slice N] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kraft_jbod import codec
from kraft_jbod.controller import features as fv
from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller.log import METADATA_PARTITION_DIR
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kraft_jbod.messages.topic_record import TopicRecord

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
PER_TOPIC = 1000
_BE_i = struct.Struct(">i")
D0, D1, D2 = (uuid.UUID(int=(0xB1 << 64) | i) for i in (1, 2, 3))

# The controller with another slice size (1 << 62: past any request, the behaviour before).
_WITH_SLICE = (
    "import sys, kraft_jbod.controller.state as s; s.MAX_PARTITIONS_PER_SLICE = {}; "
    "from kraft_jbod.cli import main; sys.exit(main(sys.argv[1:]))"
)


def _build(directory: Path, partitions: int, brokers: int) -> tuple[dict[int, int], list[uuid.UUID]]:
    """Write the snapshot; return every broker's epoch and the topic ids."""
    state = ControllerState(cluster_id=CLUSTER, node_id=3000)
    offset = 0

    def apply(record: Any, version: int) -> None:
        nonlocal offset
        state.apply(offset, record, version)
        offset += 1

    apply(FeatureLevelRecord(name="metadata.version", feature_level=fv.DEFAULT_LEVEL), 0)
    reg_version = fv.register_broker_record_version(fv.DEFAULT_LEVEL)
    epochs: dict[int, int] = {}
    for b in range(1, brokers + 2):
        dirs = [D0, D1] if b == 1 else [uuid.UUID(int=(0xB2 << 64) | b)]
        epochs[b] = offset
        endpoint = BrokerEndpoint("PLAINTEXT", "127.0.0.1", 9092 + b, 0)
        apply(
            RegisterBrokerRecord(
                broker_id=b,
                incarnation_id=uuid.UUID(int=b + 1),
                broker_epoch=offset,
                end_points=[endpoint],
                fenced=False,
                log_dirs=dirs,
            ),
            reg_version,
        )
    pv = fv.partition_record_version(fv.DEFAULT_LEVEL)
    tids = []
    for t in range(-(-partitions // PER_TOPIC)):
        tid = uuid.UUID(int=(0x7777 << 64) | t)
        tids.append(tid)
        apply(TopicRecord(name=f"t{t}", topic_id=tid), 0)
        for p in range(min(PER_TOPIC, partitions - t * PER_TOPIC)):
            apply(
                PartitionRecord(
                    partition_id=p, topic_id=tid, replicas=[1], isr=[1], leader=1, leader_epoch=0, directories=[D0]
                ),
                pv,
            )
    part_dir = directory / METADATA_PARTITION_DIR
    part_dir.mkdir(parents=True)
    snap.write_image_snapshot(part_dir, state.image, epoch=1, last_contained_timestamp=0, fsync=False)
    return epochs, tids


def _start(cmd: list[str]) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    m = re.fullmatch(r"listening on (?:[A-Z0-9_.-]+ )?(\S+):(\d+)\n", line)
    if not m:
        proc.kill()
        raise SystemExit(f"controller did not start: {line!r}")
    return proc, (m.group(1), int(m.group(2)))


class _Frames(asyncio.Protocol):
    """Reads size-prefixed response frames; calls ``on_frame`` with each arrival time."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.t: asyncio.Transport | None = None
        self.arrivals: asyncio.Queue[float] = asyncio.Queue()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4:
            (size,) = _BE_i.unpack_from(self.buf, 0)
            if len(self.buf) < 4 + size:
                return
            del self.buf[: 4 + size]
            self.arrivals.put_nowait(time.perf_counter())


async def _heartbeats(
    proto: _Frames, frame: bytes, first: float, interval: float, stop: asyncio.Event
) -> list[tuple[float, float]]:
    """One broker as Kafka's BrokerLifecycleManager runs it: a heartbeat, its answer, then
    the next one ``interval`` after that answer, until ``stop``; (send time, latency) of each."""
    assert proto.t is not None
    out: list[tuple[float, float]] = []
    await asyncio.sleep(max(0.0, first - time.perf_counter()))
    while not stop.is_set():
        sent = time.perf_counter()
        proto.t.write(frame)
        answered = await proto.arrivals.get()
        out.append((sent, answered - sent))
        await asyncio.sleep(interval)
    return out


async def _fleet(conns: list[tuple[_Frames, bytes]], interval: float, stop: asyncio.Event) -> list[tuple[float, float]]:
    """Every connection heartbeating, their first heartbeats spread evenly over one interval."""
    now = time.perf_counter()
    step = interval / len(conns)
    runs = await asyncio.gather(
        *(_heartbeats(proto, frame, now + i * step, interval, stop) for i, (proto, frame) in enumerate(conns))
    )
    return [x for run in runs for x in run]


def _summary(lat: list[float]) -> dict[str, float]:
    lat = sorted(lat)
    if not lat:
        return {"count": 0}
    return {
        "count": len(lat),
        "p50_ms": 1000 * statistics.median(lat),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))],
        "max_ms": 1000 * lat[-1],
    }


async def _run(addr: tuple[str, int], hb_frames: list[bytes], big_frame: bytes, interval: float, idle: float) -> Any:
    loop = asyncio.get_running_loop()
    conns: list[tuple[_Frames, bytes]] = []
    for frame in hb_frames:
        _, proto = await loop.create_connection(_Frames, *addr)
        conns.append((proto, frame))
    _, assigner = await loop.create_connection(_Frames, *addr)
    stop = asyncio.Event()
    loop.call_later(idle, stop.set)
    quiet = await _fleet(conns, interval, stop)
    stop = asyncio.Event()
    beats = asyncio.ensure_future(_fleet(conns, interval, stop))
    await asyncio.sleep(min(1.0, 2 * interval))
    assert assigner.t is not None
    sent = time.perf_counter()
    assigner.t.write(big_frame)
    answered = await assigner.arrivals.get()
    stop.set()
    during = [lat for due, lat in await beats if sent <= due <= answered]
    return {
        "idle": _summary([lat for _, lat in quiet]),
        "during": _summary(during),
        "assign_s": answered - sent,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--partitions", type=int, default=1_000_000)
    ap.add_argument("--brokers", type=int, default=100, help="heartbeating brokers, one connection each")
    ap.add_argument("--interval-ms", type=float, default=500.0, help="each broker's heartbeat schedule")
    ap.add_argument("--slice", type=int, default=None, help="partitions per slice (default: the shipped value)")
    ap.add_argument("--idle", type=float, default=2.0, help="seconds of heartbeats alone first")
    ap.add_argument("--modes", default="slices,one pass", help="comma-separated: slices, one pass")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not 1 <= args.partitions <= 5_000_000 or args.interval_ms <= 0 or not 1 <= args.brokers <= 2000:
        raise SystemExit("--partitions must be 1..5000000, --brokers 1..2000 and --interval-ms > 0")
    if args.slice is not None and args.slice < 1:
        raise SystemExit("--slice must be >= 1")
    modes = [m.strip() for m in args.modes.split(",")]
    if not set(modes) <= {"slices", "one pass"}:
        raise SystemExit("--modes: slices and/or one pass")
    results: dict[str, Any] = {"partitions": args.partitions, "brokers": args.brokers, "slice": args.slice}
    with tempfile.TemporaryDirectory(prefix="bench-assign-") as tmp:
        base = Path(tmp) / "base"
        t = time.perf_counter()
        epochs, tids = _build(base, args.partitions, args.brokers)
        results["setup_s"] = time.perf_counter() - t
        big = AssignReplicasToDirsRequest(
            broker_id=1,
            broker_epoch=epochs[1],
            directories=[
                DirectoryData(
                    id=D1,
                    topics=[
                        TopicData(
                            topic_id=tid,
                            partitions=[
                                PartitionData(p) for p in range(min(PER_TOPIC, args.partitions - i * PER_TOPIC))
                            ],
                        )
                        for i, tid in enumerate(tids)
                    ],
                )
            ],
        )
        big_frame = codec.encode_request(big, 0, 1, "bench-broker-1")
        hb_frames = [
            codec.encode_request(BrokerHeartbeatRequest(b, e, 1 << 40, want_fence=False), 1, 2, f"b{b}")
            for b, e in sorted(epochs.items())
            if b != 1
        ]
        results["request_bytes"] = len(big_frame)
        for mode in modes:
            run_dir = Path(tmp) / mode.replace(" ", "-")
            shutil.copytree(base, run_dir)
            cfg = run_dir / "controller.properties"
            cfg.write_text(
                "node.id=3000\nlisteners=CONTROLLER://127.0.0.1:0\ncontroller.listener.names=CONTROLLER\n"
                f"metadata.log.dir={run_dir}\nbroker.session.timeout.ms=600000\n"
                "metadata.max.idle.interval.ms=0\n"
            )
            if mode == "one pass":
                launcher = ["-c", _WITH_SLICE.format(1 << 62)]
            elif args.slice is not None:
                launcher = ["-c", _WITH_SLICE.format(args.slice)]
            else:
                launcher = ["-m", "kraft_jbod.cli"]
            cmd = [sys.executable, *launcher, "controller", "--config", str(cfg), "--cluster-id", CLUSTER]
            t = time.perf_counter()
            proc, addr = _start([*cmd, "--log-level", "ERROR"])
            started = time.perf_counter() - t
            try:
                results[mode] = asyncio.run(_run(addr, hb_frames, big_frame, args.interval_ms / 1000, args.idle)) | {
                    "start_s": started
                }
            finally:
                assert proc.stdin is not None
                proc.terminate()
                proc.wait(60)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"{args.partitions:,} partitions, request {results['request_bytes']:,} bytes, {args.brokers} brokers "
        f"heartbeating every {args.interval_ms:g} ms, setup {results['setup_s']:.1f} s"
    )
    print(f"{'mode':10} {'phase':7} {'heartbeats':>10} {'p50 ms':>9} {'p99 ms':>9} {'max ms':>9}  assign")
    for mode in modes:
        r = results[mode]
        for phase in ("idle", "during"):
            s = r[phase]
            extra = f"  {r['assign_s']:.2f} s" if phase == "during" else ""
            print(
                f"{mode:10} {phase:7} {s['count']:>10} {s.get('p50_ms', float('nan')):9.1f} "
                f"{s.get('p99_ms', float('nan')):9.1f} {s.get('max_ms', float('nan')):9.1f}{extra}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
