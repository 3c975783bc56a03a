"""AllocateProducerIds and AlterPartition through the real server on 127.0.0.1 port 0.

Three brokers register and unfence over TCP, a topic with three replicas is created,
the leader shrinks and re-expands its ISR, brokers take producer-id blocks; after a
restart on the same log the ISR, epochs and the producer-id counter are as they were.
"""

from __future__ import annotations

from pathlib import Path

from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraft_jbod.messages.alter_partition_request import AlterPartitionRequest, BrokerState, PartitionData, TopicData
from kraft_jbod.messages.alter_partition_response import PartitionData as AlterResult
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.producer_ids_record import ProducerIdsRecord
from tests.controller.test_server import CLUSTER, Client, make_config, register_and_unfence


async def test_producer_ids_and_isr_changes_over_tcp_survive_restart(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        clients = {b: await Client.connect(s.addresses[0]) for b in (1, 2, 3)}
        epochs = {b: await register_and_unfence(c, b) for b, c in clients.items()}
        versions = await clients[1].call(ApiVersionsRequest("kraft-jbod-test", "1.0"), 3)
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert advertised[56] == (0, 3) and advertised[67] == (0, 0)

        # Producer ids: consecutive blocks of 1000 whoever asks; a stale epoch gets none.
        blocks = []
        for b in (1, 2):
            r = await clients[b].call(AllocateProducerIdsRequest(broker_id=b, broker_epoch=epochs[b]), 0)
            blocks.append((r.error_code, r.producer_id_start, r.producer_id_len))
        assert blocks == [(0, 0, 1000), (0, 1000, 1000)]
        stale = await clients[3].call(AllocateProducerIdsRequest(broker_id=3, broker_epoch=epochs[3] + 1), 0)
        assert stale.error_code == 77

        created = await clients[1].call(CreateTopicsRequest(topics=[CreatableTopic("isr", 1, 3)]), 7)
        (topic,) = created.topics
        assert topic.error_code == 0, topic
        p = s.state.partition(topic.topic_id, 0)
        assert p is not None and len(p.isr) == 3
        leader = p.leader
        conn = clients[leader]

        async def alter(isr: list[int], partition_epoch: int) -> AlterResult:
            pd = PartitionData(
                partition_index=0,
                leader_epoch=0,
                partition_epoch=partition_epoch,
                new_isr_with_epochs=[BrokerState(b, epochs[b]) for b in isr],
            )
            req = AlterPartitionRequest(
                broker_id=leader,
                broker_epoch=epochs[leader],
                topics=[TopicData(topic_id=topic.topic_id, partitions=[pd])],
            )
            resp = await conn.call(req, 3)
            assert resp.error_code == 0
            ((got,),) = [t.partitions for t in resp.topics]
            assert isinstance(got, AlterResult)
            return got

        shrunk = await alter([leader], 0)
        assert (shrunk.error_code, shrunk.isr, shrunk.leader_id, shrunk.partition_epoch) == (0, [leader], leader, 1)
        assert p.isr == (leader,)
        # The broker's view is now out of date if it re-sends the old partition epoch.
        outdated = await alter(list(p.replicas), 0)
        assert outdated.error_code == 95 and p.isr == (leader,)
        expanded = await alter(list(p.replicas), 1)
        assert (expanded.error_code, expanded.isr, expanded.partition_epoch) == (0, list(p.replicas), 2)
        live = s.state.durable_state()
        records = [r for _, r, _ in s.log.replay()]  # type: ignore[union-attr]
        assert sum(isinstance(r, PartitionChangeRecord) for r in records) == 2
        assert [r.next_producer_id for r in records if isinstance(r, ProducerIdsRecord)] == [1000, 2000]
        for c in clients.values():
            await c.close()

    async with ControllerServer(cfg, cluster_id=CLUSTER) as s2:
        assert s2.state.durable_state() == live
        assert s2.state.check_invariants() == []
        q = s2.state.partition(topic.topic_id, 0)
        assert q is not None and (q.isr, q.partition_epoch, q.leader) == (tuple(expanded.isr), 2, leader)
        assert s2.state.next_producer_id == 2000
