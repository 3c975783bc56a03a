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
processes, so the load generator is not the limit. Two phases per server:

* **saturation** (closed loop): the request rate, and the server process's CPU time
  (user + system, from /proc) divided by the requests it answered in the window. CPU per
  request is the headline figure (target: the controller at most 1.5x the echo server's, issue 28),
  since on a shared machine a rate depends on what else runs; CPU per request does not.
* **fixed offered load** (open loop, ``--rate`` requests/s in total spread over all
  connections, each sending on its own schedule whether or not answers came back): p50
  and p99 latency measured from the *scheduled* send time, so a stalled server cannot
  hide its queueing delay (no coordinated omission).

Requests completing in the ``--warmup`` seconds are not counted; counting stops after
``--duration`` seconds. Nothing is asserted.

Run: ``python -m tools.bench.bench_heartbeats [--connections 1000] [--duration 3] [--rate 4000] [--json]``.
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
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Listener

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
_BE_i = struct.Struct(">i")
_MAX_SAMPLES = 200_000
TARGET_CPU_RATIO = 1.5  # controller/echo server CPU per request (issue 28; 2x in issue 16)


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


class _Paced(asyncio.Protocol):
    """One open-loop connection: a request every ``interval`` seconds on a fixed schedule."""

    def __init__(self, frame: bytes, interval: float, window: tuple[float, float], out: dict[str, Any]) -> None:
        self.frame = frame
        self.interval = interval
        self.start, self.end = window
        self.out = out
        self.buf = bytearray()
        self.t: asyncio.Transport | None = None
        self.scheduled: list[float] = []  # send times of the requests in flight, oldest first
        self.sending = True
        self.loop = asyncio.get_running_loop()
        self.done = self.loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.t = transport

    def begin(self, first: float) -> None:
        self._tick(first)

    def _tick(self, due: float) -> None:
        if due >= self.end or self.t is None or self.t.is_closing():
            self.sending = False
            if not self.scheduled and not self.done.done():
                self.done.set_result(None)
            return
        self.scheduled.append(due)
        self.t.write(self.frame)
        nxt = due + self.interval
        self.loop.call_at(self.loop.time() + max(0.0, nxt - time.perf_counter()), self._tick, nxt)

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        while len(buf) >= 4:
            (size,) = _BE_i.unpack_from(buf, 0)
            if len(buf) < 4 + size:
                return
            del buf[: 4 + size]
            now = time.perf_counter()
            due = self.scheduled.pop(0)
            if self.start <= due < self.end:
                self.out["count"] += 1
                if len(self.out["lat"]) < _MAX_SAMPLES:
                    self.out["lat"].append(now - due)
            if not self.scheduled and not self.sending and not self.done.done():
                self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.done.done():
            self.done.set_result(None)


async def _drive(
    addr: tuple[str, int],
    frames: list[bytes],
    duration: float,
    warmup: float,
    rate_per_conn: float | None,
    ready: Any,
    start_at: Any,
) -> dict[str, Any]:
    """Connect everything, report ready, wait for the parent's window start, then count."""
    loop = asyncio.get_running_loop()
    out: dict[str, Any] = {"count": 0, "lat": []}
    far = (time.perf_counter() + 3600.0,) * 2
    loops: list[_Loop] = []
    paced: list[_Paced] = []
    interval = 0.0 if rate_per_conn is None else 1.0 / rate_per_conn
    for frame in frames:
        if rate_per_conn is None:
            _, p = await loop.create_connection(lambda f=frame: _Loop(f, far, out), *addr)  # type: ignore[misc]
            loops.append(p)
        else:
            _, q = await loop.create_connection(
                lambda f=frame: _Paced(f, interval, far, out),  # type: ignore[misc]
                *addr,
            )
            paced.append(q)
    ready.put(len(frames))
    while start_at.value == 0.0:
        await asyncio.sleep(0.005)
    window = (start_at.value, start_at.value + duration)
    for p in loops:
        p.start, p.end = window
    now = time.perf_counter()
    for i, q in enumerate(paced):
        q.start, q.end = window
        # The schedule starts with the warm-up, phases spread evenly over one interval.
        q.begin(now + interval * i / len(paced))
    waits = [p.done for p in loops] + [q.done for q in paced]
    await asyncio.wait_for(asyncio.gather(*waits), window[1] - time.perf_counter() + warmup + 60)
    return out


def _client_proc(
    addr: tuple[str, int],
    frames: list[bytes],
    duration: float,
    warmup: float,
    rate_per_conn: float | None,
    ready: Any,
    start_at: Any,
    results: Any,
) -> None:
    results.put(asyncio.run(_drive(addr, frames, duration, warmup, rate_per_conn, ready, start_at)))


def _cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU time of a process, from /proc (Linux)."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _measure(
    server_pid: int,
    addr: tuple[str, int],
    frames: list[bytes],
    procs: int,
    warmup: float,
    duration: float,
    rate: float | None = None,
) -> dict[str, Any]:
    chunks = [frames[i::procs] for i in range(procs)]
    per_conn = None if rate is None else rate / len(frames)
    ctx = multiprocessing.get_context("fork")
    ready, results_q = ctx.Queue(), ctx.Queue()
    start_at = ctx.Value("d", 0.0)
    workers = [
        ctx.Process(target=_client_proc, args=(addr, c, duration, warmup, per_conn, ready, start_at, results_q))
        for c in chunks
    ]
    for w in workers:
        w.start()
    # The window opens only once every connection is up, whatever the machine's load.
    connected = sum(ready.get(timeout=300) for _ in workers)
    assert connected == len(frames)
    start = time.perf_counter() + warmup
    window = (start, start + duration)
    start_at.value = start
    time.sleep(max(0.0, start - time.perf_counter()))
    cpu0 = _cpu_seconds(server_pid)
    time.sleep(max(0.0, window[1] - time.perf_counter()))
    cpu1 = _cpu_seconds(server_pid)
    results = [results_q.get(timeout=duration + warmup + 120) for _ in workers]
    for w in workers:
        w.join(30)
    count = sum(r["count"] for r in results)
    lat = sorted(x for r in results for x in r["lat"])
    user, system = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    return {
        "rate": count / duration,
        "requests": count,
        "server_cpu_s": user + system,
        "cpu_us_per_request": 1e6 * (user + system) / count if count else float("nan"),
        "user_us_per_request": 1e6 * user / count if count else float("nan"),
        "system_us_per_request": 1e6 * system / count if count else float("nan"),
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
        features=features.registration_features(),
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
    ap.add_argument("--procs", type=int, default=3, help="client processes generating the load")
    ap.add_argument("--rate", type=float, default=4000.0, help="offered load (req/s, all connections) for latency")
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
            ]
        )
        echo, echo_addr = _start([sys.executable, "-m", "tools.bench.bench_heartbeats", "--echo-server"])
        try:
            epochs = asyncio.run(_register_all(ctl_addr, args.connections))
            frames = [
                codec.encode_request(BrokerHeartbeatRequest(b, e, 1 << 40, want_fence=False), 1, 7, "bench")
                for b, e in sorted(epochs.items())
            ]
            results = {}
            for name, proc, addr in (("echo", echo, echo_addr), ("controller", ctl, ctl_addr)):
                sat = _measure(proc.pid, addr, frames, args.procs, args.warmup, args.duration)
                fixed = _measure(proc.pid, addr, frames, args.procs, args.warmup, args.duration, args.rate)
                results[name] = {
                    **{
                        k: sat[k]
                        for k in (
                            "rate",
                            "requests",
                            "server_cpu_s",
                            "cpu_us_per_request",
                            "user_us_per_request",
                            "system_us_per_request",
                        )
                    },
                    "saturated_p50_ms": sat["p50_ms"],
                    "saturated_p99_ms": sat["p99_ms"],
                    "offered_rate": args.rate,
                    "achieved_rate_at_offered": fixed["rate"],
                    "p50_ms": fixed["p50_ms"],
                    "p99_ms": fixed["p99_ms"],
                    "cpu_us_per_request_at_offered": fixed["cpu_us_per_request"],
                }
        finally:
            for p in (ctl, echo):
                if p.stdin:
                    p.stdin.close()
                p.terminate()
                p.wait(10)
    from kraft_jbod import codec_backend

    ratio = results["controller"]["rate"] / results["echo"]["rate"]
    cpu_ratio = results["controller"]["cpu_us_per_request"] / results["echo"]["cpu_us_per_request"]
    summary = {
        "connections": args.connections,
        "client_procs": args.procs,
        "duration_s": args.duration,
        "codec_backend": codec_backend(),
        **results,
        "cpu_per_request_controller_over_echo": cpu_ratio,
        "target_cpu_ratio": TARGET_CPU_RATIO,
        "rate_controller_over_echo": ratio,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(
            f"{args.connections} connections, {args.procs} client processes, {args.duration:.1f} s windows, "
            f"codec {summary['codec_backend']}"
        )
        for name in ("echo", "controller"):
            r = results[name]
            print(
                f"  {name:<10} saturated {r['rate']:>8.0f} req/s, server CPU {r['cpu_us_per_request']:.1f} us/request"
                f" (user {r['user_us_per_request']:.1f}, system {r['system_us_per_request']:.1f});"
                f" at {args.rate:.0f} req/s offered ({r['achieved_rate_at_offered']:.0f} answered):"
                f" p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms"
            )
        flag = "" if cpu_ratio <= TARGET_CPU_RATIO else "  < miss"
        print(f"  server CPU per request, controller/echo = {cpu_ratio:.2f}x (target <= {TARGET_CPU_RATIO}x){flag}")
        print(f"  saturated rate, controller/echo = {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
