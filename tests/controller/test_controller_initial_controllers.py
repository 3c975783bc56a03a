"""``kraft-jbod controller --initial-controllers`` / ``--no-initial-controllers``: what a
refusal leaves (nothing), what a new log is formatted with (meta.properties' directory id, the
bootstrap voter set), and three controllers formatted this way forming a kraft.version 1
quorum that a fourth, formatted with no voter set, joins by itself (auto-join)."""

from __future__ import annotations

import argparse
import asyncio
import socket
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod import cli
from kraft_jbod.controller import commands
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.raft.node import Timing
from kraft_jbod.controller.raft.seat import QuorumSeat, read_bootstrap_voters
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from kraft_jbod.storage.meta import read_meta_properties
from kraft_jbod.testing.cluster import KafkaConnection
from kraft_jbod.testing.quorum import CLUSTER_ID, TEST_TIMING
from kraft_jbod.wire.primitives import uuid_to_base64url

_DIR_A = uuid.UUID("8f0c2a4e-6d1b-4b7a-9a55-2f5b8c1d3e71")


def _props(tmp_path: Path, node_id: int, port: int, extra: str = "") -> Path:
    path = tmp_path / f"c{node_id}.properties"
    path.write_text(
        f"node.id={node_id}\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:{port}\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={tmp_path / f'meta-{node_id}'}\n{extra}"
    )
    return path


@pytest.mark.parametrize(
    ("flags", "extra"),
    [
        (["--initial-controllers", "1@127.0.0.1:9093"], "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"),
        (
            ["--initial-controllers", f"1@127.0.0.1:9093:{uuid_to_base64url(_DIR_A)}", "--standalone"],
            "controller.quorum.bootstrap.servers=127.0.0.1:9093\n",
        ),
        (
            ["--initial-controllers", f"1@127.0.0.1:9093:{uuid_to_base64url(_DIR_A)}"],
            "controller.quorum.voters=1@127.0.0.1:9093\n",
        ),
        (["--no-initial-controllers"], "controller.quorum.voters=1@127.0.0.1:9093\n"),
        (["--no-initial-controllers"], "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"),  # no --cluster-id
        (
            ["--no-initial-controllers", "--cluster-id", CLUSTER_ID, "--feature", "kraft.version=0"],
            "controller.quorum.bootstrap.servers=127.0.0.1:9093\n",
        ),
    ],
)
def test_a_refused_format_writes_nothing(tmp_path: Path, flags: list[str], extra: str) -> None:
    props = _props(tmp_path, 1, 0, extra)
    assert cli.main(["controller", "--config", str(props), *flags]) == 2
    assert not (tmp_path / "meta-1").exists()


def _args(**kw: Any) -> argparse.Namespace:
    base = {"initial_controllers": None, "no_initial_controllers": False, "cluster_id": CLUSTER_ID, "no_fsync": True}
    return argparse.Namespace(**{**base, **kw})


def test_format_writes_the_directory_id_and_the_voter_set(tmp_path: Path) -> None:
    listed = f"1@127.0.0.1:9093:{uuid_to_base64url(_DIR_A)},2@127.0.0.1:9094:{uuid_to_base64url(uuid.uuid4())}"
    cfg = ControllerConfig.from_properties(
        {"node.id": "1", "process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093",
         "controller.listener.names": "CONTROLLER", "metadata.log.dir": str(tmp_path / "m1")}
    )  # fmt: skip
    write = commands._dynamic_format(cfg, _args(initial_controllers=listed))
    assert not (tmp_path / "m1").exists()  # nothing until the checks are all done
    write()
    meta = read_meta_properties(tmp_path / "m1")
    assert meta is not None and meta.directory_id == _DIR_A and meta.cluster_id == CLUSTER_ID
    record = read_bootstrap_voters(tmp_path / "m1")
    assert record is not None and [v.voter_id for v in record.voters] == [1, 2]
    assert record.voters[0].voter_directory_id == _DIR_A
    seat = commands._quorum_seat(cfg, False)
    assert isinstance(seat, QuorumSeat) and seat.dynamic and seat.directory_id == _DIR_A
    assert seat.voters[2] == ("127.0.0.1", 9094)
    # A torn bootstrap file is a clear error, not a quorum started from half a voter set.
    path = tmp_path / "m1" / "quorum" / "bootstrap-voters"
    whole = path.read_bytes()
    path.write_bytes(whole[:-3])
    with pytest.raises(StorageError, match="CRC mismatch"):
        commands._quorum_seat(cfg, False)
    path.write_bytes(whole)
    # Formatted already: a restart keeps the voter set on disk; a static-formatted dir refuses.
    assert commands._dynamic_format(cfg, _args(initial_controllers=listed)) is None
    (tmp_path / "m1" / "quorum" / "bootstrap-voters").unlink()
    with pytest.raises(Exception, match="already formatted"):
        commands._dynamic_format(cfg, _args(no_initial_controllers=True))


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


async def _start(cfg: ControllerConfig, timing: Timing) -> ControllerServer:
    seat = commands._quorum_seat(cfg, False)
    assert isinstance(seat, QuorumSeat)
    seat.timing = timing
    server = ControllerServer(cfg, cluster_id=CLUSTER_ID, fsync=False, quorum=seat)
    await server.start()
    return server


@pytest.mark.asyncio
async def test_formatted_controllers_form_a_quorum_and_a_fourth_joins(tmp_path: Path) -> None:
    ports = _free_ports(4)
    ids = [1, 2, 3]
    dirs = {i: uuid.uuid4() for i in ids}
    listed = ",".join(f"{i}@127.0.0.1:{ports[i - 1]}:{uuid_to_base64url(dirs[i])}" for i in ids)
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports[:3])
    cfgs = {}
    for i in [*ids, 4]:
        extra = f"controller.quorum.bootstrap.servers={bootstrap}\n"
        if i == 4:
            extra += "controller.quorum.auto.join.enable=true\n"
        cfgs[i] = ControllerConfig.from_properties(
            dict(
                line.split("=", 1) for line in _props(tmp_path, i, ports[i - 1], extra).read_text().splitlines() if line
            )
        )
        flags = _args(initial_controllers=listed) if i != 4 else _args(no_initial_controllers=True)
        commands._dynamic_format(cfgs[i], flags)()
    servers: dict[int, ControllerServer] = {}
    try:
        for i in ids:
            servers[i] = await _start(cfgs[i], TEST_TIMING)
        deadline = time.monotonic() + 30
        while not any(s.quorum is not None and s.quorum.active for s in servers.values()):
            assert time.monotonic() < deadline, "no active controller"
            await asyncio.sleep(0.05)
        servers[4] = await _start(cfgs[4], TEST_TIMING)  # an observer that asks to be added
        request = DescribeQuorumRequest(
            topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]
        )
        joined = None
        while joined is None:
            assert time.monotonic() < deadline + 30, "controller 4 never joined"
            active = next((s for s in servers.values() if s.quorum is not None and s.quorum.active), None)
            if active is not None:
                conn = await KafkaConnection.open(active.addresses[0], client_id="admin")
                try:
                    part = (await conn.call(request, 2)).topics[0].partitions[0]
                finally:
                    await conn.close()
                voters = {v.replica_id: v.replica_directory_id for v in part.current_voters}
                if 4 in voters:
                    joined = voters
            await asyncio.sleep(0.1)
        meta4 = read_meta_properties(tmp_path / "meta-4")
        assert meta4 is not None
        assert joined == {**dirs, 4: meta4.directory_id}
    finally:
        for s in servers.values():
            assert s.quorum is not None
            await s.quorum.kill()
            await s.close()
