"""``kraft-jbod stats --master spark://...`` on a stock standalone cluster, whose executors
have pyspark, pyarrow and pandas and nothing of ours: the job ships its own package, falls
back to pure-Python CRC-32C, and gives the local run's tables, but for a "compression
library missing" anomaly on the one frame whose batch is zstd (cramjam is not there).

The cluster is pyspark's own: a master and one worker started with ``spark-class`` on
127.0.0.1 (web UIs on loopback, REST server off). The workers' Python is a fresh venv
whose only extra path is a copy-by-symlink of this venv's site-packages *without*
kraft_jbod, crc32c and cramjam (and without the ``.pth`` hooks of an editable
install); the test checks that premise first.
Inputs: the built-in KIP-858 sample and a capture of three Produce requests (uncompressed,
gzip, zstd), so the run is start-up bound.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kraft_jbod.analytics.job import TABLE_SCHEMAS
from kraft_jbod.capture.sample import build_sample

ROOT = Path(__file__).resolve().parents[2]
pyspark = pytest.importorskip("pyspark")
SPARK_HOME = Path(pyspark.__file__).resolve().parent
pytestmark = pytest.mark.skipif(
    shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="no Java: Spark cannot run"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _worker_python(base: Path) -> Path:
    """A venv whose site-packages sees this venv's packages except kraft_jbod."""
    site_src = next(Path(p) for p in sys.path if p.endswith("site-packages") and Path(p, "pyarrow").is_dir())
    filtered = base / "site"
    filtered.mkdir(parents=True)
    for entry in site_src.iterdir():
        name = entry.name.lower()
        # crc32c and cramjam: native, so a stock cluster lacks them and the job cannot ship them.
        stock_lacks = ("kraft_jbod", "__editable__", "_kraft", "crc32c", "cramjam")
        if name.startswith(stock_lacks) or name.endswith(".pth"):
            continue
        (filtered / entry.name).symlink_to(entry)
    env_dir = base / "env"
    exe = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([exe, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    tag = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (env_dir / "lib" / tag / "site-packages" / "deps.pth").write_text(f"{filtered}\n", encoding="utf-8")
    return py


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK", "SPARK_"))}
    env.update(SPARK_LOCAL_IP="127.0.0.1", SPARK_HOME=str(SPARK_HOME), **extra)
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("cluster")
    py = _worker_python(base)
    for module in ("kraft_jbod", "crc32c", "cramjam"):  # the premise of the test
        probe = subprocess.run(
            [str(py), "-c", f"import pyarrow, pandas; import {module}"],
            env=_clean_env(),
            cwd=base,
            capture_output=True,
            text=True,
        )
        assert f"No module named '{module}'" in probe.stderr, probe.stderr
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    opts = "-Dspark.master.rest.enabled=false -Dspark.ui.showConsoleProgress=false"
    procs = []
    logs = {name: (base / f"{name}.log").open("wb") for name in ("master", "worker")}
    try:
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(_free_port()),
                ],
                env=_clean_env(SPARK_MASTER_OPTS=opts),
                cwd=base,
                stdout=logs["master"],
                stderr=subprocess.STDOUT,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    "1g",
                    "--webui-port",
                    str(_free_port()),
                    "--work-dir",
                    str(base / "work"),
                ],
                env=_clean_env(),
                cwd=base,
                stdout=logs["worker"],
                stderr=subprocess.STDOUT,
            )
        )
        deadline = time.monotonic() + 120
        while b"Successfully registered with master" not in (base / "worker.log").read_bytes():
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail(
                    "the standalone cluster did not start:\n"
                    + (base / "master.log").read_text(errors="replace")[-2000:]
                    + (base / "worker.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.5)
        yield {"url": url, "python": py, "base": base}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        for fh in logs.values():
            fh.close()


def _stats(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kraft_jbod.cli", "stats", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


_RUN_DEPENDENT = frozenset(("wall_s", "cpu_s", "max_rss_kb", "pid"))  # of the inputs table


def _tables(out: Path) -> dict[str, list[dict[str, Any]]]:
    got = {}
    for name in TABLE_SCHEMAS:
        rows = [{k: v for k, v in r.items() if k not in _RUN_DEPENDENT} for r in pq.read_table(out / name).to_pylist()]
        got[name] = sorted(rows, key=lambda r: repr(sorted(r.items())))
    return got


def _produce_capture() -> bytes:
    from kraft_jbod.wire.compression import GZIP, ZSTD
    from tests.capture.kafka_helpers import batch_bytes, capture, conversation, produce_request

    def build(w: Any) -> None:
        c = conversation(w)
        for corr, codec in enumerate((0, GZIP, ZSTD), 1):
            c.client_send(produce_request(batch_bytes([b"v%d" % corr] * 3, codec_id=codec), corr))

    return capture(build)


def test_stock_cluster_run_ships_the_package_and_equals_the_local_run(cluster: dict[str, Any], tmp_path: Path) -> None:
    cap = tmp_path / "in"
    cap.mkdir()
    (cap / "sample.pcapng").write_bytes(build_sample())
    (cap / "produce.pcapng").write_bytes(_produce_capture())
    # No class-data archive: dumping one costs more than this whole small run.
    env = _clean_env(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"), KRAFT_JBOD_SPARK_CDS="0")
    common = [str(cap), "--quiet", "--capture-set", "ci"]
    conf = [
        "--conf",
        f"spark.pyspark.python={cluster['python']}",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.task.maxFailures=1",
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
    ]
    t0 = time.monotonic()
    remote = _stats([*common, "--out", str(tmp_path / "remote"), "--master", cluster["url"], *conf], env, tmp_path)
    assert remote.returncode == 0, remote.stderr[-3000:]
    t1 = time.monotonic()
    local = _stats([*common, "--out", str(tmp_path / "local"), "--master", "local[1]"], env, tmp_path)
    assert local.returncode == 0, local.stderr[-3000:]
    print(f"cluster run {t1 - t0:.1f} s, local run {time.monotonic() - t1:.1f} s")
    manifest = (tmp_path / "remote" / "run_manifest.json").read_text(encoding="utf-8")
    assert cluster["url"] in manifest
    want, got = _tables(tmp_path / "local"), _tables(tmp_path / "remote")
    assert want["overall"][0]["frames"] > 0
    # The one difference: the zstd batch, which the workers cannot decompress without cramjam
    # (an anomaly of its frame, also counted in the timeline's anomalous frames).
    missing = [a for a in got["anomalies"] if a["anomaly"] == "compression library missing"]
    assert [a["count"] for a in missing] == [1]
    assert not [a for a in want["anomalies"] if a["anomaly"] == "compression library missing"]
    got["anomalies"] = [a for a in got["anomalies"] if a not in missing]
    assert sum(r["anomalous"] for r in got["timeline"]) == sum(r["anomalous"] for r in want["timeline"]) + 1
    for name in TABLE_SCHEMAS:
        if name != "timeline":
            assert got[name] == want[name], name

    # Without the package the executors cannot import it: a clear message and exit code 3.
    bare = _stats(
        [*common, "--out", str(tmp_path / "bare"), "--master", cluster["url"], *conf, "--no-ship-package"],
        env,
        tmp_path,
    )
    assert bare.returncode == 3, bare.stderr[-3000:]
    assert "No module named 'kraft_jbod'" in bare.stderr and "Traceback" not in bare.stderr, bare.stderr[-3000:]
