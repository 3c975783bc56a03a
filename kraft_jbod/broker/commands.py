"""CLI commands of the broker area: ``broker`` and ``broker-ctl``.

``register(sub)`` adds the subparsers; each ``func`` returns an exit code (0 ok, 1 the
run failed, 2 bad usage), and ``kraft_jbod.cli.main`` turns a ``KraftJbodError`` into a
message and exit code 2. asyncio and the broker are imported only when a command runs.

``broker`` prints ``listening on NAME HOST:PORT`` for each client listener it serves
(``kraft.jbod.serve.clients``) and ``listening on CONTROL HOST:PORT`` once its control
endpoint listens (when ``kraft.jbod.control.listener`` is set or ``--control`` given); it exits 0 when
stopped by a signal or command, 1 when it stopped itself (e.g. log.dir.failure.timeout.ms).
Output goes through :mod:`kraft_jbod.console` only.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kraft_jbod import console


def register(sub: Any) -> None:
    b = sub.add_parser("broker", help="run a fake KRaft JBOD broker against a controller")
    b.add_argument("-c", "--config", required=True, type=Path, help="Kafka broker properties file")
    b.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--control", metavar="HOST:PORT", help="local command endpoint (fail-dir, move, status)")
    b.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    b.add_argument("--log-json", action="store_true", help="logs as JSON lines on stderr")
    b.set_defaults(func=cmd_broker)

    ctl = sub.add_parser("broker-ctl", help="send one command to a running fake broker's control endpoint")
    ctl.add_argument("address", help="HOST:PORT printed by `kraft-jbod broker`")
    ctl.add_argument(
        "words",
        nargs="+",
        help="status | fail-dir DIR | move TOPIC PARTITION DIR | cordon DIR | uncordon DIR | shutdown",
    )
    ctl.set_defaults(func=cmd_broker_ctl)


def cmd_broker(args: argparse.Namespace) -> int:
    import asyncio

    from kraft_jbod.broker import config as cfgmod
    from kraft_jbod.metrics import logs

    logs.setup(args.log_level, json_lines=args.log_json, stream=sys.stderr)
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

    def on_signal(sig: signal.Signals) -> None:
        nonlocal by_signal
        by_signal = True
        # SIGTERM asks for a controlled shutdown, as Kafka's broker; a second signal (or
        # SIGINT) stops at once.
        if sig is signal.SIGTERM and broker.exit_reason is None and not broker.shutdown_started:
            broker.begin_shutdown("SIGTERM")
        else:
            broker.stop(sig.name)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    async with broker:
        for served in broker.client_listeners:
            if served.address is not None:
                console.listening(served.listener.name, *served.address)
        if broker.control_address is not None:
            host, port = broker.control_address
            console.listening("CONTROL", host, port)
        await broker.stopped.wait()
    reason = broker.exit_reason or ""
    console.note(f"broker {cfg.node_id} stopped: {reason}")
    clean = reason.startswith(("shutdown by command", "controlled shutdown complete", "stopped"))
    return 0 if by_signal or clean else 1


def cmd_broker_ctl(args: argparse.Namespace) -> int:
    import socket

    host, sep, port = args.address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        return console.fail(f"broker-ctl: expected HOST:PORT, got {args.address!r}")
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
        return console.fail(f"broker-ctl: cannot talk to {args.address}: {exc.strerror or exc}")
    text = data.decode("utf-8", "replace").strip()
    console.line(text)
    try:
        answer = json.loads(text)
    except ValueError:
        return 1
    return 0 if isinstance(answer, dict) and answer.get("ok") else 1
