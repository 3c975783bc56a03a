"""TCP reassembly: segments in, per-direction ordered byte chunks with explicit gaps out.

Strategy: each connection has two half-streams (one per sending side). A half-stream
maps sequence numbers to 0-based stream offsets: offset 0 is ISN+1 when the SYN was seen,
otherwise the first sequence number seen (the capture started mid-connection). Offsets
are 64-bit, unwrapped around the next expected offset, so 32-bit wraparound is invisible
downstream. Segments at the next expected offset are delivered at once; later ones wait
in an out-of-order buffer keyed by offset; earlier ones are retransmissions.

Rules:

1. Output per half-stream is a strictly contiguous sequence of :class:`Data` and
   :class:`Gap` chunks: each chunk starts where the previous one ended, from offset 0.
   Bytes are never invented: a byte is either delivered once, as captured, or counted
   inside a Gap.
2. First arrival wins. Bytes that arrive again (retransmissions, overlaps) are trimmed;
   when they can still be compared (the last ``history_bytes`` delivered per direction)
   and differ, the connection records an anomaly and counts the differing bytes in
   ``conflicting_bytes``.
3. A hole becomes a Gap only when the missing bytes can no longer arrive: the peer has
   acknowledged past the hole while later data is waiting; the connection ends (FIN,
   RST, or :meth:`TcpReassembler.flush` at end of capture) with later data buffered, an
   announced FIN offset or an acknowledgement beyond what was delivered; or the
   out-of-order buffer exceeds ``max_buffer_bytes`` (then the hole before the earliest
   buffered segment is given up, so memory per direction stays below the limit plus one
   segment). Bytes that arrive after their hole was reported are dropped and counted.
4. A payload cut short by the snap length delivers what was captured followed by a Gap
   for the rest.
5. The side that sent the SYN (or received the SYN-ACK) is the client: sides are then
   named ``client``/``server``; without a handshake they are ``a`` (the sender of the
   first packet with payload or FIN) and ``b``.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Final

from kraft_jbod.capture.packets import TCP_ACK, TCP_FIN, TCP_RST, TCP_SYN, TcpSegment

__all__ = [
    "ChunkEvent",
    "Connection",
    "ConnectionClosed",
    "ConnectionKey",
    "Data",
    "Event",
    "Gap",
    "TcpReassembler",
    "format_endpoint",
]

_MASK: Final = 0xFFFFFFFF
_HALF: Final = 1 << 31
_WRAP: Final = 1 << 32
MAX_ANOMALIES: Final = 100


@dataclass(frozen=True, slots=True)
class Data:
    """Captured bytes of one direction starting at stream ``offset``; ``timestamp_ns`` and
    ``packet_index`` are those of the packet that carried the first of them."""

    offset: int
    data: bytes
    timestamp_ns: int
    packet_index: int

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@dataclass(frozen=True, slots=True)
class Gap:
    """``length`` bytes of one direction, from stream ``offset``, that were not captured."""

    offset: int
    length: int

    @property
    def end(self) -> int:
        return self.offset + self.length


Chunk = Data | Gap


def format_endpoint(host: str, port: int) -> str:
    """``10.0.0.1:9092`` or ``[::1]:9092``."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class ConnectionKey:
    """The two endpoints of a connection. When ``client_known`` the ``a`` side is the
    client (it sent the SYN); otherwise ``a`` is merely the first side seen sending."""

    a_host: str
    a_port: int
    b_host: str
    b_port: int
    client_known: bool

    @property
    def id(self) -> str:
        """Stable text id, ``a->b``: ``10.0.0.1:51234->10.0.0.2:9092``."""
        return f"{format_endpoint(self.a_host, self.a_port)}->" + format_endpoint(self.b_host, self.b_port)

    def swapped(self, client_known: bool = True) -> ConnectionKey:
        """The same connection seen from the other side."""
        return ConnectionKey(self.b_host, self.b_port, self.a_host, self.a_port, client_known)


class _Half:
    """Reassembly state of one direction."""

    __slots__ = (
        "acked",
        "base",
        "done",
        "fin",
        "heap",
        "history",
        "history_bytes",
        "next",
        "pending",
        "pending_bytes",
        "syn_isn",
    )

    def __init__(self) -> None:
        self.base: int | None = None  # sequence number of offset 0
        self.next = 0  # next offset to deliver
        self.pending: dict[int, tuple[bytes, int, int, int]] = {}  # off -> (data, missing, ts, idx)
        self.heap: list[int] = []
        self.pending_bytes = 0
        self.fin: int | None = None  # offset of the FIN
        self.acked = -1  # highest offset the peer acknowledged
        self.history: deque[tuple[int, bytes]] = deque()
        self.history_bytes = 0
        self.syn_isn: int | None = None
        self.done = False  # delivered up to the FIN, or closed

    def offset(self, seq: int) -> int:
        assert self.base is not None
        d = (seq - self.base - self.next) & _MASK
        if d >= _HALF:
            d -= _WRAP
        return self.next + d


@dataclass(slots=True, eq=False)
class Connection:
    """One TCP connection, as reassembled so far. ``sides[0]`` names the sender of the
    ``a`` side (``client`` when known), ``sides[1]`` the other one."""

    key: ConnectionKey
    serial: int = 1
    first_timestamp_ns: int = 0
    last_timestamp_ns: int = 0
    closed: bool = False
    close_reason: str = ""
    retransmitted_bytes: int = 0
    conflicting_bytes: int = 0
    gap_count: int = 0
    gap_bytes: int = 0
    late_bytes: int = 0
    anomalies: list[str] = field(default_factory=list)
    halves: tuple[_Half, _Half] = field(default_factory=lambda: (_Half(), _Half()))

    @property
    def id(self) -> str:
        """The key's id, with ``#N`` appended for the N-th reuse of the same 4-tuple."""
        return self.key.id if self.serial == 1 else f"{self.key.id}#{self.serial}"

    @property
    def sides(self) -> tuple[str, str]:
        return ("client", "server") if self.key.client_known else ("a", "b")

    def note(self, message: str) -> None:
        """Record an anomaly (the first :data:`MAX_ANOMALIES` are kept)."""
        if len(self.anomalies) < MAX_ANOMALIES:
            self.anomalies.append(message)


@dataclass(frozen=True, slots=True)
class ChunkEvent:
    """Next chunk of ``connection``'s stream sent by ``side`` (a name from ``sides``)."""

    connection: Connection
    side: str
    chunk: Chunk


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """No more chunks will come for ``connection``; ``reason`` is ``fin``, ``rst``,
    ``end of capture`` or ``reused`` (a new SYN on the same 4-tuple)."""

    connection: Connection
    reason: str


Event = ChunkEvent | ConnectionClosed


class TcpReassembler:
    """Feeds :class:`TcpSegment` records in capture order; returns :data:`Event` lists.

    ``max_buffer_bytes`` bounds the out-of-order buffer of each direction (see rule 3);
    ``history_bytes`` how much delivered data per direction is kept to compare
    retransmissions with; ``max_closed`` how many closed 4-tuples are remembered so that
    stray ACKs and retransmissions after the close do not start phantom connections.
    Nothing here raises for packet content.
    """

    def __init__(
        self,
        *,
        max_buffer_bytes: int = 16 << 20,
        history_bytes: int = 64 << 10,
        max_closed: int = 65536,
    ) -> None:
        self.max_buffer_bytes = max_buffer_bytes
        self.history_bytes = history_bytes
        self.max_closed = max_closed
        # (src, sport, dst, dport) -> (connection, index of the half src sends)
        self._table: dict[tuple[str, int, str, int], tuple[Connection, int]] = {}
        self._closed: OrderedDict[tuple[str, int, str, int], int] = OrderedDict()

    @property
    def open_connections(self) -> list[Connection]:
        seen: dict[int, Connection] = {}
        for conn, _ in self._table.values():
            seen[id(conn)] = conn
        return list(seen.values())

    # -- public entry points ---------------------------------------------------

    def feed(self, seg: TcpSegment) -> list[Event]:
        """Process one segment; return the events it completes (often none or one)."""
        events: list[Event] = []
        tup = (seg.src, seg.sport, seg.dst, seg.dport)
        flags = seg.flags
        entry = self._table.get(tup)
        if flags & TCP_SYN:
            entry = self._on_syn(seg, tup, entry, events)
            if entry is None:
                return events
        elif entry is None:
            entry = self._on_midstream(seg, tup)
            if entry is None:
                return events
        conn, i = entry
        conn.last_timestamp_ns = seg.timestamp_ns
        me = conn.halves[i]
        peer = conn.halves[1 - i]
        side = conn.sides[i]
        if flags & TCP_RST:
            self._close(conn, "rst", events)
            return events
        if flags & TCP_ACK and peer.base is not None:
            ack_off = peer.offset(seg.ack)
            if ack_off > peer.acked:
                peer.acked = ack_off
                if peer.heap and ack_off > peer.next and not peer.done:
                    self._skip_acked(conn, peer, conn.sides[1 - i], events)
                    if self._maybe_done(conn, peer, me, events):
                        return events
        seq = seg.seq
        if flags & TCP_SYN:
            seq = (seq + 1) & _MASK
        if me.base is None:
            me.base = seq
        plen = seg.payload_len
        if plen or flags & TCP_FIN:
            off = me.offset(seq)
            payload = seg.payload
            missing = plen - len(payload)
            if flags & TCP_FIN:
                _record_fin(conn, me, side, off + plen)
            if me.done:
                _count_late_data(conn, me, side, off, plen)
            elif plen:
                self._accept(conn, me, side, off, payload, missing, seg.timestamp_ns, seg.index, events)
            self._maybe_done(conn, me, peer, events)
        return events

    def _on_midstream(self, seg: TcpSegment, tup: tuple[str, int, str, int]) -> tuple[Connection, int] | None:
        """A segment of no open connection and no SYN: start a connection seen from the
        middle (client side unknown), or ``None`` when there is nothing to reassemble."""
        flags = seg.flags
        if not (seg.payload_len or flags & TCP_FIN) or flags & TCP_RST:
            return None  # stray ACK/RST: nothing to reassemble
        if tup in self._closed:
            return None  # retransmission or late segment after the close
        return self._new(ConnectionKey(seg.src, seg.sport, seg.dst, seg.dport, False), tup, 1, seg.timestamp_ns)

    def _maybe_done(self, conn: Connection, half: _Half, other: _Half, events: list[Event]) -> bool:
        """Mark ``half`` done once delivered up to its FIN; close when both are."""
        if half.fin is not None and half.next >= half.fin and not half.done and not half.heap:
            half.done = True
            if other.done:
                self._close(conn, "fin", events)
                return True
        return False

    def flush(self) -> list[Event]:
        """End of capture: report every open connection's holes and close it."""
        events: list[Event] = []
        for conn in self.open_connections:
            self._close(conn, "end of capture", events)
        return events

    # -- connection table --------------------------------------------------------

    def _new(self, key: ConnectionKey, tup: tuple[str, int, str, int], serial: int, ts: int) -> tuple[Connection, int]:
        conn = Connection(key, serial, ts, ts)
        fwd = (key.a_host, key.a_port, key.b_host, key.b_port)
        rev = (key.b_host, key.b_port, key.a_host, key.a_port)
        self._table[fwd] = (conn, 0)
        self._table[rev] = (conn, 1)
        self._closed.pop(fwd, None)
        self._closed.pop(rev, None)
        return (conn, 0) if tup == fwd else (conn, 1)

    def _on_syn(
        self,
        seg: TcpSegment,
        tup: tuple[str, int, str, int],
        entry: tuple[Connection, int] | None,
        events: list[Event],
    ) -> tuple[Connection, int] | None:
        is_synack = bool(seg.flags & TCP_ACK)
        if entry is not None:
            conn, i = entry
            half = conn.halves[i]
            if half.syn_isn == seg.seq:
                return entry  # retransmitted SYN
            if half.syn_isn is None and half.base is None and conn.key.client_known:
                half.syn_isn = seg.seq
                return entry  # the SYN-ACK of a handshake we saw start
            # A different ISN on a live 4-tuple: the old connection is gone.
            if is_synack:
                conn.note("SYN-ACK with a new ISN on an open connection")
                return entry
            self._close(conn, "reused", events)
            serial = conn.serial + 1
        else:
            serial = self._closed.get(tup, 0) + 1
        if is_synack:
            key = ConnectionKey(seg.dst, seg.dport, seg.src, seg.sport, True)
        else:
            key = ConnectionKey(seg.src, seg.sport, seg.dst, seg.dport, True)
        new = self._new(key, tup, serial, seg.timestamp_ns)
        new[0].halves[new[1]].syn_isn = seg.seq
        return new

    def _close(self, conn: Connection, reason: str, events: list[Event]) -> None:
        if conn.closed:
            return
        for i in (0, 1):
            half = conn.halves[i]
            side = conn.sides[i]
            while half.heap:
                first = half.heap[0]
                if first > half.next:
                    self._gap(conn, half, side, first - half.next, events)
                self._drain(conn, half, side, events)
            end = half.fin if half.fin is not None else half.acked
            if half.base is not None and end > half.next:
                self._gap(conn, half, side, end - half.next, events)
            half.done = True
            half.history.clear()
        conn.closed = True
        conn.close_reason = reason
        key = conn.key
        for tup in ((key.a_host, key.a_port, key.b_host, key.b_port), (key.b_host, key.b_port, key.a_host, key.a_port)):
            if self._table.get(tup, (None, 0))[0] is conn:
                del self._table[tup]
            self._closed[tup] = conn.serial
            self._closed.move_to_end(tup)
        while len(self._closed) > self.max_closed:
            self._closed.popitem(last=False)
        events.append(ConnectionClosed(conn, reason))

    # -- one direction -------------------------------------------------------------

    def _accept(
        self,
        conn: Connection,
        half: _Half,
        side: str,
        off: int,
        payload: bytes,
        missing: int,
        ts: int,
        idx: int,
        events: list[Event],
    ) -> None:
        nxt = half.next
        if off + len(payload) + missing <= nxt:
            self._compare(conn, half, side, off, payload)
            return
        if off > nxt:
            self._buffer(conn, half, side, off, payload, missing, ts, idx, events)
            return
        self._deliver(conn, half, side, off, payload, missing, ts, idx, events)
        if half.heap:
            self._drain(conn, half, side, events)

    def _deliver(
        self,
        conn: Connection,
        half: _Half,
        side: str,
        off: int,
        payload: bytes,
        missing: int,
        ts: int,
        idx: int,
        events: list[Event],
    ) -> None:
        """Deliver a segment that starts at or before ``half.next`` and ends after it."""
        nxt = half.next
        if off < nxt:
            cut = nxt - off
            if cut <= len(payload):
                self._compare(conn, half, side, off, payload[:cut])
                payload = payload[cut:]
            else:
                missing -= cut - len(payload)
                payload = b""
        if payload:
            events.append(ChunkEvent(conn, side, Data(nxt, payload, ts, idx)))
            nxt += len(payload)
            half.next = nxt
            if self.history_bytes:
                hist = half.history
                hist.append((nxt - len(payload), payload))
                half.history_bytes += len(payload)
                while half.history_bytes - len(hist[0][1]) >= self.history_bytes:
                    half.history_bytes -= len(hist.popleft()[1])
        if missing > 0:
            self._gap(conn, half, side, missing, events, note=False)

    def _drain(self, conn: Connection, half: _Half, side: str, events: list[Event]) -> None:
        heap = half.heap
        while heap and heap[0] <= half.next:
            off = heapq.heappop(heap)
            payload, missing, ts, idx = half.pending.pop(off)
            half.pending_bytes -= len(payload)
            if off + len(payload) + missing <= half.next:
                self._compare(conn, half, side, off, payload)
            else:
                self._deliver(conn, half, side, off, payload, missing, ts, idx, events)

    def _buffer(
        self,
        conn: Connection,
        half: _Half,
        side: str,
        off: int,
        payload: bytes,
        missing: int,
        ts: int,
        idx: int,
        events: list[Event],
    ) -> None:
        old = half.pending.get(off)
        if old is not None:
            common = min(len(old[0]), len(payload))
            if old[0][:common] != payload[:common]:
                conn.conflicting_bytes += _differing(old[0][:common], payload[:common])
                conn.note(f"{side}: conflicting retransmission at offset {off}")
            conn.retransmitted_bytes += common
            if len(payload) + missing <= len(old[0]) + old[1]:
                return
            half.pending_bytes -= len(old[0])
        else:
            heapq.heappush(half.heap, off)
        half.pending[off] = (payload, missing, ts, idx)
        half.pending_bytes += len(payload)
        if half.acked > half.next:
            self._skip_acked(conn, half, side, events)
        while half.pending_bytes > self.max_buffer_bytes and half.heap:
            conn.note(
                f"{side}: out-of-order buffer over {self.max_buffer_bytes} bytes; "
                f"giving up the hole at offset {half.next}"
            )
            self._gap(conn, half, side, half.heap[0] - half.next, events)
            self._drain(conn, half, side, events)

    def _skip_acked(self, conn: Connection, half: _Half, side: str, events: list[Event]) -> None:
        """The peer acknowledged bytes the capture lacks while later data waits: the hole
        will never be retransmitted, so report it now (rule 3)."""
        while half.heap and half.acked > half.next:
            target = min(half.acked, half.heap[0])
            if target > half.next:
                self._gap(conn, half, side, target - half.next, events)
            self._drain(conn, half, side, events)

    def _gap(
        self, conn: Connection, half: _Half, side: str, length: int, events: list[Event], *, note: bool = True
    ) -> None:
        events.append(ChunkEvent(conn, side, Gap(half.next, length)))
        half.next += length
        conn.gap_count += 1
        conn.gap_bytes += length
        if note:
            conn.note(f"{side}: {length} bytes missing at offset {half.next - length}")

    def _compare(self, conn: Connection, half: _Half, side: str, off: int, payload: bytes) -> None:
        """Account for bytes already delivered (or given up) arriving again."""
        n = len(payload)
        if not n:
            return
        if off < 0:
            conn.late_bytes += n
            conn.note(f"{side}: {n} bytes from before the first captured byte dropped")
            return
        conn.retransmitted_bytes += n
        end = off + n
        for h_off, h_data in reversed(half.history):
            h_end = h_off + len(h_data)
            if h_end <= off:
                break
            if h_off >= end:
                continue
            lo = max(off, h_off)
            hi = min(end, h_end)
            new = payload[lo - off : hi - off]
            first = h_data[lo - h_off : hi - h_off]
            if new != first:
                conn.conflicting_bytes += _differing(new, first)
                conn.note(f"{side}: retransmitted bytes at offset {lo} differ from the first copy (first copy kept)")
                return


def _differing(a: bytes, b: bytes) -> int:
    """How many byte positions differ (only run once a difference is known)."""
    return sum(x != y for x, y in zip(a, b, strict=True))


def _record_fin(conn: Connection, half: _Half, side: str, fin: int) -> None:
    """Remember where ``half`` ends; a FIN that moves is kept at its first place, noted."""
    if half.fin is None:
        half.fin = fin
    elif half.fin != fin:
        conn.note(f"{side}: FIN moved from offset {half.fin} to {fin}")


def _count_late_data(conn: Connection, half: _Half, side: str, off: int, plen: int) -> None:
    """Count (and note) the bytes a segment carries past the end of a finished half."""
    if plen and off + plen > half.next:
        conn.late_bytes += off + plen - max(off, half.next)
        conn.note(f"{side}: data after the stream ended at offset {half.next}")
