"""Loopback integration tests: the real asyncio server on 127.0.0.1 port 0, real sockets.

The JBOD story end to end: two brokers register with LogDirs over TCP, heartbeat until
unfenced, a topic is created, a directory fails (OfflineLogDirs), the PartitionChangeRecords
show up in the log dump and in the state rebuilt after a restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod import cli, codec
from kraft_jbod.connection import NEED_DATA, ClientConnection, ConnectionClosed, ResponseReceived
from kraft_jbod.controller import features
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def make_config(tmp_path: Path, **extra: str) -> ControllerConfig:
    props = {
        "node.id": "3000",
        "process.roles": "controller",
        "listeners": "CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(tmp_path / "meta"),
        **extra,
    }
    return ControllerConfig.from_properties(props)


class Client:
    """A broker-side connection over asyncio streams, driven by the sans-I/O ClientConnection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = ClientConnection(client_id="test-broker")

    @classmethod
    async def connect(cls, addr: tuple[str, int]) -> Client:
        r, w = await asyncio.open_connection(*addr)
        return cls(r, w)

    async def call(self, body: Any, version: int) -> Any:
        self.writer.write(self.conn.send_request(body, version))
        ev = await self.next()
        assert isinstance(ev, ResponseReceived), ev
        return ev.body

    async def next(self) -> ResponseReceived | ConnectionClosed:
        while True:
            ev = self.conn.next_event()
            if ev is not NEED_DATA:
                assert isinstance(ev, ResponseReceived | ConnectionClosed)
                return ev
            data = await asyncio.wait_for(self.reader.read(65536), 10)
            self.conn.receive_data(data)

    async def is_closed_by_peer(self) -> bool:
        data = await asyncio.wait_for(self.reader.read(65536), 10)
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except ConnectionError:
            pass


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ControllerServer]:
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, tick_interval_ms=20) as s:
        yield s


def dirs_of(b: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=(b << 64) | 1000 + i) for i in range(2)]


def registration(b: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=b,
        cluster_id=CLUSTER,
        incarnation_id=uuid.UUID(int=b + 77),
        listeners=[Listener("PLAINTEXT", "127.0.0.1", 9092 + b, 0)],
        features=features.registration_features(),
        rack=None,
        log_dirs=dirs_of(b),
    )


async def register_and_unfence(client: Client, b: int) -> int:
    resp = await client.call(registration(b), 3)
    assert resp.error_code == 0, resp
    epoch = int(resp.broker_epoch)
    hb = await client.call(BrokerHeartbeatRequest(b, epoch, epoch, want_fence=False), 1)
    assert hb.error_code == 0 and hb.is_caught_up and not hb.is_fenced, hb
    return epoch


async def test_api_versions_lists_state_apis_and_finalized_mv(server: ControllerServer) -> None:
    c = await Client.connect(server.addresses[0])
    resp = await c.call(ApiVersionsRequest("kraft-jbod-test", "1.0"), 3)
    assert resp.error_code == 0
    keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert keys[18] == (0, 5)
    for key, rng in server.state.handled_api_versions().items():
        assert keys[key] == rng
    defaults = {n: lvl for n, lvl in features.default_feature_levels(features.DEFAULT_LEVEL).items() if lvl > 0}
    expected = sorted({**defaults, "metadata.version": features.DEFAULT_LEVEL}.items())
    assert [(f.name, f.max_version_level) for f in resp.finalized_features] == expected
    v0 = await c.call(ApiVersionsRequest(), 0)
    assert v0.error_code == 0 and {k.api_key for k in v0.api_keys} == set(keys)
    bad = await c.call(ApiVersionsRequest("bad name!", "1"), 3)
    assert bad.error_code == 42
    await c.close()


async def test_api_versions_v5_cluster_and_node_checks(server: ControllerServer) -> None:
    """KIP-1242: both or neither of ClusterId/NodeId; a mismatch asks the client to rebootstrap."""
    c = await Client.connect(server.addresses[0])
    ok = await c.call(ApiVersionsRequest("t", "1", cluster_id=server.state.cluster_id, node_id=server.state.node_id), 5)
    assert ok.error_code == 0 and ok.api_keys
    for cid, nid, code in [
        ("other", server.state.node_id, 129),
        (server.state.cluster_id, 1, 129),
        (None, server.state.node_id, 42),
        (server.state.cluster_id, -1, 42),
    ]:
        resp = await c.call(ApiVersionsRequest("t", "1", cluster_id=cid, node_id=nid), 5)
        assert resp.error_code == code, (cid, nid)
    await c.close()


async def test_api_versions_kip511_fallback(server: ControllerServer) -> None:
    r, w = await asyncio.open_connection(*server.addresses[0])
    # ApiVersions v7: header v2 (flexible), a body no schema knows.
    payload = struct.pack(">hhih", 18, 7, 99, 4) + b"test" + b"\x00" + b"\x05junk"
    w.write(struct.pack(">i", len(payload)) + payload)
    (size,) = struct.unpack(">i", await r.readexactly(4))
    body = await r.readexactly(size)
    resp = codec.decode_response(body, 18, 0)
    assert resp.header.correlation_id == 99
    assert resp.body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in resp.body.api_keys] == [(18, 0, 5)]
    # The connection stays usable: the client retries at a version we support.
    c = Client(r, w)
    assert (await c.call(ApiVersionsRequest("x", "1"), 3)).error_code == 0
    await c.close()


async def test_unknown_api_closes_only_that_connection(
    server: ControllerServer, caplog: pytest.LogCaptureFixture
) -> None:
    good = await Client.connect(server.addresses[0])
    bad = await Client.connect(server.addresses[0])
    with caplog.at_level(logging.WARNING):
        bad.writer.write(bad.conn.send_request(MetadataRequest(topics=None), 12))
        assert await bad.is_closed_by_peer()
    assert "api key 3 (Metadata) version 12" in caplog.text
    assert "127.0.0.1:" in caplog.text
    resp = await good.call(DescribeClusterRequest(), 1)
    assert resp.cluster_id == CLUSTER
    await good.close()
    await bad.close()


async def test_unsupported_version_and_garbage_close(server: ControllerServer) -> None:
    c = await Client.connect(server.addresses[0])
    payload = struct.pack(">hhih", 63, 9, 1, -1)  # BrokerHeartbeat v9 does not exist
    c.writer.write(struct.pack(">i", len(payload)) + payload)
    assert await c.is_closed_by_peer()
    g = await Client.connect(server.addresses[0])
    g.writer.write(b"\xff\xff\xff\xff")  # negative frame size
    assert await g.is_closed_by_peer()
    assert server.stats["protocol_errors"] == 2


async def test_oversized_frame_refused(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, **{"socket.request.max.bytes": "1000"})
    async with ControllerServer(cfg, cluster_id=CLUSTER) as s:
        c = await Client.connect(s.addresses[0])
        c.writer.write(struct.pack(">i", 1001) + b"\x00" * 10)
        assert await c.is_closed_by_peer()
        ok = await Client.connect(s.addresses[0])
        assert (await ok.call(ApiVersionsRequest("x", "1"), 3)).error_code == 0
        await ok.close()


async def test_partial_sender_does_not_stall_others(server: ControllerServer) -> None:
    slow = await Client.connect(server.addresses[0])
    frame = slow.conn.send_request(DescribeClusterRequest(), 1)
    slow.writer.write(frame[:7])
    await slow.writer.drain()
    fast = await Client.connect(server.addresses[0])
    for _ in range(5):
        assert (await fast.call(DescribeClusterRequest(), 1)).cluster_id == CLUSTER
    slow.writer.write(frame[7:])
    assert (await slow.next()).body.cluster_id == CLUSTER  # type: ignore[union-attr]
    await slow.close()
    await fast.close()


async def test_pipelined_requests_answered_in_order(server: ControllerServer) -> None:
    c = await Client.connect(server.addresses[0])
    await register_and_unfence(c, 1)
    data = b"".join(
        c.conn.send_request(t, 5)
        for t in (CreateTopicsRequest(topics=[CreatableTopic(f"t{i}", 1, 1)]) for i in range(10))
    )
    data += c.conn.send_request(DescribeClusterRequest(), 1)
    c.writer.write(data)
    names = []
    for _ in range(10):
        ev = await c.next()
        assert isinstance(ev, ResponseReceived)
        names.append(ev.body.topics[0].name)
        assert ev.body.topics[0].error_code == 0
    assert names == [f"t{i}" for i in range(10)]
    assert isinstance(await c.next(), ResponseReceived)
    await c.close()


async def test_jbod_flow_over_tcp_survives_restart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = make_config(tmp_path)
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        b1, b2 = await Client.connect(s.addresses[0]), await Client.connect(s.addresses[0])
        e1 = await register_and_unfence(b1, 1)
        e2 = await register_and_unfence(b2, 2)
        assert e1 != e2
        # The broker epoch is the log offset of the RegisterBrokerRecord.
        reg_offsets = [o for o, r, _ in s.log.replay() if type(r).__name__ == "RegisterBrokerRecord"]  # type: ignore[union-attr]
        assert reg_offsets == [e1, e2]
        created = await b1.call(CreateTopicsRequest(topics=[CreatableTopic("jbod", 4, 2)]), 7)
        (topic,) = created.topics
        assert topic.error_code == 0, topic
        tid = topic.topic_id
        parts = [s.state.partition(tid, i) for i in range(4)]
        assert all(p is not None and set(p.replicas) == {1, 2} for p in parts)
        # Broker 1 reports where its replicas live: all in its first directory.
        d1a, d1b = dirs_of(1)
        assign = AssignReplicasToDirsRequest(
            broker_id=1,
            broker_epoch=e1,
            directories=[DirectoryData(d1a, [TopicData(tid, [PartitionData(i) for i in range(4)])])],
        )
        ar = await b1.call(assign, 0)
        assert ar.error_code == 0
        assert all(p.error_code == 0 for d in ar.directories for t in d.topics for p in t.partitions)
        end_before = s.log.end_offset  # type: ignore[union-attr]
        # The directory fails.
        hb = await b1.call(BrokerHeartbeatRequest(1, e1, end_before, offline_log_dirs=[d1a]), 1)
        assert hb.error_code == 0 and not hb.is_fenced
        for p in parts:
            assert p is not None
            assert 1 not in p.isr and p.leader == 2
        assert s.state.check_invariants() == []
        live = s.state.durable_state()
        changes = [
            (o, r)
            for o, r, _ in s.log.replay()  # type: ignore[union-attr]
            if o >= end_before and isinstance(r, PartitionChangeRecord)
        ]
        assert {r.partition_id for _, r in changes} == {0, 1, 2, 3}
        await b1.close()
        await b2.close()
    # Restart on the same log: the state is rebuilt exactly.
    async with ControllerServer(cfg, cluster_id=CLUSTER) as s2:
        assert s2.state.durable_state() == live
        assert s2.state.check_invariants() == []
        reg = s2.state.brokers[1]
        assert d1a not in reg.online_dirs and d1b in reg.online_dirs
    # And the dump shows the PartitionChangeRecords.
    assert cli.main(["log", "dump", str(tmp_path / "meta")]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    dumped = [r for r in rows if r.get("type") == "PartitionChangeRecord" and r["offset"] >= end_before]
    assert {r["data"]["partitionId"] for r in dumped} == {0, 1, 2, 3}
    assert any(r.get("type") == "BrokerRegistrationChangeRecord" and r["version"] == 2 for r in rows)
    assert rows[0]["control"] == "LEADER_CHANGE"
    assert [r["offset"] for r in rows] == list(range(len(rows)))


async def test_session_timeout_fences_via_tick(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, **{"broker.session.timeout.ms": "200"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, tick_interval_ms=20) as s:
        c = await Client.connect(s.addresses[0])
        await register_and_unfence(c, 5)
        assert not s.state.brokers[5].fenced
        for _ in range(200):  # bounded wait for the ticker; no speed is asserted
            if s.state.brokers[5].fenced:
                break
            await asyncio.sleep(0.02)
        assert s.state.brokers[5].fenced
        kinds = [type(r).__name__ for _, r, _ in s.log.replay()]  # type: ignore[union-attr]
        assert kinds[-1] == "BrokerRegistrationChangeRecord"
        await c.close()


async def test_failed_append_closes_without_response(
    server: ControllerServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    c = await Client.connect(server.addresses[0])
    assert server.log is not None
    end = server.log.end_offset

    def broken(*a: object, **k: object) -> int:
        raise StorageError("disk on fire")

    monkeypatch.setattr(server.log, "append", broken)
    with caplog.at_level(logging.ERROR):
        c.writer.write(c.conn.send_request(registration(9), 3))
        assert await c.is_closed_by_peer()
    assert "disk on fire" in caplog.text
    assert 9 not in server.state.brokers and server.log.end_offset == end
    monkeypatch.undo()
    # The server keeps serving others.
    ok = await Client.connect(server.addresses[0])
    assert (await ok.call(registration(9), 3)).error_code == 0
    await ok.close()


async def test_restart_keeps_cluster_id_and_bumps_epoch(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with ControllerServer(cfg) as s:
        cid = s.cluster_id
    async with ControllerServer(cfg) as s:
        assert s.cluster_id == cid
    with pytest.raises(StorageError, match=r"cluster\.id"):
        async with ControllerServer(cfg, cluster_id=CLUSTER):
            pass
    with MetadataLog.open(cfg.metadata_partition_dir) as log:
        epochs = [b.epoch for b in log.batches]
    assert epochs[0] == 1 and epochs[-1] == 2 and epochs == sorted(epochs)


async def test_metadata_version_below_jbod(tmp_path: Path) -> None:
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, metadata_version=16) as s:
        assert s.state.metadata_version == 16
        c = await Client.connect(s.addresses[0])
        resp = await c.call(registration(1), 3)
        assert resp.error_code == 0
        (rec,) = [r for _, r, _ in s.log.replay() if type(r).__name__ == "RegisterBrokerRecord"]  # type: ignore[union-attr]
        assert rec.log_dirs == []
        await c.close()


async def test_several_listeners_ipv4_and_ipv6(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        listeners="CONTROLLER://127.0.0.1:0,CONTROLLER6://[::1]:0,PLAINTEXT://127.0.0.1:0",
        **{"controller.listener.names": "CONTROLLER,CONTROLLER6"},
    )
    async with ControllerServer(cfg, cluster_id=CLUSTER) as s:
        assert [h for h, _ in s.addresses] == ["127.0.0.1", "::1"]
        assert all(p > 0 for _, p in s.addresses)
        for addr in s.addresses:
            c = await Client.connect(addr)
            resp = await c.call(DescribeClusterRequest(endpoint_type=2), 1)
            assert resp.error_code == 0
            assert sorted((b.host, b.port) for b in resp.brokers) == sorted(s.addresses)
            await c.close()
