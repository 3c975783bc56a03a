"""Kafka layer of capture decoding: frames in, decoded requests and responses out.

Strategy: a :class:`KafkaDecoder` consumes the :class:`~.streams.Frame` and
:class:`~.streams.FlowEnd` items of :func:`~.pipeline.iter_frames` and returns
:class:`DecodedFrame` objects. It keeps, per connection, the requests still waiting for
their response (by correlation id), the (api key, version) pairs the client used and the
server's ApiVersions ranges when its ApiVersions response was seen.

Rules:

1. A request names its own api key and version; it is decoded with the generated codec
   (confidence ``header``). A response is decoded with the key and version of the request
   carrying the same correlation id on the same connection (``paired``).
2. A response whose request was not captured (the capture started mid-connection, or the
   request fell in a gap) is held until a few more requests of its connection were seen
   (or it ends), then resolved in three steps,
   each reported as the frame's confidence instead of guessed silently:
   ``inferred-order``: among the pairs this client used on this connection, exactly one
   decodes the frame, or several do and the one whose correlation id is nearest wins
   (clients count correlation ids up and one connection answers in request order);
   ``trial-unique``: trial decoding of every (key, version) pair, narrowed to the
   server's ApiVersions ranges when known, leaves one api key whose decodings consume
   every byte with no unknown tags and re-encode to the same bytes; ``trial-ambiguous``:
   several keys remain (the frame is decoded with the first by a fixed preference and the
   others are listed); ``undecoded``: none.
3. A frame the capture cut short (``Frame.complete`` false) is ``truncated``: its header is
   decoded when present and it still pairs, so its response is not orphaned.
4. Every complete frame is re-encoded from the decoded objects; bytes that differ are a
   ``non-canonical`` anomaly, bytes after a complete body a ``trailing bytes`` anomaly
   (real clients send them, e.g. librdkafka's all-topics Metadata v12). Unknown tagged
   fields anywhere in header or body are listed with their path.
5. ``records`` fields (Produce, Fetch, FetchSnapshot) are split into record batches and
   legacy messages, decompressed, and each record decoded; in the metadata log (topic
   ``__cluster_metadata`` or topic id ``AAAAAAAAAAAAAAAAAAAAAQ``) record values are metadata
   records and control records are decoded to their KRaft messages.
6. Records decoding is bounded by :class:`DecodeLimits`: per frame and per file (one
   decoder's life), a number of records and a number of decompressed bytes. A batch that
   would go past what is left is not decompressed further nor turned into records: it
   and the rest of its ``records`` field stay undecoded (the entry says ``"undecoded":
   "budget"``; batches before it are kept) and the frame gets a ``decode budget``
   anomaly, while the frame's body (which holds the raw records bytes) is still decoded
   and printed. Running out of memory while decoding records is handled the same way
   (what that field had built is dropped). Memory
   per frame therefore stays proportional to the frame budget, whatever the compression
   ratio; frames held behind an orphan response (rule 2) count too: once they hold more
   records than one frame's budget, the orphan is inferred from the requests seen so far.

Only :class:`~kraft_jbod.errors.DecodeError` is caught from codecs; the decoder never
raises for the content of a frame, so one odd peer cannot stop a capture.
"""

from __future__ import annotations

import base64
import struct
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Final

from kraft_jbod import codec, messages
from kraft_jbod.capture.budget import DEFAULT_LIMITS, DecodeLimits
from kraft_jbod.capture.pipeline import iter_frames
from kraft_jbod.capture.streams import FlowEnd, Frame, looks_like_request
from kraft_jbod.errors import BudgetExceeded, DecodeError, EncodeError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.request_header import RequestHeader
from kraft_jbod.messages.response_header import ResponseHeader
from kraft_jbod.wire import compression
from kraft_jbod.wire.constants import METADATA_TOPIC, METADATA_TOPIC_ID
from kraft_jbod.wire.message import Struct
from kraft_jbod.wire.records import (
    LegacyMessage,
    RecordBatch,
    RecordBudget,
    TruncatedBatch,
    flatten_legacy,
    iter_records,
    read_control_record_key,
)

__all__ = [
    "CONFIDENCES",
    "DEFAULT_LIMITS",
    "DecodeLimits",
    "DecodedFrame",
    "KafkaDecoder",
    "UnknownTag",
    "decode_capture",
    "is_request",
    "reencode",
]

HEADER: Final = "header"
PAIRED: Final = "paired"
INFERRED_ORDER: Final = "inferred-order"
TRIAL_UNIQUE: Final = "trial-unique"
TRIAL_AMBIGUOUS: Final = "trial-ambiguous"
UNDECODED: Final = "undecoded"
TRUNCATED: Final = "truncated"
#: Every confidence a frame can carry, most certain first.
CONFIDENCES: Final = (HEADER, PAIRED, INFERRED_ORDER, TRIAL_UNIQUE, TRIAL_AMBIGUOUS, TRUNCATED, UNDECODED)

# How many requests per connection are remembered for correlation-order inference.
_HISTORY: Final = 1024
# Requests seen after an orphan response before it is inferred: enough to learn the
# versions this client uses, while keeping the held-back output short.
_LOOKAHEAD: Final = 8
# Frames longer than this are not trial-decoded against every api key: a large orphan
# response costs a full decode per candidate, and real orphans are mostly small.
_TRIAL_MAX_SIZE: Final = 1 << 20
# Preference among equally good trial results: the traffic most captures are made of.
_POPULAR: Final = (
    ApiKey.FETCH,
    ApiKey.PRODUCE,
    ApiKey.METADATA,
    ApiKey.API_VERSIONS,
    ApiKey.HEARTBEAT,
    ApiKey.OFFSET_COMMIT,
    ApiKey.OFFSET_FETCH,
    ApiKey.LIST_OFFSETS,
    ApiKey.FIND_COORDINATOR,
    ApiKey.JOIN_GROUP,
    ApiKey.SYNC_GROUP,
    ApiKey.LEAVE_GROUP,
    ApiKey.BROKER_HEARTBEAT,
    ApiKey.BROKER_REGISTRATION,
    ApiKey.ASSIGN_REPLICAS_TO_DIRS,
    ApiKey.CREATE_TOPICS,
    ApiKey.DELETE_TOPICS,
    ApiKey.DESCRIBE_CONFIGS,
    ApiKey.DESCRIBE_CLUSTER,
    ApiKey.DESCRIBE_GROUPS,
    ApiKey.LIST_GROUPS,
    ApiKey.INIT_PRODUCER_ID,
    ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN,
    ApiKey.END_TXN,
    ApiKey.TXN_OFFSET_COMMIT,
    ApiKey.SASL_AUTHENTICATE,
    ApiKey.SASL_HANDSHAKE,
    ApiKey.DESCRIBE_QUORUM,
    ApiKey.VOTE,
    ApiKey.BEGIN_QUORUM_EPOCH,
    ApiKey.END_QUORUM_EPOCH,
    ApiKey.FETCH_SNAPSHOT,
    ApiKey.ALTER_PARTITION,
    ApiKey.UPDATE_FEATURES,
    ApiKey.ALLOCATE_PRODUCER_IDS,
    ApiKey.CONTROLLER_REGISTRATION,
)
_CONTROL_CLASSES: Final = {
    2: "LeaderChangeMessage",
    3: "SnapshotHeaderRecord",
    4: "SnapshotFooterRecord",
    5: "KRaftVersionRecord",
    6: "VotersRecord",
}
_CONTROL_NAMES: Final = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_I32 = struct.Struct(">i")
_HH = struct.Struct(">hh")


@dataclass(frozen=True, slots=True)
class UnknownTag:
    """A tagged field the schema does not know, at ``path`` (``""`` is the body's top,
    ``"header"`` the request/response header)."""

    path: str
    tag: int
    data: bytes


@dataclass(slots=True)
class DecodedFrame:
    """One Kafka frame, decoded as far as its bytes and the context allow.

    ``kind`` is ``request``, ``response`` or ``unknown``. ``body`` is a generated message
    object (``None`` when undecoded or truncated); ``records`` holds decoded record batches
    per ``records`` field (JSON-ready dicts with the field's ``path``). ``candidates``
    lists the (key, version) pairs an inference accepted. ``latency_ns`` is the time from
    the request to a paired response.
    """

    connection_id: str
    direction: str
    timestamp_ns: int
    offset: int
    size: int
    complete: bool
    kind: str
    confidence: str
    api_key: int | None = None
    api_version: int | None = None
    correlation_id: int | None = None
    client_id: str | None = None
    header_version: int | None = None
    header: Any = None
    body: Any = None
    trailing: bytes = b""
    canonical: bool | None = None
    candidates: list[tuple[int, int]] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    unknown_tags: list[UnknownTag] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    latency_ns: int | None = None
    payload: bytes = b""

    @property
    def api_name(self) -> str | None:
        return None if self.api_key is None else codec.api_name(self.api_key)


# --------------------------------------------------------------------------- re-encoding


def reencode(frame: DecodedFrame) -> bytes | None:
    """The payload rebuilt from ``frame``'s header, body and trailing bytes (no size
    prefix), or ``None`` when the frame was not fully decoded. A byte-exact decoder gives
    back ``frame.payload``."""
    if frame.body is None or frame.header is None or frame.api_version is None or frame.header_version is None:
        return None
    out = bytearray()
    try:
        frame.header.write(out, frame.header_version)
        frame.body.write(out, frame.api_version)
    except EncodeError:
        return None
    out += frame.trailing
    return bytes(out)


# --------------------------------------------------------------------------- body walking

# Per (class, version): the fields worth visiting: (attr, json name, kind, struct class),
# kind "s" struct, "a" array of structs, "r" records. None: nothing below needs a visit.
_Plan = tuple[tuple[str, str, str, Any], ...]
_PLANS: dict[tuple[type, int, bool], _Plan] = {}
_HAS_RECORDS: dict[type, bool] = {}


def _has_records(cls: type[Struct]) -> bool:
    found = _HAS_RECORDS.get(cls)
    if found is None:
        _HAS_RECORDS[cls] = False  # guards recursive schemas
        found = any(f.type == "records" or (f.struct is not None and _has_records(f.struct)) for f in cls._FIELDS)
        _HAS_RECORDS[cls] = found
    return found


def _plan(cls: type[Struct], version: int, flexible: bool) -> _Plan:
    key = (cls, version, flexible)
    plan = _PLANS.get(key)
    if plan is None:
        items: list[tuple[str, str, str, Any]] = []
        for f in cls._FIELDS:
            if not f.present(version):
                continue
            if f.type == "records":
                items.append((f.attr, f.json_name, "r", None))
            elif f.struct is not None and (flexible or _has_records(f.struct)):
                items.append((f.attr, f.json_name, "a" if f.type.startswith("[]") else "s", f.struct))
        plan = tuple(items)
        _PLANS[key] = plan
    return plan


def _topic_context(obj: Any, inherited: bool) -> bool:
    """Whether ``obj`` (a struct on the way to a records field) names the metadata log."""
    name = getattr(obj, "topic", None)
    if not isinstance(name, str):
        name = getattr(obj, "name", None)
    if name == METADATA_TOPIC:
        return True
    if getattr(obj, "topic_id", None) == METADATA_TOPIC_ID:
        return True
    return inherited


class _Walker:
    """Collects unknown tags and decodes records fields of one message."""

    __slots__ = ("anomalies", "budget", "records", "tags", "version", "with_records")

    def __init__(self, version: int, with_records: bool = True, budget: RecordBudget | None = None) -> None:
        self.version = version
        self.with_records = with_records
        self.budget = budget
        self.tags: list[UnknownTag] = []
        self.records: list[dict[str, Any]] = []
        self.anomalies: list[str] = []

    def walk(self, obj: Any, path: str, flexible: bool, metadata: bool) -> None:
        if flexible:
            for tag, data in getattr(obj, "unknown_tagged_fields", ()):
                self.tags.append(UnknownTag(path, tag, bytes(data)))
        plan = _plan(type(obj), self.version, flexible)
        if not plan:
            return
        metadata = _topic_context(obj, metadata)
        for attr, jname, kind, _cls in plan:
            value = getattr(obj, attr)
            if value is None:
                continue
            here = f"{path}.{jname}" if path else jname
            if kind == "r":
                if len(value) and self.with_records:
                    self._records(bytes(value), here, metadata)
            elif kind == "s":
                self.walk(value, here, flexible, metadata)
            else:
                for i, item in enumerate(value):
                    self.walk(item, f"{here}[{i}]", flexible, metadata)

    def _records(self, data: bytes, path: str, metadata: bool) -> None:
        entries: list[dict[str, Any]] = []
        out: dict[str, Any] = {"path": path, "metadataLog": metadata, "batches": entries}
        try:
            for entry in iter_records(data, verify_crc=False, budget=self.budget):
                if isinstance(entry, RecordBatch):
                    entries.append(self._batch(entry, path, metadata))
                elif isinstance(entry, LegacyMessage):
                    entries.append(_legacy_json(entry, path, self.anomalies))
                else:
                    entries.append(_partial_json(entry))
        except BudgetExceeded as exc:
            # The bytes stay in the body's records field; only their expansion is refused.
            self._undecoded(out, entries, path, "budget", f"past the decode budget: {exc}")
        except MemoryError:
            self._undecoded(out, entries, path, "memory", "out of memory while decoding them")
        except DecodeError as exc:
            out["error"] = str(exc)
            self.anomalies.append(f"records at {path} do not decode: {exc}")
        self.records.append(out)

    def _undecoded(self, out: dict[str, Any], entries: list[dict[str, Any]], path: str, why: str, text: str) -> None:
        # Past the budget, the batches decoded before it stay (they fit); out of memory, what
        # was built is freed, as it may be the reason.
        if why == "memory":
            entries.clear()
        out["undecoded"] = why
        self.anomalies.append(f"records at {path} kept undecoded, decode budget: {text}")

    def _batch(self, b: RecordBatch, path: str, metadata: bool) -> dict[str, Any]:
        if not b.crc_valid:
            self.anomalies.append(f"record batch at {path} offset {b.base_offset}: CRC-32C mismatch")
        recs = []
        for r in b.records:
            rec: dict[str, Any] = {
                "offsetDelta": r.offset_delta,
                "timestampDelta": r.timestamp_delta,
                "key": _b64(r.key),
                "value": _b64(r.value),
            }
            if r.attributes:
                rec["attributes"] = r.attributes
            if r.headers:
                rec["headers"] = [{"key": k, "value": _b64(v)} for k, v in r.headers]
            if b.is_control:
                self._control(r.key, r.value, rec, path)
            elif metadata and r.value is not None:
                try:
                    mrec, mver = codec.decode_metadata_record(r.value)
                    rec["metadataRecord"] = {
                        "type": mrec.API_KEY,
                        "name": mrec.NAME,
                        "version": mver,
                        "data": mrec.to_json(mver),
                    }
                except DecodeError as exc:
                    self.anomalies.append(f"metadata record at {path} offset {b.base_offset + r.offset_delta}: {exc}")
            else:
                _text(rec, "keyText", r.key)
                _text(rec, "valueText", r.value)
            recs.append(rec)
        return {
            "baseOffset": b.base_offset,
            "partitionLeaderEpoch": b.partition_leader_epoch,
            "magic": b.magic,
            "crc": b.crc,
            "crcValid": b.crc_valid,
            "attributes": b.attributes,
            "compression": compression.CODEC_NAMES.get(b.compression, str(b.compression)),
            "transactional": b.is_transactional,
            "control": b.is_control,
            "lastOffsetDelta": b.last_offset_delta,
            "baseTimestamp": b.base_timestamp,
            "maxTimestamp": b.max_timestamp,
            "producerId": b.producer_id,
            "producerEpoch": b.producer_epoch,
            "baseSequence": b.base_sequence,
            "records": recs,
        }

    def _control(self, key: bytes | None, value: bytes | None, rec: dict[str, Any], path: str) -> None:
        if key is None:
            self.anomalies.append(f"control record at {path} without a key")
            return
        try:
            ckey, _ = read_control_record_key(key, 0)
        except DecodeError as exc:
            self.anomalies.append(f"control record key at {path}: {exc}")
            return
        ctrl: dict[str, Any] = {"type": ckey.type, "name": _CONTROL_NAMES.get(ckey.type, "UNKNOWN")}
        cname = _CONTROL_CLASSES.get(ckey.type)
        cls = messages.by_name(cname) if cname else None
        if cls is not None and value is not None:
            try:
                ctrl["data"] = cls.decode(value, ckey.version).to_json(ckey.version)
            except DecodeError as exc:
                self.anomalies.append(f"control record {ctrl['name']} at {path}: {exc}")
        rec["controlRecord"] = ctrl


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _text(rec: dict[str, Any], name: str, value: bytes | None) -> None:
    """Add a UTF-8 rendering of ``value`` when it is printable text (keys and values
    are most often strings or JSON, and base64 alone hides them from a reader)."""
    if not value:
        return
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return
    if text.isprintable() or all(c.isprintable() or c in "\r\n\t" for c in text):
        rec[name] = text


def _legacy_json(msg: LegacyMessage, path: str, anomalies: list[str]) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for off, m in flatten_legacy(msg):
        if not m.crc_valid:
            anomalies.append(f"legacy message at {path} offset {off}: CRC-32 mismatch")
        item: dict[str, Any] = {
            "offset": off,
            "magic": m.magic,
            "attributes": m.attributes,
            "timestamp": m.timestamp,
            "key": _b64(m.key),
            "value": _b64(m.value),
            "crcValid": m.crc_valid,
        }
        _text(item, "keyText", m.key)
        _text(item, "valueText", m.value)
        out.append(item)
    return {
        "legacy": True,
        "offset": msg.offset,
        "magic": msg.magic,
        "compression": compression.CODEC_NAMES.get(msg.compression, str(msg.compression)),
        "crcValid": msg.crc_valid,
        "messages": out,
    }


def _partial_json(t: TruncatedBatch) -> dict[str, Any]:
    # Kafka's Fetch may end with a partial batch on purpose (max bytes); not an anomaly.
    return {"partial": True, "offset": t.offset, "available": t.available, "needed": t.needed}


# --------------------------------------------------------------------------- decoder


class _Conn:
    __slots__ = ("api_ranges", "held_records", "history", "pending", "queue", "requests_since", "server")

    def __init__(self, server: str) -> None:
        self.server = server
        # corr -> key, version, timestamp, client id
        self.pending: dict[int, tuple[int, int, int, str | None]] = {}
        self.history: deque[tuple[int, int, int]] = deque(maxlen=_HISTORY)  # corr, key, ver
        # While an orphan response waits, this connection's output waits behind it so
        # frames leave in capture order; a Frame entry is an orphan still to infer.
        self.queue: list[DecodedFrame | Frame] = []
        self.requests_since = 0
        # Records of the decoded frames waiting in ``queue`` (rule 6 bounds them too).
        self.held_records = 0
        self.api_ranges: dict[int, tuple[int, int]] | None = None


def _records_in(f: DecodedFrame | Frame) -> int:
    """Records (and legacy messages) a decoded frame holds; 0 for a frame not decoded yet."""
    if isinstance(f, Frame):
        return 0
    n = 0
    for field_records in f.records:
        for b in field_records.get("batches", ()):
            n += len(b.get("records") or b.get("messages") or ())
    return n


def _server_of(connection_id: str) -> str:
    base = connection_id.split("#", 1)[0]
    return base.rsplit("->", 1)[-1]


class KafkaDecoder:
    """Sans-I/O: :class:`Frame` / :class:`FlowEnd` in, :class:`DecodedFrame` out.

    ``feed`` returns the frames it could decode now. A response waiting for inference
    holds back its connection's later frames (so output keeps capture order) until
    the client sent ``_LOOKAHEAD`` more requests, its connection ends (``FlowEnd``) or
    :meth:`finish`. ``check_canonical``
    re-encodes every complete frame (rule 4). ``decode_records`` controls rule 5.
    Never raises for frame content.
    """

    def __init__(
        self, *, check_canonical: bool = True, decode_records: bool = True, limits: DecodeLimits = DEFAULT_LIMITS
    ) -> None:
        self.check_canonical = check_canonical
        self.decode_records = decode_records
        self.limits = limits
        # What is left of the file budget (rule 6).
        self._file_budget = RecordBudget(limits.file_records, limits.file_bytes)
        self._conns: dict[str, _Conn] = {}
        # ApiVersions ranges by server endpoint, learnt on any connection to it.
        self._server_ranges: dict[str, dict[int, tuple[int, int]]] = {}
        self.flows: list[FlowEnd] = []

    def _conn(self, cid: str) -> _Conn:
        st = self._conns.get(cid)
        if st is None:
            st = self._conns[cid] = _Conn(_server_of(cid))
        return st

    def feed(self, item: Frame | FlowEnd) -> list[DecodedFrame]:
        if isinstance(item, FlowEnd):
            self.flows.append(item)
            st = self._conns.pop(item.flow.connection_id, None)
            return self._resolve(st) if st is not None else []
        st = self._conn(item.connection_id)
        d = item.direction
        p = item.payload
        out: list[DecodedFrame]
        if d == "client" or (d != "server" and len(p) >= 10 and _looks_like_request(p)):
            # (Roles unknown: the flow's classifier could not decide; judge the frame.)
            out = [self._request(st, item)]
            if st.queue:
                st.requests_since += 1
        else:
            out = self._response(st, item)
        if not st.queue:
            return out
        st.queue.extend(out)
        st.held_records += sum(_records_in(f) for f in out)
        # Held frames keep their records in memory: past one frame's budget the orphan is
        # inferred with the requests seen so far rather than holding more.
        if st.requests_since >= _LOOKAHEAD or st.held_records > self.limits.frame_records:
            return self._resolve(st)
        return []

    def finish(self) -> list[DecodedFrame]:
        """End of input: resolve every connection still open."""
        out: list[DecodedFrame] = []
        for st in self._conns.values():
            out.extend(self._resolve(st))
        self._conns.clear()
        return out

    # -- requests --------------------------------------------------------------------

    def _request(self, st: _Conn, fr: Frame) -> DecodedFrame:
        p = fr.payload
        df = DecodedFrame(
            fr.connection_id,
            fr.direction,
            fr.timestamp_ns,
            fr.offset,
            len(p),
            fr.complete,
            "request",
            HEADER,
            payload=p,
        )
        if fr.anomaly:
            df.anomalies.append(fr.anomaly)
        if len(p) < 8:
            df.confidence = TRUNCATED if not fr.complete else UNDECODED
            df.error = f"request header needs 8 bytes, frame has {len(p)}"
            return df
        key, ver, corr = codec.peek_request(p)
        df.api_key, df.api_version, df.correlation_id = key, ver, corr
        st.pending[corr] = (key, ver, fr.timestamp_ns, None)
        st.history.append((corr, key, ver))
        hv = codec.request_header_version(key, ver)
        df.header_version = hv
        try:
            header, pos = RequestHeader.read(p, 0, hv)
        except DecodeError as exc:
            df.confidence = TRUNCATED if not fr.complete else UNDECODED
            df.error = str(exc)
            return df
        df.header = header
        df.client_id = header.client_id
        st.pending[corr] = (key, ver, fr.timestamp_ns, header.client_id)
        if not fr.complete:
            df.confidence = TRUNCATED
            return df
        cls = messages.request_class(key)
        if cls is None:
            df.confidence = UNDECODED
            df.error = f"unknown api key {key}"
            return df
        try:
            body, end = cls.read(p, pos, ver)
        except DecodeError as exc:
            df.confidence = UNDECODED
            df.error = str(exc)
            return df
        self._finish(df, body, end, True)
        return df

    # -- responses -------------------------------------------------------------------

    def _response(self, st: _Conn, fr: Frame) -> list[DecodedFrame]:
        p = fr.payload
        if len(p) < 4:
            df = self._blank_response(fr)
            df.confidence = TRUNCATED if not fr.complete else UNDECODED
            df.error = f"response header needs 4 bytes, frame has {len(p)}"
            return [df]
        corr = _I32.unpack_from(p, 0)[0]
        req = st.pending.pop(corr, None)
        if req is None:
            st.queue.append(fr)
            return []
        key, ver, ts, client_id = req
        df = self._blank_response(fr)
        df.correlation_id = corr
        df.client_id = client_id
        df.latency_ns = fr.timestamp_ns - ts
        self._decode_as(df, key, ver, PAIRED)
        if key == ApiKey.API_VERSIONS and df.body is not None:
            self._learn_ranges(st, df.body)
        return [df]

    def _blank_response(self, fr: Frame) -> DecodedFrame:
        df = DecodedFrame(
            fr.connection_id,
            fr.direction,
            fr.timestamp_ns,
            fr.offset,
            len(fr.payload),
            fr.complete,
            "response",
            UNDECODED,
            payload=fr.payload,
        )
        if fr.anomaly:
            df.anomalies.append(fr.anomaly)
        return df

    def _decode_as(self, df: DecodedFrame, key: int, ver: int, confidence: str) -> None:
        p = df.payload
        df.api_key, df.api_version = key, ver
        hv = codec.response_header_version(key, ver)
        df.header_version = hv
        try:
            header, pos = ResponseHeader.read(p, 0, hv)
        except DecodeError as exc:
            df.confidence = TRUNCATED if not df.complete else UNDECODED
            df.error = str(exc)
            return
        df.header = header
        df.correlation_id = header.correlation_id
        if not df.complete:
            df.confidence = TRUNCATED
            return
        cls = messages.response_class(key)
        if cls is None:
            df.confidence = UNDECODED
            df.error = f"unknown api key {key}"
            return
        if ver > 0 and codec.response_read_version(key, ver, p, pos) == 0:
            # KIP-511: the answer to a too-new ApiVersions request is a v0 body.
            ver = 0
            df.api_version = 0
            df.anomalies.append("ApiVersions ErrorCode.UNSUPPORTED_VERSION answer in the v0 format (KIP-511 fallback)")
        try:
            body, end = cls.read(p, pos, ver)
        except DecodeError as exc:
            df.confidence = UNDECODED
            df.error = str(exc)
            return
        df.confidence = confidence
        self._finish(df, body, end, False)

    def _finish(self, df: DecodedFrame, body: Any, end: int, request: bool) -> None:
        p = df.payload
        df.body = body
        ver = df.api_version
        assert ver is not None
        if end != len(p):
            df.trailing = bytes(p[end:])
            df.anomalies.append(f"{len(df.trailing)} trailing bytes after the body: {df.trailing[:32].hex()}")
        cls = type(body)
        flexible = cls.is_flexible(ver)
        if flexible:
            for tag, data in df.header.unknown_tagged_fields:
                df.unknown_tags.append(UnknownTag("header", tag, bytes(data)))
        if flexible or (self.decode_records and _has_records(cls)):
            fb = self._file_budget
            lim = self.limits
            budget = RecordBudget(min(lim.frame_records, fb.records), min(lim.frame_bytes, fb.decompressed))
            start = (budget.records, budget.decompressed)
            w = _Walker(ver, self.decode_records, budget)
            try:
                w.walk(body, "", flexible, False)
            except MemoryError:
                w.records.clear()
                w.anomalies.append("records kept undecoded, decode budget: out of memory while decoding them")
            fb.records -= start[0] - budget.records
            fb.decompressed -= start[1] - budget.decompressed
            df.unknown_tags.extend(w.tags)
            df.records = w.records
            df.anomalies.extend(w.anomalies)
        if df.unknown_tags:
            df.anomalies.append(f"{len(df.unknown_tags)} unknown tagged field(s)")
        if self.check_canonical:
            again = reencode(df)
            df.canonical = again == p
            if again is None:
                df.anomalies.append("does not re-encode")
            elif not df.canonical:
                at = next(
                    (i for i, (a, b) in enumerate(zip(again, p, strict=False)) if a != b), min(len(again), len(p))
                )
                df.anomalies.append(
                    f"non-canonical encoding: re-encoding differs at byte {at} ({len(again)} vs {len(p)} bytes)"
                )

    def _learn_ranges(self, st: _Conn, body: Any) -> None:
        if getattr(body, "error_code", 0) != 0:
            return
        ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        if ranges:
            st.api_ranges = ranges
            self._server_ranges[st.server] = ranges

    # -- inference ---------------------------------------------------------------------

    def _resolve(self, st: _Conn) -> list[DecodedFrame]:
        out = [self._infer(st, x) if isinstance(x, Frame) else x for x in st.queue]
        st.queue = []
        st.requests_since = 0
        st.held_records = 0
        return out

    def _infer(self, st: _Conn, fr: Frame) -> DecodedFrame:
        corr = _I32.unpack_from(fr.payload, 0)[0]
        ranges = st.api_ranges or self._server_ranges.get(st.server)
        basis = []
        if ranges is not None:
            basis.append("ApiVersions ranges")
        if not fr.complete:
            df = self._blank_response(fr)
            df.correlation_id = corr
            df.confidence = TRUNCATED
            df.anomalies.append("response without its request, cut short by the capture: not inferred")
            return df
        # Step 1: the pairs this client used here, nearest correlation id first.
        seen: dict[tuple[int, int], int] = {}
        for c, k, v in st.history:
            d = abs(c - corr)
            if (k, v) not in seen or d < seen[(k, v)]:
                seen[(k, v)] = d
        near = sorted(seen, key=lambda kv: seen[kv])
        if near:
            good = [kv for kv in near if _trial(fr.payload, *kv) is not None]
            if good:
                df = self._blank_response(fr)
                self._decode_as(df, *good[0], INFERRED_ORDER)
                df.candidates = good
                df.anomalies.append(
                    "response without its request: key and version inferred "
                    "from the correlation-id order of this connection"
                    + (f" (also decodes as {_fmt(good[1:])})" if len(good) > 1 else "")
                )
                return df
        # Step 2: trial decoding of every candidate pair.
        if len(fr.payload) > _TRIAL_MAX_SIZE:
            df = self._blank_response(fr)
            df.correlation_id = corr
            df.error = "response without its request, too large to trial-decode"
            return df
        results = list(_trials(fr.payload, ranges))
        df = self._blank_response(fr)
        df.correlation_id = corr
        if not results:
            df.error = "response without its request; no (api key, version) decodes it"
            return df
        keys = sorted({k for k, _v in results}, key=_preference)
        best_key = keys[0]
        best_ver = max(v for k, v in results if k == best_key)
        conf = TRIAL_UNIQUE if len(keys) == 1 else TRIAL_AMBIGUOUS
        self._decode_as(df, best_key, best_ver, conf)
        df.candidates = sorted(results, key=lambda kv: (_preference(kv[0]), -kv[1]))
        note = "response without its request: trial decoding"
        if basis:
            note += " within the server's ApiVersions ranges"
        if conf == TRIAL_UNIQUE:
            versions = sorted(v for _k, v in results)
            df.anomalies.append(
                f"{note} leaves one api key ({codec.api_name(best_key)}, versions {_ranges_text(versions)})"
            )
        else:
            df.anomalies.append(
                f"{note} is ambiguous: {len(keys)} api keys decode it "
                f"({', '.join(codec.api_name(k) for k in keys[:8])}"
                f"{'...' if len(keys) > 8 else ''})"
            )
        return df


def _looks_like_request(p: bytes) -> bool:
    key, ver = _HH.unpack_from(p, 0)
    cid_len: int = _HH.unpack_from(p, 8)[0]
    return 0 <= key <= 100 and 0 <= ver <= 30 and -1 <= cid_len <= len(p) - 10


def _fmt(pairs: list[tuple[int, int]]) -> str:
    return ", ".join(f"{codec.api_name(k)} v{v}" for k, v in pairs[:6])


def _ranges_text(versions: list[int]) -> str:
    parts = []
    start = prev = versions[0]
    for v in versions[1:]:
        if v != prev + 1:
            parts.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = v
        prev = v
    parts.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def _preference(key: int) -> int:
    try:
        return _POPULAR.index(key)
    except ValueError:
        return len(_POPULAR) + key


def _trial(p: bytes, key: int, ver: int) -> Any:
    """The body when ``p`` decodes as a (key, ver) response consuming every byte, with no
    unknown tags and a byte-exact re-encoding; else None."""
    cls = messages.response_class(key)
    if cls is None or not cls.VALID_VERSIONS[0] <= ver <= cls.VALID_VERSIONS[1]:
        return None
    hv = codec.response_header_version(key, ver)
    try:
        header, pos = ResponseHeader.read(p, 0, hv)
        body, end = cls.read(p, pos, ver)
    except DecodeError:
        return None
    if end != len(p):
        return None
    flexible = cls.is_flexible(ver)
    if flexible:
        if header.unknown_tagged_fields:
            return None
        w = _Walker(ver, False)
        w.walk(body, "", True, False)
        if w.tags:
            return None
    out = bytearray()
    try:
        header.write(out, hv)
        body.write(out, ver)
    except EncodeError:
        return None
    return body if out == p else None


def _trials(p: bytes, ranges: dict[int, tuple[int, int]] | None) -> Iterator[tuple[int, int]]:
    keys: Iterable[int] = sorted(ranges) if ranges is not None else sorted(messages.RESPONSES)
    for key in keys:
        cls = messages.response_class(key)
        if cls is None:
            continue
        lo, hi = cls.VALID_VERSIONS
        if ranges is not None:
            lo, hi = max(lo, ranges[key][0]), min(hi, ranges[key][1])
        for ver in range(lo, hi + 1):
            if _trial(p, key, ver) is not None:
                yield key, ver


def is_request(frame: Frame) -> bool:
    """Classifier for connections whose client side is unknown (no SYN, no port given):
    the frame is a request when it decodes whole as one. A header check alone is fooled
    by responses, whose first bytes (correlation id, throttle time) often look like a
    small api key and version."""
    if not looks_like_request(frame):
        return False
    p = frame.payload
    key, ver = _HH.unpack_from(p, 0)
    cls = messages.request_class(key)
    if cls is None or not cls.VALID_VERSIONS[0] <= ver <= cls.VALID_VERSIONS[1]:
        return False
    try:
        codec.decode_request(p)
    except DecodeError:
        return False
    return True


def decode_capture(
    fileobj: BinaryIO,
    *,
    ports: Iterable[int] | None = None,
    check_canonical: bool = True,
    decoder: KafkaDecoder | None = None,
    on_truncated: Callable[[int], None] | None = None,
) -> Iterator[DecodedFrame]:
    """Decode every Kafka frame of a pcap/pcapng file object, streaming. Finished
    connections are left in ``decoder.flows`` for summaries. ``on_truncated`` gets the
    file offset of a last record the capture cut short.

    Raises:
        DecodeError: the capture file itself is malformed.
    """
    dec = decoder if decoder is not None else KafkaDecoder(check_canonical=check_canonical)
    feed = dec.feed
    for item in iter_frames(fileobj, ports=ports, classifier=is_request, on_truncated=on_truncated):
        out = feed(item)
        if out:
            yield from out
    yield from dec.finish()
