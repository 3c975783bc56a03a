"""Decompression-bomb captures: tiny pcapng files whose record batches expand enormously.

Built with our own codec and cramjam (through :mod:`kraft_jbod.wire.compression`): a zstd
batch of identical empty records compresses about 1,400:1 (one million records fit in
725 bytes), so a 1 KiB capture declares a million records. Used by
``tools/bench/bench_decode_bombs.py`` (peak RSS of ``kraft-jbod decode``) and by the tests
that check the decode budget's anomaly.

Each builder returns the pcapng bytes; :data:`BOMBS` names them.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from kraft_jbod import codec
from kraft_jbod.capture.pcapng_writer import PcapngWriter, TcpConversation
from kraft_jbod.messages import produce_request as pq
from kraft_jbod.wire.compression import ZSTD
from kraft_jbod.wire.records import Record, RecordBatch, write_record_batch


def zstd_batch(records: int, base_offset: int = 0) -> bytes:
    """One v2 batch of ``records`` empty records, zstd-compressed."""
    batch = RecordBatch.of(
        [Record(offset_delta=0, value=b"")] * records,
        base_offset=base_offset,
        base_timestamp=1_700_000_000_000,
        attributes=ZSTD,
    )
    out = bytearray()
    write_record_batch(out, batch)
    return bytes(out)


def _produce(partitions: list[bytes], corr: int) -> bytes:
    body = pq.ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            pq.TopicProduceData(
                name="bomb",
                partition_data=[pq.PartitionProduceData(index=i, records=r) for i, r in enumerate(partitions)],
            )
        ],
    )
    return codec.encode_request(body, 9, corr, "bomb")


def _capture(frames: list[bytes]) -> bytes:
    buf = io.BytesIO()
    conv = TcpConversation(PcapngWriter(buf), ("10.0.0.1", 50000), ("10.0.0.2", 9092))
    for f in frames:
        conv.client_send(f)
    return buf.getvalue()


def one_batch(records: int = 1_000_000) -> bytes:
    """One Produce holding one zstd batch of ``records`` records (about 1.2 KiB for 10^6)."""
    return _capture([_produce([zstd_batch(records)], 1)])


def many_batches(batches: int = 6, records: int = 1_000_000) -> bytes:
    """One Produce, ``batches`` partitions each with a 10^6-record zstd batch (about 5 KiB)."""
    return _capture([_produce([zstd_batch(records)] * batches, 1)])


def many_frames(frames: int = 40, records: int = 99_000) -> bytes:
    """``frames`` Produce requests each just under the per-frame records budget: bounded by
    the per-file budget and by streaming output, not by the frame budget."""
    one = zstd_batch(records)
    return _capture([_produce([one], corr) for corr in range(1, frames + 1)])


def held_behind_orphan(frames: int = 11, records: int = 99_000) -> bytes:
    """A response whose request was not captured, then ``frames`` Produce requests just under
    the frame budget: the decoder holds frames behind an orphan while it infers it, so this
    checks that held frames are bounded too."""
    from kraft_jbod.messages.metadata_response import MetadataResponse

    buf = io.BytesIO()
    conv = TcpConversation(PcapngWriter(buf), ("10.0.0.1", 50000), ("10.0.0.2", 9092))
    conv.server_send(codec.encode_response(MetadataResponse(cluster_id="bomb", controller_id=1), 12, 999))
    one = zstd_batch(records)
    for corr in range(1, frames + 1):
        conv.client_send(_produce([one], corr))
    return buf.getvalue()


BOMBS: dict[str, Callable[[], bytes]] = {
    "one-batch": one_batch,
    "many-batches": many_batches,
    "many-frames": many_frames,
    "held-orphan": held_behind_orphan,
}
