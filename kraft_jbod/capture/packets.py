"""Link, IP and TCP header decoding: captured packets to :class:`TcpSegment` records.

Strategy: one straight-line function per layer over the packet's ``bytes`` with
precompiled structs derived from the header layouts declared in :mod:`.headers`; no
per-layer objects. Anything that is not a complete-enough
IPv4/IPv6 TCP packet is skipped and counted in :class:`DecodeStats` by reason, never
raised: real captures hold ARP, UDP, ICMP and broken frames, and one odd packet must not
stop a multi-gigabyte run.

Invariants:

* ``payload`` is the TCP payload as captured, bounded by the IP length (Ethernet padding
  and FCS never leak in); ``payload_len`` is the length the IP header declares. When the
  snap length cut the packet, ``len(payload) < payload_len`` and ``cut_short`` is true;
  reassembly turns the missing tail into a gap.
* IPv4 fragments (MF set or offset non-zero) and IPv6 fragments are skipped and counted:
  Kafka runs over TCP with path-MTU discovery, so fragments are rare and reassembling
  them is out of scope.
* Addresses are rendered as :func:`socket.inet_ntop` does (IPv6 compressed form).

Link types: 0 NULL (host-order family), 1 Ethernet (802.1Q/802.1ad/QinQ tags), 12/14/101
raw IP, 108 LOOP (network-order family), 113 Linux SLL, 228 IPv4, 229 IPv6, 276 SLL2.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

from kraft_jbod.capture.headers import ETHERNET, IPV4, IPV6, LINUX_SLL, LINUX_SLL2, TCP, struct_of
from kraft_jbod.capture.pcapfile import Packet, RawRecord

__all__ = [
    "LINKTYPE_ETHERNET",
    "LINKTYPE_IPV4",
    "LINKTYPE_IPV6",
    "LINKTYPE_LINUX_SLL",
    "LINKTYPE_LINUX_SLL2",
    "LINKTYPE_LOOP",
    "LINKTYPE_NULL",
    "LINKTYPE_RAW",
    "TCP_ACK",
    "TCP_FIN",
    "TCP_PSH",
    "TCP_RST",
    "TCP_SYN",
    "TCP_URG",
    "DecodeStats",
    "TcpDecoder",
    "TcpSegment",
    "iter_tcp_segments",
]

LINKTYPE_NULL: Final = 0
LINKTYPE_ETHERNET: Final = 1
LINKTYPE_RAW: Final = 101
LINKTYPE_LOOP: Final = 108
LINKTYPE_LINUX_SLL: Final = 113
LINKTYPE_IPV4: Final = 228
LINKTYPE_IPV6: Final = 229
LINKTYPE_LINUX_SLL2: Final = 276
_RAW_TYPES: Final = frozenset({12, 14, LINKTYPE_RAW, LINKTYPE_IPV4, LINKTYPE_IPV6})

TCP_FIN: Final = 0x01
TCP_SYN: Final = 0x02
TCP_RST: Final = 0x04
TCP_PSH: Final = 0x08
TCP_ACK: Final = 0x10
TCP_URG: Final = 0x20

_ETH_IPV4: Final = 0x0800
_ETH_IPV6: Final = 0x86DD
_ETH_VLAN_TAGS: Final = frozenset({0x8100, 0x88A8, 0x9100, 0x9200})

# BSD AF_INET6 differs per OS: 24 NetBSD/OpenBSD, 28 FreeBSD, 30 macOS; 10 is Linux.
_AF_INET: Final = 2
_AF_INET6: Final = frozenset({10, 24, 28, 30})

_IPV6_EXT_8: Final = frozenset({0, 43, 60, 135, 139, 140})  # (len + 1) * 8 bytes
_IPV6_AH: Final = 51  # (len + 2) * 4 bytes
_IPV6_FRAG: Final = 44
_PROTO_TCP: Final = 6

_U16 = struct.Struct(">H")
_ETH_HDR = struct_of(ETHERNET)
_SLL_HDR = struct_of(LINUX_SLL)
_SLL2_HDR = struct_of(LINUX_SLL2)
_TCP_HDR = struct_of(TCP)  # ports, seq, ack, data offset, flags
_IPV4_HDR = struct_of(IPV4)  # ver/ihl, total length, flags/frag, protocol
_IPV6_HDR = struct_of(IPV6)  # payload length, next header

_ADDR_CACHE_MAX: Final = 65536


@dataclass(frozen=True, slots=True)
class TcpSegment:
    """One TCP segment. ``flags`` holds the TCP flag bits (``TCP_SYN`` ...);
    ``payload_len`` is the payload length the IP header declares."""

    src: str
    sport: int
    dst: str
    dport: int
    seq: int
    ack: int
    flags: int
    payload: bytes
    payload_len: int
    timestamp_ns: int
    index: int

    @property
    def cut_short(self) -> bool:
        """True when the snap length dropped part of the payload."""
        return len(self.payload) < self.payload_len


@dataclass(slots=True)
class DecodeStats:
    """Counts of packets seen, decoded and skipped (by reason)."""

    packets: int = 0
    tcp: int = 0
    cut_short: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


class TcpDecoder:
    """Decodes captured packets to :class:`TcpSegment`; keeps :attr:`stats`.

    :meth:`decode` returns ``None`` for any packet that is not usable TCP; it never raises
    for packet content.
    """

    def __init__(self) -> None:
        self.stats = DecodeStats()
        self._addr: dict[bytes, str] = {}

    def _ntop(self, raw: bytes) -> str:
        # inet_ntop is cheap but a capture repeats few addresses millions of times.
        s = self._addr.get(raw)
        if s is None:
            if len(self._addr) >= _ADDR_CACHE_MAX:
                self._addr.clear()
            if len(raw) == 4:
                s = f"{raw[0]}.{raw[1]}.{raw[2]}.{raw[3]}"  # what inet_ntop writes
            else:
                # Imported here: socket costs a decode of IPv4 traffic a few ms of start-up.
                import socket

                s = socket.inet_ntop(socket.AF_INET6, raw)
            self._addr[raw] = s
        return s

    def decode_packet(self, packet: Packet) -> TcpSegment | None:
        """Decode a :class:`Packet`; ``None`` when it is skipped."""
        return self.decode(packet.linktype, packet.data, packet.timestamp_ns, packet.index)

    def decode_record(self, rec: RawRecord) -> TcpSegment | None:
        """Decode a :data:`~kraft_jbod.capture.pcapfile.RawRecord`; ``None`` when skipped."""
        return self.decode(rec[1], rec[2], rec[0], rec[5])

    def decode(self, linktype: int, data: bytes, timestamp_ns: int, index: int) -> TcpSegment | None:
        """Decode one packet's bytes captured on ``linktype``; ``None`` when skipped.

        The common case (untagged Ethernet, IPv4, TCP) stays inline, since it runs once
        per packet; other link layers, VLAN tags and IPv6 are steps of their own.
        """
        stats = self.stats
        stats.packets += 1
        n = len(data)
        # --- link layer: find the network protocol and where it starts ---------
        if linktype == LINKTYPE_ETHERNET and n >= 14:
            etype = _ETH_HDR.unpack_from(data, 0)[0]
            off = 14
            if etype in _ETH_VLAN_TAGS:
                link = _skip_vlan_tags(data, etype)
                if link is None:
                    stats.skip("short link header")
                    return None
                etype, off = link
        else:
            link = self._other_link_layer(linktype, data)
            if link is None:
                return None
            etype, off = link
        # --- network layer ------------------------------------------------------
        if etype == _ETH_IPV4:
            if off + 20 > n:
                stats.skip("short IP header")
                return None
            vihl, total, frag, proto = _IPV4_HDR.unpack_from(data, off)
            ihl = (vihl & 0x0F) * 4
            if vihl >> 4 != 4 or ihl < 20 or total < ihl:
                stats.skip("malformed IPv4 header")
                return None
            if proto != _PROTO_TCP:
                stats.skip("not TCP")
                return None
            if frag & 0x3FFF:
                stats.skip("IP fragment")
                return None
            if off + ihl > n:
                stats.skip("short IP header")
                return None
            src = self._ntop(data[off + 12 : off + 16])
            dst = self._ntop(data[off + 16 : off + 20])
            l4 = off + ihl
            # TSO captures report total length 0; trust what was captured then.
            l4_end = off + total if total else n
        else:
            net = self._ipv6_network_layer(etype, data, off)
            if net is None:
                return None
            src, dst, l4, l4_end = net
        # --- TCP ----------------------------------------------------------------
        if l4 + 20 > n:
            stats.skip("short TCP header")
            return None
        sport, dport, seq, ack, doff, flags = _TCP_HDR.unpack_from(data, l4)
        hlen = (doff >> 4) * 4
        if hlen < 20 or l4 + hlen > l4_end:
            stats.skip("malformed TCP header")
            return None
        start = l4 + hlen
        if start > n:
            stats.skip("short TCP header")
            return None
        payload_len = l4_end - start
        payload = data[start:l4_end] if l4_end <= n else data[start:]
        stats.tcp += 1
        if len(payload) < payload_len:
            stats.cut_short += 1
        return TcpSegment(src, sport, dst, dport, seq, ack, flags, payload, payload_len, timestamp_ns, index)

    def _other_link_layer(self, linktype: int, data: bytes) -> tuple[int, int] | None:
        """``(ethertype, offset)`` of the network header for every link type but plain
        Ethernet (or a short Ethernet header); ``None``, counted as skipped, when the
        link header is short or the type is not one we read."""
        n = len(data)
        if linktype == LINKTYPE_ETHERNET:
            self.stats.skip("short link header")  # the caller handles n >= 14
            return None
        if linktype in _RAW_TYPES:
            return _version_ethertype(data, 0), 0
        if linktype == LINKTYPE_LINUX_SLL:
            if n < 16:
                self.stats.skip("short link header")
                return None
            return _SLL_HDR.unpack_from(data, 0)[3], 16
        if linktype == LINKTYPE_LINUX_SLL2:
            if n < 20:
                self.stats.skip("short link header")
                return None
            return _SLL2_HDR.unpack_from(data, 0)[0], 20
        if linktype == LINKTYPE_NULL or linktype == LINKTYPE_LOOP:
            if n < 4:
                self.stats.skip("short link header")
                return None
            return _loopback_ethertype(linktype, data), 4
        self.stats.skip(f"unsupported link type {linktype}")
        return None

    def _ipv6_network_layer(self, etype: int, data: bytes, off: int) -> tuple[str, str, int, int] | None:
        """``(src, dst, tcp_start, tcp_end)`` of an IPv6 packet whose header starts at
        ``off``, past its extension headers; ``None``, counted as skipped, for anything
        else (not IP, malformed, a fragment, not TCP)."""
        stats = self.stats
        n = len(data)
        if etype != _ETH_IPV6:
            stats.skip("not IP")
            return None
        if off + 40 > n:
            stats.skip("short IP header")
            return None
        if data[off] >> 4 != 6:
            stats.skip("malformed IPv6 header")
            return None
        plen, nxt = _IPV6_HDR.unpack_from(data, off)
        src = self._ntop(data[off + 8 : off + 24])
        dst = self._ntop(data[off + 24 : off + 40])
        l4 = off + 40
        l4_end = l4 + plen if plen else n  # 0: jumbogram (hop-by-hop option)
        while nxt != _PROTO_TCP:
            if l4 + 8 > n:
                stats.skip("short IPv6 extension header")
                return None
            if nxt in _IPV6_EXT_8:
                ext_len = (data[l4 + 1] + 1) * 8
            elif nxt == _IPV6_AH:
                ext_len = (data[l4 + 1] + 2) * 4
            elif nxt == _IPV6_FRAG:
                if _U16.unpack_from(data, l4 + 2)[0] & 0xFFF9:
                    stats.skip("IP fragment")
                    return None
                ext_len = 8  # an atomic fragment: the whole packet is here
            else:
                stats.skip("not TCP")
                return None
            nxt = data[l4]
            l4 += ext_len
        return src, dst, l4, l4_end


def _skip_vlan_tags(data: bytes, etype: int) -> tuple[int, int] | None:
    """``(ethertype, offset)`` past the 802.1Q/802.1ad tags after an Ethernet header
    whose type field is ``etype``; ``None`` when the packet ends inside a tag."""
    off = 14
    while etype in _ETH_VLAN_TAGS:
        if off + 4 > len(data):
            return None
        etype = _U16.unpack_from(data, off + 2)[0]
        off += 4
    return etype, off


def _loopback_ethertype(linktype: int, data: bytes) -> int:
    """The ethertype a BSD loopback (NULL or LOOP) header's address family stands for."""
    if linktype == LINKTYPE_LOOP:
        fam = struct.unpack_from(">I", data, 0)[0]
    else:
        # Host byte order of the capturing machine: families are small numbers,
        # so the non-zero half tells which order was used.
        fam = struct.unpack_from("<I", data, 0)[0]
        if fam > 0xFFFF:
            fam = struct.unpack_from(">I", data, 0)[0]
    if fam == _AF_INET:
        return _ETH_IPV4
    if fam in _AF_INET6:
        return _ETH_IPV6
    return 0


def _version_ethertype(data: bytes, off: int) -> int:
    if len(data) <= off:
        return 0
    v = data[off] >> 4
    return _ETH_IPV4 if v == 4 else _ETH_IPV6 if v == 6 else 0


def iter_tcp_segments(packets: Iterable[Packet], decoder: TcpDecoder | None = None) -> Iterator[TcpSegment]:
    """Yield the TCP segments among ``packets``, skipping everything else."""
    dec = decoder if decoder is not None else TcpDecoder()
    for p in packets:
        seg = dec.decode(p.linktype, p.data, p.timestamp_ns, p.index)
        if seg is not None:
            yield seg
