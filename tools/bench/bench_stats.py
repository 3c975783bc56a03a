"""Frames per second of ``kraft-jbod stats`` on Spark local[1] and local[2] against the
single-process ``kraft-jbod decode``, on the same input in the same run; prints ratios.

What runs, each as a fresh subprocess (so every Spark run pays its own JVM start, as a
user does):

1. ``kraft-jbod decode --summary --no-progress FILE``: the single-process decoder;
2. ``kraft-jbod stats FILE --master local[1]`` and ``local[2]`` (no per-frame table, so
   the runs compare decoding plus statistics, not Parquet volume); each reports its
   decode stage time in run_manifest.json, and the workers' peak RSS in the inputs table;
3. with ``--paths``, local[2] again through each decode path (``arrow``, ``rdd``,
   ``udf``): the measurement behind the default.

Fairness: with ``--pin`` (the default) the single-process decoder and local[1] run under
``taskset -c 0``: one core each, the JVM included, so "local[1]" means one core and
local[2] (unpinned) means two. ``--repeat N`` runs every configuration N times, rotating
the order, and keeps the best wall time of each (the least disturbed by other load on a
shared machine). CPU figures are read from ``RUSAGE_CHILDREN`` (the whole process tree,
JVM and Python workers included).

Wall figures include everything a user waits for: interpreter and JVM start, planning,
decoding, statistics and writing; "decode-stage" figures exclude the JVM start and the
statistics. Targets from the issue: local[2] >= 1.7x local[1]; local[1] >= 0.7x the
single-process decoder. Never asserts: it prints.

Run: ``python -m tools.bench.bench_stats [FILE] [--mb 1000] [--repeat 2] [--no-pin] [--paths]``
(without FILE a capture is generated with tools/bench/gen_capture.py into a temp dir; the
default of 1000 MB keeps the fixed Spark start-up, a few seconds, small next to decoding).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


def _cli(pin: bool) -> list[str]:
    pre = ["taskset", "-c", "0"] if pin and shutil.which("taskset") else []
    return [*pre, sys.executable, "-m", "kraft_jbod.cli"]


def _timed(cmd: list[str]) -> tuple[subprocess.CompletedProcess[str], float, float]:
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return proc, wall, cpu


def _decode(path: Path, pin: bool) -> dict[str, Any]:
    proc, wall, cpu = _timed([*_cli(pin), "decode", "--summary", "--no-progress", str(path)])
    m = re.search(r"^(\d+) frames", proc.stdout, re.M)
    if m is None:
        raise SystemExit(f"decode printed no summary: {proc.stderr[-2000:]}")
    return {"frames": int(m.group(1)), "wall": wall, "cpu": cpu}


def _stats(path: Path, master: str, out: Path, decode_path: str, split_mb: float, pin: bool) -> dict[str, Any]:
    cmd = [*_cli(pin), "stats", str(path), "--out", str(out), "--master", master, "--quiet",
           "--decode-path", decode_path, "--split-mb", str(split_mb)]
    proc, wall, cpu = _timed(cmd)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"stats failed ({proc.returncode}): {proc.stderr[-3000:]}")
    manifest = json.loads((out / "run_manifest.json").read_text())
    inputs = pq.read_table(out / "inputs").to_pylist()
    workers = sum((r.get("cpu_s") or 0) for r in inputs)
    # The JVM is not a waited-for child of the driver: add its own figure and the workers'.
    cpu += manifest["timings"].get("jvm_cpu_s", 0.0) + workers
    return {"wall": wall, "cpu": cpu, "jvm_cpu_s": manifest["timings"].get("jvm_cpu_s"),
            "frames": manifest["counts"].get("frame", 0),
            "decode_s": manifest["timings"]["decode_s"], "start_s": manifest["timings"]["spark_start_s"],
            "stats_s": manifest["timings"]["stats_s"], "tasks": manifest["tasks"],
            "rss_mb": max((r.get("max_rss_kb") or 0) for r in inputs) / 1024,
            "worker_cpu_s": workers}


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return min(runs, key=lambda r: float(r["wall"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("file", nargs="?", type=Path)
    ap.add_argument("--mb", type=float, default=1000.0, help="size of the generated capture (default 1000)")
    ap.add_argument("--paths", action="store_true", help="also compare decode paths on local[2]")
    ap.add_argument("--split-mb", type=float, default=64.0)
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration; the best wall is kept")
    ap.add_argument("--no-pin", dest="pin", action="store_false",
                    help="do not pin the single-process and local[1] runs to core 0")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kj-bench-stats-"))
    path = args.file
    if path is None:
        from tools.bench.gen_capture import generate

        path = tmp / "bench.pcapng"
        with path.open("wb") as fh:
            generate(fh, mb=args.mb, seed=7)
    size_mb = path.stat().st_size / 1e6
    print(f"input: {path} ({size_mb:.1f} MB), cpus: {os.cpu_count()}, pinned single/local[1]: {args.pin}, "
          f"repeat: {args.repeat}")
    # Warm-up: the first embedded run makes the JVM's class-data archive (a one-off).
    _stats(path if size_mb < 50 else _small(path, tmp), "local[1]", tmp / "warm", "arrow", args.split_mb, False)
    plan: list[tuple[str, str, bool]] = [("single", "", args.pin), ("local[1]", "arrow", args.pin),
                                         ("local[2]", "arrow", False)]
    if args.paths:
        plan += [("local[2]", "rdd", False), ("local[2]", "udf", False)]
    results: dict[str, list[dict[str, Any]]] = {}
    for rnd in range(max(1, args.repeat)):
        order = plan[rnd % len(plan):] + plan[:rnd % len(plan)]
        for master, dp, pin in order:
            key = "single" if master == "single" else f"{master} {dp}"
            if master == "single":
                r = _decode(path, pin)
            else:
                r = _stats(path, master, tmp / f"out-{master[6]}-{dp}", dp, args.split_mb, pin)
            results.setdefault(key, []).append(r)
            print(f"  run {rnd + 1}: {key}: wall {r['wall']:.1f} s, cpu {r['cpu']:.1f} s", flush=True)
    single = _best(results["single"])
    frames = single["frames"]
    fps = frames / single["wall"]
    print(f"\nsingle-process decode: {frames} frames in {single['wall']:.1f} s = {fps:,.0f} frames/s "
          f"({single['cpu']:.1f} cpu-s)")
    runs = {k: _best(v) for k, v in results.items() if k != "single"}
    for key, r in runs.items():
        print(f"{key:>16}: {r['frames']} frames; wall {r['wall']:.1f} s = {r['frames'] / r['wall']:,.0f} frames/s; "
              f"decode stage {r['decode_s']:.1f} s = {r['frames'] / r['decode_s']:,.0f} frames/s; JVM start "
              f"{r['start_s']:.1f} s; statistics {r['stats_s']:.2f} s; {r['tasks']} tasks; process-tree CPU "
              f"{r['cpu']:.1f} s (workers {r['worker_cpu_s']:.1f} s, JVM {r['jvm_cpu_s'] or 0:.1f} s); "
              f"peak worker RSS {r['rss_mb']:.0f} MB")
    one, two = runs["local[1] arrow"], runs["local[2] arrow"]
    print()
    print(f"local[2] / local[1] (wall):          {one['wall'] / two['wall']:.2f}x  (target >= 1.7)")
    print(f"local[2] / local[1] (decode stage):  {one['decode_s'] / two['decode_s']:.2f}x")
    print(f"local[1] / single-process (wall):    {one['frames'] / one['wall'] / fps:.2f}x  (target >= 0.7)")
    print(f"local[1] / single-process (decode):  {one['frames'] / one['decode_s'] / fps:.2f}x")
    print(f"local[2] / single-process (wall):    {two['frames'] / two['wall'] / fps:.2f}x")
    print(f"process-tree CPU / single-process CPU: local[1] {one['cpu'] / single['cpu']:.2f}x, "
          f"local[2] {two['cpu'] / single['cpu']:.2f}x")
    if args.paths:
        base = runs["local[2] arrow"]["decode_s"]
        for k in ("local[2] rdd", "local[2] udf"):
            print(f"decode stage {k} / arrow:  {runs[k]['decode_s'] / base:.2f}x the time")
    if frames != one["frames"] or frames != two["frames"]:
        print(f"WARNING: frame counts differ: decode {frames}, local[1] {one['frames']}, local[2] {two['frames']}")


def _small(path: Path, tmp: Path) -> Path:
    """A small capture for the warm-up run."""
    from tools.bench.gen_capture import generate

    small = tmp / "warm.pcapng"
    with small.open("wb") as fh:
        generate(fh, mb=2, seed=1)
    return small


if __name__ == "__main__":
    main()
