"""The controller server snapshots on Kafka's byte trigger and restarts from snapshot + tail."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller.image import MetadataImage
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.no_op_record import NoOpRecord
from tests.controller.test_server import CLUSTER, Client, make_config, register_and_unfence


async def _create(client: Client, name: str, partitions: int) -> None:
    resp = await client.call(CreateTopicsRequest(topics=[CreatableTopic(name, partitions, 2)], timeout_ms=1000), 7)
    assert resp.topics[0].error_code == 0, resp


async def test_snapshot_written_by_bytes_and_restart_uses_it(tmp_path: Path) -> None:
    # A tiny byte trigger: every commit past 2 KiB of records takes a snapshot.
    cfg = make_config(tmp_path, **{"metadata.log.max.record.bytes.between.snapshots": "2048"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        client = await Client.connect(s.addresses[0])
        for b in (1, 2, 3):
            await register_and_unfence(client, b)
        await _create(client, "big", 40)
        taken = snap.list_snapshots(cfg.metadata_partition_dir)
        assert taken, "no snapshot after more than 2 KiB of records"
        await _create(client, "tail", 2)  # below the trigger: only in the log after the snapshot
        await client.close()
        live = snap.comparable(s.state.image)
        end = s.log.end_offset if s.log is not None else -1
    newest = snap.list_snapshots(cfg.metadata_partition_dir)[-1]
    assert 0 < newest.end_offset < end
    # The snapshot alone is the image at its offset; snapshot + tail is the live image.
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s2:
        assert snap.comparable(s2.state.image) == live
        assert s2.state.topic_id_of("tail") is not None
    at_snapshot = MetadataImage(s2.state.image.profile)
    snap.load_image(at_snapshot, snap.read_snapshot(cfg.metadata_partition_dir / newest.file_name))
    assert "tail" not in at_snapshot.topic_names and "big" in at_snapshot.topic_names


async def test_no_snapshot_below_the_trigger(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)  # Kafka's 20 MiB default
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        client = await Client.connect(s.addresses[0])
        await register_and_unfence(client, 1)
        await client.close()
    assert snap.list_snapshots(cfg.metadata_partition_dir) == []


async def test_a_damaged_newest_snapshot_is_reported(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, **{"metadata.log.max.record.bytes.between.snapshots": "1"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        client = await Client.connect(s.addresses[0])
        await register_and_unfence(client, 1)
        await client.close()
    newest = snap.list_snapshots(cfg.metadata_partition_dir)[-1]
    path = cfg.metadata_partition_dir / newest.file_name
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(StorageError, match="snapshot"):
        async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20):
            pass
    with MetadataLog.open(cfg.metadata_partition_dir) as log:  # the log itself is untouched
        assert log.end_offset > newest.end_offset - 1


async def test_noop_records_every_idle_interval(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, **{"metadata.max.idle.interval.ms": "40"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=10) as s:
        await asyncio.sleep(0.5)
    with MetadataLog.open(cfg.metadata_partition_dir) as log:
        noops = [off for off, rec, _ in log.replay() if isinstance(rec, NoOpRecord)]
    assert len(noops) >= 3, noops
    # 0 turns them off
    cfg0 = make_config(tmp_path / "off", **{"metadata.max.idle.interval.ms": "0"})
    async with ControllerServer(cfg0, cluster_id=CLUSTER, tick_interval_ms=10) as s:
        await asyncio.sleep(0.2)
        assert s.stats["batches"] == 0
    with MetadataLog.open(cfg0.metadata_partition_dir) as log:
        assert not [rec for _, rec, _ in log.replay() if isinstance(rec, NoOpRecord)]
