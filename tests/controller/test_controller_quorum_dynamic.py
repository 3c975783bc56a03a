"""Full controllers at kraft.version 1: a quorum of three grows to four by AddRaftVoter and
shrinks back by RemoveRaftVoter (the active controller, then a standby), twice, with two fake JBOD brokers
attached; after every change and every failover one controller is active, it holds every
acknowledged topic, the brokers stay unfenced, and DescribeQuorum and ApiVersions tell the
voter set in force at kraft.version 1."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from kraft_jbod.testing.cluster import KafkaConnection
from kraft_jbod.testing.quorum import CLUSTER_ID, ControllerQuorum
from tests.controller.test_controller_quorum import _create_on_active, _start_broker, _unfenced, _until

pytestmark = pytest.mark.asyncio

_DESCRIBE = DescribeQuorumRequest(
    topics=[TopicData(topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]
)


async def _call(server: ControllerServer, body: Any, version: int) -> Any:
    conn = await KafkaConnection.open(server.addresses[0], client_id="admin")
    try:
        return await conn.call(body, version)
    finally:
        await conn.close()


async def _voters_described(server: ControllerServer) -> dict[int, Any]:
    part = (await _call(server, _DESCRIBE, 2)).topics[0].partitions[0]
    assert part.error_code == 0
    return {v.replica_id: v.replica_directory_id for v in part.current_voters}


async def test_grow_to_four_and_back_twice_with_failovers(tmp_path: Path) -> None:
    async with ControllerQuorum(tmp_path / "quorum", voters=3, dynamic=True) as quorum:
        first = await quorum.wait_for_active(timeout=30)
        await _until("bootstrap committed", lambda: first.state.image.features)
        # kraft.version 1 is finalized, and the voter set in force is the formatted one.
        versions = await _call(first, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        assert {f.name: f.max_version_level for f in versions.finalized_features}["kraft.version"] == 1
        described = await _voters_described(first)
        assert described == {i: quorum.directory_ids[i] for i in quorum.ids}

        brokers = [await _start_broker(tmp_path, i, quorum.voters_property) for i in (1, 2)]
        acknowledged: list[str] = []
        removed: list[int] = []

        async def check(step: str) -> ControllerServer:
            name = f"topic-{len(acknowledged)}"
            assert await _create_on_active(quorum, name), f"{step}: {name} never acknowledged"
            acknowledged.append(name)
            active = await quorum.wait_for_active(timeout=30)
            live = [s for s in quorum.servers.values() if s.quorum is not None and s.quorum.active]
            assert live == [active], f"{step}: {len(live)} active controllers"
            # Every running controller, voter or observer, applies every acknowledged topic.
            for i, s in quorum.servers.items():
                await _until(
                    f"{step}: controller {i} holds every topic",
                    lambda s=s: all(t in s.state.image.topic_names for t in acknowledged),
                )
            await _until(f"{step}: brokers unfenced", lambda: all(_unfenced(active, b) for b in brokers))
            return active

        async def failover(step: str) -> None:
            active = await quorum.wait_for_active(timeout=30)
            old, epoch = active.config.node_id, quorum.epoch_of(active)
            await quorum.kill(old)
            await quorum.wait_for_active(above_epoch=epoch, timeout=30)
            await check(f"{step}, after killing {old}")
            await quorum.restart(old)

        try:
            await _until("both brokers unfenced", lambda: all(_unfenced(first, b) for b in brokers))
            await check("start")

            # Grow: a fourth controller joins as an observer and is added.
            await quorum.add_controller(3100)
            assert quorum.voter_set() == frozenset({3000, 3001, 3002, 3100})
            active = await check("after adding 3100")
            described = await _voters_described(active)
            assert described == {i: quorum.directory_ids[i] for i in (3000, 3001, 3002, 3100)}
            await failover("after adding 3100")

            # Remove the active controller itself: it resigns once that commits.
            active = await quorum.wait_for_active(timeout=30)
            leader = active.config.node_id
            await quorum.remove_controller(leader)
            removed.append(leader)
            new = await check(f"after removing the active {leader}")
            assert new.config.node_id != leader and len(quorum.voter_set()) == 3
            assert quorum.voter_set() == frozenset(quorum.ids) - set(removed)
            await failover(f"after removing {leader}")

            # Grow again, then remove a standby: it goes on as an observer, never active again.
            await quorum.add_controller(3101)
            assert len(quorum.voter_set()) == 4
            await check("after adding 3101")
            active = await quorum.wait_for_active(timeout=30)
            standby = next(i for i in sorted(quorum.voter_set()) if i != active.config.node_id)
            await quorum.remove_controller(standby)
            removed.append(standby)
            assert quorum.voter_set() == frozenset(quorum.ids) - set(removed)
            await check(f"after removing standby {standby}")
            await failover(f"after removing {standby}")

            # The removed controllers follow as observers: never active, NOT_CONTROLLER to
            # the controller APIs, and RemoveRaftVoter on one of them is not theirs to answer.
            active = await quorum.wait_for_active(timeout=30)
            assert set(await _voters_described(active)) == set(quorum.ids) - set(removed)
            for i in removed:
                seat = quorum.servers[i].quorum
                assert seat is not None and not seat.active and i not in seat.voter_ids()
                again = RemoveRaftVoterRequest(
                    cluster_id=CLUSTER_ID, voter_id=i, voter_directory_id=quorum.directory_ids[i]
                )
                resp = await _call(quorum.servers[i], again, 0)
                assert resp.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            # Removing a voter twice: VOTER_NOT_FOUND from the leader, as Kafka's.
            again = RemoveRaftVoterRequest(
                cluster_id=CLUSTER_ID, voter_id=removed[0], voter_directory_id=quorum.directory_ids[removed[0]]
            )
            assert (await _call(active, again, 0)).error_code == ErrorCode.VOTER_NOT_FOUND
        finally:
            for b in brokers:
                await b.close()
    added = sum(1 for kind, _, _ in quorum.voter_changes if kind == "add")
    print(
        f"voters_added={added} voters_removed={len(removed)} failovers={len(quorum.elections)} "
        f"election_ms_median={statistics.median(quorum.elections)} election_ms_worst={max(quorum.elections)} "
        f"topics_acknowledged={len(acknowledged)} lost=0"
    )
