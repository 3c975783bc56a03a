"""Frames per second of ``kraft-jbod stats`` on Spark local[1] and local[2] against the
single-process ``kraft-jbod decode``, on the same input in the same run; prints ratios.

What runs, each as a fresh subprocess (so every Spark run pays its own JVM start, as a
user does):

1. ``kraft-jbod decode --summary --no-progress FILE``: the single-process decoder;
2. ``kraft-jbod stats FILE --master local[1]`` and ``local[2]`` (``--no-frames``, so the
   runs compare decoding plus statistics, not Parquet volume); each reports its decode
   stage time in run_manifest.json, and the workers' peak RSS in the inputs table;
3. with ``--paths``, local[2] again through each decode path (``arrow``, ``rdd``,
   ``udf``): the measurement behind the default.

Frames/s = frames decoded / wall seconds; "decode-stage" figures exclude the JVM start and
the statistics stage. Targets from the issue: local[2] >= 1.7x local[1]; local[1] >= 0.7x
the single-process decoder. Never asserts: it prints.

Run: ``python -m tools.bench.bench_stats [FILE] [--mb 300] [--paths] [--split-mb 64]``
(without FILE a capture is generated with tools/bench/gen_capture.py into a temp dir).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


def _cli() -> list[str]:
    return [sys.executable, "-m", "kraft_jbod.cli"]


def _decode(path: Path) -> tuple[int, float, float]:
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([*_cli(), "decode", "--summary", "--no-progress", str(path)], capture_output=True,
                         text=True, check=False)
    wall = time.perf_counter() - t
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    m = re.search(r"^(\d+) frames", out.stdout, re.M)
    if m is None:
        raise SystemExit(f"decode printed no summary: {out.stderr[-2000:]}")
    return int(m.group(1)), wall, cpu


def _stats(path: Path, master: str, out: Path, decode_path: str, split_mb: float) -> dict[str, Any]:
    t = time.perf_counter()
    proc = subprocess.run([*_cli(), "stats", str(path), "--out", str(out), "--master", master, "--no-frames",
                           "--quiet", "--decode-path", decode_path, "--split-mb", str(split_mb)],
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        raise SystemExit(f"stats failed ({proc.returncode}): {proc.stderr[-3000:]}")
    manifest = json.loads((out / "run_manifest.json").read_text())
    inputs = pq.read_table(out / "inputs").to_pylist()
    return {"wall": wall, "frames": manifest["counts"].get("frame", 0), "decode_s": manifest["timings"]["decode_s"],
            "start_s": manifest["timings"]["spark_start_s"], "tasks": manifest["tasks"],
            "rss_mb": max((r.get("max_rss_kb") or 0) for r in inputs) / 1024,
            "worker_cpu_s": sum((r.get("cpu_s") or 0) for r in inputs)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", nargs="?", type=Path)
    ap.add_argument("--mb", type=float, default=300.0)
    ap.add_argument("--paths", action="store_true", help="also compare decode paths on local[2]")
    ap.add_argument("--split-mb", type=float, default=64.0)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kj-bench-stats-"))
    path = args.file
    if path is None:
        from tools.bench.gen_capture import generate

        path = tmp / "bench.pcapng"
        with path.open("wb") as fh:
            generate(fh, mb=args.mb, seed=7)
    size_mb = path.stat().st_size / 1e6
    print(f"input: {path} ({size_mb:.1f} MB), cpus: {os.cpu_count()}")
    frames, dwall, dcpu = _decode(path)
    print(f"single-process decode: {frames} frames in {dwall:.1f} s = {frames / dwall:,.0f} frames/s "
          f"({dcpu:.1f} cpu-s)")
    runs: dict[str, dict[str, Any]] = {}
    plan = [("local[1]", "arrow"), ("local[2]", "arrow")]
    if args.paths:
        plan += [("local[2]", "rdd"), ("local[2]", "udf")]
    for master, dp in plan:
        r = _stats(path, master, tmp / f"out-{master[6]}-{dp}", dp, args.split_mb)
        key = f"{master} {dp}"
        runs[key] = r
        print(f"{key:>16}: {r['frames']} frames; wall {r['wall']:.1f} s = {r['frames'] / r['wall']:,.0f} frames/s; "
              f"decode stage {r['decode_s']:.1f} s = {r['frames'] / r['decode_s']:,.0f} frames/s; JVM start "
              f"{r['start_s']:.1f} s; {r['tasks']} tasks; worker CPU {r['worker_cpu_s']:.1f} s; "
              f"peak worker RSS {r['rss_mb']:.0f} MB")
    one, two = runs["local[1] arrow"], runs["local[2] arrow"]
    fps = frames / dwall
    print()
    print(f"local[2] / local[1] (wall):          {one['wall'] / two['wall']:.2f}x  (target >= 1.7)")
    print(f"local[2] / local[1] (decode stage):  {one['decode_s'] / two['decode_s']:.2f}x")
    print(f"local[1] / single-process (wall):    {one['frames'] / one['wall'] / fps:.2f}x  (target >= 0.7)")
    print(f"local[1] / single-process (decode):  {one['frames'] / one['decode_s'] / fps:.2f}x")
    print(f"local[2] / single-process (wall):    {two['frames'] / two['wall'] / fps:.2f}x")
    print(f"decode CPU in Spark workers / single-process CPU: local[1] {one['worker_cpu_s'] / dcpu:.2f}x, "
          f"local[2] {two['worker_cpu_s'] / dcpu:.2f}x")
    if args.paths:
        base = runs["local[2] arrow"]["decode_s"]
        for k in ("local[2] rdd", "local[2] udf"):
            print(f"decode stage {k} / arrow:  {runs[k]['decode_s'] / base:.2f}x the time")
    if frames != one["frames"] or frames != two["frames"]:
        print(f"WARNING: frame counts differ: decode {frames}, local[1] {one['frames']}, local[2] {two['frames']}")


if __name__ == "__main__":
    main()
