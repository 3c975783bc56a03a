"""Apache Kafka's own Admin client (kafka-clients, Java) against the controller and the client listener.

``java/AdminProbe.java`` (compiled here against the kafka-clients jar the Java codec oracle
uses) runs Kafka's client code: with ``bootstrap.controllers`` it does what
``kafka-metadata-quorum --bootstrap-controller describe`` and KIP-919 admin tools do
(DescribeCluster, DescribeQuorum, features, cluster configs) on the controller listener;
with ``bootstrap.servers`` it creates, grows, configures, reassigns and deletes a topic and
manages ACLs through the client listener. Skipped where no JDK or jar is installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from kraft_jbod.pytest_plugin import KraftCluster
from tests.oracles.java_oracle import _classpath, _java_tool, find_jar_dir, java_available
from tools.kafka_oracle import in_ci

SOURCE = Path(__file__).resolve().parents[1] / "controller" / "java" / "AdminProbe.java"
JARS = ("kafka-clients.jar", "slf4j-api.jar")
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "admin-probe"


@pytest.fixture(scope="module")
def probe() -> list[str]:
    reason = java_available()
    if reason is not None:
        if in_ci():
            pytest.fail(f"CI=true and no Java Admin client: {reason}", pytrace=False)
        pytest.skip(f"no Java Admin client here: {reason}")
    javac, java = _java_tool("javac"), _java_tool("java")
    assert javac is not None and java is not None
    jars = [find_jar_dir() / j for j in JARS]
    # Compiled once per source and jar set (javac takes ~10 s here), like the codec oracle.
    digest = hashlib.sha256(SOURCE.read_bytes())
    for jar in jars:
        digest.update(f"\0{jar.name}\0{jar.stat().st_size}".encode())
    out = CACHE / digest.hexdigest()[:20]
    if not (out / "AdminProbe.class").is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
        try:
            done = subprocess.run(
                [javac, "-nowarn", "--release", "17", "-d", str(staging), "-cp", _classpath(jars), str(SOURCE)],
                capture_output=True,
                text=True,
                check=False,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr
            with contextlib.suppress(OSError):  # another worker may have finished first
                staging.rename(out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return [java, "-XX:+UseSerialGC", "-cp", _classpath([out, *jars]), "AdminProbe"]


async def _run(probe: list[str], mode: str, address: str) -> dict[str, str]:
    def call() -> subprocess.CompletedProcess[str]:
        return subprocess.run([*probe, mode, address], capture_output=True, text=True, check=False, timeout=120)

    done = await asyncio.to_thread(call)
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)


async def test_kafka_admin_on_the_controller_listener(kraft_cluster: KraftCluster, probe: list[str]) -> None:
    for b in (1, 2):
        await kraft_cluster.add_broker(b, dirs=2)
    host, port = kraft_cluster.server.addresses[0]
    out = await _run(probe, "controller", f"{host}:{port}")
    state = kraft_cluster.server.state
    assert out["cluster.id"] == kraft_cluster.server.cluster_id
    assert out["cluster.nodes"] == f"[{state.node_id}]"  # KIP-919: the controllers
    assert (out["quorum.leader"], out["quorum.voters"]) == (str(state.node_id), f"[{state.node_id}]")
    assert out["quorum.epoch"] == str(kraft_cluster.server.log.leader_epoch)
    assert out["quorum.observers"] == "[1, 2]"
    assert int(out["quorum.hw"]) > 0
    assert out["features.metadata.version"] == str(state.metadata_version)
    assert out["alter.cluster"] == "ok"
    assert out["describe.cluster.log.retention.ms"] == "123456/DYNAMIC_DEFAULT_BROKER_CONFIG"
    # Next to the cluster min.insync.replicas the bootstrap writes when ELR is on (level 30).
    assert state.image.configs.get(4, "") == {"min.insync.replicas": "1", "log.retention.ms": "123456"}


async def test_kafka_admin_on_the_client_listener(kraft_cluster: KraftCluster, probe: list[str]) -> None:
    for b in (1, 2, 3):
        await kraft_cluster.add_broker(b, dirs=2)
    out = await _run(probe, "client", kraft_cluster.bootstrap)
    assert out == {
        "create": "ok",
        "create.again": "TopicExistsException",
        "partitions": "3",
        "config.retention.ms": "1000/DYNAMIC_TOPIC_CONFIG",
        "config.cleanup.policy": "delete,compact",
        "config.bad": "InvalidConfigurationException",
        "acls.described": "1",
        "acls.deleted": "1",
        "reassign.ongoing": "0",  # a reorder of the same replicas completes at once
        "elect": "ok",  # the new first replica becomes leader
        "delete": "ok",
    }
    assert kraft_cluster.server.state.topic_id_of("jt") is None
