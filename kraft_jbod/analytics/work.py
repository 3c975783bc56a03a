"""Inputs to tasks, and one task to rows: the unit of work every engine runs.

Strategy: the driver expands the inputs (files, folders, globs; local paths or any URI
``pyarrow.fs`` opens: ``s3://``, ``gs://``, ``hdfs://``) and checks each file's magic
number before anything starts, so a wrong file fails in a second with its name. A file
becomes one task, or, when larger than ``split_bytes``, ``k`` tasks that each read the
whole file but decode only the TCP connections whose endpoint pair hashes to their
bucket (:class:`~kraft_jbod.capture.pipeline.Bucket`). Splitting by connection keeps
every connection whole inside one task, so no frame is lost or paired across tasks; the
price is that each of the ``k`` tasks reads every record of the file (other buckets'
packets are skipped cheaply by the pipeline), so ``k`` stays at most one per core.

:func:`run_task` runs the one capture pipeline that ``kraft-jbod decode`` runs
(:class:`~kraft_jbod.capture.pipeline.CapturePipeline`, with the task's bucket) into a
``KafkaDecoder`` and yields :mod:`.rows` rows: one per frame, one per connection, one
per KIP-858 event, then one ``file`` row with the task's counters. Rules:

1. It never raises. An unreadable or malformed file, a file cut short, or a bug becomes
   an ``error`` row naming the file; the job decides whether that ends the run. A file
   damaged mid-way still gives the frames and connection rows read before the damage
   (the open connections are flushed), so with ``--keep-going`` the connections table
   agrees with the frame counts.
2. The rows of one task come out in capture order per connection.
3. Memory is bounded by the open connections (the capture layer's guarantee), one
   entry per connection seen for its ApiVersions facts, and the decode budget's frame
   limits (records fields past it stay undecoded with an anomaly).
"""

from __future__ import annotations

import fnmatch
import glob
import os
import re
import resource
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Final

from kraft_jbod.analytics import rows as R
from kraft_jbod.analytics.kip858 import Event, EventCollector
from kraft_jbod.capture.budget import DEFAULT_LIMITS, DecodeLimits
from kraft_jbod.capture.kafka import DecodedFrame, KafkaDecoder, is_request
from kraft_jbod.capture.pipeline import Bucket, CapturePipeline, bucket_of
from kraft_jbod.capture.streams import FlowEnd, Frame
from kraft_jbod.errors import DecodeError, KraftJbodError
from kraft_jbod.messages.api_keys import ApiKey

__all__ = [
    "CAPTURE_SUFFIXES",
    "DEFAULT_SPLIT_BYTES",
    "InputError",
    "InputFile",
    "Task",
    "Unit",
    "bucket_of",
    "expand_inputs",
    "open_input",
    "plan",
    "precheck",
    "run_task",
    "run_unit",
]

#: Files taken from folders (explicit files and globs may have any name).
CAPTURE_SUFFIXES: Final = (".pcap", ".pcapng", ".cap", ".pcapng.tmp")
DEFAULT_SPLIT_BYTES: Final = 128 << 20
MAX_BUCKETS: Final = 64
_MAGICS: Final = {
    bytes.fromhex("d4c3b2a1"),
    bytes.fromhex("a1b2c3d4"),  # pcap, microseconds
    bytes.fromhex("4d3cb2a1"),
    bytes.fromhex("a1b23c4d"),  # pcap, nanoseconds
    bytes.fromhex("0a0d0d0a"),  # pcapng section header block
}
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_GLOB = re.compile(r"[*?\[]")


class InputError(KraftJbodError):
    """Inputs that cannot be processed; ``problems`` lists ``(path, reason)``."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems = list(problems)
        lines = [f"{path}: {reason}" for path, reason in self.problems[:20]]
        if len(self.problems) > 20:
            lines.append(f"... and {len(self.problems) - 20} more")
        super().__init__("bad input:\n  " + "\n  ".join(lines))


@dataclass(frozen=True, slots=True)
class InputFile:
    """One capture file: a local path or a URI, and its size in bytes."""

    path: str
    size: int


@dataclass(frozen=True, slots=True)
class Unit:
    """Decode the connections of ``path`` whose bucket (of ``buckets``) is ``bucket``."""

    path: str
    size: int
    bucket: int
    buckets: int

    @property
    def cost(self) -> float:
        return self.size / self.buckets


@dataclass(frozen=True, slots=True)
class Task:
    """One unit of parallel work: one or more :class:`Unit` run one after the other
    (small files are packed together, so a thousand tiny captures are not a thousand
    Spark tasks)."""

    task_id: int
    units: tuple[Unit, ...]

    @property
    def cost(self) -> float:
        return sum(u.cost for u in self.units)

    def as_tuple(self) -> tuple[int, tuple[tuple[str, int, int, int], ...]]:
        return (self.task_id, tuple((u.path, u.size, u.bucket, u.buckets) for u in self.units))

    @classmethod
    def from_tuple(cls, t: tuple[int, tuple[tuple[str, int, int, int], ...]]) -> Task:
        return cls(t[0], tuple(Unit(*u) for u in t[1]))


# --------------------------------------------------------------------------- inputs


def _is_uri(text: str) -> bool:
    return bool(_URI.match(text)) and not text.startswith("file://")


def _wanted(name: str) -> bool:
    return name.lower().endswith(CAPTURE_SUFFIXES)


def expand_inputs(inputs: Sequence[str]) -> list[InputFile]:
    """Files named by ``inputs``, in a stable order, each once.

    Raises:
        InputError: an input does not exist, or a folder or glob holds no capture file.
    """
    found: dict[str, InputFile] = {}
    problems: list[tuple[str, str]] = []
    if not inputs:
        raise InputError([("(none)", "no INPUT given")])
    for text in inputs:
        if _is_uri(text):
            files = _expand_uri(text, problems)
        else:
            files = _expand_local(text[7:] if text.startswith("file://") else text, problems)
        for f in files:
            found.setdefault(f.path, f)
    if problems:
        raise InputError(problems)
    return list(found.values())


def _expand_local(text: str, problems: list[tuple[str, str]]) -> list[InputFile]:
    if _GLOB.search(text):
        names = sorted(p for p in glob.glob(text, recursive=True) if os.path.isfile(p))
        if not names:
            problems.append((text, "the pattern matches no file"))
        return [InputFile(p, os.path.getsize(p)) for p in names]
    if os.path.isdir(text):
        out: list[str] = []
        for root, dirs, files in os.walk(text):
            dirs.sort()
            out.extend(os.path.join(root, n) for n in sorted(files) if _wanted(n))
        if not out:
            problems.append((text, "the folder holds no capture file (" + ", ".join(CAPTURE_SUFFIXES[:3]) + ")"))
        return [InputFile(p, os.path.getsize(p)) for p in out]
    if not os.path.exists(text):
        problems.append((text, "no such file or folder"))
        return []
    try:
        return [InputFile(text, os.path.getsize(text))]
    except OSError as exc:
        problems.append((text, f"cannot read: {exc.strerror}"))
        return []


#: URI schemes the workers can read (through ``pyarrow.fs``): the pyarrow class that
#: serves each, and what it needs from the machine.
_SCHEMES: Final = {
    "s3": ("S3FileSystem", "AWS credentials (AWS_* variables, ~/.aws or an instance role)"),
    "gs": (
        "GcsFileSystem",
        "Google credentials (GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`)",
    ),
    "gcs": (
        "GcsFileSystem",
        "Google credentials (GOOGLE_APPLICATION_CREDENTIALS or `gcloud auth application-default login`)",
    ),
    "hdfs": (
        "HadoopFileSystem",
        "libhdfs: HADOOP_HOME (or ARROW_LIBHDFS_DIR) and CLASSPATH=$(hadoop classpath --glob)",
    ),
    "viewfs": (
        "HadoopFileSystem",
        "libhdfs: HADOOP_HOME (or ARROW_LIBHDFS_DIR) and CLASSPATH=$(hadoop classpath --glob)",
    ),
    "abfs": ("AzureFileSystem", "Azure credentials"),
    "abfss": ("AzureFileSystem", "Azure credentials"),
}
#: Seconds the driver waits for a remote filesystem to list an input.
LIST_TIMEOUT_S: Final = float(os.environ.get("KRAFT_JBOD_LIST_TIMEOUT", "30"))


def connector_problem(scheme: str) -> str | None:
    """Why inputs of ``scheme`` cannot be read on this machine, found without network
    access (so a missing connector fails at once instead of hanging); None when they
    might be."""
    entry = _SCHEMES.get(scheme.lower())
    if entry is None:
        known = ", ".join(f"{k}://" for k in _SCHEMES)
        return f"no connector for {scheme}:// (the workers read {known} through pyarrow.fs)"
    cls_name, needs = entry
    try:
        from pyarrow import fs as pafs
    except ImportError:
        return "reading URIs needs pyarrow (pip install 'kraft-jbod[spark]')"
    if getattr(pafs, cls_name, None) is None:
        return f"this pyarrow build has no {cls_name}: the {scheme}:// connector is missing"
    env = os.environ
    if cls_name == "GcsFileSystem":
        adc = os.path.join(os.path.expanduser("~"), ".config", "gcloud", "application_default_credentials.json")
        if not (env.get("GOOGLE_APPLICATION_CREDENTIALS") or os.path.exists(adc) or env.get("GCE_METADATA_HOST")):
            return (
                f"{scheme}:// needs {needs}; none is set up, and pyarrow's GCS connector would wait "
                "for a metadata server instead of failing"
            )
    if cls_name == "HadoopFileSystem" and not (env.get("HADOOP_HOME") or env.get("ARROW_LIBHDFS_DIR")):
        return f"{scheme}:// needs {needs}; HADOOP_HOME is not set"
    return None


def _with_deadline(fn: Any, seconds: float) -> Any:
    """``fn()`` in a daemon thread; TimeoutError when it takes longer than ``seconds``."""
    import threading

    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, daemon=True, name="kraft-jbod-list")
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise TimeoutError(f"no answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _expand_uri(text: str, problems: list[tuple[str, str]]) -> list[InputFile]:
    scheme = text.split("://", 1)[0]
    why = connector_problem(scheme)
    if why is not None:
        problems.append((text, why))
        return []
    try:
        out = _with_deadline(lambda: _list_uri(text, scheme, problems), LIST_TIMEOUT_S)
    except TimeoutError as exc:
        problems.append((text, f"cannot list: {exc} (network, endpoint or {_SCHEMES[scheme.lower()][1]}?)"))
        return []
    result: list[InputFile] = out
    return result


def _list_uri(text: str, scheme: str, problems: list[tuple[str, str]]) -> list[InputFile]:
    from pyarrow import fs as pafs

    pattern: str | None = None
    base = text
    if _GLOB.search(text.split("://", 1)[1]):
        base, pattern = text.rsplit("/", 1)
    try:
        filesystem, path = pafs.FileSystem.from_uri(base)
        info = filesystem.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            problems.append((text, "no such file or folder"))
            return []
        if info.type == pafs.FileType.File and pattern is None:
            return [InputFile(text, int(info.size or 0))]
        infos = filesystem.get_file_info(pafs.FileSelector(path, recursive=pattern is None))
    except (OSError, ValueError) as exc:
        problems.append((text, f"cannot list: {exc}"))
        return []
    out = []
    for i in sorted(infos, key=lambda i: i.path):
        if i.type != pafs.FileType.File:
            continue
        name = i.path.rsplit("/", 1)[-1]
        if (pattern is not None and fnmatch.fnmatch(name, pattern)) or (pattern is None and _wanted(name)):
            out.append(
                InputFile(
                    f"{scheme}://{i.path.lstrip('/')}" if scheme != "hdfs" else f"{base.split('://', 1)[0]}://{i.path}",
                    int(i.size or 0),
                )
            )
    if not out:
        problems.append((text, "matches no capture file"))
    return out


def open_input(path: str) -> BinaryIO:
    """Open a local path or URI for reading.

    Raises:
        OSError: the file cannot be opened.
    """
    if _is_uri(path):
        from pyarrow import fs as pafs

        filesystem, inner = pafs.FileSystem.from_uri(path)
        stream: BinaryIO = filesystem.open_input_stream(inner)
        return stream
    return open(path[7:] if path.startswith("file://") else path, "rb")


def precheck(files: Sequence[InputFile]) -> list[tuple[str, str]]:
    """``(path, reason)`` for each file that is empty, unreadable or not pcap/pcapng."""
    problems = []
    for f in files:
        try:
            with open_input(f.path) as fh:
                head = fh.read(4)
        except OSError as exc:
            problems.append((f.path, f"cannot read: {exc.strerror or exc}"))
            continue
        if not head:
            problems.append((f.path, "empty file"))
        elif len(head) < 4 or bytes(head) not in _MAGICS:
            problems.append((f.path, f"not a pcap or pcapng file (starts with {bytes(head).hex()})"))
    return problems


def plan(
    files: Sequence[InputFile],
    *,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    parallelism: int = 1,
    max_buckets: int = MAX_BUCKETS,
    buckets_per_core: int = 1,
) -> list[Task]:
    """Tasks for ``files``, the most expensive first (Spark starts partitions in order).

    A file larger than ``split_bytes`` is cut into connection buckets: as many as it has
    ``split_bytes`` pieces, but never more than ``buckets_per_core * parallelism``. Every
    bucket reads the whole file (skipping the other buckets' packets cheaply), so more
    buckets than cores only add reading: measured, 2 buckets cost +4 % CPU over 1, 4
    buckets +21 %. With one core a file is never split. Units are then packed into tasks
    (largest first, each to the lightest task): as many tasks
    as it takes to keep each near ``split_bytes``, and at least ``2 * parallelism`` when
    there are that many units, for balance.
    """
    par = max(1, parallelism)
    units: list[Unit] = []
    for f in files:
        k = 1
        if 0 < split_bytes < f.size:
            k = min(max_buckets, -(-f.size // split_bytes), max(1, buckets_per_core) * par)
        units.extend(Unit(f.path, f.size, b, k) for b in range(k))
    if not units:
        return []
    units.sort(key=lambda u: (-u.cost, u.path, u.bucket))
    total = sum(u.cost for u in units)
    n = max(-(-int(total) // max(1, split_bytes)) if split_bytes > 0 else len(units), 2 * par)
    n = min(len(units), n)
    bins: list[list[Unit]] = [[] for _ in range(n)]
    loads = [0.0] * n
    for u in units:
        i = min(range(n), key=lambda j: (loads[j], j))
        bins[i].append(u)
        loads[i] += u.cost
    order = sorted(range(n), key=lambda j: -loads[j])
    return [Task(tid, tuple(bins[j])) for tid, j in enumerate(order)]


# --------------------------------------------------------------------------- one task


class _ConnFacts:
    __slots__ = ("ranges", "software")

    def __init__(self) -> None:
        self.software: tuple[str | None, str | None] = (None, None)
        self.ranges: dict[int, tuple[int, int]] | None = None


class _TaskRun:
    def __init__(
        self,
        unit: Unit,
        task_id: int,
        ports: Sequence[int] | None,
        check_canonical: bool,
        limits: DecodeLimits = DEFAULT_LIMITS,
    ) -> None:
        self.unit = unit
        self.task_id = task_id
        self.source = unit.path
        self.ports = ports
        self.decoder = KafkaDecoder(check_canonical=check_canonical, limits=limits)
        self.events = EventCollector()
        self.conns: dict[str, _ConnFacts] = {}
        self.frames = 0
        self.packets = 0

    def _facts(self, cid: str) -> _ConnFacts:
        c = self.conns.get(cid)
        if c is None:
            c = self.conns[cid] = _ConnFacts()
        return c

    def frame(self, f: DecodedFrame) -> Iterator[R.Row]:
        c = self._facts(f.connection_id)
        body = f.body
        if f.api_key == ApiKey.API_VERSIONS and body is not None:
            if f.kind == "request":
                name = getattr(body, "client_software_name", None)
                if name:
                    c.software = (name, getattr(body, "client_software_version", None))
            elif getattr(body, "error_code", 1) == 0:
                c.ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        negotiated = None
        if c.ranges is not None and f.api_key is not None and f.kind == "request":
            negotiated = c.ranges.get(f.api_key, (-1, -1))
        self.frames += 1
        yield R.frame_row(f, self.source, self.task_id, software=c.software, negotiated=negotiated)
        for ev in self.events.feed(f):
            yield self._event(ev)

    def _event(self, ev: Event) -> R.Row:
        row = R.blank(R.RTYPE_EVENT, self.source, self.task_id)
        row.conn_id = ev.conn
        row.ts_ns = ev.ts
        row.detail = ev
        return row

    def flow_end(self, end: FlowEnd) -> R.Row:
        fl = end.flow
        c = self.conns.pop(fl.connection_id, None) or _ConnFacts()
        row = R.blank(R.RTYPE_CONN, self.source, self.task_id)
        row.conn_id = fl.connection_id
        row.ts_ns = fl.first_timestamp_ns
        row.latency_ns = fl.last_timestamp_ns - fl.first_timestamp_ns
        row.software_name, row.software_version = c.software
        row.client_source = fl.client_source
        row.gap_bytes = fl.gap_bytes
        row.retransmitted_bytes = fl.retransmitted_bytes
        row.anomaly_kinds = [R.anomaly_kind(a) for a in fl.anomalies]
        row.error = fl.close_reason or None
        return row

    def items(self, items: list[Frame | FlowEnd]) -> Iterator[R.Row]:
        feed = self.decoder.feed
        for item in items:
            for f in feed(item):
                yield from self.frame(f)
            if isinstance(item, FlowEnd):
                yield self.flow_end(item)
        self.decoder.flows.clear()

    def run(self) -> Iterator[R.Row]:
        unit = self.unit
        damage: list[DecodeError] = []
        with open_input(unit.path) as fh:
            pipe = CapturePipeline(
                fh,
                ports=self.ports,
                classifier=is_request,
                bucket=Bucket(unit.bucket, unit.buckets),
                on_malformed=damage.append,
            )
            try:
                batch: list[Frame | FlowEnd] = []
                for item in pipe.items():
                    batch.append(item)
                    if len(batch) >= 64 or isinstance(item, FlowEnd):
                        yield from self.items(batch)
                        batch = []
                yield from self.items(batch)
            finally:
                self.packets = pipe.packets
            for f in self.decoder.finish():
                yield from self.frame(f)
            for ev in self.events.finish():
                yield self._event(ev)
            if damage:
                row = R.blank(R.RTYPE_ERROR, self.source, self.task_id)
                row.kind = "malformed"
                row.error = f"not a readable capture: {damage[0]}; the {pipe.packets} packets before it were decoded"
                yield row
            if pipe.truncated_offset is not None:
                row = R.blank(R.RTYPE_ERROR, self.source, self.task_id)
                row.kind = "truncated"
                row.error = (
                    f"the capture ends inside a record at byte {pipe.truncated_offset} "
                    "(file cut short?); the packets before it were decoded"
                )
                yield row


def run_task(
    task: Task,
    *,
    ports: Sequence[int] | None = None,
    check_canonical: bool = True,
    limits: DecodeLimits = DEFAULT_LIMITS,
) -> Iterator[R.Row]:
    """All rows of one task, unit after unit; never raises (module docstring, rule 1)."""
    for unit in task.units:
        yield from run_unit(unit, task.task_id, ports=ports, check_canonical=check_canonical, limits=limits)


def run_unit(
    unit: Unit,
    task_id: int = 0,
    *,
    ports: Sequence[int] | None = None,
    check_canonical: bool = True,
    limits: DecodeLimits = DEFAULT_LIMITS,
) -> Iterator[R.Row]:
    """All rows of one unit, ending with its ``file`` row; never raises. ``limits`` is the
    decode budget (:mod:`kraft_jbod.capture.budget`; its file limits span the unit)."""
    started = time.perf_counter()
    cpu0 = time.process_time()
    run = _TaskRun(unit, task_id, ports, check_canonical, limits)

    def problem(kind: str, text: str) -> R.Row:
        row = R.blank(R.RTYPE_ERROR, unit.path, task_id)
        row.kind = kind
        row.error = text
        return row

    try:
        yield from run.run()
    except DecodeError as exc:
        yield problem("malformed", f"not a readable capture: {exc}")
    except OSError as exc:
        yield problem("unreadable", f"cannot read: {exc.strerror or exc}")
    except Exception as exc:
        yield problem("internal", f"internal error while decoding (please report): {type(exc).__name__}: {exc}")
    row = R.blank(R.RTYPE_FILE, unit.path, task_id)
    row.size = unit.size
    row.detail = R.FileStats(
        bucket=unit.bucket,
        buckets=unit.buckets,
        packets=run.packets,
        frames=run.frames,
        wall_s=round(time.perf_counter() - started, 3),
        cpu_s=round(time.process_time() - cpu0, 3),
        max_rss_kb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        pid=os.getpid(),
    )
    yield row
