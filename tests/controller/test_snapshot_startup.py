"""Start-up with snapshots as Kafka's KafkaRaftLog does it, and `log recover` over them.

The cases of issue 26: every segment deleted (the log starts at the snapshot), a damaged,
a truncated and a deleted checkpoint, a snapshot past the log's end, and a log and a
snapshot from two lives of the directory. A refused start names the file and
`kraft-jbod log recover` and changes nothing on disk.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod import cli
from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.log import MetadataLog, batch_holding, segment_name
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from tests.controller.test_server import CLUSTER, Client, make_config, register_and_unfence

EVERY_COMMIT = {"metadata.log.max.record.bytes.between.snapshots": "1"}
# No NoOpRecords: the tests compare images and offsets across runs.
QUIET = {"metadata.max.idle.interval.ms": "0"}


async def _life(cfg: ControllerConfig, brokers: range, topic: str | None = None) -> dict[str, Any]:
    """Run the controller once: register ``brokers``, maybe create ``topic``; its image."""
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        client = await Client.connect(s.addresses[0])
        for b in brokers:
            await register_and_unfence(client, b)
        if topic is not None:
            req = CreateTopicsRequest(topics=[CreatableTopic(topic, 4, 1)], timeout_ms=1000)
            assert (await client.call(req, 7)).topics[0].error_code == 0
        await client.close()
        return snap.comparable(s.state.image)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file() and p.name != ".lock"}


def _snapshot_by_hand(directory: Path) -> snap.SnapshotId:
    """The snapshot a server would write at the log's last record, without its clean-up:
    the log keeps every segment, so it still starts at 0."""
    with MetadataLog.open(directory, fsync=False) as log:
        state = ControllerState(cluster_id=CLUSTER, node_id=3000)
        snap.restart(state, log, directory)
        last = batch_holding(log.batches, state.image.last_applied_offset)
        assert last is not None and last.last_offset == state.image.last_applied_offset
        path = snap.write_image_snapshot(
            directory, state.image, epoch=last.epoch, last_contained_timestamp=log.batch_max_timestamp(last)
        )
    sid = snap.parse_name(path.name)
    assert sid is not None
    return sid


async def _refused(cfg: ControllerConfig, *words: str) -> str:
    """Start the controller, expecting a refusal: one line naming the words, disk untouched."""
    before = _files(cfg.metadata_partition_dir)
    with pytest.raises(StorageError) as info:
        async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20):
            pass
    message = str(info.value)
    assert "\n" not in message
    assert f"kraft-jbod log recover {cfg.metadata_partition_dir}" in message
    for word in words:
        assert word in message, message
    assert _files(cfg.metadata_partition_dir) == before
    return message


def _recover(directory: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = cli.main(["log", "recover", str(directory), *extra])
    captured = capsys.readouterr()
    return rc, captured.out + captured.err


async def test_every_segment_deleted_the_log_starts_at_the_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = make_config(tmp_path, **EVERY_COMMIT, **QUIET)
    live = await _life(cfg, range(1, 4), "orders")
    d = cfg.metadata_partition_dir
    (newest,) = snap.list_snapshots(d)
    for seg in d.glob("*.log"):
        seg.unlink()
    rc, out = _recover(d, capsys)
    assert rc == 0, out
    assert f"a start begins it at offset {newest.end_offset}" in out
    # Kafka's truncateFullyAndStartAt: the log starts at the snapshot, the cluster goes on.
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        assert snap.comparable(s.state.image) == live
        assert s.log is not None and s.log.start_offset == newest.end_offset
        assert s.log.segment_paths[0].name == segment_name(newest.end_offset)
        client = await Client.connect(s.addresses[0])
        await register_and_unfence(client, 4)  # a write after the snapshot
        await client.close()
        after = snap.comparable(s.state.image)
    # And the next start is an ordinary one: snapshot plus the log after it.
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        assert snap.comparable(s.state.image) == after
        assert 4 in s.state.image.brokers and s.state.topic_id_of("orders") is not None


async def test_an_empty_log_segment_does_not_start_a_new_cluster(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, **EVERY_COMMIT, **QUIET)
    live = await _life(cfg, range(1, 3))
    d = cfg.metadata_partition_dir
    segments = sorted(d.glob("*.log"))
    for seg in segments:
        seg.write_bytes(b"")  # emptied, and a torn tail of zeros on the last one
    segments[-1].write_bytes(b"\0" * 30)
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        assert snap.comparable(s.state.image) == live


async def test_a_damaged_checkpoint_stops_the_start_and_can_be_set_aside(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = make_config(tmp_path, **QUIET)
    live = await _life(cfg, range(1, 4), "orders")
    d = cfg.metadata_partition_dir
    sid = _snapshot_by_hand(d)
    path = d / sid.file_name
    good = path.read_bytes()
    damaged = bytearray(good)
    damaged[len(good) // 2] ^= 0x40
    path.write_bytes(bytes(damaged))
    await _refused(cfg, str(path))
    rc, out = _recover(d, capsys)
    assert rc == 1 and out.startswith("not clean") and "damaged" in out and sid.file_name in out, out
    assert f"--set-aside {sid.file_name}" in out
    rc, out = _recover(d, capsys, "--set-aside", sid.file_name)
    assert rc == 0, out
    (kept,) = d.glob(f"recovery-*-snapshot/{sid.file_name}")
    assert kept.read_bytes() == bytes(damaged)  # set aside, not lost
    # The log starts at 0: the whole log is replayed, nothing is missing.
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        assert snap.comparable(s.state.image) == live


async def test_a_truncated_checkpoint_stops_the_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = make_config(tmp_path, **QUIET)
    await _life(cfg, range(1, 4), "orders")
    d = cfg.metadata_partition_dir
    sid = _snapshot_by_hand(d)
    path = d / sid.file_name
    path.write_bytes(path.read_bytes()[:-7])
    await _refused(cfg, str(path))
    rc, out = _recover(d, capsys)
    assert rc == 1 and not out.startswith("clean") and sid.file_name in out, out
    # Cut to the header batch alone: still refused, by the full read.
    whole = path.read_bytes()
    path.write_bytes(whole[: 12 + int.from_bytes(whole[8:12], "big")])
    await _refused(cfg, str(path), "SnapshotFooterRecord")
    assert _recover(d, capsys)[0] == 1


async def test_a_deleted_checkpoint_stops_the_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = make_config(tmp_path, **EVERY_COMMIT, **QUIET)
    await _life(cfg, range(1, 4))
    d = cfg.metadata_partition_dir
    (newest,) = snap.list_snapshots(d)
    with MetadataLog.open(d, fsync=False) as log:
        assert log.start_offset == newest.end_offset > 0  # the segments below went with the snapshot
    (d / newest.file_name).unlink()
    await _refused(cfg, segment_name(newest.end_offset), "no .checkpoint snapshot covers")
    rc, out = _recover(d, capsys)
    assert rc == 1 and not out.startswith("clean") and f"offsets below {newest.end_offset}" in out, out


async def test_a_snapshot_past_the_log_end_stops_the_start_until_the_operator_chooses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = make_config(tmp_path, **QUIET)
    live = await _life(cfg, range(1, 5), "orders")
    d = cfg.metadata_partition_dir
    sid = _snapshot_by_hand(d)
    with MetadataLog.open(d, fsync=False) as log:
        cut = log.batches[len(log.batches) // 2].base_offset
    assert cli.main(["log", "recover", str(d), "--truncate-at", str(cut)]) == 0
    await _refused(cfg, sid.file_name, "past the log's end")
    rc, out = _recover(d, capsys)
    assert rc == 1 and "--truncate-at 0" in out and f"--set-aside {sid.file_name}" in out, out
    # The operator keeps the snapshot: the log is cut whole (a backup kept) and starts at it.
    rc, out = _recover(d, capsys, "--truncate-at", "0")
    assert rc == 0, out
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        assert snap.comparable(s.state.image) == live


@pytest.mark.parametrize("restarts", [1, 3])
async def test_two_lives_mixed_stop_the_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], restarts: int
) -> None:
    """Life A snapshotted; its segments went and life B started a new log in the same place
    (what the controller did before it started logs at the snapshot). Once B's log passes
    A's snapshot, the two must not be mixed: same epoch (one start of B) or not."""
    cfg_a = make_config(tmp_path / "a", **EVERY_COMMIT, **QUIET)
    await _life(cfg_a, range(1, 3))
    (old,) = snap.list_snapshots(cfg_a.metadata_partition_dir)
    cfg_b = make_config(tmp_path / "b", **QUIET)
    for n in range(restarts):
        await _life(cfg_b, range(10 + 10 * n, 16 + 10 * n), f"t{n}")
    d = cfg_b.metadata_partition_dir
    with MetadataLog.open(d, fsync=False) as log:
        assert log.end_offset > old.end_offset  # B passed A's snapshot
    shutil.copy(cfg_a.metadata_partition_dir / old.file_name, d / old.file_name)
    message = await _refused(cfg_b, old.file_name, "two different histories")
    assert str(d / old.file_name) in message
    rc, out = _recover(d, capsys)
    assert rc == 1 and "two different histories" in out and f"--set-aside {old.file_name}" in out, out
