"""Builders for synthetic Kafka captures used by the capture tests."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable

from kraft_jbod import codec
from kraft_jbod.capture.kafka import DecodedFrame, KafkaDecoder, decode_capture
from kraft_jbod.capture.pcapng_writer import PcapngWriter, PcapWriter, TcpConversation
from kraft_jbod.messages import api_versions_response as avr
from kraft_jbod.messages import produce_request as pq
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraft_jbod.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kraft_jbod.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kraft_jbod.wire.records import Record, RecordBatch, write_record_batch

Writer = PcapngWriter | PcapWriter


def req(body: object, version: int, corr: int, client_id: str = "test-client") -> bytes:
    return codec.encode_request(body, version, corr, client_id)  # type: ignore[arg-type]


def resp(body: object, version: int, corr: int) -> bytes:
    return codec.encode_response(body, version, corr)  # type: ignore[arg-type]


def api_versions_response(ranges: dict[int, tuple[int, int]]) -> avr.ApiVersionsResponse:
    return avr.ApiVersionsResponse(
        api_keys=[avr.ApiVersion(api_key=k, min_version=a, max_version=b) for k, (a, b) in sorted(ranges.items())]
    )


def metadata_pair(corr: int, version: int = 12) -> tuple[bytes, bytes]:
    request = MetadataRequest(topics=[MetadataRequestTopic(name="demo", topic_id=uuid.UUID(int=0))])
    response = MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=1, host="127.0.0.1", port=9092, rack=None)],
        cluster_id="mini",
        controller_id=1,
        topics=[
            MetadataResponseTopic(
                name="demo",
                topic_id=uuid.UUID(int=77),
                partitions=[
                    MetadataResponsePartition(
                        partition_index=0, leader_id=1, leader_epoch=0, replica_nodes=[1], isr_nodes=[1]
                    )
                ],
            )
        ],
    )
    return req(request, version, corr), resp(response, version, corr)


def heartbeat_pair(corr: int, offline: list[uuid.UUID]) -> tuple[bytes, bytes]:
    return (
        req(
            BrokerHeartbeatRequest(broker_id=1, broker_epoch=5, current_metadata_offset=9, offline_log_dirs=offline),
            1,
            corr,
        ),
        resp(BrokerHeartbeatResponse(is_caught_up=True, is_fenced=False), 1, corr),
    )


def batch_bytes(values: list[bytes], codec_id: int = 0, base: int = 0) -> bytes:
    batch = RecordBatch.of(
        [Record(offset_delta=i, value=v) for i, v in enumerate(values)],
        base_offset=base,
        base_timestamp=1_700_000_000_000,
        attributes=codec_id,
    )
    out = bytearray()
    write_record_batch(out, batch)
    return bytes(out)


def produce_request(records: bytes, corr: int, version: int = 9) -> bytes:
    body = pq.ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            pq.TopicProduceData(name="demo", partition_data=[pq.PartitionProduceData(index=0, records=records)])
        ],
    )
    return req(body, version, corr)


def capture(build: Callable[[Writer], None], *, pcap: bool = False) -> bytes:
    buf = io.BytesIO()
    w: Writer = PcapWriter(buf) if pcap else PcapngWriter(buf)
    build(w)
    return buf.getvalue()


def conversation(
    w: Writer, client: tuple[str, int] = ("10.0.0.1", 50000), server: tuple[str, int] = ("10.0.0.2", 9092), **kw: object
) -> TcpConversation:
    return TcpConversation(w, client, server, **kw)  # type: ignore[arg-type]


def decode(blob: bytes, ports: list[int] | None = None) -> list[DecodedFrame]:
    return list(decode_capture(io.BytesIO(blob), ports=ports, decoder=KafkaDecoder()))
