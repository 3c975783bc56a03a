"""Locate, and build when needed, the Apache Kafka 4.4 oracle the interop tests run.

The oracle is one jar of Kafka 4.4's own classes (clients, raft, metadata, the broker's
lifecycle and assignment managers) compiled from the source package that sits next to a
checkout in ``../shared/kafka/`` (``kafka-4.4-src.tar.gz`` + ``build.sh``). This module only
finds things and runs that package's ``build.sh``; it holds no Kafka code.

Where things are, in order of precedence:

* ``KRAFT_JBOD_KAFKA_ORACLE``: an already built oracle directory (with its ``classpath``
  file); used as is, never rebuilt.
* ``KRAFT_JBOD_KAFKA_SOURCE``: the source package directory; default ``<repo>/../shared/kafka``.
* The build goes to ``<repo>/.cache/kafka-4.4`` (ignored by git). ``build.sh`` is idempotent:
  when the jar is newer than the tarball it returns in a fraction of a second.

``python -m tools.kafka_oracle build [-p VENV]`` is what ``make test`` runs. Without the
source package it prints how to get it and exits 0 (the interop tests then skip), except
under ``CI=true``, where a missing oracle is an error (exit 1).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
DEFAULT_OUT: Final = REPO_ROOT / ".cache" / "kafka-4.4"
ENV_ORACLE: Final = "KRAFT_JBOD_KAFKA_ORACLE"
ENV_SOURCE: Final = "KRAFT_JBOD_KAFKA_SOURCE"

HOW_TO_GET: Final = (
    "Kafka 4.4's source package is not next to this checkout: put the project's shared "
    "`kafka/` package (kafka-4.4-src.tar.gz, build.sh, stubs/) at ../shared/kafka/ or point "
    f"{ENV_SOURCE} at it, or set {ENV_ORACLE} to an oracle directory built by its build.sh; "
    "then `make test` (or `python -m tools.kafka_oracle build`) builds it. It needs a JDK 17."
)


class OracleUnavailable(Exception):
    """The oracle cannot be found or built here; the message says why and what to do."""


@dataclass(frozen=True)
class Oracle:
    """A built oracle: its directory and the class path entries (jar first)."""

    directory: Path
    classpath: tuple[Path, ...]

    @property
    def jar(self) -> Path:
        return self.classpath[0]

    def classpath_string(self) -> str:
        return os.pathsep.join(str(p) for p in self.classpath)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def source_dir() -> Path:
    env = os.environ.get(ENV_SOURCE)
    return Path(env) if env else REPO_ROOT.parent / "shared" / "kafka"


def read_oracle(directory: Path) -> Oracle:
    """The oracle built in ``directory``.

    Raises:
        OracleUnavailable: no ``classpath`` file, or an entry of it is missing.
    """
    cp_file = directory / "classpath"
    if not cp_file.is_file():
        raise OracleUnavailable(f"{directory} holds no built Kafka oracle (no classpath file)")
    entries = tuple(Path(e) for e in cp_file.read_text().strip().split(os.pathsep) if e)
    missing = [str(e) for e in entries if not e.exists()]
    if not entries or missing:
        raise OracleUnavailable(f"{cp_file}: class path entries missing: {', '.join(missing) or 'none listed'}")
    return Oracle(directory, entries)


def _tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).is_file():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def build(python_env: Path | None = None, out: Path = DEFAULT_OUT, *, force: bool = False) -> Oracle:
    """Build (or confirm up to date) the oracle from the source package into ``out``.

    ``python_env`` is the virtual environment holding pyspark and the flink wheel (their
    jars supply Jackson, SLF4J, Log4j 2...); default: the running interpreter's.
    Concurrent callers serialize on a lock file, so test workers never see half a build.

    Raises:
        OracleUnavailable: no source package, no JDK, or the build failed (with its output tail).
    """
    src = source_dir()
    script = src / "build.sh"
    if not script.is_file() or not (src / "kafka-4.4-src.tar.gz").is_file():
        raise OracleUnavailable(f"{src}: no build.sh / kafka-4.4-src.tar.gz. {HOW_TO_GET}")
    missing = [t for t in ("java", "javac", "jar") if _tool(t) is None]
    if missing:
        raise OracleUnavailable(f"{', '.join(missing)} not found (need a JDK 17 on PATH or JAVA_HOME)")
    env_dir = python_env if python_env is not None else Path(sys.prefix)
    out.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cmd = ["bash", str(script), "-p", str(env_dir), "-o", str(out)]
        if force:
            cmd.append("-f")
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr)[-3000:]
            raise OracleUnavailable(f"{' '.join(cmd)} failed (exit {result.returncode}):\n{tail}")
    return read_oracle(out)


def locate(*, build_if_needed: bool = True) -> Oracle:
    """The oracle the tests use: ``KRAFT_JBOD_KAFKA_ORACLE`` as is, else the cached build
    (built or refreshed from the source package when ``build_if_needed``).

    Raises:
        OracleUnavailable: as :func:`build`, or the override points at no oracle.
    """
    override = os.environ.get(ENV_ORACLE)
    if override:
        return read_oracle(Path(override))
    if build_if_needed:
        return build()
    return read_oracle(DEFAULT_OUT)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kafka_oracle", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the oracle into .cache/kafka-4.4 when missing or stale")
    b.add_argument("-p", "--python-env", type=Path, help="virtual environment with pyspark (default: this one)")
    b.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    b.add_argument("-f", "--force", action="store_true")
    sub.add_parser("where", help="print the oracle directory the tests would use")
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            if os.environ.get(ENV_ORACLE):
                oracle = read_oracle(Path(os.environ[ENV_ORACLE]))
            else:
                oracle = build(args.python_env, args.out, force=args.force)
        else:
            oracle = locate(build_if_needed=False)
    except OracleUnavailable as exc:
        if in_ci():
            print(f"kafka oracle: {exc}", file=sys.stderr)
            return 1
        print(f"kafka oracle: {exc}\n(the interop tests will skip)", file=sys.stderr)
        return 0
    print(f"kafka oracle: {oracle.directory} ({len(oracle.classpath)} class path entries)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
