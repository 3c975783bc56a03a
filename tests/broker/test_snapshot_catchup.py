"""Fake brokers follow a controller that snapshots and deletes segments: Fetch -> SnapshotId
-> FetchSnapshot in slices -> load -> fetch on, both for a broker left behind while running
and for a broker that starts after the log start moved past offset 0."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import Channel, FakeBroker
from kraft_jbod.controller.config import ControllerConfig, parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, CONTROLLER_ID, broker_properties, wait_for
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.storage import StorageLayout, format_storage

ROUNDS = 8
PER_ROUND = 400  # 3,200 partitions, replication factor 2, over three brokers


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _broker(tmp_path: Path, node: int, port: int) -> FakeBroker:
    # Small slices so that one snapshot takes several FetchSnapshot round trips.
    props = parse_properties(
        broker_properties(tmp_path, node, port) + "controller.quorum.fetch.snapshot.max.bytes=65536\n"
    )
    format_storage(StorageLayout.from_properties(props), CLUSTER_ID)
    broker = FakeBroker(BrokerConfig.from_properties(props))
    await broker.start()
    return broker


async def test_brokers_catch_up_through_snapshots(tmp_path: Path) -> None:
    cfg = ControllerConfig.from_properties(
        {
            "node.id": str(CONTROLLER_ID),
            "process.roles": "controller",
            "listeners": "CONTROLLER://127.0.0.1:0",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(tmp_path / "controller"),
            # Generous: creating thousands of replica folders on a loaded machine can hold a
            # broker's event loop past a short session, and a fenced cluster takes no topic.
            "broker.session.timeout.ms": "60000",
            "broker.heartbeat.interval.ms": "250",
            # Tiny: nearly every commit takes a snapshot and deletes the segments below it.
            "metadata.log.max.record.bytes.between.snapshots": "4096",
        }
    )
    controller = ControllerServer(cfg, cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    port = controller.addresses[0][1]
    assert controller.log is not None
    log = controller.log
    brokers: dict[int, FakeBroker] = {}
    admin = Channel("admin", ("127.0.0.1", port), "t", 20000)
    try:
        for node in (1, 2):
            brokers[node] = await _broker(tmp_path, node, port)
        await wait_for(
            "brokers 1 and 2 RUNNING", lambda: all(b.lifecycle.state is State.RUNNING for b in brokers.values()), 30
        )
        # Broker 2 keeps heartbeating but cannot fetch, as a broker whose raft channel stalls.
        fetch_addr = brokers[2]._raft.addr
        brokers[2]._raft.addr = ("127.0.0.1", _closed_port())
        behind = brokers[2].follower.published_offset
        worst_lag = 0  # of the fetching brokers, the moment a round is committed
        # For the record (not asserted: it depends on the machine's speed): the largest gap
        # between the controller's log end and a fetching broker's offset, sampled all along.
        sampled = [0]

        async def sample() -> None:
            while True:
                end_now = log.end_offset - 1
                lags = [end_now - b.follower.published_offset for n, b in brokers.items() if n != 2]
                sampled[0] = max(sampled[0], *lags)
                await asyncio.sleep(0.02)

        sampler = asyncio.get_running_loop().create_task(sample())
        for r in range(ROUNDS):
            req = CreateTopicsRequest(
                topics=[CreatableTopic(name=f"r{r}", num_partitions=PER_ROUND, replication_factor=2)]
            )
            resp = await admin.call(19, req)
            got = resp.topics[0]
            assert got.error_code == 0, (got.error_code, got.error_message)
            if r == ROUNDS // 2:
                # Broker 3 starts once the log start has moved past offset 0.
                assert log.start_offset > 0
                brokers[3] = await _broker(tmp_path, 3, port)
            end = log.end_offset - 1
            fetching = [b for n, b in brokers.items() if n != 2]
            worst_lag = max(worst_lag, *(end - b.follower.published_offset for b in fetching))
            await wait_for(
                f"brokers 1 and 3 to reach offset {end} after round {r}",
                lambda end=end, fetching=fetching: all(b.follower.published_offset >= end for b in fetching),
                60,
            )
        sampler.cancel()
        # The segments broker 2 still needed are gone: only a snapshot can bring it back.
        assert log.start_offset > behind + 1
        gap = log.end_offset - 1 - behind
        brokers[2]._raft.addr = fetch_addr

        def converged() -> bool:
            # The controller may still fence or move leaders meanwhile: compare at an offset
            # where its image and every broker's are at the same end of the log.
            end = log.end_offset - 1
            at_end = controller.state.image.last_applied_offset == end
            return at_end and all(b.follower.published_offset >= end for b in brokers.values())

        await wait_for("every broker at the controller's end offset", converged, 120)
        # No await from here to the comparison: nothing can change the images in between.
        snapshots = controller.stats["snapshots"]
        assert snapshots >= ROUNDS
        assert brokers[2].follower.snapshots_loaded >= 1 and brokers[3].follower.snapshots_loaded >= 1
        assert any(e.kind == "snapshot" and "loaded snapshot" in e.text for e in brokers[2].events)
        # Every image equals the controller's, snapshot or not.
        for b in brokers.values():
            assert len(b.image.partitions) == ROUNDS * PER_ROUND
            assert {tp: (p.replicas, p.leader, p.directories) for tp, p in b.image.partitions.items()} == {
                (tid, pid): (tuple(p.replicas), p.leader, tuple(p.dirs))
                for tid, t in controller.state.image.topics.items()
                for pid, p in t.partitions.items()
            }
        print(
            f"partitions {ROUNDS * PER_ROUND}, snapshots taken {snapshots}, log start {log.start_offset}, "
            f"end {log.end_offset}, worst lag of brokers 1 and 3 as a round commits {worst_lag} offsets "
            f"(sampled every 20 ms: {sampled[0]}), broker 2 was {gap} offsets behind when let go, "
            f"snapshots loaded {[b.follower.snapshots_loaded for b in brokers.values()]}"
        )
    finally:
        admin.close()
        for b in brokers.values():
            await b.close()
        await controller.close()
