"""What the pytest plugin costs a test run that never uses it; prints figures, never asserts.

pytest imports every installed ``pytest11`` plugin at start-up, so the plugin's import time
is paid by every pytest run in an environment where kraft-jbod is installed, whatever it
tests. Measured, each in fresh processes (median of ``--runs``):

1. the plugin's import alone, after ``pytest`` and ``pytest_asyncio`` (which pytest loads
   anyway), and the number of ``kraft_jbod`` modules it loads;
2. wall time of ``pytest`` on a one-test file that uses no fixture, with the plugin and
   with ``-p no:kraft_jbod`` (plugins autoloaded, as in a user's environment).

``--root DIR`` measures another checkout (e.g. the main branch) for a before/after.
Target (issue 26): the import costs under 0.2 s.

Run: ``python -m tools.bench.bench_plugin_import [--runs 7] [--root DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_IMPORT = (
    "import json, sys, time, pytest\n"
    "try:\n    import pytest_asyncio\nexcept ImportError:\n    pass\n"
    "before = set(sys.modules)\n"
    "t = time.perf_counter()\n"
    "import kraft_jbod.pytest_plugin\n"
    "dt = time.perf_counter() - t\n"
    "print(json.dumps([dt, len([m for m in set(sys.modules) - before if m.startswith('kraft_jbod')])]))\n"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="checkout to measure")
    args = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(args.root.resolve())}
    imports, modules = [], 0
    for _ in range(args.runs):
        # cwd "/" so that `python -c` (whose sys.path starts with the cwd) imports from --root.
        out = subprocess.run(
            [sys.executable, "-c", _IMPORT], env=env, capture_output=True, text=True, check=True, cwd="/"
        )
        dt, modules = json.loads(out.stdout)
        imports.append(dt)
    print(f"checkout: {args.root}")
    print(
        f"plugin import: median {statistics.median(imports) * 1000:.0f} ms "
        f"(min {min(imports) * 1000:.0f}, max {max(imports) * 1000:.0f}); kraft_jbod modules loaded: {modules}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "test_one.py").write_text("def test_one():\n    assert True\n")
        for label, extra in (("with the plugin", []), ("-p no:kraft_jbod", ["-p", "no:kraft_jbod"])):
            walls = []
            for _ in range(args.runs):
                t = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra, "test_one.py"],
                    cwd=tmp,
                    env=env,
                    capture_output=True,
                    check=True,
                )
                walls.append(time.perf_counter() - t)
            print(
                f"pytest, one plain test, {label}: median {statistics.median(walls):.2f} s "
                f"(min {min(walls):.2f}, max {max(walls):.2f})"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
