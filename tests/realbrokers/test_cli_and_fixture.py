"""``kraft-jbod real-cluster`` and the ``kraft_real_cluster`` fixture, as a user runs them.

The command prints where everything listens once every broker is unfenced, serves clients,
and on SIGTERM (or ``--run-for``) stops brokers before the controller and leaves no process
behind. Its mistakes are one line and exit 2, before anything starts.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kraft_jbod.realkafka import probe
from kraft_jbod.realkafka.cluster import RealCluster
from kraft_jbod.realkafka.distribution import KafkaDistribution

LISTENING = re.compile(r"^listening on (\S+) 127\.0\.0\.1:(\d+)$", re.MULTILINE)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "kraft_jbod", "real-cluster", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )


def test_real_cluster_command_runs_and_stops_clean(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    workdir = tmp_path / "cluster"
    proc = _cli("--kafka", str(kafka_dist.home), "--brokers", "2", "--log-dirs", "3", "--workdir", str(workdir))
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 240
        while not any(line.startswith("bootstrap.servers=") for line in lines):
            line = proc.stdout.readline()
            assert line or proc.poll() is None, f"exited {proc.poll()}: {proc.stderr.read() if proc.stderr else ''}"
            lines.append(line.strip())
            assert time.monotonic() < deadline, lines
        found = dict(LISTENING.findall("\n".join(lines)))
        assert {"CONTROLLER", "ADMIN", "CLIENT", "BROKER-1", "BROKER-2"} <= set(found)
        view = probe.metadata(("127.0.0.1", int(found["BROKER-1"])), [])
        assert set(view.brokers) == {1, 2}
        dirs = probe.log_dirs(("127.0.0.1", int(found["BROKER-2"])))
        assert len(dirs) == 3
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # brokers stopped before the controller: their logs end with a completed controlled shutdown
    for b in (1, 2):
        log = (workdir / f"broker-{b}" / "server.log").read_text()
        assert "Controlled shutdown request returned successfully" in log or "shut down completed" in log
    leftover = subprocess.run(["pgrep", "-f", str(workdir)], capture_output=True, text=True)
    assert leftover.stdout.strip() == "", f"processes left behind: {leftover.stdout}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--brokers", "0"], "--brokers"),
        (["--log-dirs", "0"], "log dirs per broker"),
        (["--cordon", "one"], "--cordon"),
        (["--controller-override", "novalue"], "--controller-override"),
        (["--heap-mb", "64"], "heap"),
        (["--kafka", "/nonexistent/kafka"], "not a folder"),
    ],
)
def test_real_cluster_mistakes_are_one_line(args: list[str], message: str, kafka_dist: KafkaDistribution) -> None:
    full = args if "--kafka" in args else ["--kafka", str(kafka_dist.home), *args]
    proc = subprocess.run(
        [sys.executable, "-m", "kraft_jbod", "real-cluster", *full], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kraft-jbod: ")]
    assert len(errors) == 1 and message in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_no_kafka_anywhere_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "KRAFT_JBOD_KAFKA_HOME": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "kraft_jbod", "real-cluster"], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("kraft-jbod: no Kafka: give --kafka DIR"), proc.stderr


def test_the_pytest_fixture_gives_a_running_cluster(kraft_real_cluster: object, kafka_dist: KafkaDistribution) -> None:
    assert callable(kraft_real_cluster)
    cluster = kraft_real_cluster(brokers=1, log_dirs=2)
    assert isinstance(cluster, RealCluster)
    assert set(cluster.wait_unfenced().brokers) == {1}
    assert len(probe.log_dirs(cluster.brokers[1].address)) == 2
