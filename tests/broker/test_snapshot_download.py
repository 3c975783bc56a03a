"""The follower's snapshot download, sans-I/O, against the controller's own FetchSnapshot
handler: slices, position and size checks, a snapshot deleted meanwhile, and the log
replaced by the snapshot."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraft_jbod.broker.follower import MetadataFollower
from kraft_jbod.broker.image import MetadataImage
from kraft_jbod.broker.snapshots import MAX_SNAPSHOT_BYTES, SnapshotDownload, parse_snapshot
from kraft_jbod.controller import replication as rp
from kraft_jbod.controller import snapshot as snap
from kraft_jbod.errors import DecodeError
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    PartitionData,
    SnapshotId,
)
from kraft_jbod.messages.fetch_snapshot_request import FetchSnapshotRequest
from kraft_jbod.messages.fetch_snapshot_response import FetchSnapshotResponse
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.wire.constants import METADATA_TOPIC_ID

CLUSTER = "snapshot-download-test"
LEADER = rp.Leader(3000, 4, "127.0.0.1", 9093)
TOPIC = uuid.UUID(int=77)
END, EPOCH = 500, 4


def _write(directory: Path, partitions: int) -> snap.SnapshotId:
    records = [
        (FeatureLevelRecord(name="metadata.version", feature_level=27), 0),
        (TopicRecord(name="t", topic_id=TOPIC), 0),
    ]
    for i in range(partitions):
        records.append((PartitionRecord(partition_id=i, topic_id=TOPIC, replicas=[1], isr=[1], leader=1), 2))
    sid = snap.SnapshotId(END, EPOCH)
    snap.write_snapshot(directory, sid, records, last_contained_timestamp=0, fsync=False)
    return sid


def _asked(f: MetadataFollower) -> None:
    part = PartitionData(
        partition_index=0,
        current_leader=LeaderIdAndEpoch(leader_id=LEADER.node_id, leader_epoch=LEADER.epoch),
        snapshot_id=SnapshotId(end_offset=END, epoch=EPOCH),
        high_watermark=END + 3,
        log_start_offset=END,
    )
    resp = FetchResponse(responses=[FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[part])])
    out = f.on_response(FetchResponse.decode(resp.encode(17), 17))
    assert out.snapshot_requested == (END, EPOCH) and f.download is not None


def _serve(f: MetadataFollower, directory: Path, version: int = 1) -> FetchSnapshotResponse:
    req = FetchSnapshotRequest.decode(f.build_snapshot_request(version).encode(version), version)
    resp = rp.handle_fetch_snapshot(req, version, cluster_id=CLUSTER, leader=LEADER, directory=directory)
    return FetchSnapshotResponse.decode(resp.encode(version), version)


def test_download_in_slices_then_fetch_on_from_the_snapshot_end(tmp_path: Path) -> None:
    _write(tmp_path, 300)
    size = (tmp_path / snap.SnapshotId(END, EPOCH).file_name).stat().st_size
    f = MetadataFollower(cluster_id=CLUSTER, node_id=1, directory_id=uuid.uuid4(), snapshot_slice_bytes=1000)
    f.epoch, f.leader_id = LEADER.epoch, LEADER.node_id
    _asked(f)
    loaded = None
    rounds = 0
    while loaded is None:
        rounds += 1
        req = f.build_snapshot_request(1)
        assert req.topics[0].partitions[0].position == (rounds - 1) * 1000
        out = f.on_snapshot_response(_serve(f, tmp_path))
        assert out.error_code == 0
        loaded = out.snapshot
    assert rounds == -(-size // 1000)
    assert f.download is None and f.snapshots_loaded == 1
    assert (f.end_offset, f.last_fetched_epoch, f.published_offset, f.high_watermark) == (END, EPOCH, END - 1, END)
    nxt = f.build_request(17).topics[0].partitions[0]
    assert (nxt.fetch_offset, nxt.last_fetched_epoch) == (END, EPOCH)
    image = MetadataImage()
    image.load_snapshot(loaded.end_offset, loaded.records)
    assert len(image.partitions) == 300 and image.last_offset == END - 1
    assert image.features["metadata.version"] == 27
    # The next record after the snapshot applies on top of it.
    image.apply(END, TopicRecord(name="u", topic_id=uuid.UUID(int=78)), 0)


def test_a_snapshot_deleted_meanwhile_sends_the_follower_back_to_fetch(tmp_path: Path) -> None:
    f = MetadataFollower(cluster_id=CLUSTER, node_id=1)
    f.epoch, f.leader_id = LEADER.epoch, LEADER.node_id
    _asked(f)
    out = f.on_snapshot_response(_serve(f, tmp_path))  # nothing in the directory
    assert out.error_code == 0 and out.snapshot is None
    assert f.download is None and f.snapshot_restarts == 1
    assert f.build_request(17).topics[0].partitions[0].fetch_offset == 0


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("position", 7, "position 7 where 0"),
        ("size", 0, "snapshot size 0"),
        ("size", MAX_SNAPSHOT_BYTES + 1, "snapshot size"),
        ("size", 10, "passes the size 10"),
        ("snapshot_id", (END + 1, EPOCH), "where (500, 4) was asked for"),
        ("unaligned_records", b"", "no bytes at position 0"),
    ],
)
def test_slices_breaking_the_rules_drop_the_download(tmp_path: Path, field: str, value: object, message: str) -> None:
    _write(tmp_path, 20)
    f = MetadataFollower(cluster_id=CLUSTER, node_id=1, snapshot_slice_bytes=100)
    f.epoch, f.leader_id = LEADER.epoch, LEADER.node_id
    _asked(f)
    resp = _serve(f, tmp_path)
    part = resp.topics[0].partitions[0]
    if field == "snapshot_id":
        part.snapshot_id.end_offset, part.snapshot_id.epoch = value  # type: ignore[misc]
    else:
        setattr(part, field, value)
    with pytest.raises(DecodeError, match=message.replace("(", r"\(").replace(")", r"\)")):
        f.on_snapshot_response(resp)
    assert f.download is None  # the next request is a Fetch again


def test_size_changing_between_slices_is_refused() -> None:
    d = SnapshotDownload(END, EPOCH)
    from kraft_jbod.messages.fetch_snapshot_response import PartitionSnapshot
    from kraft_jbod.messages.fetch_snapshot_response import SnapshotId as Sid

    assert not d.on_slice(PartitionSnapshot(snapshot_id=Sid(END, EPOCH), size=10, position=0, unaligned_records=b"abc"))
    with pytest.raises(DecodeError, match="size 11 after size 10"):
        d.on_slice(PartitionSnapshot(snapshot_id=Sid(END, EPOCH), size=11, position=3, unaligned_records=b"d"))


def test_a_snapshot_without_header_or_whole_batches_is_refused(tmp_path: Path) -> None:
    sid = _write(tmp_path, 5)
    data = (tmp_path / sid.file_name).read_bytes()
    with pytest.raises(DecodeError, match="partial"):
        parse_snapshot(data[:-3], END, EPOCH)
    ok = parse_snapshot(data, END, EPOCH)
    assert len(ok.records) == 7
    # Drop the header batch: the records no longer start at offset 0.
    first_len = int.from_bytes(data[8:12], "big") + 12
    with pytest.raises(DecodeError):
        parse_snapshot(data[first_len:], END, EPOCH)


def test_a_new_leader_epoch_restarts_the_download(tmp_path: Path) -> None:
    _write(tmp_path, 20)
    f = MetadataFollower(cluster_id=CLUSTER, node_id=1, snapshot_slice_bytes=100)
    f.epoch, f.leader_id = LEADER.epoch, LEADER.node_id
    _asked(f)
    resp = _serve(f, tmp_path)
    resp.topics[0].partitions[0].current_leader.leader_epoch = LEADER.epoch + 1
    out = f.on_snapshot_response(resp)
    assert out.new_leader and f.download is None and f.epoch == LEADER.epoch + 1


def test_a_snapshot_not_ahead_of_the_log_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, 3)
    f = MetadataFollower(cluster_id=CLUSTER, node_id=1)
    f.epoch, f.leader_id = LEADER.epoch, LEADER.node_id
    _asked(f)
    f.end_offset = END  # as if we already held the log up to the snapshot's end
    f.epochs = [(EPOCH, 0)]
    with pytest.raises(DecodeError, match="not ahead of our log"):
        f.on_snapshot_response(_serve(f, tmp_path))
