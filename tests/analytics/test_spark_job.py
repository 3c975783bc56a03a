"""The Spark job end to end in local mode: its counts equal the single-process decoder's on
the shared captures, and bad input ends the job with a message naming the file.

One SparkSession serves the whole test session (the job's getOrCreate picks it up);
few runs, tiny inputs: the cost is the JVM start plus a handful of small jobs.
"""

from __future__ import annotations

import dataclasses
import gc
import io
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kraft_jbod import cli
from kraft_jbod.analytics import kip858, work
from kraft_jbod.analytics.job import (
    TABLE_SCHEMAS,
    StatsOptions,
    _arrow_table,
    build_session,
    release_jvm,
    run_stats,
)
from kraft_jbod.capture.kafka import KafkaDecoder, decode_capture
from kraft_jbod.capture.sample import build_sample

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "captures"
CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.default.parallelism": "2"}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = build_session("local[2]", CONF, app_name="kraft-jbod tests")
    yield session
    # End the JVM and py4j's connections now, while the run's output streams are open: left
    # to interpreter exit, each connection's finalizer logs its closing to a stream pytest
    # has closed by then ("--- Logging error --- ... I/O operation on closed file").
    release_jvm(session)
    gc.collect()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("in")
    (d / "kip858-sample.pcapng").write_bytes(build_sample())
    return [str(SHARED), str(d)]


def _single_process(paths: list[str]) -> tuple[Counter[tuple[Any, ...]], list[Any]]:
    counts: Counter[tuple[Any, ...]] = Counter()
    events: list[dict[str, Any]] = []
    for f in work.expand_inputs(paths):
        col = kip858.EventCollector()
        with open(f.path, "rb") as fh:
            for d in decode_capture(fh, decoder=KafkaDecoder()):
                counts[(d.api_key, d.api_version, d.kind, "frames")] += 1
                counts[(d.api_key, d.api_version, d.kind, "decoded")] += d.body is not None
                counts[(d.api_key, d.api_version, d.kind, "exact")] += d.canonical is True
                counts[(d.api_key, d.api_version, d.kind, "bytes")] += d.size + 4
                events.extend(col.feed(d))
        events.extend(col.finish())
    return +counts, kip858.check(events)


def test_counts_equal_the_single_process_decoder(spark: Any, inputs: list[str], tmp_path: Path) -> None:
    seen: list[str] = []
    result = run_stats(
        inputs, tmp_path / "out", StatsOptions(master="local[2]", conf=CONF, write_frames=True), progress=seen.append
    )
    want, findings = _single_process(inputs)
    got: Counter[tuple[Any, ...]] = Counter()
    for r in pq.read_table(tmp_path / "out" / "conformance").to_pylist():
        k = (r["api_key"], r["api_version"], r["kind"])
        got[(*k, "frames")] += r["frames"]
        got[(*k, "decoded")] += r["decoded"]
        got[(*k, "exact")] += r["reencode_exact"]
        got[(*k, "bytes")] += r["bytes"]
    assert +got == want
    overall = result.tables.overall[0]
    assert overall.frames == sum(v for k, v in want.items() if k[3] == "frames")
    # The per-frame table holds exactly those frames.
    assert pq.read_table(tmp_path / "out" / "frames").num_rows == overall.frames
    # KIP-858 findings: the Spark stage gives what the pure checker gives.
    got_findings = [kip858.Finding(**dataclasses.asdict(v)) for v in result.tables.violations]
    assert sorted(got_findings, key=str) == sorted(findings, key=str)
    # Client software and versions negotiated vs used.
    versions = result.tables.versions
    hb = [v for v in versions if v.api_key == 63 and v.software_version == "3.9.1"]
    assert hb and hb[0].versions_used == [1] and hb[0].advertised_max == 1
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert (
        "<svg" in html
        and "BrokerHeartbeat" in html
        and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    assert result.summary.splitlines()[1].startswith(f"{overall.frames} frames")
    assert any(s.startswith("decoded ") for s in seen), seen
    # Tables a user can query as they are: Arrow timestamps, names beside keys, the
    # capture set in every table, the frames partitioned by capture set.
    import pyarrow as pa

    for name in TABLE_SCHEMAS:
        t = pq.read_table(tmp_path / "out" / name)
        assert t.column_names[0] == "capture_set" and set(t.column("capture_set").to_pylist()) <= {"default"}
        if "api_key" in t.column_names:
            assert "api_name" in t.column_names, name
    conf = pq.read_table(tmp_path / "out" / "conformance")
    assert conf.schema.field("first_ts").type == pa.timestamp("ns", tz="UTC")
    assert "BrokerHeartbeat" in conf.column("api_name").to_pylist()
    errs = pq.read_table(tmp_path / "out" / "error_codes").to_pylist()
    assert errs and all(e["error_name"] == ("NONE" if e["error_code"] == 0 else e["error_name"]) for e in errs)
    # Real traffic carries UNKNOWN_SERVER_ERROR (-1), a name Kafka defines; a code Kafka does not
    # define (the damaged Fetch v12 capture holds one) is named UNKNOWN_ERROR_<code>.
    from kraft_jbod.messages.error_codes import ErrorCode

    defined = {int(m): m.name for m in ErrorCode}
    for e in errs:
        want = defined.get(e["error_code"], f"UNKNOWN_ERROR_{e['error_code']}")
        assert e["error_name"] == want, e
    assert any(e["error_name"] == "UNKNOWN_SERVER_ERROR" for e in errs)
    names = {e["error_code"]: e["error_name"] for e in errs}
    assert names.get(0) == "NONE" and all(isinstance(n, str) and n for n in names.values()), names
    assert (tmp_path / "out" / "frames" / "capture_set=default").is_dir()
    frames = pq.read_table(tmp_path / "out" / "frames")
    assert set(frames.column("capture_set").to_pylist()) == {"default"}
    assert frames.schema.field("ts_ns").type == pa.timestamp("ns", tz="UTC")


def test_empty_tables_keep_their_schema(tmp_path: Path) -> None:
    from kraft_jbod.analytics.partials import Partial, build_tables

    empty = build_tables(Partial())
    for name in TABLE_SCHEMAS:
        rows = empty.rows(name)
        assert _arrow_table(rows, TABLE_SCHEMAS[name], "cs").schema == _arrow_table([], TABLE_SCHEMAS[name]).schema
    assert _arrow_table([], TABLE_SCHEMAS["problems"]).column_names == ["capture_set", "source", "problem"]


def test_truncated_capture_ends_the_job_naming_the_file(spark: Any, tmp_path: Path, capsys: Any) -> None:
    data = build_sample()
    d = tmp_path / "in"
    d.mkdir()
    (d / "good.pcapng").write_bytes(data)
    (d / "cut.pcapng").write_bytes(data[:-50])
    with pytest.raises(work.InputError) as exc:
        run_stats([str(d)], tmp_path / "out", StatsOptions(master="local[2]", conf=CONF, write_frames=False))
    assert str(d / "cut.pcapng") in str(exc.value) and "ends inside a record" in str(exc.value)
    assert str(d / "good.pcapng") not in str(exc.value)
    # Through the CLI: exit code 2, the file named, no traceback.
    rc = cli.main(["stats", str(d), "--out", str(tmp_path / "out2"), "--master", "local[2]", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and str(d / "cut.pcapng") in err and "Traceback" not in err
    # --keep-going reports it and carries on with what was readable.
    res = run_stats(
        [str(d)],
        tmp_path / "out3",
        StatsOptions(master="local[2]", conf=CONF, keep_going=True, write_frames=False, report=False),
    )
    assert [p for p, _ in res.problems] == [str(d / "cut.pcapng")]
    assert res.tables.overall[0].frames > len(list(decode_capture(io.BytesIO(data))))


def test_non_capture_and_empty_folder_fail_before_spark(tmp_path: Path, capsys: Any) -> None:
    junk = tmp_path / "junk.pcap"
    junk.write_text("this is not a capture\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    for target, words in ((junk, "not a pcap or pcapng file"), (empty, "no capture file")):
        rc = cli.main(["stats", str(target), "--out", str(tmp_path / "o"), "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and str(target) in err and words in err and "Traceback" not in err


def test_unreadable_scheme_fails_at_once_naming_the_connector(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST", "HADOOP_HOME", "ARROW_LIBHDFS_DIR"):
        monkeypatch.delenv(var, raising=False)
    for uri, words in (
        ("gs://bucket/caps/*.pcap", "GOOGLE_APPLICATION_CREDENTIALS"),
        ("hdfs://nn/caps/a.pcap", "HADOOP_HOME"),
        ("ftp://host/a.pcap", "no connector for ftp://"),
    ):
        t0 = time.monotonic()
        rc = cli.main(["stats", uri, "--out", str(tmp_path / "o"), "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and uri in err and words in err and "Traceback" not in err, err
        assert time.monotonic() - t0 < 5


def test_cds_archive_key_and_rejection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kraft_jbod.analytics import job

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("KRAFT_JBOD_SPARK_CDS", raising=False)
    base = job._cds_key({})
    assert job._cds_key({"spark.jars": "/x.jar"}) != base
    home = tmp_path / "spark-home"
    (home / "jars").mkdir(parents=True)
    monkeypatch.setenv("SPARK_HOME", str(home))
    assert job._cds_key({}) != base
    # No archive yet: the JVM is asked to dump one at exit.
    first = job._Cds({})
    assert any(f.startswith("-XX:ArchiveClassesAtExit=") for f in first.flags)
    # An archive the JVM did not map is deleted, so the next run dumps a fresh one.
    archive = tmp_path / "kraft-jbod" / f"spark-{job._cds_key({})}.jsa"
    archive.write_bytes(b"stale")
    cds = job._Cds({})
    assert cds.archive == archive and any(f.startswith("-XX:SharedArchiveFile=") for f in cds.flags)
    assert cds.log is not None
    cds.log.write_text("[info][cds] UseSharedSpaces: shared class paths mismatch\n")
    assert cds.check() is False and not archive.exists()
    archive.write_bytes(b"good")
    cds = job._Cds({})
    assert cds.log is not None
    cds.log.write_text("[info][cds] Mapped dynamic region #0 at base 0x1\n")
    assert cds.check() is True and archive.exists()
    # A log that says nothing is no rejection: the archive stays.
    cds = job._Cds({})
    assert cds.check() is True and archive.exists()


def test_stats_on_every_shared_capture_alone(spark: Any, tmp_path: Path) -> None:
    # Each capture as its own run, as a user would: 2 of them (every frame in one timeline
    # bucket) crashed the report with a ZeroDivisionError and exit 4.
    files = work.expand_inputs([str(SHARED)])
    assert len(files) >= 20
    for i, f in enumerate(files):
        out = tmp_path / f"out{i}"
        result = run_stats([f.path], out, StatsOptions(master="local[2]", conf=CONF))
        want, _ = _single_process([f.path])
        assert result.tables.overall[0].frames == sum(v for k, v in want.items() if k[3] == "frames"), f.path
        assert (out / "report.html").stat().st_size > 0 and "frames" in result.summary, f.path
