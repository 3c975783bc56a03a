"""pytest plugin: a KRaft controller, simulated JBOD brokers and fault injection as fixtures.

Enabled by the ``pytest11`` entry point ``kraft_jbod = "kraft_jbod.pytest_plugin"`` (or
``pytest -p kraft_jbod.pytest_plugin``). Fixtures (all function-scoped, async under
pytest-asyncio):

* ``kraft_clock``: a :class:`~kraft_jbod.clock.ManualClock`; the controller's session
  timeouts and tick loop run on it, so ``cluster.advance(ms)`` replaces sleeping.
* ``kraft_cluster``: a started controller on 127.0.0.1 port 0 with a client listener
  (Metadata/DescribeCluster for real clients) and the admin/metrics HTTP endpoint; a
  :class:`KraftCluster` handle. Everything is closed at teardown.
* ``kraft_faults``: the cluster's :class:`~kraft_jbod.faults.FaultInjector`.

:class:`SimBroker` is a scripted broker: it registers with directories, heartbeats on
demand (optionally reporting directories offline) and advertises the client listener as
its endpoint, so real clients that follow the broker list land on the same listener.

Invariants: every wait is bounded (``wait_for`` polls at most ``attempts`` loop turns and
fails with the last observed value); nothing binds outside 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from kraft_jbod.clock import ManualClock
from kraft_jbod.connection import NEED_DATA, ClientConnection, ConnectionClosed, ResponseReceived
from kraft_jbod.controller import client_api
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.extensions import ClientListener, Extensions
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.errors import KraftJbodError
from kraft_jbod.faults import FaultInjector, Rule
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.wire.message import Message

T = TypeVar("T")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


class KafkaConnection:
    """One Kafka connection over asyncio streams (for SimBroker and tests)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader, self.writer = reader, writer
        self.conn = ClientConnection(client_id=client_id)

    @classmethod
    async def open(cls, address: tuple[str, int], *, client_id: str = "kraft-jbod-test", ssl: Any = None
                   ) -> KafkaConnection:
        r, w = await asyncio.open_connection(address[0], address[1], ssl=ssl,
                                             server_hostname=None if ssl is None else "localhost")
        return cls(r, w, client_id)

    async def call(self, body: Message, version: int, *, timeout: float = 10.0) -> Any:
        """Send and return the response body.

        Raises:
            ConnectionError: the server closed the connection instead of answering.
        """
        self.writer.write(self.conn.send_request(body, version))
        await self.writer.drain()
        ev = await asyncio.wait_for(self.next_event(), timeout)
        if isinstance(ev, ConnectionClosed):
            raise ConnectionError("the server closed the connection without answering")
        return ev.body

    async def next_event(self) -> ResponseReceived | ConnectionClosed:
        while True:
            ev = self.conn.next_event()
            if ev is not NEED_DATA:
                assert isinstance(ev, ResponseReceived | ConnectionClosed)
                return ev
            data = await self.reader.read(65536)
            self.conn.receive_data(data)

    async def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """Whether the server closes the connection within ``timeout`` seconds (reads to EOF)."""
        try:
            async with asyncio.timeout(timeout):
                while await self.reader.read(65536):
                    pass
        except TimeoutError:
            return False
        except ConnectionError:
            return True
        return True

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, OSError):
            pass


def directory_id(broker_id: int, index: int) -> uuid.UUID:
    """A readable, non-reserved directory id for broker ``broker_id``'s ``index``-th dir."""
    return uuid.UUID(int=(0x5EED_0000 + broker_id) << 64 | (0x100 + index))


class SimBroker:
    """A scripted JBOD broker on the controller listener (register, heartbeat, fail dirs)."""

    def __init__(self, cluster: KraftCluster, broker_id: int, dirs: list[uuid.UUID],
                 endpoint: tuple[str, int], rack: str | None = None) -> None:
        self.cluster = cluster
        self.broker_id = broker_id
        self.dirs = dirs
        self.endpoint = endpoint
        self.rack = rack
        self.incarnation = uuid.uuid4()
        self.epoch = -1
        self.conn: KafkaConnection | None = None
        self.offline: list[uuid.UUID] = []

    async def connect(self) -> None:
        self.conn = await KafkaConnection.open(self.cluster.controller_address, client_id=f"broker-{self.broker_id}")

    async def register(self) -> Any:
        assert self.conn is not None
        req = BrokerRegistrationRequest(
            broker_id=self.broker_id, cluster_id=self.cluster.server.cluster_id, incarnation_id=self.incarnation,
            listeners=[Listener(name="PLAINTEXT", host=self.endpoint[0], port=self.endpoint[1], security_protocol=0)],
            features=[Feature(name="metadata.version", min_supported_version=1, max_supported_version=30)],
            rack=self.rack, log_dirs=list(self.dirs),
        )
        resp = await self.conn.call(req, 3)
        if resp.error_code == 0:
            self.epoch = resp.broker_epoch
        return resp

    async def heartbeat(self, *, want_fence: bool = False, offline: list[uuid.UUID] | None = None) -> Any:
        """One heartbeat, caught up to the controller's log; ``offline`` adds failed directories."""
        assert self.conn is not None
        for d in offline or ():
            if d not in self.offline:
                self.offline.append(d)
        log = self.cluster.server.log
        req = BrokerHeartbeatRequest(
            broker_id=self.broker_id, broker_epoch=self.epoch,
            current_metadata_offset=(log.end_offset if log is not None else 0), want_fence=want_fence,
            want_shut_down=False, offline_log_dirs=list(self.offline),
        )
        return await self.conn.call(req, 1)

    async def assign(self, topic_id: uuid.UUID, partition: int, directory: uuid.UUID) -> Any:
        """AssignReplicasToDirs for one replica of this broker."""
        assert self.conn is not None
        req = AssignReplicasToDirsRequest(
            broker_id=self.broker_id, broker_epoch=self.epoch,
            directories=[DirectoryData(id=directory, topics=[
                TopicData(topic_id=topic_id, partitions=[PartitionData(partition_index=partition)])])],
        )
        return await self.conn.call(req, 0)

    async def assign_all(self) -> int:
        """Assign every replica of this broker still UNASSIGNED, round-robin over its dirs."""
        state = self.cluster.server.state
        todo = sorted(state.replicas_in(self.broker_id, state.profile.unassigned),
                      key=lambda p: (p.topic_id.int, p.partition_id))
        for i, p in enumerate(todo):
            resp = await self.assign(p.topic_id, p.partition_id, self.dirs[i % len(self.dirs)])
            if resp.error_code != 0:
                raise KraftJbodError(f"AssignReplicasToDirs refused with error {resp.error_code}")
        return len(todo)

    def directory_index(self, directory: uuid.UUID | str) -> int:
        """Index of a directory (a uuid or its base64url form) in this broker's list."""
        from kraft_jbod.wire.primitives import uuid_to_base64url

        for i, d in enumerate(self.dirs):
            if d == directory or uuid_to_base64url(d) == directory:
                return i
        raise KeyError(directory)

    async def fail_directory(self, index: int) -> Any:
        return await self.heartbeat(offline=[self.dirs[index]])

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()
            self.conn = None


class KraftCluster:
    """A running controller and its simulated brokers; see the module docstring."""

    def __init__(self, server: ControllerServer, ext: Extensions, clock: ManualClock) -> None:
        self.server = server
        self.ext = ext
        self.clock = clock
        self.brokers: dict[int, SimBroker] = {}

    @property
    def faults(self) -> FaultInjector:
        return self.ext.faults

    @property
    def controller_address(self) -> tuple[str, int]:
        return self.server.addresses[0]

    @property
    def client_address(self) -> tuple[str, int]:
        return self.ext.client_addresses["CLIENT"]

    @property
    def bootstrap(self) -> str:
        host, port = self.client_address
        return f"{host}:{port}"

    @property
    def admin_url(self) -> str:
        assert self.ext.admin_address is not None
        return "http://{}:{}".format(*self.ext.admin_address)

    def view(self) -> dict[str, Any]:
        """The cluster view (brokers, directories, partitions with leader/ISR/directories)."""
        return client_api.cluster_view(self.server.state)

    def partition(self, topic: str, index: int = 0) -> dict[str, Any]:
        for t in self.view()["topics"]:
            if t["name"] == topic:
                return dict(t["partitions"][index])
        raise KeyError(topic)

    def add_fault(self, rule: dict[str, Any]) -> Rule:
        return self.faults.add(rule)

    async def add_broker(self, broker_id: int, *, dirs: int = 2, unfence: bool = True, rack: str | None = None
                         ) -> SimBroker:
        """Register a SimBroker with ``dirs`` directories (and heartbeat it unfenced).

        Raises:
            KraftJbodError: the controller refused the registration.
        """
        b = SimBroker(self, broker_id, [directory_id(broker_id, i) for i in range(dirs)], self.client_address, rack)
        await b.connect()
        resp = await b.register()
        if resp.error_code != 0:
            await b.close()
            raise KraftJbodError(f"broker {broker_id} registration refused with error {resp.error_code}")
        self.brokers[broker_id] = b
        if unfence:
            await b.heartbeat()
        return b

    async def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1) -> Any:
        conn = await KafkaConnection.open(self.controller_address, client_id="admin")
        try:
            req = CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=partitions,
                                                             replication_factor=replication_factor)], timeout_ms=5000)
            resp = await conn.call(req, 7)
            return resp.topics[0]
        finally:
            await conn.close()

    async def assign_all(self) -> int:
        """Every SimBroker assigns its UNASSIGNED replicas to its directories."""
        return sum([await b.assign_all() for b in self.brokers.values()])

    async def advance(self, ms: int, *, turns: int = 20) -> None:
        """Move the controller clock by ``ms`` and let timers and the commit thread run."""
        self.clock.advance(ms)
        for _ in range(turns):
            await asyncio.sleep(0.005)

    async def wait_for(self, probe: Callable[[], T], *, attempts: int = 400, interval: float = 0.01) -> T:
        """Poll ``probe()`` until it returns something truthy; bounded.

        Raises:
            AssertionError: still falsy after ``attempts`` polls.
        """
        last: T = probe()
        for _ in range(attempts):
            if last:
                return last
            await asyncio.sleep(interval)
            last = probe()
        if last:
            return last
        raise AssertionError(f"condition not reached; last value {last!r}")


def controller_config(directory: Path, **props: str) -> ControllerConfig:
    return ControllerConfig.from_properties({
        "node.id": "3000", "process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER", "metadata.log.dir": str(directory / "meta"), **props,
    })


async def start_cluster(directory: Path, *, clock: ManualClock | None = None, extensions: Extensions | None = None,
                        fsync: bool = False, **props: str) -> KraftCluster:
    """Start a controller with a client listener and an admin endpoint (use ``stop_cluster``)."""
    clock = clock or ManualClock()
    ext = extensions or Extensions(clock=clock)
    if ext.clock is not clock:
        ext.clock = clock
    if not ext.client_listeners:
        ext.client_listeners.append(ClientListener("CLIENT", "127.0.0.1", 0))
    if ext.admin is None:
        ext.admin = ("127.0.0.1", 0)
    server = ControllerServer(controller_config(directory, **props), cluster_id=CLUSTER_ID, fsync=fsync,
                              extensions=ext, clock=clock)
    await server.start()
    return KraftCluster(server, ext, clock)


async def stop_cluster(cluster: KraftCluster) -> None:
    for b in list(cluster.brokers.values()):
        await b.close()
    await cluster.server.close()


@pytest.fixture
def kraft_clock() -> ManualClock:
    return ManualClock()


@pytest_asyncio.fixture
async def kraft_cluster(kraft_clock: ManualClock) -> AsyncIterator[KraftCluster]:
    with tempfile.TemporaryDirectory(prefix="kraft-jbod-") as tmp:
        cluster = await start_cluster(Path(tmp), clock=kraft_clock)
        try:
            yield cluster
        finally:
            await stop_cluster(cluster)


@pytest.fixture
def kraft_faults(kraft_cluster: KraftCluster) -> FaultInjector:
    return kraft_cluster.faults
