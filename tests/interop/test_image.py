"""Every metadata log the suite produces, loaded by Kafka 4.4's broker loader.

Kafka's ``RecordsIterator`` + ``MetadataRecordSerde`` + ``MetadataBatchLoader`` read the
segment files (CRC checked) into a ``MetadataImage`` with no fault, and that image equals the
mock's own view of the same log: ``client_api.cluster_view`` over a ``ControllerState`` that
replayed it (what ``kraft-jbod status`` prints for a controller started on that log).
Logs: the demo's (``kraft-jbod demo --keep``), random request sequences in the style of the
controller's property tests (both profiles, JBOD levels 17 and 22, and the default level,
where ELR is on), and a 10,000-partition log. The scenario modules load their own controllers' logs the same way
(``broker_ops.check_all_views``).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, Literal

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod.controller import client_api
from kraft_jbod.controller import features as fv
from kraft_jbod.controller.log import MetadataLog, resolve_log_dir
from kraft_jbod.controller.state import ControllerState, RecordAndVersion
from tests.controller.harness import CLUSTER_ID, Cluster, dir_id
from tests.controller.test_state_properties import OPS, SETUPS, _setup, _step
from tests.interop import kafka_view
from tests.interop.harness import InteropJvm


def view_of_log(directory: Path, profile: Literal["kafka", "kip"] = "kafka") -> dict[str, Any]:
    """Our view of a log on disk: a fresh controller state replaying it."""
    state = ControllerState(cluster_id=CLUSTER_ID, node_id=3000, profile=profile)
    log = MetadataLog.open(resolve_log_dir(directory), read_only=True)
    try:
        for offset, record, version in log.replay():
            state.apply(offset, record, version)
    finally:
        log.close()
    return client_api.cluster_view(state)


class RecordingCluster(Cluster):
    """The property tests' in-memory cluster, keeping each request's records as one batch."""

    def __init__(self, **kwargs: Any) -> None:
        self.batches: list[list[RecordAndVersion]] = []
        super().__init__(**kwargs)

    def commit(self, records: list[RecordAndVersion]) -> None:
        if records:
            self.batches.append(list(records))
        super().commit(records)

    def write(self, directory: Path) -> Path:
        log = MetadataLog.open(directory, fsync=False)
        try:
            for i, batch in enumerate(self.batches):
                log.append(batch, timestamp_ms=1_700_000_000_000 + i)
        finally:
            log.close()
        return directory


def load_and_compare(jvm: InteropJvm, directory: Path, view: dict[str, Any], profile: str = "kafka") -> dict[str, Any]:
    loaded = jvm("load_log", dir=str(directory))
    assert loaded["faults"] == [], loaded["faults"]
    # Kafka can write the image as a snapshot at its metadata.version and read it back whole.
    assert loaded["snapshot_losses"] == []
    assert loaded["snapshot_round_trip_equal"] is True
    kafka_view.assert_image_matches_view(loaded["image"], view, profile)
    return loaded


def test_demo_log(interop: InteropJvm, tmp_path: Path) -> None:
    from kraft_jbod.demo.scenario import run

    run(None, tmp_path / "demo", lambda _line: None)
    meta = tmp_path / "demo" / "controller"
    view = view_of_log(meta)
    assert view["metadata_version"] == fv.DEFAULT_LEVEL and len(view["brokers"]) == 3
    loaded = load_and_compare(interop, meta, view)
    assert loaded["records"] > 40 and loaded["control_records"] >= 1
    image = loaded["image"]
    assert len(image["brokers"]) == 3
    # The demo fails one directory: one broker lists a single dir, the others two.
    assert sorted(len(b["directories"]) for b in image["brokers"]) == [1, 2, 2]


@settings(
    max_examples=int(os.environ.get("KRAFT_JBOD_INTEROP_EXAMPLES", "40")),
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    st.lists(OPS, max_size=40),
    SETUPS,
    st.sampled_from([("kafka", 22), ("kafka", 17), ("kip", 22), ("kafka", fv.DEFAULT_LEVEL)]),
)
def test_random_request_sequences(
    interop: InteropJvm, tmp_path_factory: Any, ops: list[tuple[Any, ...]], setup: list[int], how: tuple[str, int]
) -> None:
    profile, level = how
    c = RecordingCluster(level=level, profile=profile)
    _setup(c, setup)
    for op in ops:
        _step(c, op)
    directory = c.write(tmp_path_factory.mktemp("random-log"))
    loaded = load_and_compare(interop, directory, client_api.cluster_view(c.state), profile)
    assert loaded["records"] == c.end_offset


def test_ten_thousand_partitions(interop: InteropJvm, tmp_path: Path) -> None:
    c = RecordingCluster()
    for b in (1, 2, 3, 4):
        c.start_broker(b, [dir_id(b, i) for i in range(2)])
    for t in range(10):
        c.create_topic(f"big-{t}", 1000, 3)
    # Every broker places its replicas, alternating between its two dirs (4 requests each).
    for b in (1, 2, 3, 4):
        by_dir: dict[int, list[tuple[uuid.UUID, int]]] = {0: [], 1: []}
        for topic_id, topic in c.state.topics.items():
            for pid, part in topic.partitions.items():
                if b in part.replicas:
                    by_dir[pid % 2].append((topic_id, pid))
        for i, parts in by_dir.items():
            out = c.assign(b, dir_id(b, i), parts)
            assert out.response.error_code == 0  # type: ignore[attr-defined]
    view = client_api.cluster_view(c.state)
    assert sum(len(t["partitions"]) for t in view["topics"]) == 10_000
    assert all(d != "UNASSIGNED" for t in view["topics"] for p in t["partitions"] for d in p["directories"])
    loaded = load_and_compare(interop, c.write(tmp_path / "big"), view)
    assert sum(len(t["partitions"]) for t in loaded["image"]["topics"]) == 10_000


def test_a_corrupt_log_is_reported_not_loaded(interop: InteropJvm, tmp_path: Path) -> None:
    """The loader path is a real check: a flipped byte inside a batch fails Kafka's CRC."""
    c = RecordingCluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.create_topic("t", 2, 1)
    directory = c.write(tmp_path / "bad")
    segment = next(resolve_log_dir(directory).glob("*.log"))
    raw = bytearray(segment.read_bytes())
    raw[-5] ^= 0xFF
    segment.write_bytes(bytes(raw))
    reply = interop.raw("load_log", dir=str(directory))
    assert reply["ok"] is False
    assert "CorruptRecord" in reply["error"] or "crc" in reply["error"].lower(), reply["error"]


def test_a_metadata_version_change_in_the_log(interop: InteropJvm, tmp_path: Path) -> None:
    """A FeatureLevelRecord raising metadata.version mid-log (what an upgrade writes): Kafka's
    loader switches level and keeps every broker and partition; our replay agrees."""
    from kraft_jbod.messages.feature_level_record import FeatureLevelRecord

    c = RecordingCluster(level=17)
    for b in (1, 2):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1)])
    c.create_topic("before", 3, 2)
    c.commit([(FeatureLevelRecord(name="metadata.version", feature_level=22), 0)])
    c.create_topic("after", 3, 2)
    view = client_api.cluster_view(c.state)
    assert view["metadata_version"] == 22
    loaded = load_and_compare(interop, c.write(tmp_path / "upgrade"), view)
    assert loaded["image"]["features"]["metadata.version.name"] == "4.0-IV0"
    assert [t["name"] for t in loaded["image"]["topics"]] == ["after", "before"]


def test_elr_fencing_unfencing_and_clear_elr(interop: InteropJvm, tmp_path: Path) -> None:
    """A log with eligible.leader.replicas.version 1: fencing fills the ELR down to an empty
    ISR, unfencing elects from it, a min.insync.replicas change writes ClearElrRecord; Kafka's
    image of that log has the same ISR, ELR and last-known ELR as our status view."""
    from kraft_jbod.messages.config_record import ConfigRecord
    from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
    from kraft_jbod.messages.incremental_alter_configs_request import (
        AlterableConfig,
        AlterConfigsResource,
        IncrementalAlterConfigsRequest,
    )

    c = RecordingCluster()
    for b in (1, 2, 3, 4):
        c.start_broker(b, [dir_id(b, 0)])
    c.commit(
        [
            (FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0),
            (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="3"), 0),
        ]
    )
    c.create_topic("t", 4, 3)
    c.create_topic("u", 2, 3)
    for b in (3, 1, 2):
        c.heartbeat(b, want_fence=True)
    mid = client_api.cluster_view(c.state)
    assert any(p["elr"] for t in mid["topics"] for p in t["partitions"])
    assert any(p["last_known_elr"] for t in mid["topics"] for p in t["partitions"])
    load_and_compare(interop, c.write(tmp_path / "fenced"), mid)
    c.heartbeat(1)
    req = IncrementalAlterConfigsRequest(
        resources=[AlterConfigsResource(2, "u", [AlterableConfig("min.insync.replicas", 0, "2")])]
    )
    c.call(44, 1, req)
    view = client_api.cluster_view(c.state)
    assert all(not p["elr"] for t in view["topics"] if t["name"] == "u" for p in t["partitions"])
    load_and_compare(interop, c.write(tmp_path / "after"), view)
