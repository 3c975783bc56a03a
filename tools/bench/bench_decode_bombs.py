"""Peak RSS of ``kraft-jbod decode`` on decompression-bomb captures, with and without the
decode budget; prints a table, never asserts.

The captures come from :mod:`tools.bench.bombs` (a 1.2 KiB pcapng holding one Produce with
a zstd batch of 10^6 empty records, a 5 KiB one with six such batches, 40 frames just
under the per-frame budget, and 11 of those held behind an orphan response). Each run is
a fresh ``python -m kraft_jbod decode FILE`` process writing its JSON lines to /dev/null
(the output streams, so what is measured is what one frame costs); its own peak RSS is
read with ``os.wait4``.

"budget" runs use the defaults; "no budget" runs raise every limit out of the way, which
is what ``decode`` did before the budget existed, under an address-space cap
(``--cap-mb``, default 3072) so a bomb meets MemoryError instead of swapping the machine:
the column "rc / traceback" shows how that ends (the decoder keeps the frame undecoded
with an anomaly; anything else ends in one ``kraft-jbod:`` line, never a traceback).

Target (issue 26): every bomb decodes in under 256 MB peak RSS with the default budget.

Run: ``python -m tools.bench.bench_decode_bombs [--cap-mb 3072] [--no-unbounded]``
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools.bench.bombs import BOMBS

_UNBOUNDED = ["--max-frame-records", "1e15", "--max-frame-bytes", "1e15", "--max-file-records", "1e15"]
_UNBOUNDED += ["--max-file-bytes", "1e15"]


def _run(path: Path, extra: list[str], cap_mb: int | None) -> tuple[int, float, float, bool, str]:
    """(exit code, peak RSS in MiB, wall seconds, traceback on stderr, last stderr line)."""

    def limit() -> None:
        if cap_mb:
            resource.setrlimit(resource.RLIMIT_AS, (cap_mb << 20, cap_mb << 20))

    cmd = [sys.executable, "-m", "kraft_jbod", "decode", str(path), "--no-progress", *extra]
    t = time.perf_counter()
    with open(os.devnull, "w") as sink, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=sink, stderr=err, preexec_fn=limit)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    last = text.strip().splitlines()[-1] if text.strip() else ""
    return proc.returncode, usage.ru_maxrss / 1024, wall, "Traceback" in text, last


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--cap-mb", type=int, default=3072, help="address-space cap of the no-budget runs")
    ap.add_argument("--no-unbounded", action="store_true", help="only the runs with the default budget")
    args = ap.parse_args(argv)
    print(f"{'capture':<14} {'size':>7}  {'mode':<10} {'peak RSS':>10} {'wall':>7}  rc / traceback / last stderr line")
    with tempfile.TemporaryDirectory() as tmp:
        for name, build in BOMBS.items():
            path = Path(tmp) / f"{name}.pcapng"
            path.write_bytes(build())
            modes: list[tuple[str, list[str], int | None]] = [("budget", [], None)]
            if not args.no_unbounded:
                modes.append(("no budget", _UNBOUNDED, args.cap_mb))
            for mode, extra, cap in modes:
                rc, rss, wall, tb, last = _run(path, extra, cap)
                print(
                    f"{name:<14} {path.stat().st_size:>6}B  {mode:<10} {rss:>7.0f} MiB {wall:>6.1f}s  "
                    f"{rc} / {'yes' if tb else 'no'} / {last[:70]}"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
