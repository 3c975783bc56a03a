"""Throughput of capture decoding: read, decode TCP, reassemble, split Kafka frames.

Writes a synthetic pcapng (default ~200 MB) with kraft_jbod's own writer into a temporary
directory: many concurrent-looking connections carrying request/response frames of mixed
sizes (some spanning dozens of segments), with a few reordered and duplicated segments so
the reassembler's slow paths run too. Then times three stages over the same file:

1. ``CaptureReader.records()`` alone;
2. plus ``TcpDecoder.decode``;
3. the full ``iter_frames`` pipeline (reassembly and frame splitting).

Prints packets/s and MB/s per stage; with ``--tshark`` also times ``tshark -r`` on it.
Run: ``python -m tools.bench.bench_capture_read [--mb 200] [--tshark]``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from kraft_jbod.capture.packets import TcpDecoder
from kraft_jbod.capture.pcapfile import CaptureReader
from kraft_jbod.capture.pcapng_writer import PcapngWriter, TcpConversation
from kraft_jbod.capture.pipeline import iter_frames
from kraft_jbod.capture.streams import Frame


def _frame(payload_len: int, corr: int, request: bool, rnd: random.Random) -> bytes:
    if request:
        head = struct.pack(">hhih", rnd.choice([0, 1, 3, 18]), rnd.randint(0, 12), corr, 5) + b"bench"
    else:
        head = struct.pack(">i", corr)
    body = rnd.randbytes(min(payload_len, 4096)) * (payload_len // 4096 + 1)
    payload = head + body[:payload_len]
    return struct.pack(">i", len(payload)) + payload


def write_capture(path: Path, target_bytes: int, seed: int = 1) -> None:
    rnd = random.Random(seed)
    with path.open("wb") as fh:
        w = PcapngWriter(fh)
        conn = 0
        ts = 1_700_000_000_000_000_000
        while fh.tell() < target_bytes:
            conn += 1
            conv = TcpConversation(
                w,
                (f"10.0.{conn % 250}.{conn % 200 + 1}", 30000 + conn % 30000),
                ("10.1.0.1", 9092),
                start_ns=ts,
                client_isn=rnd.getrandbits(32),
                server_isn=rnd.getrandbits(32),
            )
            for corr in range(rnd.randint(20, 200)):
                conv.client_send(_frame(rnd.choice([60, 200, 1200, 9000]), corr, True, rnd))
                size = rnd.choice([40, 300, 5000, 60000, 250000])
                data = _frame(size, corr, False, rnd)
                if rnd.random() < 0.05 and len(data) > 3 * 1460:
                    n = -(-len(data) // 1460)
                    order = list(range(n))
                    order[1], order[2] = order[2], order[1]
                    order.append(0)  # a duplicate
                    conv.server_send(data, order=order)
                else:
                    conv.server_send(data)
            conv.close()
            ts = conv.clock


def _rate(label: str, packets: int, size: int, seconds: float, extra: str = "") -> None:
    print(
        f"{label:<34} {packets / seconds / 1e3:8.0f} k packets/s {size / seconds / 1e6:8.1f} MB/s"
        f"  ({seconds:.2f} s){extra}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=200, help="size of the synthetic capture in MB")
    ap.add_argument("--tshark", action="store_true", help="also time tshark on the same file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.pcapng"
        t0 = time.perf_counter()
        write_capture(path, args.mb * 1_000_000)
        size = path.stat().st_size
        print(f"wrote {size / 1e6:.0f} MB in {time.perf_counter() - t0:.1f} s: {path}")

        with path.open("rb") as fh:
            t0 = time.perf_counter()
            packets = sum(1 for _ in CaptureReader(fh).records())
            _rate("1. read records", packets, size, time.perf_counter() - t0)

        with path.open("rb") as fh:
            t0 = time.perf_counter()
            dec = TcpDecoder()
            decode = dec.decode
            for ts, lt, data, _c, _o, idx in CaptureReader(fh).records():
                decode(lt, data, ts, idx)
            _rate("2. read + decode TCP", packets, size, time.perf_counter() - t0)

        with path.open("rb") as fh:
            t0 = time.perf_counter()
            frames = incomplete = 0
            for item in iter_frames(fh):
                if isinstance(item, Frame):
                    frames += 1
                    incomplete += not item.complete
            dt = time.perf_counter() - t0
            _rate(
                "3. + reassembly + frames",
                packets,
                size,
                dt,
                f"  {frames} frames ({frames / dt / 1e3:.0f} k/s), {incomplete} incomplete",
            )

        tshark = shutil.which("tshark")
        if args.tshark and tshark:
            for label, extra in (
                ("tshark -r (default dissection)", []),
                ("tshark Kafka fields", ["-d", "tcp.port==9092,kafka", "-T", "fields", "-e", "kafka.request_key"]),
            ):
                t0 = time.perf_counter()
                subprocess.run(
                    [tshark, "-r", str(path), *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
                )
                _rate(label, packets, size, time.perf_counter() - t0)


if __name__ == "__main__":
    main()
