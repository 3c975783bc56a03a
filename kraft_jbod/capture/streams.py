"""Kafka framing over reassembled TCP streams, and flows with client/server sides.

Strategy: a :class:`FrameSplitter` per direction consumes that direction's
:class:`~.reassembly.Data`/:class:`~.reassembly.Gap` chunks and cuts the bytes into
Kafka frames (int32 big-endian size, then ``size`` payload bytes). A
:class:`FrameExtractor` drives decoder, reassembler and splitters from segments, decides
which side is the client and emits frames as soon as they complete, so memory is bounded
by the open connections' buffers, not by the capture.

Rules:

1. While in sync, the size prefix is trusted; a frame is emitted complete when all its
   bytes were captured.
2. A gap inside a frame whose size is known yields that frame as incomplete, carrying the
   bytes captured before the gap; the splitter stays in sync at the frame's end, so
   bytes of the frame after the gap are dropped and the next frame is found exactly.
3. A gap at a frame boundary, or inside a size prefix, or running past the frame's end,
   loses sync. So does a size outside ``0 < size <= max_frame``. Out of sync, the
   splitter scans byte by byte for a position whose size is sane (at most
   ``max_resync_frame``, default 8 MiB), whose first payload bytes pass the direction's
   plausibility check (a pluggable :data:`FrameCheck`), and whose frame either ends
   exactly where the captured bytes end or is followed by another plausible start (the
   splitter waits for those bytes). The first frame found carries an anomaly saying how
   many bytes were skipped. Scanning more
   than ``max_scan`` bytes without a candidate abandons the direction (non-Kafka traffic
   would otherwise cost a Python loop per byte).
4. A stream that starts mid-connection (no SYN) starts out of sync, so its first frame is
   checked too. With a SYN, offset 0 is a frame start.
5. Frame ``direction`` names the sending side: ``client``/``server`` once known, else
   ``a``/``b`` as in :class:`~.reassembly.ConnectionKey`.
"""

from __future__ import annotations

import re
import struct
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Final

from kraft_jbod.capture.packets import TcpSegment
from kraft_jbod.capture.reassembly import (
    ChunkEvent,
    Connection,
    ConnectionKey,
    Data,
    Event,
    Gap,
    TcpReassembler,
    format_endpoint,
)

__all__ = [
    "DEFAULT_MAX_FRAME",
    "Classifier",
    "Flow",
    "FlowEnd",
    "Frame",
    "FrameCheck",
    "FrameExtractor",
    "FrameSplitter",
    "looks_like_request",
    "plausible_any",
    "plausible_request",
    "plausible_response",
]

DEFAULT_MAX_FRAME: Final = 100 << 20
DEFAULT_MAX_SCAN: Final = 1 << 20
DEFAULT_MAX_RESYNC_FRAME: Final = 8 << 20
#: How many payload bytes a :data:`FrameCheck` sees (fewer when the frame is shorter).
CHECK_HEAD: Final = 16

_I32 = struct.Struct(">i")
_REQ_HEAD = struct.Struct(">hhih")

#: ``check(size, head) -> plausible``: ``head`` is the first ``min(size, CHECK_HEAD)``
#: payload bytes of a candidate frame of ``size`` bytes (``size`` is already in bounds).
FrameCheck = Callable[[int, bytes], bool]
#: ``classifier(frame) -> True if frame is a request``; used on a connection's first
#: complete frame when neither a SYN nor the port set says which side is the client.
Classifier = Callable[["Frame"], bool]


def plausible_request(size: int, head: bytes) -> bool:
    """A request header starts ``api_key`` 0..100, ``api_version`` 0..30."""
    if size < 8 or len(head) < 4:
        return False
    return head[0] == 0 and head[1] <= 100 and head[2] == 0 and head[3] <= 30


def plausible_response(size: int, head: bytes) -> bool:
    """A response starts with a non-negative correlation id (clients count up from 0)."""
    return size >= 4 and len(head) >= 4 and head[0] < 0x80


def plausible_any(size: int, head: bytes) -> bool:
    """Used while the direction's role is unknown."""
    return plausible_request(size, head) or plausible_response(size, head)


def looks_like_request(frame: Frame) -> bool:
    """Default :data:`Classifier`: the payload parses as a request header (v1+ layout:
    api_key, api_version, correlation_id, nullable client_id that fits the frame)."""
    p = frame.payload
    if len(p) < 10:
        return False
    api_key: int
    version: int
    cid_len: int
    api_key, version, _corr, cid_len = _REQ_HEAD.unpack_from(p, 0)
    return 0 <= api_key <= 100 and 0 <= version <= 30 and -1 <= cid_len <= len(p) - 10


@dataclass(frozen=True, slots=True)
class Frame:
    """One Kafka frame: ``payload`` excludes the 4-byte size. ``offset`` is the stream
    offset of the size prefix; ``timestamp_ns`` that of the packet carrying it.
    ``complete`` is false when part of the frame was not captured; ``anomaly`` explains
    anything unusual (gap, resynchronisation, end of stream)."""

    connection_id: str
    direction: str
    offset: int
    timestamp_ns: int
    payload: bytes
    complete: bool
    anomaly: str | None = None


class FrameSplitter:
    """Cuts one direction's chunk sequence into :class:`Frame` objects (see rules 1-4).

    ``feed`` takes chunks in stream order (as :class:`~.reassembly.TcpReassembler` emits
    them); ``finish`` reports a frame left open at the end. ``anomalies`` lists
    ``(offset, text)`` for events not tied to an emitted frame. Never raises for content.
    """

    def __init__(
        self,
        connection_id: str,
        direction: str,
        *,
        check: FrameCheck = plausible_any,
        max_frame: int = DEFAULT_MAX_FRAME,
        max_scan: int = DEFAULT_MAX_SCAN,
        max_resync_frame: int = DEFAULT_MAX_RESYNC_FRAME,
        synced: bool = True,
    ) -> None:
        self.connection_id = connection_id
        self.direction = direction
        self.check = check
        self.max_frame = max_frame
        self.max_scan = max_scan
        self.max_resync_frame = min(max_resync_frame, max_frame)
        self.synced = synced
        self.abandoned = False
        self.anomalies: list[tuple[int, str]] = []
        self.frames_emitted = 0
        self._buf = bytearray()
        self._off = 0  # stream offset of _buf[0]
        self._times: deque[tuple[int, int]] = deque()  # (offset, ts) of buffered chunks
        self._skip_until = 0  # drop bytes below this offset (rest of a broken frame)
        self._skipped = 0  # bytes skipped while out of sync, reported on the next frame
        self._pending_note: str | None = None
        self._undecided: list[int] = []  # resync candidates waiting for bytes (offsets)
        self._scan_from = 0  # stream offset where resync scanning resumes
        # A size byte can start a sane frame only if it is <= max_frame >> 24.
        top = re.escape(bytes([min(max_frame >> 24, 0x7F)]))
        self._size_start = re.compile(b"[\\x00-" + top + b"]")

    # -- input ------------------------------------------------------------------

    def feed(self, chunk: Data | Gap) -> list[Frame]:
        """Consume the next chunk; return the frames it completes."""
        if self.abandoned:
            return []
        if isinstance(chunk, Gap):
            return self._on_gap(chunk.offset, chunk.length)
        data = chunk.data
        off = chunk.offset
        if self._skip_until > off:
            cut = self._skip_until - off
            if cut >= len(data):
                return []
            data = data[cut:]
            off += cut
        if not self._buf:
            self._off = off
            if self.synced:
                fast = self._whole_frames(data, off, chunk.timestamp_ns)
                if fast is not None:
                    return fast
        self._times.append((off, chunk.timestamp_ns))
        self._buf += data
        return self._parse()

    def _whole_frames(self, data: bytes, off: int, ts: int) -> list[Frame] | None:
        """Fast path for the common case: an empty buffer and a chunk holding exactly
        one or more whole frames, sliced straight from the chunk without buffering."""
        n = len(data)
        pos = 0
        ends: list[tuple[int, int]] = []
        while pos < n:
            if n - pos < 4:
                return None
            size = _I32.unpack_from(data, pos)[0]
            if size <= 0 or size > self.max_frame or pos + 4 + size > n:
                return None
            ends.append((pos, pos + 4 + size))
            pos += 4 + size
        self._times.clear()
        self._times.append((off, ts))
        out = [self._frame(off + a, data[a + 4 : b], True) for a, b in ends]
        self._off = off + n
        return out

    def finish(self) -> list[Frame]:
        """End of stream: a partly captured frame is returned incomplete."""
        out: list[Frame] = []
        buf = self._buf
        if self.abandoned or not buf:
            return out
        if self.synced and len(buf) >= 4:
            size = _I32.unpack_from(buf, 0)[0]
            out.append(
                self._frame(
                    self._off, bytes(buf[4:]), False, f"stream ended {size + 4 - len(buf)} bytes before the frame's end"
                )
            )
        else:
            self._skipped += len(buf)
            self.anomalies.append((self._off, f"{len(buf)} bytes at the end of the stream are not a complete frame"))
        buf.clear()
        return out

    # -- internals ---------------------------------------------------------------

    def _ts_at(self, offset: int) -> int:
        times = self._times
        while len(times) > 1 and times[1][0] <= offset:
            times.popleft()
        return times[0][1] if times else 0

    def _frame(self, offset: int, payload: bytes, complete: bool, anomaly: str | None = None) -> Frame:
        note = self._pending_note
        if note is not None:
            anomaly = note if anomaly is None else f"{note}; {anomaly}"
            self._pending_note = None
        self.frames_emitted += 1
        return Frame(self.connection_id, self.direction, offset, self._ts_at(offset), payload, complete, anomaly)

    def _parse(self) -> list[Frame]:
        out: list[Frame] = []
        buf = self._buf
        pos = 0
        n = len(buf)
        max_frame = self.max_frame
        while True:
            if not self.synced:
                found = self._scan(pos)
                if found < 0:
                    # Keep the unscanned tail that may still start a frame.
                    pos = max(pos, -found - 1)
                    break
                pos = found
            if n - pos < 4:
                break
            size = _I32.unpack_from(buf, pos)[0]
            if size <= 0 or size > max_frame:
                self.anomalies.append((self._off + pos, f"implausible frame size {size}; resynchronising"))
                self.synced = False
                pos += 1
                self._skipped += 1
                continue
            end = pos + 4 + size
            if end > n:
                break
            out.append(self._frame(self._off + pos, bytes(memoryview(buf)[pos + 4 : end]), True))
            pos = end
        if pos:
            del buf[:pos]
            self._off += pos
        return out

    def _scan(self, pos: int) -> int:
        """Find a plausible frame start at or after ``pos``. Returns it, or ``-(k + 1)``
        where ``k`` is the first position to keep: the earliest candidate still waiting
        for bytes, or where scanning stopped. Waiting candidates are remembered (as
        stream offsets) so each position is scanned once; a later candidate that is
        already confirmed wins over an earlier one still waiting."""
        buf = self._buf
        n = len(buf)
        base = self._off
        start = pos
        found = -1
        waiting: list[int] = []
        for a in self._undecided:
            p = a - base
            if p < pos:
                continue
            size = _I32.unpack_from(buf, p)[0]
            need = min(size, CHECK_HEAD)
            verdict = self._candidate(p, size, need) if n - p - 4 >= need else None
            if verdict:
                found = p
                break
            if verdict is None:
                waiting.append(a)
        p = max(pos, self._scan_from - base)
        if found < 0:
            search = self._size_start.search
            while True:
                m = search(buf, p)
                if m is None:
                    p = n
                    break
                p = m.start()
                if n - p < 4:
                    break
                size = _I32.unpack_from(buf, p)[0]
                if 0 < size <= self.max_resync_frame:
                    need = min(size, CHECK_HEAD)
                    if n - p - 4 < need:
                        break
                    verdict = self._candidate(p, size, need)
                    if verdict:
                        found = p
                        break
                    if verdict is None:
                        waiting.append(base + p)
                p += 1
            self._scan_from = base + p
        if found >= 0:
            self._undecided = []
            self._scan_from = 0
            self.synced = True
            self._skipped += found - start
            if self._skipped:
                self._pending_note = f"resynchronised after skipping {self._skipped} bytes"
                self._skipped = 0
            return found
        self._undecided = waiting
        keep = min(waiting[0] - base, p) if waiting else p
        self._skipped += keep - start
        if self._skipped > self.max_scan:
            self.abandoned = True
            self.anomalies.append(
                (base + keep, f"no plausible frame start in {self._skipped} bytes; direction abandoned")
            )
            self._buf.clear()
            return -(n + 1)
        return -(keep + 1)

    def _candidate(self, pos: int, size: int, need: int) -> bool | None:
        """Judge a resync candidate: its head must pass the check, and the frame must end
        exactly where the buffered bytes end (Kafka peers write whole frames) or be
        followed by another plausible frame start. ``None``: wait for more bytes."""
        buf = self._buf
        if not self.check(size, bytes(buf[pos + 4 : pos + 4 + need])):
            return False
        end = pos + 4 + size
        n = len(buf)
        if end == n:
            return True
        if end + 4 > n:
            return None
        nxt = _I32.unpack_from(buf, end)[0]
        if not 0 < nxt <= self.max_frame:
            return False
        nneed = min(nxt, CHECK_HEAD)
        if end + 4 + nneed > n:
            return None
        return self.check(nxt, bytes(buf[end + 4 : end + 4 + nneed]))

    def _on_gap(self, offset: int, length: int) -> list[Frame]:
        end = offset + length
        buf = self._buf
        out: list[Frame] = []
        if self._skip_until > offset:
            # The gap falls in the dropped tail of an already reported frame.
            if end > self._skip_until:
                self._lose_sync(end)
            return out
        if self.synced and len(buf) >= 4:
            size = _I32.unpack_from(buf, 0)[0]
            frame_end = self._off + 4 + size
            out.append(
                self._frame(
                    self._off,
                    bytes(buf[4:]),
                    False,
                    f"{min(length, frame_end - offset)} bytes missing at frame byte {offset - self._off - 4} of {size}",
                )
            )
            buf.clear()
            if end < frame_end:
                self._skip_until = frame_end
                self._off = frame_end
            elif end == frame_end:
                self._off = end
            else:
                self._lose_sync(end)
            return out
        if buf:
            self._skipped += len(buf)
            self.anomalies.append((self._off, f"{len(buf)} bytes before a gap are not a complete frame"))
        self._lose_sync(end)
        return out

    def _lose_sync(self, resume: int) -> None:
        self._buf.clear()
        self._times.clear()
        self._off = resume
        self._skip_until = 0
        self._undecided = []
        self._scan_from = 0
        self.synced = False


# -- flows ----------------------------------------------------------------------------


@dataclass(slots=True)
class Flow:
    """One connection's frames, both directions, in the order they completed.

    ``client_source`` says how the client was identified: ``syn``, ``port``,
    ``classifier`` or ``unknown`` (then ``sides`` is ``("a", "b")``).
    ``endpoints`` are the text endpoints of ``sides[0]`` and ``sides[1]``.
    """

    connection_id: str
    endpoints: tuple[str, str]
    sides: tuple[str, str]
    client_source: str
    first_timestamp_ns: int = 0
    last_timestamp_ns: int = 0
    close_reason: str = ""
    gap_bytes: int = 0
    retransmitted_bytes: int = 0
    conflicting_bytes: int = 0
    anomalies: list[str] = field(default_factory=list)
    frames: list[Frame] = field(default_factory=list)

    def frames_from(self, direction: str) -> list[Frame]:
        """Frames sent by ``direction`` (``client``, ``server``, ``a`` or ``b``)."""
        return [f for f in self.frames if f.direction == direction]


@dataclass(frozen=True, slots=True)
class FlowEnd:
    """Emitted by :class:`FrameExtractor` after a connection's last frame; ``flow`` has
    the summary fields filled and an empty ``frames`` list."""

    flow: Flow


class _ConnState:
    __slots__ = ("decided", "flow", "held", "labels", "splitters", "swapped")

    def __init__(self, flow: Flow, splitters: list[FrameSplitter], decided: bool) -> None:
        self.flow = flow
        self.splitters = splitters
        self.labels = flow.sides
        self.decided = decided
        self.held: list[Frame] = []
        self.swapped = False


class FrameExtractor:
    """Segments in, :class:`Frame` and :class:`FlowEnd` objects out (sans-I/O).

    Client side: the SYN when seen; else the side whose port is in ``ports`` (when only
    one is); else ``classifier`` on the connection's first complete frame (frames are
    held back until then, so every frame carries final labels). ``request_check`` and
    ``response_check`` are the resync plausibility checks per role.
    """

    def __init__(
        self,
        *,
        ports: Iterable[int] | None = None,
        classifier: Classifier = looks_like_request,
        request_check: FrameCheck = plausible_request,
        response_check: FrameCheck = plausible_response,
        max_frame: int = DEFAULT_MAX_FRAME,
        max_buffer_bytes: int = 16 << 20,
    ) -> None:
        self.ports = frozenset(ports) if ports is not None else frozenset()
        self.classifier = classifier
        self.request_check = request_check
        self.response_check = response_check
        self.max_frame = max_frame
        self.reassembler = TcpReassembler(max_buffer_bytes=max_buffer_bytes)
        self._conns: dict[int, _ConnState] = {}

    def feed(self, seg: TcpSegment) -> list[Frame | FlowEnd]:
        """Process one segment; return frames and flow ends it completes."""
        return self._handle(self.reassembler.feed(seg))

    def flush(self) -> list[Frame | FlowEnd]:
        """End of input: close every open connection."""
        return self._handle(self.reassembler.flush())

    def _state(self, conn: Connection) -> _ConnState:
        st = self._conns.get(id(conn))
        if st is not None:
            return st
        key = conn.key
        ends = (format_endpoint(key.a_host, key.a_port), format_endpoint(key.b_host, key.b_port))
        source = "syn" if key.client_known else "unknown"
        swap = False
        if not key.client_known and self.ports:
            a_in = key.a_port in self.ports
            b_in = key.b_port in self.ports
            if a_in != b_in:
                source = "port"
                swap = a_in
        cid = conn.id
        sides = conn.sides
        if source == "port":
            sides = ("server", "client") if swap else ("client", "server")
            cid = _swap_id(conn, swap)
        flow = Flow(cid, ends, sides, source, conn.first_timestamp_ns)
        checks: list[FrameCheck] = [plausible_any, plausible_any]
        if source != "unknown":
            checks = [self.request_check if s == "client" else self.response_check for s in sides]
        splitters = [
            FrameSplitter(cid, sides[i], check=checks[i], max_frame=self.max_frame, synced=key.client_known)
            for i in (0, 1)
        ]
        st = _ConnState(flow, splitters, source != "unknown")
        st.swapped = swap
        if swap:
            flow.sides = ("client", "server")
            flow.endpoints = (ends[1], ends[0])
        self._conns[id(conn)] = st
        return st

    def _handle(self, events: list[Event]) -> list[Frame | FlowEnd]:
        out: list[Frame | FlowEnd] = []
        for ev in events:
            if isinstance(ev, ChunkEvent):
                conn = ev.connection
                st = self._conns.get(id(conn)) or self._state(conn)
                i = 0 if ev.side == conn.sides[0] else 1
                frames = st.splitters[i].feed(ev.chunk)
                if frames:
                    self._emit(st, conn, frames, out)
            else:
                conn = ev.connection
                if id(conn) not in self._conns:
                    continue
                st = self._conns.pop(id(conn))
                for sp in st.splitters:
                    frames = sp.finish()
                    if frames:
                        self._emit(st, conn, frames, out)
                if st.held:
                    out.extend(st.held)
                    st.held = []
                flow = st.flow
                flow.last_timestamp_ns = conn.last_timestamp_ns
                flow.close_reason = conn.close_reason
                flow.gap_bytes = conn.gap_bytes
                flow.retransmitted_bytes = conn.retransmitted_bytes
                flow.conflicting_bytes = conn.conflicting_bytes
                flow.anomalies = list(conn.anomalies) + [
                    f"{sp.direction}: {text} (offset {off})" for sp in st.splitters for off, text in sp.anomalies
                ]
                out.append(FlowEnd(flow))
        return out

    def _emit(self, st: _ConnState, conn: Connection, frames: list[Frame], out: list[Frame | FlowEnd]) -> None:
        if st.decided:
            out.extend(frames)
            return
        st.held.extend(frames)
        first = next((f for f in st.held if f.complete), None)
        if first is None:
            return
        is_req = self.classifier(first)
        # The sender of the first complete frame is the client iff it is a request.
        sender_a = first.direction == "a"
        client_is_a = sender_a == is_req
        swap = not client_is_a
        cid = _swap_id(conn, swap)
        sides = ("server", "client") if swap else ("client", "server")
        mapping = {"a": sides[0], "b": sides[1]}
        for i, sp in enumerate(st.splitters):
            sp.connection_id = cid
            sp.direction = sides[i]
            sp.check = self.request_check if sides[i] == "client" else self.response_check
        flow = st.flow
        flow.connection_id = cid
        flow.client_source = "classifier"
        flow.sides = ("client", "server")
        if swap:
            flow.endpoints = (flow.endpoints[1], flow.endpoints[0])
        st.decided = True
        out.extend(replace(f, connection_id=cid, direction=mapping[f.direction]) for f in st.held)
        st.held = []


def _swap_id(conn: Connection, swap: bool) -> str:
    key: ConnectionKey = conn.key.swapped() if swap else conn.key
    return key.id if conn.serial == 1 else f"{key.id}#{conn.serial}"
