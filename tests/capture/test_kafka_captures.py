"""Every real capture in ../shared/captures decodes: no undecoded frames, byte-exact
re-encoding of every complete frame, and the counts the provenance notes describe."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

from kraft_jbod.capture.kafka import (
    HEADER,
    PAIRED,
    TRUNCATED,
    UNDECODED,
    DecodedFrame,
    KafkaDecoder,
    decode_capture,
    reencode,
)
from kraft_jbod.capture.output import Summary, frame_to_json

CAPTURES = Path(__file__).resolve().parents[3] / "shared" / "captures"
FILES = sorted(p for p in CAPTURES.glob("*/*") if p.suffix in (".pcap", ".pcapng"))
# deepflow's captures use the non-standard port 36333 for some servers.
PORTS = [9092, 36333]


def _decode(path: Path) -> tuple[list[DecodedFrame], KafkaDecoder]:
    dec = KafkaDecoder()
    with path.open("rb") as fh:
        return list(decode_capture(fh, ports=PORTS, decoder=dec)), dec


def test_the_captures_are_there() -> None:
    assert len(FILES) == 24, f"expected the 24 pcap/pcapng files of {CAPTURES}"


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_capture_decodes_completely_and_byte_exact(path: Path) -> None:
    frames, dec = _decode(path)
    assert frames, "no Kafka frame found"
    for f in frames:
        where = f"{f.connection_id} {f.direction} @{f.offset} {f.api_name} v{f.api_version}"
        if f.confidence == TRUNCATED:
            # Only frames the capture itself cut short may stay undecoded.
            assert not f.complete, where
            continue
        assert f.confidence in (HEADER, PAIRED), f"{where}: {f.confidence} {f.error}"
        assert f.body is not None, where
        again = reencode(f)
        assert again == f.payload, f"{where}: re-encoding differs ({f.anomalies})"
        assert f.canonical is True
        frame_to_json(f)  # every frame renders
    # Every response pairs with a request; a request goes unanswered only when it is its
    # connection's last (the capture stopped) or the capture lost the server's bytes.
    lost = {fl.flow.connection_id for fl in dec.flows if fl.flow.gap_bytes}
    for conn in {f.connection_id for f in frames} - lost:
        reqs = [f.correlation_id for f in frames if f.connection_id == conn and f.kind == "request"]
        resps = {f.correlation_id for f in frames if f.connection_id == conn and f.kind == "response"}
        assert resps <= set(reqs), conn
        assert set(reqs) - resps <= {reqs[-1]}, conn


def test_per_capture_counts_match_the_provenance_notes() -> None:
    counts = {}
    for path in FILES:
        frames, _ = _decode(path)
        s = Summary()
        for f in frames:
            s.add(f)
        counts[f"{path.parent.name}/{path.name}"] = s
    apis = counts["deepflow/mixed-with-unsupported.pcap"].apis
    # Fetch v13 request, OffsetCommit v8 req+resp, Heartbeat v4 req+resp (PROVENANCE.md).
    assert apis[1].versions == {13} and apis[8].versions == {8} and apis[12].versions == {4}
    assert counts["deepflow/18-api-versions-v3.pcap"].apis[18].responses == 1
    kgo = counts["kafka-go/v2-v2.pcapng"].apis
    assert kgo[1].versions == {10} and kgo[3].versions == {7}
    assert all(s.undecoded == 0 for s in counts.values())


def test_api_versions_v3_response_lists_59_keys() -> None:
    frames, _ = _decode(CAPTURES / "deepflow" / "18-api-versions-v3.pcap")
    resp = next(f for f in frames if f.kind == "response")
    assert resp.api_key == 18 and resp.api_version == 3
    keys = [k.api_key for k in resp.body.api_keys]
    assert len(keys) == 59 and max(keys) == 67
    req = next(f for f in frames if f.kind == "request")
    assert req.body.client_software_name  # flexible header v2 + software name decoded


def test_kafka_go_fetch_records_match_the_hex_fixtures() -> None:
    """kafka-go ships the hex of each Fetch response body next to its capture; our
    decoded Fetch response must contain exactly those bytes, and its records decode."""
    checked = 0
    for hexfile in sorted((CAPTURES / "kafka-go").glob("*.hex")):
        fixture = bytes.fromhex("".join(hexfile.read_text().split()))
        frames, _ = _decode(hexfile.with_suffix(".pcapng"))
        fetches = [f for f in frames if f.kind == "response" and f.api_key == 1]
        # The fixture is the whole frame: size prefix, then the payload.
        assert any(fixture == len(f.payload).to_bytes(4, "big") + f.payload for f in fetches), hexfile.name
        for f in fetches:
            for rec in f.records:
                assert "error" not in rec, (hexfile.name, rec.get("error"))
                for b in rec["batches"]:
                    assert b.get("crcValid", True) is True
        checked += 1
    assert checked == 11


def test_compressed_batches_are_decompressed() -> None:
    frames, _ = _decode(CAPTURES / "kafka-go" / "v2c-v2c.pcapng")
    codecs: Counter[str | None] = Counter()
    values = 0
    for f in frames:
        for rec in f.records:
            for b in rec["batches"]:
                codecs[b.get("compression")] += 1
                values += len(b.get("records", b.get("messages", [])))
    assert any(c not in ("none", None) for c in codecs), codecs
    assert values > 0


def test_arkime_response_lost_by_the_capture_is_reported() -> None:
    frames, dec = _decode(CAPTURES / "arkime" / "kafka.pcap")
    assert [f.kind for f in frames] == ["request"]
    assert dec.flows[0].flow.gap_bytes == 71


def test_no_undecoded_in_any_capture_via_io() -> None:
    blob = (CAPTURES / "deepflow" / "00-produce-v9.pcap").read_bytes()
    frames = list(decode_capture(io.BytesIO(blob), ports=PORTS))
    assert UNDECODED not in {f.confidence for f in frames}
    produce = next(f for f in frames if f.kind == "request")
    assert produce.records and produce.records[0]["batches"][0]["records"]
