"""Counters, gauges and timers with labels, rendered as Prometheus text or StatsD lines.

Invariants:

* A metric name is ``[a-zA-Z_:][a-zA-Z0-9_:]*`` and is registered once; registering the
  same name with another kind raises ``ValueError`` (a bug, not input).
* Counters only go up. Gauges are set, or computed at read time by a callback (so a
  scrape sees the controller state as it is, without bookkeeping on every change).
* Label values are escaped for the Prometheus text format (backslash, quote, newline);
  series are rendered in sorted order so the output of one state is always the same.
* Timers keep a count, a sum and fixed buckets (Prometheus histogram), in seconds.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

Labels = tuple[tuple[str, str], ...]
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
DEFAULT_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


def _labels(labels: Mapping[str, object] | None) -> Labels:
    if not labels:
        return ()
    for k in labels:
        if not _LABEL.fullmatch(k):
            raise ValueError(f"bad label name {k!r}")
    return tuple(sorted((k, str(v)) for k, v in labels.items()))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _render_labels(labels: Labels, extra: Labels = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}"


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


@dataclass
class _Metric:
    name: str
    help: str
    kind: str
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


@dataclass
class Counter(_Metric):
    values: dict[Labels, float] = field(default_factory=dict)

    def inc(self, n: float = 1, labels: Mapping[str, object] | None = None) -> None:
        if n < 0:
            raise ValueError("a counter only goes up")
        key = _labels(labels)
        with self.lock:
            self.values[key] = self.values.get(key, 0) + n

    def get(self, labels: Mapping[str, object] | None = None) -> float:
        return self.values.get(_labels(labels), 0)

    def series(self) -> Iterator[tuple[Labels, float]]:
        with self.lock:
            yield from sorted(self.values.items())


@dataclass
class Gauge(_Metric):
    values: dict[Labels, float] = field(default_factory=dict)
    callback: Callable[[], Mapping[Labels, float] | float] | None = None

    def set(self, v: float, labels: Mapping[str, object] | None = None) -> None:
        with self.lock:
            self.values[_labels(labels)] = v

    def get(self, labels: Mapping[str, object] | None = None) -> float:
        return dict(self.series()).get(_labels(labels), 0)

    def series(self) -> Iterator[tuple[Labels, float]]:
        if self.callback is not None:
            got = self.callback()
            if isinstance(got, int | float):
                yield (), float(got)
                return
            yield from sorted(got.items())
            return
        with self.lock:
            yield from sorted(self.values.items())


@dataclass
class Timer(_Metric):
    buckets: tuple[float, ...] = DEFAULT_BUCKETS
    counts: dict[Labels, list[int]] = field(default_factory=dict)
    sums: dict[Labels, float] = field(default_factory=dict)

    def observe(self, seconds: float, labels: Mapping[str, object] | None = None) -> None:
        key = _labels(labels)
        with self.lock:
            row = self.counts.setdefault(key, [0] * (len(self.buckets) + 1))
            for i, bound in enumerate(self.buckets):
                if seconds <= bound:
                    row[i] += 1
            row[-1] += 1
            self.sums[key] = self.sums.get(key, 0.0) + seconds

    def count(self, labels: Mapping[str, object] | None = None) -> int:
        row = self.counts.get(_labels(labels))
        return 0 if row is None else row[-1]


class Registry:
    """All metrics of one process (or one server)."""

    def __init__(self, prefix: str = "kraft_jbod_") -> None:
        self.prefix = prefix
        self._metrics: dict[str, _Metric] = {}
        self._lock = threading.Lock()
        # StatsD gets deltas of counters and timer observations since its last flush.
        self.timer_events: list[tuple[str, Labels, float]] = []

    def _get(self, name: str, kind: str, factory: Callable[[str], _Metric]) -> _Metric:
        full = self.prefix + name
        if not _NAME.fullmatch(full):
            raise ValueError(f"bad metric name {full!r}")
        with self._lock:
            m = self._metrics.get(full)
            if m is None:
                m = self._metrics[full] = factory(full)
            elif m.kind != kind:
                raise ValueError(f"{full} is a {m.kind}, not a {kind}")
            return m

    def counter(self, name: str, help: str = "") -> Counter:
        m = self._get(name, "counter", lambda full: Counter(full, help, "counter"))
        assert isinstance(m, Counter)
        return m

    def gauge(
        self, name: str, help: str = "", callback: Callable[[], Mapping[Labels, float] | float] | None = None
    ) -> Gauge:
        m = self._get(name, "gauge", lambda full: Gauge(full, help, "gauge"))
        assert isinstance(m, Gauge)
        if callback is not None:
            m.callback = callback
        return m

    def timer(self, name: str, help: str = "") -> Timer:
        m = self._get(name, "histogram", lambda full: Timer(full, help, "histogram"))
        assert isinstance(m, Timer)
        return m

    def observe(self, name: str, seconds: float, labels: Mapping[str, object] | None = None) -> None:
        t = self.timer(name)
        t.observe(seconds, labels)
        with self._lock:
            if len(self.timer_events) < 100_000:  # bounded if nobody drains it
                self.timer_events.append((t.name, _labels(labels), seconds))

    def metrics(self) -> list[_Metric]:
        with self._lock:
            return [self._metrics[k] for k in sorted(self._metrics)]

    # -- Prometheus text format 0.0.4

    def prometheus(self) -> str:
        out: list[str] = []
        for m in self.metrics():
            if m.help:
                out.append(f"# HELP {m.name} {m.help.replace(chr(92), chr(92) * 2).replace(chr(10), ' ')}")
            out.append(f"# TYPE {m.name} {m.kind}")
            if isinstance(m, Counter | Gauge):
                for labels, v in m.series():
                    out.append(f"{m.name}{_render_labels(labels)} {_fmt(v)}")
            elif isinstance(m, Timer):
                with m.lock:
                    rows = sorted(m.counts.items())
                    sums = dict(m.sums)
                for labels, row in rows:
                    for bound, c in zip(m.buckets, row, strict=False):
                        out.append(f"{m.name}_bucket{_render_labels(labels, (('le', _fmt(bound)),))} {c}")
                    out.append(f"{m.name}_bucket{_render_labels(labels, (('le', '+Inf'),))} {row[-1]}")
                    out.append(f"{m.name}_sum{_render_labels(labels)} {_fmt(sums.get(labels, 0.0))}")
                    out.append(f"{m.name}_count{_render_labels(labels)} {row[-1]}")
        return "\n".join(out) + "\n"


def statsd_name(name: str, labels: Labels, *, tags: bool) -> tuple[str, str]:
    """(metric name, DogStatsD tag suffix). Without tags, label values join the name."""
    if tags or not labels:
        suffix = "|#" + ",".join(f"{k}:{v}" for k, v in labels) if labels else ""
        return name, suffix
    clean = [re.sub(r"[^a-zA-Z0-9_\-]", "_", v) for _, v in labels]
    return name + "." + ".".join(clean), ""
