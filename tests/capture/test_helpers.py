"""Shared helpers for the capture tests: write synthetic captures, reassemble them."""

from __future__ import annotations

import io
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from kraft_jbod.capture.packets import TcpDecoder
from kraft_jbod.capture.pcapfile import CaptureReader
from kraft_jbod.capture.reassembly import ChunkEvent, Connection, Data, Gap, TcpReassembler

TSHARK = shutil.which("tshark")


def reassemble(blob: bytes, **options: int) -> tuple[dict[tuple[str, str], list[Data | Gap]], list[Connection]]:
    """All chunks per (connection id, side) of a capture held in memory."""
    reader = CaptureReader(io.BytesIO(blob))
    dec = TcpDecoder()
    ra = TcpReassembler(**options)
    chunks: dict[tuple[str, str], list[Data | Gap]] = {}
    conns: list[Connection] = []
    events = []
    for p in reader:
        seg = dec.decode_packet(p)
        if seg is not None:
            events.extend(ra.feed(seg))
    events.extend(ra.flush())
    for ev in events:
        if isinstance(ev, ChunkEvent):
            chunks.setdefault((ev.connection.id, ev.side), []).append(ev.chunk)
        else:
            conns.append(ev.connection)
    return chunks, conns


def joined(chunks: list[Data | Gap]) -> bytes:
    """The stream with each gap shown as that many '?' bytes; checks contiguity."""
    out = bytearray()
    for c in chunks:
        assert c.offset == len(out), (c, len(out))
        out += c.data if isinstance(c, Data) else b"?" * c.length
    return bytes(out)


def kafka_frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request(api_key: int, version: int, corr: int, body: bytes = b"") -> bytes:
    """A v1 request header (client id "t") plus ``body``, framed."""
    return kafka_frame(struct.pack(">hhih", api_key, version, corr, 1) + b"t" + body)


def response(corr: int, body: bytes = b"") -> bytes:
    return kafka_frame(struct.pack(">i", corr) + body)


def tshark_count(path: Path) -> int:
    """Packets tshark reads from ``path``. `make test` installs tshark; missing it is a failure."""
    if TSHARK is None:
        pytest.fail("tshark is not installed (apt-get install -y tshark; `make test` does it)")
    res = subprocess.run(
        [TSHARK, "-r", str(path), "-T", "fields", "-e", "frame.number"], capture_output=True, text=True, check=True
    )
    return len(res.stdout.split())


# -- tests of the synthetic writer itself ---------------------------------------------


def test_internet_checksum_known_vector() -> None:
    from kraft_jbod.capture.pcapng_writer import internet_checksum

    # RFC 1071 section 3 example words: 0001 f203 f4f5 f6f7 -> sum ddf2, checksum 220d
    assert internet_checksum(bytes.fromhex("0001f203f4f5f6f7")) == 0x220D
    assert internet_checksum(b"") == 0xFFFF
    # A buffer that includes its own correct checksum sums to zero.
    from kraft_jbod.capture.pcapng_writer import build_ip_tcp

    ip = build_ip_tcp("10.0.0.1", 1, "10.0.0.2", 2, 5, 6, 0x18, b"abc")
    assert internet_checksum(ip[:20]) == 0


def test_writer_output_checked_by_tshark(tmp_path: Path) -> None:
    from collections.abc import Callable
    from typing import BinaryIO

    import pytest

    from kraft_jbod.capture.packets import LINKTYPE_ETHERNET, LINKTYPE_RAW
    from kraft_jbod.capture.pcapng_writer import PcapngWriter, PcapWriter, TcpConversation

    if TSHARK is None:
        pytest.fail("tshark is not installed (apt-get install -y tshark; `make test` does it)")
    cases = []
    makers: list[tuple[str, Callable[[BinaryIO], PcapWriter | PcapngWriter]]] = [
        ("eth.pcapng", lambda f: PcapngWriter(f, LINKTYPE_ETHERNET)),
        ("raw.pcapng", lambda f: PcapngWriter(f, LINKTYPE_RAW, big_endian=True)),
        ("ns.pcap", lambda f: PcapWriter(f, LINKTYPE_ETHERNET)),
        ("us-be.pcap", lambda f: PcapWriter(f, LINKTYPE_RAW, nanosecond=False, big_endian=True)),
    ]
    for name, make in makers:
        path = tmp_path / name
        with path.open("wb") as fh:
            w = make(fh)
            for client, server in ((("10.1.1.1", 40000), ("10.1.1.2", 9092)), (("fd00::1", 40001), ("fd00::2", 9092))):
                conv = TcpConversation(w, client, server, mss=100)
                conv.client_send(request(18, 3, 1, b"x" * 250))
                conv.server_send(response(1, b"y" * 120))
                conv.close()
        cases.append(path)
    for path in cases:
        res = subprocess.run(
            [
                TSHARK,
                "-r",
                str(path),
                "-o",
                "tcp.check_checksum:TRUE",
                "-o",
                "ip.check_checksum:TRUE",
                "-Y",
                "tcp.checksum.status != 1 || (ip && ip.checksum.status != 1) || tcp.analysis.flags",
                "--disable-protocol",
                "kafka",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == "", f"{path.name}: {res.stdout}"
        assert tshark_count(path) == 2 * 13  # handshake 3, request 3+ack, response 2+ack, close 3
