"""The client listener's pure answers (broker/client_api.py) and the listener's robustness:
every answer encodes at every version the listener advertises, and bytes that break the
protocol close one connection while the broker keeps serving."""

from __future__ import annotations

import asyncio
import struct
import uuid

import pytest

from kraft_jbod import codec
from kraft_jbod.broker import client_api
from kraft_jbod.broker.image import MetadataImage
from kraft_jbod.broker.listener import ClientListener
from kraft_jbod.connection import ClientConnection, ResponseReceived
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kraft_jbod.messages.describe_log_dirs_request import DescribableLogDirTopic, DescribeLogDirsRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.properties import Listener

TOPIC = uuid.UUID(int=0x1234)
D1, D2, D3 = uuid.UUID(int=0x100001), uuid.UUID(int=0x100002), uuid.UUID(int=0x100003)


def _image() -> MetadataImage:
    img = MetadataImage()
    records = [
        (FeatureLevelRecord(name="metadata.version", feature_level=30), 0),
        (
            RegisterBrokerRecord(
                broker_id=1,
                broker_epoch=10,
                end_points=[BrokerEndpoint(name="PLAINTEXT", host="h1", port=9001, security_protocol=0)],
                rack="r1",
                fenced=False,
                log_dirs=[D1, D2],
            ),
            3,
        ),
        (
            RegisterBrokerRecord(
                broker_id=2,
                broker_epoch=11,
                end_points=[BrokerEndpoint(name="PLAINTEXT", host="h2", port=9002, security_protocol=0)],
                fenced=True,
                log_dirs=[D3],
            ),
            3,
        ),
        (TopicRecord(name="t", topic_id=TOPIC), 0),
        (PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2], isr=[1], leader=1, directories=[D2, D3]), 1),
        (PartitionRecord(partition_id=1, topic_id=TOPIC, replicas=[1], isr=[], leader=-1, directories=[D1]), 1),
        (BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, log_dirs=[D1]), 2),  # D2 offline
        (ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1000"), 0),
        (ConfigRecord(resource_type=4, resource_name="1", name="log.cleaner.threads", value="3"), 0),
    ]
    for offset, (rec, _v) in enumerate(records):
        img.apply(offset, rec, 0)
    return img


def test_metadata_lists_alive_brokers_on_the_listener_and_offline_replicas() -> None:
    img = _image()
    resp = client_api.metadata_response(img, 12, MetadataRequest(topics=None), listener="PLAINTEXT", cluster_id="c")
    assert [(b.node_id, b.host, b.port, b.rack) for b in resp.brokers] == [(1, "h1", 9001, "r1")]
    assert resp.controller_id == 1
    (topic,) = resp.topics
    p0, p1 = topic.partitions
    assert p0.offline_replicas == [1, 2]  # broker 1's D2 went offline; broker 2 is fenced
    assert p1.error_code == ErrorCode.LEADER_NOT_AVAILABLE and p1.offline_replicas == []
    assert (
        client_api.metadata_response(img, 12, MetadataRequest(topics=None), listener="OTHER", cluster_id="c").brokers
        == []
    )
    asked = MetadataRequest(
        topics=[MetadataRequestTopic(name="nope"), MetadataRequestTopic(name=None, topic_id=uuid.uuid4())]
    )
    errors = [
        t.error_code for t in client_api.metadata_response(img, 12, asked, listener="PLAINTEXT", cluster_id="c").topics
    ]
    assert errors == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID]


def test_describe_configs_of_its_own_node_only() -> None:
    img = _image()
    req = DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None),
            DescribeConfigsResource(resource_type=4, resource_name="2", configuration_keys=None),
            DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None),
            DescribeConfigsResource(resource_type=2, resource_name="gone", configuration_keys=None),
        ]
    )
    props = [("node.id", "1"), ("sasl.jaas.config", "secret"), ("ssl.key.password", "pw")]
    mine, other, topic, gone = client_api.describe_configs_response(img, 4, req, node_id=1, properties=props).results
    shown = {c.name: (c.value, c.config_source, c.is_sensitive) for c in mine.configs}
    assert shown["node.id"] == ("1", client_api.STATIC_BROKER_CONFIG, False)
    assert shown["ssl.key.password"] == (None, client_api.STATIC_BROKER_CONFIG, True)
    assert shown["sasl.jaas.config"][0] is None
    assert shown["log.cleaner.threads"] == ("3", client_api.DYNAMIC_BROKER_CONFIG, False)
    assert other.error_code == ErrorCode.INVALID_REQUEST and "expected 1 or empty string" in (other.error_message or "")
    assert [(c.name, c.value) for c in topic.configs] == [("retention.ms", "1000")]
    assert gone.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_log_dirs_reports_each_dir_as_kafka_does() -> None:
    dirs = [
        client_api.DirInfo(
            "/a",
            online=True,
            total_bytes=100,
            usable_bytes=40,
            cordoned=True,
            replicas=[("t", 0, 12, False), ("t", 1, 0, True), ("u", 0, 0, False)],
        ),
        client_api.DirInfo("/b", online=False),
    ]
    everything = client_api.describe_log_dirs_response(
        5, DescribeLogDirsRequest(topics=None), dirs, cordon_supported=True
    )
    a, b = everything.results
    assert (a.error_code, a.total_bytes, a.usable_bytes, a.is_cordoned) == (0, 100, 40, True)
    assert [
        (t.name, [(p.partition_index, p.partition_size, p.is_future_key) for p in t.partitions]) for t in a.topics
    ] == [
        ("t", [(0, 12, False), (1, 0, True)]),
        ("u", [(0, 0, False)]),
    ]
    assert (b.error_code, b.topics, b.total_bytes, b.usable_bytes) == (ErrorCode.KAFKA_STORAGE_ERROR, [], -1, -1)
    some = DescribeLogDirsRequest(topics=[DescribableLogDirTopic(topic="u", partitions=[0])])
    (a2, _) = client_api.describe_log_dirs_response(5, some, dirs, cordon_supported=False).results
    assert [t.name for t in a2.topics] == ["u"] and a2.is_cordoned is False


@pytest.mark.parametrize("key", sorted(client_api.served({k: (0, 20) for k in client_api.FORWARDABLE})))
def test_every_owned_answer_encodes_at_every_advertised_version(key: int) -> None:
    if key in client_api.FORWARDABLE:
        return  # forwarded: the controller encodes those
    lo, hi = client_api.served({})[key]
    img = _image()
    dirs = [client_api.DirInfo("/a", True, 1, 1, True, [("t", 0, 1, False)]), client_api.DirInfo("/b", False)]
    for version in range(lo, hi + 1):
        req_cls = codec.request_class(key)
        if key == ApiKey.METADATA:
            resp = client_api.metadata_response(
                img, version, MetadataRequest(topics=None), listener="PLAINTEXT", cluster_id="c"
            )
        elif key == ApiKey.DESCRIBE_CLUSTER:
            resp = client_api.describe_cluster_response(
                img, version, DescribeClusterRequest(), listener="PLAINTEXT", cluster_id="c"
            )
        elif key == ApiKey.DESCRIBE_CONFIGS:
            req = DescribeConfigsRequest(resources=[DescribeConfigsResource(resource_type=4, resource_name="1")])
            resp = client_api.describe_configs_response(img, version, req, node_id=1, properties=[("a", "b")])
        elif key == ApiKey.DESCRIBE_LOG_DIRS:
            resp = client_api.describe_log_dirs_response(
                version, DescribeLogDirsRequest(topics=None), dirs, cordon_supported=True
            )
        elif key == ApiKey.ALTER_REPLICA_LOG_DIRS:
            continue  # built by the broker shell; encoded in the client tests
        else:
            resp = client_api.refusal(key, version, req_cls(), 1)
        resp.encode(version)


async def test_bad_bytes_close_one_connection_and_the_listener_keeps_serving() -> None:
    class Side:
        node_id, cluster_id, image = 7, "c", _image()

        def supported_features(self) -> dict[str, tuple[int, int]]:
            return {}

        def static_properties(self) -> list[tuple[str, str]]:
            return []

        def log_dir_infos(self) -> list[client_api.DirInfo]:
            return []

        def alter_replica_log_dirs(self, body: object) -> object:
            raise AssertionError("not called")

        async def controller_versions(self) -> dict[int, tuple[int, int]]:
            return {}

        async def forward(self, raw: bytes, client_host: str) -> bytes:
            raise AssertionError("not called")

    server = ClientListener(Side(), Listener("PLAINTEXT", "127.0.0.1", 0))
    host, port = await server.start()
    try:
        for bad in (
            struct.pack(">i", 0x7FFFFFF0) + b"x" * 10,  # a size far above the frame limit
            struct.pack(">i", 10) + struct.pack(">hhi", 9999, 0, 1) + b"\x00\x00",  # unknown api key
            struct.pack(">i", 8) + struct.pack(">hhi", ApiKey.METADATA, 12, 1),  # truncated header
            struct.pack(">i", 8) + struct.pack(">hhi", ApiKey.CREATE_TOPICS, 7, 1),  # not forwardable now
        ):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(bad)
            await writer.drain()
            assert await asyncio.wait_for(reader.read(), 10) == b""  # closed, nothing answered
            writer.close()
        reader, writer = await asyncio.open_connection(host, port)
        conn = ClientConnection()
        writer.write(conn.send_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3))
        while True:
            conn.receive_data(await asyncio.wait_for(reader.read(65536), 10))
            ev = conn.next_event()
            if isinstance(ev, ResponseReceived):
                break
        keys = {k.api_key for k in ev.body.api_keys}
        assert {ApiKey.DESCRIBE_LOG_DIRS, ApiKey.ALTER_REPLICA_LOG_DIRS, ApiKey.METADATA} <= keys
        assert ApiKey.CREATE_TOPICS not in keys  # the controller's versions are unknown: not offered
        writer.close()
    finally:
        await server.close()
