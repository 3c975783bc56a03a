"""Each fake broker's own client listener, judged by real clients: kafka-python and
confluent-kafka (librdkafka) in Python, and Kafka's own Java Admin client from the oracle jar.

One cluster (a controller and two fake brokers with two log dirs each, serving clients on
ports of their own) is driven through the JBOD states a UI or admin tool must show: a
cordoned dir, a replica moved with AlterReplicaLogDirs, an offline dir."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller.config import parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, broker_properties, controller_config, wait_for
from kraft_jbod.storage import StorageLayout, format_storage
from tests.oracles.kafka44 import require_kafka_oracle

PROBE = Path(__file__).resolve().parent / "java" / "LogDirsProbe.java"


class Cluster:
    def __init__(self, controller: ControllerServer, brokers: dict[int, FakeBroker]) -> None:
        self.controller, self.brokers = controller, brokers

    def address(self, node: int) -> str:
        addr = self.brokers[node].client_listeners[0].address
        assert addr is not None
        return f"{addr[0]}:{addr[1]}"

    def dir_path(self, node: int, i: int) -> str:
        return str(Path(self.brokers[node].config.layout.log_dirs[i]).absolute())


@pytest_asyncio.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    brokers: dict[int, FakeBroker] = {}
    try:
        for node in (1, 2):
            props = parse_properties(broker_properties(tmp_path, node, controller.addresses[0][1]))
            format_storage(StorageLayout.from_properties(props), CLUSTER_ID)
            brokers[node] = FakeBroker(BrokerConfig.from_properties(props))
            await brokers[node].start()
        await wait_for("brokers RUNNING", lambda: all(b.lifecycle.state is State.RUNNING for b in brokers.values()), 20)
        yield Cluster(controller, brokers)
    finally:
        for b in brokers.values():
            await b.close()
        await controller.close()


def _kafka_python_admin(bootstrap: str) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def _controller_dir(cluster: Cluster, tid: Any, partition: int, broker: int) -> Any:
    p = cluster.controller.state.partition(tid, partition)
    return dict(zip(p.replicas, p.dirs, strict=True))[broker]


async def _topic(cluster: Cluster, name: str, partitions: int) -> None:
    """Created through broker 2, which forwards CreateTopics to the controller in an Envelope."""

    def create() -> None:
        from kafka.admin import NewTopic

        admin = _kafka_python_admin(cluster.address(2))
        try:
            admin.create_topics([NewTopic(name, partitions, 2)])
        finally:
            admin.close()

    await asyncio.to_thread(create)
    await wait_for(
        f"{name} placed on both brokers",
        lambda: all(
            b.queue.queued == 0
            and sum(1 for p in b.image.partitions.values() if b.image.topic_names.get(p.topic_id) == name) == partitions
            and all(p.directories[0].int > 100 for p in b.image.partitions.values())
            for b in cluster.brokers.values()
        ),
        20,
    )


async def test_clients_see_each_broker_at_its_own_address(cluster: Cluster) -> None:
    await _topic(cluster, "orders", 4)
    assert cluster.controller.state.topic_id_of("orders") is not None  # forwarded and committed

    def kafka_python() -> dict[str, Any]:
        admin = _kafka_python_admin(cluster.address(1))
        try:
            return dict(admin.describe_cluster())
        finally:
            admin.close()

    def librdkafka() -> tuple[dict[int, str], list[str]]:
        from confluent_kafka.admin import AdminClient

        md = AdminClient({"bootstrap.servers": cluster.address(2), "log_level": 0}).list_topics(timeout=10)
        return {b: f"{m.host}:{m.port}" for b, m in md.brokers.items()}, list(md.topics)

    described = await asyncio.to_thread(kafka_python)
    assert {b["broker_id"]: f"{b['host']}:{b['port']}" for b in described["brokers"]} == {
        1: cluster.address(1),
        2: cluster.address(2),
    }
    assert described["cluster_id"] == CLUSTER_ID and described["controller_id"] == 1
    brokers, topics = await asyncio.to_thread(librdkafka)
    assert brokers == {1: cluster.address(1), 2: cluster.address(2)} and topics == ["orders"]


async def test_describe_and_alter_log_dirs_through_kafka_python(cluster: Cluster) -> None:
    from kafka import TopicPartitionReplica
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        KafkaStorageError,
        LogDirNotFoundError,
        NoError,
    )

    await _topic(cluster, "jbod", 4)
    b1, b2 = cluster.brokers[1], cluster.brokers[2]
    tid = b2.image.topic_id("jbod")
    assert tid is not None
    d0, d1 = cluster.dir_path(2, 0), cluster.dir_path(2, 1)
    in_d0 = sorted(p for (t, p) in b2.dirs.by_path(b2.config.layout.log_dirs[0]).replicas if t == tid)  # type: ignore[union-attr]
    assert in_d0
    moving = in_d0[0]

    def alter(node: int, partition: int, path: str) -> Any:
        admin = _kafka_python_admin(cluster.address(1))
        try:
            return admin.alter_replica_log_dirs({TopicPartitionReplica("jbod", partition, node): path})
        finally:
            admin.close()

    def describe(node: int) -> dict[str, dict[str, Any]]:
        admin = _kafka_python_admin(cluster.address(node))
        try:
            answer = admin.describe_log_dirs(brokers=[node])
        finally:
            admin.close()
        (only,) = answer
        return {d["log_dir"]: d for d in only["log_dirs"]}

    # A move between broker 2's dirs: answered at once, then the replica lives in d1 and the
    # controller holds d1's id for it (AssignReplicasToDirs).
    assert set((await asyncio.to_thread(alter, 2, moving, d1)).values()) == {NoError}
    d1_id = b2.dirs.by_path(b2.config.layout.log_dirs[1]).dir_id  # type: ignore[union-attr]
    await wait_for(
        "the move to finish",
        lambda: (
            b2.dirs.location((tid, moving)) is b2.dirs.dirs[d1_id] and _controller_dir(cluster, tid, moving, 2) == d1_id
        ),
        20,
    )
    after = await asyncio.to_thread(describe, 2)
    parts = {(t["name"], p["partition_index"]) for t in after[d1]["topics"] for p in t["partitions"]}
    assert ("jbod", moving) in parts
    assert ("jbod", moving) not in {
        (t["name"], p["partition_index"]) for t in after[d0]["topics"] for p in t["partitions"]
    }
    assert after[d0]["error_code"] == 0 and after[d0]["total_bytes"] > 0 and after[d0]["usable_bytes"] > 0

    # Cordoned: reported, and no move into it (INVALID_REPLICA_ASSIGNMENT).
    b2.cordon(str(b2.config.layout.log_dirs[0]), True)
    cordoned = await asyncio.to_thread(describe, 2)
    assert cordoned[d0]["is_cordoned"] is True and cordoned[d1]["is_cordoned"] is False
    assert set((await asyncio.to_thread(alter, 2, moving, d0)).values()) == {InvalidReplicationAssignmentError}
    assert set((await asyncio.to_thread(alter, 2, moving, "/no/such/dir")).values()) == {LogDirNotFoundError}

    # Offline: KAFKA_STORAGE_ERROR and nothing else for that dir; no move while a dir is offline.
    b1.fail_directory(str(b1.config.layout.log_dirs[1]))
    offline = await asyncio.to_thread(describe, 1)
    e0, e1 = offline[cluster.dir_path(1, 0)], offline[cluster.dir_path(1, 1)]
    assert e1["error_code"] == 56 and e1["topics"] == []
    assert e0["error_code"] == 0 and e0["topics"]
    b1_in_d0 = next(p for (t, p) in b1.dirs.by_path(b1.config.layout.log_dirs[0]).replicas if t == tid)  # type: ignore[union-attr]
    assert set((await asyncio.to_thread(alter, 1, b1_in_d0, cluster.dir_path(1, 1))).values()) == {KafkaStorageError}


async def test_kafkas_java_admin_client_describes_and_moves(cluster: Cluster) -> None:
    oracle = require_kafka_oracle()
    java = shutil.which("java")
    assert java is not None, "the Kafka oracle is built but no java runs it"
    classpath = os.pathsep.join(map(str, oracle.classpath))
    await _topic(cluster, "java", 2)
    b2 = cluster.brokers[2]
    tid = b2.image.topic_id("java")
    assert tid is not None

    def run(*args: str) -> list[str]:
        done = subprocess.run(
            [java, "-cp", classpath, str(PROBE), cluster.address(1), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.splitlines()

    src = b2.dirs.location((tid, 0))
    assert src is not None
    target = next(i for i, p in enumerate(b2.config.layout.log_dirs) if Path(p) != src.path)
    assert await asyncio.to_thread(run, "alter", "java", "0", "2", cluster.dir_path(2, target)) == ["alter OK"]
    await wait_for(
        "the move", lambda: b2.dirs.location((tid, 0)) is b2.dirs.by_path(b2.config.layout.log_dirs[target]), 20
    )
    b2.fail_directory(str(src.path))
    lines = await asyncio.to_thread(run, "describe", "1", "2")
    assert f"node 1 {cluster.address(1)}" in lines and f"node 2 {cluster.address(2)}" in lines
    dirs = {(w[1], w[2]): w for w in (line.split() for line in lines) if w[0] == "dir"}
    assert len(dirs) == 4
    gone = dirs[("2", str(src.path.absolute()))]
    assert gone[3] == "KafkaStorageException" and gone[4] == "total=-1"
    moved = dirs[("2", cluster.dir_path(2, target))]
    assert moved[3] == "NONE" and "java-0" in moved[-1].removeprefix("replicas=").split(",")
    assert int(moved[4].removeprefix("total=")) > 0 and moved[6] == "cordoned=false"
    assert (await asyncio.to_thread(run, "alter", "java", "1", "2", "/no/such/dir")) == [
        "alter ERROR LogDirNotFoundException"
    ]


async def test_the_data_path_fails_at_once_with_a_clear_error(cluster: Cluster) -> None:
    await _topic(cluster, "data", 2)

    def librdkafka() -> tuple[list[Any], Any]:
        from confluent_kafka import Consumer, Producer

        producer = Producer({"bootstrap.servers": cluster.address(1), "log_level": 0})
        errors: list[Any] = []
        producer.produce("data", b"x", on_delivery=lambda err, _msg: errors.append(err))
        assert producer.flush(60) == 0  # delivered (with its error), not waiting out message.timeout.ms
        consumer = Consumer({"bootstrap.servers": cluster.address(1), "group.id": "g", "log_level": 0})
        consumer.subscribe(["data"])
        try:
            deadline = time.monotonic() + 60
            msg = None
            while msg is None and time.monotonic() < deadline:
                msg = consumer.poll(1)
            return errors, msg.error() if msg is not None else None
        finally:
            consumer.close()

    produced, consumed = await asyncio.to_thread(librdkafka)
    assert [e.name() for e in produced] == ["POLICY_VIOLATION"]
    assert consumed is not None and consumed.name() == "GROUP_AUTHORIZATION_FAILED"
    assert "has no data path" in consumed.str() and "real Kafka brokers" in consumed.str()

    def kafka_python() -> tuple[str, str]:
        from kafka import KafkaConsumer, KafkaProducer

        producer = KafkaProducer(bootstrap_servers=cluster.address(2), enable_idempotence=False, retries=0)
        try:
            producer.send("data", b"x").get(timeout=60)
            sent = "sent"
        except Exception as exc:  # the error class is what is checked
            sent = type(exc).__name__
        finally:
            producer.close()
        consumer = KafkaConsumer("data", bootstrap_servers=cluster.address(2), group_id="g2", consumer_timeout_ms=60000)
        try:
            next(iter(consumer))
            got = "message"
        except Exception as exc:
            got = type(exc).__name__
        finally:
            consumer.close()
        return sent, got

    assert await asyncio.to_thread(kafka_python) == ("PolicyViolationError", "GroupAuthorizationFailedError")
