"""Without crc32c and cramjam (a stock Spark worker): the same CRC-32C values from pure
Python, gzip through zlib, and a clear per-frame anomaly for snappy, lz4 and zstd.

The libraries are hidden in a child interpreter by a meta-path finder, so this process
keeps them; the child decodes bytes this process made with them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from kraft_jbod.wire import compression
from kraft_jbod.wire.crc import NATIVE, crc32c, crc32c_python
from tests.capture.kafka_helpers import batch_bytes, capture, conversation, produce_request

ROOT = Path(__file__).resolve().parents[2]

_CHILD = textwrap.dedent(
    """
    import io, json, sys

    class _Hide:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("crc32c", "cramjam"):
                raise ImportError(f"No module named {name!r} (hidden by the test)")
            return None

    sys.meta_path.insert(0, _Hide())
    from kraft_jbod.capture.kafka import decode_capture
    from kraft_jbod.analytics.rows import anomaly_kind
    from kraft_jbod.wire import compression, crc

    out = {"native": crc.NATIVE, "cramjam": compression.CRAMJAM, "frames": []}
    for f in decode_capture(io.BytesIO(bytes.fromhex(sys.stdin.read()))):
        out["frames"].append({
            "crc_valid": [b.get("crcValid") for r in f.records for b in r["batches"]],
            "records": [len(b.get("records", [])) for r in f.records for b in r["batches"]],
            "kinds": sorted({anomaly_kind(a) for a in f.anomalies}),
            "anomalies": f.anomalies,
        })
    out["gzip_roundtrip"] = compression.decompress(1, compression.compress(1, b"abc" * 100)) == b"abc" * 100
    try:
        compression.compress(4, b"x")
    except Exception as exc:
        out["zstd_compress"] = type(exc).__name__
    print(json.dumps(out))
    """
)


def test_pure_python_crc32c_equals_the_library() -> None:
    assert NATIVE  # this environment has the library: the comparison below is real
    for data in (b"", b"123456789", bytes(range(256)) * 40, os.urandom(1000)):
        assert crc32c_python(data) == crc32c(data)
        assert crc32c_python(data[7:], crc32c_python(data[:7])) == crc32c(data)
    assert crc32c_python(b"123456789") == 0xE3069283  # the CRC-32C check value


def test_a_worker_without_the_native_libraries_decodes_what_it_can_and_says_what_it_cannot() -> None:
    frames = [
        produce_request(batch_bytes([b"plain"] * 3), 1),
        produce_request(batch_bytes([b"gz"] * 4, codec_id=compression.GZIP), 2),
        produce_request(batch_bytes([b"zs"] * 5, codec_id=compression.ZSTD), 3),
    ]

    def build(w: object) -> None:
        c = conversation(w)  # type: ignore[arg-type]
        for f in frames:
            c.client_send(f)

    blob = capture(build)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD],
        input=blob.hex(),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert (out["native"], out["cramjam"]) == (False, False)
    plain, gz, zs = out["frames"]
    assert plain == {"crc_valid": [True], "records": [3], "kinds": [], "anomalies": []}
    assert (gz["crc_valid"], gz["records"], gz["kinds"]) == ([True], [4], [])
    assert zs["records"] == [] and zs["kinds"] == ["compression library missing"]
    assert "zstd needs the cramjam library" in zs["anomalies"][0]
    assert out["gzip_roundtrip"] is True and out["zstd_compress"] == "CodecUnavailable"
