"""Typed rows of the statistics tables, and the tables' schemas read off them.

Strategy: each output table has one row class here (a dataclass whose fields are its
columns, in order, each with its ``arrow`` type as :class:`.rows.Row` does), and
:data:`TABLE_SCHEMAS` is derived from these classes, so a table's rows, its Parquet
schema and the report cannot disagree on a column's name or type. Columns shared by
several tables (the conformance counters, the latency columns) are declared once, in
mixins.

Invariants:

* Pure: no pyspark, no pyarrow.
* Every table starts with ``capture_set``, which no row carries: the writer fills it from
  the run. ``api_name`` (beside ``api_key``) and ``error_name`` (beside ``error_code``)
  are fields left ``None`` by :func:`.partials.build_tables` and filled by the writer
  (:data:`WRITER_COLUMNS`).
* A column a row may lack is ``None`` by default; the fields that identify a row (its
  key) are required.
* The latency columns are named by :func:`latency_column` for each of
  :data:`LATENCY_QUANTILES`; a test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from kraft_jbod.analytics.rows import FileStats, column, columns

__all__ = [
    "LATENCY_QUANTILES",
    "TABLE_ROWS",
    "TABLE_SCHEMAS",
    "WRITER_COLUMNS",
    "AnomalyRow",
    "ConformanceRow",
    "ConnectionRow",
    "ErrorCodeRow",
    "InputRow",
    "LatencyHistRow",
    "LatencyRow",
    "OverallRow",
    "ProblemRow",
    "TableRow",
    "Tables",
    "TimelineRow",
    "VersionsRow",
    "ViolationRow",
    "latency_column",
]

LATENCY_QUANTILES: Final = (0.5, 0.9, 0.99, 0.999)

#: Columns the Parquet writer fills from other columns or from the run: ``capture_set``
#: (no row carries it), ``api_name`` from ``api_key``, ``error_name`` from ``error_code``.
WRITER_COLUMNS: Final = frozenset(("capture_set", "api_name", "error_name"))


def latency_column(q: float) -> str:
    """The column name of quantile ``q``: 0.5 -> ``latency_p50_ms``, 0.999 -> ``latency_p999_ms``."""
    return "latency_p" + f"{q * 100:.10g}".replace(".", "") + "_ms"


# Mixins: their fields come first in a row class that lists them last among its bases
# (a dataclass collects fields from the most basic class on).


@dataclass(kw_only=True)
class _LatencyColumns:
    """Latency of the responses, in milliseconds: quantiles from the sketch, exact max and mean."""

    latency_p50_ms: float | None = column("float64")
    latency_p90_ms: float | None = column("float64")
    latency_p99_ms: float | None = column("float64")
    latency_p999_ms: float | None = column("float64")
    latency_max_ms: float | None = column("float64")
    latency_mean_ms: float | None = column("float64")


@dataclass(kw_only=True)
class _Counts:
    """The conformance counters (:class:`.partials.Counters`) and the first and last
    frame times."""

    frames: int = column("int64", required=True)
    bytes: int = column("int64", required=True)
    decoded: int = column("int64", required=True)
    reencode_checked: int = column("int64", required=True)
    reencode_exact: int = column("int64", required=True)
    non_canonical: int = column("int64", required=True)
    frames_unknown_tags: int = column("int64", required=True)
    unknown_tags: int = column("int64", required=True)
    frames_trailing: int = column("int64", required=True)
    deprecated_frames: int = column("int64", required=True)
    unstable_frames: int = column("int64", required=True)
    error_frames: int = column("int64", required=True)
    inferred_or_worse: int = column("int64", required=True)
    truncated: int = column("int64", required=True)
    first_ts: int | None = column("timestamp")
    last_ts: int | None = column("timestamp")


@dataclass(kw_only=True)
class _Measures(_LatencyColumns, _Counts):
    """The measures of a conformance key (or of everything): counters, times, latency
    and the two rates (``None`` when nothing was counted)."""

    decode_rate: float | None = column("float64")
    reencode_rate: float | None = column("float64")


@dataclass(kw_only=True)
class _ConformanceKey:
    api_key: int | None = column("int16", required=True)
    api_name: str | None = column("string")
    api_version: int | None = column("int16", required=True)
    kind: str | None = column("string", required=True)
    software_name: str | None = column("string", required=True)
    software_version: str | None = column("string", required=True)


@dataclass(kw_only=True)
class ConformanceRow(_Measures, _ConformanceKey):
    """``conformance``: one (api, version, kind, client software) key and its measures."""


@dataclass(kw_only=True)
class OverallRow(_Measures):
    """``overall``: the measures of every frame, and the number of connections."""

    connections: int = column("int64", required=True)


@dataclass(kw_only=True)
class _LatencyKey:
    api_key: int | None = column("int16", required=True)
    api_name: str | None = column("string")
    api_version: int | None = column("int16", required=True)
    responses: int = column("int64", required=True)


@dataclass(kw_only=True)
class LatencyRow(_LatencyColumns, _LatencyKey):
    """``latency``: the latency of one api version's responses."""


@dataclass(kw_only=True)
class LatencyHistRow:
    """``latency_hist``: responses of one api per log2 latency bucket."""

    api_key: int | None = column("int16", required=True)
    api_name: str | None = column("string")
    bucket: int | None = column("int32", required=True)
    count: int = column("int64", required=True)


@dataclass(kw_only=True)
class ErrorCodeRow:
    """``error_codes``: how often a code was answered, per api version and level."""

    api_key: int | None = column("int16", required=True)
    api_name: str | None = column("string")
    api_version: int | None = column("int16", required=True)
    error_code: int = column("int16", required=True)
    error_name: str | None = column("string")
    level: str = column("string", required=True)
    count: int = column("int64", required=True)


@dataclass(kw_only=True)
class VersionsRow:
    """``versions``: the versions one client software used of one api, against those
    the server advertised."""

    software_name: str | None = column("string", required=True)
    software_version: str | None = column("string", required=True)
    api_key: int | None = column("int16", required=True)
    api_name: str | None = column("string")
    versions_used: list[int] = column("list<int16>", required=True)  # noqa: RUF009 (a field(), not a default)
    max_used: int | None = column("int16")
    advertised_min: int | None = column("int16")
    advertised_max: int | None = column("int16")
    requests: int = column("int64", required=True)
    outside_advertised: int = column("int64", required=True)
    below_advertised_max: int = column("int64", required=True)
    deprecated: int = column("int64", required=True)
    unstable: int = column("int64", required=True)


@dataclass(kw_only=True)
class AnomalyRow:
    """``anomalies``: one kind of anomaly on one row type, with its first sighting."""

    anomaly: str = column("string", required=True)
    rtype: str = column("string", required=True)
    count: int = column("int64", required=True)
    first_ts: int | None = column("timestamp")
    example_conn: str | None = column("string")


@dataclass(kw_only=True)
class ConnectionRow:
    """``connections``: one finished TCP connection."""

    source: str = column("string", required=True)
    conn_id: str | None = column("string", required=True)
    first_ts: int | None = column("timestamp")
    duration_s: float | None = column("float64")
    software_name: str | None = column("string")
    software_version: str | None = column("string")
    client_source: str | None = column("string")
    gap_bytes: int | None = column("int64")
    retransmitted_bytes: int | None = column("int64")
    anomaly_kinds: list[str] | None = column("list<string>")  # noqa: RUF009 (default None via field())
    close_reason: str | None = column("string")


@dataclass(kw_only=True)
class ViolationRow:
    """``violations``: one KIP-858 finding (:class:`.kip858.Finding`)."""

    rule: str = column("string", required=True)
    verdict: str = column("string", required=True)
    severity: str = column("string", required=True)
    broker: int | None = column("int32", required=True)
    subject: str = column("string", required=True)
    detail: str = column("string", required=True)
    first_ts: int = column("timestamp", required=True)
    last_ts: int = column("timestamp", required=True)
    count: int = column("int64", required=True)
    conn: str | None = column("string")


@dataclass(kw_only=True)
class TimelineRow:
    """``timeline``: the frames of one api in one time bucket."""

    bucket_ts: int = column("timestamp", required=True)
    api_key: int | None = column("int16", required=True)
    api_name: str | None = column("string")
    frames: int = column("int64", required=True)
    anomalous: int = column("int64", required=True)
    errors: int = column("int64", required=True)
    width_ns: int = column("duration", required=True)


@dataclass(frozen=True, kw_only=True)
class _Input:
    source: str = column("string", required=True)
    size: int | None = column("int64", required=True)


@dataclass(frozen=True, kw_only=True)
class InputRow(FileStats, _Input):
    """``inputs``: one unit of work (a file, or a bucket of one) and how its run went."""


@dataclass(kw_only=True)
class ProblemRow:
    """``problems``: an input that could not be read, and why."""

    source: str = column("string", required=True)
    problem: str = column("string", required=True)


TableRow = (
    ConformanceRow
    | OverallRow
    | LatencyRow
    | LatencyHistRow
    | ErrorCodeRow
    | VersionsRow
    | AnomalyRow
    | ConnectionRow
    | ViolationRow
    | TimelineRow
    | InputRow
    | ProblemRow
)

#: The row class of every table the driver writes, in output order.
TABLE_ROWS: Final[dict[str, type[TableRow]]] = {
    "conformance": ConformanceRow,
    "overall": OverallRow,
    "latency": LatencyRow,
    "latency_hist": LatencyHistRow,
    "error_codes": ErrorCodeRow,
    "versions": VersionsRow,
    "anomalies": AnomalyRow,
    "connections": ConnectionRow,
    "violations": ViolationRow,
    "timeline": TimelineRow,
    "inputs": InputRow,
    "problems": ProblemRow,
}

#: Column names and types of every table, in output order: ``capture_set`` then the row
#: class's fields. Types: "timestamp" is an Arrow timestamp (ns, UTC) filled from epoch
#: nanoseconds, "duration" an Arrow duration (ns). An empty table has the same schema.
TABLE_SCHEMAS: Final[dict[str, tuple[tuple[str, str], ...]]] = {
    name: (("capture_set", "string"), *columns(cls)) for name, cls in TABLE_ROWS.items()
}


@dataclass(slots=True)
class Tables:
    """Every table of a run, each as a list of its typed rows (empty when it has none)."""

    conformance: list[ConformanceRow] = field(default_factory=list)
    overall: list[OverallRow] = field(default_factory=list)
    latency: list[LatencyRow] = field(default_factory=list)
    latency_hist: list[LatencyHistRow] = field(default_factory=list)
    error_codes: list[ErrorCodeRow] = field(default_factory=list)
    versions: list[VersionsRow] = field(default_factory=list)
    anomalies: list[AnomalyRow] = field(default_factory=list)
    connections: list[ConnectionRow] = field(default_factory=list)
    violations: list[ViolationRow] = field(default_factory=list)
    timeline: list[TimelineRow] = field(default_factory=list)
    inputs: list[InputRow] = field(default_factory=list)
    problems: list[ProblemRow] = field(default_factory=list)

    def rows(self, name: str) -> Sequence[TableRow]:
        """The rows of table ``name`` (one of :data:`TABLE_ROWS`)."""
        if name not in TABLE_ROWS:
            raise KeyError(name)
        rows: Sequence[TableRow] = getattr(self, name)
        return rows
