"""CLI commands of the broker area: ``broker``, ``broker-ctl``, ``storage format|info``, ``demo``.

``register(sub)`` adds the subparsers; each ``func`` returns an exit code (0 ok, 1 the
run failed, 2 bad usage), and ``kraft_jbod.cli.main`` turns a ``KraftJbodError`` into a
message and exit code 2. asyncio and the broker are imported only when a command runs.

``broker`` prints ``control on HOST:PORT`` once its control endpoint listens (when
``kraft.jbod.control.listener`` is set or ``--control`` given) and exits 0 when stopped by
a signal or command, 1 when it stopped itself (e.g. log.dir.failure.timeout.ms).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    b = sub.add_parser("broker", help="run a fake KRaft JBOD broker against a controller")
    b.add_argument("-c", "--config", required=True, type=Path, help="Kafka broker properties file")
    b.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--control", metavar="HOST:PORT", help="local command endpoint (fail-dir, move, status)")
    b.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    b.set_defaults(func=cmd_broker)

    ctl = sub.add_parser("broker-ctl", help="send one command to a running fake broker's control endpoint")
    ctl.add_argument("address", help="HOST:PORT printed by `kraft-jbod broker`")
    ctl.add_argument("words", nargs="+", help="status | fail-dir DIR | move TOPIC PARTITION DIR | shutdown")
    ctl.set_defaults(func=cmd_broker_ctl)

    st = sub.add_parser("storage", help="format or inspect meta.properties like kafka-storage")
    st_sub = st.add_subparsers(dest="storage_command", required=True)
    f = st_sub.add_parser("format", help="write meta.properties (with directory.id) in every log dir")
    f.add_argument("-c", "--config", required=True, type=Path)
    f.add_argument("-t", "--cluster-id", required=True)
    f.set_defaults(func=cmd_storage_format)
    i = st_sub.add_parser("info", help="show the meta.properties of every log dir")
    i.add_argument("-c", "--config", required=True, type=Path)
    i.set_defaults(func=cmd_storage_info)

    d = sub.add_parser("demo", help="controller + 3 JBOD brokers on loopback; one disk fails (about a minute max)")
    d.add_argument("--capture", type=Path, default=Path("kraft-jbod-demo.pcapng"), help="pcapng of all traffic")
    d.add_argument("--no-capture", action="store_true")
    d.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary folder)")
    d.add_argument(
        "--stats",
        type=Path,
        default=Path("kraft-jbod-demo-stats"),
        help="run the conformance job (Spark) on the capture into this folder",
    )
    d.add_argument("--no-stats", action="store_true", help="skip the conformance job")
    d.set_defaults(func=cmd_demo)


def cmd_storage_format(args: argparse.Namespace) -> int:
    from kraft_jbod.storage import StorageLayout, format_storage
    from kraft_jbod.wire.primitives import uuid_to_base64url

    layout = StorageLayout.load(args.config)
    for r in format_storage(layout, args.cluster_id):
        assert r.meta.directory_id is not None
        print(f"{r.path}: {r.action} (directory.id={uuid_to_base64url(r.meta.directory_id)})")
    return 0


def cmd_storage_info(args: argparse.Namespace) -> int:
    from kraft_jbod.storage import StorageLayout, storage_info

    rows = storage_info(StorageLayout.load(args.config))
    for row in rows:
        print(json.dumps(row, sort_keys=True))
    return 1 if any("error" in r or not r.get("formatted") for r in rows) else 0


def cmd_broker(args: argparse.Namespace) -> int:
    import asyncio

    from kraft_jbod.broker import config as cfgmod

    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, args.log_level), format=fmt)
    overrides = list(args.override)
    if args.control:
        overrides.append(f"kraft.jbod.control.listener={args.control}")
    cfg = cfgmod.load(args.config, overrides)
    return asyncio.run(_run_broker(cfg))


async def _run_broker(cfg: Any) -> int:
    import asyncio
    import signal

    from kraft_jbod.broker.server import FakeBroker

    broker = FakeBroker(cfg)
    loop = asyncio.get_running_loop()
    by_signal = False

    def on_signal() -> None:
        nonlocal by_signal
        by_signal = True
        broker.stop("signal")

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    async with broker:
        if broker.control_address is not None:
            host, port = broker.control_address
            sys.stdout.write(f"control on {host}:{port}\n")
            sys.stdout.flush()
        await broker.stopped.wait()
    reason = broker.exit_reason or ""
    print(f"broker {cfg.node_id} stopped: {reason}", file=sys.stderr)
    return 0 if by_signal or reason in ("shutdown by command", "controlled shutdown complete") else 1


def cmd_broker_ctl(args: argparse.Namespace) -> int:
    import socket

    host, sep, port = args.address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        print(f"kraft-jbod: broker-ctl: expected HOST:PORT, got {args.address!r}", file=sys.stderr)
        return 2
    data = b""
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=10) as s:
            s.sendall((" ".join(args.words) + "\n").encode())
            # One JSON line answers a command; a cap keeps a wrong endpoint from flooding us.
            while not data.endswith(b"\n") and len(data) < (1 << 20):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        print(f"kraft-jbod: broker-ctl: cannot talk to {args.address}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    text = data.decode("utf-8", "replace").strip()
    print(text)
    try:
        answer = json.loads(text)
    except ValueError:
        return 1
    return 0 if isinstance(answer, dict) and answer.get("ok") else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from kraft_jbod import demo

    logging.basicConfig(stream=sys.stderr, level=logging.ERROR)
    capture = None if args.no_capture else args.capture

    def out(line: str) -> None:
        print(line, flush=True)

    demo.run(capture, args.keep, out)
    if capture is None or args.no_stats:
        return 0
    return _demo_stats(capture, args.stats, out)


def _demo_stats(capture: Path, out_dir: Path, out: Any) -> int:
    """The conformance job over the demo's own capture, when the spark extra is installed."""
    import importlib.util

    if importlib.util.find_spec("pyspark") is None:
        out("conformance job skipped: pyspark is not installed (pip install 'kraft-jbod[spark]')")
        return 0
    from kraft_jbod.analytics.job import StatsOptions, run_stats

    out(f"conformance job on {capture} (Spark local mode) ...")
    result = run_stats([str(capture)], out_dir, StatsOptions(), progress=lambda text: out(f"  {text}"))
    out(result.summary.rstrip())
    out(f"conformance report: {out_dir / 'report.html'}")
    return 0
