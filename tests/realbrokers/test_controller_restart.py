"""The controller restarts under running brokers, and snapshots past a broker that is down.

Against both controllers. First the controller process is stopped and started again on the
same port while both brokers keep running: they stay registered, a topic created through a
broker afterwards reaches the restarted controller, clients go on. Then broker 2 is
stopped, the controller writes enough metadata to snapshot several times and delete the
log segments broker 2 still needs, and broker 2 is started again: it can only catch up by
fetching the controller's snapshot (Fetch answered with a SnapshotId, then FetchSnapshot),
which it keeps in its own metadata log dir, and it ends unfenced and knowing every topic.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kraft_jbod.realkafka import logs
from kraft_jbod.realkafka.cluster import wait_until
from tests.realbrokers import clients, ops, records
from tests.realbrokers.conftest import Cluster

# Snapshot often and delete what a snapshot covers. Kafka's controller needs segments rolled
# by time and a zero retention for that (its segments must still hold the largest batch: a
# CreateTopics of 50 partitions is one batch of about 18 KB); the mock deletes at each
# snapshot by design.
SNAPSHOT_OFTEN = {
    "mock": {"metadata.log.max.record.bytes.between.snapshots": "4096"},
    "kafka": {
        "metadata.log.max.record.bytes.between.snapshots": "4096",
        "internal.metadata.log.segment.bytes": "1048576",
        "metadata.log.segment.ms": "500",
        "metadata.max.retention.bytes": "1",
        "metadata.max.retention.ms": "1",
        "internal.metadata.delete.delay.millis": "0",
    },
}


def log_start(metadata_dir: Path) -> int:
    """The base offset of the oldest segment left in a ``__cluster_metadata-0`` dir."""
    bases = [int(p.stem) for p in metadata_dir.glob("*.log")]
    return min(bases) if bases else 0


def snapshots(metadata_dir: Path) -> list[Path]:
    return sorted(metadata_dir.glob("*.checkpoint"))


# A broker that loads a snapshot past its metadata log deletes the log's segments; Kafka
# creates a segment's index files lazily, so one it never read has none to rename.
INDEX_NEVER_CREATED = logs.Benign(
    r"WARN Failed atomic move of \S+/__cluster_metadata-0/\d+\.(time)?index to \S+\.deleted retrying with a "
    r"non-atomic move",
    "a broker loads a snapshot past its metadata log",
    "the deleted segment's lazily created index files do not exist; Kafka's broker moves on",
    detail=r"java\.nio\.file\.NoSuchFileException",
)


@pytest.mark.parametrize("controller", ["mock", "kafka"])
def test_controller_restart_and_snapshot_past_a_broker(real_cluster: Callable[..., Cluster], controller: str) -> None:
    cluster = real_cluster(
        controller=controller, brokers=2, log_dirs=2, controller_overrides=SNAPSHOT_OFTEN[controller]
    )
    cluster.benign += [*logs.CONTROLLER_DOWN, *logs.SHUTDOWN, INDEX_NEVER_CREATED]
    assert cluster.controller is not None
    ops.create_via_broker(cluster, "before", [[1, 2], [2, 1]])
    acked = clients.confluent_produce(cluster.bootstrap_servers, "before", clients.values("a", 200))

    # 1. the controller restarts under running brokers
    cluster.restart_controller()
    cluster.wait_unfenced([1, 2])
    ops.create_via_broker(cluster, "after", [[2, 1], [1, 2]])
    acked += clients.confluent_produce(cluster.bootstrap_servers, "before", clients.values("b", 200))

    # 2. snapshots past a stopped broker
    cluster.stop_broker(2)
    cluster.wait_fenced(2)
    meta2 = cluster.brokers[2].metadata_dir / "__cluster_metadata-0"
    behind = records.last_offset(cluster.brokers[2].metadata_dir)
    assert behind > 0
    offsets_seen = {p.name for p in snapshots(meta2)}
    controller_log = cluster.controller.metadata_log_dir()
    for i in range(8):
        assert ops.create_via_controller(cluster, f"round-{i}", [[1]] * 50, wait=False) == 0
    wait_until(
        "the controller's log to start past what broker 2 has",
        lambda: log_start(controller_log) > behind and len(snapshots(controller_log)) >= 1,
        120,
    )
    cluster.start_broker(2)
    view = cluster.wait_unfenced([1, 2])
    assert set(view.brokers) == {1, 2}
    fetched = {p.name for p in snapshots(meta2)} - offsets_seen
    assert fetched, f"broker 2 caught up without a snapshot in {meta2}"
    known = ops.wait_for_topic(cluster, "round-7", 50)
    assert known.partitions[("round-7", 49)].leader == 1

    got = clients.confluent_consume(cluster.bootstrap_servers, "before", len(acked), group="after-restart")
    t = clients.tally(acked, got)
    assert (t.acknowledged, t.lost, t.duplicated) == (400, 0, 0), t
