"""The pytest plugin's real fake brokers: start, directories on disk, failures three ways,
the manual clock's effect on their sessions, teardown, the factory fixture, and the copyable
example file run by pytest in a subprocess."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kraft_jbod.broker.lifecycle import State
from kraft_jbod.errors import KraftJbodError
from kraft_jbod.pytest_plugin import (
    FakeBrokerFactory,
    FakeBrokerHandle,
    KraftCluster,
    kraft_fake_brokers,  # the fixture, for runs without the pytest11 entry point
    start_cluster,
    stop_cluster,
)
from kraft_jbod.storage import read_meta_properties
from kraft_jbod.wire.primitives import uuid_to_base64url

__all__ = ["kraft_fake_brokers"]

REPO = Path(__file__).resolve().parents[2]


def _broker_view(cluster: KraftCluster, broker_id: int) -> dict[str, object]:
    return next(b for b in cluster.view()["brokers"] if b["id"] == broker_id)


async def test_start_broker_formats_registers_and_unfences(kraft_cluster: KraftCluster) -> None:
    fb = await kraft_cluster.start_broker(7, dirs=3, rack="r1")
    assert fb.state is State.RUNNING
    assert len(fb.log_dirs) == 3 and len(set(fb.dirs)) == 3
    for path, dir_id in zip(fb.log_dirs, fb.dirs, strict=True):
        meta = read_meta_properties(path)
        assert meta is not None and meta.directory_id == dir_id and meta.node_id == 7
        assert meta.cluster_id == kraft_cluster.server.cluster_id
        assert path.is_relative_to(kraft_cluster.root)  # type: ignore[arg-type]
    view = _broker_view(kraft_cluster, 7)
    assert view["fenced"] is False and view["rack"] == "r1"
    dirs = view["directories"]
    assert isinstance(dirs, list) and all(d["online"] for d in dirs)
    assert sorted(d["id"] for d in dirs) == sorted(uuid_to_base64url(d) for d in fb.dirs)
    # Learned from the controller (DescribeConfigs of its node): its client listener, by its name.
    assert view["endpoints"] == ["CLIENT://{}:{}".format(*kraft_cluster.client_address)]


async def test_ids_are_checked(kraft_cluster: KraftCluster) -> None:
    await kraft_cluster.add_broker(1)
    with pytest.raises(KraftJbodError, match="already used"):
        await kraft_cluster.start_broker(1)
    with pytest.raises(KraftJbodError, match="already used"):
        await kraft_cluster.start_broker(kraft_cluster.server.config.node_id)
    with pytest.raises(KraftJbodError, match="at least one"):
        await kraft_cluster.start_broker(2, dirs=0)
    assert kraft_cluster.fake_brokers == {}


async def test_replicas_land_in_the_directories_the_controller_records(
    kraft_cluster: KraftCluster, kraft_fake_brokers: FakeBrokerFactory
) -> None:
    brokers = await kraft_fake_brokers(2)
    assert [b.broker_id for b in brokers] == [1, 2]
    assert (await kraft_cluster.create_topic("t", partitions=4, replication_factor=2)).error_code == 0
    parts = await kraft_cluster.wait_for_placement("t")
    assert len(parts) == 4
    for p in parts:
        for b in brokers:
            index = b.directory_of("t", p["partition"])
            assert (b.log_dirs[index] / f"t-{p['partition']}" / "partition.metadata").is_file()
            others = [d for i, d in enumerate(b.log_dirs) if i != index]
            assert not any((d / f"t-{p['partition']}").exists() for d in others)


@pytest.mark.parametrize("how", ["command", "remove"])
async def test_failed_directory_moves_leadership_to_a_healthy_one(
    kraft_cluster: KraftCluster, kraft_fake_brokers: FakeBrokerFactory, how: str
) -> None:
    await kraft_fake_brokers(2)
    assert (await kraft_cluster.create_topic("pay", partitions=1, replication_factor=2)).error_code == 0
    await kraft_cluster.wait_for_placement("pay")
    before = kraft_cluster.partition("pay")
    leader = kraft_cluster.fake_brokers[before["leader"]]
    index = leader.directory_of("pay")
    await leader.fail_directory(index, how=how)

    assert not leader.online_in_controller(index)
    assert leader.online_in_controller(1 - index)
    after = kraft_cluster.partition("pay")
    assert after["leader"] not in (before["leader"], -1)
    assert leader.broker_id not in after["isr"]
    new_leader = kraft_cluster.fake_brokers[after["leader"]]
    assert new_leader.online_in_controller(new_leader.directory_of("pay"))
    assert leader.state is State.RUNNING  # a lost log directory does not stop a JBOD broker
    status = await leader.control("status")
    assert status["dirs"][str(leader.log_dirs[index])]["online"] is False


async def test_unwritable_directory(kraft_cluster: KraftCluster) -> None:
    fb = await kraft_cluster.start_broker(1)
    if os.geteuid() == 0:
        # Root writes anyway: the helper says so instead of waiting for nothing.
        with pytest.raises(KraftJbodError, match="root"):
            await fb.fail_directory(0, how="unwritable")
        assert fb.online_in_controller(0)
    else:
        await fb.fail_directory(0, how="unwritable")
        assert not fb.online_in_controller(0) and fb.online_in_controller(1)
    with pytest.raises(KraftJbodError, match="use one of"):
        await fb.fail_directory(0, how="melt")


async def test_control_command_errors_and_moves(kraft_cluster: KraftCluster) -> None:
    fb = await kraft_cluster.start_broker(1)
    with pytest.raises(KraftJbodError, match="refused"):
        await fb.control("fail-dir nowhere")
    assert (await kraft_cluster.create_topic("m", partitions=1, replication_factor=1)).error_code == 0
    await kraft_cluster.wait_for_placement("m")
    src = fb.directory_of("m")
    await fb.move_replica("m", 0, 1 - src)
    await kraft_cluster.wait_for(lambda: fb.directory_of("m") == 1 - src)
    await kraft_cluster.wait_for(
        lambda: (fb.log_dirs[1 - src] / "m-0").is_dir() and not (fb.log_dirs[src] / "m-0").exists()
    )


async def test_still_clock_never_expires_a_session_and_advance_does(kraft_cluster: KraftCluster) -> None:
    fb = await kraft_cluster.start_broker(1)
    # Refuse its heartbeats: real time passes without a single lease renewal.
    rule = kraft_cluster.add_fault(
        {"match": {"api": "BrokerHeartbeat", "broker_id": 1}, "action": {"type": "error", "error_code": 7}}
    )
    await kraft_cluster.wait_for(lambda: rule.fired >= 3)
    assert fb.unfenced_in_controller()  # the manual clock stood still: no session expired

    await kraft_cluster.advance(kraft_cluster.server.config.session_timeout_ms + 1000)
    await kraft_cluster.wait_for(lambda: _broker_view(kraft_cluster, 1)["fenced"])

    kraft_cluster.faults.remove(rule.id)  # the broker's next heartbeat unfences it again
    await fb.wait_running()
    assert fb.unfenced_in_controller()


async def test_stop_cluster_closes_fake_brokers(tmp_path: Path) -> None:
    cluster = await start_cluster(tmp_path)
    handles: list[FakeBrokerHandle] = []
    try:
        handles = await FakeBrokerFactory(cluster)(2, dirs=1)
        assert all(h.state is State.RUNNING for h in handles)
    finally:
        await stop_cluster(cluster)
    assert handles and all(h.broker.stopped.is_set() and h.exit_reason == "closed" for h in handles)
    assert cluster.fake_brokers == {}


async def test_cluster_without_root_uses_and_removes_its_own_folder(tmp_path: Path) -> None:
    cluster = await start_cluster(tmp_path)
    cluster.root = None
    try:
        fb = await cluster.start_broker(1, dirs=1)
        root = cluster.root
        assert root is not None and fb.log_dirs[0].is_relative_to(root) and root != tmp_path
    finally:
        await stop_cluster(cluster)
    assert not root.exists()


def test_example_file_passes_under_pytest() -> None:
    example = REPO / "examples" / "test_example.py"
    tests = [
        n.name
        for n in ast.walk(ast.parse(example.read_text()))
        if isinstance(n, ast.AsyncFunctionDef | ast.FunctionDef) and n.name.startswith("test_")
    ]
    assert tests
    args = [sys.executable, "-m", "pytest", str(example), "-q", "-p", "no:cacheprovider"]
    entry_points = importlib.metadata.entry_points(group="pytest11")
    if not any(ep.value == "kraft_jbod.pytest_plugin" for ep in entry_points):
        args += ["-p", "kraft_jbod.pytest_plugin"]  # loading it twice is an error, so only without the entry point
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(rf"\b{len(tests)} passed\b", proc.stdout), proc.stdout


async def test_plugin_brokers_can_serve_clients_on_their_own_ports(kraft_cluster: KraftCluster) -> None:
    import asyncio

    own = {"listeners": "PLAINTEXT://127.0.0.1:0", "kraft.jbod.serve.clients": "true"}
    handles = [await kraft_cluster.start_broker(b, props=own) for b in (1, 2)]
    addresses = {}
    for h in handles:
        addr = h.broker.client_listeners[0].address
        assert addr is not None
        addresses[h.broker_id] = f"{addr[0]}:{addr[1]}"
    assert len(set(addresses.values())) == 2 and kraft_cluster.bootstrap not in addresses.values()

    def kafka_python() -> dict[int, str]:
        from kafka.admin import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=addresses[1], request_timeout_ms=10000)
        try:
            return {b["broker_id"]: f"{b['host']}:{b['port']}" for b in admin.describe_cluster()["brokers"]}
        finally:
            admin.close()

    assert await asyncio.to_thread(kafka_python) == addresses
