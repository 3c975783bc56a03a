"""A small, deterministic demo capture of KIP-858 controller traffic, built in memory.

What it holds (pcapng, Ethernet, IPv4, one controller at 10.0.0.10:9093):

* broker 1 (10.0.0.1): ApiVersions v3; BrokerRegistration v3 with two LogDirs;
  BrokerHeartbeat v1; AssignReplicasToDirs v0 placing partitions in both directories; a
  Raft Fetch v16 of ``__cluster_metadata`` whose response carries a RegisterBrokerRecord
  (LogDirs) and a PartitionRecord (Directories); then a BrokerHeartbeat v1 with
  OfflineLogDirs after a disk failure;
* broker 2 (10.0.0.2): ApiVersions v3 and BrokerRegistration v4;
* broker 1 again, on a connection the capture joins mid-stream: a heartbeat response whose
  request was not captured, so the decoder has to infer it.

Invariants: the bytes depend on nothing but this module (fixed ids, fixed clock), every
frame is encoded by the generated codecs through :mod:`kraft_jbod.codec`, and every
packet goes through :class:`~.pcapng_writer.TcpConversation`, so Wireshark opens the file.
"""

from __future__ import annotations

import io
import uuid
from typing import Final

from kraft_jbod import codec
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
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kraft_jbod.wire.constants import METADATA_TOPIC_ID
from kraft_jbod.wire.records import Record, RecordBatch, write_record_batch

__all__ = ["CONTROLLER", "SAMPLE_NAME", "build_sample"]

SAMPLE_NAME: Final = "kip858-sample.pcapng"
CONTROLLER: Final = ("10.0.0.10", 9093)
CLUSTER_ID: Final = "MkU3OEVBNTcwNTJENDM2Qg"
DIR_A: Final = uuid.UUID("7f2b9a3e-1c4d-4e5f-8a6b-0c1d2e3f4a5b")
DIR_B: Final = uuid.UUID("3c9e1f7a-5b2d-4c8e-9f0a-1b2c3d4e5f60")
DIR_C: Final = uuid.UUID("a1b2c3d4-e5f6-4718-8293-a4b5c6d7e8f9")
TOPIC_ID: Final = uuid.UUID("5f3e2d1c-0b9a-4877-8665-544332211000")
_START_NS: Final = 1_732_000_000_000_000_000
_SERVED: Final = {18: (0, 4), 1: (0, 17), 62: (0, 4), 63: (0, 1), 73: (0, 0)}


def _api_versions(version: int) -> avr.ApiVersionsResponse:
    return avr.ApiVersionsResponse(
        error_code=0,
        api_keys=[avr.ApiVersion(api_key=k, min_version=a, max_version=b) for k, (a, b) in sorted(_SERVED.items())],
        throttle_time_ms=0,
        finalized_features_epoch=3 if version >= 3 else -1,
        finalized_features=[
            avr.FinalizedFeatureKey(name="metadata.version", max_version_level=21, min_version_level=21)
        ]
        if version >= 3
        else [],
    )


def _registration(broker: int, version: int, dirs: list[uuid.UUID]) -> brq.BrokerRegistrationRequest:
    return brq.BrokerRegistrationRequest(
        broker_id=broker,
        cluster_id=CLUSTER_ID,
        incarnation_id=uuid.UUID(int=0x1000 + broker),
        listeners=[brq.Listener(name="PLAINTEXT", host=f"10.0.0.{broker}", port=9092, security_protocol=0)],
        features=[brq.Feature(name="metadata.version", min_supported_version=7, max_supported_version=21)],
        rack=None,
        log_dirs=dirs,
        previous_broker_epoch=-1,
    )


def _metadata_records(base_offset: int) -> bytes:
    reg = RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=uuid.UUID(int=0x1001),
        broker_epoch=base_offset,
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="10.0.0.1", port=9092, security_protocol=0)],
        rack=None,
        fenced=True,
        log_dirs=[DIR_A, DIR_B],
    )
    part = PartitionRecord(
        partition_id=0,
        topic_id=TOPIC_ID,
        replicas=[1],
        isr=[1],
        leader=1,
        leader_epoch=0,
        partition_epoch=0,
        directories=[DIR_A],
    )
    values = [codec.encode_metadata_record(reg, 3), codec.encode_metadata_record(part, 1)]
    batch = RecordBatch.of(
        [Record(offset_delta=i, value=v) for i, v in enumerate(values)],
        base_offset=base_offset,
        base_timestamp=_START_NS // 1_000_000,
        partition_leader_epoch=1,
    )
    out = bytearray()
    write_record_batch(out, batch)
    return bytes(out)


class _Session:
    """One broker connection: requests and responses with counting correlation ids."""

    def __init__(self, conv: TcpConversation, client_id: str, first_corr: int = 0) -> None:
        self.conv = conv
        self.client_id = client_id
        self.corr = first_corr

    def exchange(
        self,
        request: object,
        response: object,
        version: int,
        response_version: int | None = None,
        *,
        send_request: bool = True,
    ) -> None:
        corr = self.corr
        self.corr += 1
        if send_request:
            self.conv.client_send(
                codec.encode_request(request, version, corr, self.client_id)  # type: ignore[arg-type]
            )
        resp_version = version if response_version is None else response_version
        self.conv.server_send(codec.encode_response(response, resp_version, corr))  # type: ignore[arg-type]


def build_sample() -> bytes:
    """The demo capture as pcapng bytes (identical on every call)."""
    buf = io.BytesIO()
    w = PcapngWriter(buf)
    step = 250_000  # 0.25 ms per packet keeps latencies readable
    b1 = _Session(
        TcpConversation(w, ("10.0.0.1", 40001), CONTROLLER, start_ns=_START_NS, step_ns=step), "raft-client-1"
    )
    b1.exchange(
        avq.ApiVersionsRequest(client_software_name="apache-kafka-java", client_software_version="3.9.1"),
        _api_versions(3),
        3,
    )
    b1.exchange(_registration(1, 3, [DIR_A, DIR_B]), brr.BrokerRegistrationResponse(broker_epoch=42), 3)
    b1.exchange(
        bhq.BrokerHeartbeatRequest(broker_id=1, broker_epoch=42, current_metadata_offset=41, want_fence=False),
        bhr.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False),
        1,
    )
    assign = arq.AssignReplicasToDirsRequest(
        broker_id=1,
        broker_epoch=42,
        directories=[
            arq.DirectoryData(
                id=DIR_A, topics=[arq.TopicData(topic_id=TOPIC_ID, partitions=[arq.PartitionData(partition_index=0)])]
            ),
            arq.DirectoryData(
                id=DIR_B, topics=[arq.TopicData(topic_id=TOPIC_ID, partitions=[arq.PartitionData(partition_index=1)])]
            ),
        ],
    )
    assigned = arr.AssignReplicasToDirsResponse(
        directories=[
            arr.DirectoryData(
                id=d.id,
                topics=[
                    arr.TopicData(
                        topic_id=t.topic_id,
                        partitions=[
                            arr.PartitionData(partition_index=p.partition_index, error_code=0) for p in t.partitions
                        ],
                    )
                    for t in d.topics
                ],
            )
            for d in assign.directories
        ]
    )
    b1.exchange(assign, assigned, 0)
    fetch = fq.FetchRequest(
        replica_state=fq.ReplicaState(replica_id=1, replica_epoch=42),
        max_wait_ms=500,
        min_bytes=0,
        max_bytes=8 << 20,
        topics=[
            fq.FetchTopic(
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    fq.FetchPartition(
                        partition=0,
                        current_leader_epoch=1,
                        fetch_offset=42,
                        last_fetched_epoch=1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
    )
    fetched = fr.FetchResponse(
        responses=[
            fr.FetchableTopicResponse(
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    fr.PartitionData(
                        partition_index=0,
                        high_watermark=44,
                        last_stable_offset=44,
                        log_start_offset=0,
                        current_leader=fr.LeaderIdAndEpoch(leader_id=10, leader_epoch=1),
                        aborted_transactions=None,
                        records=_metadata_records(42),
                    )
                ],
            )
        ]
    )
    b1.exchange(fetch, fetched, 16)
    b1.exchange(
        bhq.BrokerHeartbeatRequest(broker_id=1, broker_epoch=42, current_metadata_offset=44, offline_log_dirs=[DIR_B]),
        bhr.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False),
        1,
    )
    b1.conv.close()

    b2 = _Session(
        TcpConversation(w, ("10.0.0.2", 40002), CONTROLLER, start_ns=_START_NS + 20_000_000, step_ns=step),
        "raft-client-2",
    )
    b2.exchange(
        avq.ApiVersionsRequest(client_software_name="apache-kafka-java", client_software_version="4.0.0"),
        _api_versions(3),
        3,
    )
    b2.exchange(_registration(2, 4, [DIR_C]), brr.BrokerRegistrationResponse(broker_epoch=43), 4)
    b2.conv.close()

    # Joined mid-stream: no handshake, and the first response's request was before.
    b3 = _Session(
        TcpConversation(
            w, ("10.0.0.1", 40003), CONTROLLER, start_ns=_START_NS + 40_000_000, step_ns=step, handshake=False
        ),
        "raft-client-1",
        first_corr=17,
    )
    hb = bhq.BrokerHeartbeatRequest(broker_id=1, broker_epoch=42, current_metadata_offset=45, offline_log_dirs=[DIR_B])
    b3.exchange(hb, bhr.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False), 1, send_request=False)
    b3.exchange(hb, bhr.BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False), 1)
    b3.conv.close()
    return buf.getvalue()
