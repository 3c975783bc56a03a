"""Snapshots: the ``.checkpoint`` layout Kafka writes, and image -> snapshot -> image round trips.

The round trip runs over the controller property test's random operation sequences: after
each run the live image is written as a snapshot, read back, replayed into a fresh image,
and the two must agree on everything a snapshot carries (``snapshot.comparable``).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft_jbod.controller import features as fv
from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller.image import MetadataImage
from kraft_jbod.controller.log import decode_control_record
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.k_raft_version_record import KRaftVersionRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.messages.register_controller_record import (
    ControllerEndpoint,
    ControllerFeature,
    RegisterControllerRecord,
)
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.wire.records import CONTROL_MASK, ControlRecordType, read_record_batch
from tests.controller.harness import Cluster, dir_id
from tests.controller.test_state_properties import OPS, SETUPS, _setup, _step


def _round_trip(img: MetadataImage, directory: Path, epoch: int = 3) -> MetadataImage:
    path = snap.write_image_snapshot(directory, img, epoch=epoch, last_contained_timestamp=1234)
    contents = snap.read_snapshot(path)
    fresh = MetadataImage(img.profile)
    snap.load_image(fresh, contents)
    return fresh


def _busy_cluster() -> Cluster:
    c = Cluster()
    for b in (1, 2, 3):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1)])
    c.create_topic("t0", 6, 3)
    c.create_topic("t1", 2, 2)
    c.heartbeat(1, offline=[dir_id(1, 1)])
    c.heartbeat(2, want_shut_down=True)
    return c


def test_file_name_layout_and_batches(tmp_path: Path) -> None:
    c = _busy_cluster()
    img = c.state.image
    path = snap.write_image_snapshot(tmp_path, img, epoch=7, last_contained_timestamp=99, fsync=True)
    end = img.last_applied_offset + 1
    assert path.name == f"{end:020d}-{7:010d}.checkpoint"
    assert os.listdir(tmp_path) == [path.name]  # the .part temp file is gone
    data = path.read_bytes()
    pos, batches = 0, []
    while pos < len(data):
        batch, pos = read_record_batch(data, pos)
        batches.append(batch)
    assert batches[0].base_offset == 0
    assert all(b.partition_leader_epoch == 7 for b in batches)
    # header control batch first, footer control batch last, data in between
    assert batches[0].attributes & CONTROL_MASK and batches[-1].attributes & CONTROL_MASK
    assert [decode_control_record(r)[0] for r in batches[0].records] == [ControlRecordType.SNAPSHOT_HEADER]
    assert decode_control_record(batches[0].records[0])[1].last_contained_log_timestamp == 99
    assert [decode_control_record(r)[0] for r in batches[-1].records] == [ControlRecordType.SNAPSHOT_FOOTER]
    expected = 1
    for b in batches[1:]:
        assert b.base_offset == expected
        expected = b.base_offset + b.last_offset_delta + 1
    recs = snap.read_snapshot(path).records
    # Kafka's image order: metadata.version first at v0, then brokers, then topic + partitions.
    assert isinstance(recs[0][0], FeatureLevelRecord) and recs[0][0].name == "metadata.version" and recs[0][1] == 0
    kinds = [type(r).__name__ for r, _ in recs]
    first_broker, first_topic = kinds.index("RegisterBrokerRecord"), kinds.index("TopicRecord")
    assert set(kinds[:first_broker]) == {"FeatureLevelRecord"}
    assert first_broker < first_topic
    assert kinds[first_topic + 1] == "PartitionRecord"
    regs = [r for r, _ in recs if isinstance(r, RegisterBrokerRecord)]
    assert [r.broker_id for r in regs] == [1, 2, 3]
    assert regs[0].log_dirs == [dir_id(1, 0)]  # the online directories, as Kafka's registration keeps
    assert regs[1].in_controlled_shutdown
    parts = [r for r, _ in recs if isinstance(r, PartitionRecord)]
    assert len(parts) == 8 and all(len(p.directories) == len(p.replicas) for p in parts)
    assert len([r for r, _ in recs if isinstance(r, TopicRecord)]) == 2


def test_round_trip_of_a_busy_image(tmp_path: Path) -> None:
    c = _busy_cluster()
    fresh = _round_trip(c.state.image, tmp_path)
    assert snap.comparable(fresh) == snap.comparable(c.state.image)
    assert fresh.last_applied_offset == c.state.image.last_applied_offset


def test_registered_controllers_survive_a_snapshot(tmp_path: Path) -> None:
    """RegisterControllerRecords are written after the brokers (from 3.7-IV0) and read back
    with every field; below 3.7-IV0 the image cannot hold any, and none is written."""
    c = _busy_cluster()
    img = c.state.image
    assert img.metadata_version >= fv.MV_3_7_IV0
    incarnation = uuid.uuid4()
    record = RegisterControllerRecord(
        controller_id=3001,
        incarnation_id=incarnation,
        zk_migration_ready=False,
        end_points=[ControllerEndpoint(name="CONTROLLER", host="c1.example", port=9093, security_protocol=0)],
        features=[ControllerFeature(name="metadata.version", min_supported_version=1, max_supported_version=27)],
    )
    img.apply(img.last_applied_offset + 1, record, 0)
    path = snap.write_image_snapshot(tmp_path, img, epoch=3, last_contained_timestamp=1234)
    records = [r for r, _ in snap.read_snapshot(path).records]
    kinds = [type(r).__name__ for r in records]
    assert kinds.index("RegisterControllerRecord") > max(i for i, k in enumerate(kinds) if k == "RegisterBrokerRecord")
    assert kinds.index("RegisterControllerRecord") < kinds.index("TopicRecord")
    assert [r for r in records if isinstance(r, RegisterControllerRecord)] == [record]
    (tmp_path / "again").mkdir()
    fresh = _round_trip(img, tmp_path / "again")
    assert fresh.controllers == img.controllers
    assert fresh.controllers[3001].incarnation_id == incarnation


def test_small_batches_and_kraft_version_header(tmp_path: Path) -> None:
    c = _busy_cluster()
    recs = list(snap.image_records(c.state.image))
    sid = snap.SnapshotId(c.end_offset, 2)
    path = tmp_path / sid.file_name
    with open(path, "wb") as f:
        for chunk in snap.encode_snapshot(
            recs, epoch=2, last_contained_timestamp=5, kraft_version=1, max_batch_bytes=200
        ):
            f.write(chunk)
    contents = snap.read_snapshot(path)
    assert contents.kraft_version == 1
    assert contents.records == recs
    data = path.read_bytes()
    first, _ = read_record_batch(data, 0)
    types = [decode_control_record(r)[0] for r in first.records]
    assert types == [ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.KRAFT_VERSION]
    assert isinstance(decode_control_record(first.records[1])[1], KRaftVersionRecord)
    with pytest.raises(ValueError):
        list(
            snap.encode_snapshot(
                recs, epoch=2, last_contained_timestamp=5, kraft_version=0, voters=(KRaftVersionRecord(), 0)
            )
        )


def test_damaged_or_incomplete_snapshots_are_refused(tmp_path: Path) -> None:
    c = _busy_cluster()
    path = snap.write_image_snapshot(tmp_path, c.state.image, epoch=1, last_contained_timestamp=0)
    data = path.read_bytes()
    # cut the footer batch off: incomplete
    pos, starts = 0, []
    while pos < len(data):
        starts.append(pos)
        _, pos = read_record_batch(data, pos)
    path.write_bytes(data[: starts[-1]])
    with pytest.raises(StorageError, match="no SnapshotFooterRecord"):
        snap.read_snapshot(path)
    # a flipped byte in a data batch: CRC
    bad = bytearray(data)
    bad[starts[1] + 70] ^= 0xFF
    path.write_bytes(bytes(bad))
    with pytest.raises(StorageError, match="at byte"):
        snap.read_snapshot(path)
    # no header: data first
    path.write_bytes(data[starts[1] :])
    with pytest.raises(StorageError):
        snap.read_snapshot(path)
    with pytest.raises(StorageError, match="not a snapshot file name"):
        snap.read_snapshot(tmp_path / "junk.checkpoint")
    # the wrong epoch in the name
    path.write_bytes(data)
    other = tmp_path / snap.SnapshotId(snap.parse_name(path.name).end_offset, 9).file_name  # type: ignore[union-attr]
    path.rename(other)
    with pytest.raises(StorageError, match="leader epoch"):
        snap.read_snapshot(other)
    # loading into a non-empty image is refused
    with pytest.raises(StorageError):
        snap.load_image(c.state.image, snap.SnapshotContents(snap.SnapshotId(1, 1), 0, 0, None, []))


def test_list_snapshots_ignores_temp_files(tmp_path: Path) -> None:
    for name in (
        "00000000000000000010-0000000001.checkpoint",
        "00000000000000000005-0000000001.checkpoint",
        "00000000000000000020-0000000001-123.checkpoint.part",
        "00000000000000000000.log",
    ):
        (tmp_path / name).write_bytes(b"")
    assert snap.list_snapshots(tmp_path) == [snap.SnapshotId(5, 1), snap.SnapshotId(10, 1)]


def _run_and_round_trip(c: Cluster, ops: list[tuple[Any, ...]], setup: list[int]) -> None:
    _setup(c, setup)
    for op in ops:
        _step(c, op)
    with tempfile.TemporaryDirectory() as d:
        fresh = _round_trip(c.state.image, Path(d))
    assert snap.comparable(fresh) == snap.comparable(c.state.image)


@settings(max_examples=60, deadline=None)
@given(st.lists(OPS, max_size=40), SETUPS, st.sampled_from([16, 17, 22, 27]))
def test_random_runs_round_trip(ops: list[tuple[Any, ...]], setup: list[int], level: int) -> None:
    _run_and_round_trip(Cluster(level=level), ops, setup)


@settings(max_examples=30, deadline=None)
@given(st.lists(OPS, max_size=40), SETUPS)
def test_random_runs_round_trip_kip_profile(ops: list[tuple[Any, ...]], setup: list[int]) -> None:
    _run_and_round_trip(Cluster(profile="kip"), ops, setup)


def test_comparison_can_fail(tmp_path: Path) -> None:
    c = _busy_cluster()
    fresh = _round_trip(c.state.image, tmp_path)
    p = next(iter(fresh.partitions()))
    p.leader_epoch += 1
    assert snap.comparable(fresh) != snap.comparable(c.state.image)


def test_log_dump_reads_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kraft_jbod import cli

    c = _busy_cluster()
    path = snap.write_image_snapshot(tmp_path, c.state.image, epoch=2, last_contained_timestamp=77)
    assert cli.main(["log", "dump", str(path)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["control"] == "SNAPSHOT_HEADER" and rows[0]["offset"] == 0
    assert rows[0]["data"]["lastContainedLogTimestamp"] == 77
    assert rows[-1]["control"] == "SNAPSHOT_FOOTER"
    types = [r.get("type") for r in rows[1:-1]]
    assert types[0] == "FeatureLevelRecord" and "PartitionRecord" in types
    assert [r["offset"] for r in rows] == list(range(len(rows)))
    assert cli.main(["log", "dump", "--no-control", str(path)]) == 0
    assert all("control" not in json.loads(line) for line in capsys.readouterr().out.splitlines())
    path.write_bytes(path.read_bytes()[:-3])
    assert cli.main(["log", "dump", str(path)]) != 0
    assert "snapshot" in capsys.readouterr().err
