"""Partial aggregates without Spark: merging is order-free and equals aggregating all rows
at once; the latency sketch keeps its accuracy; the timeline coarsens without loss."""

from __future__ import annotations

import dataclasses
import math
import pickle
import random
from collections import Counter
from pathlib import Path

import pytest

from kraft_jbod.analytics import partials as P
from kraft_jbod.analytics import rows as R
from kraft_jbod.analytics import work
from kraft_jbod.analytics.job import TABLE_SCHEMAS, unit_partial
from kraft_jbod.analytics.tables import LATENCY_QUANTILES, TABLE_ROWS, LatencyRow, Tables, latency_column
from tools.bench.gen_capture import generate


@pytest.fixture(scope="module")
def mixed_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("cap") / "mixed.pcapng"
    with p.open("wb") as fh:
        generate(fh, mb=1.5, seed=5, clients=24)
    return p


def _rows(path: Path, buckets: int = 1, bucket: int = 0) -> list[R.Row]:
    return list(work.run_unit(work.Unit(str(path), path.stat().st_size, bucket, buckets), 0))


def _partial(rows: list[R.Row]) -> P.Partial:
    p = P.Partial()
    for r in rows:
        p.add(r)
    return p


def _roundtrip(p: P.Partial) -> P.Partial:
    return P.Partial.from_state(pickle.loads(pickle.dumps(p.to_state())))


def _comparable(tables: Tables) -> dict[str, list[str]]:
    # Row lists whose order depends on which task ran first are compared as sorted text.
    return {name: sorted(repr(r) for r in tables.rows(name)) for name in TABLE_ROWS}


def test_buckets_merged_equal_the_whole_file(mixed_path: Path) -> None:
    whole = P.build_tables(_partial(_rows(mixed_path)))
    parts = [_roundtrip(_partial(_rows(mixed_path, 3, b))) for b in range(3)]
    for order in (parts, parts[::-1]):
        merged = P.build_tables(P.merge_all(order))
        assert _comparable(merged) == _comparable(whole)
    assert whole.overall[0].frames > 100 and whole.overall[0].connections > 10


def test_table_rows_are_their_declared_columns(mixed_path: Path) -> None:
    # Each table's schema is read off its row class: capture_set, then the class's fields;
    # build_tables fills every table but the driver's two with rows of that class, leaving
    # the writer's columns to the writer.
    part = _partial(_rows(mixed_path))
    part.add(R.Row(R.RTYPE_FRAME, "f", 0, conn_id="c", ts_ns=1, anomaly_kinds=["TCP gap"]))  # this capture has none
    t = P.build_tables(part)
    assert list(P.TABLE_SCHEMAS) == list(TABLE_ROWS)
    for name, cls in TABLE_ROWS.items():
        fields = [f.name for f in dataclasses.fields(cls)]
        assert [n for n, _ in P.TABLE_SCHEMAS[name]] == ["capture_set", *fields], name
        if name in ("inputs", "problems"):
            continue
        rows = t.rows(name)
        assert rows, name
        for row in rows:
            assert type(row) is cls, (name, row)
            assert all(getattr(row, n) is None for n in P.WRITER_COLUMNS if n in fields), (name, row)
    assert [latency_column(q) for q in LATENCY_QUANTILES] == [
        f.name for f in dataclasses.fields(LatencyRow) if f.name.startswith("latency_p")
    ]


def test_tables_agree_with_the_rows(mixed_path: Path) -> None:
    rows = _rows(mixed_path)
    frames = [r for r in rows if r.rtype == R.RTYPE_FRAME]
    t = P.build_tables(_partial(rows))
    conf = {(r.api_key, r.api_version, r.kind, r.software_name, r.software_version): r for r in t.conformance}
    want = Counter((r.api_key, r.api_version, r.kind, r.software_name, r.software_version) for r in frames)
    assert {k: v.frames for k, v in conf.items()} == dict(want)
    assert sum(v.bytes for v in conf.values()) == sum(r.size or 0 for r in frames)
    tops = Counter((r.api_key, r.api_version, r.error_code) for r in frames if r.error_code is not None)
    got = {(e.api_key, e.api_version, e.error_code): e.count for e in t.error_codes if e.level == "top"}
    assert got == dict(tops)
    assert any(code for _, _, code in tops)  # the generator plants error responses
    assert sum(x.frames for x in t.timeline) == len(frames)
    lat = [r.latency_ns for r in frames if r.latency_ns is not None]
    assert sum(h.count for h in t.latency_hist) == len(lat)
    o = t.overall[0]
    assert o.latency_max_ms == max(lat) / 1e6
    assert o.latency_mean_ms == pytest.approx(sum(lat) / len(lat) / 1e6)
    exact = sorted(lat)[math.ceil(0.5 * len(lat)) - 1]
    assert o.latency_p50_ms is not None
    assert abs(o.latency_p50_ms * 1e6 - exact) <= P.RELATIVE_ACCURACY * exact + 1
    assert len(t.connections) == sum(r.rtype == R.RTYPE_CONN for r in rows)
    assert {v.rule for v in t.violations if v.verdict == "violation"}  # planted violations found


def test_sketch_quantiles_within_relative_accuracy() -> None:
    rng = random.Random(1)
    values = [int(rng.lognormvariate(13, 2)) + 1 for _ in range(20000)] + [0, 0, 5]
    a, b = P.LatencySketch(), P.LatencySketch()
    for i, v in enumerate(values):
        (a if i % 2 else b).add(v)
    a.merge(b)
    s = sorted(values)
    for q in (0.01, 0.5, 0.9, 0.99, 0.999, 1.0):
        exact = s[max(1, math.ceil(q * len(s))) - 1]
        got = a.quantile(q)
        assert got is not None and abs(got - exact) <= P.RELATIVE_ACCURACY * exact + 1e-9, (q, got, exact)
    assert a.quantile(0.0) == 0.0 and a.count == len(values) and a.hi == max(values)
    assert P.LatencySketch().quantile(0.5) is None


def test_timeline_coarsens_and_merges_exactly() -> None:
    def frame(ts: int, api: int) -> R.Row:
        return R.Row(
            R.RTYPE_FRAME,
            "f",
            0,
            ts_ns=ts,
            api_key=api,
            api_version=0,
            kind="request",
            size=10,
            decoded=True,
            unknown_tags=0,
            trailing_bytes=0,
            confidence="header",
            complete=True,
            anomaly_kinds=[],
            conn_id="c",
        )

    rng = random.Random(2)
    stamps = [rng.randrange(0, 3600 * 10**9) for _ in range(30000)]
    dense, sparse = P.Partial(), P.Partial()
    for i, ts in enumerate(stamps):
        (dense if i % 2 else sparse).add(frame(ts if i % 2 else ts // 1000, i % 3))
    assert dense.timeline_step > 0  # over its cap: coarsened
    merged = P.merge_all([sparse, dense])
    rows = P.build_tables(merged).timeline
    actual = [ts if i % 2 else ts // 1000 for i, ts in enumerate(stamps)]
    width = rows[0].width_ns
    assert width == max(P.timeline_width(max(actual) - min(actual)), P.TIMELINE_STEPS[dense.timeline_step])
    want = Counter((ts // width * width, i % 3) for i, ts in enumerate(actual))
    assert {(r.bucket_ts, r.api_key): r.frames for r in rows} == dict(want)
    assert all(r.bucket_ts % width == 0 for r in rows)


def test_unit_partial_reports_problems_and_writes_frames(tmp_path: Path, mixed_path: Path) -> None:
    import pyarrow.parquet as pq

    data = mixed_path.read_bytes()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(data[:-41])
    unit = work.Unit(str(cut), len(data) - 41, 0, 1)
    status = tmp_path / "status"
    status.mkdir()
    folder = tmp_path / "frames" / "capture_set=default"
    part = P.Partial.from_state(pickle.loads(unit_partial(unit, 7, 0, frames_dir=str(folder), status_dir=str(status))))
    assert [e["kind"] for e in part.errors] == ["truncated"] and part.errors[0]["source"] == str(cut)
    table = pq.read_table(folder / "part-00007-000.parquet")
    assert table.num_rows == part.counts[R.RTYPE_FRAME] > 0
    # The capture set is the partition folder's, read back as a column from the dataset.
    assert set(pq.read_table(tmp_path / "frames").column("capture_set").to_pylist()) == {"default"}
    assert not list(folder.glob("*.tmp-*"))
    # The task's last progress report is its frame count.
    assert (status / "t7-0").read_text() == str(part.counts[R.RTYPE_FRAME])
    with pytest.raises((KeyError, TypeError, ValueError)):
        P.Partial.from_state({"conf": []})


def test_counters_are_the_table_columns() -> None:
    # The conformance and overall count columns are Counters' fields, in order, and the
    # shipped state round-trips through from_state.
    names = tuple(f.name for f in dataclasses.fields(P.Counters))
    assert names == (*P.COUNTERS, "first_ts", "last_ts") and len(P.COUNTERS) == 14
    for table in ("conformance", "overall"):
        cols = [n for n, _ in TABLE_SCHEMAS[table]]
        assert cols[cols.index("frames") : cols.index("frames") + len(P.COUNTERS)] == list(P.COUNTERS)
    c = P.Counters.from_state([*range(1, 15), 7, 9])
    assert P.Counters.from_state(c.to_state()) == c
    total = P.Counters(first_ts=8, last_ts=8)
    total.add(c)
    assert total.frames == 1 and total.truncated == 14 and (total.first_ts, total.last_ts) == (7, 9)
    with pytest.raises(ValueError):
        P.Counters.from_state([1, 2])


def test_version_tally_fields_are_the_versions_columns() -> None:
    names = [f.name for f in dataclasses.fields(P.VersionTally)]
    cols = [n for n, _ in TABLE_SCHEMAS["versions"]]
    assert cols[cols.index("versions_used") :] == names
    a = P.VersionTally({1, 3}, 3, 0, 4, requests=2, outside_advertised=1)
    b = P.VersionTally({5}, 5, None, 6, requests=1, below_advertised_max=1, deprecated=1)
    assert P.VersionTally.from_state(a.to_state()) == a and a.to_state()[0] == [1, 3]
    a.add(b)
    assert a == P.VersionTally({1, 3, 5}, 5, 0, 6, 3, 1, 1, 1, 0)


def test_errors_nested_in_per_partition_fields_count_as_error_responses() -> None:
    # The demo's summary said 3 error codes while its chart showed 0 error responses: the
    # chart and the overall count looked at the top-level error code only.
    p = P.Partial()
    for i, (top, nested) in enumerate([(0, [36]), (None, [36, 36]), (77, []), (0, [])]):
        row = R.blank(R.RTYPE_FRAME, "x", 0)
        row.kind, row.api_key, row.api_version, row.ts_ns = "response", 19, 7, 1_000_000_000 + i
        row.error_code, row.nested_error_codes = top, nested
        p.add(row)
    tables = P.build_tables(p)
    assert tables.overall[0].error_frames == 3
    assert sum(r.errors for r in tables.timeline) == 3
