"""CLI command of the demo: ``kraft-jbod demo``.

Runs :func:`kraft_jbod.demo.scenario.run` and prints its timeline as it happens, then,
when the ``spark`` extra is installed, the conformance job over the demo's own capture.
Without the extra the demo still runs to the end and says in one line what it skipped
and how to get it. Exit 0 when every step happened and every check held.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kraft_jbod import console


def register(sub: Any) -> None:
    d = sub.add_parser("demo", help="controller + 3 JBOD brokers on loopback; one disk fails (about a minute max)")
    d.add_argument("--capture", type=Path, default=Path("kraft-jbod-demo.pcapng"), help="pcapng of all traffic")
    d.add_argument("--no-capture", action="store_true", help="do not write the capture")
    d.add_argument("--keep", type=Path, help="run in this folder and keep it (default: a temporary folder)")
    d.add_argument(
        "--stats",
        type=Path,
        default=Path("kraft-jbod-demo-stats"),
        help="run the conformance job (Spark) on the capture into this folder",
    )
    d.add_argument("--no-stats", action="store_true", help="skip the conformance job")
    d.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    import logging

    from kraft_jbod.demo import scenario

    logging.basicConfig(stream=sys.stderr, level=logging.ERROR)
    capture = None if args.no_capture else args.capture
    # Checked before the scenario starts: a minute of demo must not end in a traceback.
    if args.keep is not None and args.keep.exists() and not args.keep.is_dir():
        return console.fail(f"demo: --keep {args.keep} is a file; it names a folder to run in")
    if capture is not None and capture.is_dir():
        return console.fail(f"demo: --capture {capture} is a folder; it names the pcapng file to write")
    if capture is not None and not args.no_stats and args.stats.exists() and not args.stats.is_dir():
        return console.fail(f"demo: --stats {args.stats} is a file; it names the report folder")
    scenario.run(capture, args.keep, console.line)
    if capture is None or args.no_stats:
        return console.EXIT_OK
    return _demo_stats(capture, args.stats)


def _demo_stats(capture: Path, out_dir: Path) -> int:
    """The conformance job over the demo's own capture, when the spark extra is installed."""
    import importlib.util
    import shutil

    if importlib.util.find_spec("pyspark") is None:
        console.line("conformance job skipped: it needs the spark extra (pip install 'kraft-jbod[spark]')")
        return console.EXIT_OK
    if shutil.which("java") is None and not _java_home():
        console.line("conformance job skipped: Spark needs Java 17 or newer on PATH (or JAVA_HOME)")
        return console.EXIT_OK
    from kraft_jbod.analytics.job import StatsOptions, run_stats

    console.line(f"conformance job on {capture} (Spark local mode) ...")
    result = run_stats(
        [str(capture)], out_dir, StatsOptions(release_jvm=True), progress=lambda text: console.line(f"  {text}")
    )
    console.line(result.summary.rstrip())
    console.line(f"conformance report: {out_dir / 'report.html'}")
    return console.EXIT_OK


def _java_home() -> bool:
    import os

    home = os.environ.get("JAVA_HOME")
    return bool(home) and Path(home or "", "bin", "java").exists()
