"""Rendering decoded capture frames: one JSON object per frame, and a summary table.

Strategy: :func:`frame_to_json` turns a :class:`~.kafka.DecodedFrame` into a plain dict
whose ``header`` and ``body`` have exactly the shape of the generated classes'
``to_json(version)`` (Kafka's own JSON converters), so tools that read Kafka's JSON read
ours. :class:`Summary` accumulates counts while frames stream past and renders a fixed
width text table; it holds counters, never frames, so memory does not grow with the file.

Invariants: every dict is JSON-serialisable with the standard library (bytes become hex or
base64, uuids base64url as Kafka prints them); keys are camelCase like Kafka's JSON;
optional keys are left out rather than written as null, except ``apiKey`` and
``correlationId`` which are always present.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Final

from kraft_jbod import codec
from kraft_jbod.capture.kafka import CONFIDENCES, TRUNCATED, UNDECODED, DecodedFrame
from kraft_jbod.capture.streams import FlowEnd
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.releases import defined_in

__all__ = ["Summary", "format_time", "frame_to_json", "frame_to_line"]

#: Undecoded payloads are shown in hex up to this many bytes.
MAX_HEX: Final = 4096


def format_time(ns: int) -> str:
    """``2024-09-13T08:01:02.123456789Z``: ISO 8601 UTC with all nine digits."""
    sec, frac = divmod(ns, 1_000_000_000)
    base = datetime.datetime.fromtimestamp(sec, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{frac:09d}Z"


def frame_to_json(f: DecodedFrame) -> dict[str, Any]:
    """One frame as a JSON-ready dict (see the module docstring for the shape)."""
    out: dict[str, Any] = {
        "time": format_time(f.timestamp_ns),
        "timestampNs": f.timestamp_ns,
        "connection": f.connection_id,
        "direction": f.direction,
        "streamOffset": f.offset,
        "size": f.size,
        "kind": f.kind,
        "apiKey": f.api_key,
        "correlationId": f.correlation_id,
        "confidence": f.confidence,
    }
    if f.api_key is not None:
        out["apiName"] = codec.api_name(f.api_key)
    if f.api_version is not None:
        out["apiVersion"] = f.api_version
        if f.api_key is not None and f.kind in ("request", "response"):
            out["versionDefinedIn"] = defined_in(f.api_key, f.api_version)
    if f.client_id is not None:
        out["clientId"] = f.client_id
    if f.candidates:
        out["candidates"] = [[k, v] for k, v in f.candidates]
    if f.header is not None and f.header_version is not None:
        out["headerVersion"] = f.header_version
        out["header"] = f.header.to_json(f.header_version)
    if f.body is not None and f.api_version is not None:
        out["body"] = f.body.to_json(f.api_version)
        code = getattr(f.body, "error_code", None)
        if isinstance(code, int) and code != 0:
            out["errorName"] = ErrorCode.name_of(code)
    if f.records:
        out["records"] = f.records
    if f.unknown_tags:
        out["unknownTags"] = [{"path": t.path, "tag": t.tag, "data": t.data.hex()} for t in f.unknown_tags]
    if f.trailing:
        out["trailing"] = f.trailing.hex()
    if f.canonical is not None:
        out["canonical"] = f.canonical
    if f.latency_ns is not None:
        out["latencyNs"] = f.latency_ns
    if not f.complete:
        out["complete"] = False
    if f.error is not None:
        out["error"] = f.error
    if f.body is None:
        out["payload"] = f.payload[:MAX_HEX].hex()
        if len(f.payload) > MAX_HEX:
            out["payloadTruncatedAt"] = MAX_HEX
    out["anomalies"] = f.anomalies
    return out


def frame_to_line(f: DecodedFrame) -> str:
    """:func:`frame_to_json` as one compact JSON line (no newline)."""
    return json.dumps(frame_to_json(f), separators=(",", ":"), ensure_ascii=False)


@dataclass(slots=True)
class _ApiRow:
    requests: int = 0
    responses: int = 0
    versions: set[int] = field(default_factory=set)
    bytes: int = 0
    latency_ns: int = 0
    latency_n: int = 0


@dataclass(slots=True)
class Summary:
    """Running totals over decoded frames and finished flows; :meth:`render` prints them."""

    frames: int = 0
    bytes: int = 0
    confidence: Counter[str] = field(default_factory=Counter)
    anomalies: Counter[str] = field(default_factory=Counter)
    apis: dict[int | None, _ApiRow] = field(default_factory=dict)
    connections: set[str] = field(default_factory=set)
    flows: int = 0
    gap_bytes: int = 0
    retransmitted_bytes: int = 0
    flow_anomalies: list[str] = field(default_factory=list)
    non_canonical: int = 0
    unknown_tags: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    files_cut_short: list[tuple[str, int]] = field(default_factory=list)

    def add(self, f: DecodedFrame) -> None:
        self.frames += 1
        self.bytes += f.size + 4
        self.confidence[f.confidence] += 1
        self.connections.add(f.connection_id)
        ts = f.timestamp_ns
        if self.first_ns is None or ts < self.first_ns:
            self.first_ns = ts
        if self.last_ns is None or ts > self.last_ns:
            self.last_ns = ts
        row = self.apis.get(f.api_key)
        if row is None:
            row = self.apis[f.api_key] = _ApiRow()
        if f.kind == "request":
            row.requests += 1
        else:
            row.responses += 1
        if f.api_version is not None:
            row.versions.add(f.api_version)
        row.bytes += f.size + 4
        if f.latency_ns is not None:
            row.latency_ns += f.latency_ns
            row.latency_n += 1
        if f.canonical is False:
            self.non_canonical += 1
        self.unknown_tags += len(f.unknown_tags)
        for a in f.anomalies:
            self.anomalies[_anomaly_kind(a)] += 1

    def add_flow(self, end: FlowEnd) -> None:
        fl = end.flow
        self.flows += 1
        self.gap_bytes += fl.gap_bytes
        self.retransmitted_bytes += fl.retransmitted_bytes
        for a in fl.anomalies:
            if len(self.flow_anomalies) < 50:
                self.flow_anomalies.append(f"{fl.connection_id}: {a}")

    @property
    def undecoded(self) -> int:
        return self.confidence[UNDECODED]

    @property
    def truncated(self) -> int:
        return self.confidence[TRUNCATED]

    def render(self) -> str:
        lines = []
        span = ""
        if self.first_ns is not None and self.last_ns is not None:
            span = f", {format_time(self.first_ns)} .. {format_time(self.last_ns)}"
        lines.append(f"{self.frames} frames, {self.bytes} bytes, {len(self.connections)} connections{span}")
        lines.append("")
        lines.append(
            f"{'api':<34} {'key':>4} {'versions':<14} {'req':>7} {'resp':>7} {'bytes':>11} {'avg latency':>12}"
        )
        for key in sorted(self.apis, key=lambda k: -1 if k is None else k):
            row = self.apis[key]
            name = "(no api key)" if key is None else codec.api_name(key)
            vers = ",".join(str(v) for v in sorted(row.versions)) or "-"
            lat = f"{row.latency_ns / row.latency_n / 1e6:.3f} ms" if row.latency_n else "-"
            lines.append(
                f"{name[:34]:<34} {'' if key is None else key:>4} {vers[:14]:<14} "
                f"{row.requests:>7} {row.responses:>7} {row.bytes:>11} {lat:>12}"
            )
        lines.append("")
        lines.append("confidence: " + ", ".join(f"{c} {self.confidence[c]}" for c in CONFIDENCES if self.confidence[c]))
        lines.append(f"non-canonical frames: {self.non_canonical}; unknown tagged fields: {self.unknown_tags}")
        if self.anomalies:
            lines.append("anomalies:")
            for kind, n in self.anomalies.most_common():
                lines.append(f"  {n:>7}  {kind}")
        lines.append(f"flows: {self.flows}; gap bytes {self.gap_bytes}; retransmitted bytes {self.retransmitted_bytes}")
        for a in self.flow_anomalies:
            lines.append(f"  {a}")
        for name, offset in self.files_cut_short:
            lines.append(f"capture file cut short: {name} ends inside a record at byte {offset}")
        return "\n".join(lines)


def _anomaly_kind(text: str) -> str:
    """Group anomaly texts by their stable part (numbers and details vary)."""
    for marker in (
        "decode budget",
        "not installed here",
        "trailing bytes",
        "non-canonical",
        "unknown tagged",
        "CRC",
        "KIP-511",
        "inferred from the correlation-id order",
        "trial decoding",
        "missing at frame byte",
        "stream ended",
        "resynchronised",
        "do not decode",
        "cut short",
    ):
        if marker in text:
            return marker
    return text[:60]
