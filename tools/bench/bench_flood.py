"""Heartbeat latency of the controller while hostile clients flood it, next to idle.

What is measured, in one run on one machine:

* the real ``kraft-jbod controller`` process (``--no-fsync``), one broker registered and
  unfenced on its own connection;
* ``idle``: ``--beats`` BrokerHeartbeats, one after the other, nothing else running;
* ``flood``: the same, while ``--flooders`` client processes each keep two connections
  pipelining ApiVersions requests (``--burst`` per write) without reading the answers, and one connection sending
  CreateTopics with 12,000 topics (refused from its count before decoding) again and again.

Output: p50/p99/max heartbeat latency for each phase, the ratio flood p99 / idle p99 and
how many flood requests were sent, and the controller's peak RSS (unread responses of a
peer that never reads are what a server without write backpressure accumulates).
Nothing is asserted; the starvation *test* (tests/controller/test_server_bounds.py)
asserts that heartbeats are answered at all.

Run: ``python -m tools.bench.bench_flood [--beats 200] [--flooders 2] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kraft_jbod import codec
from kraft_jbod.connection import ClientConnection
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from tools.bench.bench_heartbeats import CLUSTER, _call, _registration, _start


async def _flood(addr: tuple[str, int], seconds: float, burst: int) -> int:
    versions = codec.encode_request(ApiVersionsRequest(), 0, 1, "flood") * burst
    many = CreateTopicsRequest(topics=[CreatableTopic(f"t{i}", 0, 1) for i in range(12_000)], timeout_ms=1)
    big = codec.encode_request(many, 5, 1, "flood")
    sent = 0
    stop = time.monotonic() + seconds

    async def one(frame: bytes, per: int) -> None:
        nonlocal sent
        try:
            _r, w = await asyncio.open_connection(*addr)
            while time.monotonic() < stop:
                w.write(frame)
                sent += per
                try:
                    await asyncio.wait_for(w.drain(), 0.05)
                except TimeoutError:
                    pass
                await asyncio.sleep(0)
            w.close()
        except ConnectionError:
            pass

    await asyncio.gather(one(versions, burst), one(versions, burst), one(big, 1))
    return sent


def _flood_proc(addr: tuple[str, int], seconds: float, burst: int, out: Any) -> None:
    out.put(asyncio.run(_flood(addr, seconds, burst)))


async def _beats(addr: tuple[str, int], n: int) -> list[float]:
    r, w = await asyncio.open_connection(*addr)
    c = ClientConnection(client_id="bench-broker")
    resp = await _call(r, w, c, _registration(1), 3)
    epoch = int(resp.broker_epoch)
    await _call(r, w, c, BrokerHeartbeatRequest(1, epoch, 1 << 40, want_fence=False), 1)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        hb = await _call(r, w, c, BrokerHeartbeatRequest(1, epoch, 1 << 40, want_fence=False), 1)
        out.append(time.perf_counter() - t0)
        if hb.error_code:
            raise SystemExit(f"heartbeat failed with error {hb.error_code}")
        await asyncio.sleep(0.005)
    w.close()
    return out


def _peak_rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def _summary(lat: list[float]) -> dict[str, float]:
    s = sorted(lat)
    return {
        "p50_ms": round(statistics.median(s) * 1000, 3),
        "p99_ms": round(s[min(len(s) - 1, int(len(s) * 0.99))] * 1000, 3),
        "max_ms": round(s[-1] * 1000, 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--beats", type=int, default=200)
    ap.add_argument("--flooders", type=int, default=2)
    ap.add_argument("--burst", type=int, default=5000, help="ApiVersions requests per write of a flooder")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not 10 <= args.beats <= 100_000 or not 1 <= args.flooders <= 16:
        raise SystemExit("--beats must be 10..100000 and --flooders 1..16")
    with tempfile.TemporaryDirectory(prefix="bench-flood-") as tmp:
        cfg = Path(tmp) / "controller.properties"
        cfg.write_text(
            "node.id=3000\nlisteners=CONTROLLER://127.0.0.1:0\ncontroller.listener.names=CONTROLLER\n"
            f"metadata.log.dir={tmp}/meta\nbroker.session.timeout.ms=60000\n"
        )
        ctl, addr = _start(
            [
                sys.executable,
                "-m",
                "kraft_jbod.cli",
                "controller",
                "--config",
                str(cfg),
                "--cluster-id",
                CLUSTER,
                "--log-level",
                "ERROR",
                "--no-fsync",
            ]
        )
        try:
            idle = asyncio.run(_beats(addr, args.beats))
            seconds = max(2.0, args.beats * 0.02)
            q: Any = multiprocessing.Queue()
            procs = [
                multiprocessing.Process(target=_flood_proc, args=(addr, seconds, args.burst, q))
                for _ in range(args.flooders)
            ]
            for p in procs:
                p.start()
            time.sleep(0.5)  # the flood is running
            flood = asyncio.run(_beats(addr, args.beats))
            sent = sum(q.get(timeout=seconds + 30) for _ in procs)
            for p in procs:
                p.join(timeout=30)
            peak_rss = _peak_rss_mb(ctl.pid)
        finally:
            ctl.terminate()
            ctl.wait(timeout=30)
    i, f = _summary(idle), _summary(flood)
    result = {
        "idle": i,
        "flood": f,
        "flood_requests_sent": sent,
        "controller_peak_rss_mb": peak_rss,
        "p99_ratio_flood_over_idle": round(f["p99_ms"] / i["p99_ms"], 2) if i["p99_ms"] else None,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"heartbeat latency idle : p50 {i['p50_ms']} ms  p99 {i['p99_ms']} ms  max {i['max_ms']} ms")
        print(
            f"heartbeat latency flood: p50 {f['p50_ms']} ms  p99 {f['p99_ms']} ms  max {f['max_ms']} ms"
            f"  ({sent} flood requests sent by {args.flooders} processes)"
        )
        print(f"p99 flood / idle: {result['p99_ratio_flood_over_idle']}; controller peak RSS {peak_rss} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
