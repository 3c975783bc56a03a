"""KIP-966 fields in the replayed image: PartitionRecord / PartitionChangeRecord ELR and
last-known ELR, ClearElrRecord (one topic or all), the status view and snapshots."""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller import client_api
from kraft_jbod.controller.image import Partition
from kraft_jbod.controller.snapshot import image_records
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.clear_elr_record import ClearElrRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.wire.message import Message

T1, T2 = uuid.UUID(int=11), uuid.UUID(int=12)
DIR = uuid.UUID(int=77)


def _state() -> tuple[ControllerState, list[Message]]:
    st = ControllerState(cluster_id="AAAAAAAAAAAAAAAAAAAAAA", node_id=3000)
    recs: list[tuple[Message, int]] = [(FeatureLevelRecord(name="metadata.version", feature_level=26), 0)]
    for tid, name in ((T1, "a"), (T2, "b")):
        recs.append((TopicRecord(name=name, topic_id=tid), 0))
        recs.append(
            (
                PartitionRecord(
                    partition_id=0,
                    topic_id=tid,
                    replicas=[1, 2, 3],
                    isr=[1],
                    leader=1,
                    leader_epoch=0,
                    partition_epoch=0,
                    directories=[DIR] * 3,
                    eligible_leader_replicas=[2],
                    last_known_elr=[3],
                ),
                2,
            )
        )
    for off, (r, v) in enumerate(recs):
        st.apply(off, r, v)
    return st, [r for r, _ in recs]


def _part(st: ControllerState, tid: uuid.UUID) -> Partition:
    return st.image.topics[tid].partitions[0]


def test_partition_records_carry_elr_into_the_image_and_view() -> None:
    st, _ = _state()
    p = _part(st, T1)
    assert (p.elr, p.last_known_elr) == ((2,), (3,))
    st.apply(
        5, PartitionChangeRecord(partition_id=0, topic_id=T1, eligible_leader_replicas=[2, 3], last_known_elr=[]), 2
    )
    assert (p.elr, p.last_known_elr, p.partition_epoch) == ((2, 3), (), 1)
    st.apply(6, PartitionChangeRecord(partition_id=0, topic_id=T1, isr=[1, 2]), 2)  # fields absent: unchanged
    assert p.elr == (2, 3)
    view = client_api.cluster_view(st)
    row = next(t for t in view["topics"] if t["name"] == "a")["partitions"][0]
    assert (row["elr"], row["last_known_elr"]) == ([2, 3], [])


def test_clear_elr_of_one_topic_and_of_all() -> None:
    st, _ = _state()
    st.apply(5, ClearElrRecord(topic_name="a"), 0)
    a, b = _part(st, T1), _part(st, T2)
    assert (a.elr, a.last_known_elr, a.partition_epoch) == ((), (), 1)
    assert (b.elr, b.partition_epoch) == ((2,), 0)
    st.apply(6, ClearElrRecord(topic_name=""), 0)
    # a had nothing left to clear: its partition epoch stays, as Kafka's replay.
    assert (a.partition_epoch, b.elr, b.last_known_elr, b.partition_epoch) == (1, (), (), 1)


def test_clear_elr_for_an_unknown_topic_is_an_error_in_the_log() -> None:
    st, _ = _state()
    with pytest.raises(StorageError, match="unknown topic 'zzz'"):
        st.apply(5, ClearElrRecord(topic_name="zzz"), 0)


def test_snapshot_records_keep_elr() -> None:
    st, _ = _state()
    parts = [r for r, _ in image_records(st.image) if isinstance(r, PartitionRecord)]
    assert [(r.eligible_leader_replicas, r.last_known_elr) for r in parts] == [([2], [3]), ([2], [3])]
