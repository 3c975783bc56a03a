"""Authorization of the admin APIs: a forwarded request is judged as its client, and a
refused admin request gets its error in every entry (nothing written)."""

from __future__ import annotations

from pathlib import Path

from kraft_jbod.clock import ManualClock
from kraft_jbod.controller import envelope as env
from kraft_jbod.controller.extensions import Extensions
from kraft_jbod.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraft_jbod.pytest_plugin import KafkaConnection, start_cluster, stop_cluster
from kraft_jbod.security.acl import Authorizer

# Plaintext listeners: the connection's own principal is User:ANONYMOUS (the broker here).
ACLS = {
    "acls": [
        {"principal": "User:ANONYMOUS", "operation": "CLUSTER_ACTION"},
        {"principal": "User:alice", "operation": "CREATE"},
        {"principal": "User:alice", "operation": "ALTER_CONFIGS"},
    ]
}


async def test_forwarded_requests_are_authorized_as_their_client(tmp_path: Path) -> None:
    ext = Extensions(clock=ManualClock(), authorizer=Authorizer.from_json(ACLS))
    cluster = await start_cluster(tmp_path, clock=ext.clock, extensions=ext)  # type: ignore[arg-type]
    try:
        broker = await KafkaConnection.open(cluster.controller_address)
        create = CreateTopicsRequest(topics=[CreatableTopic("t", 1, 1)], timeout_ms=1000)
        end = cluster.server.log.end_offset
        resp = await broker.call(env.envelope_of(create, 7, principal=env.Principal("User", "mallory")), 0)
        assert resp.error_code == 0
        inner = env.unwrap_response(resp, 19, 7)
        assert inner is not None and [(t.name, t.error_code) for t in inner.topics] == [("t", 29)]  # type: ignore[attr-defined]
        # alice may create: the state machine answers (no broker registered yet).
        resp = await broker.call(env.envelope_of(create, 7, principal=env.Principal("User", "alice")), 0)
        inner = env.unwrap_response(resp, 19, 7)
        assert inner is not None and inner.topics[0].error_code == 38  # type: ignore[attr-defined]
        alter = IncrementalAlterConfigsRequest(
            resources=[AlterConfigsResource(4, "", [AlterableConfig("log.retention.ms", 0, "5")])]
        )
        resp = await broker.call(env.envelope_of(alter, 1, principal=env.Principal("User", "mallory")), 0)
        inner = env.unwrap_response(resp, 44, 1)
        assert inner is not None and inner.responses[0].error_code == 31  # type: ignore[attr-defined]
        assert cluster.server.log.end_offset == end
        resp = await broker.call(env.envelope_of(alter, 1, principal=env.Principal("User", "alice")), 0)
        inner = env.unwrap_response(resp, 44, 1)
        assert inner is not None and inner.responses[0].error_code == 0  # type: ignore[attr-defined]
        # Next to the cluster min.insync.replicas the bootstrap writes when ELR is on (level 30).
        assert cluster.server.state.image.configs.get(4, "") == {"min.insync.replicas": "1", "log.retention.ms": "5"}
        # The client listener: ANONYMOUS lacks ALTER, every topic of the request is refused.
        client = await KafkaConnection.open(cluster.client_address)
        grow = CreatePartitionsRequest(
            topics=[CreatePartitionsTopic("a", 2, None), CreatePartitionsTopic("b", 2, None)]
        )
        refused = await client.call(grow, 3)
        assert [(r.name, r.error_code) for r in refused.results] == [("a", 31), ("b", 31)]
        await client.close()
        await broker.close()
    finally:
        await stop_cluster(cluster)
