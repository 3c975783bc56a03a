"""Kafka capture decoding, kraft-jbod against ``tshark -T json``, same captures, same run.

Two inputs:

1. a synthetic capture of realistic mixed traffic, written with kraft_jbod's own pcapng
   writer and codecs: client connections doing ApiVersions, Metadata v12, Produce v9 with
   record batches (uncompressed and gzip), Fetch v12 with batches, group Heartbeat and
   OffsetCommit, plus controller connections with BrokerRegistration, BrokerHeartbeat and
   AssignReplicasToDirs, on a non-default port (so tshark needs ``-d tcp.port==N,kafka``);
2. the real captures in ../shared/captures (small files: tshark's start-up dominates).

Both tools run pinned to one core. kraft-jbod does the whole job the CLI does: read,
reassemble, pair, decode, decode record batches, re-encode check, JSON line per frame.
tshark writes its JSON to a pipe we drain. Prints frames per second for each and the
ratio kraft-jbod / tshark (> 1 means we are faster).

Run: ``python -m tools.bench.bench_decode_vs_tshark [--connections 400] [--rounds 20]``.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from kraft_jbod import codec
from kraft_jbod.capture.kafka import KafkaDecoder, decode_capture
from kraft_jbod.capture.output import frame_to_line
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
    recs = [Record(offset_delta=i, timestamp_delta=i,
                   key=f"user-{rnd.randint(0, 999)}".encode(),
                   value=(f'{{"id":{base + i},"event":"click","page":"/p/{rnd.randint(0, 99)}"'
                          f',"pad":"{"x" * rnd.randint(10, 300)}"}}').encode(),
                   headers=[("trace", b"abc123")] if i % 3 == 0 else [])
            for i in range(n)]
    out = bytearray()
    write_record_batch(out, RecordBatch.of(recs, base_offset=base,
                                           base_timestamp=1_700_000_000_000,
                                           attributes=codec_id))
    return bytes(out)


def _client_connection(conv: TcpConversation, rnd: random.Random, rounds: int) -> None:
    corr = 0
    cid = f"app-{rnd.randint(0, 99)}"
    topic_id = uuid.UUID(int=rnd.getrandbits(128))

    def x(req: object, resp: object, ver: int) -> None:
        nonlocal corr
        corr += 1
        conv.client_send(codec.encode_request(req, ver, corr, cid))  # type: ignore[arg-type]
        conv.server_send(codec.encode_response(resp, ver, corr))  # type: ignore[arg-type]

    x(avq.ApiVersionsRequest(client_software_name="bench", client_software_version="1.0"),
      avr.ApiVersionsResponse(api_keys=[avr.ApiVersion(api_key=k, min_version=0, max_version=v)
                                        for k, v in [(0, 11), (1, 17), (3, 12), (8, 9),
                                                     (12, 4), (18, 4)]]), 3)
    x(mq.MetadataRequest(topics=None),
      mr.MetadataResponse(brokers=[mr.MetadataResponseBroker(node_id=i, host=f"10.1.0.{i}",
                                                             port=9092, rack=None)
                                   for i in range(3)],
                          cluster_id="bench", controller_id=1,
                          topics=[mr.MetadataResponseTopic(name=f"t{t}", topic_id=topic_id,
                                                           partitions=[
                              mr.MetadataResponsePartition(partition_index=p, leader_id=p % 3,
                                                           replica_nodes=[0, 1, 2],
                                                           isr_nodes=[0, 1, 2])
                              for p in range(6)]) for t in range(4)]), 12)
    offset = 0
    for _ in range(rounds):
        kind = rnd.random()
        if kind < 0.4:
            data = _batch(rnd, offset, compression.GZIP if rnd.random() < 0.3 else 0)
            x(pq.ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[pq.TopicProduceData(
                name="t0", partition_data=[pq.PartitionProduceData(index=0, records=data)])]),
              pr.ProduceResponse(responses=[pr.TopicProduceResponse(name="t0", partition_responses=[
                  pr.PartitionProduceResponse(index=0, base_offset=offset)])]), 9)
        elif kind < 0.8:
            data = _batch(rnd, offset, compression.GZIP if rnd.random() < 0.3 else 0)
            x(fq.FetchRequest(max_wait_ms=500, min_bytes=1, topics=[fq.FetchTopic(
                topic="t0", partitions=[fq.FetchPartition(partition=0, fetch_offset=offset,
                                                          partition_max_bytes=1 << 20)])]),
              fr.FetchResponse(responses=[fr.FetchableTopicResponse(topic="t0", partitions=[
                  fr.PartitionData(partition_index=0, high_watermark=offset + 100,
                                   records=data)])]), 12)
        else:
            x(hq.HeartbeatRequest(group_id="g1", generation_id=3, member_id="m-1"),
              hr.HeartbeatResponse(), 4)
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

    x(brq.BrokerRegistrationRequest(broker_id=bid, cluster_id="bench-cluster-id-00000",
                                    incarnation_id=uuid.UUID(int=bid),
                                    listeners=[brq.Listener(name="PLAINTEXT", host="h",
                                                            port=9092)],
                                    rack=None, log_dirs=dirs), brr.BrokerRegistrationResponse(),
      4)
    for i in range(rounds):
        if i % 5 == 4:
            x(arq.AssignReplicasToDirsRequest(broker_id=bid, broker_epoch=7, directories=[
                arq.DirectoryData(id=d, topics=[arq.TopicData(
                    topic_id=uuid.UUID(int=9), partitions=[arq.PartitionData(partition_index=p)
                                                           for p in range(4)])])
                for d in dirs]),
              arr.AssignReplicasToDirsResponse(), 0)
        else:
            x(bhq.BrokerHeartbeatRequest(broker_id=bid, broker_epoch=7,
                                         current_metadata_offset=100 + i,
                                         offline_log_dirs=dirs[:1] if i % 7 == 0 else []),
              bhr.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False), 1)
    conv.close()


def write_synthetic(path: Path, connections: int, rounds: int, seed: int = 7) -> None:
    rnd = random.Random(seed)
    with path.open("wb") as fh:
        w = PcapngWriter(fh)
        for c in range(connections):
            conv = TcpConversation(w, (f"10.0.{c // 250}.{c % 250 + 1}", 30000 + c),
                                   ("10.9.9.9", PORT), start_ns=1_700_000_000_000_000_000
                                   + c * 1_000_000)
            if c % 4 == 3:
                _controller_connection(conv, rnd, rounds)
            else:
                _client_connection(conv, rnd, rounds)


def ours(path: Path, ports: list[int]) -> tuple[int, float]:
    sink = io.StringIO()
    t = time.perf_counter()
    n = 0
    with path.open("rb") as fh:
        for f in decode_capture(fh, ports=ports, decoder=KafkaDecoder()):
            sink.write(frame_to_line(f))
            sink.write("\n")
            n += 1
    return n, time.perf_counter() - t


def tshark(path: Path, port: int) -> float:
    exe = shutil.which("tshark")
    assert exe is not None
    cmd = [exe, "-r", str(path), "-T", "json", "-d", f"tcp.port=={port},kafka"]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--connections", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    if shutil.which("tshark") is None:
        raise SystemExit("tshark is needed: apt-get install -y tshark")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mixed.pcapng"
        write_synthetic(path, args.connections, args.rounds)
        size = path.stat().st_size
        n, t_ours = ours(path, [PORT])
        t_ts = tshark(path, PORT)
        print(f"synthetic mixed traffic: {size / 1e6:.1f} MB, {n} Kafka frames")
        print(f"  kraft-jbod decode  {t_ours:7.2f} s  {n / t_ours:10.0f} frames/s")
        print(f"  tshark -T json     {t_ts:7.2f} s  {n / t_ts:10.0f} frames/s")
        print(f"  ratio kraft-jbod / tshark: {t_ts / t_ours:.2f}x")
    files = sorted(p for p in CAPTURES.glob("*/*") if p.suffix in (".pcap", ".pcapng"))
    if files:
        n_all = 0
        t_o = t_t = 0.0
        for p in files:
            port = 36333 if "deepflow" in str(p) and "36333" not in p.name else 9092
            n, t = ours(p, [9092, 36333])
            n_all += n
            t_o += t
            t_t += tshark(p, port)
        print(f"real captures: {len(files)} files, {n_all} Kafka frames")
        print(f"  kraft-jbod decode  {t_o:7.3f} s  {n_all / t_o:10.0f} frames/s")
        print(f"  tshark -T json     {t_t:7.3f} s  {n_all / t_t:10.0f} frames/s "
              "(one process per file: start-up dominates)")
        print(f"  ratio kraft-jbod / tshark: {t_t / t_o:.2f}x")


if __name__ == "__main__":
    main()
