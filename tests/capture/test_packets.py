"""Link, IP and TCP header decoding over hand-built packets of every supported link type."""

from __future__ import annotations

import struct

import pytest

from kraft_jbod.capture.packets import TCP_ACK, TCP_PSH, TcpDecoder
from kraft_jbod.capture.pcapng_writer import build_ip_tcp

IP4 = build_ip_tcp("192.0.2.1", 40000, "192.0.2.2", 9092, 1000, 2000, TCP_ACK | TCP_PSH, b"hello")
IP6 = build_ip_tcp("2001:db8::1", 40000, "2001:db8::2", 9092, 1000, 2000, TCP_ACK, b"hello")
ETH = bytes(12)


def _expect(seg: object, src: str, dst: str) -> None:
    assert seg is not None
    assert (seg.src, seg.sport, seg.dst, seg.dport, seg.seq, seg.ack) == (  # type: ignore[attr-defined]
        src,
        40000,
        dst,
        9092,
        1000,
        2000,
    )
    assert seg.payload == b"hello" and seg.payload_len == 5  # type: ignore[attr-defined]
    assert not seg.cut_short  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("linktype", "frame", "v6"),
    [
        (1, ETH + b"\x08\x00" + IP4, False),
        (1, ETH + b"\x81\x00\x00\x05\x08\x00" + IP4, False),  # 802.1Q
        (1, ETH + b"\x88\xa8\x00\x05\x81\x00\x00\x07\x86\xdd" + IP6, True),  # QinQ
        (113, struct.pack(">HHH8sH", 0, 772, 6, bytes(8), 0x0800) + IP4, False),  # SLL
        (276, struct.pack(">HHIHBB8s", 0x86DD, 0, 1, 772, 4, 6, bytes(8)) + IP6, True),  # SLL2
        (0, struct.pack("<I", 2) + IP4, False),  # NULL, little-endian host
        (0, struct.pack(">I", 2) + IP4, False),  # NULL, big-endian host
        (0, struct.pack("<I", 30) + IP6, True),  # NULL, macOS AF_INET6
        (0, struct.pack(">I", 24) + IP6, True),  # NULL, OpenBSD AF_INET6
        (108, struct.pack(">I", 2) + IP4, False),  # LOOP: network order
        (108, struct.pack(">I", 28) + IP6, True),
        (101, IP4, False),
        (101, IP6, True),
        (12, IP4, False),
        (14, IP6, True),
        (228, IP4, False),
        (229, IP6, True),
    ],
)
def test_link_types(linktype: int, frame: bytes, v6: bool) -> None:
    seg = TcpDecoder().decode(linktype, frame, 5, 9)
    if v6:
        _expect(seg, "2001:db8::1", "2001:db8::2")
    else:
        _expect(seg, "192.0.2.1", "192.0.2.2")
    assert seg is not None and seg.timestamp_ns == 5 and seg.index == 9


def test_ethernet_padding_and_fcs_do_not_leak_into_payload() -> None:
    seg = TcpDecoder().decode(1, ETH + b"\x08\x00" + IP4 + b"\x00" * 6 + b"FCS!", 0, 0)
    _expect(seg, "192.0.2.1", "192.0.2.2")


def test_ipv4_options_and_tcp_options_skipped() -> None:
    ip = bytearray(IP4[:20])
    ip[0] = 0x47  # IHL 7: 8 bytes of options
    total = struct.unpack(">H", ip[2:4])[0] + 8
    ip[2:4] = struct.pack(">H", total)
    tcp = bytearray(IP4[20:40])
    tcp[12] = 8 << 4  # 12 bytes of TCP options
    pkt = bytes(ip) + b"\x01" * 8 + bytes(tcp) + b"\x01" * 12 + b"hello"
    ip2 = bytearray(pkt)
    ip2[2:4] = struct.pack(">H", len(pkt))
    _expect(TcpDecoder().decode(101, bytes(ip2), 0, 0), "192.0.2.1", "192.0.2.2")


def test_ipv6_extension_headers_skipped() -> None:
    base = bytearray(IP6[:40])
    hop = bytes([60, 0]) + bytes(6)  # hop-by-hop, next: destination options
    dst = bytes([44, 1]) + bytes(14)  # destination options (16 bytes), next: fragment
    frag = bytes([6, 0, 0, 0]) + b"\x00\x00\x00\x01"  # atomic fragment, next: TCP
    base[6] = 0  # first next-header: hop-by-hop
    payload = hop + dst + frag + IP6[40:]
    base[4:6] = struct.pack(">H", len(payload))
    _expect(TcpDecoder().decode(229, bytes(base) + payload, 0, 0), "2001:db8::1", "2001:db8::2")


def test_fragments_and_non_tcp_are_skipped_and_counted() -> None:
    dec = TcpDecoder()
    frag = bytearray(IP4)
    frag[6:8] = b"\x20\x00"  # MF set
    assert dec.decode(101, bytes(frag), 0, 0) is None
    later = bytearray(IP4)
    later[6:8] = b"\x00\x10"  # offset 16
    assert dec.decode(101, bytes(later), 0, 0) is None
    v6frag = bytearray(IP6[:40])
    v6frag[6] = 44
    v6frag[4:6] = struct.pack(">H", 8 + len(IP6) - 40)
    assert dec.decode(229, bytes(v6frag) + bytes([6, 0, 0, 1, 0, 0, 0, 1]) + IP6[40:], 0, 0) is None
    udp = bytearray(IP4)
    udp[9] = 17
    assert dec.decode(101, bytes(udp), 0, 0) is None
    assert dec.decode(1, ETH + b"\x08\x06" + bytes(28), 0, 0) is None  # ARP
    assert dec.decode(147, IP4, 0, 0) is None  # unsupported link type
    assert dec.stats.skipped == {"IP fragment": 3, "not TCP": 1, "not IP": 1, "unsupported link type 147": 1}
    assert dec.stats.packets == 6 and dec.stats.tcp == 0


def test_snaplen_cut_payload_is_flagged() -> None:
    seg = TcpDecoder().decode(101, IP4[:-3], 0, 0)
    assert seg is not None and seg.payload == b"he" and seg.payload_len == 5 and seg.cut_short


@pytest.mark.parametrize("cut", range(0, 60))
def test_every_truncation_is_skipped_or_decoded_never_raises(cut: int) -> None:
    dec = TcpDecoder()
    for lt, frame in ((1, ETH + b"\x08\x00" + IP4), (229, IP6), (276, bytes(20) + IP4)):
        seg = dec.decode(lt, frame[:cut], 0, 0)
        assert seg is None or len(seg.payload) <= seg.payload_len


def test_garbage_headers_never_raise() -> None:
    import random

    rnd = random.Random(7)
    dec = TcpDecoder()
    for _ in range(3000):
        lt = rnd.choice([0, 1, 12, 101, 108, 113, 228, 229, 276])
        data = bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(0, 90)))
        if rnd.random() < 0.5 and len(data) > 1:
            data = (b"\x45" if rnd.random() < 0.5 else b"\x60") + data[1:]
        dec.decode(lt, data, 0, 0)
    assert dec.stats.packets == 3000
