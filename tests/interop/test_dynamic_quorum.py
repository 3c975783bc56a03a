"""Kafka 4.4's broker with ``controller.quorum.bootstrap.servers`` only, against a controller
bootstrapped at kraft.version 1 (``kraft-jbod controller --standalone``).

Kafka's ``KafkaRaftClient`` observer is given no static voters: it sends its first Fetch to
the bootstrap server, learns the leader from the answer, reads our KRaftVersionRecord and
VotersRecord from the log, and its ``BrokerLifecycleManager`` finds the controller through
the raft client's voter set (``voterNode``), as a broker's controller node provider does.
The scenario ends with the same checks as every other: Kafka's images equal our status,
Kafka's loader reads our log without fault, no WARN or ERROR line (but the benign ones
listed by exact text in kafka_logs.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller.log import MetadataLog, decode_control_record
from kraft_jbod.storage.meta import read_meta_properties
from kraft_jbod.wire.records import ControlRecordType
from tests.interop import kafka_logs, kafka_view
from tests.interop.broker_ops import check_all_views, create_topic, exchanges, start_java_broker, wait_synced
from tests.interop.harness import CONTROLLER_ID, ControllerThread, InteropJvm, kafka_uuid

Factory = Callable[..., ControllerThread]


def control_records(ctl: ControllerThread) -> list[tuple[int, str, object]]:
    """(offset, control type name, message) of every control record in the controller's log."""

    def read() -> list[tuple[int, str, object]]:
        out = []
        with MetadataLog.open(ctl.server.config.metadata_partition_dir, read_only=True) as mlog:
            for info, batch in mlog.iter_batches():
                if info.is_control:
                    for rec in batch.records:
                        ctype, msg = decode_control_record(rec)
                        out.append((info.base_offset + rec.offset_delta, ControlRecordType(ctype).name, msg))
        return out

    return ctl.call(read)


def test_bootstrap_servers_only_broker_learns_voters_registers_and_unfences(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    ctl = controller_factory(kraft_version=1)
    # The log starts as Kafka's first leader epoch at kraft.version 1 starts it.
    first = control_records(ctl)[:3]
    assert [(o, t) for o, t, _ in first] == [(0, "LEADER_CHANGE"), (1, "KRAFT_VERSION"), (2, "KRAFT_VOTERS")]
    meta = read_meta_properties(ctl.metadata_dir)
    assert meta is not None and meta.directory_id is not None
    voters_record = first[2][2]
    (voter,) = voters_record.voters  # type: ignore[attr-defined]
    assert voter.voter_id == CONTROLLER_ID and voter.voter_directory_id == meta.directory_id
    assert [(e.name, e.host, e.port) for e in voter.endpoints] == [("CONTROLLER", "127.0.0.1", ctl.port)]

    start_java_broker(interop, ctl, tmp_path, 1, 2, bootstrap_servers=ctl.bootstrap_servers)
    state = interop("broker", broker=1)
    assert state["state"] == "RUNNING" and state["unfenced"] == "done"
    # Kafka's raft client took kraft.version and the leader's endpoint from our log.
    assert state["kraft_version"] == 1
    assert state["leader"] == CONTROLLER_ID
    assert state["leader_voter_node"] == f"127.0.0.1:{ctl.port}"
    assert state["faults"] == 0
    reg = exchanges(interop, 1, "BrokerRegistration")
    assert [r["response"]["errorCode"] for r in reg] == [0]
    # The broker supports kraft.version 0-1; the registration check saw the live level 1.
    kraft = [f for f in reg[0]["request"]["features"] if f["name"] == "kraft.version"]
    assert kraft == [{"name": "kraft.version", "minSupportedVersion": 0, "maxSupportedVersion": 1}]

    create_topic(ctl, "dyn", 3, 1)
    wait_synced(interop, ctl, 1)
    loaded = check_all_views(interop, ctl, 1)
    # Kafka's loader counted our three control records of the first batch (and the rest).
    assert loaded["control_records"] == len(control_records(ctl))

    # A restart on the same port: a new epoch, a LeaderChangeMessage only (the voter set in
    # the log is still right), and the broker follows.
    ctl.restart()
    after = control_records(ctl)
    assert [t for _, t, _ in after] == ["LEADER_CHANGE", "KRAFT_VERSION", "KRAFT_VOTERS", "LEADER_CHANGE"]
    interop("wait", broker=1, until="offset", offset=ctl.end_offset() - 1, timeout_ms=20000)
    assert interop("broker", broker=1)["leader_epoch"] == ctl.server.log.leader_epoch  # type: ignore[union-attr]
    check_all_views(interop, ctl, 1)
    interop("stop_broker", broker=1)


def test_static_voters_broker_against_kraft_version_1_controller(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    # A broker with static voters still works against a dynamic quorum (Kafka allows it: the
    # voters config is then its bootstrap), and sees kraft.version 1 in the log.
    ctl = controller_factory(kraft_version=1)
    start_java_broker(interop, ctl, tmp_path, 1, 1)
    state = interop("broker", broker=1)
    assert state["state"] == "RUNNING" and state["kraft_version"] == 1
    check_all_views(interop, ctl, 1)
    interop("stop_broker", broker=1)


def test_kraft_version_0_log_has_no_voter_records(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    ctl = controller_factory()
    assert {t for _, t, _ in control_records(ctl)} == {"LEADER_CHANGE"}
    start_java_broker(interop, ctl, tmp_path, 1, 1)
    assert interop("broker", broker=1)["kraft_version"] == 0
    check_all_views(interop, ctl, 1)
    interop("stop_broker", broker=1)


def kafka_quorum_state(interop: InteropJvm, ctl: ControllerThread, tmp_path: Path) -> dict[str, Any]:
    """kraft.version and voters as Kafka's raft client reads a copy of the controller's log dir."""
    copy = tmp_path / f"copy-{len(list(tmp_path.glob('copy-*')))}" / "__cluster_metadata-0"
    ctl.call(
        lambda: shutil.copytree(ctl.server.config.metadata_partition_dir, copy, ignore=shutil.ignore_patterns(".lock"))
    )
    return interop("quorum_state", dir=str(copy), node=CONTROLLER_ID)


def test_kafka_raft_log_reads_our_voter_set_from_log_and_snapshot(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    ctl = controller_factory(kraft_version=1, props={"metadata.log.max.record.bytes.between.snapshots": "1"})
    meta = read_meta_properties(ctl.metadata_dir)
    assert meta is not None and meta.directory_id is not None
    expected = [
        {"id": CONTROLLER_ID, "directory": kafka_uuid(meta.directory_id), "controller": f"127.0.0.1:{ctl.port}"}
    ]
    # From the log: the VotersRecord of the first control batch (offset 2).
    state = kafka_quorum_state(interop, ctl, tmp_path)
    assert (state["kraft_version"], state["voters"], state["last_voter_set_offset"]) == (1, expected, 2)
    assert "latest_snapshot" not in state
    # The broker's registration batch makes a snapshot due (1-byte budget); Kafka's state
    # machine then starts from the snapshot and takes the voter set from its header batch.
    start_java_broker(interop, ctl, tmp_path, 1, 1, bootstrap_servers=ctl.bootstrap_servers)
    sids = snap.list_snapshots(ctl.server.config.metadata_partition_dir)
    assert sids, "a snapshot was written"
    state = kafka_quorum_state(interop, ctl, tmp_path)
    latest = max(sids)
    assert state["latest_snapshot"].startswith(f"{latest.end_offset}-")
    assert (state["kraft_version"], state["voters"]) == (1, expected)
    assert state["last_voter_set_offset"] >= latest.end_offset - 1 > 2
    # The live broker (which may have started from a FetchSnapshot) matches our view, with no
    # WARN/ERROR; the log-only loader of check_all_views would miss what the snapshot replaced.
    assert kafka_logs.problems(interop.log_lines()) == []
    wait_synced(interop, ctl, 1)
    kafka_view.assert_image_matches_view(interop("image", broker=1)["image"], ctl.view(), "kafka")
    interop("stop_broker", broker=1)


def test_kafka_admin_describe_quorum_reports_the_voter_set(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    for kraft_version in (1, 0):
        ctl = controller_factory(kraft_version=kraft_version)
        meta = read_meta_properties(ctl.metadata_dir)
        assert meta is not None and meta.directory_id is not None
        out = interop("describe_quorum", bootstrap_controllers=ctl.bootstrap_servers)
        assert (out["leader"], out["epoch"]) == (CONTROLLER_ID, ctl.server.log.leader_epoch)  # type: ignore[union-attr]
        # kraft.version 1: the VotersRecord's directory id; 0: a static voter has none (zero).
        directory = kafka_uuid(meta.directory_id) if kraft_version else "AAAAAAAAAAAAAAAAAAAAAA"
        assert out["voters"] == [{"id": CONTROLLER_ID, "directory": directory}]
        assert out["nodes"] == {str(CONTROLLER_ID): [f"CONTROLLER://127.0.0.1:{ctl.port}"]}
        ctl.stop()  # the factory closes its loop at teardown
