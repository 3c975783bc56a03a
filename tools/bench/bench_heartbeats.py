"""Heartbeat throughput of the controller over loopback, against a bare asyncio echo server.

What is measured, in one run on one machine:

* ``controller``: the real ``kraft-jbod controller`` process (state machine, log, server).
  A setup phase registers ``--connections`` brokers (each with two log dirs) and unfences
  them. Then ``--connections`` concurrent TCP connections each run a closed loop: send a
  BrokerHeartbeat v1 (want_fence=false, caught up), wait for the whole response, send the
  next. Steady-state heartbeats of unfenced brokers write no records, which is what a
  real cluster's controller spends its time on.
* ``echo``: a bare asyncio length-prefixed echo server (an ``asyncio.Protocol`` that
  splits int32-framed messages and writes each one back), driven by the same client with
  the same heartbeat frames. It is the floor any Python asyncio server pays for sockets
  and framing.

Both servers run as their own processes; the load comes from ``--procs`` client
processes. Requests completing in the ``--warmup`` seconds are not counted; counting
stops after ``--duration`` seconds. Output: the rates, the ratio controller/echo (target
>= 0.5) and p50/p99 latency of each. Nothing is asserted.

Run: ``python -m tools.bench.bench_heartbeats [--connections 1000] [--duration 3] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import re
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
from kraft_jbod.connection import NEED_DATA, ClientConnection, ResponseReceived
from kraft_jbod.controller import features
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
_BE_i = struct.Struct(">i")
_MAX_SAMPLES = 200_000


# --------------------------------------------------------------------------- echo server


class _Echo(asyncio.Protocol):
    def __init__(self) -> None:
        self.buf = bytearray()
        self.t: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            (size,) = _BE_i.unpack_from(buf, pos)
            end = pos + 4 + size
            if end > len(buf):
                break
            assert self.t is not None
            self.t.write(bytes(buf[pos:end]))
            pos = end
        del buf[:pos]


async def _echo_main() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Echo, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    sys.stdout.write(f"listening on {host}:{port}\n")
    sys.stdout.flush()
    # Ends when the bench closes our stdin.
    await loop.run_in_executor(None, sys.stdin.read)


# --------------------------------------------------------------------------- load clients


class _Loop(asyncio.Protocol):
    """One closed-loop connection: one request in flight, the next sent on each response."""

    def __init__(self, frame: bytes, window: tuple[float, float], out: dict[str, Any]) -> None:
        self.frame = frame
        self.start, self.end = window
        self.out = out
        self.buf = bytearray()
        self.t: asyncio.Transport | None = None
        self.sent_at = 0.0
        self.done = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport
        self._send()

    def _send(self) -> None:
        assert self.t is not None
        self.sent_at = time.perf_counter()
        self.t.write(self.frame)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            (size,) = _BE_i.unpack_from(buf, 0)
            if len(buf) < 4 + size:
                return
            del buf[: 4 + size]
            now = time.perf_counter()
            if self.start <= now <= self.end:
                self.out["count"] += 1
                lat = self.out["lat"]
                if len(lat) < _MAX_SAMPLES:
                    lat.append(now - self.sent_at)
            if now >= self.end:
                if not self.done.done():
                    self.done.set_result(None)
                assert self.t is not None
                self.t.close()
                return
            self._send()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _drive(addr: tuple[str, int], frames: list[bytes], warmup: float, duration: float) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    out: dict[str, Any] = {"count": 0, "lat": []}
    protos: list[_Loop] = []
    # Connect everything first so the window measures steady state, not connection setup.
    t0 = time.perf_counter() + 3600.0
    window = (t0, t0)
    for frame in frames:
        _, p = await loop.create_connection(lambda f=frame: _Loop(f, window, out), *addr)  # type: ignore[misc]
        protos.append(p)
    start = time.perf_counter() + warmup
    for p in protos:
        p.start, p.end = start, start + duration
    await asyncio.wait_for(asyncio.gather(*(p.done for p in protos)), warmup + duration + 60)
    return out


def _client_proc(addr: tuple[str, int], frames: list[bytes], warmup: float, duration: float) -> dict[str, Any]:
    return asyncio.run(_drive(addr, frames, warmup, duration))


def _measure(addr: tuple[str, int], frames: list[bytes], procs: int, warmup: float, duration: float) -> dict[str, Any]:
    chunks = [frames[i::procs] for i in range(procs)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(procs) as pool:
        results = pool.starmap(_client_proc, [(addr, c, warmup, duration) for c in chunks])
    count = sum(r["count"] for r in results)
    lat = sorted(x for r in results for x in r["lat"])
    return {
        "rate": count / duration,
        "requests": count,
        "p50_ms": 1000 * statistics.median(lat) if lat else float("nan"),
        "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else float("nan"),
    }


# --------------------------------------------------------------------------- setup


def _registration(b: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=b,
        cluster_id=CLUSTER,
        incarnation_id=uuid.UUID(int=b + 1),
        listeners=[Listener("PLAINTEXT", "127.0.0.1", 9092, 0)],
        features=[Feature(features.METADATA_VERSION, 1, features.LATEST_PRODUCTION_LEVEL)],
        log_dirs=[uuid.UUID(int=(b << 32) | 500), uuid.UUID(int=(b << 32) | 501)],
    )


async def _call(r: asyncio.StreamReader, w: asyncio.StreamWriter, c: ClientConnection, body: Any, v: int) -> Any:
    w.write(c.send_request(body, v))
    while (ev := c.next_event()) is NEED_DATA:
        c.receive_data(await asyncio.wait_for(r.read(65536), 30))
    assert isinstance(ev, ResponseReceived)
    return ev.body


async def _register_all(addr: tuple[str, int], n: int) -> dict[int, int]:
    epochs: dict[int, int] = {}

    async def worker(ids: list[int]) -> None:
        r, w = await asyncio.open_connection(*addr)
        c = ClientConnection(client_id="bench-setup")
        for b in ids:
            resp = await _call(r, w, c, _registration(b), 3)
            if resp.error_code:
                raise SystemExit(f"registration of {b} failed with error {resp.error_code}")
            epochs[b] = resp.broker_epoch
            hb = await _call(r, w, c, BrokerHeartbeatRequest(b, resp.broker_epoch, 1 << 40, want_fence=False), 1)
            if hb.is_fenced:
                raise SystemExit(f"broker {b} stayed fenced")
        w.close()

    ids = list(range(1, n + 1))
    await asyncio.gather(*(worker(ids[i::32]) for i in range(32)))
    return epochs


def _start(cmd: list[str]) -> tuple[subprocess.Popen[bytes], tuple[str, int]]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline().decode()
    m = re.fullmatch(r"listening on (?:[A-Z0-9_.-]+ )?(\S+):(\d+)\n", line)
    if not m:
        proc.kill()
        raise SystemExit(f"server did not start: {line!r}")
    return proc, (m.group(1), int(m.group(2)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--procs", type=int, default=max(1, min(4, (multiprocessing.cpu_count() or 2) - 1)))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--echo-server", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.echo_server:
        asyncio.run(_echo_main())
        return 0
    if not 1 <= args.connections <= 20_000 or not 0 < args.duration <= 120:
        raise SystemExit("--connections must be 1..20000 and --duration 0..120 s")

    with tempfile.TemporaryDirectory(prefix="bench-hb-") as tmp:
        cfg = Path(tmp) / "controller.properties"
        cfg.write_text(
            "node.id=3000\nlisteners=CONTROLLER://127.0.0.1:0\ncontroller.listener.names=CONTROLLER\n"
            f"metadata.log.dir={tmp}/meta\nbroker.session.timeout.ms=60000\n"
        )
        ctl, ctl_addr = _start(
            [sys.executable, "-m", "kraft_jbod.cli", "controller", "--config", str(cfg), "--cluster-id", CLUSTER,
             "--log-level", "ERROR"]
        )
        echo, echo_addr = _start([sys.executable, "-m", "tools.bench.bench_heartbeats", "--echo-server"])
        try:
            epochs = asyncio.run(_register_all(ctl_addr, args.connections))
            frames = [
                codec.encode_request(BrokerHeartbeatRequest(b, e, 1 << 40, want_fence=False), 1, 7, "bench")
                for b, e in sorted(epochs.items())
            ]
            results = {
                "echo": _measure(echo_addr, frames, args.procs, args.warmup, args.duration),
                "controller": _measure(ctl_addr, frames, args.procs, args.warmup, args.duration),
            }
        finally:
            for p in (ctl, echo):
                if p.stdin:
                    p.stdin.close()
                p.terminate()
                p.wait(10)
    ratio = results["controller"]["rate"] / results["echo"]["rate"]
    summary = {
        "connections": args.connections,
        "client_procs": args.procs,
        "duration_s": args.duration,
        **results,
        "ratio_controller_over_echo": ratio,
        "target_ratio": 0.5,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"{args.connections} connections, {args.procs} client process(es), {args.duration:.1f} s window")
        for name in ("echo", "controller"):
            r = results[name]
            print(
                f"  {name:<10} {r['rate']:>10.0f} req/s   p50 {r['p50_ms']:.2f} ms   p99 {r['p99_ms']:.2f} ms"
                f"   ({r['requests']} requests)"
            )
        print(f"  ratio controller/echo = {ratio:.2f}  (target >= 0.50)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
