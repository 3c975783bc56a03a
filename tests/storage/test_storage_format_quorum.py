"""``kraft-jbod storage format --initial-controllers`` / ``--no-initial-controllers``: every
refusal leaves nothing on disk, a formatted dir holds the listed directory id and the same
bootstrap voter set the controller command writes, a second format keeps the first, and a
controller started afterwards on that dir, with no flags, leads a kraft.version 1 quorum."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from kraft_jbod import cli
from kraft_jbod.controller.raft.seat import read_bootstrap_voters
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from kraft_jbod.storage.meta import read_meta_properties
from kraft_jbod.testing.cluster import KafkaConnection
from kraft_jbod.wire.primitives import uuid_to_base64url

CLUSTER = "41QSStLtR3qOekbX4ZlbHA"
_DIR_1 = uuid.UUID("8f0c2a4e-6d1b-4b7a-9a55-2f5b8c1d3e71")
_DIR_2 = uuid.UUID("3c9d7e21-0a4b-4f6e-8d2c-5b1a9e7f6c04")
_BOOTSTRAP = "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"


def _props(tmp_path: Path, port: int = 9093, extra: str = _BOOTSTRAP, roles: str = "controller") -> Path:
    path = tmp_path / "c1.properties"
    path.write_text(
        f"node.id=1\nprocess.roles={roles}\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={tmp_path / 'meta'}\n"
        f"log.dirs={tmp_path / 'd1'}\n{extra}"
    )
    return path


def _listed(port: int = 9093) -> str:
    return f"1@127.0.0.1:{port}:{uuid_to_base64url(_DIR_1)},2@127.0.0.1:9094:{uuid_to_base64url(_DIR_2)}"


def _format(props: Path, *flags: str) -> int:
    return cli.main(["storage", "format", "-c", str(props), "--cluster-id", CLUSTER, *flags])


@pytest.mark.parametrize(
    ("flags", "extra"),
    [
        (["--initial-controllers", "1@127.0.0.1:9093"], _BOOTSTRAP),  # no directory id
        (["--initial-controllers", "x@127.0.0.1:9093:" + uuid_to_base64url(_DIR_1)], _BOOTSTRAP),
        (["--initial-controllers", ","], _BOOTSTRAP),  # names no controller
        (["--initial-controllers", f"{_listed()},1@h:1:{uuid_to_base64url(_DIR_2)}"], _BOOTSTRAP),  # node 1 twice
        (["--initial-controllers", _listed(), "--no-initial-controllers"], _BOOTSTRAP),
        (["--initial-controllers", _listed()], "controller.quorum.voters=1@127.0.0.1:9093\n"),
        (["--no-initial-controllers"], "controller.quorum.voters=1@127.0.0.1:9093\n"),
    ],
)
def test_every_refusal_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], extra: str
) -> None:
    assert _format(_props(tmp_path, extra=extra), *flags) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "initial-controllers" in err, err
    assert not (tmp_path / "meta").exists() and not (tmp_path / "d1").exists()


def test_a_bad_cluster_id_or_a_broker_config_writes_nothing(tmp_path: Path) -> None:
    props = _props(tmp_path)
    assert cli.main(["storage", "format", "-c", str(props), "--cluster-id", "nope", "-I", _listed()]) == 2
    # The flags format a controller's metadata dir: a broker-only config is refused.
    broker = _props(tmp_path, roles="broker", extra=_BOOTSTRAP + "controller.listener.names=CONTROLLER\n")
    assert _format(broker, "--no-initial-controllers") == 2
    assert not (tmp_path / "meta").exists() and not (tmp_path / "d1").exists()


def test_a_listed_id_already_on_a_log_dir_is_refused_before_writing(tmp_path: Path) -> None:
    d1 = tmp_path / "d1"
    d1.mkdir()
    (d1 / "meta.properties").write_text(
        f"node.id=1\nversion=1\ncluster.id={CLUSTER}\ndirectory.id={uuid_to_base64url(_DIR_1)}\n"
    )
    assert _format(_props(tmp_path), "--initial-controllers", _listed()) == 2
    assert not (tmp_path / "meta").exists()


def test_format_writes_the_listed_id_and_the_voter_set_and_a_second_format_keeps_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    props = _props(tmp_path)
    assert _format(props, "--initial-controllers", _listed()) == 0
    out = capsys.readouterr().out
    assert "voter set 1, 2 (kraft.version 1)" in out, out
    meta = read_meta_properties(tmp_path / "meta")
    assert meta is not None and meta.directory_id == _DIR_1 and meta.cluster_id == CLUSTER
    data = read_meta_properties(tmp_path / "d1")
    assert data is not None and data.directory_id not in (None, _DIR_1)
    record = read_bootstrap_voters(tmp_path / "meta")
    assert record is not None
    assert [(v.voter_id, v.voter_directory_id) for v in record.voters] == [(1, _DIR_1), (2, _DIR_2)]
    assert [(e.name, e.host, e.port) for e in record.voters[1].endpoints] == [("CONTROLLER", "127.0.0.1", 9094)]
    voters_file = tmp_path / "meta" / "quorum" / "bootstrap-voters"
    written = voters_file.read_bytes()
    # Again, with the same or other flags: the tool keeps formatted dirs as they are.
    assert _format(props, "--no-initial-controllers") == 0
    assert _format(props) == 0
    assert "kept" in capsys.readouterr().out
    assert read_meta_properties(tmp_path / "meta") == meta
    assert read_meta_properties(tmp_path / "d1") == data
    assert voters_file.read_bytes() == written


def test_a_dir_formatted_without_a_voter_set_refuses_the_flags(tmp_path: Path) -> None:
    props = _props(tmp_path)
    assert _format(props) == 0
    before = sorted(p.name for p in (tmp_path / "meta").iterdir())
    assert _format(props, "--initial-controllers", _listed()) == 2
    assert sorted(p.name for p in (tmp_path / "meta").iterdir()) == before
    assert read_bootstrap_voters(tmp_path / "meta") is None


def test_no_initial_controllers_formats_an_empty_voter_set_with_a_fresh_id(tmp_path: Path) -> None:
    assert _format(_props(tmp_path), "-N") == 0
    record = read_bootstrap_voters(tmp_path / "meta")
    assert record is not None and record.voters == []
    meta = read_meta_properties(tmp_path / "meta")
    assert meta is not None and meta.directory_id not in (None, _DIR_1, _DIR_2)


def test_a_controller_on_the_formatted_dir_refuses_kraft_version_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    props = _props(tmp_path)
    assert _format(props, "--initial-controllers", _listed()) == 0
    before = sorted(p.name for p in (tmp_path / "meta").iterdir())
    assert cli.main(["controller", "--config", str(props), "--feature", "kraft.version=0"]) == 2
    assert "formatted with a voter set" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "meta").iterdir()) == before  # no log started


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.asyncio
async def test_a_controller_started_on_the_formatted_dir_without_flags_runs_at_kraft_version_1(
    tmp_path: Path,
) -> None:
    port = _free_port()
    props = _props(tmp_path, port, extra=f"controller.quorum.bootstrap.servers=127.0.0.1:{port}\n")
    listed = f"1@127.0.0.1:{port}:{uuid_to_base64url(_DIR_1)}"
    assert _format(props, "--initial-controllers", listed) == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "kraft_jbod.cli", "controller", "--config", str(props), "--no-fsync"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.strip() == f"listening on CONTROLLER 127.0.0.1:{port}", (line, proc.stderr and proc.stderr.read())
        request = DescribeQuorumRequest(
            topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]
        )
        deadline = time.monotonic() + 60  # a loaded machine
        while True:
            conn = await KafkaConnection.open(("127.0.0.1", port), client_id="admin")
            try:
                part = (await conn.call(request, 2)).topics[0].partitions[0]
                features = (await conn.call(ApiVersionsRequest("t", "1"), 3)).finalized_features
            finally:
                await conn.close()
            finalized = {f.name: f.max_version_level for f in features}
            if part.leader_id == 1 and "metadata.version" in finalized:
                break  # elected, and the metadata log's bootstrap records are in
            assert time.monotonic() < deadline, f"no leader or no metadata.version: {part}, {finalized}"
            await asyncio.sleep(0.1)
        assert {v.replica_id: v.replica_directory_id for v in part.current_voters} == {1: _DIR_1}
        assert finalized.get("kraft.version") == 1
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 30)
