"""Cordoned log dirs (KIP-1066) end to end: ``cordoned.log.dirs`` and ``broker-ctl cordon``
reach the controller in BrokerHeartbeat v2 once the broker caught up, and a new topic avoids
a broker whose directories are all cordoned."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller.config import parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, broker_properties, controller_config, wait_for
from kraft_jbod.errors import ConfigError
from kraft_jbod.storage import StorageLayout, format_storage

from .test_e2e import _create_rf


async def _ctl(address: tuple[str, int], *words: str) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kraft_jbod.cli",
        "broker-ctl",
        f"{address[0]}:{address[1]}",
        *words,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0, out
    return out


async def test_new_topic_avoids_a_fully_cordoned_broker(tmp_path: Path) -> None:
    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    port = controller.addresses[0][1]
    brokers: dict[int, FakeBroker] = {}
    try:
        for b in (1, 2, 3):
            extra = "kraft.jbod.control.listener=127.0.0.1:0\n"
            base = tmp_path / f"broker-{b}"
            if b == 3:  # one dir cordoned in its properties
                extra += f"cordoned.log.dirs={base / 'd0'}\n"
            props = parse_properties(broker_properties(tmp_path, b, port) + extra)
            format_storage(StorageLayout.from_properties(props), CLUSTER_ID)
            brokers[b] = FakeBroker(BrokerConfig.from_properties(props))
            await brokers[b].start()
        await wait_for("brokers RUNNING", lambda: all(x.lifecycle.state is State.RUNNING for x in brokers.values()), 20)
        regs = controller.state.brokers
        d3 = brokers[3].dirs.by_path(tmp_path / "broker-3" / "d0")
        assert d3 is not None
        await wait_for("broker 3's config cordon recorded", lambda: regs[3].cordoned_dirs == (d3.dir_id,), 20)

        b2 = brokers[2]
        assert b2.control_address is not None
        for d in b2.config.layout.log_dirs:
            assert b"cordoned" in await _ctl(b2.control_address, "cordon", str(d))
        ids2 = {d.dir_id for d in b2.dirs.dirs.values()}
        await wait_for("broker 2 fully cordoned", lambda: set(regs[2].cordoned_dirs or ()) == ids2, 20)
        assert not regs[2].has_uncordoned_dirs

        await _create_rf(port, "avoid", 12, 1)
        await wait_for("placement", lambda: sum(1 for p in controller.state.partitions()) == 12, 20)
        replicas = [r for p in controller.state.partitions() for r in p.replicas]
        assert 2 not in replicas and {1, 3} <= set(replicas)
        # Broker 3 puts its new replicas in its uncordoned directory.
        await wait_for(
            "broker 3 placed",
            lambda: (
                brokers[3].queue.queued == 0
                and sum(len(d.replicas) for d in brokers[3].dirs.dirs.values()) == replicas.count(3)
            ),
            20,
        )
        assert not d3.replicas

        await _ctl(b2.control_address, "uncordon", str(b2.config.layout.log_dirs[0]))
        await wait_for("broker 2 uncordoned one dir", lambda: regs[2].has_uncordoned_dirs, 20)
        await _create_rf(port, "again", 12, 1)
        await wait_for("placement", lambda: sum(1 for p in controller.state.partitions()) == 24, 20)
        assert any(2 in p.replicas for p in controller.state.partitions())
    finally:
        for x in brokers.values():
            await x.close()
        await controller.close()


def test_cordoned_log_dirs_config(tmp_path: Path) -> None:
    base = broker_properties(tmp_path, 1, 9093)
    d0, d1 = tmp_path / "broker-1" / "d0", tmp_path / "broker-1" / "d1"
    assert BrokerConfig.from_properties(parse_properties(base)).cordoned_log_dirs == ()
    star = BrokerConfig.from_properties(parse_properties(base + "cordoned.log.dirs=*\n"))
    assert star.cordoned_log_dirs == (d0, d1)
    one = BrokerConfig.from_properties(parse_properties(base + f"cordoned.log.dirs={d1}\n"))
    assert one.cordoned_log_dirs == (d1,)
    with pytest.raises(ConfigError, match=r"not one of log\.dirs"):
        BrokerConfig.from_properties(parse_properties(base + "cordoned.log.dirs=/elsewhere\n"))
    with pytest.raises(ConfigError, match="twice"):
        BrokerConfig.from_properties(parse_properties(base + f"cordoned.log.dirs={d0},{d0}\n"))
