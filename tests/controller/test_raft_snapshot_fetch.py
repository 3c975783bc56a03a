"""A follower's FetchSnapshot download (every answer checked before a byte is kept) and
Kafka's retention rule for the log prefix below a snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft_jbod.controller.raft.file_log import PARTITION_DIR, FileReplicaLog
from kraft_jbod.controller.raft.messages import Entry
from kraft_jbod.controller.raft.retention import SnapshotFacts, retention_cut
from kraft_jbod.controller.raft.snapshot_download import SnapshotDownload, SnapshotFetchError
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fetch_snapshot_response import (
    FetchSnapshotResponse,
    PartitionSnapshot,
    SnapshotId,
    TopicSnapshot,
)


def _answer(
    chunk: bytes, *, position: int, size: int, sid: tuple[int, int] = (40, 2), error: int = 0, index: int = 0
) -> FetchSnapshotResponse:
    part = PartitionSnapshot(
        index=index,
        error_code=error,
        snapshot_id=SnapshotId(end_offset=sid[0], epoch=sid[1]),
        size=size,
        position=position,
        unaligned_records=chunk,
    )
    return FetchSnapshotResponse(error_code=0, topics=[TopicSnapshot(name="__cluster_metadata", partitions=[part])])


def test_a_download_in_chunks() -> None:
    d = SnapshotDownload((40, 2), replica_id=3, leader_epoch=5, cluster_id="c", chunk_bytes=4)
    req = d.request()
    p = req.topics[0].partitions[0]
    assert (req.replica_id, req.max_bytes, p.current_leader_epoch, p.position) == (3, 4, 5, 0)
    assert (p.snapshot_id.end_offset, p.snapshot_id.epoch) == (40, 2)
    assert d.accept(_answer(b"abcd", position=0, size=6)) == b"abcd"
    assert not d.done and d.request().topics[0].partitions[0].position == 4
    assert d.accept(_answer(b"ef", position=4, size=6)) == b"ef"
    assert d.done


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (_answer(b"", position=0, size=6, error=ErrorCode.SNAPSHOT_NOT_FOUND), "error 98"),
        (_answer(b"", position=0, size=6, error=ErrorCode.POSITION_OUT_OF_RANGE), "error 99"),
        (_answer(b"", position=0, size=6, error=ErrorCode.FENCED_LEADER_EPOCH), "error 74"),
        (_answer(b"ab", position=0, size=6, sid=(41, 2)), "for snapshot"),
        (_answer(b"ab", position=2, size=6), "at position 2"),
        (_answer(b"ab", position=0, size=0), "size 0"),
        (_answer(b"ab", position=0, size=-5), "size -5"),
        (_answer(b"ab", position=0, size=1 << 40), "size"),
        (_answer(b"abcdefg", position=0, size=6), "chunk of 7 bytes"),
        (_answer(b"", position=0, size=6), "chunk of 0 bytes"),
        (_answer(b"ab", position=0, size=6, index=1), "partition 1"),
        (FetchSnapshotResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID), "error 104"),
        (FetchSnapshotResponse(error_code=0, topics=[]), "exactly the metadata partition"),
    ],
)
def test_bad_answers_are_refused_before_anything_is_kept(answer: FetchSnapshotResponse, reason: str) -> None:
    d = SnapshotDownload((40, 2), replica_id=3, leader_epoch=5, cluster_id="c")
    with pytest.raises(SnapshotFetchError, match=reason):
        d.accept(answer)
    assert (d.position, d.size) == (0, -1)


def test_a_size_that_changes_midway_is_refused() -> None:
    d = SnapshotDownload((40, 2), replica_id=3, leader_epoch=5, cluster_id="c")
    d.accept(_answer(b"ab", position=0, size=6))
    with pytest.raises(SnapshotFetchError, match="size changed"):
        d.accept(_answer(b"cd", position=2, size=8))
    assert d.position == 2


def _facts(*snaps: tuple[int, int, int]) -> list[SnapshotFacts]:
    return [SnapshotFacts((end, 1), size, ts) for end, size, ts in snaps]


def test_retention_keeps_the_newest_snapshot_and_cuts_by_size() -> None:
    def log_bytes(offset: int) -> int:
        return (100 - offset) * 10  # 10 bytes an offset, the log ends at 100

    one = _facts((50, 100, 0))
    assert retention_cut(one, log_bytes, retention_bytes=1, retention_ms=-1, now_ms=0, start_offset=0) is None
    two = _facts((50, 100, 0), (80, 100, 0))
    # log 1000 + snapshots 200 > 1: cut at the newest
    assert retention_cut(two, log_bytes, retention_bytes=1, retention_ms=-1, now_ms=0, start_offset=0) == (80, 1)
    # within the limit: nothing goes
    assert retention_cut(two, log_bytes, retention_bytes=5000, retention_ms=-1, now_ms=0, start_offset=0) is None
    three = _facts((20, 100, 0), (50, 100, 0), (80, 100, 0))
    # 800 + 300 > 1000 -> drop the first (log 500 + 200 = 700 <= 1000): start at 50
    assert retention_cut(three, log_bytes, retention_bytes=1000, retention_ms=-1, now_ms=0, start_offset=20) == (50, 1)
    # already there: nothing to do
    assert retention_cut(two, log_bytes, retention_bytes=5000, retention_ms=-1, now_ms=0, start_offset=50) is None


def test_retention_cuts_by_age() -> None:
    snaps = _facts((20, 1, 1_000), (50, 1, 5_000), (80, 1, 9_000))
    assert retention_cut(snaps, lambda o: 0, retention_bytes=-1, retention_ms=3_000, now_ms=9_500, start_offset=0) == (
        80,
        1,
    )
    assert retention_cut(snaps, lambda o: 0, retention_bytes=-1, retention_ms=6_000, now_ms=9_500, start_offset=0) == (
        50,
        1,
    )
    assert retention_cut(snaps, lambda o: 0, retention_bytes=-1, retention_ms=-1, now_ms=9_500, start_offset=0) is None


def test_the_file_log_moves_its_start_and_reopens_there(tmp_path: Path) -> None:
    log = FileReplicaLog(tmp_path, fsync=True)
    log.append([Entry(0, 1, b"a", control=True), Entry(1, 1, b"b"), Entry(2, 2, b"c"), Entry(3, 2, b"d")])
    assert log.delete_before(2) == 2
    folder = tmp_path / PARTITION_DIR
    assert sorted(p.name for p in folder.iterdir()) == ["00000000000000000002.log"]
    assert log.bytes_from(2) == log.size_bytes and log.bytes_from(4) == 0
    log.append([Entry(4, 3, b"e")])
    log.close()
    again = FileReplicaLog(tmp_path, fsync=False)
    again.set_start_epoch(1)
    assert (again.start_offset, again.end_offset, again.last_epoch) == (2, 5, 3)
    assert [e.payload for e in again.read(2, 9)] == [b"c", b"d", b"e"]
    assert again.epoch_end(1) == (1, 2)
    again.reset_to(10, 5)  # a loaded snapshot ending at 10
    assert sorted(p.name for p in folder.iterdir()) == ["00000000000000000010.log"]
    again.close()
    # A crash after the rewrite's rename but before the old segment went: the newest wins.
    (folder / "00000000000000000002.log").write_bytes(b"stale")
    (folder / "00000000000000000010.log.tmp").write_bytes(b"torn")
    last = FileReplicaLog(tmp_path, fsync=False)
    assert (last.start_offset, last.end_offset) == (10, 10)
    assert sorted(p.name for p in folder.iterdir()) == ["00000000000000000010.log"]
