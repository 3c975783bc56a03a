"""kraft.version 1 (KIP-853): how it is chosen, the voter records the log starts with, what
restarts and snapshots keep, and what ApiVersions, DescribeQuorum and UpdateFeatures say.

Kafka 4.4 is the reference (Formatter.effectiveKRaftFeatureLevel, LeaderState's start-of-epoch
control batch, VoterSet.toVotersRecord); tests/interop/test_dynamic_quorum.py runs Kafka's own
observer against the same controller.
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.controller import commands, voters
from kraft_jbod.controller import snapshot as snap
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest
from kraft_jbod.messages.describe_quorum_request import PartitionData as QuorumPartition
from kraft_jbod.messages.describe_quorum_request import TopicData as QuorumTopic
from kraft_jbod.messages.k_raft_version_record import KRaftVersionRecord
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kraft_jbod.messages.voters_record import VotersRecord
from kraft_jbod.pytest_plugin import KafkaConnection
from kraft_jbod.storage.meta import read_meta_properties
from kraft_jbod.wire.primitives import uuid_to_base64url as kafka_uuid
from kraft_jbod.wire.records import ControlRecordType

NODE = 3000


def config(tmp_path: Path, port: int = 0, **extra: str) -> ControllerConfig:
    return ControllerConfig.from_properties(
        {
            "node.id": str(NODE),
            "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(tmp_path / "meta"),
            **extra,
        }
    )


def control_types(cfg: ControllerConfig) -> list[tuple[int, str, Any]]:
    with MetadataLog.open(cfg.metadata_partition_dir, read_only=True) as mlog:
        return [(o, ControlRecordType(t).name, m) for o, t, m in mlog.control_records()]


async def call(server: ControllerServer, body: Any, version: int) -> Any:
    conn = await KafkaConnection.open(server.addresses[0], client_id="kraft-version-test")
    try:
        return await conn.call(body, version)
    finally:
        await conn.close()


# ----------------------------------------------------------------------------- the choice


@pytest.mark.parametrize(
    ("static", "standalone", "requested", "expected"),
    [
        (False, False, None, 0),  # nothing asked: Kafka keeps kraft.version 0
        (True, False, None, 0),
        (False, True, None, 1),  # --standalone: a dynamic quorum
        (False, True, 1, 1),
        (True, False, 0, 0),
        (False, False, 0, 0),
    ],
)
def test_choose_kraft_version(static: bool, standalone: bool, requested: int | None, expected: int) -> None:
    assert voters.choose_kraft_version(static_voters=static, standalone=standalone, requested=requested) == expected


@pytest.mark.parametrize(
    ("static", "standalone", "requested", "words"),
    [
        (True, True, None, "remove controller.quorum.voters"),
        (False, True, 0, "contradicts --standalone"),
        (False, False, 1, "add --standalone"),
        (True, False, 1, "add --standalone"),
        (False, True, 2, "supports 0-1"),
    ],
)
def test_choose_kraft_version_refuses_what_kafka_refuses(
    static: bool, standalone: bool, requested: int | None, words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        voters.choose_kraft_version(static_voters=static, standalone=standalone, requested=requested)


def test_cli_feature_and_bootstrap_checks(tmp_path: Path) -> None:
    plain = config(tmp_path)
    assert commands._kraft_version(plain, True, ["kraft.version=1"]) == 1
    for bad, words in [
        ("group.version=1", "only kraft.version"),
        ("metadata.version=30", "--metadata-version"),
        ("kraft.version", "NAME=LEVEL"),
        ("kraft.version=x", "NAME=LEVEL"),
    ]:
        with pytest.raises(ConfigError, match=words):
            commands._kraft_version(plain, True, [bad])
    dyn = config(tmp_path, **{"controller.quorum.bootstrap.servers": "127.0.0.1:9093"})
    with pytest.raises(ConfigError, match="needs --standalone"):
        commands._kraft_version(dyn, False, [])
    assert commands._kraft_version(dyn, True, []) == 1
    static = config(tmp_path, **{"controller.quorum.voters": f"{NODE}@127.0.0.1:9093"})
    with pytest.raises(ConfigError, match=r"remove controller\.quorum\.voters"):
        commands._kraft_version(static, True, [])


def test_cli_standalone_with_voters_exits_2_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kraft_jbod import cli

    props = tmp_path / "c.properties"
    props.write_text(
        f"node.id={NODE}\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={tmp_path / 'meta'}\n"
        f"controller.quorum.voters={NODE}@127.0.0.1:9093\n"
    )
    assert cli.main(["controller", "--config", str(props), "--standalone"]) == 2
    assert "controller.quorum.voters" in capsys.readouterr().err
    assert not (tmp_path / "meta").exists()


def test_controller_config_quorum_keys(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        **{
            "controller.quorum.voters": f"{NODE}@[::1]:9093",
            "controller.quorum.bootstrap.servers": "a:1, b:2",
        },
    )
    assert cfg.quorum_voters == {NODE: ("::1", 9093)}
    assert cfg.bootstrap_servers == [("a", 1), ("b", 2)]
    for key, value, words in [
        ("controller.quorum.voters", "1@h:9093", "does not name node.id"),
        ("controller.quorum.voters", f"{NODE}@h", "ID@HOST:PORT"),
        ("controller.quorum.voters", f"{NODE}@h:1,{NODE}@h:2", "listed twice"),
        ("controller.quorum.bootstrap.servers", "h", "HOST:PORT"),
        ("controller.quorum.bootstrap.servers", "h:0", "HOST:PORT"),
    ]:
        with pytest.raises(ConfigError, match=words):
            config(tmp_path, **{key: value})


# ----------------------------------------------------------------------------- the log


async def test_kraft_version_1_log_restart_snapshot_and_apis(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    server = ControllerServer(cfg, fsync=False, kraft_version=1)
    await server.start()
    port = server.addresses[0][1]
    meta = read_meta_properties(cfg.metadata_log_dir)
    assert meta is not None and meta.directory_id is not None
    try:
        assert server.state.kraft_version == 1
        api = await call(server, ApiVersionsRequest("t", "1"), 3)
        assert {f.name: f.max_version_level for f in api.finalized_features}["kraft.version"] == 1
        assert {f.name: (f.min_version, f.max_version) for f in api.supported_features}["kraft.version"] == (0, 1)
        req = DescribeQuorumRequest(topics=[QuorumTopic("__cluster_metadata", [QuorumPartition(0)])])
        dq = await call(server, req, 2)
        (voter,) = dq.topics[0].partitions[0].current_voters
        assert (voter.replica_id, voter.replica_directory_id) == (NODE, meta.directory_id)
        assert [(n.node_id, [(x.name, x.host, x.port) for x in n.listeners]) for n in dq.nodes] == [
            (NODE, [("CONTROLLER", "127.0.0.1", port)])
        ]
        # kraft.version is fixed when the log is made: another level is refused, the same is a no-op.
        down = UpdateFeaturesRequest(
            timeout_ms=1000, feature_updates=[FeatureUpdateKey("kraft.version", 0, upgrade_type=2)]
        )
        refused = await call(server, down, 1)
        assert refused.error_code == 95  # INVALID_UPDATE_VERSION, for the whole request
        assert "Can't downgrade the version of this feature." in (refused.error_message or "")
        same = await call(
            server, UpdateFeaturesRequest(timeout_ms=1000, feature_updates=[FeatureUpdateKey("kraft.version", 1)]), 1
        )
        assert same.error_code == 0 and [r.error_code for r in same.results] == [0]
    finally:
        await server.close()
    first = control_types(cfg)
    assert [(o, t) for o, t, _ in first] == [(0, "LEADER_CHANGE"), (1, "KRAFT_VERSION"), (2, "KRAFT_VOTERS")]
    assert isinstance(first[1][2], KRaftVersionRecord) and first[1][2].k_raft_version == 1
    vr = first[2][2]
    assert isinstance(vr, VotersRecord)
    assert [(v.voter_id, v.voter_directory_id) for v in vr.voters] == [(NODE, meta.directory_id)]
    assert [(e.name, e.host, e.port) for e in vr.voters[0].endpoints] == [("CONTROLLER", "127.0.0.1", port)]
    kf = vr.voters[0].k_raft_version_feature
    assert (kf.min_supported_version, kf.max_supported_version) == (0, 1)
    # The feature records stay as before: kraft.version is never a FeatureLevelRecord.
    with MetadataLog.open(cfg.metadata_partition_dir, read_only=True) as mlog:
        names = [r.name for _, r, _ in mlog.replay() if type(r).__name__ == "FeatureLevelRecord"]
    assert "kraft.version" not in names and names[0] == "metadata.version"

    # Restart on the same port (asked for kraft.version 0 now: the log's level wins): the voter
    # set in the log is still right, so the new epoch starts with a LeaderChangeMessage only.
    again = ControllerServer(config(tmp_path, port), fsync=False, kraft_version=0)
    await again.start()
    assert again.state.kraft_version == 1 and again.state.voters == vr
    await again.close()
    assert [t for _, t, _ in control_types(cfg)][3:] == ["LEADER_CHANGE"]

    # Restart on another port, snapshotting after every batch: a new VotersRecord with the new
    # endpoint, and the snapshot carries kraft.version 1 and that voter set.
    moved = ControllerServer(config(tmp_path, **{"metadata.log.max.record.bytes.between.snapshots": "1"}), fsync=False)
    await moved.start()
    new_port = moved.addresses[0][1]
    assert new_port != port
    moved_voters = moved.state.voters
    assert voters.endpoints_of(moved_voters, NODE) == (("CONTROLLER", "127.0.0.1", new_port),)
    assert moved_voters != vr  # rewritten for the new port
    try:
        await moved._commit([(NoOpRecord(), 0)])  # any batch: with a 1-byte budget a snapshot is due
    finally:
        await moved.close()
    (sid,) = snap.list_snapshots(cfg.metadata_partition_dir)
    contents = snap.read_snapshot(cfg.metadata_partition_dir / sid.file_name)
    assert contents.kraft_version == 1 and contents.voters == moved_voters

    # A restart replays the log only after the snapshot, whose end is past every voter record
    # (the segments below it may be gone): kraft.version and the voter set come from the
    # snapshot's header batch.
    with MetadataLog.open(cfg.metadata_partition_dir, read_only=True) as mlog:
        assert all(t != ControlRecordType.KRAFT_VOTERS for _, t, _ in mlog.control_records(sid.end_offset))
    last = ControllerServer(config(tmp_path, new_port), fsync=False)
    await last.start()
    try:
        assert last.snapshots.latest == (sid.end_offset, sid.epoch)
        assert last.state.kraft_version == 1 and last.state.voters == moved_voters
        assert [t for _, t, _ in control_types(cfg)][-1] == "LEADER_CHANGE"  # same port: no new voter set
    finally:
        await last.close()


async def test_kraft_version_0_log_and_describe_quorum(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    server = ControllerServer(cfg, fsync=False)
    await server.start()
    try:
        assert server.state.kraft_version == 0 and server.state.voters is None
        api = await call(server, ApiVersionsRequest("t", "1"), 3)
        assert "kraft.version" not in {f.name for f in api.finalized_features}
        req = DescribeQuorumRequest(topics=[QuorumTopic("__cluster_metadata", [QuorumPartition(0)])])
        dq = await call(server, req, 2)
        # A static voter has no directory id (Kafka's static voter set: zero).
        assert dq.topics[0].partitions[0].current_voters[0].replica_directory_id == uuid.UUID(int=0)
        up = UpdateFeaturesRequest(timeout_ms=1000, feature_updates=[FeatureUpdateKey("kraft.version", 1)])
        upgrade = await call(server, up, 1)
        # Kafka 4.4 would upgrade a static quorum here; this controller refuses (divergences.md).
        assert upgrade.error_code == 95 and "does not change kraft.version" in (upgrade.error_message or "")
    finally:
        await server.close()
    assert {t for _, t, _ in control_types(cfg)} == {"LEADER_CHANGE"}


def test_voter_set_without_this_controller_is_refused() -> None:
    other = VotersRecord(version=0, voters=[voters.LocalVoter(7, uuid.uuid4(), (("CONTROLLER", "h", 1),)).voter()])
    state = voters.QuorumState(kraft_version=1, voters=other, recorded=True)
    with pytest.raises(ConfigError, match="does not contain this controller"):
        voters.start_of_epoch_records(state, voters.LocalVoter(NODE, uuid.uuid4(), (("CONTROLLER", "h", 1),)))


def test_cli_namespace_has_the_new_options() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    commands.register(sub)
    args = parser.parse_args(["controller", "--config", "x", "--standalone", "--feature", "kraft.version=1"])
    assert args.standalone is True and args.feature == ["kraft.version=1"]


# ----------------------------------------------------------------------------- voter changes


@pytest.mark.parametrize("kraft_version", [0, 1])
async def test_raft_voter_apis_answer_with_kafkas_errors(tmp_path: Path, kraft_version: int) -> None:
    from kraft_jbod.messages.add_raft_voter_request import AddRaftVoterRequest
    from kraft_jbod.messages.add_raft_voter_request import Listener as AddListener
    from kraft_jbod.messages.remove_raft_voter_request import RemoveRaftVoterRequest
    from kraft_jbod.messages.update_raft_voter_request import UpdateRaftVoterRequest

    server = ControllerServer(config(tmp_path), fsync=False, kraft_version=kraft_version)
    await server.start()
    conn = await KafkaConnection.open(server.addresses[0], client_id="voter-changes")
    try:
        cid, epoch = server.cluster_id, server.log.leader_epoch  # type: ignore[union-attr]
        mine = server.state.voters.voters[0].voter_directory_id if kraft_version else uuid.UUID(int=0)
        keys = {
            k.api_key: (k.min_version, k.max_version)
            for k in (await conn.call(ApiVersionsRequest("t", "1"), 3)).api_keys
        }
        assert (keys[80], keys[81], keys[82]) == ((0, 1), (0, 0), (0, 0))  # Kafka 4.4's controller ranges
        listener = [AddListener(name="CONTROLLER", host="h", port=1)]

        async def add(voter: int, directory: uuid.UUID, cluster: str | None = cid) -> Any:
            req = AddRaftVoterRequest(
                cluster_id=cluster, timeout_ms=100, voter_id=voter, voter_directory_id=directory, listeners=listener
            )
            return await conn.call(req, 1)

        assert (await add(7, uuid.uuid4(), "other-cluster")).error_code == 104  # INCONSISTENT_CLUSTER_ID
        assert (await add(7, uuid.UUID(int=0))).error_code == 42  # INVALID_REQUEST: no directory id
        removed = await conn.call(RemoveRaftVoterRequest(cluster_id=cid, voter_id=NODE, voter_directory_id=mine), 0)
        stale = UpdateRaftVoterRequest(
            cluster_id=cid, current_leader_epoch=epoch - 1, voter_id=NODE, voter_directory_id=mine
        )
        assert (await conn.call(stale, 0)).error_code == 74  # FENCED_LEADER_EPOCH
        stranger = UpdateRaftVoterRequest(
            cluster_id=cid, current_leader_epoch=epoch, voter_id=9, voter_directory_id=uuid.uuid4()
        )
        answer = await conn.call(stranger, 0)
        assert answer.error_code == 127  # VOTER_NOT_FOUND
        assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (NODE, epoch)
        new_voter = await add(7, uuid.uuid4())
        if kraft_version == 0:
            # Kafka's answer for a static quorum; the connection stays open.
            assert new_voter.error_code == removed.error_code == 35
            assert "kraft.version feature is 0" in (removed.error_message or "")
        else:
            assert removed.error_code == 127  # the only voter: Kafka's VoterSet never empties
            assert (await add(NODE, uuid.uuid4())).error_code == 126  # DUPLICATE_VOTER
            assert new_voter.error_code == 35 and "single-voter" in (new_voter.error_message or "")
        assert (await conn.call(ApiVersionsRequest("t", "1"), 3)).error_code == 0
    finally:
        await conn.close()
        await server.close()


def test_listener_endpoints_one_per_controller_listener_name() -> None:
    import socket

    bound = [("CONTROLLER", "0.0.0.0", 9093), ("CONTROLLER", "::", 9093), ("SECOND", "127.0.0.2", 9094)]
    got = voters.listener_endpoints(["SECOND", "CONTROLLER", "UNBOUND"], bound, {"CONTROLLER": "", "SECOND": "h2"})
    # listeners order of controller.listener.names; a wildcard is advertised by the machine's name
    assert got == (("SECOND", "h2", 9094), ("CONTROLLER", socket.getfqdn(), 9093))


async def test_log_dump_shows_the_voter_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from kraft_jbod import cli

    cfg = config(tmp_path)
    server = ControllerServer(cfg, fsync=False, kraft_version=1)
    await server.start()
    directory = server.state.voters.voters[0].voter_directory_id
    await server.close()
    capsys.readouterr()
    assert cli.main(["log", "dump", str(cfg.metadata_log_dir)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r.get("control") for r in rows[:3]] == ["LEADER_CHANGE", "KRAFT_VERSION", "KRAFT_VOTERS"]
    assert rows[1]["data"]["kRaftVersion"] == 1
    (voter,) = rows[2]["data"]["voters"]
    assert voter["voterId"] == NODE and voter["voterDirectoryId"] == kafka_uuid(directory)
    assert rows[3]["type"] == "FeatureLevelRecord" and rows[3]["data"]["name"] == "metadata.version"
