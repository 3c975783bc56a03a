"""The PySpark conformance job: capture files in, Parquet tables and a report out.

Strategy (measured in ``tools/bench/bench_stats.py``; see docs/spark.md):

* S0, driver: expand and pre-check the inputs (a wrong file fails before Spark starts),
  then plan tasks (:func:`.work.plan`: per file, and per connection bucket in big files).
* S1, decode: ``spark.range(n, numPartitions=n)`` gives each task its own partition and
  ``mapInArrow`` runs :func:`.work.run_task` in a Python worker, which opens the file
  itself: capture bytes never travel through the JVM, only narrow rows come back as Arrow
  batches. The result is persisted because every table below reads it.
  ``decode_path`` ``rdd`` (RDD ``mapPartitions``) and ``udf`` (an Arrow-optimised Python
  UDF per task) exist to measure the alternatives.
* Problem rows (a file cut short, a malformed file, a worker-side bug) are collected
  right after S1; unless ``keep_going``, they end the job with :class:`.work.InputError`
  naming each file, and no table is written.
* S2, KIP-858: the events (a few hundred bytes each) of the capture set are grouped
  (``applyInArrow``) and replayed through :func:`.kip858.check`.
* S3, aggregation in the JVM (``groupBy``, ``percentile_approx``), then small tables are
  written as Parquet (one folder per table) and collected for :mod:`.report`.

pyspark is imported only inside functions of this module, so importing the package or
``kraft-jbod --help`` never loads it.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kraft_jbod.analytics import kip858, work
from kraft_jbod.analytics.rows import COLUMNS, RTYPE_CONN, RTYPE_ERROR, RTYPE_EVENT, RTYPE_FILE, RTYPE_FRAME

__all__ = ["DECODE_PATHS", "StatsOptions", "StatsResult", "build_session", "run_stats"]

DECODE_PATHS: Final = ("arrow", "rdd", "udf")
_BATCH_ROWS: Final = 8192
_LATENCY_Q: Final = (0.5, 0.9, 0.99, 0.999)
_LOG4J: Final = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""

Progress = Callable[[str], None]


@dataclass(slots=True)
class StatsOptions:
    """What :func:`run_stats` does; defaults are the embedded local run."""

    master: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    ports: list[int] | None = None
    split_bytes: int = work.DEFAULT_SPLIT_BYTES
    decode_path: str = "arrow"
    keep_going: bool = False
    write_frames: bool = True
    check_canonical: bool = True
    capture_set: str = "default"
    report: bool = True


@dataclass(slots=True)
class StatsResult:
    """What a run produced: table rows (small tables only), timings and the summary."""

    out_dir: Path
    tables: dict[str, list[dict[str, Any]]]
    timings: dict[str, float]
    tasks: int
    files: int
    problems: list[tuple[str, str]]
    summary: str = ""


# --------------------------------------------------------------------------- schema


def _arrow_schema() -> Any:
    import pyarrow as pa

    types = {"string": pa.string(), "bool": pa.bool_(), "int16": pa.int16(), "int32": pa.int32(),
             "int64": pa.int64(), "list<int16>": pa.list_(pa.int16()), "list<string>": pa.list_(pa.string())}
    return pa.schema([(n, types[t]) for n, t in COLUMNS])


def _spark_schema() -> Any:
    from pyspark.sql import types as T

    types = {"string": T.StringType(), "bool": T.BooleanType(), "int16": T.ShortType(),
             "int32": T.IntegerType(), "int64": T.LongType(), "list<int16>": T.ArrayType(T.ShortType()),
             "list<string>": T.ArrayType(T.StringType())}
    return T.StructType([T.StructField(n, types[t], True) for n, t in COLUMNS])


def _to_batches(rows: Iterator[dict[str, Any]], schema: Any) -> Iterator[Any]:
    import pyarrow as pa

    names = [n for n, _ in COLUMNS]
    types = [schema.field(n).type for n in names]
    buf: list[dict[str, Any]] = []
    for r in rows:
        buf.append(r)
        if len(buf) >= _BATCH_ROWS:
            yield pa.RecordBatch.from_arrays([pa.array([x[n] for x in buf], type=t) for n, t in zip(names, types,
                                                                                             strict=True)],
                                             schema=schema)
            buf = []
    if buf:
        yield pa.RecordBatch.from_arrays([pa.array([x[n] for x in buf], type=t) for n, t in zip(names, types,
                                                                                         strict=True)],
                                         schema=schema)


# --------------------------------------------------------------------------- worker functions
# Module-level so Spark pickles them by reference: executors import this module.


def _arrow_tasks(batches: Iterator[Any], tasks: tuple[Any, ...],
                 ports: list[int] | None, canonical: bool) -> Iterator[Any]:
    schema = _arrow_schema()
    for b in batches:
        for tid in b.column(0).to_pylist():
            task = work.Task.from_tuple(tasks[tid])
            yield from _to_batches(work.run_task(task, ports=ports, check_canonical=canonical), schema)


def _rdd_tasks(ids: Iterator[int], tasks: tuple[Any, ...],
               ports: list[int] | None, canonical: bool) -> Iterator[tuple[Any, ...]]:
    names = [n for n, _ in COLUMNS]
    for tid in ids:
        for r in work.run_task(work.Task.from_tuple(tasks[tid]), ports=ports, check_canonical=canonical):
            yield tuple(r[n] for n in names)


def _udf_task(tid: int, tasks: tuple[Any, ...], ports: list[int] | None,
              canonical: bool) -> list[dict[str, Any]]:
    return list(work.run_task(work.Task.from_tuple(tasks[tid]), ports=ports, check_canonical=canonical))


def _check_group(table: Any) -> Any:
    import pyarrow as pa

    findings = kip858.check_json(table.column("event").to_pylist())
    cs = table.column("capture_set")[0].as_py() if table.num_rows else ""
    cols: dict[str, list[Any]] = {k: [] for k in _FINDING_COLS}
    for f in findings:
        f["capture_set"] = cs
        for k in _FINDING_COLS:
            cols[k].append(f.get(k))
    return pa.table(cols, schema=_finding_arrow_schema())


_FINDING_COLS: Final = ("capture_set", "rule", "verdict", "severity", "broker", "subject", "detail",
                        "first_ts", "last_ts", "count", "conn")


def _finding_arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("capture_set", pa.string()), ("rule", pa.string()), ("verdict", pa.string()),
                      ("severity", pa.string()), ("broker", pa.int32()), ("subject", pa.string()),
                      ("detail", pa.string()), ("first_ts", pa.int64()), ("last_ts", pa.int64()),
                      ("count", pa.int64()), ("conn", pa.string())])


_FINDING_DDL: Final = ("capture_set string, rule string, verdict string, severity string, broker int, "
                       "subject string, detail string, first_ts long, last_ts long, count long, conn string")


# --------------------------------------------------------------------------- session


def build_session(master: str | None, conf: dict[str, str], app_name: str = "kraft-jbod stats") -> Any:
    """A SparkSession: local[*] unless ``master`` (or spark-submit) says otherwise, with
    small-job defaults that ``conf`` overrides."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    local = False
    if master is not None:
        builder = builder.master(master)
        local = master.startswith("local")
    elif "PYSPARK_GATEWAY_PORT" not in os.environ and "SPARK_REMOTE" not in os.environ:
        # Not under spark-submit (which starts the JVM first) nor Spark Connect: embedded.
        builder = builder.master("local[*]")
        local = True
    defaults = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": str(_BATCH_ROWS),
        "spark.sql.adaptive.enabled": "true",
    }
    if local:
        cores = os.cpu_count() or 2
        defaults.update({
            "spark.sql.shuffle.partitions": str(max(2, 2 * cores)),
            "spark.ui.enabled": "false",
            "spark.driver.memory": "2g",
        })
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if "spark.driver.extraJavaOptions" not in conf:
            log4j = Path(tempfile.gettempdir()) / "kraft-jbod-spark-log4j2.properties"
            if not log4j.exists():
                log4j.write_text(_LOG4J, encoding="utf-8")
            defaults["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
    for k, v in {**defaults, **conf}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    try:
        spark.sparkContext.setLogLevel("ERROR")
    except Exception:
        pass
    return spark


class _ProgressThread(threading.Thread):
    """Polls Spark's status tracker and reports stage progress while a job runs."""

    def __init__(self, spark: Any, report: Progress, every: float = 1.0) -> None:
        super().__init__(daemon=True, name="kraft-jbod-progress")
        self.report = report
        self.every = every
        self.stop_event = threading.Event()
        self.label = ""
        try:
            self.tracker = spark.sparkContext.statusTracker()
        except Exception:
            self.tracker = None

    def run(self) -> None:
        last = ""
        while not self.stop_event.wait(self.every):
            if self.tracker is None:
                return
            try:
                parts = []
                for sid in self.tracker.getActiveStageIds():
                    info = self.tracker.getStageInfo(sid)
                    if info is not None:
                        parts.append(f"{info.numCompletedTasks}/{info.numTasks} tasks"
                                     + (f" ({info.numActiveTasks} running)" if info.numActiveTasks else ""))
            except Exception:
                return
            text = f"{self.label}: " + ", ".join(parts) if parts else ""
            if text and text != last:
                self.report(text)
                last = text


# --------------------------------------------------------------------------- stages


def _decode(spark: Any, tasks: list[work.Task], opts: StatsOptions) -> Any:
    from pyspark.sql import functions as F

    n = len(tasks)
    specs = tuple(t.as_tuple() for t in tasks)
    schema = _spark_schema()
    if opts.decode_path == "arrow":
        fn = functools.partial(_arrow_tasks, tasks=specs, ports=opts.ports, canonical=opts.check_canonical)
        return spark.range(0, n, 1, n).mapInArrow(fn, schema)
    if opts.decode_path == "rdd":
        fn2 = functools.partial(_rdd_tasks, tasks=specs, ports=opts.ports, canonical=opts.check_canonical)
        rdd = spark.sparkContext.parallelize(range(n), n).mapPartitions(fn2)
        return spark.createDataFrame(rdd, schema)
    if opts.decode_path == "udf":
        from pyspark.sql import types as T

        fn3 = functools.partial(_udf_task, tasks=specs, ports=opts.ports, canonical=opts.check_canonical)
        udf = F.udf(fn3, T.ArrayType(schema), useArrow=True)
        ids = spark.range(0, n, 1, n)
        return ids.select(F.explode(udf(F.col("id").cast("int"))).alias("r")).select("r.*")
    raise ValueError(f"decode path must be one of {DECODE_PATHS}, not {opts.decode_path!r}")


def _timeline_width(span_ns: int) -> int:
    """A round bucket width giving at most ~120 points over the span."""
    steps = [10**6, 10**7, 10**8, 10**9, 5 * 10**9, 10 * 10**9, 30 * 10**9, 60 * 10**9, 300 * 10**9,
             600 * 10**9, 1800 * 10**9, 3600 * 10**9, 6 * 3600 * 10**9, 86400 * 10**9]
    for s in steps:
        if span_ns / s <= 120:
            return s
    return steps[-1]


def _aggregate(decoded: Any, findings: Any) -> dict[str, Any]:
    from pyspark.sql import functions as F

    frames = decoded.filter(F.col("rtype") == RTYPE_FRAME)
    conns = decoded.filter(F.col("rtype") == RTYPE_CONN)
    ok = F.col("decoded").cast("long")
    q = F.array(*[F.lit(x) for x in _LATENCY_Q])

    def lat_cols() -> list[Any]:
        p = F.percentile_approx(F.col("latency_ns"), q, 10000)
        return [(p[i] / 1e6).alias(f"latency_p{str(x * 100).rstrip('0').rstrip('.').replace('.', '')}_ms")
                for i, x in enumerate(_LATENCY_Q)] + [(F.max("latency_ns") / 1e6).alias("latency_max_ms"),
                                                      (F.avg("latency_ns") / 1e6).alias("latency_mean_ms")]

    common = [
        F.count(F.lit(1)).alias("frames"),
        F.sum("size").alias("bytes"),
        F.sum(ok).alias("decoded"),
        F.sum(F.col("canonical").isNotNull().cast("long")).alias("reencode_checked"),
        F.sum((F.col("canonical") == F.lit(True)).cast("long")).alias("reencode_exact"),
        F.sum((F.col("canonical") == F.lit(False)).cast("long")).alias("non_canonical"),
        F.sum((F.col("unknown_tags") > 0).cast("long")).alias("frames_unknown_tags"),
        F.sum("unknown_tags").alias("unknown_tags"),
        F.sum((F.col("trailing_bytes") > 0).cast("long")).alias("frames_trailing"),
        F.sum(F.coalesce(F.col("deprecated"), F.lit(False)).cast("long")).alias("deprecated_frames"),
        F.sum(F.coalesce(F.col("unstable"), F.lit(False)).cast("long")).alias("unstable_frames"),
        F.sum(((F.col("error_code").isNotNull()) & (F.col("error_code") != 0)).cast("long")).alias("error_frames"),
        F.sum((~F.col("confidence").isin("header", "paired")).cast("long")).alias("inferred_or_worse"),
        F.sum((F.col("complete") == F.lit(False)).cast("long")).alias("truncated"),
        F.min("ts_ns").alias("first_ts"),
        F.max("ts_ns").alias("last_ts"),
    ]

    def rates(df: Any) -> Any:
        return (df.withColumn("decode_rate", F.col("decoded") / F.col("frames"))
                .withColumn("reencode_rate", F.when(F.col("reencode_checked") > 0,
                                                    F.col("reencode_exact") / F.col("reencode_checked"))))

    keys = ["api_key", "api_version", "kind", "software_name", "software_version"]
    out: dict[str, Any] = {}
    out["conformance"] = rates(frames.groupBy(*keys).agg(*common, *lat_cols())).orderBy(*keys)
    out["overall"] = rates(frames.agg(*common, *lat_cols(), F.countDistinct("source", "conn_id")
                                      .alias("connections")))
    out["latency"] = (frames.filter(F.col("latency_ns").isNotNull())
                      .groupBy("api_key", "api_version").agg(F.count(F.lit(1)).alias("responses"), *lat_cols())
                      .orderBy("api_key", "api_version"))
    out["latency_hist"] = (frames.filter(F.col("latency_ns").isNotNull())
                           .withColumn("bucket", F.floor(F.log2(F.col("latency_ns") / 1000 + 1)).cast("int"))
                           .groupBy("api_key", "bucket").count().orderBy("api_key", "bucket"))
    top = (frames.filter(F.col("error_code").isNotNull())
           .select("api_key", "api_version", "error_code", F.lit("top").alias("level")))
    nested = (frames.filter(F.size("nested_error_codes") > 0)
              .select("api_key", "api_version", F.explode("nested_error_codes").alias("error_code"),
                      F.lit("nested").alias("level")))
    out["error_codes"] = (top.unionByName(nested).groupBy("api_key", "api_version", "error_code", "level")
                          .count().orderBy("api_key", "api_version", "level", "error_code"))
    req = frames.filter(F.col("kind") == "request")
    out["versions"] = (
        req.groupBy("software_name", "software_version", "api_key")
        .agg(F.array_sort(F.collect_set("api_version")).alias("versions_used"),
             F.max("api_version").alias("max_used"),
             F.min("negotiated_min").alias("advertised_min"),
             F.max("negotiated_max").alias("advertised_max"),
             F.count(F.lit(1)).alias("requests"),
             F.sum((F.col("negotiated_max").isNotNull()
                    & ((F.col("api_version") < F.col("negotiated_min"))
                       | (F.col("api_version") > F.col("negotiated_max")))).cast("long")).alias("outside_advertised"),
             F.sum((F.col("api_version") < F.col("negotiated_max")).cast("long")).alias("below_advertised_max"),
             F.sum(F.coalesce(F.col("deprecated"), F.lit(False)).cast("long")).alias("deprecated"),
             F.sum(F.coalesce(F.col("unstable"), F.lit(False)).cast("long")).alias("unstable"))
        .orderBy("software_name", "software_version", "api_key"))
    an = (decoded.filter(F.col("rtype").isin(RTYPE_FRAME, RTYPE_CONN))
          .select("rtype", "conn_id", "ts_ns", F.explode("anomaly_kinds").alias("anomaly")))
    out["anomalies"] = (an.groupBy("anomaly", "rtype").agg(F.count(F.lit(1)).alias("count"),
                                                            F.min("ts_ns").alias("first_ts"),
                                                            F.first("conn_id").alias("example_conn"))
                        .orderBy(F.desc("count")))
    out["connections"] = conns.select("source", "conn_id", F.col("ts_ns").alias("first_ts"),
                                      (F.col("latency_ns") / 1e9).alias("duration_s"), "software_name",
                                      "software_version", "client_source", "gap_bytes", "retransmitted_bytes",
                                      "anomaly_kinds", F.col("error").alias("close_reason"))
    out["violations"] = findings
    return out


def _timeline(frames: Any, first: int, last: int) -> Any:
    from pyspark.sql import functions as F

    width = _timeline_width(max(1, last - first))
    b = (F.floor((F.col("ts_ns") - F.lit(first)) / F.lit(width)) * F.lit(width) + F.lit(first)).cast("long")
    return (frames.withColumn("bucket_ts", b)
            .groupBy("bucket_ts", "api_key")
            .agg(F.count(F.lit(1)).alias("frames"),
                 F.sum((F.size("anomaly_kinds") > 0).cast("long")).alias("anomalous"),
                 F.sum(((F.col("error_code").isNotNull()) & (F.col("error_code") != 0)).cast("long"))
                 .alias("errors"))
            .withColumn("width_ns", F.lit(width))
            .orderBy("bucket_ts", "api_key"))


# --------------------------------------------------------------------------- the job


def run_stats(inputs: Sequence[str], out_dir: str | Path, opts: StatsOptions | None = None,
              progress: Progress | None = None) -> StatsResult:
    """Run the whole job; see the module docstring.

    Raises:
        InputError: an input is missing, empty, not a capture, or (unless
            ``opts.keep_going``) a worker reported it cut short or malformed.
        ValueError: an unknown decode path.
    """
    opts = opts or StatsOptions()
    say: Progress = progress or (lambda _text: None)
    if opts.decode_path not in DECODE_PATHS:
        raise ValueError(f"decode path must be one of {DECODE_PATHS}, not {opts.decode_path!r}")
    t0 = time.perf_counter()
    files = work.expand_inputs(inputs)
    problems = work.precheck(files)
    if problems and not opts.keep_going:
        raise work.InputError(problems)
    bad = {p for p, _ in problems}
    files = [f for f in files if f.path not in bad]
    if not files:
        raise work.InputError(problems or [("(inputs)", "no readable capture file")])
    timings: dict[str, float] = {}
    say("starting Spark" + (f" ({opts.master})" if opts.master else ""))
    t1 = time.perf_counter()
    spark = build_session(opts.master, opts.conf)
    timings["spark_start_s"] = time.perf_counter() - t1
    try:
        parallelism = int(spark.sparkContext.defaultParallelism)
    except Exception:
        parallelism = int(spark.conf.get("spark.default.parallelism", "2"))
    tasks = work.plan(files, split_bytes=opts.split_bytes, parallelism=parallelism)
    total = sum(f.size for f in files)
    say(f"{len(files)} file(s), {total / 1e6:.1f} MB, {len(tasks)} task(s) on {parallelism} core(s)")
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ticker = _ProgressThread(spark, say)
    ticker.start()
    decoded = None
    try:
        t2 = time.perf_counter()
        ticker.label = "decode"
        decoded = _decode(spark, tasks, opts).withColumn("capture_set", F.lit(opts.capture_set))
        decoded = decoded.persist(StorageLevel.MEMORY_AND_DISK)
        counts = {r["rtype"]: r["count"] for r in decoded.groupBy("rtype").count().collect()}
        timings["decode_s"] = time.perf_counter() - t2
        file_rows = [r.asDict() for r in decoded.filter(F.col("rtype") == RTYPE_FILE)
                     .select("source", "size", "event").collect()]
        err_rows = [r.asDict() for r in decoded.filter(F.col("rtype") == RTYPE_ERROR)
                    .select("source", "kind", "error").collect()]
        worker_problems = sorted({(r["source"], r["error"]) for r in err_rows})
        if worker_problems and not opts.keep_going:
            raise work.InputError(worker_problems)
        problems = problems + worker_problems
        say(f"decoded {counts.get(RTYPE_FRAME, 0)} frames on {counts.get(RTYPE_CONN, 0)} connections "
            f"in {timings['decode_s']:.1f} s")

        t3 = time.perf_counter()
        ticker.label = "KIP-858 checks"
        events = decoded.filter(F.col("rtype") == RTYPE_EVENT).select("capture_set", "ts_ns", "event")
        findings = events.groupBy("capture_set").applyInArrow(_check_group, _FINDING_DDL)
        ticker.label = "statistics"
        tables = _aggregate(decoded, findings)
        frames = decoded.filter(F.col("rtype") == RTYPE_FRAME)
        collected: dict[str, list[dict[str, Any]]] = {}
        pending = list(tables.items())
        while pending:
            name, df = pending.pop(0)
            say(f"writing {name}")
            collected[name] = _write_table(spark, df, out, name)
            if name == "overall" and collected[name] and collected[name][0].get("first_ts") is not None:
                o = collected[name][0]
                pending.append(("timeline", _timeline(frames, o["first_ts"], o["last_ts"])))
        if opts.write_frames:
            ticker.label = "writing frames"
            say("writing frames")
            (frames.drop("rtype", "event", "client_source", "gap_bytes", "retransmitted_bytes")
             .write.mode("overwrite").parquet(str(out / "frames")))
        timings["stats_s"] = time.perf_counter() - t3
    finally:
        ticker.stop_event.set()
        if decoded is not None:
            decoded.unpersist()
    timings["total_s"] = time.perf_counter() - t0
    inputs_rows = []
    for r in file_rows:
        info = json.loads(r["event"] or "{}")
        inputs_rows.append({"source": r["source"], "size": r["size"], **info})
    collected["inputs"] = sorted(inputs_rows, key=lambda r: (r["source"], r.get("bucket", 0)))
    collected["problems"] = [{"source": p, "problem": why} for p, why in problems]
    manifest = {
        "inputs": list(inputs), "files": len(files), "bytes": total, "tasks": len(tasks),
        "decode_path": opts.decode_path, "split_bytes": opts.split_bytes, "master": spark.conf.get("spark.master"),
        "spark_version": spark.version, "python": sys.version.split()[0], "timings": timings,
        "counts": counts, "problems": collected["problems"],
    }
    (out / "run_manifest.json").write_text(json.dumps(manifest, indent=2, default=str), encoding="utf-8")
    for name in ("inputs", "problems"):
        _write_small_parquet(out / name, collected[name])
    result = StatsResult(out, collected, timings, len(tasks), len(files), problems)
    if opts.report:
        from kraft_jbod.analytics import report

        result.summary = report.write_report(out, collected, manifest)
    return result


def _write_table(spark: Any, df: Any, out: Path, name: str) -> list[dict[str, Any]]:
    """Write one small table as a single Parquet file and return its rows (read back
    with pyarrow: no second Spark job)."""
    import pyarrow.parquet as pq

    target = out / name
    if target.exists():
        shutil.rmtree(target)
    df.coalesce(1).write.mode("overwrite").parquet(str(target))
    rows: list[dict[str, Any]] = pq.read_table(str(target)).to_pylist()
    return rows


def _write_small_parquet(target: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    table = pa.Table.from_pylist(rows) if rows else pa.table({"source": pa.array([], pa.string())})
    pq.write_table(table, target / "part-0.parquet")
