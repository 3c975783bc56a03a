"""CLI command of the analytics area: ``kraft-jbod stats INPUT... --out DIR``.

``register(sub)`` adds the subparser; the handler returns an exit code: 0 success, 1 the
job ran but found KIP-858 violations or frames that do not decode (so CI can gate on it
with ``--fail-on``), 2 bad usage or bad input (the message names each file), 3 Spark did
not start or a Spark job failed (the message gives the executor's error in a line), 4 an
internal error (a bug: one line, the traceback only with ``KRAFT_JBOD_DEBUG=1``), 130
interrupted. No path prints a raw traceback by default. pyspark is
imported only when the command runs, so ``kraft-jbod --help`` stays fast. Progress lines
go to stderr, the summary to stdout.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any, Final

from kraft_jbod import console
from kraft_jbod.capture import budget

__all__ = ["EXIT_FINDINGS", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_SPARK", "cmd_stats", "register"]

EXIT_FINDINGS: Final = 1
EXIT_INPUT: Final = 2
EXIT_SPARK: Final = 3
EXIT_INTERNAL: Final = 4


def _say(text: str) -> None:
    console.note(f"[stats {time.strftime('%H:%M:%S')}] {text}")


def _conf(items: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--conf expects KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def cmd_stats(args: argparse.Namespace) -> int:
    try:
        conf = _conf(args.conf)
    except ValueError as exc:
        return console.fail(f"stats: {exc}")
    if "://" not in args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        # Caught before Spark starts: it would fail deep in the job (an internal error, exit 4).
        return console.fail(f"stats: --out {args.out} is a file; it names the output folder")
    # Checked before any import that needs them, so the message is one line, not a traceback.
    console.require("stats", "pyspark", "pyarrow", "pandas")
    _require_java()
    from kraft_jbod.analytics.job import SparkJobError, StatsOptions, run_stats
    from kraft_jbod.analytics.work import InputError

    opts = StatsOptions(
        master=args.master,
        conf=conf,
        ports=args.port or None,
        split_bytes=int(args.split_mb * (1 << 20)),
        keep_going=args.keep_going,
        write_frames=args.frames and not args.no_frames,
        check_canonical=not args.no_canonical,
        capture_set=args.capture_set,
        ship_package=not args.no_ship_package,
        limits=budget.limits_from_args(args),
        release_jvm=True,  # the JVM ends (and writes its class-data archive) before we return
    )
    try:
        result = run_stats(args.inputs, args.out, opts, progress=None if args.quiet else _say)
    except InputError as exc:
        return console.fail(f"stats: {exc}")
    except SparkJobError as exc:
        console.error(f"stats: {exc}")
        return EXIT_SPARK
    except KeyboardInterrupt:
        console.error("stats: interrupted")
        return 130
    except Exception as exc:
        if os.environ.get("KRAFT_JBOD_DEBUG") == "1":
            import traceback  # here: every kraft-jbod run imports this module

            traceback.print_exc()
        console.error(
            f"stats: internal error (please report; KRAFT_JBOD_DEBUG=1 shows the "
            f"traceback): {type(exc).__name__}: {exc}"
        )
        return EXIT_INTERNAL
    console.line(result.summary)
    console.line(f"tables and report.html in {result.out_dir}")
    violations = [v for v in result.tables.violations if v.verdict == "violation"]
    failed = False
    if "violations" in args.fail_on and violations:
        failed = True
    for overall in result.tables.overall[:1]:
        if "undecoded" in args.fail_on and overall.frames > overall.decoded + overall.truncated:
            failed = True
    return EXIT_FINDINGS if failed else 0


def _require_java() -> None:
    """Spark runs on a JVM: say so in one line rather than let py4j print a traceback."""
    import os
    import shutil
    from pathlib import Path

    from kraft_jbod.errors import ConfigError

    home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (home and Path(home, "bin", "java").exists()):
        raise ConfigError("stats: Spark needs Java 17 or newer; install it or set JAVA_HOME (see docs/spark.md)")


def register(sub: Any) -> None:
    """Add ``stats`` to the main parser's subcommands."""
    p = sub.add_parser(
        "stats",
        help="conformance statistics of captured Kafka traffic (PySpark job)",
        description="Decodes pcap/pcapng captures (files, folders, globs, or URIs such as s3://, hdfs://) "
        "on Spark (local[*] by default) and writes Parquet tables, report.html and summary.txt to --out. "
        "Run it under spark-submit for a cluster (see docs/spark.md).",
    )
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="capture file, folder, glob or URI")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (tables are replaced)")
    p.add_argument("--master", help="Spark master URL (default local[*], or spark-submit's)")
    p.add_argument("--conf", action="append", metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    p.add_argument("--port", type=int, action="append", metavar="N", help="a Kafka server port (repeatable)")
    p.add_argument(
        "--split-mb",
        type=float,
        default=128.0,
        help="files larger than this are split by TCP connection into several tasks (default 128)",
    )
    p.add_argument(
        "--no-ship-package",
        action="store_true",
        help="do not send the kraft_jbod package to a cluster's executors (they have it installed)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="report truncated or unreadable files and continue instead of stopping",
    )
    p.add_argument(
        "--frames",
        action="store_true",
        help="also write the per-frame table (one row per frame, written by the workers; "
        "by nature as large as the input's frame count)",
    )
    p.add_argument("--no-frames", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for scripts
    p.add_argument("--no-canonical", action="store_true", help="skip the byte-exact re-encoding check")
    p.add_argument("--capture-set", default="default", help="name of this capture set in the tables")
    p.add_argument(
        "--fail-on",
        action="append",
        choices=["violations", "undecoded"],
        default=[],
        help="exit 1 when the run finds KIP-858 violations or undecodable frames",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    budget.add_options(p, "task's file")
    p.set_defaults(func=cmd_stats)
