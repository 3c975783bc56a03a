"""Controlled shutdown through the real CLI: ``kraft-jbod broker`` killed with SIGTERM and
``kraft-jbod broker-ctl ADDR shutdown`` both hand leadership away (WantShutDown heartbeats
until the controller answers ShouldShutDown) before the process exits 0."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller.config import parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, broker_properties, controller_config, wait_for
from kraft_jbod.storage import StorageLayout, format_storage

from .test_e2e import _create_rf


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "kraft_jbod.cli", *args]


async def _two_brokers(tmp_path: Path) -> tuple[ControllerServer, FakeBroker, asyncio.subprocess.Process, str, int]:
    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    port = controller.addresses[0][1]
    props1 = parse_properties(broker_properties(tmp_path, 1, port))
    format_storage(StorageLayout.from_properties(props1), CLUSTER_ID)
    b1 = FakeBroker(BrokerConfig.from_properties(props1))
    await b1.start()
    text2 = broker_properties(tmp_path, 2, port)
    format_storage(StorageLayout.from_properties(parse_properties(text2)), CLUSTER_ID)
    cfg2 = tmp_path / "broker-2.properties"
    cfg2.write_text(text2)
    proc = await asyncio.create_subprocess_exec(
        *_cli("broker", "-c", str(cfg2), "--control", "127.0.0.1:0"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ},
    )
    assert proc.stdout is not None
    line = ""
    while "CONTROL" not in line:  # its client listener is printed first
        line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
        assert line, "the broker exited before printing its control endpoint"
    control = line.split()[-1]
    await wait_for(
        "both brokers unfenced",
        lambda: (
            1 in controller.state.brokers
            and 2 in controller.state.brokers
            and not controller.state.brokers[1].fenced
            and not controller.state.brokers[2].fenced
        ),
        20,
    )
    await _create_rf(port, "shared", 6, 2)
    await wait_for("broker 2 to lead", lambda: any(p.leader == 2 for p in controller.state.partitions()), 20)
    return controller, b1, proc, control, port


async def _stops_controlled(controller: ControllerServer, b1: FakeBroker, proc: asyncio.subprocess.Process) -> str:
    rc = await asyncio.wait_for(proc.wait(), 20)
    assert proc.stderr is not None
    err = (await proc.stderr.read()).decode()
    assert rc == 0, err
    assert "controlled shutdown complete" in err, err
    # Leadership moved to broker 1 before broker 2 was allowed to go; broker 2 left the ISRs.
    parts = list(controller.state.partitions())
    assert parts and all(p.leader == 1 for p in parts)
    assert all(2 not in p.isr for p in parts)
    assert b1.lifecycle.state is State.RUNNING
    return err


async def test_sigterm_runs_a_controlled_shutdown(tmp_path: Path) -> None:
    controller, b1, proc, _, _ = await _two_brokers(tmp_path)
    try:
        proc.send_signal(signal.SIGTERM)
        err = await _stops_controlled(controller, b1, proc)
        assert "RUNNING -> PENDING_CONTROLLED_SHUTDOWN" in err
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await b1.close()
        await controller.close()


async def test_broker_ctl_shutdown_runs_a_controlled_shutdown(tmp_path: Path) -> None:
    controller, b1, proc, control, _ = await _two_brokers(tmp_path)
    try:
        ctl = await asyncio.create_subprocess_exec(
            *_cli("broker-ctl", control, "shutdown"), stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(ctl.communicate(), 20)
        assert ctl.returncode == 0 and b"controlled shutdown started" in out, out
        await _stops_controlled(controller, b1, proc)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await b1.close()
        await controller.close()


async def test_shutdown_before_running_skips_the_controlled_part(tmp_path: Path) -> None:
    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    props = parse_properties(broker_properties(tmp_path, 1, controller.addresses[0][1]))
    format_storage(StorageLayout.from_properties(props), CLUSTER_ID)
    await controller.close()  # nobody answers: the broker never registers
    broker = FakeBroker(BrokerConfig.from_properties(props))
    await broker.start()
    try:
        await asyncio.sleep(0.2)  # let its tasks start (and fail to reach anyone)
        assert broker.begin_shutdown("test") == "stopped (not registered)"
        assert broker.stopped.is_set() and broker.lifecycle.state is State.STARTING
    finally:
        await broker.close()
