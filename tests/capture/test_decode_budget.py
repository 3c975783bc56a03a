"""The decode budget: records fields past it stay undecoded with an anomaly (issue 26).

Bombs come from tools/bench/bombs.py (our codec + cramjam); their peak RSS is measured by
tools/bench/bench_decode_bombs.py, not here. These tests check the behaviour: the anomaly,
the bytes kept in the body, bounded output, and the frame and file scopes.
"""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from kraft_jbod import codec
from kraft_jbod.analytics.work import Unit, run_unit
from kraft_jbod.capture import kafka as K
from kraft_jbod.capture.budget import DecodeLimits
from kraft_jbod.capture.commands import listen
from kraft_jbod.capture.kafka import KafkaDecoder, decode_capture
from kraft_jbod.capture.output import frame_to_line
from kraft_jbod.capture.tap import FrameTap
from kraft_jbod.cli import main
from kraft_jbod.errors import BudgetExceeded
from kraft_jbod.messages import produce_request as pq
from kraft_jbod.wire import compression
from kraft_jbod.wire.records import (
    LegacyMessage,
    RecordBudget,
    iter_records,
    read_record_batch,
    write_legacy_message_set,
)
from tools.bench import bombs

from .kafka_helpers import batch_bytes, capture, conversation, produce_request


def _decode(blob: bytes, limits: DecodeLimits | None = None) -> list[K.DecodedFrame]:
    dec = KafkaDecoder(limits=limits) if limits else KafkaDecoder()
    return list(decode_capture(io.BytesIO(blob), decoder=dec))


def _budget_anomalies(f: K.DecodedFrame) -> list[str]:
    return [a for a in f.anomalies if "decode budget" in a]


def test_a_one_kib_bomb_is_kept_undecoded_with_an_anomaly_and_bounded_output() -> None:
    blob = bombs.one_batch()
    assert len(blob) < 1400
    [f] = _decode(blob)
    assert f.body is not None and f.confidence == "header"
    [rec] = f.records
    assert rec["undecoded"] == "budget" and rec["batches"] == []
    [a] = _budget_anomalies(f)
    assert "1000000 records" in a and "100000 left" in a
    # The bytes are not lost: they are the body's records field, re-encoded byte-exact.
    assert f.canonical is True
    assert f.body.topic_data[0].partition_data[0].records == bombs.zstd_batch(1_000_000)
    assert len(frame_to_line(f)) < 10_000


def test_the_frame_budget_spans_every_records_field_of_the_frame() -> None:
    parts = [batch_bytes([b"v"] * 60, codec_id=compression.ZSTD) for _ in range(3)]
    # Three partitions in one Produce: 60 + 60 fit in 150, the third does not.
    body = pq.ProduceRequest(
        acks=-1,
        timeout_ms=1,
        topic_data=[
            pq.TopicProduceData(
                name="t", partition_data=[pq.PartitionProduceData(index=i, records=r) for i, r in enumerate(parts)]
            )
        ],
    )
    frame = codec.encode_request(body, 9, 1, "c")
    blob = capture(lambda w: conversation(w).client_send(frame))
    [f] = _decode(blob, DecodeLimits(frame_records=150))
    assert [("undecoded" in r, len(r["batches"])) for r in f.records] == [(False, 1), (False, 1), (True, 0)]
    assert len(_budget_anomalies(f)) == 1
    [f] = _decode(blob, DecodeLimits(frame_records=180))
    assert not _budget_anomalies(f)
    # Within one field: the batches before the one past the budget are kept.
    two = parts[0] + parts[1]
    blob = capture(lambda w: conversation(w).client_send(produce_request(two, 1)))
    [f] = _decode(blob, DecodeLimits(frame_records=100))
    [rec] = f.records
    assert rec["undecoded"] == "budget" and [len(b["records"]) for b in rec["batches"]] == [60]


def test_the_decompressed_bytes_budget() -> None:
    records = batch_bytes([b"x" * 1000] * 50, codec_id=compression.GZIP)
    blob = capture(lambda w: conversation(w).client_send(produce_request(records, 1)))
    [f] = _decode(blob, DecodeLimits(frame_bytes=10_000))
    [a] = _budget_anomalies(f)
    assert "10000-byte limit" in a
    [f] = _decode(blob, DecodeLimits(frame_bytes=100_000))
    assert not _budget_anomalies(f) and len(f.records[0]["batches"][0]["records"]) == 50


def test_the_file_budget_spans_frames_and_each_decoder_has_its_own() -> None:
    blob = bombs.many_frames(frames=5, records=40)
    limits = DecodeLimits(file_records=100)
    frames = _decode(blob, limits)
    assert [bool(_budget_anomalies(f)) for f in frames] == [False, False, True, True, True]
    assert [bool(_budget_anomalies(f)) for f in _decode(blob, limits)] == [False, False, True, True, True]


def test_frames_held_behind_an_orphan_response_are_bounded_too() -> None:
    # The decoder holds a connection's frames while it infers an orphan response (up to 8
    # requests): past one frame's records budget it infers with what it has instead.
    from kraft_jbod.capture.pipeline import iter_frames

    blob = bombs.held_behind_orphan(frames=6, records=60)
    # Default budget: held until the flow ends (6 requests < 8); a budget of 100 records: after 2.
    for limits, released_after in ((DecodeLimits(frame_records=100), 2), (DecodeLimits(), 6)):
        dec = KafkaDecoder(limits=limits)
        requests = 0
        first_out = None
        for item in iter_frames(io.BytesIO(blob), ports=[9092], classifier=K.is_request):
            out = dec.feed(item)
            requests += getattr(item, "direction", "") == "client"
            if out and first_out is None:
                first_out = requests
        assert first_out == released_after
        assert not any(_budget_anomalies(f) for f in dec.finish())


def test_running_out_of_memory_while_decoding_records_keeps_the_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object) -> None:
        raise MemoryError

    monkeypatch.setattr(K._Walker, "_batch", boom)
    blob = capture(lambda w: conversation(w).client_send(produce_request(batch_bytes([b"v"]), 1)))
    [f] = _decode(blob)
    assert f.body is not None and f.records[0]["undecoded"] == "memory"
    assert any("out of memory" in a for a in f.anomalies)


def test_the_wire_budget_refuses_before_building_and_draws_nothing() -> None:
    data = bombs.zstd_batch(1000)
    budget = RecordBudget(records=999, decompressed=1 << 20)
    with pytest.raises(BudgetExceeded, match="declares 1000 records"):
        read_record_batch(data, 0, budget=budget)
    assert (budget.records, budget.decompressed) == (999, 1 << 20)
    budget = RecordBudget(records=1000, decompressed=1 << 20)
    batch, _ = read_record_batch(data, 0, budget=budget)
    assert len(batch.records) == 1000 and budget.records == 0 and budget.decompressed == (1 << 20) - 7000
    # Legacy messages count one record each.
    out = bytearray()
    write_legacy_message_set(out, [LegacyMessage(offset=i, magic=1, timestamp=0, value=b"v") for i in range(3)])
    budget = RecordBudget(records=2, decompressed=0)
    it = iter_records(bytes(out), budget=budget)
    assert len([next(it), next(it)]) == 2
    with pytest.raises(BudgetExceeded):
        next(it)


def test_decode_command_options_and_their_mistakes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "b.pcapng"
    path.write_bytes(bombs.many_frames(frames=2, records=30))
    out = tmp_path / "out.jsonl"
    assert main(["decode", str(path), "--no-progress", "--max-frame-records", "20", "--output", str(out)]) == 0
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert all(any("decode budget" in a for a in x["anomalies"]) for x in lines) and len(lines) == 2
    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(["decode", str(path), "--max-frame-records", "-1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "must be 0 or more" in err and "Traceback" not in err
    for bad in ("1e400", "inf", "nan", "abc"):
        with pytest.raises(SystemExit) as exc:
            main(["decode", str(path), "--max-frame-bytes", bad])
        assert exc.value.code == 2 and f"not a count: '{bad}'" in capsys.readouterr().err


def test_stats_tasks_use_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "b.pcapng"
    path.write_bytes(bombs.one_batch())
    rows = list(run_unit(Unit(str(path), path.stat().st_size, 0, 1)))
    frames = [r for r in rows if r.rtype == "frame"]
    assert len(frames) == 1 and "records past the decode budget" in (frames[0].anomaly_kinds or [])
    small = tmp_path / "s.pcapng"
    small.write_bytes(bombs.many_frames(frames=1, records=11))
    unit = Unit(str(small), small.stat().st_size, 0, 1)
    kinds = [r.anomaly_kinds or [] for r in run_unit(unit) if r.rtype == "frame"]
    assert kinds == [[]]
    kinds = [r.anomaly_kinds or [] for r in run_unit(unit, limits=DecodeLimits(frame_records=10)) if r.rtype == "frame"]
    assert kinds == [["records past the decode budget"]]


async def test_capture_listen_uses_the_budget() -> None:
    out = io.StringIO()
    ready = asyncio.Event()
    bound: list[tuple[str, int]] = []
    task = asyncio.create_task(
        listen(
            "127.0.0.1", 0, out, count=1, timeout=5.0, ready=ready, bound=bound, limits=DecodeLimits(frame_records=10)
        )
    )
    await asyncio.wait_for(ready.wait(), 5)
    async with FrameTap(udp=bound[0]) as tap:
        conn = tap.open(("127.0.0.1", 5000), ("127.0.0.1", 9092))
        conn.received(produce_request(bombs.zstd_batch(11), 1))
        conn.close()
        await tap.flush()
    assert await asyncio.wait_for(task, 10) == 1
    [line] = out.getvalue().splitlines()
    assert any("decode budget" in a for a in json.loads(line)["anomalies"])
