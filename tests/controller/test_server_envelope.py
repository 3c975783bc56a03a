"""Envelope and the admin APIs through the real server on 127.0.0.1 port 0.

A broker connection forwards a client's CreateTopics and IncrementalAlterConfigs inside
Envelopes (as a KRaft broker's forwarding manager does) and gets Envelope responses that
carry the inner answers; a malformed Envelope gets Kafka's error on the same connection,
which stays open. ApiVersions advertises what is served; after a restart on the same log
the topic configs are back.
"""

from __future__ import annotations

from pathlib import Path

from kraft_jbod.controller import envelope as env
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.describe_quorum_request import DescribeQuorumRequest, PartitionData, TopicData
from kraft_jbod.messages.envelope_request import EnvelopeRequest
from kraft_jbod.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from tests.controller.test_server import CLUSTER, Client, make_config, register_and_unfence


async def test_forwarded_requests_over_tcp(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        broker = await Client.connect(s.addresses[0])
        await register_and_unfence(broker, 1)
        versions = await broker.call(ApiVersionsRequest("kraft-jbod-test", "1.0"), 3)
        advertised = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        for key, rng in {
            58: (0, 0),
            37: (0, 3),
            44: (0, 1),
            33: (0, 2),
            30: (1, 3),
            31: (1, 3),
            43: (0, 2),
            45: (0, 1),
            46: (0, 0),
            57: (0, 2),
            55: (0, 2),
            32: (1, 4),
        }.items():
            assert advertised[key] == rng, key

        alice = env.Principal("User", "alice")
        create = CreateTopicsRequest(topics=[CreatableTopic("fwd", 2, 1)], timeout_ms=1000)
        resp = await broker.call(env.envelope_of(create, 7, correlation_id=5, principal=alice), 0)
        assert resp.error_code == 0
        inner = env.unwrap_response(resp, 19, 7)
        assert inner is not None and inner.topics[0].error_code == 0  # type: ignore[attr-defined]
        assert s.state.topic_id_of("fwd") is not None

        alter = IncrementalAlterConfigsRequest(
            resources=[AlterConfigsResource(2, "fwd", [AlterableConfig("retention.ms", 0, "60000")])]
        )
        resp = await broker.call(env.envelope_of(alter, 1, principal=alice, client_address="::1"), 0)
        inner = env.unwrap_response(resp, 44, 1)
        assert inner is not None and inner.responses[0].error_code == 0  # type: ignore[attr-defined]

        bad = await broker.call(
            EnvelopeRequest(request_data=b"\0", request_principal=None, client_host_address=b"\1\2\3\4"), 0
        )
        assert (bad.error_code, bad.response_data) == (97, None)
        quorum = await broker.call(
            DescribeQuorumRequest(topics=[TopicData("__cluster_metadata", [PartitionData(0)])]), 2
        )
        part = quorum.topics[0].partitions[0]
        assert (part.leader_id, part.leader_epoch) == (cfg.node_id, s.log.leader_epoch)  # type: ignore[union-attr]
        assert part.high_watermark == s.log.end_offset  # type: ignore[union-attr]
        assert [o.replica_id for o in part.observers] == [1]
        await broker.close()
        live = s.state.durable_state()

    async with ControllerServer(cfg, cluster_id=CLUSTER) as s2:
        assert s2.state.durable_state() == live
        assert s2.state.image.configs.get(2, "fwd") == {"retention.ms": "60000"}
