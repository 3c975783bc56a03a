"""`kraft-jbod codec decode` and `kraft-jbod codec roundtrip`, through the real entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kraft_jbod import cli
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_response import BrokerRegistrationResponse

HB_FRAME = (
    "0000004d003f000100000007000862726f6b65722d3100"
    "00000001000000000000002a00000000000003e800000100210311111111222233334444555555555555aaaaaaaabbbbccccddddeeeeeeeeeeee"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_decode_request_frame(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "codec", "decode", HB_FRAME)
    assert code == 0
    result = json.loads(out)
    assert result["api_name"] == "BrokerHeartbeat" and result["version"] == 1
    assert result["header"]["clientId"] == "broker-1"
    assert result["body"]["offlineLogDirs"] == ["ERERESIiMzNERFVVVVVVVQ", "qqqqqru7zMzd3e7u7u7u7g"]
    # The same frame without its size prefix decodes the same.
    code, out2 = run(capsys, "codec", "decode", HB_FRAME[8:])
    assert json.loads(out2) == result


def test_decode_bare_bodies(capsys: pytest.CaptureFixture[str]) -> None:
    body = BrokerRegistrationResponse(throttle_time_ms=3, error_code=0, broker_epoch=42).encode(4)
    code, out = run(capsys, "codec", "decode", body.hex(), "--kind", "response", "--api-key", "62", "--version", "4")
    assert code == 0
    assert json.loads(out)["body"] == {"throttleTimeMs": 3, "errorCode": 0, "brokerEpoch": 42}
    code, out = run(capsys, "codec", "decode", "0012000300000001ffff00", "--kind", "request_header", "--version", "2")
    assert code == 0 and json.loads(out)["body"]["clientId"] is None
    code, out = run(capsys, "codec", "decode", "0012000300000001ffff00", "--kind", "header", "--version", "2")
    assert code == 0 and json.loads(out)["body"]["requestApiKey"] == 18


def test_decode_errors_name_field_and_offset(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = run(capsys, "codec", "decode", HB_FRAME[8:-8])
    assert code == 1
    err = json.loads(out)
    assert "need 33 bytes" in err["error"] and err["field_path"] == "_tagged_fields[tag 0]"
    assert cli.main(["codec", "decode", "zz"]) == 2
    assert "not hex" in capsys.readouterr().err


def test_roundtrip_file(tmp_path: Path) -> None:
    good = BrokerHeartbeatRequest(1, 2, 3, False, False, []).encode(1).hex()
    non_canonical = "00000001" + "0000000000000002" + "0000000000000003" + "02" + "00" + "00"  # bool 2
    lines = [
        {"api_key": 63, "kind": "request", "version": 1, "hex": good},
        {"api_key": 63, "kind": "request", "version": 1, "hex": non_canonical},
        {"api_key": 63, "kind": "request", "version": 1, "hex": good[:-4]},
        {"api_key": 0, "kind": "request_header", "version": 2, "hex": "0012000300000001000263 6b00"},
        {"api_key": 63, "kind": "bogus", "version": 1, "hex": good},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\nnot json\n")
    proc = subprocess.run(
        [sys.executable, "-m", "kraft_jbod.cli", "codec", "roundtrip", str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    out = proc.stdout.strip().splitlines()
    results = [json.loads(x) for x in out[:-1]]
    assert out[-1] == "2 byte-exact, 1 differ, 3 failed"
    assert results[0]["byte_exact"] is True and results[0]["value"]["brokerEpoch"] == 2
    assert results[1]["byte_exact"] is False and results[1]["reencoded"].endswith("010000")
    assert (results[2]["field_path"], results[2]["offset"], results[2]["error_type"]) == (
        "WantShutDown",
        21,
        "DecodeError",
    )
    assert results[3]["byte_exact"] is True and results[3]["value"]["clientId"] == "ck"
    assert "kind must be one of" in results[4]["error"]
    assert results[5]["error"].startswith("not JSON") and results[5]["line"] == 6
