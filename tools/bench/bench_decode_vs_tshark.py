"""Kafka capture decoding, kraft-jbod against ``tshark -T json``, same captures, same run.

Inputs:

1. ``dissectable``: a synthetic capture of client traffic in versions Debian's tshark 4.0
   dissects completely (ApiVersions v3, Metadata v9, Produce v8 and Fetch v11 with record
   batches, uncompressed and gzip, group Heartbeat v4), written with kraft_jbod's own
   pcapng writer and codecs on a non-default port (so tshark needs ``-d tcp.port==N,kafka``).
   Before timing, tshark's expert info on it must hold no "Unsupported", "Unknown" or
   "Malformed" item, so both tools do the whole work;
2. ``modern``: the same traffic in the versions current clients send (Metadata v12, Produce
   v9, Fetch v12) plus controller connections (BrokerRegistration, BrokerHeartbeat,
   AssignReplicasToDirs). tshark 4.0 gives up on most of these frames (unsupported
   versions, unknown api keys), so its figure there is a lower bound of the real work;
3. the real captures in ../shared/captures, one file at a time.

Both tools run as whole processes per file, each pinned to one core (``taskset -c 0``):
``kraft-jbod decode --no-progress FILE`` (read, reassemble, pair, decode, decode record
batches, re-encode check, one JSON line per frame) and ``tshark -r FILE -T json``, both
writing to a pipe that is drained. Start-up is part of both. Measured per process: wall
time and CPU time (user + system of the child, from ``wait4``); the best of ``--repeat``
runs is kept. Ratios are tshark / kraft-jbod (> 1 means kraft-jbod is faster).

Run: ``python -m tools.bench.bench_decode_vs_tshark [--connections 400] [--rounds 20] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kraft_jbod import codec
from kraft_jbod.capture.kafka import KafkaDecoder, decode_capture
from kraft_jbod.capture.pcapng_writer import PcapngWriter, TcpConversation
from kraft_jbod.messages import api_versions_request as avq
from kraft_jbod.messages import api_versions_response as avr
from kraft_jbod.messages import assign_replicas_to_dirs_request as arq
from kraft_jbod.messages import assign_replicas_to_dirs_response as arr
from kraft_jbod.messages import broker_heartbeat_request as bhq
from kraft_jbod.messages import broker_heartbeat_response as bhr
from kraft_jbod.messages import broker_registration_request as brq
from kraft_jbod.messages import broker_registration_response as brr
from kraft_jbod.messages import fetch_request as fq
from kraft_jbod.messages import fetch_response as fr
from kraft_jbod.messages import heartbeat_request as hq
from kraft_jbod.messages import heartbeat_response as hr
from kraft_jbod.messages import metadata_request as mq
from kraft_jbod.messages import metadata_response as mr
from kraft_jbod.messages import produce_request as pq
from kraft_jbod.messages import produce_response as pr
from kraft_jbod.wire import compression
from kraft_jbod.wire.records import Record, RecordBatch, write_record_batch

PORT = 19092
CAPTURES = Path(__file__).resolve().parents[3] / "shared" / "captures"


def _batch(rnd: random.Random, base: int, codec_id: int) -> bytes:
    n = rnd.randint(1, 20)
    recs = [
        Record(
            offset_delta=i,
            timestamp_delta=i,
            key=f"user-{rnd.randint(0, 999)}".encode(),
            value=(
                f'{{"id":{base + i},"event":"click","page":"/p/{rnd.randint(0, 99)}"'
                f',"pad":"{"x" * rnd.randint(10, 300)}"}}'
            ).encode(),
            headers=[("trace", b"abc123")] if i % 3 == 0 else [],
        )
        for i in range(n)
    ]
    out = bytearray()
    write_record_batch(
        out, RecordBatch.of(recs, base_offset=base, base_timestamp=1_700_000_000_000, attributes=codec_id)
    )
    return bytes(out)


MODERN: dict[str, Any] = {
    "metadata": 12,
    "produce": 9,
    "fetch": 12,
    "advertised": [(0, 11), (1, 17), (3, 12), (8, 9), (12, 4), (18, 4)],
}
# What tshark 4.0's Kafka dissector supports (it flags higher advertised maxima too).
DISSECTABLE: dict[str, Any] = {
    "metadata": 9,
    "produce": 8,
    "fetch": 11,
    "advertised": [(0, 8), (1, 11), (3, 9), (8, 8), (12, 4), (18, 3)],
}


def _client_connection(
    conv: TcpConversation, rnd: random.Random, rounds: int, versions: dict[str, Any] = MODERN
) -> None:
    corr = 0
    cid = f"app-{rnd.randint(0, 99)}"
    topic_id = uuid.UUID(int=rnd.getrandbits(128))

    def x(req: object, resp: object, ver: int) -> None:
        nonlocal corr
        corr += 1
        conv.client_send(codec.encode_request(req, ver, corr, cid))  # type: ignore[arg-type]
        conv.server_send(codec.encode_response(resp, ver, corr))  # type: ignore[arg-type]

    x(
        avq.ApiVersionsRequest(client_software_name="bench", client_software_version="1.0"),
        avr.ApiVersionsResponse(
            api_keys=[avr.ApiVersion(api_key=k, min_version=0, max_version=v) for k, v in versions["advertised"]]
        ),
        3,
    )
    x(
        mq.MetadataRequest(topics=None),
        mr.MetadataResponse(
            brokers=[mr.MetadataResponseBroker(node_id=i, host=f"10.1.0.{i}", port=9092, rack=None) for i in range(3)],
            cluster_id="bench",
            controller_id=1,
            topics=[
                mr.MetadataResponseTopic(
                    name=f"t{t}",
                    topic_id=topic_id,
                    partitions=[
                        mr.MetadataResponsePartition(
                            partition_index=p, leader_id=p % 3, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2]
                        )
                        for p in range(6)
                    ],
                )
                for t in range(4)
            ],
        ),
        versions["metadata"],
    )
    offset = 0
    for _ in range(rounds):
        kind = rnd.random()
        if kind < 0.4:
            data = _batch(rnd, offset, compression.GZIP if rnd.random() < 0.3 else 0)
            x(
                pq.ProduceRequest(
                    acks=-1,
                    timeout_ms=30000,
                    topic_data=[
                        pq.TopicProduceData(name="t0", partition_data=[pq.PartitionProduceData(index=0, records=data)])
                    ],
                ),
                pr.ProduceResponse(
                    responses=[
                        pr.TopicProduceResponse(
                            name="t0", partition_responses=[pr.PartitionProduceResponse(index=0, base_offset=offset)]
                        )
                    ]
                ),
                versions["produce"],
            )
        elif kind < 0.8:
            data = _batch(rnd, offset, compression.GZIP if rnd.random() < 0.3 else 0)
            x(
                fq.FetchRequest(
                    max_wait_ms=500,
                    min_bytes=1,
                    topics=[
                        fq.FetchTopic(
                            topic="t0",
                            partitions=[
                                fq.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
                            ],
                        )
                    ],
                ),
                fr.FetchResponse(
                    responses=[
                        fr.FetchableTopicResponse(
                            topic="t0",
                            partitions=[fr.PartitionData(partition_index=0, high_watermark=offset + 100, records=data)],
                        )
                    ]
                ),
                versions["fetch"],
            )
        else:
            x(hq.HeartbeatRequest(group_id="g1", generation_id=3, member_id="m-1"), hr.HeartbeatResponse(), 4)
        offset += 20
    conv.close()


def _controller_connection(conv: TcpConversation, rnd: random.Random, rounds: int) -> None:
    corr = 0
    bid = rnd.randint(1, 50)
    dirs = [uuid.UUID(int=rnd.getrandbits(128)) for _ in range(3)]

    def x(req: object, resp: object, ver: int) -> None:
        nonlocal corr
        corr += 1
        conv.client_send(codec.encode_request(req, ver, corr, f"broker-{bid}"))  # type: ignore[arg-type]
        conv.server_send(codec.encode_response(resp, ver, corr))  # type: ignore[arg-type]

    x(
        brq.BrokerRegistrationRequest(
            broker_id=bid,
            cluster_id="bench-cluster-id-00000",
            incarnation_id=uuid.UUID(int=bid),
            listeners=[brq.Listener(name="PLAINTEXT", host="h", port=9092)],
            rack=None,
            log_dirs=dirs,
        ),
        brr.BrokerRegistrationResponse(),
        4,
    )
    for i in range(rounds):
        if i % 5 == 4:
            x(
                arq.AssignReplicasToDirsRequest(
                    broker_id=bid,
                    broker_epoch=7,
                    directories=[
                        arq.DirectoryData(
                            id=d,
                            topics=[
                                arq.TopicData(
                                    topic_id=uuid.UUID(int=9),
                                    partitions=[arq.PartitionData(partition_index=p) for p in range(4)],
                                )
                            ],
                        )
                        for d in dirs
                    ],
                ),
                arr.AssignReplicasToDirsResponse(),
                0,
            )
        else:
            x(
                bhq.BrokerHeartbeatRequest(
                    broker_id=bid,
                    broker_epoch=7,
                    current_metadata_offset=100 + i,
                    offline_log_dirs=dirs[:1] if i % 7 == 0 else [],
                ),
                bhr.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False),
                1,
            )
    conv.close()


def write_synthetic(path: Path, connections: int, rounds: int, seed: int = 7, *, dissectable: bool = False) -> None:
    rnd = random.Random(seed)
    with path.open("wb") as fh:
        w = PcapngWriter(fh)
        for c in range(connections):
            conv = TcpConversation(
                w,
                (f"10.0.{c // 250}.{c % 250 + 1}", 30000 + c),
                ("10.9.9.9", PORT),
                start_ns=1_700_000_000_000_000_000 + c * 1_000_000,
            )
            if dissectable:
                _client_connection(conv, rnd, rounds, DISSECTABLE)
            elif c % 4 == 3:
                _controller_connection(conv, rnd, rounds)
            else:
                _client_connection(conv, rnd, rounds)


def _pinned(cmd: list[str]) -> list[str]:
    return ["taskset", "-c", "0", *cmd] if shutil.which("taskset") else cmd


def _run(cmd: list[str]) -> tuple[float, float, bytes]:
    """Wall and CPU seconds of one whole process; its stdout is drained (tshark: not kept)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    head = proc.stdout.read(1 << 16)
    while proc.stdout.read(1 << 20):
        pass
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[:4]} failed with exit code {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, head


def ours_cmd(path: Path, ports: list[int]) -> list[str]:
    cmd = [sys.executable, "-m", "kraft_jbod.cli", "decode", "--no-progress", str(path)]
    for p in ports:
        cmd += ["--port", str(p)]
    return _pinned(cmd)


def tshark_cmd(path: Path, port: int) -> list[str]:
    exe = shutil.which("tshark")
    assert exe is not None
    return _pinned([exe, "-r", str(path), "-T", "json", "-d", f"tcp.port=={port},kafka"])


def frames_of(path: Path, ports: list[int]) -> int:
    n = 0
    with path.open("rb") as fh:
        for _ in decode_capture(fh, ports=ports, decoder=KafkaDecoder()):
            n += 1
    return n


def tshark_gaps(path: Path, port: int) -> dict[str, int]:
    """tshark's expert messages that say it did not dissect something, with counts."""
    exe = shutil.which("tshark")
    assert exe is not None
    out = subprocess.run(
        [exe, "-r", str(path), "-d", f"tcp.port=={port},kafka", "-T", "fields", "-e", "_ws.expert.message"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    gaps: dict[str, int] = {}
    for line in out.splitlines():
        for msg in line.split(","):
            if any(w in msg for w in ("Unsupported", "Unknown", "Malformed", "does not end")):
                gaps[msg] = gaps.get(msg, 0) + 1
    return gaps


def best_of(cmd: list[str], repeat: int) -> tuple[float, float]:
    runs = [_run(cmd)[:2] for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def compare(label: str, files: list[tuple[Path, list[int], int]], repeat: int) -> dict[str, float]:
    """Whole processes per file, both tools, summed over the files."""
    frames = 0
    o_wall = o_cpu = t_wall = t_cpu = 0.0
    for path, ports, ts_port in files:
        frames += frames_of(path, ports)
        w, c = best_of(ours_cmd(path, ports), repeat)
        o_wall += w
        o_cpu += c
        w, c = best_of(tshark_cmd(path, ts_port), repeat)
        t_wall += w
        t_cpu += c
    print(f"{label}: {len(files)} file(s), {frames} Kafka frames")
    print(f"  kraft-jbod decode  wall {o_wall:7.3f} s  cpu {o_cpu:7.3f} s  {frames / o_cpu:10.0f} frames/cpu-s")
    print(f"  tshark -T json     wall {t_wall:7.3f} s  cpu {t_cpu:7.3f} s  {frames / t_cpu:10.0f} frames/cpu-s")
    print(f"  ratio tshark/kraft-jbod: cpu {t_cpu / o_cpu:.2f}x, wall {t_wall / o_wall:.2f}x")
    return {
        "frames": frames,
        "ours_cpu": o_cpu,
        "tshark_cpu": t_cpu,
        "cpu_ratio": t_cpu / o_cpu,
        "wall_ratio": t_wall / o_wall,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool and file (best is kept)")
    args = ap.parse_args()
    if shutil.which("tshark") is None:
        raise SystemExit("tshark is needed: apt-get install -y tshark")
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "dissectable.pcapng"
        write_synthetic(full, args.connections, args.rounds, dissectable=True)
        gaps = tshark_gaps(full, PORT)
        if gaps:
            raise SystemExit(f"tshark does not fully dissect the 'dissectable' capture: {gaps}")
        print(f"dissectable capture: {full.stat().st_size / 1e6:.1f} MB; tshark reports no undissected frame")
        compare("dissectable (tshark does the whole work)", [(full, [PORT], PORT)], args.repeat)
        modern = Path(tmp) / "modern.pcapng"
        write_synthetic(modern, args.connections, args.rounds)
        skipped = sum(tshark_gaps(modern, PORT).values())
        print(f"\nmodern capture: {modern.stat().st_size / 1e6:.1f} MB; tshark leaves {skipped} frames undissected")
        compare("modern (tshark's figure is a lower bound)", [(modern, [PORT], PORT)], args.repeat)
    files = sorted(p for p in CAPTURES.glob("*/*") if p.suffix in (".pcap", ".pcapng"))
    if files:
        entries = []
        for p in files:
            port = 36333 if "deepflow" in str(p) and "36333" not in p.name else 9092
            entries.append((p, [9092, 36333], port))
        print()
        compare(f"real captures in {CAPTURES}", entries, args.repeat)


if __name__ == "__main__":
    main()
