"""The controller server snapshots on Kafka's byte trigger and restarts from snapshot + tail."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.controller import replication
from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller.image import MetadataImage
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kraft_jbod.messages.fetch_snapshot_request import FetchSnapshotRequest
from kraft_jbod.messages.fetch_snapshot_request import PartitionSnapshot as SnapPartition
from kraft_jbod.messages.fetch_snapshot_request import SnapshotId as SnapId
from kraft_jbod.messages.fetch_snapshot_request import TopicSnapshot as SnapTopic
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.wire.constants import METADATA_TOPIC_ID
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
        start = s.log.start_offset if s.log is not None else -1
    newest = snap.list_snapshots(cfg.metadata_partition_dir)[-1]
    assert 0 < newest.end_offset < end
    # The log was rolled at the snapshot: all it holds below it is gone.
    assert start == newest.end_offset
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


def _leader(epoch: int = 1) -> replication.Leader:
    return replication.Leader(3000, epoch, "127.0.0.1", 9093)


def test_segments_below_a_snapshot_are_deleted_and_fetch_points_at_it(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    with MetadataLog.open(d, segment_bytes=300, fsync=False) as log:
        for i in range(30):
            log.append([(NoOpRecord(), 0)] * 3, timestamp_ms=i)
        assert len(log.segment_paths) > 3
        end = log.end_offset
        deleted = log.delete_segments_below(45)
        assert deleted > 0 and 0 < log.start_offset <= 45
        assert log.segment_paths[0].name == f"{log.start_offset:020d}.log"
        with pytest.raises(StorageError, match="outside the log"):
            log.read(0, 1000)
        assert log.read(log.start_offset, 100)  # what is left still reads
        start = log.start_offset
        # Fetch below the log start: the newest snapshot's id, no records (Kafka's leader).
        req = FetchRequest(
            cluster_id=None,
            replica_id=-1,
            max_wait_ms=0,
            max_bytes=1 << 20,
            topics=[
                FetchTopic(
                    topic="__cluster_metadata",
                    topic_id=METADATA_TOPIC_ID,
                    partitions=[
                        FetchPartition(partition=0, current_leader_epoch=1, fetch_offset=0, last_fetched_epoch=0)
                    ],
                )
            ],
        )
        ans = replication.handle_fetch(req, 17, cluster_id=CLUSTER, leader=_leader(), log=log, snapshot=(45, 1))
        part = ans.response.responses[0].partitions[0]
        assert part.snapshot_id.end_offset == 45 and part.snapshot_id.epoch == 1
        assert part.log_start_offset == start and not part.records and part.high_watermark == end
    with MetadataLog.open(d, fsync=False) as log:  # reopened: the start offset holds
        assert log.start_offset == start and log.end_offset == end
        assert next(off for off, _, _ in log.replay(start)) == start


def test_fetch_snapshot_serves_the_file_in_slices(tmp_path: Path) -> None:
    from tests.controller.test_snapshot import _busy_cluster

    c = _busy_cluster()
    path = snap.write_image_snapshot(tmp_path, c.state.image, epoch=1, last_contained_timestamp=0)
    sid = snap.parse_name(path.name)
    assert sid is not None
    data = path.read_bytes()

    def ask(position: int, max_bytes: int, end: int = sid.end_offset, epoch: int = 1, leader_epoch: int = 1) -> Any:
        req = FetchSnapshotRequest(
            cluster_id=CLUSTER,
            replica_id=-1,
            max_bytes=max_bytes,
            topics=[
                SnapTopic(
                    name="__cluster_metadata",
                    partitions=[
                        SnapPartition(
                            partition=0,
                            current_leader_epoch=leader_epoch,
                            snapshot_id=SnapId(end, epoch),
                            position=position,
                        )
                    ],
                )
            ],
        )
        resp = replication.handle_fetch_snapshot(req, 1, cluster_id=CLUSTER, leader=_leader(), directory=tmp_path)
        return resp.topics[0].partitions[0]

    got = b""
    while len(got) < len(data):
        part = ask(len(got), 100)
        assert part.error_code == 0 and part.size == len(data) and part.position == len(got)
        got += part.unaligned_records
    assert got == data
    assert ask(len(data), 100).error_code == ErrorCode.POSITION_OUT_OF_RANGE
    assert ask(0, 100, end=sid.end_offset + 1).error_code == ErrorCode.SNAPSHOT_NOT_FOUND
    assert ask(0, 100, leader_epoch=0).error_code == ErrorCode.FENCED_LEADER_EPOCH
