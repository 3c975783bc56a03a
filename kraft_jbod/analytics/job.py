"""The PySpark conformance job: capture files in, Parquet tables and a report out.

Strategy (measured in ``tools/bench/bench_stats.py``; see docs/spark.md):

* S0, driver: expand and pre-check the inputs (a wrong file fails before Spark starts),
  then plan tasks (:func:`.work.plan`: per file, and per connection bucket in big files).
* S1, decode and pre-aggregate: ``spark.range(n, numPartitions=n)`` gives each task its
  own partition and ``mapInArrow`` runs :func:`.work.run_unit` in a Python worker, which
  opens the file itself and folds every row into a :class:`.partials.Partial` as it is
  made. A task returns one small binary value per unit (the pickled partial state), so
  the JVM carries kilobytes per task, never one row per frame, and nothing is persisted.
  With ``write_frames`` the worker also writes its frames as one Parquet file of the
  ``frames`` table itself (pyarrow), again bypassing the JVM.
  Each task reports its frames so far in a status file (local masters), which the
  driver's progress line sums.
* S2, driver: the partials are collected and merged (associative, order-free); problem
  rows (a file cut short, a malformed file, a worker-side bug) end the job with
  :class:`.work.InputError` naming each file unless ``keep_going``; then every table,
  the KIP-858 replay (:func:`.kip858.check` over the collected events) included, comes
  out of the merged state in one pass (:func:`.partials.build_tables`) and is written
  with pyarrow as one Parquet file per table folder. No second Spark job runs.
* Embedded runs start the JVM with C1-only JIT and a class-data-sharing archive of
  Spark's classes (made by the first run, reused after; ``KRAFT_JBOD_SPARK_CDS=0`` turns
  it off), which halves to quarters the JVM's start-up CPU. The JVM writes the archive
  as it exits; :func:`release_jvm` (called by ``kraft-jbod stats`` and the demo) stops
  the JVM this process started and waits for that write, so it happens once, inside the
  command's own time, never in a JVM left running after the command returned. One
  archive per key (Java, Spark and class path); archives of other keys are pruned.

pyspark is imported only inside functions of this module, so importing the package or
``kraft-jbod --help`` never loads it.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pickle
import shutil
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kraft_jbod.analytics import partials as P
from kraft_jbod.analytics import ship, work
from kraft_jbod.analytics.rows import COLUMNS, RTYPE_CONN, RTYPE_FRAME, Row, api_name
from kraft_jbod.analytics.tables import InputRow, ProblemRow, TableRow, Tables
from kraft_jbod.capture.budget import DEFAULT_LIMITS, DecodeLimits
from kraft_jbod.errors import KraftJbodError
from kraft_jbod.messages.error_codes import ErrorCode

__all__ = [
    "FRAME_COLUMNS",
    "SparkJobError",
    "StatsOptions",
    "StatsResult",
    "arrow_schema",
    "build_session",
    "release_jvm",
    "run_stats",
    "unit_partial",
]

_FRAME_BATCH_ROWS: Final = 65536
_LOG4J: Final = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""
#: Row columns that the per-frame table leaves out (they belong to other row types).
_FRAME_DROPPED: Final = frozenset(("rtype", "client_source", "gap_bytes", "retransmitted_bytes"))
#: The per-frame table: the frame row's columns (time as an Arrow timestamp, the api's
#: name beside its key). It is partitioned by capture set in folders
#: ``frames/capture_set=NAME/`` (Hive style: pyarrow, pandas, Spark and DuckDB read
#: ``capture_set`` back as a column), so several runs can share one dataset root.
FRAME_COLUMNS: Final = tuple(
    item
    for n, t in COLUMNS
    if n not in _FRAME_DROPPED
    for item in (
        ((n, "timestamp"),) if n == "ts_ns" else ((n, t), ("api_name", "string")) if n == "api_key" else ((n, t),)
    )
)

Progress = Callable[[str], None]


class SparkJobError(KraftJbodError):
    """Spark did not start, or a Spark job failed; the message says why in a line or two
    (the executor's Python error when there is one), never a JVM stack trace."""


@dataclass(slots=True)
class StatsOptions:
    """What :func:`run_stats` does; defaults are the embedded local run."""

    master: str | None = None
    conf: dict[str, str] = field(default_factory=dict)
    ports: list[int] | None = None
    split_bytes: int = work.DEFAULT_SPLIT_BYTES
    keep_going: bool = False
    write_frames: bool = False
    check_canonical: bool = True
    capture_set: str = "default"
    report: bool = True
    ship_package: bool = True
    limits: DecodeLimits = DEFAULT_LIMITS
    """The decode budget of each task's file (:mod:`kraft_jbod.capture.budget`)."""
    release_jvm: bool = False
    """End the JVM when the run is over (:func:`release_jvm`), if this run started it."""


@dataclass(slots=True)
class StatsResult:
    """What a run produced: table rows (small tables only), timings and the summary."""

    out_dir: Path
    tables: Tables
    timings: dict[str, float]
    tasks: int
    files: int
    problems: list[tuple[str, str]]
    summary: str = ""


# --------------------------------------------------------------------------- table schemas


def _pa_type(t: str) -> Any:
    import pyarrow as pa

    simple = {
        "string": pa.string(),
        "bool": pa.bool_(),
        "int16": pa.int16(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "binary": pa.binary(),
        "timestamp": pa.timestamp("ns", tz="UTC"),
        "duration": pa.duration("ns"),
    }
    if t.startswith("list<"):
        return pa.list_(simple[t[5:-1]])
    return simple[t]


#: Column names and types of every table the driver writes (declared in
#: :mod:`.partials`, next to the code that fills them).
TABLE_SCHEMAS: Final = P.TABLE_SCHEMAS


def arrow_schema(columns: Sequence[tuple[str, str]]) -> Any:
    """The Arrow schema of ``(name, type)`` columns (the one place types become Arrow)."""
    import pyarrow as pa

    return pa.schema([(n, _pa_type(t)) for n, t in columns])


def _arrow_table(
    rows: Sequence[Row] | Sequence[TableRow], columns: Sequence[tuple[str, str]], capture_set: str | None = None
) -> Any:
    """Rows (typed table rows, :mod:`.tables`, or :class:`.rows.Row` objects) as an Arrow
    table of exactly ``columns``, read column by column off the rows' fields; the
    writer's columns are filled here: ``api_name`` from ``api_key``, ``error_name`` from
    ``error_code`` and ``capture_set`` from the argument."""
    import pyarrow as pa

    schema = arrow_schema(columns)
    arrays = [pa.array(_column_values(rows, n, capture_set), type=schema.field(n).type) for n, _ in columns]
    return pa.Table.from_arrays(arrays, schema=schema)


def _column_values(rows: Sequence[Row] | Sequence[TableRow], name: str, capture_set: str | None) -> list[Any]:
    if name == "api_name":
        keys = [getattr(r, "api_key") for r in rows]  # noqa: B009 (not every row class has it)
        return [None if k is None else api_name(k) for k in keys]
    if name == "error_name":
        codes = [getattr(r, "error_code") for r in rows]  # noqa: B009 (not every row class has it)
        return [None if c is None else ErrorCode.name_of(c) for c in codes]
    if name == "capture_set":
        return [capture_set] * len(rows)
    return [getattr(r, name) for r in rows]


# --------------------------------------------------------------------------- worker side
# Module-level so Spark pickles them by reference: executors import this module.


class _FrameWriter:
    """Frame rows of one unit into one Parquet file, written under a temporary name and
    renamed when complete (a retried task replaces its own file, never duplicates it)."""

    def __init__(self, folder: str, task_id: int, index: int, capture_set: str) -> None:
        self.path = os.path.join(folder, f"part-{task_id:05d}-{index:03d}.parquet")
        os.makedirs(folder, exist_ok=True)
        self.tmp = self.path + f".tmp-{os.getpid()}"
        self.capture_set = capture_set
        self.rows: list[Row] = []
        self.writer: Any = None

    def add(self, row: Row) -> None:
        self.rows.append(row)
        if len(self.rows) >= _FRAME_BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow.parquet as pq

        table = _arrow_table(self.rows, FRAME_COLUMNS)
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.tmp, table.schema)
        self.writer.write_table(table)
        self.rows = []

    def close(self) -> None:
        if self.rows or self.writer is None:
            self._flush()
        self.writer.close()
        os.replace(self.tmp, self.path)


class _Status:
    """A task's progress (frames so far) in a small file of the driver's status folder,
    replaced atomically about once a second; the driver's progress thread sums them.
    Used with local masters only (a cluster's executors share no folder with the driver).
    Never raises: progress is optional."""

    def __init__(self, folder: str | None, task_id: int, index: int) -> None:
        self.path = os.path.join(folder, f"t{task_id}-{index}") if folder else None
        self.next = time.monotonic() + 1.0

    def update(self, frames: int, force: bool = False) -> None:
        if self.path is None:
            return
        now = time.monotonic()
        if not force and now < self.next:
            return
        self.next = now + 1.0
        try:
            tmp = f"{self.path}.tmp"
            with open(tmp, "w", encoding="ascii") as fh:
                fh.write(str(frames))
            os.replace(tmp, self.path)
        except OSError:
            self.path = None


def unit_partial(
    unit: work.Unit,
    task_id: int,
    index: int = 0,
    *,
    ports: Sequence[int] | None = None,
    check_canonical: bool = True,
    frames_dir: str | None = None,
    capture_set: str = "default",
    status_dir: str | None = None,
    limits: DecodeLimits = DEFAULT_LIMITS,
) -> bytes:
    """Run one unit and return its pickled :class:`.partials.Partial` state; with
    ``frames_dir``, also write its frames there; with ``status_dir``, report frames so
    far there. Never raises: a failure of the aggregation or of the frame file becomes
    an ``internal`` problem of the unit."""
    part = P.Partial()
    writer = _FrameWriter(frames_dir, task_id, index, capture_set) if frames_dir else None
    status = _Status(status_dir, task_id, index)
    frames = 0
    try:
        for row in work.run_unit(unit, task_id, ports=ports, check_canonical=check_canonical, limits=limits):
            part.add(row)
            if row.rtype == RTYPE_FRAME:
                frames += 1
                if frames & 1023 == 0:
                    status.update(frames)
                if writer is not None:
                    writer.add(row)
        status.update(frames, force=True)
        if writer is not None:
            writer.close()
    except Exception as exc:  # a bug here must name the file, not kill the job
        part.errors.append(
            {
                "source": unit.path,
                "kind": "internal",
                "error": f"internal error while aggregating (please report): {type(exc).__name__}: {exc}",
            }
        )
    return pickle.dumps(part.to_state(), protocol=pickle.HIGHEST_PROTOCOL)


def _units(tid: int, tasks: tuple[Any, ...], opts: tuple[Any, ...]) -> Iterator[tuple[int, int, bytes]]:
    ports, canonical, frames_dir, capture_set, status_dir, limits = opts
    task = work.Task.from_tuple(tasks[tid])
    for i, unit in enumerate(task.units):
        yield (
            task.task_id,
            i,
            unit_partial(
                unit,
                task.task_id,
                i,
                ports=ports,
                check_canonical=canonical,
                frames_dir=frames_dir,
                capture_set=capture_set,
                status_dir=status_dir,
                limits=limits,
            ),
        )


_OUT_DDL: Final = "task int, unit int, payload binary"


def _arrow_tasks(batches: Iterator[Any], tasks: tuple[Any, ...], opts: tuple[Any, ...]) -> Iterator[Any]:
    import pyarrow as pa

    schema = pa.schema([("task", pa.int32()), ("unit", pa.int32()), ("payload", pa.binary())])
    for b in batches:
        for tid in b.column(0).to_pylist():
            for t, i, payload in _units(tid, tasks, opts):
                yield pa.RecordBatch.from_arrays(
                    [pa.array([t], pa.int32()), pa.array([i], pa.int32()), pa.array([payload], pa.binary())],
                    schema=schema,
                )


# --------------------------------------------------------------------------- session


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kraft-jbod"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cds_key(conf: dict[str, str]) -> str:
    """What a class-data archive depends on, hashed: the java binary (path, size, mtime),
    Spark's home and its jars (names and sizes: the class path), extra class-path
    settings, and pyspark's version. Any change gives a new archive name."""
    import pyspark

    java = (
        os.path.join(os.environ["JAVA_HOME"], "bin", "java")
        if os.environ.get("JAVA_HOME")
        else (shutil.which("java") or "java")
    )
    real = os.path.realpath(java)
    st = os.stat(real)
    home = os.path.realpath(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__))
    parts = [real, str(st.st_size), str(int(st.st_mtime)), home]
    jars = Path(home) / "jars"
    if jars.is_dir():
        parts.extend(f"{j.name}:{j.stat().st_size}" for j in sorted(jars.iterdir()))
    parts.extend(f"{k}={conf.get(k, '')}" for k in ("spark.driver.extraClassPath", "spark.jars", "spark.jars.packages"))
    return f"{pyspark.__version__}-{zlib.crc32(chr(10).join(parts).encode()):08x}"


# Archives of other keys kept besides the current one (a user switching between two Java
# or Spark installs keeps both warm); older ones, and any left unused this long, are removed.
_CDS_KEEP_OTHERS: Final = 1
_CDS_MAX_AGE_S: Final = 30 * 86400
# A partial dump (its writer's process gone) older than this is removed; younger ones may
# still be written by a JVM whose Python driver was killed.
_CDS_STALE_PARTIAL_S: Final = 600

# The dump the JVM started by this process will write at exit: (partial file, archive).
_PENDING_DUMP: tuple[Path, Path] | None = None


def _prune_cds(folder: Path, keep: Path) -> None:
    """Remove archives of other keys beyond the newest ``_CDS_KEEP_OTHERS`` (or unused for
    ``_CDS_MAX_AGE_S``) and partial dumps whose writer is gone; ``keep`` stays."""
    now = time.time()
    others: list[tuple[float, Path]] = []
    for f in folder.glob("spark-*.jsa*"):
        try:
            st = f.stat()
        except OSError:
            continue
        if f.suffix == ".jsa":
            if f != keep:
                others.append((st.st_mtime, f))
            continue
        pid_text = f.name.rsplit(".", 1)[1]
        mine = pid_text == str(os.getpid())
        if not mine and (not pid_text.isdigit() or not _pid_alive(int(pid_text))):
            if now - st.st_mtime > _CDS_STALE_PARTIAL_S:
                f.unlink(missing_ok=True)
    others.sort(reverse=True)
    for i, (mtime, f) in enumerate(others):
        if i >= _CDS_KEEP_OTHERS or now - mtime > _CDS_MAX_AGE_S:
            f.unlink(missing_ok=True)


class _Cds:
    """The class-data-sharing archive for one key: the JVM flags to use it (or to dump
    it at exit when missing), and, once the JVM is up, whether the JVM rejected it
    (another JDK or class path, a damaged file): a rejected archive is deleted so the
    next run dumps a fresh one.

    A dump goes to ``spark-KEY.jsa.PID`` (PID: this Python process, which waits for its
    JVM in :func:`release_jvm`) and is renamed to ``spark-KEY.jsa`` only once the JVM has
    exited, so a half-written archive is never used; while another live process's dump
    is pending this run neither dumps nor waits."""

    def __init__(self, conf: dict[str, str]) -> None:
        self.archive: Path | None = None
        self.log: Path | None = None
        self.flags: list[str] = []
        self.dump: tuple[Path, Path] | None = None
        if os.environ.get("KRAFT_JBOD_SPARK_CDS", "1") == "0":
            return
        try:
            self._plan(conf)
        except (OSError, ImportError, ValueError):
            self.flags = []

    def _plan(self, conf: dict[str, str]) -> None:
        key = _cds_key(conf)
        folder = _cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        archive = folder / f"spark-{key}.jsa"
        quiet = ["-Xlog:cds*=off:stdout"]
        _prune_cds(folder, archive)
        if not archive.exists():
            # A partial dump of a live process is that process's to finish; a dead one's
            # is never trusted (its JVM may still be writing it), only pruned when stale.
            busy = any(
                c.name.rsplit(".", 1)[1].isdigit() and _pid_alive(int(c.name.rsplit(".", 1)[1]))
                for c in folder.glob(f"spark-{key}.jsa.*")
            )
            if not busy:
                partial = folder / f"{archive.name}.{os.getpid()}"
                partial.unlink(missing_ok=True)
                self.flags = [f"-XX:ArchiveClassesAtExit={partial}", *quiet]
                self.dump = (partial, archive)
            return
        with contextlib.suppress(OSError):
            os.utime(archive)  # last use, for pruning
        self.archive = archive
        self.log = folder / f"cds-{os.getpid()}.log"
        self.log.unlink(missing_ok=True)
        self.flags = [f"-XX:SharedArchiveFile={archive}", *quiet, f"-Xlog:cds=info:file={self.log}"]

    def check(self) -> bool:
        """After the JVM started: True when it mapped the archive; False (and the archive
        deleted) when it rejected it. True when no archive was used."""
        if self.archive is None or self.log is None:
            return True
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        finally:
            self.log.unlink(missing_ok=True)
        # Only an explicit rejection drops the archive: a log that says nothing (not yet
        # written, or another JVM's wording) must not cost the next run a 150 MB dump.
        ok = "UseSharedSpaces:" not in text and "mismatch" not in text
        if not ok:
            self.drop()
        return ok

    def drop(self) -> None:
        if self.archive is not None:
            self.archive.unlink(missing_ok=True)


def build_session(master: str | None, conf: dict[str, str], app_name: str = "kraft-jbod stats") -> Any:
    """A SparkSession: local[*] unless ``master`` (or spark-submit) says otherwise, with
    small-job defaults that ``conf`` overrides.

    When this process starts the JVM (not under spark-submit), Spark's log goes through
    a quiet log4j configuration (errors only, on stderr), whatever the master. Embedded
    runs also get C1, the serial collector and the class-data archive (:class:`_Cds`);
    a JVM that dies on the archive is started again without it, the archive deleted.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    local = False
    own_jvm = "PYSPARK_GATEWAY_PORT" not in os.environ and "SPARK_REMOTE" not in os.environ
    if master is not None:
        builder = builder.master(master)
        local = ship.is_local_master(master)
    elif own_jvm:
        # Not under spark-submit (which starts the JVM first) nor Spark Connect: embedded.
        builder = builder.master("local[*]")
        local = True
    defaults = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "true",
    }
    cds: _Cds | None = None
    if own_jvm and "spark.driver.extraJavaOptions" not in conf:
        log4j = Path(tempfile.gettempdir()) / "kraft-jbod-spark-log4j2.properties"
        if not log4j.exists():
            log4j.write_text(_LOG4J, encoding="utf-8")
        flags = [f"-Dlog4j2.configurationFile=file:{log4j}"]
        if local:
            # The JVM only schedules tasks and moves kilobytes here: the C1 compiler and
            # the serial collector cost far less start-up CPU than C2 and G1.
            cds = _Cds(conf)
            flags += ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", *cds.flags]
        defaults["spark.driver.extraJavaOptions"] = " ".join(flags)
    if local:
        cores = os.cpu_count() or 2
        defaults.update(
            {
                "spark.sql.shuffle.partitions": str(max(2, 2 * cores)),
                "spark.ui.enabled": "false",
                "spark.driver.memory": "1g",
            }
        )
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if conf.get("spark.pyspark.python") and own_jvm:
        # A Python driver reads the executors' interpreter from PYSPARK_PYTHON only;
        # spark-submit maps the setting to it, a driver started from Python does not.
        os.environ["PYSPARK_PYTHON"] = conf["spark.pyspark.python"]
    settings = {**defaults, **conf}
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        spark = builder.getOrCreate()
    except Exception:
        if cds is None or cds.archive is None:
            raise
        cds.drop()  # a JVM can die on a damaged archive: start once more without it
        builder = builder.config(
            "spark.driver.extraJavaOptions",
            settings["spark.driver.extraJavaOptions"].split(" -XX:SharedArchiveFile=")[0],
        )
        spark = builder.getOrCreate()
    if cds is not None:
        cds.check()
        global _PENDING_DUMP
        _PENDING_DUMP = cds.dump
    try:
        spark.sparkContext.setLogLevel("ERROR")
    except Exception:
        pass
    return spark


def _jvm_running() -> bool:
    """Whether this process already talks to a JVM (pyspark imported and a gateway up)."""
    ctx = sys.modules.get("pyspark.core.context") or sys.modules.get("pyspark.context")
    sc = getattr(ctx, "SparkContext", None)
    return getattr(sc, "_gateway", None) is not None


def release_jvm(spark: Any, progress: Progress | None = None, timeout_s: float = 600.0) -> None:
    """Stop ``spark`` and, when this process started its JVM, end that JVM and wait for it.

    Where the JVM writes the class-data archive at exit (the first embedded run of a key),
    the wait includes that write (tens of seconds, said on ``progress``), which is then
    renamed into place: after this returns no JVM of ours is left running and the cache
    holds whole archives only. Safe to call under spark-submit or Spark Connect (it only
    stops the session there). Never raises for a JVM that is already gone.
    """
    global _PENDING_DUMP
    from pyspark import SparkContext

    with contextlib.suppress(Exception):
        spark.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:  # spark-submit or Connect: the JVM is not ours to end
        return
    dump, _PENDING_DUMP = _PENDING_DUMP, None
    if dump is not None and progress is not None:
        progress("writing Spark's class-data archive (first run with this Java and Spark only)")
    with contextlib.suppress(Exception):
        gateway.shutdown()  # type: ignore[union-attr]  # not None: it has a proc
    with contextlib.suppress(OSError):
        if proc.stdin is not None:
            proc.stdin.close()  # the gateway JVM exits on EOF of its stdin
    try:
        proc.wait(timeout=timeout_s)
    except Exception:
        proc.kill()
        proc.wait()
    SparkContext._gateway = None
    SparkContext._jvm = None
    if dump is not None:
        partial, archive = dump
        with contextlib.suppress(OSError):
            if partial.stat().st_size > 0 and proc.returncode == 0:
                os.replace(partial, archive)
            else:
                partial.unlink()


class _ProgressThread(threading.Thread):
    """Polls Spark's status tracker and reports stage progress while a job runs."""

    def __init__(self, spark: Any, report: Progress, status_dir: str | None = None, every: float = 1.0) -> None:
        super().__init__(daemon=True, name="kraft-jbod-progress")
        self.status_dir = status_dir
        self.report = report
        self.every = every
        self.stop_event = threading.Event()
        self.label = ""
        try:
            self.tracker = spark.sparkContext.statusTracker()
        except Exception:
            self.tracker = None

    def _frames(self) -> int:
        """Frames decoded so far, summed over the tasks' status files."""
        if self.status_dir is None:
            return 0
        total = 0
        try:
            for name in os.listdir(self.status_dir):
                if not name.endswith(".tmp"):
                    with open(os.path.join(self.status_dir, name), encoding="ascii") as fh:
                        total += int(fh.read() or 0)
        except (OSError, ValueError):
            pass
        return total

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
                        parts.append(
                            f"{info.numCompletedTasks}/{info.numTasks} tasks"
                            + (f" ({info.numActiveTasks} running)" if info.numActiveTasks else "")
                        )
            except Exception:
                return
            frames = self._frames()
            if frames and parts:
                parts.append(f"{frames:,} frames so far")
            text = f"{self.label}: " + ", ".join(parts) if parts else ""
            if text and text != last:
                self.report(text)
                last = text


# --------------------------------------------------------------------------- stages


def _decode(
    spark: Any, tasks: list[work.Task], opts: StatsOptions, frames_dir: str | None, status_dir: str | None
) -> Any:
    """The decode stage as a DataFrame of ``(task, unit, payload)``, one row per unit:
    ``mapInArrow`` over ``spark.range(n, numPartitions=n)`` (measured fastest of the
    mapInArrow, RDD and Arrow-UDF paths; runs unchanged under Spark Connect)."""
    n = len(tasks)
    specs = tuple(t.as_tuple() for t in tasks)
    wopts = (opts.ports, opts.check_canonical, frames_dir, opts.capture_set, status_dir, opts.limits)
    fn = functools.partial(_arrow_tasks, tasks=specs, opts=wopts)
    return spark.range(0, n, 1, n).mapInArrow(fn, _OUT_DDL)


def _load(payloads: list[tuple[int, int, bytes]]) -> P.Partial:
    parts = []
    for _t, _i, data in sorted(payloads, key=lambda x: (x[0], x[1])):
        parts.append(P.Partial.from_state(pickle.loads(bytes(data))))
    return P.merge_all(parts)


# --------------------------------------------------------------------------- the job


def run_stats(
    inputs: Sequence[str], out_dir: str | Path, opts: StatsOptions | None = None, progress: Progress | None = None
) -> StatsResult:
    """Run the whole job; see the module docstring.

    Raises:
        InputError: an input is missing, empty, not a capture, or (unless
            ``opts.keep_going``) a worker reported it cut short or malformed.
    """
    opts = opts or StatsOptions()
    say: Progress = progress or (lambda _text: None)
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
    # A JVM already running here (a caller's session) is the caller's: never ended by us.
    release = opts.release_jvm and not _jvm_running()
    try:
        spark = build_session(opts.master, opts.conf)
    except Exception as exc:  # Java missing, bad conf, unreachable master...
        raise SparkJobError("Spark did not start: " + ship.explain_failure(exc)) from exc
    timings["spark_start_s"] = time.perf_counter() - t1
    try:
        return _run_on(spark, inputs, out_dir, opts, say, files, problems, timings, t0)
    finally:
        if release:  # also after a failed run: no JVM this run started outlives the command
            release_jvm(spark, say)


def _run_on(
    spark: Any,
    inputs: Sequence[str],
    out_dir: str | Path,
    opts: StatsOptions,
    say: Progress,
    files: list[work.InputFile],
    problems: list[tuple[str, str]],
    timings: dict[str, float],
    t0: float,
) -> StatsResult:
    """The job on a running session: ship, plan, decode, merge, write (see run_stats)."""
    if opts.ship_package:
        try:
            shipped = ship.ship_package(spark, _cache_dir() / "ship")
        except Exception as exc:
            raise SparkJobError(f"cannot ship the kraft_jbod package to the executors: {exc}") from exc
        if shipped is not None:
            say(f"shipped {shipped.name} to the executors")
    try:
        parallelism = int(spark.sparkContext.defaultParallelism)
    except Exception:
        parallelism = int(spark.conf.get("spark.default.parallelism", "2"))
    tasks = work.plan(files, split_bytes=opts.split_bytes, parallelism=parallelism)
    total = sum(f.size for f in files)
    say(f"{len(files)} file(s), {total / 1e6:.1f} MB, {len(tasks)} task(s) on {parallelism} core(s)")

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    frames_dir: str | None = None
    if opts.write_frames:
        target = out / "frames"
        if target.exists():
            shutil.rmtree(target)
        frames_dir = str(target / f"capture_set={_partition_value(opts.capture_set)}")
    status_dir = (
        tempfile.mkdtemp(prefix="kraft-jbod-status-") if ship.is_local_master(spark.conf.get("spark.master")) else None
    )
    ticker = _ProgressThread(spark, say, status_dir)
    ticker.start()
    try:
        t2 = time.perf_counter()
        ticker.label = "decode"
        try:
            rows = _decode(spark, tasks, opts, frames_dir, status_dir).collect()
        except Exception as exc:
            raise SparkJobError("the decode job failed: " + ship.explain_failure(exc)) from exc
        timings["decode_s"] = time.perf_counter() - t2
        jvm = _jvm_cpu_s(spark)
        if jvm is not None:
            timings["jvm_cpu_s"] = jvm
    finally:
        ticker.stop_event.set()
        if status_dir is not None:
            shutil.rmtree(status_dir, ignore_errors=True)
    t3 = time.perf_counter()
    merged = _load([(r["task"], r["unit"], r["payload"]) for r in rows])
    counts = dict(merged.counts)
    worker_problems = sorted({(e["source"], e["error"]) for e in merged.errors})
    if worker_problems and not opts.keep_going:
        raise work.InputError(worker_problems)
    problems = problems + worker_problems
    say(
        f"decoded {counts.get(RTYPE_FRAME, 0)} frames on {counts.get(RTYPE_CONN, 0)} connections "
        f"in {timings['decode_s']:.1f} s"
    )
    collected = P.build_tables(merged)
    for name in TABLE_SCHEMAS:
        if name not in ("inputs", "problems"):
            _write_parquet(out / name, _arrow_table(collected.rows(name), TABLE_SCHEMAS[name], opts.capture_set))
    timings["stats_s"] = time.perf_counter() - t3
    timings["total_s"] = time.perf_counter() - t0
    timings["driver_cpu_s"] = time.process_time()
    collected.inputs = sorted((InputRow(**f) for f in merged.files), key=lambda r: (r.source, r.bucket))
    collected.problems = [ProblemRow(source=p, problem=why) for p, why in problems]
    manifest = {
        "inputs": list(inputs),
        "files": len(files),
        "bytes": total,
        "tasks": len(tasks),
        "split_bytes": opts.split_bytes,
        "master": spark.conf.get("spark.master"),
        "spark_version": spark.version,
        "python": sys.version.split()[0],
        "timings": timings,
        "counts": counts,
        "problems": [{"source": p, "problem": why} for p, why in problems],
        "frames_table": opts.write_frames,
        "latency_relative_accuracy": P.RELATIVE_ACCURACY,
    }
    (out / "run_manifest.json").write_text(json.dumps(manifest, indent=2, default=str), encoding="utf-8")
    for name in ("inputs", "problems"):
        _write_parquet(out / name, _arrow_table(collected.rows(name), TABLE_SCHEMAS[name], opts.capture_set))
    result = StatsResult(out, collected, timings, len(tasks), len(files), problems)
    if opts.report:
        from kraft_jbod.analytics import report

        result.summary = report.write_report(out, collected, manifest)
    return result


def _jvm_cpu_s(spark: Any) -> float | None:
    """CPU seconds the local driver JVM has used so far (Linux ``/proc``); None elsewhere."""
    try:
        pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except Exception:  # not local, not Linux, or Spark Connect: the figure is optional
        return None


def _write_parquet(target: Path, table: Any) -> None:
    """One table as one Parquet file in its own folder (readable as a Spark/pandas dataset)."""
    import pyarrow.parquet as pq

    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    pq.write_table(table, target / "part-0.parquet")


def _partition_value(text: str) -> str:
    """``text`` made safe as a Hive partition folder value (``/``, ``=`` and the like
    percent-encoded, as Spark writes them)."""
    from urllib.parse import quote

    return quote(text, safe=" -_.,:@+")
