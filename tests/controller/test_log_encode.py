"""The metadata log's bulk record encoder: the compiled path gives the Python path's bytes.

``log.encode_metadata_values`` frames a whole append in one call of the compiled codec
(``encode_metadata_values`` of ``_ccodec.c``) and falls back to framing each record with
``codec.encode_metadata_record``. For every metadata record type and version, random
records encode to the same values both ways; anything the compiled path does not take
(a record that is not a metadata record, a version out of range) is handed back, so the
caller gets the Python path's EncodeError; and a log appended under each codec holds the
same bytes.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod import _accel, codec, messages
from kraft_jbod.controller import log as mlog
from kraft_jbod.errors import EncodeError
from kraft_jbod.fuzz import strategies
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from tests.oracles.values import strip_unknown

needs_c = pytest.mark.skipif(_accel._c is None, reason="the compiled codec is not built")

RECORD_CLASSES = sorted(
    (cls for key in messages.METADATA_RECORDS if (cls := messages.metadata_record_class(key)) is not None),
    key=lambda cls: cls.__name__,
)


@pytest.fixture
def compiled() -> Any:
    before = _accel.current()
    _accel.use("c")
    yield
    _accel.use(before)


def _compiled_values(records: list[Any]) -> list[bytes] | None:
    mlog.encode_metadata_values([])  # fills the prefix table
    return _accel.encode_metadata_values(records, mlog._FRAME_PREFIXES)


@needs_c
@pytest.mark.parametrize("cls", RECORD_CLASSES, ids=lambda cls: cls.__name__)
def test_compiled_values_equal_python_framing(cls: Any, compiled: None) -> None:
    lo, hi = cls.VALID_VERSIONS

    @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        records = [(strip_unknown(data.draw(strategies.message(cls, v))), v) for v in range(lo, hi + 1)]
        expected = [codec.encode_metadata_record(rec, v) for rec, v in records]
        got = _compiled_values(records)
        assert got is not None, f"{cls.__name__}: handed back"
        assert got == expected

    check()


@needs_c
def test_a_mixed_append_is_one_compiled_call(compiled: None) -> None:
    tid = uuid.UUID(int=7)
    records: list[Any] = [
        (PartitionChangeRecord(partition_id=i, topic_id=tid, isr=[1, 2], leader=2), 2) for i in range(300)
    ]
    records.insert(100, (FeatureLevelRecord(name="metadata.version", feature_level=27), 0))
    got = _compiled_values(records)
    assert got == [codec.encode_metadata_record(rec, v) for rec, v in records]


@needs_c
@pytest.mark.parametrize(
    "bad",
    [
        (BrokerHeartbeatRequest(broker_id=1), 1),  # not a metadata record
        (FeatureLevelRecord(name="x", feature_level=1), 0x8000),  # version out of the frame's range
        (FeatureLevelRecord(name="x", feature_level=1), 99),  # a version the record does not have
        (FeatureLevelRecord(name="x", feature_level=1), -1),
        (FeatureLevelRecord(name="x", feature_level=1),),  # not a pair
    ],
)
def test_irregular_input_is_handed_back_and_the_python_error_raised(bad: Any, compiled: None) -> None:
    good = (FeatureLevelRecord(name="metadata.version", feature_level=27), 0)
    assert _compiled_values([good, bad]) is None
    if len(bad) == 2:
        with pytest.raises(EncodeError):
            mlog.encode_metadata_values([good, bad])


@needs_c
def test_a_value_out_of_range_is_the_python_error(compiled: None) -> None:
    rec = PartitionChangeRecord(partition_id=1, topic_id=uuid.UUID(int=7), leader=2**40)
    assert _compiled_values([(rec, 0)]) is None
    with pytest.raises(EncodeError):
        mlog.encode_metadata_values([(rec, 0)])


@pytest.mark.parametrize("backend", ["python", pytest.param("c", marks=needs_c)])
def test_appends_write_the_same_bytes_under_either_codec(backend: str, tmp_path: Path) -> None:
    tid = uuid.UUID(int=9)
    # more than one batch's worth, so the append splits
    records: list[Any] = [
        (PartitionChangeRecord(partition_id=i, topic_id=tid, isr=[1, 3], leader=-1 if i % 7 else 3), 0)
        for i in range(mlog.MAX_RECORDS_PER_BATCH + 17)
    ]
    before = _accel.current()
    _accel.use(backend)
    try:
        with mlog.MetadataLog.open(tmp_path / "log", leader_epoch=3, fsync=False) as lg:
            lg.append(records, timestamp_ms=1234)
            lg.append(records[:3], timestamp_ms=1235)
        written = b"".join(p.read_bytes() for p in sorted((tmp_path / "log").rglob("*.log")))
        batches = mlog.encode_data_batches(records, base_offset=0, epoch=3, timestamp_ms=1234)
    finally:
        _accel.use(before)
    # The reference: records framed one by one in Python, batched by the generic writer.
    from kraft_jbod.wire.records import Record, RecordBatch, write_record_batch

    _accel.use("python")
    try:
        expected = bytearray()
        base = 0
        for chunk, ts in (
            (records[: mlog.MAX_RECORDS_PER_BATCH], 1234),
            (records[mlog.MAX_RECORDS_PER_BATCH :], 1234),
            (records[:3], 1235),
        ):
            recs = [Record(offset_delta=i, value=codec.encode_metadata_record(r, v)) for i, (r, v) in enumerate(chunk)]
            write_record_batch(
                expected, RecordBatch.of(recs, base_offset=base, base_timestamp=ts, partition_leader_epoch=3)
            )
            base += len(chunk)
    finally:
        _accel.use(before)
    assert written == bytes(expected)
    assert b"".join(data for _, _, data in batches) == bytes(expected)[: sum(len(d) for _, _, d in batches)]
