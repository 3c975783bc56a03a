"""Synthetic captures: reordering, retransmission, gaps, IPv6, mid-stream starts,
anomalies (trailing bytes, unknown tags, non-canonical bytes), compressed record batches."""

from __future__ import annotations

import json
import uuid

import pytest

from kraft_jbod.capture.kafka import (
    HEADER,
    INFERRED_ORDER,
    PAIRED,
    TRIAL_AMBIGUOUS,
    TRIAL_UNIQUE,
    TRUNCATED,
    DecodedFrame,
    reencode,
)
from kraft_jbod.capture.output import frame_to_json
from kraft_jbod.capture.pcapng_writer import TcpConversation
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.heartbeat_response import HeartbeatResponse
from kraft_jbod.wire import compression

from .kafka_helpers import (
    Writer,
    api_versions_response,
    batch_bytes,
    capture,
    conversation,
    decode,
    heartbeat_pair,
    metadata_pair,
    produce_request,
    req,
    resp,
)

DIR = uuid.UUID("7f2b9a3e-1c4d-4e5f-8a6b-0c1d2e3f4a5b")


def _exchange(conv: TcpConversation, pair: tuple[bytes, bytes], **kw: object) -> None:
    conv.client_send(pair[0], **kw)  # type: ignore[arg-type]
    conv.server_send(pair[1])


def _summary(frames: list[DecodedFrame]) -> list[tuple[str, str | None, int | None, str]]:
    return [(f.kind, f.api_name, f.api_version, f.confidence) for f in frames]


def test_in_order_baseline_pairs_and_reencodes() -> None:
    def build(w: Writer) -> None:
        c = conversation(w)
        _exchange(c, metadata_pair(1))
        _exchange(c, heartbeat_pair(2, [DIR]))
        c.close()

    frames = decode(capture(build))
    assert _summary(frames) == [
        ("request", "Metadata", 12, HEADER),
        ("response", "Metadata", 12, PAIRED),
        ("request", "BrokerHeartbeat", 1, HEADER),
        ("response", "BrokerHeartbeat", 1, PAIRED),
    ]
    assert frames[2].body.offline_log_dirs == [DIR]
    assert all(reencode(f) == f.payload for f in frames)
    assert frames[1].latency_ns is not None and frames[1].latency_ns > 0


@pytest.mark.parametrize(
    "order",
    [[2, 0, 1, 3], [0, 1, 1, 2, 3], [3, 2, 1, 0, 0]],
    ids=["reordered", "retransmitted", "reversed-and-duplicated"],
)
def test_reordered_and_retransmitted_segments(order: list[int]) -> None:
    meta = metadata_pair(1)

    def build(w: Writer) -> None:
        c = conversation(w, mss=5)
        c.client_send(meta[0][:20], order=order)  # 4 segments of 5 bytes
        c.client_send(meta[0][20:])
        c.server_send(meta[1])
        c.close()

    frames = decode(capture(build))
    assert _summary(frames) == [("request", "Metadata", 12, HEADER), ("response", "Metadata", 12, PAIRED)]
    assert frames[0].payload == meta[0][4:]


def test_gap_inside_a_response_is_truncated_and_the_next_frame_decodes() -> None:
    m1 = metadata_pair(1)
    hb = heartbeat_pair(2, [])

    def build(w: Writer) -> None:
        c = conversation(w, mss=30)
        c.client_send(m1[0])
        n = len(c.plan("server", m1[1]))
        # Re-plan: plan() advanced the sequence; rewind it and emit without segment 1.
        c.seq["server"] -= len(m1[1])
        c.server_send(m1[1], order=[i for i in range(n) if i != 1])
        _exchange(c, hb)
        c.close()

    frames = decode(capture(build))
    assert _summary(frames) == [
        ("request", "Metadata", 12, HEADER),
        ("response", "Metadata", 12, TRUNCATED),
        ("request", "BrokerHeartbeat", 1, HEADER),
        ("response", "BrokerHeartbeat", 1, PAIRED),
    ]
    assert not frames[1].complete
    assert any("missing" in a for a in frames[1].anomalies)
    assert frames[1].correlation_id == 1  # the header survived the gap


def test_ipv6_over_classic_pcap() -> None:
    def build(w: Writer) -> None:
        c = conversation(w, client=("2001:db8::1", 40000), server=("2001:db8::2", 9092))
        _exchange(c, heartbeat_pair(5, [DIR]))
        c.close()

    frames = decode(capture(build, pcap=True))
    assert _summary(frames) == [("request", "BrokerHeartbeat", 1, HEADER), ("response", "BrokerHeartbeat", 1, PAIRED)]
    assert frames[0].connection_id == "[2001:db8::1]:40000->[2001:db8::2]:9092"


def test_mid_stream_start_infers_from_correlation_order() -> None:
    hb1 = heartbeat_pair(41, [DIR])
    hb2 = heartbeat_pair(42, [DIR])

    def build(w: Writer) -> None:
        c = conversation(w, handshake=False)
        c.server_send(hb1[1])  # its request went by before the capture started
        _exchange(c, hb2)
        c.close()

    frames = decode(capture(build), ports=[9092])
    assert _summary(frames) == [
        ("response", "BrokerHeartbeat", 1, INFERRED_ORDER),
        ("request", "BrokerHeartbeat", 1, HEADER),
        ("response", "BrokerHeartbeat", 1, PAIRED),
    ]
    assert frames[0].correlation_id == 41
    assert reencode(frames[0]) == frames[0].payload


def test_mid_stream_without_history_uses_trial_decoding() -> None:
    meta = metadata_pair(3, version=9)

    def build(w: Writer) -> None:
        c = conversation(w, handshake=False)
        c.server_send(meta[1])
        c.close()

    frames = decode(capture(build), ports=[9092])
    assert len(frames) == 1
    f = frames[0]
    assert f.confidence in (TRIAL_UNIQUE, TRIAL_AMBIGUOUS)
    assert (3, 9) in f.candidates
    if f.confidence == TRIAL_UNIQUE:
        assert f.api_key == 3


def test_api_versions_ranges_narrow_the_trial() -> None:
    """A tiny group Heartbeat response decodes under many api keys (Fetch v1, Produce,
    ...); the server's ApiVersions answer (seen on another connection) leaves only the
    keys it serves."""
    served = {18: (0, 3), 12: (0, 4), 63: (0, 1), 73: (0, 0)}
    orphan = resp(HeartbeatResponse(), 4, 9)

    def build(w: Writer) -> None:
        a = conversation(w, client=("10.0.0.1", 50001))
        av_req = req(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3, 0)
        _exchange(a, (av_req, resp(api_versions_response(served), 3, 0)))
        a.close()
        b = conversation(w, client=("10.0.0.1", 50002), handshake=False)
        b.server_send(orphan)
        b.close()

    def build_orphan_only(w: Writer) -> None:
        conversation(w, handshake=False).server_send(orphan)

    wide = decode(capture(build_orphan_only), ports=[9092])
    assert wide[0].confidence == TRIAL_AMBIGUOUS
    assert (12, 4) in wide[0].candidates and len({k for k, _ in wide[0].candidates}) > 1
    narrow = [f for f in decode(capture(build), ports=[9092]) if f.correlation_id == 9]
    assert narrow[0].confidence == TRIAL_UNIQUE
    assert narrow[0].api_key == 12 and narrow[0].candidates == [(12, 4)]


def test_distinctive_orphan_is_trial_unique_without_api_versions() -> None:
    def build(w: Writer) -> None:
        c = conversation(w, handshake=False)
        c.server_send(heartbeat_pair(9, [])[1])
        c.close()

    (f,) = decode(capture(build), ports=[9092])
    assert f.confidence == TRIAL_UNIQUE and f.api_key == 63
    assert {k for k, _ in f.candidates} == {63}


def test_trailing_bytes_unknown_tags_and_non_canonical_are_reported() -> None:
    base = req(ApiVersionsRequest(client_software_name="abc", client_software_version="1"), 3, 7)
    payload = bytearray(base[4:])
    trailing = bytes(payload) + b"\x00\x00\x00"
    i = payload.index(b"\x04abc")
    longer_varint = payload[:i] + b"\x84\x00" + payload[i + 1 :]
    tagged = payload[:-1] + bytes([1, 9, 2, 0x41, 0x42])
    frames_in = [bytes(trailing), bytes(longer_varint), bytes(tagged)]

    def build(w: Writer) -> None:
        c = conversation(w)
        for p in frames_in:
            c.client_send(len(p).to_bytes(4, "big") + p)
        c.close()

    frames = decode(capture(build))
    assert [f.confidence for f in frames] == [HEADER] * 3
    assert frames[0].trailing == b"\x00\x00\x00" and frames[0].canonical is True
    assert any("trailing" in a for a in frames[0].anomalies)
    assert reencode(frames[0]) == frames[0].payload
    assert frames[1].canonical is False
    assert any("non-canonical" in a for a in frames[1].anomalies)
    assert [(t.path, t.tag, t.data) for t in frames[2].unknown_tags] == [("", 9, b"AB")]
    assert reencode(frames[2]) == frames[2].payload
    line = json.loads(json.dumps(frame_to_json(frames[2])))
    assert line["unknownTags"] == [{"path": "", "tag": 9, "data": "4142"}]


@pytest.mark.parametrize(
    "codec_id", [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD]
)
def test_produce_batches_are_decoded_with_every_codec(codec_id: int) -> None:
    values = [b'{"n": %d}' % i for i in range(5)]
    produce = produce_request(batch_bytes(values, codec_id), 1)

    def build(w: Writer) -> None:
        c = conversation(w)
        c.client_send(produce)
        c.close()

    (f,) = decode(capture(build))
    assert f.api_name == "Produce" and f.confidence == HEADER
    (rec,) = f.records
    assert rec["path"] == "topicData[0].partitionData[0].records"
    (batch,) = rec["batches"]
    assert batch["compression"] == compression.CODEC_NAMES[codec_id]
    assert [r["valueText"] for r in batch["records"]] == [v.decode() for v in values]
    assert reencode(f) == f.payload


def test_stream_cut_by_capture_end_is_truncated_not_undecoded() -> None:
    meta = metadata_pair(1)

    def build(w: Writer) -> None:
        c = conversation(w)
        c.client_send(meta[0])
        c.server_send(meta[1][:30])

    frames = decode(capture(build))
    assert _summary(frames) == [("request", "Metadata", 12, HEADER), ("response", "Metadata", 12, TRUNCATED)]


def test_api_versions_kip511_fallback_response() -> None:
    request = req(ApiVersionsRequest(client_software_name="kp", client_software_version="3"), 4, 1)
    fallback = api_versions_response({18: (0, 3)})
    fallback.error_code = 35
    response = resp(fallback, 0, 1)

    def build(w: Writer) -> None:
        c = conversation(w)
        _exchange(c, (request, response))
        c.close()

    frames = decode(capture(build))
    assert frames[1].confidence == PAIRED and frames[1].api_version == 0
    assert frames[1].body.error_code == 35
    assert any("KIP-511" in a for a in frames[1].anomalies)
