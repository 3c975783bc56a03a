"""The metadata log: Kafka-format segments, fsync'd appends, recovery of torn tails, damage."""

from __future__ import annotations

import json
import logging
import struct
import uuid
from pathlib import Path

import pytest

from kraft_jbod import codec
from kraft_jbod.controller.log import MetadataLog, decode_control_record, resolve_log_dir, segment_name
from kraft_jbod.errors import EncodeError, StorageError
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.leader_change_message import LeaderChangeMessage, Voter
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.wire.records import CONTROL_MASK, LEADER_CHANGE, RecordBatch, read_records

MV17 = FeatureLevelRecord(name="metadata.version", feature_level=17)


def broker(i: int) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=i, broker_epoch=0, incarnation_id=uuid.UUID(int=i + 1000), log_dirs=[uuid.UUID(int=i + 5000)]
    )


def batches_on_disk(d: Path) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    for p in sorted(d.glob("*.log")):
        for e in read_records(p.read_bytes()):
            assert isinstance(e, RecordBatch)
            out.append(e)
    return out


def test_first_batch_bytes_are_kafkas(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, leader_epoch=3) as log:
        assert log.append([(MV17, 0)], timestamp_ms=1_700_000_000_000) == 0
        assert log.end_offset == 1
    seg = tmp_path / "00000000000000000000.log"
    assert seg.exists() and segment_name(123) == "00000000000000000123.log"
    data = seg.read_bytes()
    # The record exactly as protocol-notes §5.3 works it out by hand.
    frame = bytes.fromhex("010c00116d657461646174612e76657273696f6e001100")
    record = bytes.fromhex("3a000000012e") + frame + b"\x00"
    assert data[61:] == record
    base, length, epoch, magic = struct.unpack_from(">qiib", data, 0)
    assert (base, length, epoch, magic) == (0, len(data) - 12, 3, 2)
    (batch,) = batches_on_disk(tmp_path)
    assert batch.crc_valid and not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert batch.base_timestamp == batch.max_timestamp == 1_700_000_000_000
    assert batch.records[0].key is None and batch.records[0].headers == []


def test_append_then_replay_after_reopen(tmp_path: Path) -> None:
    written = [(MV17, 0)] + [(broker(i), 3) for i in range(5)]
    with MetadataLog.open(tmp_path) as log:
        assert log.append(written[:1], timestamp_ms=1) == 0
        assert log.append(written[1:4], timestamp_ms=2) == 1
        assert log.append([], timestamp_ms=3) == 4  # nothing written
        assert log.append(written[4:], timestamp_ms=4) == 4
    with MetadataLog.open(tmp_path) as log:
        assert log.end_offset == 6
        replayed = list(log.replay())
    assert [o for o, _, _ in replayed] == list(range(6))
    assert [(r, v) for _, r, v in replayed] == written
    assert [b.last_offset_delta for b in batches_on_disk(tmp_path)] == [0, 2, 1]


def test_control_batches_are_marked_and_skipped_by_replay(tmp_path: Path) -> None:
    lcm = LeaderChangeMessage(version=0, leader_id=7, voters=[Voter(7)], granting_voters=[Voter(7)])
    with MetadataLog.open(tmp_path) as log:
        assert log.append_control([(LEADER_CHANGE, lcm, 0)], timestamp_ms=5) == 0
        log.append([(MV17, 0)], timestamp_ms=6)
        assert [(o, r) for o, r, _ in log.replay()] == [(1, MV17)]
        infos = [info for info, _ in log.iter_batches()]
        assert [i.is_control for i in infos] == [True, False]
    ctrl = batches_on_disk(tmp_path)[0]
    assert ctrl.attributes & CONTROL_MASK
    assert ctrl.records[0].key == b"\x00\x00\x00\x02"
    assert decode_control_record(ctrl.records[0]) == (2, lcm)


def test_torn_tail_is_truncated_with_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        log.append([(broker(1), 3)], timestamp_ms=2)
        good_size = log.segment_paths[0].stat().st_size
        log.append([(broker(2), 3), (broker(3), 3)], timestamp_ms=3)
    seg = tmp_path / segment_name(0)
    full = seg.read_bytes()
    for cut in (1, 13, 60, len(full) - good_size - 1):
        seg.write_bytes(full[: len(full) - cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING), MetadataLog.open(tmp_path) as log:
            assert log.end_offset == 2
            assert [r for _, r, _ in log.replay()] == [MV17, broker(1)]
        assert "torn tail at offset 2" in caplog.text
        assert seg.stat().st_size == good_size


def test_bad_crc_on_a_whole_last_batch_is_damage_not_a_torn_tail(tmp_path: Path) -> None:
    # A torn write leaves fewer bytes than the length says; a whole batch with a bad CRC
    # is damage, and a single-voter log has no other copy to re-replicate it from.
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        log.append([(broker(1), 3)], timestamp_ms=2)
    seg = tmp_path / segment_name(0)
    data = bytearray(seg.read_bytes())
    data[-2] ^= 0xFF
    seg.write_bytes(bytes(data))
    with pytest.raises(StorageError, match=r"damaged at offset 1 .*CRC.*--truncate-at 1"):
        MetadataLog.open(tmp_path)
    assert seg.read_bytes() == bytes(data)


def test_a_bad_length_in_the_first_batch_is_damage_not_a_torn_tail(tmp_path: Path) -> None:
    # The reported failure: one flipped bit in the first batch's length used to cut the
    # whole log as a "torn tail" and start again from an empty log.
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        log.append([(broker(1), 3)], timestamp_ms=2)
        log.append([(broker(2), 3)], timestamp_ms=3)
    seg = tmp_path / segment_name(0)
    for bit in range(31):
        data = bytearray(seg.read_bytes())
        original = bytes(data)
        length = struct.unpack_from(">i", data, 8)[0] ^ (1 << bit)
        struct.pack_into(">i", data, 8, length)
        seg.write_bytes(bytes(data))
        with pytest.raises(StorageError, match="damaged at offset 0"):
            MetadataLog.open(tmp_path)
        assert seg.read_bytes() == bytes(data)
        seg.write_bytes(original)


def test_a_bad_length_on_the_last_whole_batch_is_damage(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        log.append([(broker(1), 3)], timestamp_ms=2)
        last = log.batches[-1]
    seg = tmp_path / segment_name(0)
    data = bytearray(seg.read_bytes())
    struct.pack_into(">i", data, last.position + 8, last.size - 12 + 100)
    seg.write_bytes(bytes(data))
    with pytest.raises(StorageError, match=r"length .* is wrong"):
        MetadataLog.open(tmp_path)


def _replayed(directory: Path, read_only: bool = False) -> tuple[int, list[tuple[int, object, int]]]:
    # read_only takes the same recovery decisions, minus the lock and the truncation write.
    with MetadataLog.open(directory, fsync=False, read_only=read_only) as log:
        return log.end_offset, list(log.replay())


def test_every_single_byte_flip_is_detected_or_harmless(tmp_path: Path) -> None:
    """Flip each byte of a small two-segment log (all bits, then the low bit), one at a
    time: recovery either refuses with a StorageError or replays exactly the same records."""
    src = tmp_path / "src"
    with MetadataLog.open(src, segment_bytes=260, fsync=False) as log:
        log.append_control([(LEADER_CHANGE, LeaderChangeMessage(0, 1, [Voter(1)], [Voter(1)]), 0)], timestamp_ms=1)
        log.append([(MV17, 0)], timestamp_ms=2)
        log.append([(broker(1), 3), (broker(2), 3)], timestamp_ms=3)
        log.append([(NoOpRecord(), 0)], timestamp_ms=4)
        log.append([(broker(3), 3)], timestamp_ms=5)
        paths = log.segment_paths
    assert len(paths) >= 2
    want = _replayed(src)
    work = tmp_path / "work"
    work.mkdir()
    originals = {p.name: p.read_bytes() for p in paths}
    for n, d in originals.items():
        (work / n).write_bytes(d)
    detected = harmless = 0
    for name, data in originals.items():
        for i in range(len(data)):
            for mask in (0xFF, 0x01):
                flipped = bytearray(data)
                flipped[i] ^= mask
                (work / name).write_bytes(bytes(flipped))
                try:
                    got = _replayed(work, read_only=True)
                except StorageError:
                    detected += 1
                    continue
                assert got == want, f"flip {mask:#x} at byte {i} of {name} changed the replayed log silently"
                harmless += 1
            (work / name).write_bytes(data)
    # The writable open (the controller's start) decides the same and changes nothing when it refuses.
    flipped = bytearray(originals[paths[0].name])
    flipped[9] ^= 0x01
    (work / paths[0].name).write_bytes(bytes(flipped))
    with pytest.raises(StorageError):
        _replayed(work)
    assert (work / paths[0].name).read_bytes() == bytes(flipped)
    assert detected > harmless > 0  # epochs and the like are outside the CRC: some flips are harmless


def test_log_recover_reports_and_truncates_with_a_backup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kraft_jbod import cli

    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        log.append([(broker(1), 3)], timestamp_ms=2)
        log.append([(broker(2), 3)], timestamp_ms=3)
        second = log.batches[1]
    assert cli.main(["log", "recover", str(tmp_path)]) == 0
    assert "clean: 3 batches, log start offset 0, end offset 3" in capsys.readouterr().out
    seg = tmp_path / segment_name(0)
    data = bytearray(seg.read_bytes())
    data[second.position + 40] ^= 0x10
    seg.write_bytes(bytes(data))
    assert cli.main(["log", "recover", str(tmp_path)]) == 1
    assert "damaged at offset 1" in capsys.readouterr().out
    assert cli.main(["log", "dump", str(tmp_path)]) == 2
    capsys.readouterr()
    # Not a boundary, beyond the damage, or a negative offset: refused, nothing changed.
    for bad in ("2", "5", "-1"):
        assert cli.main(["log", "recover", str(tmp_path), "--truncate-at", bad]) == 2
        assert seg.read_bytes() == bytes(data)
    assert "not a batch boundary" in capsys.readouterr().err
    assert cli.main(["log", "recover", str(tmp_path), "--truncate-at", "1"]) == 0
    out = capsys.readouterr().out
    assert "cut the log at offset 1" in out
    (backup,) = [p for p in tmp_path.iterdir() if p.name.startswith("recovery-")]
    (saved,) = list(backup.iterdir())
    assert saved.read_bytes() == bytes(data[second.position :])
    assert seg.read_bytes() == bytes(data[: second.position])
    with MetadataLog.open(tmp_path) as log:
        assert log.end_offset == 1 and [r for _, r, _ in log.replay()] == [MV17]
    assert cli.main(["log", "recover", str(tmp_path), "--truncate-at", "1"]) == 2  # nothing left to cut


def test_zero_filled_tail_is_truncated(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
    seg = tmp_path / segment_name(0)
    seg.write_bytes(seg.read_bytes() + bytes(4096))
    with MetadataLog.open(tmp_path) as log:
        assert log.end_offset == 1


def test_damage_before_the_tail_names_the_offset(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        log.append([(broker(1), 3), (broker(2), 3)], timestamp_ms=2)
        log.append([(broker(3), 3)], timestamp_ms=3)
        second = log.batches[1]
    seg = tmp_path / segment_name(0)
    data = bytearray(seg.read_bytes())
    data[second.position + second.size - 3] ^= 0x01
    seg.write_bytes(bytes(data))
    with pytest.raises(StorageError, match=r"damaged at offset 1 \(00000000000000000000.log, byte \d+\).*CRC"):
        MetadataLog.open(tmp_path)
    assert seg.read_bytes() == bytes(data)  # nothing was changed on disk


def test_damage_in_an_earlier_segment_is_fatal_even_at_its_end(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, segment_bytes=200) as log:
        for i in range(6):
            log.append([(broker(i), 3)], timestamp_ms=i)
        paths = log.segment_paths
    assert len(paths) > 1
    first = paths[0]
    first.write_bytes(first.read_bytes()[:-5])
    with pytest.raises(StorageError, match="damaged at offset"):
        MetadataLog.open(tmp_path)


def test_segments_roll_and_are_named_by_base_offset(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, segment_bytes=300) as log:
        for i in range(10):
            log.append([(broker(i), 3)], timestamp_ms=i)
        names = [p.name for p in log.segment_paths]
    assert len(names) > 2
    bases = [int(n[:20]) for n in names]
    assert bases[0] == 0 and bases == sorted(bases)
    for p in sorted(tmp_path.glob("*.log")):
        assert batches_on_disk_first(p) == int(p.name[:20])
        assert p.stat().st_size <= 300
    with MetadataLog.open(tmp_path, segment_bytes=300) as log:
        assert [r.broker_id for _, r, _ in log.replay()] == list(range(10))


def batches_on_disk_first(p: Path) -> int:
    first = read_records(p.read_bytes())[0]
    assert isinstance(first, RecordBatch)
    return first.base_offset


def test_missing_segment_is_detected(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, segment_bytes=200) as log:
        for i in range(6):
            log.append([(broker(i), 3)], timestamp_ms=i)
        paths = log.segment_paths
    paths[1].unlink()
    with pytest.raises(StorageError, match="expected offset"):
        MetadataLog.open(tmp_path)


def test_read_serves_whole_batches(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        log.append([(broker(1), 3), (broker(2), 3)], timestamp_ms=2)
        log.append([(broker(3), 3)], timestamp_ms=3)
        one = log.read(2, 1)  # offset 2 is inside the second batch; at least one batch
        (b,) = read_records(one)
        assert isinstance(b, RecordBatch) and b.base_offset == 1
        everything = log.read(0, 1 << 20)
        assert [e.base_offset for e in read_records(everything) if isinstance(e, RecordBatch)] == [0, 1, 3]
        assert log.read(4, 100) == b""
        with pytest.raises(StorageError):
            log.read(5, 100)


def test_second_opener_is_refused(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path):
        with pytest.raises(StorageError, match="in use"):
            MetadataLog.open(tmp_path)
    MetadataLog.open(tmp_path).close()  # free again after close


def test_epoch_never_goes_backwards(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, leader_epoch=5) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
    with MetadataLog.open(tmp_path, leader_epoch=2) as log:
        assert log.leader_epoch == 5 and log.last_epoch == 5
        with pytest.raises(StorageError):
            log.leader_epoch = 4
        log.leader_epoch = 6
        log.append([(NoOpRecord(), 0)], timestamp_ms=2)
    assert [b.partition_leader_epoch for b in batches_on_disk(tmp_path)] == [5, 6]


def test_encode_error_writes_nothing(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        bad = RegisterBrokerRecord(broker_id=1, log_dirs=[uuid.UUID(int=5000)])
        with pytest.raises(EncodeError):
            log.append([(NoOpRecord(), 0), (bad, 0)], timestamp_ms=2)  # LogDirs absent in v0
        assert log.end_offset == 1
        size = log.segment_paths[0].stat().st_size
    assert (tmp_path / segment_name(0)).stat().st_size == size
    with MetadataLog.open(tmp_path) as log:
        assert log.end_offset == 1


def test_resolve_log_dir(tmp_path: Path) -> None:
    assert resolve_log_dir(tmp_path) == tmp_path
    (tmp_path / "__cluster_metadata-0").mkdir()
    assert resolve_log_dir(tmp_path) == tmp_path / "__cluster_metadata-0"


def test_record_values_decode_with_codec(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path) as log:
        log.append([(broker(4), 3)], timestamp_ms=1)
    (b,) = batches_on_disk(tmp_path)
    value = b.records[0].value
    assert value is not None
    assert codec.decode_metadata_record(value) == (broker(4), 3)


def test_log_dump_cli_reports_damage_with_offset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kraft_jbod import cli

    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        log.append([(broker(1), 3)], timestamp_ms=2)
        log.append([(broker(2), 3)], timestamp_ms=3)
        second = log.batches[1]
    assert cli.main(["log", "dump", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [json.loads(x)["type"] for x in out] == [
        "FeatureLevelRecord",
        "RegisterBrokerRecord",
        "RegisterBrokerRecord",
    ]
    seg = tmp_path / segment_name(0)
    data = bytearray(seg.read_bytes())
    data[second.position + 30] ^= 0x40
    seg.write_bytes(bytes(data))
    assert cli.main(["log", "dump", str(tmp_path)]) == 2
    assert "damaged at offset 1" in capsys.readouterr().err
    assert seg.read_bytes() == bytes(data)


def test_a_set_over_10000_records_is_several_batches_with_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kraft_jbod.controller import log as log_module

    noop = NoOpRecord()
    synced: list[int] = []
    real_fsync = log_module.os.fsync
    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        monkeypatch.setattr(log_module.os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
        assert log.append([(noop, 0)] * 25_001, timestamp_ms=2) == 1
        assert len(synced) == 1  # one fsync for the whole set
        monkeypatch.setattr(log_module.os, "fsync", real_fsync)
        assert log.end_offset == 25_002
        assert [(b.base_offset, b.last_offset) for b in log.batches] == [
            (0, 0),
            (1, 10_000),
            (10_001, 20_000),
            (20_001, 25_001),
        ]
        assert log.batch_containing(20_001).base_offset == 20_001
        assert log.append([(noop, 0)] * 10_000, timestamp_ms=3) == 25_002  # exactly the bound: one batch
        assert len(log.batches) == 5
    with MetadataLog.open(tmp_path) as log:
        assert log.end_offset == 35_002
        assert sum(1 for _ in log.replay()) == 35_002
    assert [b.last_offset_delta + 1 for b in batches_on_disk(tmp_path)] == [1, 10_000, 10_000, 5_001, 10_000]
    assert [b.base_offset for b in batches_on_disk(tmp_path)] == [0, 1, 10_001, 20_001, 25_002]


def test_a_failed_write_of_a_split_set_leaves_none_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kraft_jbod.controller import log as log_module

    with MetadataLog.open(tmp_path) as log:
        log.append([(MV17, 0)], timestamp_ms=1)
        size = (tmp_path / segment_name(0)).stat().st_size

        def failing_fsync(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(log_module.os, "fsync", failing_fsync)
        with pytest.raises(StorageError, match="offset 1"):
            log.append([(NoOpRecord(), 0)] * 20_500, timestamp_ms=2)
        monkeypatch.undo()
        assert log.end_offset == 1 and len(log.batches) == 1
    assert (tmp_path / segment_name(0)).stat().st_size == size


def test_roll_starts_a_segment_at_the_end_and_frees_what_lies_below(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path, fsync=False) as log:
        log.append([(NoOpRecord(), 0)] * 5, timestamp_ms=0)
        assert log.roll() is True
        assert log.roll() is False  # the new active segment is still empty
        assert [p.name for p in log.segment_paths] == [segment_name(0), segment_name(5)]
        log.append([(NoOpRecord(), 0)] * 3, timestamp_ms=0)
        assert log.delete_segments_below(5) == 1
        assert log.start_offset == 5 and log.end_offset == 8
    with MetadataLog.open(tmp_path, fsync=False) as log:
        assert (log.start_offset, log.end_offset) == (5, 8)
        assert [offset for offset, _, _ in log.replay(5)] == [5, 6, 7]
    with MetadataLog.open(tmp_path, fsync=False, lock=False, read_only=True) as log, pytest.raises(StorageError):
        log.roll()
