"""Loopback end to end: fake brokers against the real controller, restarts in the middle,
explicit directory failure and move commands, and the log.dir.failure.timeout.ms rule."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller.config import parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, controller_config, image_from_log, run_demo, wait_for
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord


async def test_broker_and_controller_restarts_end_consistent(tmp_path: Path) -> None:
    async def between(step: str, ctx: dict[str, Any]) -> None:
        if step == "running":  # controller restart: same port, same log, next epoch
            old: ControllerServer = ctx["controller"]
            port = old.addresses[0][1]
            epoch = old.log.leader_epoch  # type: ignore[union-attr]
            await old.close()
            new = ControllerServer(controller_config(tmp_path, port), cluster_id=CLUSTER_ID, fsync=False)
            await new.start()
            assert new.log is not None and new.log.leader_epoch == epoch + 1
            ctx["controller"] = new
            brokers = ctx["brokers"]
            await wait_for(
                "brokers to follow the new epoch",
                lambda: all(b.follower.epoch == epoch + 1 for b in brokers.values()),
                20,
            )
        elif step == "placed":  # broker 2 restarts: folders are found on disk again
            brokers = ctx["brokers"]
            old_b: FakeBroker = brokers[2]
            await old_b.close()
            fresh = FakeBroker(old_b.config)
            await fresh.start()
            brokers[2] = fresh
            await wait_for("broker 2 to run again", lambda: fresh.lifecycle.state is State.RUNNING, 20)
            assert sum(len(d.replicas) for d in fresh.dirs.dirs.values()) > 0

    result = await run_demo(tmp_path, between=between)
    truth = image_from_log(result.controller_log)
    assert set(result.broker_images) == {1, 2, 3}
    for image in result.broker_images.values():
        assert image.partitions == truth.partitions


async def _cluster(tmp_path: Path, extra: str = "") -> tuple[ControllerServer, FakeBroker, int]:
    from kraft_jbod.demo.scenario import broker_properties
    from kraft_jbod.storage import StorageLayout, format_storage

    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    port = controller.addresses[0][1]
    props = parse_properties(broker_properties(tmp_path, 1, port) + extra)
    format_storage(StorageLayout.from_properties(props), CLUSTER_ID)
    broker = FakeBroker(BrokerConfig.from_properties(props))
    await broker.start()
    await wait_for("broker RUNNING", lambda: broker.lifecycle.state is State.RUNNING, 20)
    return controller, broker, port


async def _create(port: int, name: str, partitions: int) -> None:
    from kraft_jbod.broker.server import Channel
    from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest

    ch = Channel("admin", ("127.0.0.1", port), "t", 5000)
    try:
        req = CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)])
        resp = await ch.call(19, req)
        assert resp.topics[0].error_code == 0
    finally:
        ch.close()


async def test_control_endpoint_fails_a_dir_and_moves_a_replica(tmp_path: Path) -> None:
    controller, broker, port = await _cluster(tmp_path, "kraft.jbod.control.listener=127.0.0.1:0\n")
    try:
        await _create(port, "t", 4)
        await wait_for(
            "placement",
            lambda: (
                broker.queue.queued == 0
                and len(broker.image.partitions) == 4
                and all(p.directories[0].int > 100 for p in broker.image.partitions.values())
            ),
            20,
        )
        assert broker.control_address is not None
        reader, writer = await asyncio.open_connection(*broker.control_address)

        async def ask(line: str) -> Any:
            writer.write(line.encode() + b"\n")
            return json.loads(await reader.readline())

        d0, d1 = broker.config.layout.log_dirs
        tid = broker.image.topic_id("t")
        assert tid is not None
        src = next(p for p in broker.image.partitions.values() if p.directories[0] == broker.dirs.by_path(d0).dir_id)  # type: ignore[union-attr]
        moved = await ask(f"move t {src.partition_id} {d1}")
        assert moved["ok"], moved
        target = broker.dirs.by_path(d1)
        assert target is not None
        await wait_for(
            "the move to complete",
            lambda: (tid, src.partition_id) in target.replicas and not list(d1.glob("*-future")),
            20,
        )
        assert not (d0 / f"t-{src.partition_id}").exists() and (d1 / f"t-{src.partition_id}").is_dir()
        await wait_for(
            "the controller to record it",
            lambda: controller.state.partition(tid, src.partition_id).dirs[0] == target.dir_id,
            20,
        )
        assert (await ask("fail-dir nowhere"))["ok"] is False
        failed = await ask(f"fail-dir {d1}")
        assert failed["ok"], failed
        await wait_for(
            "the controller to see d1 offline", lambda: target.dir_id not in controller.state.brokers[1].online_set, 20
        )
        status = (await ask("status"))["result"]
        assert status["dirs"][str(d1)]["online"] is False and status["QueuedReplicaToDirAssignments"] == 0
        writer.close()
        log = list(controller.log.replay())  # type: ignore[union-attr]
        assert any(isinstance(r, PartitionChangeRecord) and r.directories == [target.dir_id] for _, r, _ in log)
    finally:
        await broker.close()
        await controller.close()


async def test_unreported_failure_under_a_led_partition_stops_the_broker(tmp_path: Path) -> None:
    controller, broker, port = await _cluster(tmp_path, "log.dir.failure.timeout.ms=300\n")
    try:
        await _create(port, "solo", 2)
        await wait_for(
            "placement",
            lambda: (
                broker.queue.queued == 0
                and len(broker.image.partitions) == 2
                and all(p.directories[0].int > 100 for p in broker.image.partitions.values())
            ),
            20,
        )
        await controller.close()  # nobody can hear about the failure now
        d = broker.dirs.dirs[broker.image.partitions[next(iter(broker.image.partitions))].directories[0]]
        broker.fail_directory(str(d.path))
        await asyncio.wait_for(broker.stopped.wait(), 10)
        assert broker.exit_reason is not None and "log.dir.failure.timeout.ms" in broker.exit_reason
    finally:
        await broker.close()
        await controller.close()


async def _create_rf(port: int, name: str, partitions: int, replication_factor: int) -> None:
    from kraft_jbod.broker.server import Channel
    from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest

    ch = Channel("admin", ("127.0.0.1", port), "t", 5000)
    try:
        req = CreateTopicsRequest(
            topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication_factor)]
        )
        resp = await ch.call(19, req)
        assert resp.topics[0].error_code == 0, resp
    finally:
        ch.close()
