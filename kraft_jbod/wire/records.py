"""Kafka record batches (magic 2), legacy message sets (magic 0 and 1) and KRaft framing.

What lives here:

* :class:`RecordBatch` / :class:`Record` with :func:`read_record_batch` and
  :func:`write_record_batch` (batch format v2: a 61-byte header, CRC-32C over Attributes to
  the end, records of zig-zag varints, optional compression of everything after the
  records count).
* :func:`read_records` / :func:`iter_records`, which split the value of a ``records`` field
  (Produce, Fetch, a metadata log segment) into batches, dispatching on the magic byte at
  offset 16 of each entry, and report a final partial entry as :class:`TruncatedBatch`
  the way Kafka's Fetch responses may end with one.
* Legacy messages (:class:`LegacyMessage`, CRC-32 IEEE over Magic to the end), including
  compressed wrapper messages whose value is a nested message set.
* The control record key and the KRaft metadata record frame header (§5.3 of the notes).

Invariants:

* Readers raise only :class:`DecodeError`; every length is checked against the bytes that
  remain before anything is sliced or allocated, and decompression is bounded by
  ``max_decompressed`` per batch or wrapper message.
* A record must consume exactly its declared length, and a batch exactly its declared Length
  (after decompression, exactly the decompressed bytes): leftovers are a DecodeError.
* A :class:`RecordBudget` passed to the readers bounds what one call may materialise: a
  batch whose declared records count, or whose decompressed size, exceeds what is left is
  refused with :class:`BudgetExceeded` *before* its records are built (the count sits in
  the uncompressed header, and a batch must hold exactly that many records), so a tiny zstd
  batch declaring millions of records costs nothing.
* Writers raise only :class:`EncodeError`. They write every header field as given (so a
  batch read and written again is byte-identical when uncompressed) and compute only the
  Length, the CRC and, for a compressed batch, the compressed payload.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kraft_jbod import _accel
from kraft_jbod.errors import BudgetExceeded, DecodeError, EncodeError
from kraft_jbod.wire import compression as _codecs
from kraft_jbod.wire.compression import DEFAULT_MAX_DECOMPRESSED
from kraft_jbod.wire.crc import crc32c
from kraft_jbod.wire.varint import (
    read_unsigned_varint,
    read_varint,
    read_varlong,
    write_unsigned_varint,
    write_varint,
    write_varlong,
)

Buffer = bytes | bytearray | memoryview

# BaseOffset, Length, PartitionLeaderEpoch, Magic, CRC, Attributes, LastOffsetDelta,
# BaseTimestamp, MaxTimestamp, ProducerId, ProducerEpoch, BaseSequence, RecordsCount.
_BE_qiibIhiqqqhii = struct.Struct(">qiibIhiqqqhii")
# The part of the header after the CRC (Attributes .. RecordsCount).
_BE_hiqqqhii = struct.Struct(">hiqqqhii")
_BE_qi = struct.Struct(">qi")
_BE_I = struct.Struct(">I")
_BE_i = struct.Struct(">i")
_BE_hh = struct.Struct(">hh")
# Legacy message: Offset, MessageSize, Crc, Magic, Attributes (+ Timestamp for magic 1).
_BE_qiIbb = struct.Struct(">qiIbb")
_BE_qiIbbq = struct.Struct(">qiIbbq")
_BE_bb = struct.Struct(">bb")
_BE_bbq = struct.Struct(">bbq")

BATCH_HEADER_SIZE = 61
"""Bytes of a v2 batch header up to and including RecordsCount."""
LOG_OVERHEAD = 12
"""BaseOffset + Length: bytes of an entry not counted by its Length field."""
_CRC_START = 21
_CRC_POS = 17
_MAGIC_POS = 16
# Kafka's minimum entry size (a magic-0 message with empty key and value), checked before
# the magic byte is read; anything smaller is corrupt rather than truncated.
_MIN_ENTRY_SIZE = 14
_LEGACY_V0_HEADER = 6  # Crc, Magic, Attributes after MessageSize
_LEGACY_V1_HEADER = 14  # + Timestamp
# attributes, timestamp delta, offset delta, key length, value length, header count.
_MIN_RECORD_BODY = 6

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40


class ControlRecordType(enum.IntEnum):
    """The ``type`` in a control record key (ControlRecordType.java)."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


ABORT = ControlRecordType.ABORT
COMMIT = ControlRecordType.COMMIT
LEADER_CHANGE = ControlRecordType.LEADER_CHANGE
SNAPSHOT_HEADER = ControlRecordType.SNAPSHOT_HEADER
SNAPSHOT_FOOTER = ControlRecordType.SNAPSHOT_FOOTER
KRAFT_VERSION = ControlRecordType.KRAFT_VERSION
KRAFT_VOTERS = ControlRecordType.KRAFT_VOTERS


@dataclass(slots=True)
class Record:
    """One record of a v2 batch; offsets and timestamps are deltas from the batch's bases."""

    attributes: int = 0
    timestamp_delta: int = 0
    offset_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


_accel.register_record_class(Record)


@dataclass(slots=True, kw_only=True)
class RecordBatch:
    """A v2 record batch.

    ``crc`` is the checksum as read (or as last written) and ``crc_valid`` whether it matched;
    both are derived, so they take no part in equality.
    """

    base_offset: int
    partition_leader_epoch: int = -1
    magic: int = 2
    crc: int = field(default=0, compare=False)
    attributes: int = 0
    last_offset_delta: int = 0
    base_timestamp: int = -1
    max_timestamp: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    records: list[Record] = field(default_factory=list)
    crc_valid: bool = field(default=True, compare=False)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @classmethod
    def of(
        cls,
        records: Sequence[Record],
        *,
        base_offset: int,
        base_timestamp: int,
        partition_leader_epoch: int = -1,
        attributes: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
    ) -> RecordBatch:
        """A batch whose LastOffsetDelta and MaxTimestamp are derived from ``records``."""
        last = max((r.offset_delta for r in records), default=0)
        max_ts = base_timestamp + max((r.timestamp_delta for r in records), default=0)
        return cls(
            base_offset=base_offset,
            partition_leader_epoch=partition_leader_epoch,
            attributes=attributes,
            last_offset_delta=last,
            base_timestamp=base_timestamp,
            max_timestamp=max_ts,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            records=list(records),
        )


@dataclass(slots=True, kw_only=True)
class LegacyMessage:
    """A magic-0 or magic-1 message.

    ``timestamp`` is None for magic 0. A compressed wrapper (attributes & 7 != 0) has its
    decoded nested messages in ``inner`` (their offsets as on the wire: absolute for magic 0,
    relative for magic 1); on write, a message with ``inner`` set gets its value by
    compressing them, and ``value`` is ignored.
    """

    offset: int
    magic: int = 1
    attributes: int = 0
    timestamp: int | None = None
    key: bytes | None = None
    value: bytes | None = None
    crc: int = field(default=0, compare=False)
    crc_valid: bool = field(default=True, compare=False)
    inner: list[LegacyMessage] | None = None

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_MASK) >> 3


@dataclass(slots=True, frozen=True)
class TruncatedBatch:
    """A partial entry at the end of a records value.

    ``offset`` is its byte position in the buffer, ``available`` the bytes present and
    ``needed`` the bytes its Length field asks for (12 when not even that was readable).
    """

    offset: int
    available: int
    needed: int


@dataclass(slots=True, frozen=True)
class ControlRecordKey:
    """The key of a control record: int16 version (0), int16 type."""

    version: int = 0
    type: int = 0


RecordsEntry = RecordBatch | LegacyMessage | TruncatedBatch


@dataclass(slots=True)
class RecordBudget:
    """What the readers may still materialise: records, and bytes out of decompression.

    Readers draw from it as they go (one record per v2 record or legacy message, the
    decompressed size of each compressed batch or wrapper); what was drawn stays drawn, so
    one budget can span every ``records`` field of a frame, or every frame of a file.
    """

    records: int
    decompressed: int

    def take_records(self, n: int, where: int) -> None:
        """Draw ``n`` records; raises BudgetExceeded (and draws nothing) past the budget."""
        if n > self.records:
            raise BudgetExceeded(f"{n} records past the decode budget ({self.records} left)", offset=where)
        self.records -= n


# --- v2 records ---------------------------------------------------------------------------


def _read_batch_records(data: bytes, p: int, end: int, count: int, base: int) -> list[Record]:
    """Decode ``count`` records from ``data[p:end]``; ``base`` locates errors in the input."""
    if p == 0 and end == len(data):
        # The compiled framer (kraft_jbod/_accel) when active: same records, or None
        # for anything irregular, which this reader then reports exactly.
        framed = _accel.frame_records(data, count)
        if framed is not None:
            return framed
    records: list[Record] = []
    append = records.append
    rv = read_varint
    try:
        for _ in range(count):
            rec_start = p
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                length, p = rv(data, p)
            if length < _MIN_RECORD_BODY or length > end - p:
                raise DecodeError(
                    f"record length {length} invalid for {end - p} remaining bytes",
                    offset=base + rec_start,
                    field_path="records",
                )
            rec_end = p + length
            attributes = data[p]
            if attributes > 127:  # int8 on the wire
                attributes -= 256
            p += 1
            b = data[p]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                ts_delta, p = read_varlong(data, p)
            b = data[p]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                off_delta, p = rv(data, p)
            n, p = rv(data, p)
            if n < 0:
                if n != -1:
                    raise DecodeError(
                        f"invalid key length {n}",
                        offset=base + p,
                        field_path="records.key",
                    )
                key = None
            else:
                if n > rec_end - p:
                    raise DecodeError(
                        f"key length {n} overruns the record",
                        offset=base + p,
                        field_path="records.key",
                    )
                key = data[p : p + n]
                p += n
            n, p = rv(data, p)
            if n < 0:
                if n != -1:
                    raise DecodeError(
                        f"invalid value length {n}",
                        offset=base + p,
                        field_path="records.value",
                    )
                value = None
            else:
                if n > rec_end - p:
                    raise DecodeError(
                        f"value length {n} overruns the record",
                        offset=base + p,
                        field_path="records.value",
                    )
                value = data[p : p + n]
                p += n
            b = data[p]
            if b == 0:
                headers: list[tuple[str, bytes | None]] = []
                p += 1
            else:
                headers, p = _read_headers(data, p, rec_end, base)
            if p != rec_end:
                raise DecodeError(
                    f"record declared {length} bytes but its fields used {p - rec_end + length}",
                    offset=base + rec_start,
                    field_path="records",
                )
            append(Record(attributes, ts_delta, off_delta, key, value, headers))
    except IndexError:
        raise DecodeError("record truncated", offset=base + p, field_path="records") from None
    except DecodeError as exc:
        if exc.offset is not None and exc.field_path == "":
            # A varint reader's offset is relative to ``data``; make it absolute.
            exc.offset += base
            exc.refine(field="records")
        raise
    if p != end:
        raise DecodeError(
            f"{end - p} bytes left after the {count} records the batch declares",
            offset=base + p,
            field_path="records",
        )
    return records


def _read_headers(data: bytes, p: int, rec_end: int, base: int) -> tuple[list[tuple[str, bytes | None]], int]:
    """A record's non-empty header array at ``p``, and the offset after it.

    Out of the record reader's loop: most records carry no header (the loop reads the
    one zero byte of an empty array inline).
    """
    n_headers, p = read_varint(data, p)
    if n_headers < 0 or n_headers > rec_end - p:
        raise DecodeError(
            f"invalid header count {n_headers}",
            offset=base + p,
            field_path="records.headers",
        )
    headers: list[tuple[str, bytes | None]] = []
    for _h in range(n_headers):
        n, p = read_varint(data, p)
        if n < 0 or n > rec_end - p:
            raise DecodeError(
                f"invalid header key length {n}",
                offset=base + p,
                field_path="records.headers.key",
            )
        try:
            hkey = data[p : p + n].decode("utf-8")
        except UnicodeDecodeError:
            raise DecodeError(
                "header key is not valid UTF-8",
                offset=base + p,
                field_path="records.headers.key",
            ) from None
        p += n
        n, p = read_varint(data, p)
        if n < 0:
            if n != -1:
                raise DecodeError(
                    f"invalid header value length {n}",
                    offset=base + p,
                    field_path="records.headers.value",
                )
            hval = None
        else:
            if n > rec_end - p:
                raise DecodeError(
                    f"header value length {n} overruns the record",
                    offset=base + p,
                    field_path="records.headers.value",
                )
            hval = data[p : p + n]
            p += n
        headers.append((hkey, hval))
    return headers, p


def read_record_batch(
    buf: Buffer,
    pos: int,
    *,
    verify_crc: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    budget: RecordBudget | None = None,
) -> tuple[RecordBatch, int]:
    """Read one v2 record batch at ``pos``; return it and the position after it.

    With ``verify_crc`` a CRC mismatch is a DecodeError; without, it only sets
    ``crc_valid`` to False. Raises DecodeError for anything that is not a whole, well-formed
    batch (including magic 0/1: use :func:`read_records` for those), BudgetExceeded when the
    batch needs more than ``budget`` has left (nothing is drawn then).
    """
    avail = len(buf) - pos
    if pos < 0 or avail < BATCH_HEADER_SIZE:
        raise DecodeError(
            f"record batch header needs {BATCH_HEADER_SIZE} bytes, {max(avail, 0)} remain",
            offset=pos,
        )
    (
        base_offset,
        length,
        leader_epoch,
        magic,
        crc,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        count,
    ) = _BE_qiibIhiqqqhii.unpack_from(buf, pos)
    if magic != 2:
        raise DecodeError(f"record batch magic {magic}, expected 2", offset=pos + _MAGIC_POS)
    size = LOG_OVERHEAD + length
    if size < BATCH_HEADER_SIZE or size > avail:
        raise DecodeError(
            f"record batch length {length} invalid for {avail - LOG_OVERHEAD} remaining bytes",
            offset=pos + 8,
            field_path="length",
        )
    end = pos + size
    body_pos = pos + BATCH_HEADER_SIZE
    # One copy of the payload: indexing bytes is faster than a memoryview in the record
    # loop, and no view of the caller's buffer outlives this call.
    with memoryview(buf) as mv:
        computed = crc32c(mv[pos + _CRC_START : end])
        payload = bytes(mv[body_pos:end])
    crc_valid = computed == crc
    if verify_crc and not crc_valid:
        raise DecodeError(
            f"record batch CRC mismatch: stored {crc:#010x}, computed {computed:#010x}",
            offset=pos + _CRC_POS,
            field_path="crc",
        )
    if count < 0:
        raise DecodeError(f"negative records count {count}", offset=pos + 57)
    codec = attributes & COMPRESSION_MASK
    if budget is not None:
        # Checked before decompressing: the declared count is what the records list would hold.
        if count > budget.records:
            raise BudgetExceeded(
                f"batch declares {count} records, {budget.records} left in the decode budget", offset=pos + 57
            )
        if codec != 0:
            max_decompressed = min(max_decompressed, budget.decompressed)
    if codec == 0:
        if count > len(payload):
            raise DecodeError(
                f"records count {count} exceeds the {len(payload)} bytes of the batch",
                offset=pos + 57,
            )
        records = _read_batch_records(payload, 0, len(payload), count, body_pos)
    else:
        try:
            data = _codecs.decompress(codec, payload, max_decompressed)
        except DecodeError as exc:
            exc.offset = body_pos
            raise exc.refine(field="records") from None
        if count > len(data):
            raise DecodeError(
                f"records count {count} exceeds the {len(data)} decompressed bytes",
                offset=pos + 57,
            )
        # Offsets inside decompressed data have no position in ``buf``; report the payload.
        try:
            records = _read_batch_records(data, 0, len(data), count, 0)
        except DecodeError as exc:
            raise exc.refine(message=f"inside the {_codecs.CODEC_NAMES[codec]} payload at {body_pos}") from None
        if budget is not None:
            budget.decompressed -= len(data)
    if budget is not None:
        budget.records -= count
    batch = RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        magic=magic,
        crc=crc,
        attributes=attributes,
        last_offset_delta=last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records=records,
        crc_valid=crc_valid,
    )
    return batch, end


def _write_nullable_varint_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out.append(1)  # zig-zag -1
    else:
        write_varint(out, len(value))
        out += value


def _write_record(out: bytearray, rec: Record) -> None:
    body = bytearray()
    if not -128 <= rec.attributes <= 127:
        raise EncodeError(f"record attributes {rec.attributes} out of int8 range")
    body.append(rec.attributes & 0xFF)
    write_varlong(body, rec.timestamp_delta)
    write_varint(body, rec.offset_delta)
    _write_nullable_varint_bytes(body, rec.key)
    _write_nullable_varint_bytes(body, rec.value)
    write_varint(body, len(rec.headers))
    for hkey, hval in rec.headers:
        try:
            raw = hkey.encode("utf-8")
        except UnicodeEncodeError:
            raise EncodeError("header key is not encodable as UTF-8") from None
        write_varint(body, len(raw))
        body += raw
        _write_nullable_varint_bytes(body, hval)
    write_varint(out, len(body))
    out += body


def write_record_batch(out: bytearray, batch: RecordBatch, compression: int | None = None) -> None:
    """Append ``batch`` to ``out``, computing Length and CRC-32C.

    ``compression`` (a codec id) replaces the codec bits of ``batch.attributes``; None keeps
    them. Sets ``batch.crc`` to the CRC written. Raises EncodeError for values the format
    cannot carry (fields out of range, an unknown codec, a batch over 2 GiB).
    """
    # The compiled writer when active: the same bytes, or None for anything it leaves
    # to the Python writer (which writes it or raises its exact error).
    _write_batch(out, batch, compression, _accel.write_records(batch.records))


def write_value_batch(
    out: bytearray,
    values: list[bytes],
    *,
    base_offset: int,
    base_timestamp: int,
    partition_leader_epoch: int = -1,
    attributes: int = 0,
) -> None:
    """Append a batch of ``values`` as records with no key and no headers at offset deltas
    0..n-1 and timestamp delta 0 (the shape of metadata log and snapshot batches): the bytes
    ``write_record_batch(RecordBatch.of(...))`` writes for those records, without building them
    when the compiled codec is active."""
    section = _accel.frame_values(values)
    records = [Record(offset_delta=i, value=v) for i, v in enumerate(values)] if section is None else []
    batch = RecordBatch(
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=max(len(values) - 1, 0),
        base_timestamp=base_timestamp,
        max_timestamp=base_timestamp,
        records=records,
    )
    _write_batch(out, batch, None, section, len(values))


def _write_batch(
    out: bytearray, batch: RecordBatch, compression: int | None, section: bytes | None, count: int | None = None
) -> None:
    """``write_record_batch`` with the records section given (None: written from
    ``batch.records`` here) and ``count`` records in it (None: ``len(batch.records)``)."""
    attributes = batch.attributes
    if compression is not None:
        if compression not in _codecs.CODEC_NAMES:
            raise EncodeError(f"unknown compression codec {compression}")
        attributes = (attributes & ~COMPRESSION_MASK) | compression
    codec = attributes & COMPRESSION_MASK
    if codec not in _codecs.CODEC_NAMES:
        raise EncodeError(f"unknown compression codec {codec} in attributes")
    if batch.magic != 2:
        raise EncodeError(f"record batch magic must be 2, not {batch.magic}")
    start = len(out)
    out += bytes(BATCH_HEADER_SIZE)
    try:
        raw = bytearray() if codec else out
        if section is not None:
            raw += section
        else:
            for rec in batch.records:
                _write_record(raw, rec)
        if codec:
            out += _codecs.compress(codec, raw)
        length = len(out) - start - LOG_OVERHEAD
        _BE_qi.pack_into(out, start, batch.base_offset, length)
        _BE_i.pack_into(out, start + 12, batch.partition_leader_epoch)
        out[start + _MAGIC_POS] = 2
        _BE_hiqqqhii.pack_into(
            out,
            start + _CRC_START,
            attributes,
            batch.last_offset_delta,
            batch.base_timestamp,
            batch.max_timestamp,
            batch.producer_id,
            batch.producer_epoch,
            batch.base_sequence,
            len(batch.records) if count is None else count,
        )
    except struct.error as exc:
        del out[start:]
        raise EncodeError(f"record batch field out of range: {exc}") from None
    except EncodeError:
        del out[start:]
        raise
    with memoryview(out) as mv:
        crc = crc32c(mv[start + _CRC_START :])
    _BE_I.pack_into(out, start + _CRC_POS, crc)
    batch.crc = crc
    batch.crc_valid = True


# --- legacy message sets ------------------------------------------------------------------


def _read_legacy_bytes(buf: Buffer, p: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - p < 4:
        raise DecodeError(f"legacy message {what} length truncated", offset=p, field_path=what)
    (n,) = _BE_i.unpack_from(buf, p)
    p += 4
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid {what} length {n}", offset=p - 4, field_path=what)
        return None, p
    if n > end - p:
        raise DecodeError(f"{what} length {n} overruns the message", offset=p - 4, field_path=what)
    return bytes(buf[p : p + n]), p + n


def _read_legacy_message(
    buf: Buffer,
    pos: int,
    end: int,
    *,
    verify_crc: bool,
    max_decompressed: int,
    nested: bool,
    budget: RecordBudget | None = None,
) -> tuple[LegacyMessage, int]:
    """Read one legacy message whose entry spans ``buf[pos:end]`` (end already checked)."""
    offset, size, crc, magic, attributes = _BE_qiIbb.unpack_from(buf, pos)
    p = pos + LOG_OVERHEAD + _LEGACY_V0_HEADER
    timestamp: int | None = None
    if magic == 1:
        if end - p < 8:
            raise DecodeError("legacy message timestamp truncated", offset=p)
        (timestamp,) = struct.unpack_from(">q", buf, p)
        p += 8
    elif magic != 0:
        raise DecodeError(f"legacy message magic {magic}", offset=pos + _MAGIC_POS)
    with memoryview(buf) as mv:
        computed = zlib.crc32(mv[pos + _MAGIC_POS : end])
    crc_valid = computed == crc
    if verify_crc and not crc_valid:
        raise DecodeError(
            f"legacy message CRC mismatch: stored {crc:#010x}, computed {computed:#010x}",
            offset=pos + LOG_OVERHEAD,
            field_path="crc",
        )
    key, p = _read_legacy_bytes(buf, p, end, "key")
    value, p = _read_legacy_bytes(buf, p, end, "value")
    if p != end:
        raise DecodeError(f"legacy message size {size} leaves {end - p} unread bytes", offset=pos + 8)
    msg = LegacyMessage(
        offset=offset,
        magic=magic,
        attributes=attributes,
        timestamp=timestamp,
        key=key,
        value=value,
        crc=crc,
        crc_valid=crc_valid,
    )
    codec = attributes & COMPRESSION_MASK
    if codec:
        if nested:
            raise DecodeError("compressed message nested inside a compressed message", offset=pos)
        if codec not in (_codecs.GZIP, _codecs.SNAPPY, _codecs.LZ4):
            raise DecodeError(f"codec {codec} is not allowed in magic {magic}", offset=pos + 17)
        if value is None:
            raise DecodeError("compressed wrapper message has a null value", offset=pos)
        if budget is not None:
            max_decompressed = min(max_decompressed, budget.decompressed)
        try:
            inner_bytes = _codecs.decompress(codec, value, max_decompressed)
        except DecodeError as exc:
            exc.offset = pos
            raise exc.refine(field="value") from None
        if budget is not None:
            budget.decompressed -= len(inner_bytes)
        inner: list[LegacyMessage] = []
        try:
            for item in _iter_entries(
                inner_bytes,
                verify_crc=verify_crc,
                max_decompressed=max_decompressed,
                nested=True,
                budget=budget,
            ):
                if not isinstance(item, LegacyMessage):
                    # A partial or v2 entry inside a wrapper is corrupt, not a Fetch cut-off.
                    raise DecodeError("wrapper message holds a partial or non-legacy entry")
                inner.append(item)
        except DecodeError as exc:
            raise exc.refine(message=f"inside the wrapper message at {pos}") from None
        msg.inner = inner
    return msg, end


def _iter_entries(
    buf: Buffer, *, verify_crc: bool, max_decompressed: int, nested: bool, budget: RecordBudget | None = None
) -> Iterator[RecordsEntry]:
    pos = 0
    total = len(buf)
    while pos < total:
        avail = total - pos
        if avail < LOG_OVERHEAD:
            yield TruncatedBatch(pos, avail, LOG_OVERHEAD)
            return
        (size,) = _BE_i.unpack_from(buf, pos + 8)
        if size < _MIN_ENTRY_SIZE:
            raise DecodeError(
                f"entry size {size} is below the minimum of {_MIN_ENTRY_SIZE}",
                offset=pos + 8,
            )
        needed = LOG_OVERHEAD + size
        if needed > avail:
            yield TruncatedBatch(pos, avail, needed)
            return
        magic = buf[pos + _MAGIC_POS]
        if magic == 2:
            if nested:
                raise DecodeError("v2 batch inside a legacy wrapper message", offset=pos)
            batch, pos = read_record_batch(
                buf, pos, verify_crc=verify_crc, max_decompressed=max_decompressed, budget=budget
            )
            yield batch
        elif magic in (0, 1):
            if budget is not None:
                budget.take_records(1, pos)
            msg, pos = _read_legacy_message(
                buf,
                pos,
                pos + needed,
                verify_crc=verify_crc,
                max_decompressed=max_decompressed,
                nested=nested,
                budget=budget,
            )
            yield msg
        else:
            raise DecodeError(f"unknown magic byte {magic}", offset=pos + _MAGIC_POS)


def iter_records(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
    budget: RecordBudget | None = None,
) -> Iterator[RecordsEntry]:
    """Iterate the entries of a ``records`` value: batches, legacy messages, a final partial.

    A :class:`TruncatedBatch` can only be the last item. Raises DecodeError for a corrupt
    entry (the entries before it have been yielded), BudgetExceeded for the first entry
    that needs more than ``budget`` has left.
    """
    return _iter_entries(buf, verify_crc=verify_crc, max_decompressed=max_decompressed, nested=False, budget=budget)


def read_records(
    buf: Buffer,
    *,
    verify_crc: bool = True,
    max_decompressed: int = DEFAULT_MAX_DECOMPRESSED,
) -> list[RecordsEntry]:
    """All entries of a ``records`` value as a list; see :func:`iter_records`."""
    return list(iter_records(buf, verify_crc=verify_crc, max_decompressed=max_decompressed))


def flatten_legacy(msg: LegacyMessage) -> list[tuple[int, LegacyMessage]]:
    """(absolute offset, message) for a legacy message, expanding a wrapper's inner messages.

    Magic-0 inner messages carry absolute offsets; magic-1 inner offsets are relative and the
    wrapper carries the absolute offset of the last one (KIP-31).
    """
    if msg.inner is None:
        return [(msg.offset, msg)]
    if msg.magic == 0 or not msg.inner:
        return [(m.offset, m) for m in msg.inner]
    last = msg.inner[-1].offset
    return [(msg.offset - last + m.offset, m) for m in msg.inner]


def _write_legacy_bytes(out: bytearray, value: bytes | None) -> None:
    if value is None:
        out += _BE_i.pack(-1)
    else:
        out += _BE_i.pack(len(value))
        out += value


def write_legacy_message(out: bytearray, msg: LegacyMessage) -> None:
    """Append one magic-0/1 message; a message with ``inner`` becomes a compressed wrapper.

    Raises EncodeError for a bad magic, codec or out-of-range field.
    """
    if msg.magic not in (0, 1):
        raise EncodeError(f"legacy message magic must be 0 or 1, not {msg.magic}")
    value = msg.value
    if msg.inner is not None:
        codec = msg.attributes & COMPRESSION_MASK
        if codec not in (_codecs.GZIP, _codecs.SNAPPY, _codecs.LZ4):
            raise EncodeError(f"wrapper message needs gzip, snappy or lz4, not codec {codec}")
        raw = bytearray()
        for m in msg.inner:
            if m.inner is not None or m.compression:
                raise EncodeError("nested compressed messages are not allowed")
            write_legacy_message(raw, m)
        value = _codecs.compress(codec, raw, broken_lz4_checksum=msg.magic == 0)
    start = len(out)
    try:
        out += _BE_qi.pack(msg.offset, 0)
        out += bytes(4)  # CRC, filled in below
        if msg.magic == 0:
            out += _BE_bb.pack(0, msg.attributes)
        else:
            ts = -1 if msg.timestamp is None else msg.timestamp
            out += _BE_bbq.pack(1, msg.attributes, ts)
        _write_legacy_bytes(out, msg.key)
        _write_legacy_bytes(out, value)
        _BE_i.pack_into(out, start + 8, len(out) - start - LOG_OVERHEAD)
    except struct.error as exc:
        del out[start:]
        raise EncodeError(f"legacy message field out of range: {exc}") from None
    with memoryview(out) as mv:
        crc = zlib.crc32(mv[start + _MAGIC_POS :])
    _BE_I.pack_into(out, start + LOG_OVERHEAD, crc)


def write_legacy_message_set(out: bytearray, messages: Sequence[LegacyMessage]) -> None:
    """Append a legacy message set (messages one after another, no count or size prefix)."""
    for msg in messages:
        write_legacy_message(out, msg)


# --- control records and the KRaft metadata frame -----------------------------------------


def read_control_record_key(buf: Buffer, pos: int) -> tuple[ControlRecordKey, int]:
    """Read a control record key (int16 version, int16 type).

    Raises DecodeError when fewer than 4 bytes remain or the version is negative. Unknown
    types are returned as read (Kafka maps them to UNKNOWN rather than failing).
    """
    if pos < 0 or len(buf) - pos < 4:
        raise DecodeError("control record key needs 4 bytes", offset=pos)
    version, ctype = _BE_hh.unpack_from(buf, pos)
    if version < 0:
        raise DecodeError(f"invalid control record key version {version}", offset=pos)
    return ControlRecordKey(version, ctype), pos + 4


def write_control_record_key(out: bytearray, key: ControlRecordKey) -> None:
    """Append a control record key; raises EncodeError for values outside int16."""
    try:
        out += _BE_hh.pack(key.version, key.type)
    except struct.error as exc:
        raise EncodeError(f"control record key out of range: {exc}") from None


METADATA_FRAME_VERSION = 1
_MAX_API_KEY_OR_VERSION = 0x7FFF


def read_metadata_frame_header(buf: Buffer, pos: int) -> tuple[int, int, int, int]:
    """Read the frame of a metadata record value: (frame_version, api_key, version, new_pos).

    Raises DecodeError for a frame version other than 1 or an api key/version above 32767.
    """
    start = pos
    frame_version, pos = read_unsigned_varint(buf, pos)
    if frame_version != METADATA_FRAME_VERSION:
        reason = (
            "metadata frame version 0 (2.8 preview) is not supported"
            if frame_version == 0
            else f"unknown metadata frame version {frame_version}"
        )
        raise DecodeError(reason, offset=start, field_path="frame_version")
    key_pos = pos
    api_key, pos = read_unsigned_varint(buf, pos)
    if api_key > _MAX_API_KEY_OR_VERSION:
        raise DecodeError(f"metadata api key {api_key} too large", offset=key_pos)
    version_pos = pos
    version, pos = read_unsigned_varint(buf, pos)
    if version > _MAX_API_KEY_OR_VERSION:
        raise DecodeError(f"metadata record version {version} too large", offset=version_pos)
    return frame_version, api_key, version, pos


def write_metadata_frame_header(out: bytearray, api_key: int, version: int) -> None:
    """Append frame version 1, ``api_key`` and ``version`` as unsigned varints."""
    if not 0 <= api_key <= _MAX_API_KEY_OR_VERSION:
        raise EncodeError(f"metadata api key {api_key} out of range")
    if not 0 <= version <= _MAX_API_KEY_OR_VERSION:
        raise EncodeError(f"metadata record version {version} out of range")
    out.append(METADATA_FRAME_VERSION)
    write_unsigned_varint(out, api_key)
    write_unsigned_varint(out, version)
