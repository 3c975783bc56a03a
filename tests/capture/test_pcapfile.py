"""pcap/pcapng reading: real captures, every header variant, truncation and garbage."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import pytest

from kraft_jbod.capture.packets import LINKTYPE_ETHERNET, LINKTYPE_RAW
from kraft_jbod.capture.pcapfile import CaptureReader, Packet, TruncatedCaptureError, iter_packets
from kraft_jbod.capture.pcapng_writer import PcapngWriter, PcapWriter, TcpConversation
from kraft_jbod.errors import DecodeError
from tests.capture.test_helpers import request, tshark_count

CAPTURES = sorted((Path(__file__).resolve().parents[3] / "shared" / "captures").glob("*/*.pcap*"))


def _read(blob: bytes, **kw: bool) -> tuple[CaptureReader, list[Packet]]:
    r = CaptureReader(io.BytesIO(blob), **kw)
    return r, list(r)


def _conversation_blob(writer_cls: type, **kw: object) -> bytes:
    f = io.BytesIO()
    w = writer_cls(f, **kw)
    conv = TcpConversation(w, start_ns=1_600_000_000_123_456_789)
    conv.client_send(request(3, 9, 7, b"z" * 3000))
    conv.close()
    return f.getvalue()


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_capture_reads_completely(path: Path) -> None:
    with path.open("rb") as fh:
        r = CaptureReader(fh, strict=True)
        packets = list(r)
    assert packets and not r.truncated
    assert [p.index for p in packets] == list(range(len(packets)))
    assert all(p.captured_len == len(p.data) <= p.original_len for p in packets)
    # Every file is from 2016 or later.
    assert all(p.timestamp_ns > 1_450_000_000 * 10**9 for p in packets if p.timestamp_ns)
    assert len(packets) == tshark_count(path)


def test_real_nanosecond_pcap_and_sll2() -> None:
    by_name = {p.name: p for p in CAPTURES}
    with by_name["01-fetch-v12-unknown.pcap"].open("rb") as fh:
        r = CaptureReader(fh)
        assert r.format == "pcap" and r.nanosecond
        assert [p.timestamp_ns for p in r] == [1_647_312_695_000_000_000, 1_647_312_708_000_000_000]  # tshark agrees
    with by_name["v2-v2.pcapng"].open("rb") as fh:
        r = CaptureReader(fh)
        assert r.format == "pcapng"
        assert {p.linktype for p in r} == {276}


@pytest.mark.parametrize("nanosecond", [True, False])
@pytest.mark.parametrize("big_endian", [True, False])
def test_classic_pcap_variants(nanosecond: bool, big_endian: bool) -> None:
    blob = _conversation_blob(PcapWriter, nanosecond=nanosecond, big_endian=big_endian)
    r, pkts = _read(blob)
    assert r.format == "pcap" and r.nanosecond is nanosecond and r.linktype == LINKTYPE_ETHERNET
    first = pkts[0].timestamp_ns
    assert first == (1_600_000_000_123_456_789 if nanosecond else 1_600_000_000_123_456_000)
    assert len(pkts) == 3 + 3 + 1 + 3


@pytest.mark.parametrize("big_endian", [True, False])
def test_pcapng_both_byte_orders(big_endian: bool) -> None:
    blob = _conversation_blob(PcapngWriter, linktype=LINKTYPE_RAW, big_endian=big_endian)
    r, pkts = _read(blob)
    assert r.format == "pcapng"
    assert pkts[0].timestamp_ns == 1_600_000_000_123_456_789
    assert {p.linktype for p in pkts} == {LINKTYPE_RAW}


# -- hand-built pcapng blocks ------------------------------------------------------------


def _block(e: str, btype: int, body: bytes) -> bytes:
    body += b"\x00" * (-len(body) & 3)
    n = 12 + len(body)
    return struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n)


def _shb(e: str) -> bytes:
    return _block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def _idb(e: str, linktype: int, snaplen: int = 0, options: bytes = b"") -> bytes:
    if options:
        options += struct.pack(e + "HH", 0, 0)
    return _block(e, 1, struct.pack(e + "HHI", linktype, 0, snaplen) + options)


def _opt(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + b"\x00" * (-len(value) & 3)


def _epb(e: str, ifid: int, ts: int, data: bytes, orig: int | None = None) -> bytes:
    return _block(
        e,
        6,
        struct.pack(e + "IIIII", ifid, ts >> 32, ts & 0xFFFFFFFF, len(data), len(data) if orig is None else orig)
        + data,
    )


def test_pcapng_sections_resolutions_and_block_kinds() -> None:
    le, be = "<", ">"
    blob = (
        _shb(le)
        + _idb(le, 1)  # default microseconds
        + _idb(le, 101, options=_opt(le, 9, bytes([0x80 | 10])))  # 2^-10 s
        + _idb(le, 228, options=_opt(le, 9, bytes([3])) + _opt(le, 14, struct.pack("<q", 100)))
        + _epb(le, 0, 5_000_001, b"A")
        + _block(le, 4, b"\x00" * 8)  # name resolution block: skipped
        + _epb(le, 1, 3 * 1024 + 512, b"BB")
        + _epb(le, 2, 1500, b"CCC", orig=10)
        + _block(le, 2, struct.pack("<HHIIII", 0, 0, 0, 7, 1, 1) + b"D")  # obsolete PB, iface 0
        + _shb(be)  # a new section in the other byte order drops the interfaces
        + _idb(be, 229, snaplen=4, options=_opt(be, 9, bytes([9])))
        + _block(be, 3, struct.pack(">I", 6) + b"EEEEEE")  # SPB cut by snaplen 4
        + _epb(be, 0, 42, b"F")
        + _block(be, 0x00000BAD, b"custom")
    )
    _, pkts = _read(blob, strict=True)
    assert [(p.linktype, p.data, p.captured_len, p.original_len) for p in pkts] == [
        (1, b"A", 1, 1),
        (101, b"BB", 2, 2),
        (228, b"CCC", 3, 10),
        (1, b"D", 1, 1),
        (229, b"EEEE", 4, 6),
        (229, b"F", 1, 1),
    ]
    assert [p.timestamp_ns for p in pkts] == [
        5_000_001_000,
        3_500_000_000,  # 3.5 s in 1/1024 s units
        101_500_000_000,  # 1500 ms + 100 s offset
        7_000,
        0,  # SPBs carry no timestamp
        42,
    ]
    assert pkts[2].cut_short and not pkts[0].cut_short
    assert [p.index for p in pkts] == list(range(6))


def test_epb_for_unknown_interface_is_decode_error() -> None:
    with pytest.raises(DecodeError, match="unknown interface"):
        _read(_shb("<") + _idb("<", 1) + _epb("<", 3, 0, b"x"))


def test_pcapng_block_length_checks() -> None:
    good = _shb("<") + _idb("<", 1)
    with pytest.raises(DecodeError, match="trailer"):
        _read(good + _epb("<", 0, 0, b"abcd")[:-4] + struct.pack("<I", 99))
    with pytest.raises(DecodeError, match="block length"):
        _read(good + struct.pack("<II", 6, 13) + b"\x00" * 20)
    with pytest.raises(DecodeError, match="overruns"):
        _read(good + _block("<", 6, struct.pack("<IIIII", 0, 0, 0, 500, 500) + b"x" * 8))
    with pytest.raises(DecodeError, match="exceeds the limit"):
        _read(good + struct.pack("<II", 6, 0x7FFFFFF0) + b"\x00" * 64)
    with pytest.raises(DecodeError, match="byte-order"):
        _read(struct.pack("<III", 0x0A0D0D0A, 28, 0x11223344) + b"\x00" * 16)


# -- truncation and garbage --------------------------------------------------------------


@pytest.mark.parametrize("writer", [PcapWriter, PcapngWriter])
def test_truncated_final_record_is_flagged(writer: type) -> None:
    blob = _conversation_blob(writer)
    _, full = _read(blob)
    for cut in (1, 5, 17, 40):
        r, pkts = _read(blob[:-cut])
        assert r.truncated and r.truncated_offset is not None
        assert r.truncated_offset < len(blob) - cut
        assert pkts == full[:-1]
        with pytest.raises(TruncatedCaptureError) as info:
            list(CaptureReader(io.BytesIO(blob[:-cut]), strict=True))
        assert info.value.offset == r.truncated_offset


@pytest.mark.parametrize(
    "blob",
    [
        b"",
        b"\xd4\xc3",
        b"hello world, not a capture",
        b"\xd4\xc3\xb2\xa1\x02\x00",
        struct.pack("<IHHiIII", 0xA1B2C3D4, 9, 4, 0, 0, 65535, 1),
    ],
    ids=["empty", "short", "text", "short-header", "bad-version"],
)
def test_garbage_is_decode_error(blob: bytes) -> None:
    with pytest.raises(DecodeError):
        list(iter_packets(io.BytesIO(blob)))


def test_absurd_pcap_record_length_rejected_before_reading() -> None:
    header = struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
    rec = struct.pack("<IIII", 0, 0, 0xFFFFFFF0, 0xFFFFFFF0)
    with pytest.raises(DecodeError, match="exceeds the limit") as info:
        list(iter_packets(io.BytesIO(header + rec)))
    assert info.value.offset == 24


def test_reads_from_unseekable_trickling_stream() -> None:
    blob = _conversation_blob(PcapngWriter)

    class Trickle(io.RawIOBase):
        def __init__(self) -> None:
            self.pos = 0

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            n = min(len(b), 7, len(blob) - self.pos)
            b[:n] = blob[self.pos : self.pos + n]
            self.pos += n
            return n

    pkts = list(iter_packets(Trickle()))  # type: ignore[arg-type]
    assert pkts == _read(blob)[1]


def test_reference_captures_are_present() -> None:
    # The parametrized tests above would silently vanish without them.
    assert len(CAPTURES) == 24  # arkime 1, deepflow 12, kafka-go 11
