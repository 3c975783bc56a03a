"""Run the compiled codec's tests once under AddressSanitizer and UndefinedBehaviorSanitizer.

``python -m tools.accel_sanitize [-p VENV]`` builds ``kraft_jbod/_accel/_ccodec.c`` with
``-fsanitize=address,undefined`` into a scratch copy of the package and its tests (the
worktree's own build is left alone), then runs ``tests/codec/test_accel.py``, the
snapshot restore tests (``tests/controller/test_snapshot_restore.py``) and the metadata
log's bulk encoder tests (``tests/controller/test_log_encode.py``) on the C backend
under it. Any sanitizer report ends the run with a non-zero status.

What a fresh CI machine needs is what ``make test`` needs anyway: gcc (Debian's ``gcc``
brings ``libasan`` and ``libubsan``) and the Python headers. The sanitizer runtime has to
be loaded before the interpreter's own libraries, which an extension module cannot do,
so it is preloaded (``LD_PRELOAD``); ``PYTHONMALLOC=malloc`` sends every object to the
C allocator, where the sanitizer sees overruns that Python's arena allocator would hide.
Leak checking is off: an interpreter deliberately leaves objects alive at exit.

Without gcc or its sanitizer runtime it says so and exits 0, except under ``CI=true``,
where that is an error (as for the Kafka builds in the Makefile).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "kraft_jbod" / "_accel" / "_ccodec.c"
TESTS = (
    "tests/codec/test_accel.py",
    "tests/controller/test_snapshot_restore.py",
    "tests/controller/test_log_encode.py",
)
FLAGS = (
    "-shared",
    "-fPIC",
    "-g",
    "-O1",
    "-fno-omit-frame-pointer",
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=undefined",
    "-Wall",
    "-Wno-unused-parameter",
)


class Unavailable(Exception):
    """No compiler or sanitizer runtime on this machine."""


def runtime(compiler: str) -> str:
    """The path of the compiler's AddressSanitizer runtime (to preload)."""
    try:
        out = subprocess.run(
            [compiler, "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as exc:
        raise Unavailable(f"{compiler}: {exc}") from None
    if not os.path.isabs(out) or not os.path.exists(out):
        raise Unavailable(f"{compiler} has no libasan (Debian: apt-get install gcc)")
    return os.path.realpath(out)


def stage(python: str, scratch: Path) -> None:
    """Copy the package and the tests into ``scratch`` and build the sanitized extension there."""
    ignore = shutil.ignore_patterns("__pycache__", "*.so", ".hypothesis")
    for name in ("kraft_jbod", "tests"):
        shutil.copytree(ROOT / name, scratch / name, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", scratch / "pyproject.toml")
    query = "import sysconfig as s; print(s.get_paths()['include']); print(s.get_config_var('EXT_SUFFIX'))"
    paths = subprocess.run(
        [python, "-c", query],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    include, suffix = paths[0], paths[1]
    target = scratch / "kraft_jbod" / "_accel" / f"_ccodec{suffix}"
    compiler = os.environ.get("CC", "gcc")
    cmd = [compiler, *FLAGS, f"-I{include}", str(SOURCE), "-o", str(target)]
    print("+", " ".join(cmd), flush=True)
    try:
        subprocess.run(cmd, check=True)
    except OSError as exc:
        raise Unavailable(f"{compiler}: {exc}") from None


def run(python: str) -> int:
    compiler = os.environ.get("CC", "gcc")
    preload = runtime(compiler)
    with tempfile.TemporaryDirectory(prefix="kraft-jbod-sanitize-") as tmp:
        scratch = Path(tmp)
        stage(python, scratch)
        env = dict(os.environ)
        env.update(
            LD_PRELOAD=preload,
            ASAN_OPTIONS="detect_leaks=0:halt_on_error=1:abort_on_error=0",
            UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1",
            PYTHONMALLOC="malloc",
            PYTHONPATH=str(scratch),
            KRAFT_JBOD_CODEC="c",
            PYTHONDONTWRITEBYTECODE="1",
        )
        cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS]
        print(f"+ LD_PRELOAD={preload} {' '.join(cmd)}", flush=True)
        return subprocess.run(cmd, cwd=scratch, env=env).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-p", "--venv", type=Path, help="virtualenv whose python runs the tests (default: this one)")
    args = parser.parse_args(argv)
    python = str(args.venv / "bin" / "python") if args.venv else sys.executable
    try:
        status = run(python)
    except Unavailable as exc:
        print(f"accel-sanitize: {exc}", file=sys.stderr)
        return 1 if os.environ.get("CI") == "true" else 0
    print(f"accel-sanitize: {'clean' if status == 0 else f'FAILED (status {status})'}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
