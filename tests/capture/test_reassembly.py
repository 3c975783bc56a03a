"""TCP reassembly over synthetic captures: order, retransmission, overlap, gaps, wrap."""

from __future__ import annotations

import io
import itertools
import random

from hypothesis import given
from hypothesis import strategies as st

from kraft_jbod.capture.packets import LINKTYPE_ETHERNET, LINKTYPE_RAW, TCP_ACK, TCP_PSH, TcpSegment
from kraft_jbod.capture.pcapng_writer import PcapngWriter, PcapWriter, TcpConversation, with_payload
from kraft_jbod.capture.reassembly import ChunkEvent, Data, Gap, TcpReassembler
from tests.capture.test_helpers import joined, reassemble

C = "10.0.0.1:51234->10.0.0.2:9092"
DATA = bytes(range(256)) * 40  # 10240 bytes


def _capture(build, linktype: int = LINKTYPE_ETHERNET, **kw: object) -> bytes:  # type: ignore[no-untyped-def]
    f = io.BytesIO()
    w = PcapngWriter(f, linktype)
    build(w)
    return f.getvalue()


def test_in_order_both_directions_and_fin() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000)
        conv.client_send(DATA)
        conv.server_send(DATA[::-1])
        conv.close()

    chunks, conns = reassemble(_capture(build))
    assert joined(chunks[(C, "client")]) == DATA
    assert joined(chunks[(C, "server")]) == DATA[::-1]
    assert conns[0].close_reason == "fin" and conns[0].key.client_known
    first = chunks[(C, "client")][0]
    assert isinstance(first, Data) and first.packet_index == 3 and first.timestamp_ns == 1_700_000_000_000_003_000


def test_reorder_duplicates_and_same_byte_retransmission() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=700)
        conv.client_send(DATA, order=[3, 0, 2, 2, 1, 0, 4, 5, 14, 6, 7, 8, 9, 10, 11, 12, 13, 14, 3])
        conv.close()

    chunks, conns = reassemble(_capture(build))
    assert joined(chunks[(C, "client")]) == DATA
    assert conns[0].retransmitted_bytes == 700 * 3 + len(DATA) - 14 * 700
    assert conns[0].conflicting_bytes == 0 and conns[0].gap_bytes == 0


def test_retransmission_with_different_bytes_is_an_anomaly_first_copy_wins() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000)
        segs = conv.plan("client", DATA[:3000])
        bad = with_payload(segs[1], b"X" * 500 + segs[1].payload[500:])
        conv.emit([segs[0], segs[1], bad, segs[2]])  # in-order overlap that differs
        late = conv.plan("client", DATA[3000:5000])
        conv.emit([late[1], with_payload(late[1], b"Y" * 1000), late[0]])  # differs while buffered
        conv.close()

    chunks, conns = reassemble(_capture(build))
    assert joined(chunks[(C, "client")]) == DATA[:5000]
    expected = sum(b != ord("X") for b in DATA[1000:1500]) + sum(b != ord("Y") for b in DATA[4000:5000])
    assert conns[0].conflicting_bytes == expected
    assert any("differ" in a for a in conns[0].anomalies)


def test_overlapping_segments_are_trimmed() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000)
        segs = conv.plan("client", DATA[:3000])
        # A repacketised retransmission spanning two original segments.
        spanning = with_payload(segs[0], DATA[:1500])
        tail = with_payload(segs[1], DATA[1000:3000])
        conv.emit([spanning, tail, segs[2]])
        conv.close()

    chunks, conns = reassemble(_capture(build))
    assert joined(chunks[(C, "client")]) == DATA[:3000]
    assert conns[0].retransmitted_bytes == 500 + 1000 and conns[0].conflicting_bytes == 0


def test_dropped_segment_becomes_exact_gap_when_acked() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000)
        conv.client_send(DATA[:5000], order=[0, 1, 3, 4])  # segment 2 never captured
        conv.server_send(b"resp")
        conv.close()

    chunks, conns = reassemble(_capture(build))
    got = chunks[(C, "client")]
    assert joined(got) == DATA[:2000] + b"?" * 1000 + DATA[3000:5000]
    assert [c for c in got if isinstance(c, Gap)] == [Gap(2000, 1000)]
    assert conns[0].gap_bytes == 1000


def test_trailing_loss_becomes_gap_at_close() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000)
        conv.client_send(DATA[:3000], order=[0, 1])  # the last segment is lost
        conv.close()

    chunks, _ = reassemble(_capture(build))
    assert chunks[(C, "client")][-1] == Gap(2000, 1000)


def test_hole_without_ack_waits_until_end_of_capture() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000)
        conv.client_send(DATA[:3000], order=[0, 2], ack=False)

    chunks, conns = reassemble(_capture(build))
    assert joined(chunks[(C, "client")]) == DATA[:1000] + b"?" * 1000 + DATA[2000:3000]
    assert conns[0].close_reason == "end of capture"


def test_buffer_limit_gives_up_the_hole() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000)
        conv.client_send(DATA, order=[0, *range(2, 11)], ack=False)

    blob = _capture(build)
    ra_chunks, conns = reassemble(blob, max_buffer_bytes=4000)
    got = ra_chunks[(C, "client")]
    assert joined(got) == DATA[:1000] + b"?" * 1000 + DATA[2000:]
    assert any("out-of-order buffer" in a for a in conns[0].anomalies)


def test_mid_stream_start_ipv6_raw() -> None:
    cid = "[fd00::1]:40000->[fd00::2]:9092"

    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, ("fd00::1", 40000), ("fd00::2", 9092), handshake=False, mss=999)
        conv.server_send(b"R" * 10)  # the first packet with payload names side 'a'
        conv.client_send(DATA)

    chunks, conns = reassemble(_capture(build, LINKTYPE_RAW))
    rev = "[fd00::2]:9092->[fd00::1]:40000"
    assert cid not in {k[0] for k in chunks}
    assert joined(chunks[(rev, "a")]) == b"R" * 10
    assert joined(chunks[(rev, "b")]) == DATA
    assert not conns[0].key.client_known


def test_sequence_wraparound() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000, client_isn=0xFFFFFFFF - 2500, server_isn=0xFFFFFF00)
        conv.client_send(DATA, order=[1, 0, 3, 2, *range(4, 11)])
        conv.server_send(DATA)
        conv.close()

    chunks, _ = reassemble(_capture(build))
    assert joined(chunks[(C, "client")]) == DATA
    assert joined(chunks[(C, "server")]) == DATA


def test_snaplen_cut_becomes_gap_each_segment() -> None:
    f = io.BytesIO()
    w = PcapWriter(f, LINKTYPE_ETHERNET, snaplen=14 + 20 + 20 + 100)
    conv = TcpConversation(w, mss=300)
    conv.client_send(DATA[:900])
    conv.close()
    chunks, _ = reassemble(f.getvalue())
    got = chunks[(C, "client")]
    assert joined(got) == (DATA[:100] + b"?" * 200 + DATA[300:400] + b"?" * 200 + DATA[600:700] + b"?" * 200)
    assert [c for c in got if isinstance(c, Gap)] == [Gap(100, 200), Gap(400, 200), Gap(700, 200)]


def test_rst_closes_and_port_reuse_starts_new_connection() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000)
        conv.client_send(b"first")
        conv.reset()
        conv2 = TcpConversation(w, mss=1000, client_isn=77777, start_ns=1_800_000_000_000_000_000)
        conv2.client_send(b"second")
        conv2.close()

    chunks, conns = reassemble(_capture(build))
    assert joined(chunks[(C, "client")]) == b"first"
    assert joined(chunks[(C + "#2", "client")]) == b"second"
    assert [c.close_reason for c in conns] == ["rst", "fin"]


def test_synack_first_still_identifies_client() -> None:
    def build(w: PcapngWriter) -> None:
        conv = TcpConversation(w, mss=1000, handshake=False)
        conv.emit([conv._spec("server", 0x12, b"")])  # a SYN-ACK, the SYN was missed
        conv.seq["server"] += 1
        conv.client_send(b"hello")

    chunks, conns = reassemble(_capture(build))
    assert joined(chunks[(C, "client")]) == b"hello"
    assert conns[0].key.client_known


# -- property: any segmentation, permutation and duplication reassembles exactly ----------


def _seg(seq: int, payload: bytes, idx: int, flags: int = TCP_ACK | TCP_PSH) -> TcpSegment:
    return TcpSegment("1.1.1.1", 1, "2.2.2.2", 2, seq & 0xFFFFFFFF, 0, flags, payload, len(payload), idx, idx)


@given(
    data=st.binary(min_size=1, max_size=3000),
    cuts=st.lists(st.integers(min_value=1, max_value=2999), max_size=30),
    isn=st.integers(min_value=0, max_value=0xFFFFFFFF),
    seed=st.integers(min_value=0, max_value=2**32),
    dup_ratio=st.floats(min_value=0, max_value=1),
)
def test_random_segmentation_permutation_duplication(
    data: bytes, cuts: list[int], isn: int, seed: int, dup_ratio: float
) -> None:
    rnd = random.Random(seed)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    pieces = [(bounds[i], data[bounds[i] : bounds[i + 1]]) for i in range(len(bounds) - 1)]
    # Overlapping retransmissions: random spans of the original data.
    extra = [
        (a, data[a : a + rnd.randint(1, 400)])
        for a in (rnd.randrange(len(data)) for _ in pieces)
        if rnd.random() < dup_ratio
    ]
    order = pieces + extra + [p for p in pieces if rnd.random() < dup_ratio]
    rnd.shuffle(order)
    ra = TcpReassembler(history_bytes=1 << 20)
    events = ra.feed(_seg(isn, b"", 0, 0x02))  # SYN
    for i, (off, payload) in enumerate(order):
        events += ra.feed(_seg(isn + 1 + off, payload, i + 1))
    events += ra.flush()
    out = [e.chunk for e in events if isinstance(e, ChunkEvent)]
    assert all(isinstance(c, Data) for c in out)
    assert joined(out) == data
    conn = next(e.connection for e in events if not isinstance(e, ChunkEvent))
    assert conn.conflicting_bytes == 0


@given(
    data=st.binary(min_size=2, max_size=2000),
    cuts=st.lists(st.integers(min_value=1, max_value=1999), min_size=1, max_size=20),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_random_drops_give_exact_gaps(data: bytes, cuts: list[int], seed: int) -> None:
    rnd = random.Random(seed)
    bounds = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    pieces = [(bounds[i], data[bounds[i] : bounds[i + 1]]) for i in range(len(bounds) - 1)]
    kept = [p for p in pieces if rnd.random() < 0.6]
    rnd.shuffle(kept)
    ra = TcpReassembler()
    events = ra.feed(_seg(100, b"", 0, 0x02))
    for i, (off, payload) in enumerate(kept):
        events += ra.feed(_seg(101 + off, payload, i + 1))
    events += ra.flush()
    out = [e.chunk for e in events if isinstance(e, ChunkEvent)]
    expected = bytearray(b"?" * len(data))
    end = 0
    for off, payload in kept:
        expected[off : off + len(payload)] = payload
        end = max(end, off + len(payload))
    got = joined(out)
    assert got == bytes(expected[:end])
    # Gaps are maximal runs: never two gaps in a row.
    assert not any(isinstance(a, Gap) and isinstance(b, Gap) for a, b in itertools.pairwise(out))
