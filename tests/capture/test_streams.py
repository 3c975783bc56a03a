"""Kafka framing over reassembled streams: gaps, resync, client detection, real captures."""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest

from kraft_jbod.capture.packets import LINKTYPE_ETHERNET
from kraft_jbod.capture.pcapng_writer import PcapngWriter, TcpConversation
from kraft_jbod.capture.pipeline import iter_frames, read_flows
from kraft_jbod.capture.reassembly import Data, Gap
from kraft_jbod.capture.streams import (
    Frame,
    FrameSplitter,
    looks_like_request,
    plausible_request,
)
from tests.capture.test_helpers import request, response

CAPTURES = sorted((Path(__file__).resolve().parents[3] / "shared" / "captures").glob("*/*.pcap*"))
REQS = [request(3, 12, i, bytes([i]) * (50 + 37 * i)) for i in range(6)]
STREAM = b"".join(REQS)
STARTS = [sum(len(r) for r in REQS[:i]) for i in range(len(REQS))]


def _split(chunks: Sequence[Data | Gap], **kw: object) -> tuple[FrameSplitter, list[Frame]]:
    sp = FrameSplitter("c", "client", check=plausible_request, **kw)  # type: ignore[arg-type]
    out: list[Frame] = []
    for c in chunks:
        out += sp.feed(c)
    out += sp.finish()
    return sp, out


def _data(stream: bytes, start: int, end: int, ts: int = 0) -> Data:
    return Data(start, stream[start:end], ts, 0)


def test_frames_across_arbitrary_chunking_with_timestamps() -> None:
    chunks = [
        _data(STREAM, a, b, ts=a) for a, b in zip([0, 3, 100, 101, 700], [3, 100, 101, 700, len(STREAM)], strict=True)
    ]
    _, frames = _split(chunks)
    assert [f.payload for f in frames] == [r[4:] for r in REQS]
    assert [f.offset for f in frames] == STARTS
    assert all(f.complete and f.anomaly is None for f in frames)
    # The timestamp is that of the chunk holding the frame's first (size) byte.
    assert [f.timestamp_ns for f in frames] == [0, 3, 101, 101, 101, 101]


def test_gap_inside_frame_keeps_sync() -> None:
    s2 = STARTS[2]
    chunks: list[Data | Gap] = [_data(STREAM, 0, s2 + 20), Gap(s2 + 20, 30), _data(STREAM, s2 + 50, len(STREAM))]
    _, frames = _split(chunks)
    assert [f.complete for f in frames] == [True, True, False, True, True, True]
    assert frames[2].payload == REQS[2][4:20] and "30 bytes missing at frame byte 16" in (frames[2].anomaly or "")
    assert [f.payload for f in frames[3:]] == [r[4:] for r in REQS[3:]]


def test_gap_over_frame_boundary_resynchronises() -> None:
    s2, s3 = STARTS[2], STARTS[3]
    chunks: list[Data | Gap] = [
        _data(STREAM, 0, s2 + 20),
        Gap(s2 + 20, s3 + 10 - s2 - 20),
        _data(STREAM, s3 + 10, len(STREAM)),
    ]
    _, frames = _split(chunks)
    assert [f.offset for f in frames] == [STARTS[0], STARTS[1], s2, STARTS[4], STARTS[5]]
    assert not frames[2].complete
    assert frames[3].anomaly is not None and "resynchronised after skipping" in frames[3].anomaly


def test_gap_at_boundary_and_mid_stream_start_resync() -> None:
    s1 = STARTS[1]
    chunks: list[Data | Gap] = [_data(STREAM, 0, s1), Gap(s1, 7), _data(STREAM, s1 + 7, len(STREAM))]
    _, frames = _split(chunks)
    assert [f.offset for f in frames] == [0, *STARTS[2:]]
    _, frames = _split([_data(STREAM, 5, len(STREAM))], synced=False)
    assert [f.offset for f in frames] == STARTS[1:]


def test_implausible_size_and_unfinished_frame() -> None:
    junk = struct.pack(">i", -5) + b"\x00" * 3
    stream = REQS[0] + junk + REQS[1] + REQS[2][:-10]
    sp, frames = _split([Data(0, stream, 0, 0)])
    assert [f.payload for f in frames[:2]] == [REQS[0][4:], REQS[1][4:]]
    assert frames[2].complete is False and "stream ended 10 bytes" in (frames[2].anomaly or "")
    assert any("implausible frame size -5" in t for _, t in sp.anomalies)


def test_non_kafka_direction_is_abandoned_after_max_scan() -> None:
    noise = bytes([0x17, 0x03, 0x03, 0xFF]) * 5000  # looks like TLS records, never a frame
    sp, frames = _split([Data(0, noise, 0, 0), Data(len(noise), STREAM, 0, 0)], synced=False, max_scan=4096)
    assert sp.abandoned and frames == []


def _capture(build) -> bytes:  # type: ignore[no-untyped-def]
    f = io.BytesIO()
    build(PcapngWriter(f, LINKTYPE_ETHERNET))
    return f.getvalue()


def test_flows_with_syn_and_unknown_sides() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=100)
        conv.client_send(REQS[0])
        conv.server_send(response(0, b"r" * 300))
        conv.close()
        # Mid-stream, the server speaks first: the classifier must still find the client.
        mid = TcpConversation(w, ("10.9.9.9", 31000), ("10.9.9.8", 19092), handshake=False, mss=100)
        mid.server_send(response(5, b"q" * 20))
        mid.client_send(REQS[1])
        mid.server_send(response(1, b"q" * 20))

    flows = read_flows(io.BytesIO(_capture(build)))
    assert [f.client_source for f in flows] == ["syn", "classifier"]
    syn, mid = flows
    assert syn.connection_id == "10.0.0.1:51234->10.0.0.2:9092"
    assert [(f.direction, len(f.payload)) for f in syn.frames] == [("client", len(REQS[0]) - 4), ("server", 304)]
    assert mid.connection_id == "10.9.9.9:31000->10.9.9.8:19092"
    assert mid.endpoints == ("10.9.9.9:31000", "10.9.9.8:19092")
    assert [f.direction for f in mid.frames] == ["server", "client", "server"]
    assert all(f.connection_id == mid.connection_id for f in mid.frames)


def test_ports_option_names_the_server() -> None:
    def build(w: PcapngWriter) -> None:
        mid = TcpConversation(w, ("10.9.9.9", 31000), ("10.9.9.8", 19092), handshake=False)
        mid.server_send(REQS[0])  # looks like a request, but the port says otherwise

    items = list(iter_frames(io.BytesIO(_capture(build)), ports={19092}))
    frames = [i for i in items if isinstance(i, Frame)]
    assert [(f.connection_id, f.direction) for f in frames] == [("10.9.9.9:31000->10.9.9.8:19092", "server")]


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_real_captures_yield_kafka_frames(path: Path) -> None:
    with path.open("rb") as fh:
        flows = read_flows(fh, ports={9092, 36333})
    frames = [f for fl in flows for f in fl.frames]
    requests = [f for f in frames if f.direction == "client"]
    responses = [f for f in frames if f.direction == "server"]
    assert requests, "every capture holds at least one request"
    assert all(f.complete and looks_like_request(f) for f in requests)
    corr = {struct.unpack_from(">i", f.payload, 4)[0] for f in requests}
    assert all(struct.unpack_from(">i", f.payload, 0)[0] in corr for f in responses)
    expected = {
        "kafka.pcap": 1,
        "produce-v9-2023.pcap": 1,
        "mixed-with-unsupported.pcap": 6,
        "v1-v1.pcapng": 34,
        "v2-v2.pcapng": 30,
        "v2bc-v1-v1c.pcapng": 33,
        "v2bc-v1c.pcapng": 50,
    }.get(path.name, 2 if path.parent.name == "deepflow" else None)
    if expected is not None:
        assert len(frames) == expected
