"""Writers for synthetic captures: pcapng (SHB, one IDB, EPBs) and classic pcap.

Strategy: :class:`PcapngWriter` and :class:`PcapWriter` share one interface
(``add_packet``, ``add_tcp_segment``); :class:`TcpConversation` plays both ends of a TCP
connection on top of either, tracking sequence and acknowledgement numbers, so tests and
the controller's own capture get realistic traffic without a network.

Invariants:

* Every packet is well formed: IPv4 header checksum and TCP checksum (over the IPv4 or
  IPv6 pseudo-header) are correct, lengths match, so tshark reads the files cleanly.
* pcapng files use a nanosecond ``if_tsresol`` (10^-9); classic pcap files use the
  nanosecond magic unless ``nanosecond=False`` (then timestamps are floored to µs).
* ``snaplen`` cuts stored packets as a capture tool would: ``captured_len`` is
  ``min(len, snaplen)`` and ``original_len`` the full length.
* A conversation's segments are built first (:meth:`TcpConversation.plan`) and written
  in the order asked (:meth:`TcpConversation.emit`), which is how tests reorder,
  duplicate, alter or drop them.
"""

from __future__ import annotations

import abc
import ipaddress
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import BinaryIO, Final

from kraft_jbod.capture.packets import (
    LINKTYPE_ETHERNET,
    LINKTYPE_IPV4,
    LINKTYPE_IPV6,
    LINKTYPE_RAW,
    TCP_ACK,
    TCP_FIN,
    TCP_PSH,
    TCP_RST,
    TCP_SYN,
)
from kraft_jbod.errors import EncodeError

__all__ = [
    "PcapWriter",
    "PcapngWriter",
    "SegmentSpec",
    "TcpConversation",
    "build_ip_tcp",
    "build_link_frame",
    "internet_checksum",
    "with_payload",
]

DEFAULT_SNAPLEN: Final = 262144
_ETH_SRC: Final = bytes.fromhex("020000000001")
_ETH_DST: Final = bytes.fromhex("020000000002")
_IPV4 = struct.Struct(">BBHHHBBH4s4s")
_TCP = struct.Struct(">HHIIBBHHH")


def internet_checksum(data: bytes) -> int:
    """RFC 1071 checksum. The ones'-complement sum of 16-bit words equals the whole
    buffer read as one big integer modulo 0xFFFF, which runs in C."""
    if len(data) & 1:
        data += b"\x00"
    s = int.from_bytes(data, "big") % 0xFFFF
    if s == 0 and any(data):
        s = 0xFFFF
    return ~s & 0xFFFF


def _addr(host: str) -> bytes:
    try:
        return ipaddress.ip_address(host).packed
    except ValueError as exc:
        raise EncodeError(f"not an IP address: {host!r}") from exc


def build_ip_tcp(
    src: str,
    sport: int,
    dst: str,
    dport: int,
    seq: int,
    ack: int,
    flags: int,
    payload: bytes = b"",
    *,
    window: int = 65535,
    ident: int = 0,
) -> bytes:
    """An IPv4 or IPv6 packet (by the address family) carrying one TCP segment."""
    s = _addr(src)
    d = _addr(dst)
    if len(s) != len(d):
        raise EncodeError("source and destination are of different IP versions")
    tcp_len = 20 + len(payload)
    hdr = _TCP.pack(sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, 5 << 4, flags & 0xFF, window, 0, 0)
    if len(s) == 4:
        pseudo = s + d + struct.pack(">BBH", 0, 6, tcp_len)
    else:
        pseudo = s + d + struct.pack(">IxxxB", tcp_len, 6)
    csum = internet_checksum(pseudo + hdr + payload)
    hdr = hdr[:16] + struct.pack(">H", csum) + hdr[18:]
    if len(s) == 4:
        total = 20 + tcp_len
        if total > 0xFFFF:
            raise EncodeError(f"IPv4 packet of {total} bytes is too long")
        ip = _IPV4.pack(0x45, 0, total, ident & 0xFFFF, 0x4000, 64, 6, 0, s, d)
        ip = ip[:10] + struct.pack(">H", internet_checksum(ip)) + ip[12:]
    else:
        if tcp_len > 0xFFFF:
            raise EncodeError(f"IPv6 payload of {tcp_len} bytes is too long")
        ip = struct.pack(">IHBB", 6 << 28, tcp_len, 6, 64) + s + d
    return ip + hdr + payload


def build_link_frame(linktype: int, ip_packet: bytes) -> bytes:
    """Wrap an IP packet for ``linktype`` (Ethernet, or raw IP: 101, 228, 229)."""
    if linktype == LINKTYPE_ETHERNET:
        etype = b"\x08\x00" if ip_packet[:1] and ip_packet[0] >> 4 == 4 else b"\x86\xdd"
        return _ETH_DST + _ETH_SRC + etype + ip_packet
    if linktype in (LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6):
        return ip_packet
    raise EncodeError(f"writer does not build link type {linktype}")


class _Writer(abc.ABC):
    """What the pcap and pcapng writers share: TCP segments built on top of add_packet."""

    linktype: int
    snaplen: int
    packets_written: int

    @abc.abstractmethod
    def add_packet(self, ts_ns: int, data: bytes, original_len: int | None = None) -> None:
        """Write one link-layer packet (truncated to the snap length)."""

    def add_tcp_segment(
        self,
        ts_ns: int,
        src: str,
        sport: int,
        dst: str,
        dport: int,
        seq: int,
        ack: int,
        flags: int,
        payload: bytes = b"",
    ) -> None:
        """Write one TCP segment as a complete link-layer packet."""
        ip = build_ip_tcp(src, sport, dst, dport, seq, ack, flags, payload, ident=self.packets_written)
        self.add_packet(ts_ns, build_link_frame(self.linktype, ip))


class PcapngWriter(_Writer):
    """pcapng with one interface of ``linktype`` and nanosecond timestamps."""

    def __init__(
        self,
        fileobj: BinaryIO,
        linktype: int = LINKTYPE_ETHERNET,
        *,
        snaplen: int = DEFAULT_SNAPLEN,
        big_endian: bool = False,
    ) -> None:
        self._f = fileobj
        self.linktype = linktype
        self.snaplen = snaplen
        self.packets_written = 0
        e = ">" if big_endian else "<"
        self._e = e
        self._epb = struct.Struct(e + "IIIIIII")
        shb_body = struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1)
        self._block(0x0A0D0D0A, shb_body)
        # if_tsresol = 9 (10^-9 s), then opt_endofopt.
        opts = struct.pack(e + "HHB3x", 9, 1, 9) + struct.pack(e + "HH", 0, 0)
        self._block(1, struct.pack(e + "HHI", linktype, 0, snaplen) + opts)

    def _block(self, btype: int, body: bytes) -> None:
        body += b"\x00" * (-len(body) & 3)
        blen = 12 + len(body)
        self._f.write(struct.pack(self._e + "II", btype, blen) + body + struct.pack(self._e + "I", blen))

    def add_packet(self, ts_ns: int, data: bytes, original_len: int | None = None) -> None:
        """Write one EPB; ``data`` is cut to ``snaplen``."""
        orig = len(data) if original_len is None else original_len
        cap = data[: self.snaplen]
        pad = -len(cap) & 3
        blen = 32 + len(cap) + pad
        self._f.write(
            self._epb.pack(6, blen, 0, (ts_ns >> 32) & 0xFFFFFFFF, ts_ns & 0xFFFFFFFF, len(cap), orig)
            + cap
            + b"\x00" * pad
            + struct.pack(self._e + "I", blen)
        )
        self.packets_written += 1


class PcapWriter(_Writer):
    """Classic pcap, nanosecond or microsecond magic, either byte order."""

    def __init__(
        self,
        fileobj: BinaryIO,
        linktype: int = LINKTYPE_ETHERNET,
        *,
        snaplen: int = DEFAULT_SNAPLEN,
        nanosecond: bool = True,
        big_endian: bool = False,
    ) -> None:
        self._f = fileobj
        self.linktype = linktype
        self.snaplen = snaplen
        self.nanosecond = nanosecond
        self.packets_written = 0
        e = ">" if big_endian else "<"
        self._rec = struct.Struct(e + "IIII")
        magic = 0xA1B23C4D if nanosecond else 0xA1B2C3D4
        fileobj.write(struct.pack(e + "IHHiIII", magic, 2, 4, 0, 0, snaplen, linktype))

    def add_packet(self, ts_ns: int, data: bytes, original_len: int | None = None) -> None:
        """Write one record; ``data`` is cut to ``snaplen``."""
        orig = len(data) if original_len is None else original_len
        cap = data[: self.snaplen]
        sec, ns = divmod(ts_ns, 1_000_000_000)
        frac = ns if self.nanosecond else ns // 1000
        self._f.write(self._rec.pack(sec, frac, len(cap), orig) + cap)
        self.packets_written += 1


@dataclass(frozen=True, slots=True)
class SegmentSpec:
    """A planned segment; ``replace`` it to alter payload or flags before emitting."""

    ts_ns: int
    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes = b""


class TcpConversation:
    """Both ends of one TCP connection written to a writer.

    With ``handshake`` the SYN, SYN-ACK and ACK are written at construction; without it
    the capture starts mid-connection. ``client_send``/``server_send`` split data by
    ``mss`` and, by default, let the peer acknowledge it. Timestamps advance by
    ``step_ns`` per packet unless given.
    """

    def __init__(
        self,
        writer: _Writer,
        client: tuple[str, int] = ("10.0.0.1", 51234),
        server: tuple[str, int] = ("10.0.0.2", 9092),
        *,
        mss: int = 1460,
        client_isn: int = 1000,
        server_isn: int = 500_000,
        start_ns: int = 1_700_000_000_000_000_000,
        step_ns: int = 1000,
        handshake: bool = True,
    ) -> None:
        if mss <= 0:
            raise EncodeError("mss must be positive")
        self.writer = writer
        self.client = client
        self.server = server
        self.mss = mss
        self.step_ns = step_ns
        self.clock = start_ns
        # next sequence number each side sends
        self.seq = {"client": client_isn & 0xFFFFFFFF, "server": server_isn & 0xFFFFFFFF}
        if handshake:
            self.emit([self._spec("client", TCP_SYN, b"", ack=0)])
            self.seq["client"] = (self.seq["client"] + 1) & 0xFFFFFFFF
            self.emit([self._spec("server", TCP_SYN | TCP_ACK, b"")])
            self.seq["server"] = (self.seq["server"] + 1) & 0xFFFFFFFF
            self.emit([self._spec("client", TCP_ACK, b"")])

    def _tick(self, ts_ns: int | None) -> int:
        if ts_ns is not None:
            self.clock = ts_ns
        ts = self.clock
        self.clock += self.step_ns
        return ts

    def _spec(
        self,
        side: str,
        flags: int,
        payload: bytes,
        *,
        ack: int | None = None,
        seq: int | None = None,
        ts_ns: int | None = None,
    ) -> SegmentSpec:
        me, peer = (self.client, self.server) if side == "client" else (self.server, self.client)
        other = "server" if side == "client" else "client"
        return SegmentSpec(
            self._tick(ts_ns),
            me[0],
            me[1],
            peer[0],
            peer[1],
            self.seq[side] if seq is None else seq,
            self.seq[other] if ack is None else ack,
            flags,
            payload,
        )

    def plan(self, side: str, data: bytes, *, ts_ns: int | None = None) -> list[SegmentSpec]:
        """Split ``data`` sent by ``side`` into segments and advance its sequence number;
        nothing is written (see :meth:`emit`)."""
        if side not in self.seq:
            raise EncodeError(f"side must be 'client' or 'server', not {side!r}")
        out = []
        first = True
        for i in range(0, len(data), self.mss):
            piece = data[i : i + self.mss]
            last = i + self.mss >= len(data)
            out.append(self._spec(side, TCP_ACK | (TCP_PSH if last else 0), piece, ts_ns=ts_ns if first else None))
            first = False
            self.seq[side] = (self.seq[side] + len(piece)) & 0xFFFFFFFF
        return out

    def emit(self, segments: Iterable[SegmentSpec]) -> None:
        """Write segments, in the order given."""
        w = self.writer
        for s in segments:
            w.add_tcp_segment(s.ts_ns, s.src, s.sport, s.dst, s.dport, s.seq, s.ack, s.flags, s.payload)

    def send(
        self, side: str, data: bytes, ts_ns: int | None = None, *, order: Sequence[int] | None = None, ack: bool = True
    ) -> list[SegmentSpec]:
        """Plan and emit; ``order`` lists segment indices to write (repeat one to
        duplicate it, leave one out to drop it). Then the peer ACKs, unless ``ack`` is
        false. Returns the planned segments."""
        segs = self.plan(side, data, ts_ns=ts_ns)
        self.emit(segs if order is None else [segs[i] for i in order])
        if ack and segs:
            self.emit([self._spec("server" if side == "client" else "client", TCP_ACK, b"")])
        return segs

    def client_send(
        self, data: bytes, ts_ns: int | None = None, *, order: Sequence[int] | None = None, ack: bool = True
    ) -> list[SegmentSpec]:
        """The client sends ``data`` (see :meth:`send`)."""
        return self.send("client", data, ts_ns, order=order, ack=ack)

    def server_send(
        self, data: bytes, ts_ns: int | None = None, *, order: Sequence[int] | None = None, ack: bool = True
    ) -> list[SegmentSpec]:
        """The server sends ``data`` (see :meth:`send`)."""
        return self.send("server", data, ts_ns, order=order, ack=ack)

    def close(self, ts_ns: int | None = None, *, by: str = "client") -> None:
        """Orderly close: FIN from ``by``, FIN-ACK from the peer, final ACK."""
        other = "server" if by == "client" else "client"
        self.emit([self._spec(by, TCP_FIN | TCP_ACK, b"", ts_ns=ts_ns)])
        self.seq[by] = (self.seq[by] + 1) & 0xFFFFFFFF
        self.emit([self._spec(other, TCP_FIN | TCP_ACK, b"")])
        self.seq[other] = (self.seq[other] + 1) & 0xFFFFFFFF
        self.emit([self._spec(by, TCP_ACK, b"")])

    def reset(self, ts_ns: int | None = None, *, by: str = "client") -> None:
        """Abort with a RST from ``by``."""
        self.emit([self._spec(by, TCP_RST | TCP_ACK, b"", ts_ns=ts_ns)])


def with_payload(spec: SegmentSpec, payload: bytes) -> SegmentSpec:
    """A copy of ``spec`` carrying different bytes (a retransmission that differs)."""
    return replace(spec, payload=payload)
