"""Decoded frames to narrow conformance rows: the record every statistic is built from.

Strategy: one flat row per Kafka frame (numbers and short strings, never the frame's
bytes), one row per finished connection, one per controller-plane event and one per
task problem. All four share one column set, :class:`Row`, told apart by ``rtype``,
so an engine moves a single Arrow schema; columns a row type does not use are ``None``.

Invariants:

* Pure: no pyspark, no pyarrow; a row is a :class:`Row` whose fields are the columns
  (:func:`blank` starts one), and every value fits its column's type. :data:`COLUMNS`
  is read off the dataclass, so the Arrow schemas cannot drift from it. An event's or a
  file's particulars travel beside the columns as objects (``Row.detail``: a KIP-858
  event, a :class:`FileStats`), never as text to parse again.
* Building a row never raises for frame content: the decoder already caught what the
  bytes can do, and the walks here only read generated objects.
* Error codes are read from fields named ``error_code``: the top-level one (when the
  message has it) goes to ``error_code``; every non-zero one below the top level goes to
  ``nested_error_codes``, capped at :data:`MAX_NESTED_ERRORS` per frame.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Final

from kraft_jbod import codec, messages
from kraft_jbod.analytics.kip858 import Event
from kraft_jbod.capture.kafka import TRUNCATED, UNDECODED, DecodedFrame
from kraft_jbod.wire.message import Struct

__all__ = [
    "COLUMNS",
    "MAX_NESTED_ERRORS",
    "RTYPE_CONN",
    "RTYPE_ERROR",
    "RTYPE_EVENT",
    "RTYPE_FILE",
    "RTYPE_FRAME",
    "FileStats",
    "Row",
    "anomaly_kind",
    "blank",
    "column",
    "columns",
    "error_codes",
    "frame_row",
    "version_flags",
]

RTYPE_FRAME: Final = "frame"
RTYPE_CONN: Final = "conn"
RTYPE_EVENT: Final = "event"
RTYPE_ERROR: Final = "error"
RTYPE_FILE: Final = "file"

MAX_NESTED_ERRORS: Final = 256


def column(arrow: str, *, required: bool = False) -> Any:
    """A dataclass field that is a column of Arrow type ``arrow`` (:func:`columns` reads
    them off); optional ones default to ``None`` (a row type that does not use the column)."""
    if required:
        return field(metadata={"arrow": arrow})
    return field(default=None, metadata={"arrow": arrow})


@dataclass(slots=True, frozen=True)
class FileStats:
    """How one unit's run went: the counters of its ``file`` row. The fields, with their
    ``arrow`` types, are the ``inputs`` table's columns after the file's name and size
    (:func:`columns`)."""

    bucket: int = column("int32", required=True)
    buckets: int = column("int32", required=True)
    packets: int = column("int64", required=True)
    frames: int = column("int64", required=True)
    wall_s: float = column("float64", required=True)
    cpu_s: float = column("float64", required=True)
    max_rss_kb: int = column("int64", required=True)
    pid: int = column("int64", required=True)


def columns(cls: Any) -> tuple[tuple[str, str], ...]:
    """``(name, arrow type)`` of the fields of dataclass ``cls`` that are columns."""
    return tuple((f.name, f.metadata["arrow"]) for f in fields(cls) if "arrow" in f.metadata)


@dataclass(slots=True)
class Row:
    """One conformance row. Its fields but ``detail`` are the columns, in order; each field's
    ``arrow`` metadata is the column's type (``string``, ``bool``, ``int16``, ``int32``,
    ``int64``, ``list<int16>``, ``list<string>``), so :data:`COLUMNS` and every Arrow
    schema built from it come from this one declaration."""

    rtype: str = column("string", required=True)
    source: str = column("string", required=True)
    task: int = column("int32", required=True)
    conn_id: str | None = column("string")
    direction: str | None = column("string")
    kind: str | None = column("string")
    ts_ns: int | None = column("int64")
    size: int | None = column("int64")
    api_key: int | None = column("int16")
    api_version: int | None = column("int16")
    header_version: int | None = column("int16")
    correlation_id: int | None = column("int32")
    client_id: str | None = column("string")
    software_name: str | None = column("string")
    software_version: str | None = column("string")
    confidence: str | None = column("string")
    complete: bool | None = column("bool")
    decoded: bool | None = column("bool")
    canonical: bool | None = column("bool")
    unknown_tags: int | None = column("int32")
    trailing_bytes: int | None = column("int32")
    error_code: int | None = column("int16")
    nested_error_codes: list[int] | None = column("list<int16>")  # noqa: RUF009 (default None via field())
    latency_ns: int | None = column("int64")
    deprecated: bool | None = column("bool")
    unstable: bool | None = column("bool")
    negotiated_min: int | None = column("int16")
    negotiated_max: int | None = column("int16")
    anomaly_kinds: list[str] | None = column("list<string>")  # noqa: RUF009 (default None via field())
    error: str | None = column("string")
    client_source: str | None = column("string")
    gap_bytes: int | None = column("int64")
    retransmitted_bytes: int | None = column("int64")
    #: Not a column: what an ``event`` row carries (a KIP-858 event, :data:`.kip858.Event`)
    #: or a ``file`` row (its :class:`FileStats`), as objects; the task folds them into its
    #: partial as they are, and no table has a column for them.
    detail: Event | FileStats | None = None


#: ``(name, type)`` of every row column, read off :class:`Row`'s fields.
COLUMNS: Final[tuple[tuple[str, str], ...]] = columns(Row)
COLUMN_NAMES: Final = tuple(name for name, _ in COLUMNS)


def blank(rtype: str, source: str, task: int) -> Row:
    """A row of ``rtype`` with every other column ``None``."""
    return Row(rtype, source, task)


# --------------------------------------------------------------------------- anomalies

# Stable markers of the decoder's and the splitter's anomaly texts, most specific first;
# the texts carry offsets and sizes that would make every anomaly its own kind.
_KINDS: Final = (
    ("decode budget", "records past the decode budget"),
    ("not installed here", "compression library missing"),
    ("trailing bytes", "trailing bytes"),
    ("non-canonical", "non-canonical encoding"),
    ("does not re-encode", "does not re-encode"),
    ("unknown tagged", "unknown tagged fields"),
    ("CRC", "record CRC mismatch"),
    ("KIP-511", "ApiVersions KIP-511 fallback"),
    ("inferred from the correlation-id order", "request not captured (inferred)"),
    ("trial decoding", "request not captured (trial decoding)"),
    ("response without its request", "request not captured"),
    ("missing at frame byte", "TCP gap inside a frame"),
    ("stream ended", "stream ended inside a frame"),
    ("resynchronised", "frame resynchronisation"),
    ("do not decode", "records do not decode"),
    ("metadata record", "metadata record does not decode"),
    ("control record", "control record does not decode"),
    ("implausible frame size", "implausible frame size"),
    ("direction abandoned", "direction abandoned (not Kafka?)"),
    ("not a complete frame", "bytes outside any frame"),
    ("retransmi", "TCP retransmission"),
    ("bytes missing", "TCP gap"),
    ("gap", "TCP gap"),
)


def anomaly_kind(text: str) -> str:
    """The stable kind of an anomaly text (for counting); unknown texts keep 60 chars."""
    for marker, kind in _KINDS:
        if marker in text:
            return kind
    return text[:60]


# --------------------------------------------------------------------------- error codes

# Per struct class: the fields to visit for error codes, (attr, is_error, is_list,
# (first, last) version the field exists in). A field absent from the frame's version
# holds its default (0 for an error code), which is no observation: it is skipped.
_Plan = tuple[tuple[str, bool, bool, tuple[int, int]], ...]
_ERR_PLANS: dict[type, _Plan] = {}


def _err_plan(cls: type[Struct]) -> _Plan:
    plan = _ERR_PLANS.get(cls)
    if plan is not None:
        return plan
    _ERR_PLANS[cls] = ()  # recursion guard for self-referencing schemas
    items: list[tuple[str, bool, bool, tuple[int, int]]] = []
    for f in cls._FIELDS:
        if f.attr == "error_code" and f.type == "int16":
            items.append((f.attr, True, False, f.versions))
        elif f.struct is not None and _err_plan(f.struct):
            items.append((f.attr, False, f.type.startswith("[]"), f.versions))
    plan = tuple(items)
    _ERR_PLANS[cls] = plan
    return plan


def error_codes(body: Any, version: int | None = None) -> tuple[int | None, list[int]]:
    """``(top-level error code or None, non-zero nested error codes)`` of a message
    decoded at ``version``: a field the schema does not have in that version (say
    FindCoordinator v4+'s top-level ErrorCode, which moved into ``coordinators``) is
    not read. ``version=None`` reads every field."""
    top: int | None = None
    nested: list[int] = []
    for attr, is_err, _is_list, (lo, hi) in _err_plan(type(body)):
        if is_err and (version is None or lo <= version <= hi):
            value = getattr(body, attr, None)
            if isinstance(value, int):
                top = value
    _collect(body, nested, top_level=True, version=version)
    return top, nested


def _collect(obj: Any, out: list[int], *, top_level: bool, version: int | None) -> None:
    for attr, is_err, is_list, (lo, hi) in _err_plan(type(obj)):
        if version is not None and not lo <= version <= hi:
            continue
        value = getattr(obj, attr, None)
        if value is None:
            continue
        if is_err:
            if not top_level and value and len(out) < MAX_NESTED_ERRORS:
                out.append(value)
        elif is_list:
            for item in value:
                _collect(item, out, top_level=False, version=version)
                if len(out) >= MAX_NESTED_ERRORS:
                    return
        else:
            _collect(value, out, top_level=False, version=version)


# --------------------------------------------------------------------------- versions

_FLAGS: dict[tuple[str, int, int], tuple[bool, bool]] = {}


def version_flags(kind: str, api_key: int, version: int) -> tuple[bool, bool]:
    """``(deprecated, unstable)`` for a request or response of ``api_key`` at ``version``:
    deprecated when the schema lists the version in ``deprecatedVersions``; unstable when
    it is the latest version and the schema marks that one unstable, or beyond the
    schema's range."""
    key = (kind, api_key, version)
    got = _FLAGS.get(key)
    if got is None:
        cls = messages.request_class(api_key) if kind == "request" else messages.response_class(api_key)
        if cls is None:
            got = (False, False)
        else:
            dep = cls.DEPRECATED_VERSIONS
            lo, hi = cls.VALID_VERSIONS
            deprecated = dep is not None and dep[0] <= version <= dep[1]
            unstable = version > hi or (cls.LATEST_VERSION_UNSTABLE and version == hi)
            got = (deprecated, unstable or version < lo)
        _FLAGS[key] = got
    return got


# --------------------------------------------------------------------------- frames


def frame_row(
    f: DecodedFrame,
    source: str,
    task: int,
    *,
    software: tuple[str | None, str | None] = (None, None),
    negotiated: tuple[int, int] | None = None,
) -> Row:
    """The conformance row of one decoded frame.

    ``software`` is the client's (name, version) when its ApiVersions request revealed
    it; ``negotiated`` the server's advertised (min, max) for this api key on this
    connection when its ApiVersions response was seen.
    """
    row = blank(RTYPE_FRAME, source, task)
    row.conn_id = f.connection_id
    row.direction = f.direction
    row.kind = f.kind
    row.ts_ns = f.timestamp_ns
    row.size = f.size + 4
    row.api_key = f.api_key
    row.api_version = f.api_version
    row.header_version = f.header_version
    row.correlation_id = f.correlation_id
    row.client_id = f.client_id
    row.software_name, row.software_version = software
    row.confidence = f.confidence
    row.complete = f.complete
    row.decoded = f.body is not None
    row.canonical = f.canonical
    row.unknown_tags = len(f.unknown_tags)
    row.trailing_bytes = len(f.trailing)
    row.latency_ns = f.latency_ns
    row.error = f.error
    if f.body is not None and f.kind == "response":
        top, nested = error_codes(f.body, f.api_version)
        row.error_code = top
        row.nested_error_codes = nested
    if f.api_key is not None and f.api_version is not None and f.kind in ("request", "response"):
        row.deprecated, row.unstable = version_flags(f.kind, f.api_key, f.api_version)
    if negotiated is not None:
        row.negotiated_min, row.negotiated_max = negotiated
    kinds = [anomaly_kind(a) for a in f.anomalies]
    if f.confidence == UNDECODED and f.error:
        kinds.append("frame does not decode")
    elif f.confidence == TRUNCATED:
        kinds.append("frame cut short by the capture")
    row.anomaly_kinds = kinds
    return row


def api_name(key: int | None) -> str:
    """The api's name, or ``(none)`` for frames whose key is unknown."""
    return "(none)" if key is None else codec.api_name(key)


def count_by(rows: Iterable[Row], *keys: str) -> dict[tuple[Any, ...], int]:
    """Frame rows counted by the given columns (used by tests and the local engine)."""
    out: dict[tuple[Any, ...], int] = {}
    for r in rows:
        if r.rtype != RTYPE_FRAME:
            continue
        k = tuple(getattr(r, c) for c in keys)
        out[k] = out.get(k, 0) + 1
    return out
