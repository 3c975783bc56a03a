"""The class-data archive's life without starting Spark: one per key, partial dumps never
used and pruned once their writer is gone, other keys pruned, and ``release_jvm`` waiting
for the JVM (here a stand-in process that writes at stdin EOF, as the JVM dumps at exit)
before renaming its dump into place. tools/bench and the issue's closing note measure the
real JVM (disk use after three runs)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.analytics import job

DAY = 86400


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("KRAFT_JBOD_SPARK_CDS", raising=False)
    monkeypatch.setattr(job, "_cds_key", lambda conf: "4.3.0-cafe")
    folder = tmp_path / "kraft-jbod"
    folder.mkdir()
    return folder


def _file(path: Path, age_s: float = 0, size: int = 8) -> Path:
    path.write_bytes(b"x" * size)
    t = time.time() - age_s
    os.utime(path, (t, t))
    return path


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_prune_keeps_the_current_key_one_recent_other_and_live_partials(cache: Path) -> None:
    current = _file(cache / "spark-4.3.0-cafe.jsa", age_s=40 * DAY)  # old but current: kept
    recent_other = _file(cache / "spark-4.1.1-beef.jsa", age_s=1 * DAY)
    older_other = _file(cache / "spark-4.1.1-dead.jsa", age_s=2 * DAY)
    dead = _dead_pid()
    stale_partial = _file(cache / f"spark-4.3.0-cafe.jsa.{dead}", age_s=3600)
    fresh_partial = _file(cache / f"spark-4.1.1-beef.jsa.{dead}", age_s=5)  # its JVM may still write
    live_partial = _file(cache / f"spark-4.0.0-abcd.jsa.{os.getppid()}", age_s=3 * DAY)
    job._prune_cds(cache, current)
    left = {p.name for p in cache.iterdir()}
    assert left == {current.name, recent_other.name, fresh_partial.name, live_partial.name}
    assert not older_other.exists() and not stale_partial.exists()
    _file(recent_other, age_s=31 * DAY)
    job._prune_cds(cache, current)
    assert not recent_other.exists()


def test_plan_dumps_once_and_never_maps_a_partial(cache: Path) -> None:
    c = job._Cds({})
    partial = cache / f"spark-4.3.0-cafe.jsa.{os.getpid()}"
    assert c.dump == (partial, cache / "spark-4.3.0-cafe.jsa") and c.archive is None
    assert f"-XX:ArchiveClassesAtExit={partial}" in c.flags
    # Another live process is writing this key's archive: neither dump nor map.
    _file(cache / f"spark-4.3.0-cafe.jsa.{os.getppid()}", size=100)
    c = job._Cds({})
    assert (c.flags, c.dump, c.archive) == ([], None, None)
    # The finished archive is mapped (and its use recorded for pruning).
    archive = _file(cache / "spark-4.3.0-cafe.jsa", age_s=5 * DAY)
    c = job._Cds({})
    assert c.archive == archive and f"-XX:SharedArchiveFile={archive}" in c.flags and c.dump is None
    assert time.time() - archive.stat().st_mtime < 60


class _Gateway:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.closed = False

    def shutdown(self) -> None:
        self.closed = True


class _Session:
    stopped = False

    def stop(self) -> None:
        self.stopped = True


def test_release_jvm_waits_for_the_dump_and_renames_it(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    partial, archive = cache / f"spark-4.3.0-cafe.jsa.{os.getpid()}", cache / "spark-4.3.0-cafe.jsa"
    # Stands in for the gateway JVM: it exits on stdin EOF and writes its archive then, slowly.
    writer = (
        f"import sys, time\nsys.stdin.buffer.read()\ntime.sleep(1.0)\nopen({str(partial)!r}, 'wb').write(b'J' * 4096)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", writer], stdin=subprocess.PIPE)
    gateway = _Gateway(proc)
    monkeypatch.setattr(SparkContext, "_gateway", gateway)
    monkeypatch.setattr(SparkContext, "_jvm", SparkContext._jvm)  # restored: a real session may share them
    monkeypatch.setattr(job, "_PENDING_DUMP", (partial, archive))
    said: list[str] = []
    session = _Session()
    job.release_jvm(session, said.append)
    assert session.stopped and gateway.closed and proc.returncode == 0
    assert archive.read_bytes() == b"J" * 4096 and not partial.exists()
    assert said == ["writing Spark's class-data archive (first run with this Java and Spark only)"]
    assert SparkContext._gateway is None and job._PENDING_DUMP is None


def test_release_jvm_leaves_a_jvm_it_did_not_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark import SparkContext

    class _Remote:
        proc = None

    monkeypatch.setattr(SparkContext, "_gateway", _Remote())
    session: Any = _Session()
    job.release_jvm(session)
    assert session.stopped and isinstance(SparkContext._gateway, _Remote)


def test_a_jvm_already_running_here_is_the_callers(monkeypatch: pytest.MonkeyPatch) -> None:
    # run_stats(release_jvm=True) ends only a JVM it started: a test session's (or a
    # notebook's) stays up.
    from pyspark import SparkContext

    monkeypatch.setattr(SparkContext, "_gateway", None)
    assert job._jvm_running() is False
    monkeypatch.setattr(SparkContext, "_gateway", _Gateway(subprocess.Popen([sys.executable, "-c", "pass"])))
    assert job._jvm_running() is True
