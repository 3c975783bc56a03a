"""`kraft-jbod decode` end to end: the built-in sample, JSON lines shape, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from kraft_jbod import cli, codec
from kraft_jbod.capture.sample import DIR_A, DIR_B, build_sample
from kraft_jbod.wire.primitives import uuid_to_base64url

CAPTURES = Path(__file__).resolve().parents[3] / "shared" / "captures"


def test_sample_is_deterministic_and_decodes_with_the_kip858_messages(capsys: pytest.CaptureFixture[str]) -> None:
    assert build_sample() == build_sample()
    assert cli.main(["decode", "--sample", "--no-progress"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    seen = {(x["kind"], x["apiName"], x.get("apiVersion")) for x in lines}
    for want in [
        ("request", "BrokerRegistration", 3),
        ("request", "BrokerRegistration", 4),
        ("request", "BrokerHeartbeat", 1),
        ("request", "AssignReplicasToDirs", 0),
        ("response", "AssignReplicasToDirs", 0),
        ("request", "ApiVersions", 3),
    ]:
        assert want in seen, want
    reg = next(
        x for x in lines if x["apiName"] == "BrokerRegistration" and x["kind"] == "request" and x["apiVersion"] == 3
    )
    assert reg["body"]["logDirs"] == [uuid_to_base64url(DIR_A), uuid_to_base64url(DIR_B)]
    # The body is exactly the generated class's JSON.
    cls = codec.request_class(62)
    assert cls.from_json(reg["body"], 3).to_json(3) == reg["body"]
    offline = [
        x
        for x in lines
        if x["apiName"] == "BrokerHeartbeat" and x["kind"] == "request" and x["body"].get("offlineLogDirs")
    ]
    assert offline and offline[0]["body"]["offlineLogDirs"] == [uuid_to_base64url(DIR_B)]
    fetch = next(x for x in lines if x["apiName"] == "Fetch" and x["kind"] == "response")
    recs = fetch["records"][0]["batches"][0]["records"]
    names = [r["metadataRecord"]["name"] for r in recs]
    assert names == ["RegisterBrokerRecord", "PartitionRecord"]
    assert recs[1]["metadataRecord"]["data"]["directories"] == [uuid_to_base64url(DIR_A)]
    confidences = {x["confidence"] for x in lines}
    assert "inferred-order" in confidences and "undecoded" not in confidences


def test_summary_and_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "frames.jsonl"
    files = [str(p) for p in sorted((CAPTURES / "deepflow").glob("*.pcap"))]
    code = cli.main(["decode", *files, "--port", "36333", "--summary", "--output", str(out), "--no-progress"])
    assert code == 0
    text = capsys.readouterr().out
    assert "confidence: header" in text and "Produce" in text
    lines = out.read_text().splitlines()
    assert len(lines) == sum(1 for _ in lines) and lines
    assert all(json.loads(x)["confidence"] in ("header", "paired") for x in lines)


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"this is not a capture file at all")
    assert cli.main(["decode", str(bad), "--no-progress"]) == 2
    assert cli.main(["decode", str(tmp_path / "missing.pcap"), "--no-progress"]) == 2


def test_undecodable_frame_exits_1(tmp_path: Path) -> None:
    from kraft_jbod.capture.pcapng_writer import PcapngWriter, TcpConversation

    buf = io.BytesIO()
    c = TcpConversation(PcapngWriter(buf))
    payload = b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x01x" + b"\xff" * 7  # Metadata v12, junk body
    c.client_send(len(payload).to_bytes(4, "big") + payload)
    c.close()
    path = tmp_path / "junk.pcapng"
    path.write_bytes(buf.getvalue())
    assert cli.main(["decode", str(path), "--no-progress", "--summary"]) == 1


def test_a_capture_file_cut_short_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kraft_jbod.capture.sample import build_sample

    whole = build_sample()
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(whole[:-10])  # the last block loses its tail
    code = cli.main(["decode", str(cut), "--summary", "--no-progress"])
    captured = capsys.readouterr()
    assert "ends inside a record at byte" in captured.err
    assert "capture file cut short: " in captured.out
    # The cut falls in the closing packets: every Kafka frame before it still decodes.
    assert code == 0
    assert captured.out.startswith("19 frames") and "BrokerRegistration" in captured.out
