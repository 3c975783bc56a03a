"""Generator of large synthetic Kafka captures for the stats benchmarks (deterministic per seed).

What a capture holds: many client connections (producers, consumers, admin-ish clients
of several software names and versions: ApiVersions v3 first, then Metadata, Produce with
real record batches, Fetch responses carrying records, OffsetCommit, Heartbeat,
FindCoordinator; a few old clients on deprecated versions; ~1 % of responses with an
error code) interleaved in time with KRaft controller traffic from three JBOD brokers
(ApiVersions, BrokerRegistration with 2-3 log dirs, heartbeats, AssignReplicasToDirs, Raft
Fetch of ``__cluster_metadata`` carrying RegisterBrokerRecord/PartitionRecord/
PartitionChangeRecord, a disk failure reported through OfflineLogDirs). Two KIP-858
violations are planted: broker 3 heartbeats an offline directory it never registered, and
the controller accepts an assignment of broker 2 to its failed directory.

Strategy: every message is encoded once by our generated codec into a pool of templates;
sending patches only the correlation id, so hundreds of MB take tens of seconds. Packets
go through :class:`~kraft_jbod.capture.pcapng_writer.TcpConversation` (MSS 1460, real
checksums), so Wireshark reads the files too. Output is a function of the arguments only.

Run: ``python -m tools.bench.gen_capture OUT.pcapng --mb 300 [--seed 7] [--pcap]``.
"""

from __future__ import annotations

import argparse
import random
import struct
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from kraft_jbod import codec
from kraft_jbod.capture.pcapng_writer import PcapngWriter, PcapWriter, TcpConversation
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
from kraft_jbod.messages import find_coordinator_request as fcq
from kraft_jbod.messages import find_coordinator_response as fcr
from kraft_jbod.messages import heartbeat_request as hq
from kraft_jbod.messages import heartbeat_response as hr
from kraft_jbod.messages import metadata_request as mq
from kraft_jbod.messages import metadata_response as mr
from kraft_jbod.messages import offset_commit_request as ocq
from kraft_jbod.messages import offset_commit_response as ocr
from kraft_jbod.messages import produce_request as pq
from kraft_jbod.messages import produce_response as pr
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kraft_jbod.wire.constants import METADATA_TOPIC_ID
from kraft_jbod.wire.records import Record, RecordBatch, write_record_batch

START_NS = 1_735_000_000_000_000_000
CONTROLLER = ("10.1.0.100", 9093)
BROKER_PORT = 9092
CLUSTER_ID = "q1Sh-9_ISia_zwGINzRvyQ"
SOFTWARE = [
    ("apache-kafka-java", "3.9.1"),
    ("apache-kafka-java", "4.0.0"),
    ("librdkafka", "2.6.1"),
    ("kafka-python", "2.0.2"),
    ("franz-go", "1.18.0"),
]

Pair = tuple[bytes, bytes]  # framed request, framed response (correlation id 0)


def _req(body: Any, v: int, client: str) -> bytes:
    return codec.encode_request(body, v, 0, client)


def _resp(body: Any, v: int) -> bytes:
    return codec.encode_response(body, v, 0)


def _batch(rng: random.Random, n: int, size: int, base: int = 0) -> bytes:
    recs = [
        Record(
            offset_delta=i,
            key=f"k{rng.randrange(10_000)}".encode(),
            value=rng.randbytes(size // 2) + b"x" * (size - size // 2),
        )
        for i in range(n)
    ]
    out = bytearray()
    write_record_batch(out, RecordBatch.of(recs, base_offset=base, base_timestamp=START_NS // 1_000_000))
    return bytes(out)


class Templates:
    """Pools of pre-encoded exchanges per kind, built from ``rng``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.topics = [f"orders-{i}" for i in range(12)]
        self.client: dict[str, list[Pair]] = {}
        c = "app"
        self.client["metadata"] = [
            (
                _req(mq.MetadataRequest(topics=None, allow_auto_topic_creation=False), 12, c),
                _resp(
                    mr.MetadataResponse(
                        brokers=[
                            mr.MetadataResponseBroker(node_id=i, host=f"10.1.0.{i}", port=BROKER_PORT)
                            for i in (1, 2, 3)
                        ],
                        cluster_id=CLUSTER_ID,
                        controller_id=100,
                        topics=[
                            mr.MetadataResponseTopic(
                                name=t,
                                topic_id=uuid.UUID(int=1000 + j),
                                partitions=[
                                    mr.MetadataResponsePartition(
                                        partition_index=p,
                                        leader_id=1 + p % 3,
                                        leader_epoch=3,
                                        replica_nodes=[1, 2, 3],
                                        isr_nodes=[1, 2, 3],
                                    )
                                    for p in range(6)
                                ],
                            )
                            for j, t in enumerate(self.topics)
                        ],
                    ),
                    12,
                ),
            )
        ]
        self.client["produce"] = []
        self.client["produce_err"] = []
        for i in range(24):
            size = rng.choice([200, 800, 1500, 4000, 12000])
            n = rng.choice([1, 5, 20, 50])
            t = rng.choice(self.topics)
            req = pq.ProduceRequest(
                acks=-1,
                timeout_ms=30000,
                topic_data=[
                    pq.TopicProduceData(
                        name=t,
                        partition_data=[pq.PartitionProduceData(index=i % 6, records=_batch(rng, n, size // n + 1))],
                    )
                ],
            )
            for err, pool in ((0, "produce"), (6, "produce_err")):
                resp = pr.ProduceResponse(
                    responses=[
                        pr.TopicProduceResponse(
                            name=t,
                            partition_responses=[
                                pr.PartitionProduceResponse(index=i % 6, error_code=err, base_offset=1000 * i)
                            ],
                        )
                    ]
                )
                self.client[pool].append((_req(req, 9, c), _resp(resp, 9)))
        self.client["produce_old"] = [
            (
                _req(
                    pq.ProduceRequest(
                        acks=1,
                        timeout_ms=1000,
                        topic_data=[
                            pq.TopicProduceData(
                                name="legacy",
                                partition_data=[pq.PartitionProduceData(index=0, records=_batch(rng, 3, 100))],
                            )
                        ],
                    ),
                    3,
                    c,
                ),
                _resp(
                    pr.ProduceResponse(
                        responses=[
                            pr.TopicProduceResponse(
                                name="legacy", partition_responses=[pr.PartitionProduceResponse(index=0)]
                            )
                        ]
                    ),
                    3,
                ),
            )
        ]
        self.client["fetch"] = []
        for i in range(24):
            t = rng.choice(self.topics)
            n = rng.choice([0, 1, 10, 40])
            records = _batch(rng, n, rng.choice([100, 600, 2500]), base=i * 100) if n else b""
            self.client["fetch"].append(
                (
                    _req(
                        fq.FetchRequest(
                            max_wait_ms=500,
                            min_bytes=1,
                            session_id=0,
                            session_epoch=-1,
                            topics=[
                                fq.FetchTopic(
                                    topic=t,
                                    partitions=[
                                        fq.FetchPartition(
                                            partition=i % 6, fetch_offset=i * 100, partition_max_bytes=1 << 20
                                        )
                                    ],
                                )
                            ],
                        ),
                        12,
                        c,
                    ),
                    _resp(
                        fr.FetchResponse(
                            responses=[
                                fr.FetchableTopicResponse(
                                    topic=t,
                                    partitions=[
                                        fr.PartitionData(
                                            partition_index=i % 6,
                                            high_watermark=i * 100 + n,
                                            last_stable_offset=i * 100 + n,
                                            log_start_offset=0,
                                            records=records,
                                        )
                                    ],
                                )
                            ]
                        ),
                        12,
                    ),
                )
            )
        self.client["commit"] = [
            (
                _req(
                    ocq.OffsetCommitRequest(
                        group_id="g1",
                        generation_id_or_member_epoch=5,
                        member_id="m-1",
                        topics=[
                            ocq.OffsetCommitRequestTopic(
                                name=t,
                                partitions=[
                                    ocq.OffsetCommitRequestPartition(
                                        partition_index=p, committed_offset=rng.randrange(1 << 30)
                                    )
                                    for p in range(6)
                                ],
                            )
                        ],
                    ),
                    8,
                    c,
                ),
                _resp(
                    ocr.OffsetCommitResponse(
                        topics=[
                            ocr.OffsetCommitResponseTopic(
                                name=t,
                                partitions=[
                                    ocr.OffsetCommitResponsePartition(
                                        partition_index=p, error_code=0 if rng.random() > 0.02 else 22
                                    )
                                    for p in range(6)
                                ],
                            )
                        ]
                    ),
                    8,
                ),
            )
            for t in self.topics[:4]
        ]
        self.client["heartbeat"] = [
            (
                _req(hq.HeartbeatRequest(group_id="g1", generation_id=5, member_id="m-1"), 4, c),
                _resp(hr.HeartbeatResponse(error_code=e), 4),
            )
            for e in (0, 0, 0, 0, 0, 0, 0, 0, 0, 27)
        ]
        self.client["coordinator"] = [
            (
                _req(fcq.FindCoordinatorRequest(key_type=0, coordinator_keys=["g1"]), 4, c),
                _resp(
                    fcr.FindCoordinatorResponse(
                        coordinators=[fcr.Coordinator(key="g1", node_id=2, host="10.1.0.2", port=BROKER_PORT)]
                    ),
                    4,
                ),
            )
        ]

    def api_versions(self, name: str, version: str, client: str) -> Pair:
        served = {0: (0, 11), 1: (0, 17), 3: (0, 12), 8: (0, 9), 10: (0, 6), 12: (0, 4), 18: (0, 4)}
        return (
            _req(avq.ApiVersionsRequest(client_software_name=name, client_software_version=version), 3, client),
            _resp(
                avr.ApiVersionsResponse(
                    api_keys=[
                        avr.ApiVersion(api_key=k, min_version=a, max_version=b) for k, (a, b) in sorted(served.items())
                    ]
                ),
                3,
            ),
        )


def _patched(frame: bytes, corr: int, request: bool) -> bytes:
    at = 8 if request else 4
    return frame[:at] + struct.pack(">i", corr) + frame[at + 4 :]


class Conn:
    """One connection: a TCP conversation and its next correlation id."""

    def __init__(self, writer: Any, client: tuple[str, int], server: tuple[str, int], ts: int) -> None:
        self.conv = TcpConversation(writer, client, server, start_ns=ts, step_ns=2_000)
        self.corr = 0

    def exchange(self, pair: Pair, ts: int, latency_ns: int) -> int:
        corr = self.corr
        self.corr += 1
        self.conv.client_send(_patched(pair[0], corr, True), ts)
        self.conv.server_send(_patched(pair[1], corr, False), ts + latency_ns)
        return len(pair[0]) + len(pair[1])


class ControllerPlane:
    """Three JBOD brokers talking to one controller, with a scripted story."""

    def __init__(self, writer: Any, rng: random.Random, ts: int) -> None:
        self.rng = rng
        self.dirs = {b: [uuid.UUID(int=(b << 64) | (d + 0x100)) for d in range(3 if b == 1 else 2)] for b in (1, 2, 3)}
        self.epochs = {1: 100, 2: 101, 3: 102}
        self.conns = {b: Conn(writer, (f"10.1.0.{b}", 41000 + b), CONTROLLER, ts) for b in (1, 2, 3)}
        self.offset = 103
        self.topic = uuid.UUID(int=1000)
        self.failed: dict[int, uuid.UUID] = {}
        self.step = 0
        self.initial_sent = False
        for b, c in self.conns.items():
            name, ver = ("apache-kafka-java", "4.0.0")
            c.exchange(
                (
                    _req(
                        avq.ApiVersionsRequest(client_software_name=name, client_software_version=ver), 3, f"raft-{b}"
                    ),
                    _resp(
                        avr.ApiVersionsResponse(
                            api_keys=[
                                avr.ApiVersion(api_key=k, min_version=0, max_version=m)
                                for k, m in ((1, 17), (62, 4), (63, 1), (73, 0))
                            ]
                        ),
                        3,
                    ),
                ),
                ts,
                300_000,
            )
            reg = brq.BrokerRegistrationRequest(
                broker_id=b,
                cluster_id=CLUSTER_ID,
                incarnation_id=uuid.UUID(int=0x7000 + b),
                listeners=[brq.Listener(name="PLAINTEXT", host=f"10.1.0.{b}", port=BROKER_PORT, security_protocol=0)],
                features=[brq.Feature(name="metadata.version", min_supported_version=7, max_supported_version=21)],
                log_dirs=sorted(self.dirs[b]),
                previous_broker_epoch=-1,
            )
            answer = brr.BrokerRegistrationResponse(broker_epoch=self.epochs[b])
            c.exchange((_req(reg, 3, f"raft-{b}"), _resp(answer, 3)), ts + 1_000_000, 2_000_000)

    def _records(self) -> bytes:
        vals = []
        if not self.initial_sent:
            self.initial_sent = True
            for b in (1, 2, 3):
                vals.append(
                    codec.encode_metadata_record(
                        RegisterBrokerRecord(
                            broker_id=b,
                            incarnation_id=uuid.UUID(int=0x7000 + b),
                            broker_epoch=self.epochs[b],
                            end_points=[
                                BrokerEndpoint(
                                    name="PLAINTEXT", host=f"10.1.0.{b}", port=BROKER_PORT, security_protocol=0
                                )
                            ],
                            fenced=True,
                            log_dirs=sorted(self.dirs[b]),
                        ),
                        3,
                    )
                )
            for p in range(6):
                reps = [1 + p % 3, 1 + (p + 1) % 3]
                vals.append(
                    codec.encode_metadata_record(
                        PartitionRecord(
                            partition_id=p,
                            topic_id=self.topic,
                            replicas=reps,
                            isr=reps,
                            leader=reps[0],
                            leader_epoch=1,
                            directories=[self.dirs[r][p % len(self.dirs[r])] for r in reps],
                        ),
                        1,
                    )
                )
        elif self.failed:
            for b, d in self.failed.items():
                vals.append(
                    codec.encode_metadata_record(
                        BrokerRegistrationChangeRecord(
                            broker_id=b,
                            broker_epoch=self.epochs[b],
                            log_dirs=[x for x in sorted(self.dirs[b]) if x != d],
                        ),
                        2,
                    )
                )
            vals.append(
                codec.encode_metadata_record(PartitionChangeRecord(partition_id=5, topic_id=self.topic, leader=2), 0)
            )
        else:
            vals.append(
                codec.encode_metadata_record(
                    PartitionChangeRecord(partition_id=self.rng.randrange(6), topic_id=self.topic, isr=[1, 2, 3]), 0
                )
            )
        batch = RecordBatch.of(
            [Record(offset_delta=i, value=v) for i, v in enumerate(vals)],
            base_offset=self.offset,
            base_timestamp=START_NS // 1_000_000,
            partition_leader_epoch=7,
        )
        self.offset += len(vals)
        out = bytearray()
        write_record_batch(out, batch)
        return bytes(out)

    def tick(self, ts: int) -> int:
        """One round: every broker heartbeats; some rounds carry metadata or assignments."""
        n = 0
        self.step += 1
        if self.step == 40:
            self.failed[2] = self.dirs[2][1]
        for b, c in self.conns.items():
            offline = [self.failed[b]] if b in self.failed else []
            if b == 3 and self.step >= 60:
                offline = [uuid.UUID(int=0xDEAD)]  # planted: never registered
            hb = bhq.BrokerHeartbeatRequest(
                broker_id=b,
                broker_epoch=self.epochs[b],
                current_metadata_offset=self.offset,
                want_fence=False,
                offline_log_dirs=offline,
            )
            n += c.exchange(
                (_req(hb, 1, f"raft-{b}"), _resp(bhr.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False), 1)),
                ts + b * 1_000_000,
                self.rng.randrange(200_000, 3_000_000),
            )
        if self.step % 5 == 1:
            c = self.conns[1 + self.step % 3]
            fetch = fq.FetchRequest(
                replica_state=fq.ReplicaState(replica_id=1, replica_epoch=self.epochs[1]),
                max_wait_ms=500,
                topics=[
                    fq.FetchTopic(
                        topic_id=METADATA_TOPIC_ID,
                        partitions=[
                            fq.FetchPartition(
                                partition=0,
                                fetch_offset=self.offset,
                                current_leader_epoch=7,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
            )
            resp = fr.FetchResponse(
                responses=[
                    fr.FetchableTopicResponse(
                        topic_id=METADATA_TOPIC_ID,
                        partitions=[
                            fr.PartitionData(
                                partition_index=0, high_watermark=self.offset + 10, records=self._records()
                            )
                        ],
                    )
                ]
            )
            n += c.exchange((_req(fetch, 16, "raft-fetch"), _resp(resp, 16)), ts + 5_000_000, 1_000_000)
        if self.step in (10, 70):
            b = 2
            d = self.dirs[2][1]  # at step 70 this directory has failed: planted violation
            req = arq.AssignReplicasToDirsRequest(
                broker_id=b,
                broker_epoch=self.epochs[b],
                directories=[
                    arq.DirectoryData(
                        id=d,
                        topics=[arq.TopicData(topic_id=self.topic, partitions=[arq.PartitionData(partition_index=1)])],
                    )
                ],
            )
            answer = arr.AssignReplicasToDirsResponse(
                directories=[
                    arr.DirectoryData(
                        id=d,
                        topics=[arr.TopicData(topic_id=self.topic, partitions=[arr.PartitionData(partition_index=1)])],
                    )
                ]
            )
            n += self.conns[b].exchange((_req(req, 0, "raft-2"), _resp(answer, 0)), ts + 7_000_000, 900_000)
        return n


def generate(
    out: BinaryIO,
    *,
    mb: float,
    seed: int,
    pcap: bool = False,
    clients: int = 96,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Write one capture of about ``mb`` megabytes of Kafka payload; returns the frame count."""
    rng = random.Random(seed)
    writer: Any = PcapWriter(out) if pcap else PcapngWriter(out)
    tpl = Templates(rng)
    ts = START_NS
    plane = ControllerPlane(writer, rng, ts)
    conns: list[tuple[Conn, str]] = []
    weights_by_role = {
        "producer": [("produce", 70), ("produce_err", 1), ("metadata", 2), ("heartbeat", 0)],
        "consumer": [("fetch", 60), ("commit", 10), ("heartbeat", 10), ("coordinator", 1), ("metadata", 1)],
        "old": [("produce_old", 10), ("metadata", 1)],
    }
    for i in range(clients):
        role = "old" if i % 16 == 15 else ("producer" if i % 2 == 0 else "consumer")
        name, ver = SOFTWARE[i % len(SOFTWARE)]
        c = Conn(writer, (f"10.2.{i // 200}.{i % 200 + 1}", 50000 + i), (f"10.1.0.{1 + i % 3}", BROKER_PORT), ts)
        c.exchange(tpl.api_versions(name, ver, "app"), ts, 400_000)
        c.exchange(tpl.client["metadata"][0], ts + 500_000, 1_500_000)
        conns.append((c, role))
    budget = int(mb * 1e6)
    written = 0
    frames = 0
    # About 150 controller rounds whatever the size, so the scripted story (failure at
    # round 40, planted violations at 60 and 70) always plays out.
    tick_every = max(5, int(budget / 3000 / 150))
    exchanges = 0
    while written < budget:
        ts += rng.randrange(20_000, 200_000)
        if exchanges % tick_every == 0:
            written += plane.tick(ts)
            frames += 2
        exchanges += 1
        c, role = conns[rng.randrange(len(conns))]
        kinds = weights_by_role[role]
        kind = rng.choices([k for k, _ in kinds], weights=[w for _, w in kinds])[0]
        pool = tpl.client[kind]
        lat = int(rng.lognormvariate(13.0, 1.0))  # median ~0.44 ms, long tail
        if kind == "fetch":
            lat += rng.choice([0, 0, 0, 500_000_000])  # long polls
        written += c.exchange(pool[rng.randrange(len(pool))], ts, lat)
        frames += 2
        if progress is not None and frames % 20000 == 0:
            progress(written)
    for c, _ in conns:
        c.conv.close()
    for c in plane.conns.values():
        c.conv.close()
    return frames


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--mb", type=float, default=300.0, help="Kafka payload to write, in MB (file is ~5%% larger)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pcap", action="store_true", help="classic pcap instead of pcapng")
    ap.add_argument("--clients", type=int, default=96)
    args = ap.parse_args()
    with args.out.open("wb") as fh:
        frames = generate(fh, mb=args.mb, seed=args.seed, pcap=args.pcap, clients=args.clients)
    print(f"{args.out}: {args.out.stat().st_size / 1e6:.1f} MB, {frames} frames")


if __name__ == "__main__":
    main()
