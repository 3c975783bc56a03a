"""A real Kafka 4.4 broker attached to a quorum of three mock controllers: it registers
with the active one, the active one is killed, and the broker follows the next active
controller (found through the raft leader) with its session: same broker epoch, never
fenced, its heartbeats answered by the new leader."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.realkafka import configs
from kraft_jbod.realkafka.distribution import KafkaDistribution
from kraft_jbod.realkafka.process import KafkaProcess
from kraft_jbod.storage import StorageLayout, format_storage
from kraft_jbod.testing.quorum import CLUSTER_ID, ControllerQuorum

BROKER_ID = 1


async def _until(what: str, probe: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s: {what}")
        await asyncio.sleep(0.1)


def _registration(server: ControllerServer) -> Any:
    reg = server.state.brokers.get(BROKER_ID)
    return reg if reg is not None and not reg.fenced else None


def test_real_broker_follows_the_next_active_controller(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    root = tmp_path / "broker"
    dirs = [root / "d1", root / "d2"]
    meta = root / "meta"

    async def run() -> tuple[int, int]:
        async with ControllerQuorum(tmp_path / "quorum", voters=3, metadata_version=fv.MV_4_3_IV0) as quorum:
            first = await quorum.wait_for_active(timeout=60)
            await _until("bootstrap committed", lambda: first.state.image.features, 30)
            props = configs.broker_properties(
                node_id=BROKER_ID,
                controller_voters=quorum.voters_property,
                log_dirs=dirs,
                metadata_dir=meta,
                broker_count=1,
            )
            config = root / "server.properties"
            configs.write_properties(config, props)
            format_storage(StorageLayout(BROKER_ID, tuple(dirs), meta), CLUSTER_ID)
            broker = KafkaProcess("broker-1", kafka_dist, config, root / "server.log", heap_mb=384)
            await asyncio.to_thread(broker.start)
            try:
                reg = await _until("the broker registered and unfenced", lambda: _registration(first), 180)
                epoch = reg.epoch
                old, raft_epoch = first.config.node_id, quorum.epoch_of(first)
                await quorum.kill(old)
                new = await quorum.wait_for_active(above_epoch=raft_epoch, timeout=60)
                # Two session timeouts after the failover the broker is still unfenced in the
                # new leader's image with the same epoch: its heartbeats reached the new leader.
                await asyncio.sleep(2 * new.config.session_timeout_ms / 1000)
                after = _registration(new)
                assert after is not None, "the broker was fenced after the failover"
                assert after.epoch == epoch
                return epoch, new.config.node_id
            finally:
                await asyncio.to_thread(broker.stop, 60)

    epoch, leader = asyncio.run(asyncio.wait_for(run(), 420))
    text = (root / "server.log").read_text(errors="replace")
    assert "Encountered fatal fault" not in text
    assert epoch > 0
    # Kafka's broker found the new leader through the raft client and moved its channels there.
    assert re.search(rf"Recorded new KRaft controller, from now on will use node \S+ \(id: {leader} ", text), text[
        -3000:
    ]


def test_real_broker_starts_from_the_quorum_leaders_snapshot(kafka_dist: KafkaDistribution, tmp_path: Path) -> None:
    """The quorum snapshots often and cuts its logs (NoOpRecords alone fill them); a real
    broker started afterwards fetches from offset 0, below the active controller's log start,
    is answered with the snapshot id, loads the snapshot with FetchSnapshot and registers."""
    from kraft_jbod.controller import snapshot as snapshots

    root = tmp_path / "broker"
    dirs = [root / "d1", root / "d2"]
    meta = root / "meta"
    props = {"metadata.log.max.record.bytes.between.snapshots": "200", "metadata.max.retention.bytes": "1"}

    async def run() -> list[snapshots.SnapshotId]:
        async with ControllerQuorum(
            tmp_path / "quorum", voters=3, metadata_version=fv.MV_4_3_IV0, props=props
        ) as quorum:
            active = await quorum.wait_for_active(timeout=60)
            assert active.log is not None
            await _until("the active controller cut its committed copy", lambda: active.log.start_offset > 0, 60)
            cut = active.log.start_offset
            broker_props = configs.broker_properties(
                node_id=BROKER_ID,
                controller_voters=quorum.voters_property,
                log_dirs=dirs,
                metadata_dir=meta,
                broker_count=1,
            )
            config = root / "server.properties"
            configs.write_properties(config, broker_props)
            format_storage(StorageLayout(BROKER_ID, tuple(dirs), meta), CLUSTER_ID)
            broker = KafkaProcess("broker-1", kafka_dist, config, root / "server.log", heap_mb=384)
            await asyncio.to_thread(broker.start)
            try:
                await _until("the broker registered and unfenced", lambda: _registration(active), 180)
                loaded = snapshots.list_snapshots(meta / "__cluster_metadata-0")
                assert loaded and max(loaded).end_offset >= cut, (loaded, cut)
                return loaded
            finally:
                await asyncio.to_thread(broker.stop, 60)

    loaded = asyncio.run(asyncio.wait_for(run(), 420))
    text = (root / "server.log").read_text(errors="replace")
    assert "Encountered fatal fault" not in text
    print(f"\nthe real broker holds snapshots {[s.file_name for s in loaded]}")
