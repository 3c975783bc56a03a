"""A restart's snapshot load (``snapshot.restore_latest``) builds the image that applying the
snapshot's records one by one builds, on both codec backends.

The restart path differs from ``load_image``: PartitionRecords go through a bulk loader
(compiled: ``_ccodec.build_partitions`` and ``group_replicas``; pure Python:
the ordinary decode and apply of each record). These tests compare everything
the image derives too (the broker/dir index, leader counts, the partition total, one shared
object per directory id), over the controller property test's random runs and over records
the compiled loader hands back: unknown tags, version 0, bad references.
"""

from __future__ import annotations

import random
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft_jbod import _accel, codec
from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller.image import MetadataImage
from kraft_jbod.controller.profiles import profile_named
from kraft_jbod.errors import DecodeError, EncodeError, StorageError
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.wire import records as wire_records
from kraft_jbod.wire.records import Record, RecordBatch, read_record_batch, write_record_batch, write_value_batch
from tests.controller.harness import Cluster
from tests.controller.test_state_properties import OPS, SETUPS, _setup, _step

BACKENDS = ["python", "c"] if _accel.available() else ["python"]


@pytest.fixture
def restore_backend() -> Iterator[None]:
    before = _accel.backend()
    yield
    _accel.use(before)


def derived(img: MetadataImage) -> dict[str, Any]:
    """What the image derives from its records, in comparable form."""
    for p in img.partitions():
        for d in p.dirs:
            assert img.canon[d] is d, "a partition holds a directory id that is not the canonical object"
    index = {
        b: {d: sorted((p.topic_id, p.partition_id) for p in parts) for d, parts in per.items() if parts}
        for b, per in img.index.items()
    }
    return {
        "comparable": snap.comparable(img),
        "index": index,
        "leader_count": dict(img.leader_count),
        "partition_total": img.partition_total,
        "last_applied": img.last_applied_offset,
        "canon": sorted(img.canon),
    }


def one_by_one(path: Path, profile: Any) -> MetadataImage:
    img = MetadataImage(profile)
    snap.load_image(img, snap.read_snapshot(path))
    return img


def restored(directory: Path, profile: Any, backend: str) -> MetadataImage:
    _accel.use(backend)
    img = MetadataImage(profile)
    assert snap.restore_latest(img, directory, 1 << 62) is not None
    return img


def _check_all_backends(img: MetadataImage, directory: Path) -> None:
    # Writing: the image's values (compiled partition encoder where active) are the bytes
    # of its records encoded one by one, on both backends.
    by_record = [codec.encode_metadata_record(r, v) for r, v in snap.image_records(img)]
    for backend in BACKENDS:
        _accel.use(backend)
        assert list(snap.image_values(img)) == by_record, backend
    path = snap.write_image_snapshot(directory, img, epoch=2, last_contained_timestamp=0, fsync=False)
    expected = derived(one_by_one(path, img.profile))
    assert expected["comparable"] == snap.comparable(img)
    for backend in BACKENDS:
        assert derived(restored(directory, img.profile, backend)) == expected, backend


@settings(max_examples=40, deadline=None)
@given(st.lists(OPS, max_size=40), SETUPS, st.sampled_from([7, 16, 22, 30]), st.sampled_from(["kafka", "kip"]))
def test_random_runs_restore_as_one_by_one(
    ops: list[tuple[Any, ...]], setup: list[int], level: int, profile: str
) -> None:
    before = _accel.backend()
    try:
        c = Cluster(level=level, profile=profile)
        _setup(c, setup)
        for op in ops:
            _step(c, op)
        with tempfile.TemporaryDirectory() as d:
            _check_all_backends(c.state.image, Path(d))
    finally:
        _accel.use(before)


# ---------------------------------------------------------------- hand-made snapshots

TOPIC = uuid.UUID(int=0x1234 << 64 | 7)
DIRS = [uuid.UUID(int=(b + 1) << 64 | 9) for b in range(3)]


def _base_records() -> list[tuple[Any, int]]:
    out: list[tuple[Any, int]] = [
        (RegisterBrokerRecord(broker_id=b, incarnation_id=uuid.UUID(int=b + 1), broker_epoch=b, log_dirs=[DIRS[b]]), 3)
        for b in range(3)
    ]
    out.append((TopicRecord(name="t", topic_id=TOPIC), 0))
    return out


def _partition(pid: int, **kw: Any) -> PartitionRecord:
    fields: dict[str, Any] = dict(
        partition_id=pid, topic_id=TOPIC, replicas=[0, 1, 2], isr=[0, 1], leader=pid % 3, directories=list(DIRS)
    )
    fields.update(kw)
    return PartitionRecord(**fields)


def _write(directory: Path, records: list[tuple[Any, int]]) -> Path:
    return snap.write_snapshot(directory, snap.SnapshotId(100, 1), records, last_contained_timestamp=0, fsync=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_record_shape_loads_as_one_by_one(tmp_path: Path, backend: str, restore_backend: None) -> None:
    profile = profile_named("kafka")
    parts: list[tuple[Any, int]] = [
        (_partition(0), 2),
        (_partition(1, directories=[]), 2),  # no dirs: MIGRATING
        (_partition(2, directories=[]), 0),  # version 0 has no Directories field
        (_partition(3, leader=-1, eligible_leader_replicas=[1, 2], last_known_elr=[0]), 2),
        (_partition(4, adding_replicas=[2], removing_replicas=[0], leader_recovery_state=1), 2),
        (_partition(5, replicas=[], isr=[], directories=[], leader=-1), 1),
        (_partition(6, eligible_leader_replicas=[], last_known_elr=None), 2),
        (_partition(7, directories=[DIRS[0], DIRS[0], uuid.UUID(int=99)]), 1),
    ]
    path = _write(tmp_path, _base_records() + parts + [(TopicRecord(name="u", topic_id=uuid.UUID(int=5)), 0)])
    expected = derived(one_by_one(path, profile))
    assert derived(restored(tmp_path, profile, backend)) == expected
    assert expected["partition_total"] == len(parts)


def _with_unknown_tag(value: bytes) -> bytes:
    # A PartitionRecord v2 value ends with its tagged-field count (0 here); add tag 9.
    assert value[-1] == 0
    return value[:-1] + b"\x01\x09\x02\xab\xcd"


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_the_compiled_loader_hands_back(tmp_path: Path, backend: str, restore_backend: None) -> None:
    """An unknown tag in the middle of a run: the loader stops there, the ordinary path
    applies that record, and loading resumes after it."""
    profile = profile_named("kafka")
    path = _write(tmp_path, _base_records() + [(_partition(i), 2) for i in range(6)])
    data = bytearray()
    pos = 0
    raw = path.read_bytes()
    while pos < len(raw):
        batch, pos = read_record_batch(raw, pos)
        if not batch.is_control:
            recs = list(batch.records)
            for r in recs[-6:][2:4]:
                assert r.value is not None
                r.value = _with_unknown_tag(r.value)
            batch = RecordBatch(
                base_offset=batch.base_offset,
                partition_leader_epoch=batch.partition_leader_epoch,
                attributes=batch.attributes,
                base_timestamp=batch.base_timestamp,
                max_timestamp=batch.max_timestamp,
                last_offset_delta=batch.last_offset_delta,
                records=recs,
            )
        write_record_batch(data, batch)
    path.write_bytes(bytes(data))
    expected = derived(one_by_one(path, profile))
    assert expected["partition_total"] == 6
    assert derived(restored(tmp_path, profile, backend)) == expected


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([(_partition(0, topic_id=uuid.UUID(int=3)), 2)], "for unknown topic"),
        ([(_partition(0), 2), (_partition(0), 2)], "re-creates partition 0"),
        ([(_partition(0, directories=[DIRS[0]]), 2)], "1 Directories for 3 Replicas"),
    ],
)
def test_bad_references_give_the_same_error(tmp_path: Path, extra: list[tuple[Any, int]], message: str) -> None:
    profile = profile_named("kafka")
    _write(tmp_path, _base_records() + extra)
    before = _accel.backend()
    errors = []
    try:
        for backend in BACKENDS:
            with pytest.raises(StorageError, match=message) as exc:
                restored(tmp_path, profile, backend)
            errors.append(str(exc.value))
    finally:
        _accel.use(before)
    assert len(set(errors)) == 1


# ---------------------------------------------------------------- record framing


def _random_records(rng: random.Random) -> list[Record]:
    out = []
    for i in range(rng.randint(1, 8)):
        headers = [
            (rng.choice(["", "k", "ünï"]), rng.choice([None, b"", rng.randbytes(rng.randint(1, 5))]))
            for _ in range(rng.choice([0, 0, 1, 2]))
        ]
        out.append(
            Record(
                attributes=rng.choice([0, 0, -3]),
                timestamp_delta=rng.choice([0, 1, -1, 1 << 40, -(1 << 62)]),
                offset_delta=i,
                key=rng.choice([None, b"", rng.randbytes(rng.randint(1, 300))]),
                value=rng.choice([None, b"", rng.randbytes(rng.randint(1, 300))]),
                headers=headers,
            )
        )
    return out


def _outcome(payload: bytes, count: int) -> tuple[str, Any]:
    try:
        return ("ok", wire_records._read_batch_records(payload, 0, len(payload), count, 61))
    except DecodeError as exc:
        return ("error", str(exc))


@pytest.mark.skipif(not _accel.available(), reason="compiled codec not built (checked in CI by test_accel)")
def test_compiled_framing_agrees_with_python(restore_backend: None) -> None:
    rng = random.Random(858)
    for _ in range(400):
        recs = _random_records(rng)
        out = bytearray()
        write_record_batch(out, RecordBatch(base_offset=0, last_offset_delta=len(recs) - 1, records=recs))
        payload = bytes(out[61:])
        cases = [payload, payload[: rng.randrange(len(payload))], payload + b"\x00"]
        for _ in range(6):
            b = bytearray(payload)
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            cases.append(bytes(b))
        for case in cases:
            for count in {len(recs), len(recs) + 1, max(0, len(recs) - 1)}:
                _accel.use("python")
                expected = _outcome(case, count)
                _accel.use("c")
                assert _outcome(case, count) == expected
        _accel.use("c")
        assert _accel.frame_records(payload, len(recs)) == recs  # the C path did the work
        # Writing: the compiled writer's bytes are the Python writer's.
        written = _accel.write_records(recs)
        _accel.use("python")
        again = bytearray()
        write_record_batch(again, RecordBatch(base_offset=0, last_offset_delta=len(recs) - 1, records=recs))
        assert written == bytes(again[61:]) == payload


@pytest.mark.skipif(not _accel.available(), reason="compiled codec not built (checked in CI by test_accel)")
def test_the_compiled_loader_runs_under_the_c_backend(restore_backend: None) -> None:
    _accel.use("c")
    assert _accel.build_partitions([], 0, {}, {}, None, {}) == (0, [], [], False)
    _accel.use("python")
    assert _accel.build_partitions([], 0, {}, {}, None, {}) is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_partition_without_replicas_or_dirs(tmp_path: Path, backend: str, restore_backend: None) -> None:
    # Alone in the snapshot, so only it can bring the MIGRATING id into the image's ids.
    profile = profile_named("kafka")
    _write(tmp_path, [*_base_records(), (_partition(0, replicas=[], isr=[], directories=[], leader=-1), 2)])
    expected = derived(one_by_one(tmp_path / snap.SnapshotId(100, 1).file_name, profile))
    assert profile.migrating in expected["canon"]
    assert derived(restored(tmp_path, profile, backend)) == expected


@pytest.mark.skipif(not _accel.available(), reason="compiled codec not built (checked in CI by test_accel)")
def test_the_compiled_writer_hands_back_what_python_refuses(restore_backend: None) -> None:
    _accel.use("c")
    for bad in (
        Record(attributes=128),
        Record(offset_delta=1 << 31),
        Record(timestamp_delta=1 << 63),
        Record(headers=[("\ud800", None)]),
        Record(value="text"),  # type: ignore[arg-type]
    ):
        assert _accel.write_records([bad]) is None
        with pytest.raises((EncodeError, TypeError)):
            write_record_batch(bytearray(), RecordBatch(base_offset=0, records=[bad]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_batches_are_the_record_batches_of_those_values(backend: str, restore_backend: None) -> None:
    _accel.use(backend)
    rng = random.Random(30)
    for n in (0, 1, 2, 200):
        values = [rng.randbytes(rng.randint(0, 300)) for _ in range(n)]
        fast = bytearray()
        write_value_batch(fast, values, base_offset=5, base_timestamp=77, partition_leader_epoch=3)
        slow = bytearray()
        recs = [Record(offset_delta=i, value=v) for i, v in enumerate(values)]
        write_record_batch(slow, RecordBatch.of(recs, base_offset=5, base_timestamp=77, partition_leader_epoch=3))
        assert fast == slow
        if n:
            batch, _ = read_record_batch(bytes(fast), 0)
            assert [r.value for r in batch.records] == values


def test_the_compiled_layout_is_the_record_plan() -> None:
    # Every version's program walks the PartitionRecord plan's fields in wire order (the
    # tagged ones last, by tag) and fills every slot of Partition: nothing in C restates it.
    from kraft_jbod._accel import plans
    from kraft_jbod.controller.image import PARTITION_RECORD_SLOTS, Partition

    slots = tuple(dict.fromkeys(PARTITION_RECORD_SLOTS.values()))
    lo, hi = PartitionRecord.VALID_VERSIONS
    for v in range(lo, hi + 1):
        program = plans.partition_program(PartitionRecord, v, PARTITION_RECORD_SLOTS, slots)
        assert program is not None, v
        plan = plans.plan_for(PartitionRecord, v)
        assert plan is not None
        on_wire = [f[0] for f in plan[2] if f[3] and not f[4]]
        tagged = sorted((f[5], f[0]) for f in plan[2] if f[3] and f[4])
        by_slot = {slot: name for name, slot in PARTITION_RECORD_SLOTS.items()}
        walked = [by_slot[slots[step[1]]] for step in program if step[2]]
        assert walked == on_wire + [name for _, name in tagged]
        assert {slots[step[1]] for step in program} == set(Partition.__slots__)
    # A field on the wire the image has no slot for: no program, the Python path runs.
    fewer = {k: v for k, v in PARTITION_RECORD_SLOTS.items() if k != "isr"}
    assert plans.partition_program(PartitionRecord, hi, fewer, slots) is None


@pytest.mark.skipif(not _accel.available(), reason="compiled codec not built (checked in CI by test_accel)")
def test_the_compiled_loader_and_writer_round_trip_every_version(restore_backend: None) -> None:
    # The C path does the work (nothing handed back) on each version's richest value, and
    # writes back the bytes the Python encoder writes.
    from kraft_jbod.controller.image import Partition

    _accel.use("c")
    topic, d1, d2 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    lo, hi = PartitionRecord.VALID_VERSIONS
    for v in range(lo, hi + 1):
        rec = _partition(
            3,
            topic_id=topic,
            replicas=[1, 2],
            isr=[1, 2],
            leader=1,
            directories=[d1, d2] if v >= 1 else [],
            leader_recovery_state=1,
        )
        if v >= 2:
            rec.eligible_leader_replicas = [2]
            rec.last_known_elr = [1, 2]
        value = codec.encode_metadata_record(rec, v)
        parts: dict[int, Any] = {}
        counts: dict[int, int] = {}
        migrating = uuid.UUID(int=1)
        stop, built, new_ids, used_migrating = _accel.build_partitions(
            [value], 0, {topic.bytes: (topic, parts)}, {}, migrating, counts
        ) or (None, [], [], None)
        assert stop == 1 and len(built) == 1, v
        [p] = built
        assert isinstance(p, Partition) and parts == {3: p} and counts == {rec.leader: 1}
        assert (p.topic_id, p.replicas, p.isr, p.leader_recovery_state) == (topic, (1, 2), (1, 2), 1)
        assert p.dirs == ((d1, d2) if v >= 1 else (migrating, migrating)) and used_migrating == (v == 0)
        assert (p.elr, p.last_known_elr) == (((2,), (1, 2)) if v >= 2 else ((), ()))
        assert new_ids == ([d1, d2] if v >= 1 else [])
        assert _accel.encode_partitions([p], v) == [codec.encode_metadata_record(snap._partition_record(p, v), v)]
