"""The human side of a stats run: one self-contained HTML file and a short text summary.

Strategy: the job hands over its small tables as typed rows (:class:`.tables.Tables`, the
same rows it wrote as Parquet); charts are drawn here as inline SVG from plain arithmetic, so the report
needs no JavaScript, no network and no plotting library, and it diffs as text. Every
value placed in the HTML goes through :func:`html.escape`.

Invariants: pure (no Spark, no pyarrow); missing tables render as "none"; the summary is
plain ASCII-friendly text of at most a few dozen lines, the top of the same content.
"""

from __future__ import annotations

import datetime
import html
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from kraft_jbod import codec
from kraft_jbod.analytics.tables import (
    ConformanceRow,
    ErrorCodeRow,
    LatencyHistRow,
    OverallRow,
    TableRow,
    Tables,
    TimelineRow,
)
from kraft_jbod.messages.error_codes import ErrorCode

__all__ = ["render_html", "render_summary", "write_report"]

_PALETTE: Final = (
    "#3366cc",
    "#dc3912",
    "#ff9900",
    "#109618",
    "#990099",
    "#0099c6",
    "#dd4477",
    "#66aa00",
    "#b82e2e",
    "#316395",
)


def _api(key: Any) -> str:
    return "(unknown)" if key is None else f"{codec.api_name(int(key))}"


def _error(code: Any) -> str:
    """``NAME (code)`` with Kafka's name for the code."""
    if code is None:
        return "-"
    return f"{ErrorCode.name_of(int(code))} ({int(code)})"


def _dur_us(us: float) -> str:
    if us >= 1_000_000:
        return f"{us / 1e6:g} s"
    if us >= 1000:
        return f"{us / 1000:g} ms"
    return f"{us:g} µs"


def _time(ns: Any) -> str:
    if not ns:
        return "-"
    sec, frac = divmod(int(ns), 1_000_000_000)
    return datetime.datetime.fromtimestamp(sec, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S") + f".{frac // 1000:06d}Z"


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * float(x):.2f} %"


def _num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}f}"
    return str(x)


# --------------------------------------------------------------------------- svg


def _bar_chart(title: str, items: Sequence[tuple[str, float]], *, width: int = 720, unit: str = "") -> str:
    if not items:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    bar_h, gap, label_w = 16, 4, 320
    h = len(items) * (bar_h + gap) + 30
    top = max(v for _, v in items) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" '
        f'viewBox="0 0 {width} {h}" role="img" '
        f'aria-label="{html.escape(title)}"><text x="0" y="14" font-size="13" font-weight="bold">'
        f"{html.escape(title)}</text>"
    ]
    for i, (label, v) in enumerate(items):
        y = 24 + i * (bar_h + gap)
        w = max(1.0, (width - label_w - 90) * v / top)
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 12}" font-size="11" text-anchor="end">'
            f"{html.escape(label[:52])}</text>"
            f'<rect x="{label_w}" y="{y}" width="{w:.1f}" height="{bar_h}" fill="{_PALETTE[0]}"/>'
            f'<text x="{label_w + w + 4:.1f}" y="{y + 12}" font-size="11">{_num(v, 2)}{unit}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _line_chart(
    title: str,
    series: dict[str, list[tuple[float, float]]],
    *,
    x_label: str,
    y_label: str,
    log_y: bool = False,
    x_time: bool = False,
    marks: Sequence[tuple[float, str]] = (),
    x_ticks: Sequence[tuple[float, str]] | None = None,
    width: int = 760,
    height: int = 280,
) -> str:
    pts = [p for s in series.values() for p in s]
    if not pts:
        return f"<p><em>{html.escape(title)}: no data</em></p>"
    left, right, top, bottom = 60, 170, 26, 40
    xs = [p[0] for p in pts] + [m[0] for m in marks]
    x0, x1 = min(xs), max(xs)
    if not x1 - x0 > 0:
        # One x value (every frame in one time bucket): widen the axis around it. A relative
        # width, since for nanosecond timestamps (~1.7e18) x0 + 1 == x0 in floating point.
        half = max(0.5, abs(x0) * 1e-9)
        x0, x1 = x0 - half, x1 + half

    def fy(v: float) -> float:
        return math.log10(v + 1) if log_y else v

    y1 = max(fy(p[1]) for p in pts) or 1.0
    pw, ph = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + pw * (x - x0) / (x1 - x0)

    def sy(y: float) -> float:
        return top + ph - ph * fy(y) / y1

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{html.escape(title)}"><text x="0" y="14" font-size="13" font-weight="bold">'
        f"{html.escape(title)}</text>",
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#888"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="#888"/>',
        f'<text x="{left + pw / 2}" y="{height - 6}" font-size="11" text-anchor="middle">{html.escape(x_label)}</text>',
        f'<text x="12" y="{top + ph / 2}" font-size="11" transform="rotate(-90 12 {top + ph / 2})" '
        f'text-anchor="middle">{html.escape(y_label)}{" (log)" if log_y else ""}</text>',
    ]
    for frac in (0.0, 0.5, 1.0):
        yv = y1 * frac
        real = (10**yv - 1) if log_y else yv
        out.append(
            f'<text x="{left - 4}" y="{sy(real) + 4:.1f}" font-size="10" text-anchor="end">'
            f"{_num(real, 1) if real < 1000 else f'{real:.3g}'}</text>"
        )
    for xv, label in x_ticks if x_ticks is not None else _ticks(x0, x1, x_time):
        out.append(
            f'<text x="{sx(xv):.1f}" y="{top + ph + 14}" font-size="10" text-anchor="middle">'
            f"{html.escape(label)}</text>"
        )
    for x, label in marks:
        out.append(
            f'<line x1="{sx(x):.1f}" y1="{top}" x2="{sx(x):.1f}" y2="{top + ph}" stroke="#c00" '
            f'stroke-dasharray="3,3"><title>{html.escape(label)}</title></line>'
        )
    for i, (name, s) in enumerate(series.items()):
        color = _PALETTE[i % len(_PALETTE)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(s))
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{path}"/>')
        out.append(
            f'<text x="{left + pw + 8}" y="{top + 12 + 14 * i}" font-size="11" fill="{color}">'
            f"{html.escape(name[:26])}</text>"
        )
    out.append("</svg>")
    return "".join(out)


def _ticks(x0: float, x1: float, x_time: bool, n: int = 5) -> list[tuple[float, str]]:
    """``n`` distinct tick labels: wall-clock seconds for long spans, offsets for short ones."""
    xs = [x0 + (x1 - x0) * i / (n - 1) for i in range(n)]
    if not x_time:
        return [(x, f"{x:g}") for x in xs]
    span_s = (x1 - x0) / 1e9
    if span_s >= 4 * (n - 1):
        labels = [_time(x)[11:19] for x in xs]
    else:  # a short capture: every tick in the same second would read the same
        digits = 0 if span_s >= n else 3 if span_s < 0.05 * n else 2
        labels = [f"+{(x - x0) / 1e9:.{digits}f} s" for x in xs]
    out: list[tuple[float, str]] = []
    for x, label in zip(xs, labels, strict=True):
        if not out or out[-1][1] != label:
            out.append((x, label))
    return out


# --------------------------------------------------------------------------- tables


def _table(
    rows: Sequence[TableRow], cols: Sequence[tuple[str, str]], *, limit: int = 200, rate_cols: Sequence[str] = ()
) -> str:
    if not rows:
        return "<p><em>none</em></p>"
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title in cols)
    body = []
    for r in rows[:limit]:
        cells = []
        for key, _ in cols:
            v = getattr(r, key)
            style = ""
            if key in rate_cols and v is not None:
                good = float(v) >= 0.9999
                style = f' style="background:{"#e6f4ea" if good else "#fce8e6"}"'
                text = _pct(v)
            elif key == "api_key":
                text = f"{_api(v)} ({v})" if v is not None else "(unknown)"
            elif key == "error_code":
                text = _error(v)
            elif key.endswith("_ts"):
                text = _time(v)
            elif isinstance(v, list):
                text = ", ".join(str(x) for x in v)
            else:
                text = _num(v)
            cells.append(f"<td{style}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = f"<p>{len(rows) - limit} more rows in the Parquet table.</p>" if len(rows) > limit else ""
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>{more}'
    )


def _frames_by_api(conformance: Sequence[ConformanceRow]) -> list[tuple[int | None, int]]:
    """Frames per api key, the busiest first."""
    frames: dict[int | None, int] = {}
    for r in conformance:
        frames[r.api_key] = frames.get(r.api_key, 0) + r.frames
    return sorted(frames.items(), key=lambda kv: -kv[1])


# --------------------------------------------------------------------------- renderers


def _error_names(tables: Tables) -> tuple[int, str]:
    """Non-zero error codes in responses: their total and the four commonest, named."""
    errors = [r for r in tables.error_codes if r.error_code]
    by_name: dict[str, int] = defaultdict(int)
    for r in errors:
        by_name[_error(r.error_code)] += r.count
    shown = ", ".join(f"{n} x{c}" for n, c in sorted(by_name.items(), key=lambda kv: -kv[1])[:4])
    return sum(r.count for r in errors), shown


def _summary_frames(o: OverallRow, tables: Tables) -> list[str]:
    """The summary's lines about the frames (when there are any)."""
    total, shown = _error_names(tables)
    return [
        f"decoded {_pct(o.decode_rate)}; byte-exact re-encode {_pct(o.reencode_rate)} "
        f"({o.non_canonical} non-canonical); unknown tagged fields in "
        f"{o.frames_unknown_tags} frames; trailing bytes in {o.frames_trailing}",
        f"deprecated versions: {o.deprecated_frames} frames; unstable: {o.unstable_frames}",
        f"error responses: {o.error_frames} (any level, as the timeline counts them); "
        f"non-zero error codes in them: {total}" + (f" ({shown})" if shown else ""),
        f"latency p50 {_num(o.latency_p50_ms)} ms, p99 {_num(o.latency_p99_ms)} ms, max {_num(o.latency_max_ms)} ms",
    ]


def _more(items: Sequence[Any], shown: int, text: str) -> list[str]:
    return [text.format(len(items) - shown)] if len(items) > shown else []


def _summary_findings(tables: Tables) -> list[str]:
    """The summary's lines about KIP-858, anomalies and problems."""
    checks = tables.violations
    viol = [v for v in checks if v.verdict == "violation"]
    lines = [f"KIP-858: {len(viol)} violation(s), {len(checks) - len(viol)} indeterminate"]
    lines += [f"  {v.rule} broker {v.broker} x{v.count}: {v.detail}" for v in viol[:8]]
    lines += _more(viol, 8, "  ... and {} more")
    an = tables.anomalies
    if an:
        head = "; ".join(f"{a.anomaly} {a.count}" for a in an[:5])
        lines.append("anomalies: " + head + "".join(_more(an, 5, "; ... and {} more")))
    probs = tables.problems
    lines += [f"problem: {p.source}: {p.problem}" for p in probs[:5]]
    lines += _more(probs, 5, "... and {} more problem(s)")
    return lines


def render_summary(tables: Tables, manifest: dict[str, Any]) -> str:
    """The short text summary printed at the end of a run."""
    o = tables.overall[0] if tables.overall else None
    t = manifest.get("timings", {})
    frames = o.frames if o is not None else 0
    lines = [
        f"{manifest.get('files', 0)} file(s), {manifest.get('bytes', 0) / 1e6:.1f} MB, "
        f"{manifest.get('tasks', 0)} task(s) on {manifest.get('master')} (Spark "
        f"{manifest.get('spark_version')}); decode {t.get('decode_s', 0):.1f} s, total "
        f"{t.get('total_s', 0):.1f} s",
        f"{frames} frames, {o.bytes if o else 0} bytes, {o.connections if o else 0} connections",
    ]
    if o is not None and frames:
        lines += _summary_frames(o, tables)
    apis = _frames_by_api(tables.conformance)
    if apis:
        lines.append("top apis: " + ", ".join(f"{_api(key)} {n}" for key, n in apis[:6]))
    return "\n".join(lines + _summary_findings(tables))


# --------------------------------------------------------------------------- shaping

Series = dict[str, list[tuple[float, float]]]


@dataclass(frozen=True, slots=True)
class Shaped:
    """What the report draws, computed from the tables: the charts' points, no markup."""

    versions: list[tuple[str, float]]
    errors: list[tuple[str, float]]
    latency: Series
    latency_ticks: list[tuple[float, str]]
    timeline: Series
    violations: list[tuple[float, str]]
    start_ts: float


def _versions_used(conf: Sequence[ConformanceRow]) -> list[tuple[str, float]]:
    """Request frames per api and version, the 30 commonest."""
    per_version: dict[str, float] = defaultdict(float)
    for r in conf:
        if r.kind == "request" or r.api_key is None:
            per_version[f"{_api(r.api_key)} v{r.api_version}"] += r.frames
    return sorted(per_version.items(), key=lambda kv: -kv[1])[:30]


def _errors_seen(error_codes: Sequence[ErrorCodeRow]) -> list[tuple[str, float]]:
    """Non-zero error codes per api and level, the 25 commonest."""
    errs: dict[str, float] = defaultdict(float)
    for r in error_codes:
        if r.error_code:
            errs[f"{_api(r.api_key)}: {_error(r.error_code)}, {r.level}"] += r.count
    return sorted(errs.items(), key=lambda kv: -kv[1])[:25]


def _latency_lines(latency_hist: Sequence[LatencyHistRow]) -> tuple[Series, list[tuple[float, str]]]:
    """Responses per latency bucket for the 8 busiest apis, and the axis ticks."""
    hist: Series = defaultdict(list)
    totals: dict[str, float] = defaultdict(float)
    for r in latency_hist:
        name = _api(r.api_key)
        # x is the bucket's log2 (µs): the axis is logarithmic, its ticks read as durations.
        hist[name].append((float(r.bucket or 0), float(r.count)))
        totals[name] += r.count
    top = dict(sorted(hist.items(), key=lambda kv: -totals[kv[0]])[:8])
    buckets = sorted({int(x) for s_ in top.values() for x, _ in s_})
    if not buckets:
        return top, []
    step = max(1, (buckets[-1] - buckets[0]) // 6)
    return top, [(float(b), _dur_us(2.0**b)) for b in range(buckets[0], buckets[-1] + 1, step)]


def _timeline_lines(timeline: Sequence[TimelineRow]) -> tuple[Series, float]:
    """Frames, anomalous frames and error responses per time bucket, and the first bucket."""
    per_bucket: dict[float, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for r in timeline:
        b = per_bucket[float(r.bucket_ts)]
        b[0] += r.frames
        b[1] += r.anomalous
        b[2] += r.errors
    series: Series = defaultdict(list)
    for x, (fr, an, er) in sorted(per_bucket.items()):
        series["frames"].append((x, fr))
        series["anomalous frames"].append((x, an))
        series["error responses"].append((x, er))
    return series, min(per_bucket) if per_bucket else 0


def shape(tables: Tables) -> Shaped:
    """The report's charts as data."""
    latency, ticks = _latency_lines(tables.latency_hist)
    timeline, start = _timeline_lines(tables.timeline)
    marks = [
        (float(v.first_ts), f"{v.rule} broker {v.broker}")
        for v in tables.violations
        if v.verdict == "violation" and v.first_ts
    ]
    return Shaped(
        _versions_used(tables.conformance),
        _errors_seen(tables.error_codes),
        latency,
        ticks,
        timeline,
        marks,
        start,
    )


# --------------------------------------------------------------------------- markup

Cols = tuple[tuple[str, str], ...]
_RATES: Final = ("decode_rate", "reencode_rate")
_OVERALL_COLS: Final[Cols] = (
    ("frames", "frames"),
    ("bytes", "bytes"),
    ("connections", "connections"),
    ("decode_rate", "decoded"),
    ("reencode_rate", "byte-exact re-encode"),
    ("non_canonical", "non-canonical"),
    ("frames_unknown_tags", "frames w/ unknown tags"),
    ("frames_trailing", "frames w/ trailing bytes"),
    ("deprecated_frames", "deprecated"),
    ("unstable_frames", "unstable"),
    ("error_frames", "error responses (any level)"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p99_ms", "p99 ms"),
)
_CONFORMANCE_COLS: Final[Cols] = (
    ("api_key", "api"),
    ("api_version", "v"),
    ("kind", "dir"),
    ("software_name", "client"),
    ("software_version", "client version"),
    ("frames", "frames"),
    ("bytes", "bytes"),
    ("decode_rate", "decoded"),
    ("reencode_rate", "re-encode exact"),
    ("frames_unknown_tags", "unk. tags"),
    ("non_canonical", "non-canon."),
    ("frames_trailing", "trailing"),
    ("deprecated_frames", "deprecated"),
    ("unstable_frames", "unstable"),
    ("error_frames", "errors"),
    ("inferred_or_worse", "inferred"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p99_ms", "p99 ms"),
)
_VERSIONS_COLS: Final[Cols] = (
    ("software_name", "client"),
    ("software_version", "client version"),
    ("api_key", "api"),
    ("versions_used", "versions used"),
    ("advertised_min", "server min"),
    ("advertised_max", "server max"),
    ("requests", "requests"),
    ("below_advertised_max", "below server max"),
    ("outside_advertised", "outside range"),
    ("deprecated", "deprecated"),
    ("unstable", "unstable"),
)
_ERROR_COLS: Final[Cols] = (
    ("api_key", "api"),
    ("api_version", "v"),
    ("level", "level"),
    ("error_code", "error code"),
    ("count", "count"),
)
_LATENCY_COLS: Final[Cols] = (
    ("api_key", "api"),
    ("api_version", "v"),
    ("responses", "responses"),
    ("latency_p50_ms", "p50 ms"),
    ("latency_p90_ms", "p90 ms"),
    ("latency_p99_ms", "p99 ms"),
    ("latency_p999_ms", "p99.9 ms"),
    ("latency_max_ms", "max ms"),
)
_CHECK_COLS: Final[Cols] = (
    ("rule", "rule"),
    ("verdict", "verdict"),
    ("severity", "severity"),
    ("broker", "broker"),
    ("subject", "subject"),
    ("count", "count"),
    ("first_ts", "first"),
    ("last_ts", "last"),
    ("detail", "detail"),
    ("conn", "connection"),
)
_ANOMALY_COLS: Final[Cols] = (
    ("anomaly", "anomaly"),
    ("rtype", "on"),
    ("count", "count"),
    ("first_ts", "first"),
    ("example_conn", "example connection"),
)
_INPUT_COLS: Final[Cols] = (
    ("source", "file"),
    ("size", "bytes"),
    ("bucket", "bucket"),
    ("buckets", "of"),
    ("packets", "packets"),
    ("frames", "frames"),
    ("cpu_s", "cpu s"),
    ("max_rss_kb", "worker max RSS KiB"),
)
_PROBLEM_COLS: Final[Cols] = (("source", "file"), ("problem", "problem"))
_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
    "table{border-collapse:collapse;font-size:12px;margin:0.5em 0}td,th{border:1px solid #ccc;"
    "padding:2px 6px;text-align:left;overflow-wrap:anywhere}th{background:#f3f3f3}"
    "pre{background:#f8f8f8;padding:1em;white-space:pre-wrap;overflow-wrap:anywhere}"
    ".scroll{overflow-x:auto;max-width:100%}svg{max-width:100%;height:auto}"
)


def _sections(tables: Tables, shaped: Shaped, summary: str) -> list[tuple[str, str]]:
    """The report's sections, (title, HTML), in order."""

    def table(name: str, cols: Cols, rates: Sequence[str] = ()) -> str:
        return _table(tables.rows(name), cols, rate_cols=rates)

    latency_chart = _line_chart(
        "Latency distribution (responses per latency bucket)",
        shaped.latency,
        x_label="latency (log scale, buckets double)",
        y_label="responses",
        log_y=True,
        x_ticks=shaped.latency_ticks,
    )
    time_chart = _line_chart(
        "Traffic, anomalies and errors over time (red: KIP-858 violations)",
        shaped.timeline,
        x_label=f"time (UTC; start {_time(shaped.start_ts)})",
        y_label="frames per bucket",
        log_y=True,
        x_time=True,
        marks=shaped.violations,
    )
    return [
        ("Summary", f"<pre>{html.escape(summary)}</pre>"),
        ("Overall", table("overall", _OVERALL_COLS, _RATES)),
        ("Versions in use", _bar_chart("Requests per api and version", shaped.versions)),
        ("Conformance by api, version, direction and client", table("conformance", _CONFORMANCE_COLS, _RATES)),
        ("Versions negotiated vs used", table("versions", _VERSIONS_COLS)),
        (
            "Error codes",
            _bar_chart("Non-zero error codes in responses", shaped.errors) + table("error_codes", _ERROR_COLS),
        ),
        ("Latency", latency_chart + table("latency", _LATENCY_COLS)),
        ("Over time", time_chart),
        ("KIP-858 checks", table("violations", _CHECK_COLS)),
        ("Anomalies", table("anomalies", _ANOMALY_COLS)),
        ("Inputs", table("inputs", _INPUT_COLS) + table("problems", _PROBLEM_COLS)),
    ]


def render_html(tables: Tables, manifest: dict[str, Any]) -> str:
    """The report as one HTML document (inline CSS and SVG, nothing fetched): the tables
    shaped into chart data (:func:`shape`), then laid out as sections."""
    sections = _sections(tables, shape(tables), render_summary(tables, manifest))
    toc = "".join(f'<li><a href="#s{i}">{html.escape(t)}</a></li>' for i, (t, _) in enumerate(sections))
    body = "".join(f'<h2 id="s{i}">{html.escape(t)}</h2>{c}' for i, (t, c) in enumerate(sections))
    generated = _time(int(datetime.datetime.now(datetime.UTC).timestamp() * 1e9))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>kraft-jbod conformance report'
        f"</title><style>{_STYLE}</style></head><body><h1>kraft-jbod conformance report</h1>"
        f"<p>Generated {html.escape(generated)} from "
        f"{html.escape(', '.join(str(i) for i in manifest.get('inputs', [])))}</p><ul>{toc}</ul>{body}"
        "</body></html>"
    )


def write_report(out_dir: Path, tables: Tables, manifest: dict[str, Any]) -> str:
    """Write ``report.html`` and ``summary.txt`` into ``out_dir``; return the summary."""
    summary = render_summary(tables, manifest)
    (out_dir / "report.html").write_text(render_html(tables, manifest), encoding="utf-8")
    (out_dir / "summary.txt").write_text(summary + "\n", encoding="utf-8")
    return summary
