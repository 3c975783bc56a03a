"""Scenario steps shared by the interop modules: Kafka brokers (in the harness JVM) against a
:class:`~tests.interop.harness.ControllerThread`, and the checks every scenario ends with."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.pytest_plugin import CLUSTER_ID, KafkaConnection
from kraft_jbod.realkafka.cluster import wait_until
from tests.interop import kafka_logs, kafka_view
from tests.interop.harness import ControllerThread, InteropJvm, broker_dirs


def start_java_broker(
    jvm: InteropJvm,
    ctl: ControllerThread,
    root: Path,
    broker_id: int,
    ndirs: int = 2,
    *,
    dirs: dict[str, str] | None = None,
    unfence: bool = True,
    **extra: Any,
) -> dict[str, str]:
    """A Kafka broker control plane registered (and, with ``unfence``, running); its dirs."""
    dirs = dirs if dirs is not None else broker_dirs(root, broker_id, ndirs)
    jvm(
        "start_broker",
        broker=broker_id,
        voters=ctl.voters,
        cluster_id=CLUSTER_ID,
        dirs=dirs,
        meta_dir=str(root / f"java-broker-{broker_id}" / f"meta-{uuid.uuid4().hex[:8]}"),
        heartbeat_ms=200,
        **extra,
    )
    jvm("wait", broker=broker_id, until="caught_up", timeout_ms=20000)
    if unfence:
        jvm("unfence", broker=broker_id, timeout_ms=20000)
        # Kafka's lifecycle manager completes its unfence future one statement before it
        # moves to RUNNING, so a loaded machine can show RECOVERY right after: wait for it.
        wait_until(
            f"broker {broker_id} RUNNING after its unfencing",
            lambda: jvm("broker", broker=broker_id)["state"] == "RUNNING",
            20,
            interval=0.02,
        )
    return dirs


def wait_synced(jvm: InteropJvm, ctl: ControllerThread, broker_id: int, timeout_ms: int = 15000) -> dict[str, Any]:
    """Wait until the broker's loader has applied everything the controller wrote."""
    last = ctl.end_offset() - 1
    return jvm("wait", broker=broker_id, until="offset", offset=last, timeout_ms=timeout_ms)


def exchanges(jvm: InteropJvm, broker_id: int, api: str | None = None) -> list[dict[str, Any]]:
    found = jvm("exchanges", broker=broker_id)["exchanges"]
    return [e for e in found if api is None or e["api"] == api]


def create_topic(ctl: ControllerThread, name: str, partitions: int, rf: int) -> Any:
    assert ctl.cluster is not None
    result = ctl.run(ctl.cluster.create_topic(name, partitions, rf))
    assert result.error_code == 0, result
    return result


def unassigned_replicas(ctl: ControllerThread, broker_id: int, profile: str = "kafka") -> list[tuple[str, str, int]]:
    """``(topic name, topic id, partition)`` of this broker's replicas the controller holds UNASSIGNED."""
    out = []
    for t in ctl.view()["topics"]:
        for p in t["partitions"]:
            for r, d in zip(p["replicas"], p["directories"], strict=True):
                if r == broker_id and d == "UNASSIGNED":
                    out.append((t["name"], t["id"], p["partition"]))
    return out


def assign_round_robin(
    jvm: InteropJvm, ctl: ControllerThread, broker_id: int, dirs: dict[str, str]
) -> dict[tuple[str, int], str]:
    """Place each of the broker's unassigned replicas in its dirs in turn, through Kafka's
    AssignmentsManager; returns where each went."""
    wait_synced(jvm, ctl, broker_id)
    ids = list(dirs.values())
    placed: dict[tuple[str, int], str] = {}
    for i, (name, topic_id, partition) in enumerate(unassigned_replicas(ctl, broker_id)):
        target = ids[i % len(ids)]
        reply = jvm("assign", broker=broker_id, topic_id=topic_id, partition=partition, dir=target, timeout_ms=15000)
        assert reply["assigned"], (name, partition, reply)
        placed[(name, partition)] = target
    return placed


def listener_metadata(ctl: ControllerThread) -> Any:
    """Our client listener's Metadata v12 answer for every topic."""

    async def ask() -> Any:
        conn = await KafkaConnection.open(ctl.client_address, client_id="interop")
        try:
            return await conn.call(MetadataRequest(topics=None), 12)
        finally:
            await conn.close()

    return ctl.run(ask())


def check_all_views(
    jvm: InteropJvm,
    ctl: ControllerThread,
    broker_id: int | None,
    *,
    profile: str = "kafka",
    listener: str = "PLAINTEXT",
) -> dict[str, Any]:
    """The end of every scenario: Kafka's images (the live broker's, and the controller's log
    loaded from disk) equal our status view; Kafka's metadata cache answers Metadata as our
    client listener does; Kafka logged no warning or error. Returns the log load reply."""
    problems = kafka_logs.problems(jvm.log_lines())
    assert problems == [], problems
    view = ctl.view()
    if broker_id is not None:
        wait_synced(jvm, ctl, broker_id)
        view = ctl.view()
        live = jvm("image", broker=broker_id)["image"]
        kafka_view.assert_image_matches_view(live, view, profile)
    loaded = jvm("load_log", dir=str(ctl.metadata_dir), listener=listener)
    assert loaded["faults"] == []
    assert loaded["snapshot_losses"] == [] and loaded["snapshot_round_trip_equal"] is True
    kafka_view.assert_image_matches_view(loaded["image"], view, profile)
    ours = kafka_view.metadata_from_listener(listener_metadata(ctl))
    kafkas = kafka_view.metadata_from_kafka_cache(loaded["metadata"])
    assert sorted(ours) == sorted(kafkas)
    for key in ours:
        assert ours[key] == kafkas[key], (key, "ours", ours[key], "kafka", kafkas[key])
    return loaded
