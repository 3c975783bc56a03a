"""Mergeable partial aggregates: what a decode task sends back instead of one row per frame.

Strategy: a task folds its :mod:`.rows` rows into a :class:`Partial` as they are made
(counters per conformance key, error-code and version tallies, anomaly counts, latency
sketches, a time-bucketed timeline), keeps the few rows that are small by nature
(connections, KIP-858 events, input counters, problems), and ships the whole state as
one compact value. The driver merges the partials of every task and derives every
output table from the merged state in one pass (:func:`build_tables`), so the JVM moves
kilobytes per task whatever the number of frames.

Invariants:

* Pure: no pyspark, no pyarrow. :meth:`Partial.to_state` gives builtins only (dicts,
  lists, tuples, ints, floats, strings), and ``merge`` is associative and commutative
  for every statistic, so tasks may finish in any order.
* Counts, sums, minima, maxima and the log2 latency histogram are exact. Latency
  percentiles come from :class:`LatencySketch`, a fixed-log-bucket sketch (DDSketch
  style) whose estimates are within :data:`RELATIVE_ACCURACY` of a value of the data,
  clamped to the exact minimum and maximum.
* The timeline is kept in epoch-aligned buckets whose widths are a chain of multiples
  (:data:`TIMELINE_STEPS`), so coarsening a task's buckets to any later step, and
  merging tasks kept at different widths, loses nothing.
* Sums over no value are 0, not null (the SQL formulation gave null when, say, no
  frame was checked for re-encoding).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Final

from kraft_jbod.analytics import kip858
from kraft_jbod.analytics.rows import (
    RTYPE_CONN,
    RTYPE_ERROR,
    RTYPE_EVENT,
    RTYPE_FILE,
    RTYPE_FRAME,
    FileStats,
    Row,
)
from kraft_jbod.analytics.tables import (
    LATENCY_QUANTILES,
    TABLE_SCHEMAS,
    WRITER_COLUMNS,
    AnomalyRow,
    ConformanceRow,
    ConnectionRow,
    ErrorCodeRow,
    LatencyHistRow,
    LatencyRow,
    OverallRow,
    Tables,
    TimelineRow,
    VersionsRow,
    ViolationRow,
    latency_column,
)

__all__ = [
    "LATENCY_QUANTILES",
    "RELATIVE_ACCURACY",
    "TABLE_SCHEMAS",
    "TIMELINE_STEPS",
    "WRITER_COLUMNS",
    "Counters",
    "LatencySketch",
    "Partial",
    "VersionTally",
    "build_tables",
    "latency_column",
    "merge_all",
    "timeline_width",
]

RELATIVE_ACCURACY: Final = 0.005
_GAMMA: Final = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA: Final = math.log(_GAMMA)

#: Timeline bucket widths in ns; each divides the next, which keeps coarsening exact.
TIMELINE_STEPS: Final = (
    10**6,
    10**7,
    10**8,
    10**9,
    5 * 10**9,
    10 * 10**9,
    30 * 10**9,
    60 * 10**9,
    300 * 10**9,
    600 * 10**9,
    1800 * 10**9,
    3600 * 10**9,
    6 * 3600 * 10**9,
    86400 * 10**9,
)
#: A task coarsens its timeline when it holds more distinct time buckets than this.
_TIMELINE_CAP: Final = 4096
#: Points wanted on the final timeline (at most about this many buckets).
_TIMELINE_POINTS: Final = 120


@dataclass(slots=True)
class Counters:
    """The conformance counters of one (api_key, api_version, kind, software name,
    version) key, with the first and last frame time seen. The fields, in order, are
    the ``conformance`` table's count columns (:data:`COUNTERS` is read off them)."""

    frames: int = 0
    bytes: int = 0
    decoded: int = 0
    reencode_checked: int = 0
    reencode_exact: int = 0
    non_canonical: int = 0
    frames_unknown_tags: int = 0
    unknown_tags: int = 0
    frames_trailing: int = 0
    deprecated_frames: int = 0
    unstable_frames: int = 0
    error_frames: int = 0
    inferred_or_worse: int = 0
    truncated: int = 0
    first_ts: int | None = None
    last_ts: int | None = None

    def count(self, r: Row, erred: bool) -> None:
        """Count frame row ``r`` (``erred``: a response with a non-zero error code)."""
        self.frames += 1
        self.bytes += r.size or 0
        self.decoded += r.decoded is True
        if r.canonical is not None:
            self.reencode_checked += 1
            if r.canonical:
                self.reencode_exact += 1
            else:
                self.non_canonical += 1
        unknown = r.unknown_tags or 0
        if unknown > 0:
            self.frames_unknown_tags += 1
            self.unknown_tags += unknown
        self.frames_trailing += (r.trailing_bytes or 0) > 0
        self.deprecated_frames += r.deprecated is True
        self.unstable_frames += r.unstable is True
        self.error_frames += erred
        self.inferred_or_worse += r.confidence is not None and r.confidence not in _PAIRED
        self.truncated += r.complete is False
        ts = r.ts_ns
        if ts is not None:
            if self.first_ts is None or ts < self.first_ts:
                self.first_ts = ts
            if self.last_ts is None or ts > self.last_ts:
                self.last_ts = ts

    def add(self, o: Counters) -> None:
        """Add ``o``'s counts and widen the time span to cover ``o``'s."""
        for name in COUNTERS:
            setattr(self, name, getattr(self, name) + getattr(o, name))
        if o.first_ts is not None and (self.first_ts is None or o.first_ts < self.first_ts):
            self.first_ts = o.first_ts
        if o.last_ts is not None and (self.last_ts is None or o.last_ts > self.last_ts):
            self.last_ts = o.last_ts

    def to_state(self) -> list[int | None]:
        """The fields in order, builtins only (what a task ships)."""
        return [getattr(self, f.name) for f in fields(self)]

    @classmethod
    def from_state(cls, state: Sequence[int | None]) -> Counters:
        """Counters from :meth:`to_state`'s value.

        Raises:
            ValueError: ``state`` does not hold one value per field.
        """
        values: dict[str, Any] = dict(zip((f.name for f in fields(cls)), state, strict=True))
        return cls(**values)


#: The counter columns of the ``conformance`` and ``overall`` tables, in order.
COUNTERS: Final = tuple(f.name for f in fields(Counters) if f.name not in ("first_ts", "last_ts"))
_PAIRED: Final = frozenset(("header", "paired"))


@dataclass(slots=True)
class VersionTally:
    """Requests of one (software name, software version, api key): the versions used,
    the server's advertised range seen for them, and how many fell where. The fields
    after ``versions_used`` are the ``versions`` table's columns of the same names."""

    versions_used: set[int] = field(default_factory=set)
    max_used: int | None = None
    advertised_min: int | None = None
    advertised_max: int | None = None
    requests: int = 0
    outside_advertised: int = 0
    below_advertised_max: int = 0
    deprecated: int = 0
    unstable: int = 0

    def count(self, r: Row) -> None:
        """Count request row ``r`` against the range the server advertised for it."""
        ver, nmin, nmax = r.api_version, r.negotiated_min, r.negotiated_max
        if ver is not None:
            self.versions_used.add(ver)
            if self.max_used is None or ver > self.max_used:
                self.max_used = ver
        if nmin is not None and (self.advertised_min is None or nmin < self.advertised_min):
            self.advertised_min = nmin
        if nmax is not None and (self.advertised_max is None or nmax > self.advertised_max):
            self.advertised_max = nmax
        self.requests += 1
        if ver is not None and nmax is not None:
            self.outside_advertised += (nmin is not None and ver < nmin) or ver > nmax
            self.below_advertised_max += ver < nmax
        self.deprecated += r.deprecated is True
        self.unstable += r.unstable is True

    def add(self, o: VersionTally) -> None:
        """Add ``o``'s requests: union of versions, widest advertised range, summed counts."""
        self.versions_used |= o.versions_used
        if o.max_used is not None and (self.max_used is None or o.max_used > self.max_used):
            self.max_used = o.max_used
        if o.advertised_min is not None and (self.advertised_min is None or o.advertised_min < self.advertised_min):
            self.advertised_min = o.advertised_min
        if o.advertised_max is not None and (self.advertised_max is None or o.advertised_max > self.advertised_max):
            self.advertised_max = o.advertised_max
        self.requests += o.requests
        self.outside_advertised += o.outside_advertised
        self.below_advertised_max += o.below_advertised_max
        self.deprecated += o.deprecated
        self.unstable += o.unstable

    def to_state(self) -> list[Any]:
        """The fields in order, the version set as a sorted list (builtins only)."""
        return [sorted(self.versions_used), *(getattr(self, f.name) for f in fields(self)[1:])]

    @classmethod
    def from_state(cls, state: Sequence[Any]) -> VersionTally:
        """A tally from :meth:`to_state`'s value.

        Raises:
            ValueError: ``state`` does not hold one value per field.
        """
        values: dict[str, Any] = dict(zip((f.name for f in fields(cls)), state, strict=True))
        values["versions_used"] = set(values["versions_used"])
        return cls(**values)


ConfKey = tuple[Any, Any, Any, Any, Any]


def timeline_width(span_ns: int) -> int:
    """The smallest step giving at most about 120 buckets over ``span_ns``."""
    for s in TIMELINE_STEPS:
        if span_ns / s <= _TIMELINE_POINTS:
            return s
    return TIMELINE_STEPS[-1]


# --------------------------------------------------------------------------- latency sketch


class LatencySketch:
    """Latencies (ns) in logarithmic buckets of relative width ~1 %, plus exact count,
    sum, minimum and maximum; values <= 0 share one bucket. Mergeable."""

    __slots__ = ("buckets", "count", "hi", "lo", "total", "zeros")

    def __init__(self) -> None:
        self.buckets: dict[int, int] = {}
        self.zeros = 0
        self.count = 0
        self.total = 0
        self.lo: int | None = None
        self.hi: int | None = None

    def add(self, v: int) -> None:
        self.count += 1
        self.total += v
        if self.lo is None or v < self.lo:
            self.lo = v
        if self.hi is None or v > self.hi:
            self.hi = v
        if v <= 0:
            self.zeros += 1
            return
        i = math.ceil(math.log(v) / _LOG_GAMMA)
        self.buckets[i] = self.buckets.get(i, 0) + 1

    def merge(self, other: LatencySketch) -> None:
        for i, n in other.buckets.items():
            self.buckets[i] = self.buckets.get(i, 0) + n
        self.zeros += other.zeros
        self.count += other.count
        self.total += other.total
        if other.lo is not None and (self.lo is None or other.lo < self.lo):
            self.lo = other.lo
        if other.hi is not None and (self.hi is None or other.hi > self.hi):
            self.hi = other.hi

    def quantile(self, q: float) -> float | None:
        """An estimate of the value at rank ``ceil(q * count)``; None when empty."""
        if self.count == 0 or self.lo is None or self.hi is None:
            return None
        rank = max(1, math.ceil(q * self.count))
        seen = self.zeros
        if rank <= seen:
            return float(min(0, self.hi))
        for i in sorted(self.buckets):
            seen += self.buckets[i]
            if seen >= rank:
                est = 2 * _GAMMA**i / (_GAMMA + 1)
                return float(min(max(est, self.lo), self.hi))
        return float(self.hi)

    def to_state(self) -> tuple[Any, ...]:
        return (self.buckets, self.zeros, self.count, self.total, self.lo, self.hi)

    @classmethod
    def from_state(cls, state: Sequence[Any]) -> LatencySketch:
        s = cls()
        s.buckets, s.zeros, s.count, s.total, s.lo, s.hi = dict(state[0]), *state[1:]
        return s


# --------------------------------------------------------------------------- partial


class Partial:
    """The aggregate state of one or more tasks; see the module docstring."""

    def __init__(self) -> None:
        self.conf: dict[ConfKey, Counters] = {}
        self.latency: dict[ConfKey, LatencySketch] = {}
        self.latency_hist: dict[tuple[Any, int | None], int] = {}
        self.error_codes: dict[tuple[Any, Any, int, str], int] = {}
        self.versions: dict[tuple[Any, Any, Any], VersionTally] = {}
        self.anomalies: dict[tuple[str, str], list[Any]] = {}
        self.timeline: dict[tuple[int, Any], list[int]] = {}
        self.timeline_step = 0
        self.timeline_buckets: set[int] = set()
        self.connections = 0
        self.counts: dict[str, int] = {}
        self.conn_rows: list[dict[str, Any]] = []
        self.events: list[kip858.Event] = []
        self.files: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self._conn_ids: set[Any] = set()

    # ----------------------------------------------------------------- folding rows

    def add(self, row: Row) -> None:
        """Fold one :mod:`.rows` row in."""
        rtype = row.rtype
        self.counts[rtype] = self.counts.get(rtype, 0) + 1
        if rtype == RTYPE_FRAME:
            self._frame(row)
        elif rtype == RTYPE_CONN:
            self._anomalies(row)
            self.conn_rows.append(
                {
                    "source": row.source,
                    "conn_id": row.conn_id,
                    "first_ts": row.ts_ns,
                    "duration_s": None if row.latency_ns is None else row.latency_ns / 1e9,
                    "software_name": row.software_name,
                    "software_version": row.software_version,
                    "client_source": row.client_source,
                    "gap_bytes": row.gap_bytes,
                    "retransmitted_bytes": row.retransmitted_bytes,
                    "anomaly_kinds": row.anomaly_kinds,
                    "close_reason": row.error,
                }
            )
        elif rtype == RTYPE_EVENT:
            if isinstance(row.detail, kip858.EVENT_TYPES):
                self.events.append(row.detail)
        elif rtype == RTYPE_FILE:
            stats = asdict(row.detail) if isinstance(row.detail, FileStats) else {}
            self.files.append({"source": row.source, "size": row.size, **stats})
            # A unit ends with its file row: its connections are all counted by now.
            self.connections += len(self._conn_ids)
            self._conn_ids.clear()
        elif rtype == RTYPE_ERROR:
            self.errors.append({"source": row.source, "kind": row.kind, "error": row.error})

    def _frame(self, r: Row) -> None:
        key: ConfKey = (r.api_key, r.api_version, r.kind, r.software_name, r.software_version)
        c = self.conf.get(key)
        if c is None:
            c = self.conf[key] = Counters()
        # A response is an error response when any error code in it is non-zero: most
        # per-partition errors (CreateTopics, AssignReplicasToDirs, Produce) sit below the top.
        erred = bool(r.error_code) or bool(r.nested_error_codes)
        c.count(r, erred)
        self._conn_ids.add(r.conn_id)
        if r.latency_ns is not None:
            self._latency(key, r.latency_ns)
        self._error_codes(r)
        if r.kind == "request":
            vk = (r.software_name, r.software_version, r.api_key)
            v = self.versions.get(vk)
            if v is None:
                v = self.versions[vk] = VersionTally()
            v.count(r)
        kinds = r.anomaly_kinds
        if kinds:
            self._anomalies(r)
        if r.ts_ns is not None:
            self._tick(r.ts_ns, r.api_key, 1 if kinds else 0, 1 if erred else 0)

    def _latency(self, key: ConfKey, lat: int) -> None:
        sk = self.latency.get(key)
        if sk is None:
            sk = self.latency[key] = LatencySketch()
        sk.add(lat)
        x = lat / 1000 + 1
        hk = (key[0], math.floor(math.log2(x)) if x > 0 else None)
        self.latency_hist[hk] = self.latency_hist.get(hk, 0) + 1

    def _error_codes(self, r: Row) -> None:
        api, ver = r.api_key, r.api_version
        if r.error_code is not None:
            ek = (api, ver, r.error_code, "top")
            self.error_codes[ek] = self.error_codes.get(ek, 0) + 1
        for n in r.nested_error_codes or ():
            ek = (api, ver, n, "nested")
            self.error_codes[ek] = self.error_codes.get(ek, 0) + 1

    def _anomalies(self, r: Row) -> None:
        ts, conn = r.ts_ns, r.conn_id
        for kind in r.anomaly_kinds or ():
            k = (kind, r.rtype)
            a = self.anomalies.get(k)
            if a is None:
                self.anomalies[k] = [1, ts, conn]
                continue
            a[0] += 1
            if ts is not None and (a[1] is None or ts < a[1]):
                a[1], a[2] = ts, conn

    def _tick(self, ts: int, api: Any, anomalous: int, error: int) -> None:
        b = ts // TIMELINE_STEPS[self.timeline_step]
        t = self.timeline.get((b, api))
        if t is None:
            t = self.timeline[(b, api)] = [0, 0, 0]
            self.timeline_buckets.add(b)
            if len(self.timeline_buckets) > _TIMELINE_CAP and self.timeline_step + 1 < len(TIMELINE_STEPS):
                self._coarsen(self.timeline_step + 1)
                t = self.timeline[(ts // TIMELINE_STEPS[self.timeline_step], api)]
        t[0] += 1
        t[1] += anomalous
        t[2] += error

    def _coarsen(self, step: int) -> None:
        if step <= self.timeline_step:
            return
        factor = TIMELINE_STEPS[step] // TIMELINE_STEPS[self.timeline_step]
        merged: dict[tuple[int, Any], list[int]] = {}
        for (b, api), v in self.timeline.items():
            k = (b // factor, api)
            m = merged.get(k)
            if m is None:
                merged[k] = list(v)
            else:
                m[0] += v[0]
                m[1] += v[1]
                m[2] += v[2]
        self.timeline = merged
        self.timeline_step = step
        self.timeline_buckets = {b for b, _ in merged}

    # ----------------------------------------------------------------- merging

    def merge(self, o: Partial) -> None:
        """Add ``o``'s state to this one (``o`` is left as it was)."""
        for k, oc in o.conf.items():
            c = self.conf.get(k)
            if c is None:
                c = self.conf[k] = Counters()
            c.add(oc)
        for k, sk in o.latency.items():
            mine = self.latency.get(k)
            if mine is None:
                mine = self.latency[k] = LatencySketch()
            mine.merge(sk)
        for hk, n in o.latency_hist.items():
            self.latency_hist[hk] = self.latency_hist.get(hk, 0) + n
        for ek, n in o.error_codes.items():
            self.error_codes[ek] = self.error_codes.get(ek, 0) + n
        for vk, ov in o.versions.items():
            v = self.versions.get(vk)
            if v is None:
                v = self.versions[vk] = VersionTally()
            v.add(ov)
        for ak, oa in o.anomalies.items():
            a = self.anomalies.get(ak)
            if a is None:
                self.anomalies[ak] = list(oa)
                continue
            a[0] += oa[0]
            if oa[1] is not None and (a[1] is None or oa[1] < a[1]):
                a[1], a[2] = oa[1], oa[2]
        step = max(self.timeline_step, o.timeline_step)
        self._coarsen(step)
        factor = TIMELINE_STEPS[step] // TIMELINE_STEPS[o.timeline_step]
        for (b, api), ov2 in o.timeline.items():
            tk = (b // factor, api)
            t = self.timeline.get(tk)
            if t is None:
                self.timeline[tk] = list(ov2)
                self.timeline_buckets.add(tk[0])
            else:
                t[0] += ov2[0]
                t[1] += ov2[1]
                t[2] += ov2[2]
        self.connections += o.connections + len(o._conn_ids)
        for rt, n in o.counts.items():
            self.counts[rt] = self.counts.get(rt, 0) + n
        self.conn_rows.extend(o.conn_rows)
        self.events.extend(o.events)
        self.files.extend(o.files)
        self.errors.extend(o.errors)

    # ----------------------------------------------------------------- transport

    def to_state(self) -> dict[str, Any]:
        """Builtins only; :meth:`from_state` inverts it."""
        return {
            "conf": [(k, c.to_state()) for k, c in self.conf.items()],
            "latency": [(k, s.to_state()) for k, s in self.latency.items()],
            "latency_hist": list(self.latency_hist.items()),
            "error_codes": list(self.error_codes.items()),
            "versions": [(k, v.to_state()) for k, v in self.versions.items()],
            "anomalies": list(self.anomalies.items()),
            "timeline": list(self.timeline.items()),
            "timeline_step": self.timeline_step,
            "connections": self.connections + len(self._conn_ids),
            "counts": self.counts,
            "conn_rows": self.conn_rows,
            "events": [kip858.event_state(ev) for ev in self.events],
            "files": self.files,
            "errors": self.errors,
        }

    @classmethod
    def from_state(cls, st: dict[str, Any]) -> Partial:
        """A partial from :meth:`to_state`'s value.

        Raises:
            KeyError, TypeError, ValueError: the value is not such a state.
        """
        p = cls()
        p.conf = {tuple(k): Counters.from_state(v) for k, v in st["conf"]}
        p.latency = {tuple(k): LatencySketch.from_state(s) for k, s in st["latency"]}
        p.latency_hist = {tuple(k): n for k, n in st["latency_hist"]}
        p.error_codes = {tuple(k): n for k, n in st["error_codes"]}
        p.versions = {tuple(k): VersionTally.from_state(v) for k, v in st["versions"]}
        p.anomalies = {tuple(k): list(v) for k, v in st["anomalies"]}
        p.timeline = {tuple(k): list(v) for k, v in st["timeline"]}
        p.timeline_step = int(st["timeline_step"])
        p.timeline_buckets = {b for b, _ in p.timeline}
        p.connections = int(st["connections"])
        p.counts = dict(st["counts"])
        p.conn_rows = list(st["conn_rows"])
        p.events = [kip858.event_from_state(ev) for ev in st["events"]]
        p.files = list(st["files"])
        p.errors = list(st["errors"])
        return p


def merge_all(partials: Iterable[Partial]) -> Partial:
    """One partial holding all of ``partials`` (in the given order for the row lists)."""
    out = Partial()
    for p in partials:
        out.merge(p)
    return out


# --------------------------------------------------------------------------- tables


def _lat_cols(sk: LatencySketch | None) -> dict[str, Any]:
    """The latency columns (:class:`.tables.LatencyRow`'s) of a sketch, in milliseconds."""
    out: dict[str, Any] = {}
    for q in LATENCY_QUANTILES:
        v = sk.quantile(q) if sk is not None else None
        out[latency_column(q)] = None if v is None else v / 1e6
    has = sk is not None and sk.count > 0 and sk.hi is not None
    out["latency_max_ms"] = sk.hi / 1e6 if has and sk is not None and sk.hi is not None else None
    out["latency_mean_ms"] = sk.total / sk.count / 1e6 if has and sk is not None else None
    return out


def _measures(c: Counters, sk: LatencySketch | None) -> dict[str, Any]:
    """The measure columns of a conformance key (or of everything) as keyword arguments
    of :class:`.tables.ConformanceRow` and :class:`.tables.OverallRow`."""
    row: dict[str, Any] = {name: getattr(c, name) for name in COUNTERS}
    row["first_ts"], row["last_ts"] = c.first_ts, c.last_ts
    row.update(_lat_cols(sk))
    row["decode_rate"] = c.decoded / c.frames if c.frames else None
    row["reencode_rate"] = c.reencode_exact / c.reencode_checked if c.reencode_checked else None
    return row


def _sort_key(values: Sequence[Any]) -> tuple[Any, ...]:
    # Nulls first, like Spark's ascending order.
    return tuple((v is not None, v if v is not None else 0) for v in values)


def build_tables(p: Partial) -> Tables:
    """Every statistics table from a merged partial, as typed rows (:mod:`.tables`).

    Tables: ``conformance``, ``overall``, ``latency``, ``latency_hist``, ``error_codes``,
    ``versions``, ``anomalies``, ``connections``, ``violations``, ``timeline`` (see
    docs/spark.md for their grain); the driver adds ``inputs`` and ``problems``.
    """
    out = Tables()
    conformance = out.conformance
    total = Counters()
    all_lat = LatencySketch()
    per_version: dict[tuple[Any, Any], LatencySketch] = {}
    for k in sorted(p.conf, key=_sort_key):
        c = p.conf[k]
        sk = p.latency.get(k)
        api_key, api_version, kind, software_name, software_version = k
        conformance.append(
            ConformanceRow(
                api_key=api_key,
                api_version=api_version,
                kind=kind,
                software_name=software_name,
                software_version=software_version,
                **_measures(c, sk),
            )
        )
        total.add(c)
        if sk is not None:
            all_lat.merge(sk)
            pv = per_version.get((k[0], k[1]))
            if pv is None:
                pv = per_version[(k[0], k[1])] = LatencySketch()
            pv.merge(sk)
    overall = OverallRow(connections=p.connections, **_measures(total, all_lat if all_lat.count else None))
    if not p.conf:
        overall.first_ts = overall.last_ts = None
    out.overall = [overall]
    out.latency = [
        LatencyRow(api_key=k[0], api_version=k[1], responses=sk.count, **_lat_cols(sk))
        for k, sk in sorted(per_version.items(), key=lambda kv: _sort_key(kv[0]))
        if sk.count
    ]
    out.latency_hist = [
        LatencyHistRow(api_key=k[0], bucket=k[1], count=n)
        for k, n in sorted(p.latency_hist.items(), key=lambda kv: _sort_key(kv[0]))
    ]
    out.error_codes = [
        ErrorCodeRow(api_key=k[0], api_version=k[1], error_code=k[2], level=k[3], count=n)
        for k, n in sorted(p.error_codes.items(), key=lambda kv: _sort_key((kv[0][0], kv[0][1], kv[0][3], kv[0][2])))
    ]
    out.versions = [
        VersionsRow(
            software_name=k[0],
            software_version=k[1],
            api_key=k[2],
            versions_used=sorted(v.versions_used),
            max_used=v.max_used,
            advertised_min=v.advertised_min,
            advertised_max=v.advertised_max,
            requests=v.requests,
            outside_advertised=v.outside_advertised,
            below_advertised_max=v.below_advertised_max,
            deprecated=v.deprecated,
            unstable=v.unstable,
        )
        for k, v in sorted(p.versions.items(), key=lambda kv: _sort_key(kv[0]))
    ]
    out.anomalies = [
        AnomalyRow(anomaly=k[0], rtype=k[1], count=a[0], first_ts=a[1], example_conn=a[2])
        for k, a in sorted(p.anomalies.items(), key=lambda kv: (-kv[1][0], kv[0]))
    ]
    out.connections = [ConnectionRow(**r) for r in sorted(p.conn_rows, key=lambda r: (r["source"], r["conn_id"] or ""))]
    out.violations = [ViolationRow(**dataclasses.asdict(f)) for f in kip858.check_events(p.events)]
    out.timeline = _timeline_rows(p, overall.first_ts, overall.last_ts)
    return out


def _timeline_rows(p: Partial, first: int | None, last: int | None) -> list[TimelineRow]:
    if first is None or last is None or not p.timeline:
        return []
    want = TIMELINE_STEPS.index(timeline_width(max(1, last - first)))
    step = max(want, p.timeline_step)
    factor = TIMELINE_STEPS[step] // TIMELINE_STEPS[p.timeline_step]
    width = TIMELINE_STEPS[step]
    merged: dict[tuple[int, Any], list[int]] = {}
    for (b, api), v in p.timeline.items():
        k = (b // factor, api)
        m = merged.setdefault(k, [0, 0, 0])
        m[0] += v[0]
        m[1] += v[1]
        m[2] += v[2]
    return [
        TimelineRow(bucket_ts=b * width, api_key=api, frames=v[0], anomalous=v[1], errors=v[2], width_ns=width)
        for (b, api), v in sorted(merged.items(), key=lambda kv: _sort_key(kv[0]))
    ]
