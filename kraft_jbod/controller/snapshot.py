"""KRaft snapshots: Kafka's ``.checkpoint`` files, written from and read back into the image.

A snapshot is the metadata image at one point of the log, stored as Kafka stores it:

* File: ``<end offset:020d>-<epoch:010d>.checkpoint`` in the partition directory, where the
  end offset is one past the last log offset the image contains and the epoch is the
  leader epoch of that last offset (Kafka's ``OffsetAndEpoch`` snapshot id). It is written
  to a ``.checkpoint.part`` temp file, fsynced, renamed into place and the directory
  fsynced, so a crash leaves either no snapshot or a whole one.
* Content: record batches v2 whose offsets start at 0 and whose PartitionLeaderEpoch is the
  snapshot epoch. First a control batch holding a SnapshotHeaderRecord (and, when
  kraft.version >= 1, a KRaftVersionRecord and the VotersRecord, as Kafka's
  ``RecordsSnapshotWriter`` writes them into that same batch); then data batches of the
  image's records; last a control batch holding a SnapshotFooterRecord.
* Record order is Kafka's ``MetadataImage.write``: features (metadata.version first, at
  FeatureLevelRecord v0), brokers, registered controllers (from 3.7-IV0), topics (each
  TopicRecord followed by its PartitionRecords), configs, producer ids, ACLs. Kafka
  iterates hash maps where we sort; any order within an area replays to the same image.

What a snapshot cannot carry (as in Kafka): the offsets at which brokers registered or
began controlled shutdown (replaying a snapshot uses its last contained offset for every
record, as Kafka's controller does), and a broker's registered-but-offline directories
(Kafka's registration only keeps the current directory list, so the snapshot lists the
online ones). :func:`comparable` gives the part of an image a snapshot round-trips.
"""

from __future__ import annotations

import gc
import os
import re
import struct
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kraft_jbod import _accel, codec
from kraft_jbod.controller import features as fv
from kraft_jbod.controller.image import PARTITION_FRAME, MetadataImage, Partition, TopicInfo
from kraft_jbod.controller.log import BatchInfo, batch_holding, hold_lock
from kraft_jbod.errors import DecodeError, StorageError
from kraft_jbod.messages.access_control_entry_record import AccessControlEntryRecord
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.k_raft_version_record import KRaftVersionRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.producer_ids_record import ProducerIdsRecord
from kraft_jbod.messages.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from kraft_jbod.messages.register_controller_record import (
    ControllerEndpoint,
    ControllerFeature,
    RegisterControllerRecord,
)
from kraft_jbod.messages.snapshot_footer_record import SnapshotFooterRecord
from kraft_jbod.messages.snapshot_header_record import SnapshotHeaderRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.messages.voters_record import VotersRecord
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.records import (
    BATCH_HEADER_SIZE,
    CONTROL_MASK,
    ControlRecordKey,
    ControlRecordType,
    Record,
    RecordBatch,
    read_control_record_key,
    read_record_batch,
    write_control_record_key,
    write_record_batch,
    write_value_batch,
)

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".checkpoint.part"
# Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the snapshot writer's batch limit.
MAX_BATCH_BYTES = 8 * 1024 * 1024
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")

RecordAndVersion = tuple[Message, int]


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """Kafka's snapshot id: end offset (exclusive) and the epoch of the last contained offset."""

    end_offset: int
    epoch: int

    @property
    def last_contained_offset(self) -> int:
        return self.end_offset - 1

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"


def parse_name(name: str) -> SnapshotId | None:
    """The id of a finished snapshot file name, None for anything else (temp files included)."""
    m = _NAME.match(name)
    return None if m is None else SnapshotId(int(m.group(1)), int(m.group(2)))


def list_snapshots(directory: Path) -> list[SnapshotId]:
    """Finished snapshots in ``directory``, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(sid for sid in map(parse_name, names) if sid is not None)


# ---------------------------------------------------------------------- image -> records


def image_records(img: MetadataImage) -> Iterator[RecordAndVersion]:
    """The records that rebuild ``img``, in Kafka's ``MetadataImage.write`` order and versions."""
    yield from _head_records(img)
    # Topics, each followed by its partitions.
    part_version = fv.partition_record_version(img.metadata_version)
    for topic_id, topic in sorted(img.topics.items(), key=lambda kv: kv[0].int):
        yield TopicRecord(name=topic.name, topic_id=topic_id), 0
        for p in _sorted_partitions(topic):
            yield _partition_record(p, part_version), part_version
    yield from _tail_records(img)


def _head_records(img: MetadataImage) -> Iterator[RecordAndVersion]:
    """Features and brokers: what ``image_records`` writes before the topics."""
    mv = img.metadata_version
    # Features: metadata.version first, always at v0 so any reader can decode it.
    if fv.METADATA_VERSION in img.features:
        yield FeatureLevelRecord(name=fv.METADATA_VERSION, feature_level=img.features[fv.METADATA_VERSION]), 0
    for name, level in sorted(img.features.items()):
        if name != fv.METADATA_VERSION:
            yield FeatureLevelRecord(name=name, feature_level=level), 0
    # Cluster: one RegisterBrokerRecord per broker holding its current state.
    reg_version = fv.register_broker_record_version(mv)
    for broker_id, reg in sorted(img.brokers.items()):
        yield (
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=reg.incarnation_id,
                broker_epoch=reg.epoch,
                end_points=[BrokerEndpoint(name, host, port, proto) for name, host, port, proto in reg.listeners],
                features=[BrokerFeature(name, lo, hi) for name, lo, hi in reg.features],
                rack=reg.rack,
                fenced=reg.fenced,
                in_controlled_shutdown=reg.in_controlled_shutdown or reg.cs_offset >= 0,
                log_dirs=list(reg.online_dirs),
                cordoned_log_dirs=None if reg.cordoned_dirs is None else list(reg.cordoned_dirs),
            ),
            reg_version,
        )
    # Then the registered controllers (RegisterControllerRecord v0, from 3.7-IV0, as Kafka's
    # cluster image writes them after the brokers; below it the log cannot hold any).
    if mv >= fv.MV_3_7_IV0:
        for controller_id, info in sorted(img.controllers.items()):
            yield (
                RegisterControllerRecord(
                    controller_id=controller_id,
                    incarnation_id=info.incarnation_id,
                    zk_migration_ready=info.zk_migration_ready,
                    end_points=[ControllerEndpoint(n, h, p, proto) for n, h, p, proto in info.endpoints],
                    features=[ControllerFeature(name, lo, hi) for name, (lo, hi) in info.features.items()],
                ),
                0,
            )


def _sorted_partitions(topic: TopicInfo) -> list[Partition]:
    return [p for _, p in sorted(topic.partitions.items())]


def _partition_record(p: Partition, part_version: int) -> PartitionRecord:
    return PartitionRecord(
        partition_id=p.partition_id,
        topic_id=p.topic_id,
        replicas=list(p.replicas),
        isr=list(p.isr),
        removing_replicas=list(p.removing),
        adding_replicas=list(p.adding),
        leader=p.leader,
        leader_recovery_state=p.leader_recovery_state,
        leader_epoch=p.leader_epoch,
        partition_epoch=p.partition_epoch,
        directories=list(p.dirs) if part_version >= 1 else [],
        # KIP-966 fields (v2+); Kafka's image writes them only when non-empty.
        eligible_leader_replicas=list(p.elr) if part_version >= 2 and p.elr else None,
        last_known_elr=list(p.last_known_elr) if part_version >= 2 and p.last_known_elr else None,
    )


def image_values(img: MetadataImage) -> Iterator[bytes]:
    """The framed values of ``image_records(img)``, in the same order: what a snapshot file
    holds. A topic's PartitionRecords are encoded by the compiled codec straight from the
    image's partitions when it is active (same bytes: ``test_snapshot_restore.py``), the
    bulk of a large snapshot's writing."""
    encode = codec.encode_metadata_record
    mv = img.metadata_version
    part_version = fv.partition_record_version(mv)
    for rec, ver in _head_records(img):
        yield encode(rec, ver)
    for topic_id, topic in sorted(img.topics.items(), key=lambda kv: kv[0].int):
        yield encode(TopicRecord(name=topic.name, topic_id=topic_id), 0)
        parts = _sorted_partitions(topic)
        values = _accel.encode_partitions(parts, part_version)
        if values is None:
            values = [encode(_partition_record(p, part_version), part_version) for p in parts]
        yield from values
    for rec, ver in _tail_records(img):
        yield encode(rec, ver)


def _tail_records(img: MetadataImage) -> Iterator[RecordAndVersion]:
    """Configs, producer ids and ACLs: what ``image_records`` writes after the topics."""
    for (rtype, rname), configs in img.configs.durable().items():
        for key, value in configs.items():
            yield ConfigRecord(resource_type=rtype, resource_name=rname, name=key, value=value), 0
    if img.next_producer_id is not None:
        yield ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=img.next_producer_id), 0
    for acl_id, acl in img.acls.items():
        yield (
            AccessControlEntryRecord(
                id=acl_id,
                resource_type=acl.resource_type,
                resource_name=acl.resource_name,
                pattern_type=acl.pattern_type,
                principal=acl.principal,
                host=acl.host,
                operation=acl.operation,
                permission_type=acl.permission_type,
            ),
            0,
        )


def comparable(img: MetadataImage) -> dict[str, Any]:
    """``img.durable_state()`` without what a snapshot cannot carry (see the module docstring):
    registration offsets, and registered directories beyond the online ones."""
    state = img.durable_state()
    brokers = {}
    for b, reg in sorted(img.brokers.items()):
        brokers[b] = (
            reg.incarnation_id,
            reg.epoch,
            reg.listeners,
            reg.features,
            reg.rack,
            reg.fenced,
            reg.in_controlled_shutdown or reg.cs_offset >= 0,
            reg.online_dirs,
            reg.cordoned_dirs,
        )
    state["brokers"] = brokers
    state["topics"] = dict(sorted(state["topics"].items(), key=lambda kv: kv[0].int))  # a stable repr
    state["acls"] = dict(sorted(state["acls"].items(), key=lambda kv: kv[0].int))
    return state


# ---------------------------------------------------------------------- writing


def _control_record(i: int, ctype: ControlRecordType, msg: Message, version: int) -> Record:
    key = bytearray()
    write_control_record_key(key, ControlRecordKey(0, int(ctype)))
    return Record(offset_delta=i, key=bytes(key), value=msg.encode(version))


def _batch(out: bytearray, recs: list[Record], base: int, epoch: int, ts: int, attributes: int) -> None:
    batch = RecordBatch.of(
        recs, base_offset=base, base_timestamp=ts, partition_leader_epoch=epoch, attributes=attributes
    )
    write_record_batch(out, batch)


def encode_snapshot(
    records: Iterable[RecordAndVersion | bytes],
    *,
    epoch: int,
    last_contained_timestamp: int,
    kraft_version: int = 0,
    voters: tuple[Message, int] | None = None,
    now_ms: int | None = None,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> Iterator[bytes]:
    """The bytes of a snapshot, batch by batch (so a large image is never held whole).

    Raises:
        EncodeError: a record cannot be written at its version.
        ValueError: voters given with kraft.version 0 (Kafka refuses that too).
    """
    if kraft_version == 0 and voters is not None:
        raise ValueError("a voter set needs kraft.version >= 1")
    ts = int(time.time() * 1000) if now_ms is None else now_ms
    head = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=last_contained_timestamp)
    header = [_control_record(0, ControlRecordType.SNAPSHOT_HEADER, head, 0)]
    if kraft_version >= 1:
        header.append(
            _control_record(
                1, ControlRecordType.KRAFT_VERSION, KRaftVersionRecord(version=0, k_raft_version=kraft_version), 0
            )
        )
        if voters is not None:
            header.append(_control_record(2, ControlRecordType.KRAFT_VOTERS, voters[0], voters[1]))
    out = bytearray()
    _batch(out, header, 0, epoch, ts, CONTROL_MASK)
    yield bytes(out)
    next_offset = len(header)
    pending: list[bytes] = []
    size = 0
    for item in records:
        # Items are records with their versions, or values already framed (image_values).
        value = item if isinstance(item, bytes) else codec.encode_metadata_record(*item)
        if pending and size + len(value) + 16 > max_batch_bytes:
            out = bytearray()
            write_value_batch(out, pending, base_offset=next_offset, base_timestamp=ts, partition_leader_epoch=epoch)
            next_offset += len(pending)
            yield bytes(out)
            pending, size = [], 0
        pending.append(value)
        size += len(value) + 16
    if pending:
        out = bytearray()
        write_value_batch(out, pending, base_offset=next_offset, base_timestamp=ts, partition_leader_epoch=epoch)
        next_offset += len(pending)
        yield bytes(out)
    out = bytearray()
    _batch(
        out,
        [_control_record(0, ControlRecordType.SNAPSHOT_FOOTER, SnapshotFooterRecord(version=0), 0)],
        next_offset,
        epoch,
        ts,
        CONTROL_MASK,
    )
    yield bytes(out)


def write_snapshot(
    directory: Path,
    snapshot_id: SnapshotId,
    records: Iterable[RecordAndVersion | bytes],
    *,
    last_contained_timestamp: int,
    kraft_version: int = 0,
    voters: tuple[Message, int] | None = None,
    fsync: bool = True,
) -> Path:
    """Write a snapshot file atomically (temp file, fsync, rename, directory fsync); return its path.

    Raises:
        StorageError: the file cannot be written (the temp file is removed).
        EncodeError: a record cannot be written at its version (nothing is left behind).
    """
    final = directory / snapshot_id.file_name
    tmp = directory / f"{snapshot_id.file_name[: -len(SUFFIX)]}-{os.getpid()}{PARTIAL_SUFFIX}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as exc:
        raise StorageError(f"cannot create snapshot {tmp}: {exc.strerror}") from None
    try:
        try:
            for chunk in encode_snapshot(
                records,
                epoch=snapshot_id.epoch,
                last_contained_timestamp=last_contained_timestamp,
                kraft_version=kraft_version,
                voters=voters,
            ):
                view = memoryview(chunk)
                written = 0
                while written < len(view):
                    written += os.write(fd, view[written:])
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        if fsync:
            dfd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StorageError(f"cannot write snapshot {final}: {exc.strerror}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return final


def write_image_snapshot(
    directory: Path,
    img: MetadataImage,
    *,
    epoch: int,
    last_contained_timestamp: int,
    fsync: bool = True,
    kraft_version: int = 0,
    voters: tuple[Message, int] | None = None,
) -> Path:
    """Snapshot ``img`` (which has applied up to ``img.last_applied_offset``), with the
    kraft.version and voter set in force at kraft.version 1."""
    sid = SnapshotId(img.last_applied_offset + 1, epoch)
    return write_snapshot(
        directory,
        sid,
        image_values(img),
        last_contained_timestamp=last_contained_timestamp,
        kraft_version=kraft_version,
        voters=voters,
        fsync=fsync,
    )


# ---------------------------------------------------------------------- reading


@dataclass(slots=True)
class SnapshotContents:
    """A decoded snapshot: its id, header fields and records."""

    snapshot_id: SnapshotId
    last_contained_timestamp: int
    kraft_version: int
    voters: Message | None
    records: list[RecordAndVersion]


def _decode_control(rec: Record) -> tuple[int, Message]:
    if rec.key is None:
        raise DecodeError("control record without a key")
    key, _ = read_control_record_key(rec.key, 0)
    value = rec.value or b""
    if len(value) < 2:
        raise DecodeError(f"control record of type {key.type} has {len(value)} value bytes")
    version = struct.unpack_from(">h", value, 0)[0]
    classes: dict[int, type[Message]] = {
        ControlRecordType.SNAPSHOT_HEADER: SnapshotHeaderRecord,
        ControlRecordType.SNAPSHOT_FOOTER: SnapshotFooterRecord,
        ControlRecordType.KRAFT_VERSION: KRaftVersionRecord,
        ControlRecordType.KRAFT_VOTERS: VotersRecord,
    }
    cls = classes.get(key.type)
    if cls is None:
        raise DecodeError(f"control record type {key.type} does not belong in a snapshot")
    return key.type, cls.decode(value, version)


def read_snapshot(path: Path, *, max_bytes: int | None = None) -> SnapshotContents:
    """Read and check a ``.checkpoint`` file: header first, footer last, offsets contiguous from 0.

    Raises:
        StorageError: the name is not a snapshot id, or the content is not a whole snapshot
            (the message names the file and byte position).
    """
    contents, _ = _read(path, max_bytes, raw_partitions=False)
    return contents


@dataclass(slots=True)
class _RawPartitions:
    """PartitionRecord values left undecoded for the restart's bulk loader, at their
    place among the snapshot's records; value ``i`` is at offset ``first_offset + i``
    (a run holds consecutive records: any other record, control ones included, ends it)."""

    values: list[bytes]
    first_offset: int


@dataclass(slots=True)
class _SnapshotReading:
    """What reading a snapshot has found so far; batches are handed in in file order.

    With ``raw_partitions``, ``mixed`` lists the records with runs of PartitionRecord
    values kept raw (``run`` is the one still growing) and ``records`` stays empty.
    """

    raw_partitions: bool
    header: SnapshotHeaderRecord | None = None
    footer: bool = False
    kraft_version: int = 0
    voters: Message | None = None
    records: list[RecordAndVersion] = field(default_factory=list)
    mixed: list[RecordAndVersion | _RawPartitions] = field(default_factory=list)
    run: _RawPartitions | None = None

    def control_batch(self, batch: RecordBatch, next_offset: int, where: str) -> None:
        """The header (first, at offset 0), footer, kraft.version and voters records."""
        self.run = None  # a run's offsets are contiguous: control records end it
        for rec in batch.records:
            try:
                ctype, msg = _decode_control(rec)
                if ctype == ControlRecordType.SNAPSHOT_HEADER:
                    if self.header is not None or next_offset != 0 or rec.offset_delta != 0:
                        raise DecodeError("SnapshotHeaderRecord not at offset 0")
                    assert isinstance(msg, SnapshotHeaderRecord)
                    self.header = msg
                elif self.header is None:
                    raise DecodeError("snapshot does not start with a SnapshotHeaderRecord")
                elif ctype == ControlRecordType.SNAPSHOT_FOOTER:
                    self.footer = True
                elif ctype == ControlRecordType.KRAFT_VERSION:
                    assert isinstance(msg, KRaftVersionRecord)
                    self.kraft_version = msg.k_raft_version
                else:
                    self.voters = msg
            except DecodeError as exc:
                raise StorageError(f"{where}, offset {batch.base_offset + rec.offset_delta}: {exc}") from None

    def data_batch(self, batch: RecordBatch, where: str) -> None:
        """A batch of metadata records, each with a value, after the header."""
        present = [rec.value for rec in batch.records]
        if self.header is None:
            raise StorageError(
                f"{where}, offset {batch.base_offset}: snapshot does not start with a SnapshotHeaderRecord"
            )
        if None in present:
            at = batch.base_offset + present.index(None)
            raise StorageError(f"{where}, offset {at}: metadata record without a value")
        values = cast(list[bytes], present)
        i = 0
        while i < len(values):
            if self.raw_partitions and values[i].startswith(PARTITION_FRAME):
                i += self._keep_raw_run(values, i, batch.base_offset)
                continue
            try:
                decoded = codec.decode_metadata_record(values[i])
            except DecodeError as exc:
                raise StorageError(f"{where}, offset {batch.base_offset + i}: {exc}") from None
            i += 1
            if self.raw_partitions:
                self.run = None
                self.mixed.append(decoded)
            else:
                self.records.append(decoded)

    def _keep_raw_run(self, values: list[bytes], i: int, base_offset: int) -> int:
        """Add the PartitionRecord values from ``values[i]`` on to the current run (a new
        one if none); returns how many were taken."""
        # The compiled codec counts the whole run in one call.
        k = _accel.count_prefixed(values, i, PARTITION_FRAME) or 1
        if self.run is None:
            self.run = _RawPartitions([], base_offset + i)
            self.mixed.append(self.run)
        self.run.values.extend(values[i : i + k])
        return k


# A PartitionRecord value starts with frame version 1 and record type 3 (one byte each).
def _read(
    path: Path, max_bytes: int | None, *, raw_partitions: bool
) -> tuple[SnapshotContents, list[RecordAndVersion | _RawPartitions]]:
    """``read_snapshot``; with ``raw_partitions`` the second item lists the records with
    runs of PartitionRecord values kept raw (and ``contents.records`` is left empty)."""
    sid = parse_name(path.name)
    if sid is None:
        raise StorageError(f"{path.name} is not a snapshot file name (<offset:20>-<epoch:10>.checkpoint)")
    data = _read_file(path, max_bytes)
    pos = 0
    next_offset = 0
    reading = _SnapshotReading(raw_partitions)
    while pos < len(data):
        where = f"snapshot {path} at byte {pos}"
        try:
            batch, end = read_record_batch(data, pos)
        except DecodeError as exc:
            raise StorageError(f"{where}: {exc}") from None
        if reading.footer:
            raise StorageError(f"{where}: batch after the SnapshotFooterRecord")
        if batch.base_offset != next_offset:
            raise StorageError(f"{where}: batch starts at offset {batch.base_offset}, expected {next_offset}")
        if batch.partition_leader_epoch != sid.epoch:
            raise StorageError(f"{where}: leader epoch {batch.partition_leader_epoch}, the snapshot's is {sid.epoch}")
        if batch.attributes & CONTROL_MASK:
            reading.control_batch(batch, next_offset, where)
        else:
            reading.data_batch(batch, where)
        next_offset = batch.base_offset + batch.last_offset_delta + 1
        pos = end
    header = reading.header
    if header is None:
        raise StorageError(f"snapshot {path} is empty")
    if not reading.footer:
        raise StorageError(f"snapshot {path} has no SnapshotFooterRecord (incomplete)")
    contents = SnapshotContents(
        sid, header.last_contained_log_timestamp, reading.kraft_version, reading.voters, reading.records
    )
    return contents, reading.mixed


def _read_file(path: Path, max_bytes: int | None) -> bytes:
    """The bytes of a snapshot file, refused over ``max_bytes``."""
    try:
        size = path.stat().st_size
        if max_bytes is not None and size > max_bytes:
            raise StorageError(f"snapshot {path} is {size} bytes, over the limit of {max_bytes}")
        return path.read_bytes()
    except OSError as exc:
        raise StorageError(f"cannot read snapshot {path}: {exc.strerror}") from None


def load_image(img: MetadataImage, contents: SnapshotContents) -> None:
    """Replay a snapshot into an empty image: every record at the last contained offset, as Kafka does.

    Raises:
        StorageError: the image is not empty, or a record contradicts it.
    """
    if img.last_applied_offset >= 0 or img.brokers or img.topics:
        raise StorageError("a snapshot loads only into an empty image")
    offset = contents.snapshot_id.last_contained_offset
    for rec, ver in contents.records:
        img.apply(offset, rec, ver)
    img.last_applied_offset = offset


# ---------------------------------------------------------------------- restart and schedule


def restore_latest(
    target: Any,
    directory: Path,
    log_end_offset: int,
    on_quorum: Callable[[int, Message | None], None] | None = None,
) -> SnapshotId | None:
    """Load the newest snapshot in ``directory`` that the log reaches into ``target`` (an empty
    ``ControllerState`` or ``MetadataImage``); return its id, or None when there is none (then
    the whole log is replayed). Replay the log from the id's ``end_offset`` afterwards.
    ``on_quorum`` gets the snapshot's kraft.version and VotersRecord (or None).

    A snapshot beyond the log's end is not used: the log it stands for is not all here.
    Runs of PartitionRecords go through the compiled loader where it is active (same image,
    less work: ``_PartitionLoader``).

    Raises:
        StorageError: the newest usable snapshot is damaged (the message names it).
    """
    img = getattr(target, "image", target)
    for sid in reversed(list_snapshots(directory)):
        if sid.end_offset > log_end_offset:
            continue
        path = directory / sid.file_name
        contents, records = _read(path, None, raw_partitions=True)
        offset = sid.last_contained_offset
        loader = _PartitionLoader(img, offset, path)
        for item in records:
            if isinstance(item, _RawPartitions):
                loader.load(item)
                continue
            rec, version = item
            if type(rec) is not TopicRecord:
                loader.flush()  # anything else may read the partition index
            target.apply(offset, rec, version)
            if type(rec) is TopicRecord:
                loader.topic_added(rec.topic_id)
        loader.flush()
        img.last_applied_offset = offset
        if on_quorum is not None:
            on_quorum(contents.kraft_version, contents.voters)
        return sid
    return None


class _PartitionLoader:
    """Applies a snapshot's runs of raw PartitionRecord values to ``img``.

    Uses the compiled loader (``_accel.build_partitions``) where it is active: it hands
    back any value it does not handle, which then goes through the ordinary decode and
    apply (applied, or the exact error raised). Without it, every value goes that way.
    The broker/dir index of what the compiled loader built is
    added by :meth:`flush`, once for many runs.
    """

    def __init__(self, img: MetadataImage, offset: int, path: Path) -> None:
        self.img = img
        self.offset = offset
        self.path = path
        self.topics = {tid.bytes: (tid, t.partitions) for tid, t in img.topics.items()}
        self.canon: dict[bytes, uuid.UUID] = {}
        self.canon_seen = -1
        self.unindexed: list[Partition] = []

    def _sync_canon(self) -> None:
        """Pass the image's canonical dir objects on to the compiled loader (records
        applied since, such as registrations, add to them; nothing removes any)."""
        if len(self.img.canon) != self.canon_seen:
            for u, c in self.img.canon.items():
                self.canon.setdefault(u.bytes, c)
            self.canon_seen = len(self.img.canon)

    def topic_added(self, topic_id: uuid.UUID) -> None:
        topic = self.img.topics.get(topic_id)
        if topic is not None:
            self.topics[topic_id.bytes] = (topic.topic_id, topic.partitions)

    def _decoded(self, run: _RawPartitions, i: int) -> tuple[Message, int]:
        try:
            return codec.decode_metadata_record(run.values[i])
        except DecodeError as exc:
            raise StorageError(f"snapshot {self.path}, offset {run.first_offset + i}: {exc}") from None

    def load(self, run: _RawPartitions) -> None:
        img, values = self.img, run.values
        migrating = img.canon.get(img.profile.migrating, img.profile.migrating)
        start = 0
        while start < len(values):
            self._sync_canon()
            done = _accel.build_partitions(values, start, self.topics, self.canon, migrating, img.leader_count)
            if done is None:
                self.flush()
                for i in range(start, len(values)):
                    img.apply(self.offset, *self._decoded(run, i))
                return
            stop, built, new_ids, used_migrating = done
            for u in new_ids:
                img.canon[u] = u
            self.canon_seen = len(img.canon)
            if used_migrating:
                img.canonical(migrating)
            self.unindexed.extend(built)
            img.partition_total += len(built)
            if stop >= len(values):
                return
            self.flush()
            rec, version = self._decoded(run, stop)
            img.apply(self.offset, rec, version)
            start = stop + 1

    def flush(self) -> None:
        if self.unindexed:
            self.img.index_many(self.unindexed)
            # The compiled loader counts leaders but keeps no set of the leaderless.
            self.img.leaderless.update(p for p in self.unindexed if p.leader < 0)
            self.unindexed = []


@dataclass(slots=True, frozen=True)
class Restart:
    """What :func:`restart` did: the snapshot it started from (None: the whole log) and
    how many log records it replayed after it."""

    snapshot: SnapshotId | None
    replayed: int


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for a bulk load.

    A restart creates millions of objects that live as long as the controller. With the
    collector on, every few hundred allocations trigger a collection that walks the
    growing, all-live image, and the older generations are walked again and again: that
    was half of a restart's CPU. Nothing a load creates is cyclic garbage, so nothing is
    lost by collecting once the image is built (the collector's own thresholds decide when).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def restart(
    target: Any,
    log: Any,
    directory: Path,
    on_record: Callable[[Any, int], object] | None = None,
    on_quorum: Callable[[int, Message | None], None] | None = None,
) -> Restart:
    """Rebuild ``target`` (an empty ``ControllerState``) as a controller start does: the
    newest usable snapshot, then every log record after it, each passed to ``on_record``;
    ``on_quorum`` gets the snapshot's kraft.version and VotersRecord (see restore_latest).

    ``log`` is an open ``MetadataLog``; ``ControllerServer.start`` and the restart
    benchmark (tools/bench/bench_restart.py) both call this.

    Before anything is loaded the snapshots are checked against the log
    (:func:`plan_start`): a log holding no batch starts at the newest snapshot, as Kafka's
    does; a snapshot that disagrees with the log stops the start.

    Raises:
        StorageError: a damaged snapshot or record, a snapshot that disagrees with the
            log, or a log whose start offset no snapshot covers (one line, naming the file
            and ``kraft-jbod log recover``).
    """
    plan = plan_start(
        directory,
        start_offset=log.start_offset,
        end_offset=log.end_offset,
        batches=log.batches,
        batch_timestamp=log.batch_max_timestamp,
        first_segment=log.segment_paths[0] if log.segment_paths else None,
    )
    with collector_paused():
        try:
            reach = log.end_offset if plan.start_log_at is None else plan.start_log_at
            restored = restore_latest(target, directory, reach, on_quorum)
        except StorageError as exc:
            raise StorageError(f"{exc}; nothing was changed. Run: kraft-jbod log recover {directory}") from None
        if restored != plan.snapshot:  # not reached: plan_start chose the newest usable one
            raise StorageError(f"loaded snapshot {restored}, expected {plan.snapshot}")
        if plan.start_log_at is not None:
            # Only once the snapshot has loaded whole: a refused start changes nothing.
            log.start_at(plan.start_log_at)
        replayed = 0
        for offset, record, version in log.replay(0 if restored is None else restored.end_offset):
            target.apply(offset, record, version)
            if on_record is not None:
                on_record(record, version)
            replayed += 1
    return Restart(restored, replayed)


# ---------------------------------------------------------------------- snapshots against the log


@dataclass(slots=True, frozen=True)
class StartPlan:
    """What a start does with the snapshots (:func:`plan_start`): load ``snapshot`` (None:
    replay the whole log), first starting the log at ``start_log_at`` when it is set (the
    log holds no batch and the snapshot is past its end)."""

    snapshot: SnapshotId | None
    start_log_at: int | None


class SnapshotConflict(StorageError):
    """The snapshots and the log disagree; ``path`` is the file to look at, ``reason`` why."""

    def __init__(self, path: Path, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"metadata snapshot {path}: {reason}; nothing was changed. Run: kraft-jbod log recover {path.parent}"
        )


def read_header(path: Path) -> SnapshotHeaderRecord:
    """The SnapshotHeaderRecord of a snapshot file, reading only its first batch.

    Raises:
        StorageError: the file cannot be read or does not start with a header batch.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(BATCH_HEADER_SIZE)
            if len(head) < BATCH_HEADER_SIZE:
                raise StorageError(f"snapshot {path} is {len(head)} bytes, less than one batch")
            (length,) = struct.unpack_from(">i", head, 8)
            if not 0 < length <= MAX_BATCH_BYTES:
                raise StorageError(f"snapshot {path} at byte 0: invalid batch length {length}")
            data = head + f.read(length + 12 - len(head))
    except OSError as exc:
        raise StorageError(f"cannot read snapshot {path}: {exc.strerror}") from None
    try:
        batch, _ = read_record_batch(data, 0)
        if not batch.attributes & CONTROL_MASK or not batch.records:
            raise DecodeError("the first batch is not a control batch")
        ctype, msg = _decode_control(batch.records[0])
    except DecodeError as exc:
        raise StorageError(f"snapshot {path} at byte 0: {exc}") from None
    if ctype != ControlRecordType.SNAPSHOT_HEADER or batch.base_offset != 0:
        raise StorageError(f"snapshot {path} does not start with a SnapshotHeaderRecord")
    assert isinstance(msg, SnapshotHeaderRecord)
    return msg


def plan_start(
    directory: Path,
    *,
    start_offset: int,
    end_offset: int,
    batches: Sequence[BatchInfo],
    batch_timestamp: Callable[[BatchInfo], int],
    first_segment: Path | None = None,
) -> StartPlan:
    """Check the newest snapshot of ``directory`` against the log [start_offset, end_offset)
    whose batches are ``batches``, and say what a start does. Changes nothing on disk.

    Kafka (KafkaRaftLog) starts a log at its latest snapshot when the snapshot is past
    the log's end, and refuses a log whose start no snapshot covers. A single voter has no
    leader to fetch a lost or foreign history back from, so beyond the empty log every
    disagreement stops the start instead of truncating (docs/divergences.md):

    * Rule 1: no snapshot: the log must start at 0 (else the offsets below are lost).
    * Rule 2: the newest snapshot's header must read (the whole file is read when loaded).
    * Rule 3: a log holding no batch starts at the snapshot (``start_log_at``).
    * Rule 4: otherwise the snapshot must end inside the log, start <= S <= end (a gap
      either way loses offsets).
    * Rule 5: the same history: the log's batch holding offset S-1 has the snapshot's epoch
      and, when it ends at S-1, the MaxTimestamp the snapshot's header gives as its last
      contained log time (both are written from that one append); the batch holding S has
      an epoch >= the snapshot's. A log and a snapshot from two lives of the directory fail
      this.

    Raises:
        SnapshotConflict: a rule does not hold (the message names the file and
            ``kraft-jbod log recover``).
        StorageError: the directory cannot be listed.
    """
    ids = list_snapshots(directory)
    if not ids:
        if start_offset > 0:
            where = first_segment if first_segment is not None else directory
            raise SnapshotConflict(
                where,
                f"the log starts at offset {start_offset} but no {SUFFIX} snapshot covers the offsets below it "
                "(was the snapshot deleted?)",
            )
        return StartPlan(None, None)
    sid = ids[-1]
    path = directory / sid.file_name
    try:
        header = read_header(path)
    except StorageError as exc:
        raise SnapshotConflict(path, f"unreadable: {exc}") from None
    S, E = sid.end_offset, sid.epoch
    if not batches:
        return StartPlan(sid, S)
    if S > end_offset:
        raise SnapshotConflict(
            path,
            f"ends at offset {S}, past the log's end {end_offset}: offsets {end_offset}..{S - 1} are in no segment",
        )
    if S < start_offset:
        raise SnapshotConflict(
            path, f"ends at offset {S} but the log starts at {start_offset}: offsets {S}..{start_offset - 1} are lost"
        )
    last = batch_holding(batches, S - 1) if S > start_offset else None
    if last is not None:
        if last.epoch != E:
            raise SnapshotConflict(
                path,
                f"says offset {S - 1} was written in epoch {E}, the log has it in epoch {last.epoch}: "
                "the log and the snapshot are two different histories",
            )
        if last.last_offset == S - 1:
            ts = batch_timestamp(last)
            if ts != header.last_contained_log_timestamp:
                raise SnapshotConflict(
                    path,
                    f"says the batch ending at offset {S - 1} was appended at {header.last_contained_log_timestamp}, "
                    f"the log's was appended at {ts}: the log and the snapshot are two different histories",
                )
    following = batch_holding(batches, S) if S < end_offset else None
    if following is not None and following.epoch < E:
        raise SnapshotConflict(
            path,
            f"has epoch {E} but the log continues at offset {S} in epoch {following.epoch}: "
            "the log and the snapshot are two different histories",
        )
    return StartPlan(sid, None)


@dataclass(slots=True, frozen=True)
class SnapshotFile:
    """One snapshot file as ``log recover`` sees it: ``problem`` None when it reads whole."""

    path: Path
    snapshot_id: SnapshotId
    problem: str | None


def check_files(directory: Path) -> list[SnapshotFile]:
    """Read every finished snapshot of ``directory`` whole (header, batches, CRCs, records,
    footer), oldest first. Changes nothing.

    Raises:
        StorageError: the directory cannot be listed.
    """
    out = []
    for sid in list_snapshots(directory):
        path = directory / sid.file_name
        try:
            _read(path, None, raw_partitions=True)
            problem = None
        except StorageError as exc:
            problem = str(exc)
        out.append(SnapshotFile(path, sid, problem))
    return out


def leftovers(directory: Path) -> list[Path]:
    """Temp files of snapshots a crash interrupted (``.checkpoint.part``); never loaded."""
    try:
        return sorted(p for p in directory.iterdir() if p.name.endswith(PARTIAL_SUFFIX))
    except OSError as exc:
        raise StorageError(f"cannot list {directory}: {exc.strerror}") from None


def set_aside(directory: Path, name: str, *, now: str | None = None) -> Path:
    """Move the snapshot file ``name`` out of the way, into ``directory/recovery-<time>-snapshot/``
    (the bytes are kept there, never deleted), so the next start does not load it.

    Holds the log's lock (not while a controller runs), and fsyncs both directories.

    Raises:
        StorageError: ``name`` is not a snapshot file of ``directory``, the log is in use,
            or the move fails (then nothing was moved).
    """
    sid = parse_name(name)
    if sid is None or name != Path(name).name:
        raise StorageError(f"--set-aside {name}: not a snapshot file name (<offset:20>-<epoch:10>{SUFFIX})")
    path = directory / name
    if not path.is_file():
        raise StorageError(f"--set-aside {name}: no such snapshot in {directory}")
    stamp = now or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    with hold_lock(directory):
        target = directory / f"recovery-{stamp}-snapshot"
        try:
            target.mkdir(exist_ok=True)
            moved = target / name
            if moved.exists():
                raise StorageError(f"{moved} already exists; nothing was moved")
            os.replace(path, moved)
            for d in (target, directory):
                fd = os.open(d, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        except OSError as exc:
            raise StorageError(f"cannot move {path} into {target}: {exc.strerror}") from None
    return moved


@dataclass(slots=True)
class SnapshotPolicy:
    """When to snapshot: Kafka's ``metadata.log.max.record.bytes.between.snapshots`` (20 MiB)
    and ``metadata.log.max.snapshot.interval.ms`` (1 hour; 0 turns the time trigger off).
    Counts the bytes of committed record batches since the last snapshot."""

    max_bytes: int = 20 * 1024 * 1024
    max_interval_ms: int = 60 * 60 * 1000
    bytes_since: int = 0
    last_ms: int = 0

    def committed(self, nbytes: int) -> None:
        self.bytes_since += nbytes

    def due(self, now_ms: int) -> bool:
        if self.bytes_since == 0:
            return False
        if self.bytes_since >= self.max_bytes:
            return True
        return self.max_interval_ms > 0 and now_ms - self.last_ms >= self.max_interval_ms

    def taken(self, now_ms: int) -> None:
        self.bytes_since = 0
        self.last_ms = now_ms
