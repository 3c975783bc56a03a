"""Row building, planning and task execution without Spark."""

from __future__ import annotations

import dataclasses
import io
import os
import subprocess
import sys
import typing
import uuid
from collections import Counter
from pathlib import Path

import pytest

from kraft_jbod.analytics import rows as R
from kraft_jbod.analytics import work
from kraft_jbod.capture.kafka import decode_capture
from kraft_jbod.capture.sample import build_sample
from kraft_jbod.messages import assign_replicas_to_dirs_response as arr
from kraft_jbod.messages import find_coordinator_response as fcr
from kraft_jbod.messages import offset_fetch_response as ofr
from kraft_jbod.messages import produce_response as pr
from tools.bench.gen_capture import generate

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "captures"
_PY_TYPES = {"string": str, "bool": bool, "int16": int, "int32": int, "int64": int}


@pytest.fixture(scope="module")
def sample_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("cap") / "sample.pcapng"
    p.write_bytes(build_sample())
    return p


@pytest.fixture(scope="module")
def mixed_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("cap") / "mixed.pcapng"
    with p.open("wb") as fh:
        generate(fh, mb=1.5, seed=3, clients=24)
    return p


def _rows(path: Path, buckets: int = 1, bucket: int = 0) -> list[R.Row]:
    unit = work.Unit(str(path), path.stat().st_size, bucket, buckets)
    return list(work.run_unit(unit, 0))


def _check_types(row: R.Row) -> None:
    assert isinstance(row, R.Row)
    for name, typ in R.COLUMNS:
        v = getattr(row, name)
        if v is None:
            continue
        if typ.startswith("list<"):
            inner = _PY_TYPES[typ[5:-1]]
            assert isinstance(v, list) and all(isinstance(x, inner) for x in v), name
        else:
            assert isinstance(v, _PY_TYPES[typ]), (name, v)
        if typ == "int16" and isinstance(v, int):
            assert -(1 << 15) <= v < 1 << 15


def test_columns_are_the_row_fields() -> None:
    # The column list, the frame table and the Arrow schema all come from Row's fields.
    from kraft_jbod.analytics import job

    names = tuple(f.name for f in dataclasses.fields(R.Row) if f.name != "detail")
    assert R.COLUMN_NAMES == names and len(names) == 33
    hints = typing.get_type_hints(R.Row)
    py = {
        "string": "str",
        "bool": "bool",
        "int16": "int",
        "int32": "int",
        "int64": "int",
        "list<int16>": "list[int]",
        "list<string>": "list[str]",
    }
    for name, typ in R.COLUMNS:
        assert py[typ] in str(hints[name]), (name, typ, hints[name])
    schema = job.arrow_schema(R.COLUMNS)
    assert schema.names == list(names)
    frame = job.arrow_schema(job.FRAME_COLUMNS)
    row_fields = set(names)
    assert {n for n in frame.names if n != "api_name"} <= row_fields
    assert not hasattr(R.blank(R.RTYPE_FRAME, "s", 0), "__dict__")  # slots: no stray keys
    with pytest.raises(AttributeError):
        R.blank(R.RTYPE_FRAME, "s", 0).not_a_column = 1  # type: ignore[attr-defined]


def test_rows_match_single_process_decoder(sample_path: Path) -> None:
    rows = _rows(sample_path)
    for r in rows:
        _check_types(r)
    frames = [r for r in rows if r.rtype == R.RTYPE_FRAME]
    decoded = list(decode_capture(io.BytesIO(build_sample())))
    assert len(frames) == len(decoded)
    got = Counter((r.api_key, r.api_version, r.kind, r.confidence) for r in frames)
    want = Counter((f.api_key, f.api_version, f.kind, f.confidence) for f in decoded)
    assert got == want
    assert sum(1 for r in rows if r.rtype == R.RTYPE_CONN) == 3
    assert [r.rtype for r in rows][-1] == R.RTYPE_FILE


def test_software_and_negotiated_versions(sample_path: Path) -> None:
    frames = [r for r in _rows(sample_path) if r.rtype == R.RTYPE_FRAME]
    b1 = [r for r in frames if r.conn_id == "10.0.0.1:40001->10.0.0.10:9093"]
    assert {(r.software_name, r.software_version) for r in b1} == {("apache-kafka-java", "3.9.1")}
    hb = [r for r in b1 if r.api_key == 63 and r.kind == "request"]
    assert hb and all((r.negotiated_min, r.negotiated_max) == (0, 1) for r in hb)
    # The mid-stream connection never showed its ApiVersions: nothing is invented.
    b3 = [r for r in frames if (r.conn_id or "").startswith("10.0.0.1:40003")]
    assert b3 and all(r.software_name is None and r.negotiated_max is None for r in b3)
    assert any("request not captured (inferred)" in (r.anomaly_kinds or ()) for r in b3)


def test_error_codes_top_and_nested() -> None:
    body = arr.AssignReplicasToDirsResponse(
        error_code=0,
        directories=[
            arr.DirectoryData(
                topics=[
                    arr.TopicData(
                        partitions=[
                            arr.PartitionData(partition_index=i, error_code=e) for i, e in enumerate([0, 100, 6, 0, 3])
                        ]
                    )
                ]
            )
        ],
    )
    assert R.error_codes(body) == (0, [100, 6, 3])
    produce = pr.ProduceResponse(
        responses=[pr.TopicProduceResponse(partition_responses=[pr.PartitionProduceResponse(error_code=6)])]
    )
    top, nested = R.error_codes(produce)
    assert top is None and nested == [6]


def test_error_codes_read_only_fields_of_the_frames_version() -> None:
    # FindCoordinator's top-level ErrorCode exists in v0-3 only (v4+ batch coordinators);
    # OffsetFetch's in v2-7 only. Elsewhere the attribute is a default 0, not an observation.
    fc = fcr.FindCoordinatorResponse(coordinators=[fcr.Coordinator(key="g", error_code=15)])
    assert R.error_codes(fc, 3) == (0, [])
    assert R.error_codes(fc, 4) == (None, [15])
    of = ofr.OffsetFetchResponse()
    assert R.error_codes(of, 7)[0] == 0 and R.error_codes(of, 8)[0] is None


def test_version_flags_follow_schemas() -> None:
    assert R.version_flags("request", 0, 3) == (True, False)  # Produce v0-6 deprecated
    assert R.version_flags("request", 0, 9) == (False, False)
    assert R.version_flags("request", 0, 99)[1] is True  # beyond the schema: unstable
    assert R.version_flags("request", 9999, 0) == (False, False)


def test_anomaly_kinds_are_stable() -> None:
    assert R.anomaly_kind("3 trailing bytes after the body: 000000") == "trailing bytes"
    assert (
        R.anomaly_kind("non-canonical encoding: re-encoding differs at byte 7 (9 vs 10 bytes)")
        == "non-canonical encoding"
    )
    assert R.anomaly_kind("something new and strange " * 5) == ("something new and strange " * 5)[:60]


def test_connection_buckets_partition_the_frames(mixed_path: Path) -> None:
    whole = [r for r in _rows(mixed_path) if r.rtype == R.RTYPE_FRAME]
    parts: list[R.Row] = []
    conns: list[set[object]] = []
    for b in range(3):
        rows = [r for r in _rows(mixed_path, 3, b) if r.rtype == R.RTYPE_FRAME]
        parts.extend(rows)
        conns.append({r.conn_id for r in rows})
    key = ("conn_id", "api_key", "api_version", "kind", "correlation_id", "decoded", "canonical", "latency_ns")
    assert Counter(tuple(getattr(r, k) for k in key) for r in parts) == Counter(
        tuple(getattr(r, k) for k in key) for r in whole
    )
    assert not (conns[0] & conns[1]) and not (conns[1] & conns[2]) and not (conns[0] & conns[2])
    assert all(conns), "every bucket got some connection"


def test_bucket_is_symmetric_and_stable() -> None:
    assert work.bucket_of("10.0.0.1", 5000, "10.0.0.2", 9092, 7) == work.bucket_of(
        "10.0.0.2", 9092, "10.0.0.1", 5000, 7
    )
    # Not hash(): the same in every worker process, whatever its hash seed.
    code = (
        "from kraft_jbod.analytics.work import bucket_of; print(bucket_of('10.0.0.1', 5000, '10.0.0.2', 9092, 1 << 30))"
    )
    seen = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert seen == {str(work.bucket_of("10.0.0.1", 5000, "10.0.0.2", 9092, 1 << 30))}
    values = {work.bucket_of("10.0.0.1", p, "10.0.0.2", 9092, 4) for p in range(40000, 40100)}
    assert values == {0, 1, 2, 3}


def test_plan_splits_big_files_and_packs_small_ones() -> None:
    files = [work.InputFile("big", 1000), *(work.InputFile(f"s{i}", 10) for i in range(9))]
    tasks = work.plan(files, split_bytes=300, parallelism=2)
    units = [u for t in tasks for u in t.units]
    big = sorted(u.bucket for u in units if u.path == "big")
    assert big == [0, 1]  # one bucket per core: more would only re-read the file
    assert [u.buckets for u in units if u.path == "big"] == [2, 2]
    # One core never splits; more pieces than cores are capped by buckets_per_core.
    assert {u.buckets for t in work.plan(files, split_bytes=300, parallelism=1) for u in t.units} == {1}
    wide = work.plan(files, split_bytes=300, parallelism=2, buckets_per_core=4)
    assert sorted(u.bucket for t in wide for u in t.units if u.path == "big") == [0, 1, 2, 3]
    assert sorted(u.path for u in units if u.path != "big") == [f"s{i}" for i in range(9)]
    assert len(tasks) < len(units)  # the small files were packed
    costs = [t.cost for t in tasks]
    assert costs == sorted(costs, reverse=True)
    assert [t.task_id for t in tasks] == list(range(len(tasks)))
    assert work.Task.from_tuple(tasks[0].as_tuple()) == tasks[0]


def test_expand_inputs_folders_globs_and_problems(tmp_path: Path, sample_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.pcapng").write_bytes(sample_path.read_bytes())
    (tmp_path / "a" / "notes.txt").write_text("hello")
    (tmp_path / "empty").mkdir()
    got = work.expand_inputs([str(tmp_path / "a"), str(tmp_path / "a" / "*.pcapng")])
    assert [Path(f.path).name for f in got] == ["x.pcapng"]
    with pytest.raises(work.InputError) as exc:
        work.expand_inputs([str(tmp_path / "empty"), str(tmp_path / "missing.pcap")])
    text = str(exc.value)
    assert str(tmp_path / "empty") in text and "no capture file" in text
    assert str(tmp_path / "missing.pcap") in text and "no such file" in text


def test_precheck_names_bad_files(tmp_path: Path, sample_path: Path) -> None:
    empty = tmp_path / "empty.pcap"
    empty.write_bytes(b"")
    text = tmp_path / "text.pcap"
    text.write_text("GET / HTTP/1.1\r\n")
    files = [work.InputFile(str(p), p.stat().st_size) for p in (empty, text, sample_path)]
    problems = dict(work.precheck(files))
    assert problems == {str(empty): "empty file", str(text): "not a pcap or pcapng file (starts with 47455420)"}


def test_truncated_and_malformed_captures_become_error_rows(tmp_path: Path, sample_path: Path) -> None:
    data = sample_path.read_bytes()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(data[: len(data) - 37])
    rows = _rows(cut)
    errors = [r for r in rows if r.rtype == R.RTYPE_ERROR]
    assert [e.kind for e in errors] == ["truncated"]
    assert errors[0].source == str(cut) and "ends inside a record" in str(errors[0].error)
    assert sum(r.rtype == R.RTYPE_FRAME for r in rows) > 10  # what came before is kept
    bad = tmp_path / "bad.pcapng"
    bad.write_bytes(data[:200] + b"\xff" * 64)
    rows = _rows(bad)
    errors = [r for r in rows if r.rtype == R.RTYPE_ERROR]
    assert len(errors) == 1 and errors[0].kind == "malformed" and errors[0].source == str(bad)
    assert rows[-1].rtype == R.RTYPE_FILE


def test_shared_captures_decode_without_problems() -> None:
    files = work.expand_inputs([str(SHARED)])
    assert len(files) >= 20
    assert work.precheck(files) == []
    kinds: Counter[str] = Counter()
    for t in work.plan(files, parallelism=2):
        for r in work.run_task(t):
            kinds[r.rtype] += 1
            assert r.rtype != R.RTYPE_ERROR, r.error
    assert kinds[R.RTYPE_FILE] == len(files) and kinds[R.RTYPE_FRAME] > 300


def test_uuid_helpers_used_by_events() -> None:
    # Events carry Kafka's base64url form, the same as the metadata records' JSON.
    from kraft_jbod.wire.primitives import uuid_to_base64url

    assert uuid_to_base64url(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"


@pytest.mark.parametrize(
    "path", sorted(p for p in SHARED.rglob("*") if p.suffix in (".pcap", ".pcapng")), ids=lambda p: p.name
)
def test_decode_and_stats_count_the_same_frames(path: Path) -> None:
    # `kraft-jbod decode` runs decode_capture; every stats task runs run_unit. Both go
    # through the one CapturePipeline, whole or split into connection buckets.
    from kraft_jbod.capture.kafka import KafkaDecoder

    dec = KafkaDecoder()
    with path.open("rb") as fh:
        want = Counter((d.api_key, d.api_version, d.kind, d.complete) for d in decode_capture(fh, decoder=dec))
    assert want
    for buckets in (1, 2, 3):
        got: Counter[tuple[object, ...]] = Counter()
        conns = 0
        for b in range(buckets):
            rows = _rows(path, buckets, b)
            assert not [r for r in rows if r.rtype == R.RTYPE_ERROR]
            got.update((r.api_key, r.api_version, r.kind, r.complete) for r in rows if r.rtype == R.RTYPE_FRAME)
            conns += sum(r.rtype == R.RTYPE_CONN for r in rows)
        assert got == want, buckets
        assert conns == len(dec.flows), buckets


def test_damaged_file_keeps_what_came_before(sample_path: Path, tmp_path: Path) -> None:
    # A pcapng block whose trailer disagrees with its header, a third of the way in:
    # the frames and connections before it are kept, and the damage is one error row.
    data = bytearray(sample_path.read_bytes())
    cut = len(data) // 3
    import struct as _s

    pos = 0
    while pos < cut:  # walk the blocks to one starting after `cut`
        pos += _s.unpack_from("<I", data, pos + 4)[0]
    blen = _s.unpack_from("<I", data, pos + 4)[0]
    _s.pack_into("<I", data, pos + blen - 4, blen + 4)
    bad = tmp_path / "damaged.pcapng"
    bad.write_bytes(bytes(data))
    rows = _rows(bad)
    errors = [r for r in rows if r.rtype == R.RTYPE_ERROR]
    assert [e.kind for e in errors] == ["malformed"] and "trailer" in (errors[0].error or "")
    frames = [r for r in rows if r.rtype == R.RTYPE_FRAME]
    conns = {r.conn_id for r in rows if r.rtype == R.RTYPE_CONN}
    assert frames and {f.conn_id for f in frames} <= conns
    assert len(frames) < sum(r.rtype == R.RTYPE_FRAME for r in _rows(sample_path))
