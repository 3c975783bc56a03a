"""The machinery behind the pytest plugin's fixtures: a controller on loopback, scripted
(:class:`SimBroker`) and real (:class:`FakeBrokerHandle`) JBOD brokers, and the
:class:`KraftCluster` handle a test drives them through.

It lives apart from :mod:`kraft_jbod.pytest_plugin` so that loading the plugin (which
pytest does in every run of an environment where kraft-jbod is installed) costs nothing:
this module, and through it the controller, the broker and the codec, is imported only
when a test asks for a ``kraft_*`` fixture. The plugin's docstring describes the
fixtures, the two kinds of broker and how time works; the invariants hold here: every
wait is bounded, nothing binds outside 127.0.0.1, every broker a cluster started is
closed before its controller and before its folders are removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.clock import ManualClock
from kraft_jbod.connection import NEED_DATA, ClientConnection, ConnectionClosed, ResponseReceived
from kraft_jbod.controller import client_api
from kraft_jbod.controller import features as fv
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
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.storage import format_storage
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.primitives import uuid_to_base64url

T = TypeVar("T")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


class KafkaConnection:
    """One Kafka connection over asyncio streams (for SimBroker and tests)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self.reader, self.writer = reader, writer
        self.conn = ClientConnection(client_id=client_id)

    @classmethod
    async def open(
        cls, address: tuple[str, int], *, client_id: str = "kraft-jbod-test", ssl: Any = None
    ) -> KafkaConnection:
        r, w = await asyncio.open_connection(
            address[0], address[1], ssl=ssl, server_hostname=None if ssl is None else "localhost"
        )
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

    def __init__(
        self,
        cluster: KraftCluster,
        broker_id: int,
        dirs: list[uuid.UUID],
        endpoint: tuple[str, int],
        rack: str | None = None,
    ) -> None:
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
            broker_id=self.broker_id,
            cluster_id=self.cluster.server.cluster_id,
            incarnation_id=self.incarnation,
            listeners=[Listener(name="PLAINTEXT", host=self.endpoint[0], port=self.endpoint[1], security_protocol=0)],
            features=fv.registration_features(4),
            rack=self.rack,
            log_dirs=list(self.dirs),
        )
        resp = await self.conn.call(req, 4)
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
            broker_id=self.broker_id,
            broker_epoch=self.epoch,
            current_metadata_offset=(log.end_offset if log is not None else 0),
            want_fence=want_fence,
            want_shut_down=False,
            offline_log_dirs=list(self.offline),
        )
        return await self.conn.call(req, 1)

    async def assign(self, topic_id: uuid.UUID, partition: int, directory: uuid.UUID) -> Any:
        """AssignReplicasToDirs for one replica of this broker."""
        assert self.conn is not None
        req = AssignReplicasToDirsRequest(
            broker_id=self.broker_id,
            broker_epoch=self.epoch,
            directories=[
                DirectoryData(
                    id=directory,
                    topics=[TopicData(topic_id=topic_id, partitions=[PartitionData(partition_index=partition)])],
                )
            ],
        )
        return await self.conn.call(req, 0)

    async def assign_all(self) -> int:
        """Assign every replica of this broker still UNASSIGNED, round-robin over its dirs."""
        state = self.cluster.server.state
        todo = sorted(
            state.replicas_in(self.broker_id, state.profile.unassigned), key=lambda p: (p.topic_id.int, p.partition_id)
        )
        for i, p in enumerate(todo):
            resp = await self.assign(p.topic_id, p.partition_id, self.dirs[i % len(self.dirs)])
            if resp.error_code != 0:
                raise KraftJbodError(f"AssignReplicasToDirs refused with error {resp.error_code}")
        return len(todo)

    def directory_index(self, directory: uuid.UUID | str) -> int:
        """Index of a directory (a uuid or its base64url form) in this broker's list."""
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


FAIL_HOW = ("command", "remove", "unwritable")
# Fake-broker timings: fast enough that a test sees a failure or a placement within a
# fraction of a second of real time; the session timeout itself is the controller's.
FAKE_BROKER_DEFAULTS: dict[str, str] = {
    "broker.heartbeat.interval.ms": "200",
    "kraft.jbod.probe.interval.ms": "100",
    "initial.broker.registration.timeout.ms": "10000",
    "controller.quorum.request.timeout.ms": "2000",
}


class FakeBrokerHandle:
    """A real :class:`~kraft_jbod.broker.server.FakeBroker` started by a :class:`KraftCluster`.

    ``broker`` is the running FakeBroker; ``dirs`` are its
    log directory ids in ``log.dirs`` order, ``log_dirs`` their paths. Directory indexes
    are positions in that order, as for :class:`SimBroker`.
    """

    def __init__(self, cluster: KraftCluster, broker: FakeBroker) -> None:
        self.cluster = cluster
        self.broker = broker
        self.broker_id = broker.node_id
        self._unwritable: set[Path] = set()

    @property
    def config(self) -> BrokerConfig:
        return self.broker.config

    @property
    def log_dirs(self) -> list[Path]:
        return list(self.config.layout.log_dirs)

    @property
    def dirs(self) -> list[uuid.UUID]:
        out = []
        for path in self.log_dirs:
            d = self.broker.dirs.by_path(path)
            assert d is not None  # the broker was built from these very paths
            out.append(d.dir_id)
        return out

    @property
    def state(self) -> State:
        return self.broker.lifecycle.state

    @property
    def exit_reason(self) -> str | None:
        return self.broker.exit_reason

    def status(self) -> dict[str, Any]:
        """The broker's own status (what the ``status`` control command answers)."""
        return self.broker.status()

    def directory_index(self, directory: uuid.UUID | str | Path) -> int:
        """Index of a directory given as a uuid, its base64url form or its path.

        Raises:
            KeyError: not one of this broker's log directories.
        """
        for i, (path, d) in enumerate(zip(self.log_dirs, self.dirs, strict=True)):
            if directory in (d, path) or directory == uuid_to_base64url(d) or directory == str(path):
                return i
        raise KeyError(directory)

    def directory_of(self, topic: str, partition: int = 0) -> int:
        """Index of the directory the controller records for this broker's replica.

        Raises:
            KeyError: unknown topic, no such replica here, or not in one of our directories.
        """
        p = self.cluster.partition(topic, partition)
        return self.directory_index(p["directories"][p["replicas"].index(self.broker_id)])

    def online_in_controller(self, index: int) -> bool:
        """Whether the controller still counts directory ``index`` of this broker online."""
        reg = self.cluster.server.state.brokers.get(self.broker_id)
        return reg is not None and self.dirs[index] in reg.online_set

    def unfenced_in_controller(self) -> bool:
        reg = self.cluster.server.state.brokers.get(self.broker_id)
        return reg is not None and not reg.fenced and reg.epoch == self.broker.lifecycle.epoch

    async def control(self, command: str, *, timeout: float = 10.0) -> Any:
        """Run one command on the broker's control endpoint over TCP; its ``result``.

        Raises:
            KraftJbodError: the broker refused the command (its message), closed the
                connection, or has no control endpoint.
        """
        if self.broker.control_address is None:
            raise KraftJbodError(f"broker {self.broker_id} has no control endpoint")
        reader, writer = await asyncio.open_connection(*self.broker.control_address)
        try:
            writer.write(command.encode("utf-8") + b"\n")
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (ConnectionError, OSError):
                pass
        if not line:
            raise KraftJbodError(f"broker {self.broker_id} closed its control connection on {command!r}")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise KraftJbodError(f"broker {self.broker_id} refused {command!r}: {answer.get('error')}")
        return answer.get("result")

    async def fail_directory(
        self, index: int, *, how: str = "command", wait: bool = True, timeout: float = 15.0
    ) -> None:
        """Fail log directory ``index``; with ``wait``, until the controller marks it offline.

        ``how``: ``"command"`` sends ``fail-dir`` to the control endpoint; ``"remove"``
        deletes the directory from disk and ``"unwritable"`` takes its write permission,
        both left for the broker's probe to find. Root ignores permissions, so
        ``"unwritable"`` is refused when running as root.

        Raises:
            KraftJbodError: an unknown ``how``, ``"unwritable"`` as root, the broker refused
                the command or stopped, or the controller did not see the failure in time.
            IndexError: no directory ``index``.
        """
        path, dir_id = self.log_dirs[index], self.dirs[index]
        if how == "command":
            await self.control(f"fail-dir {uuid_to_base64url(dir_id)}")
        elif how == "remove":
            shutil.rmtree(path)
        elif how == "unwritable":
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                raise KraftJbodError(
                    "how='unwritable' has no effect as root (root ignores permissions); "
                    "use how='remove' or how='command'"
                )
            self._unwritable.add(path)
            path.chmod(0o500)
        else:
            raise KraftJbodError(f"how={how!r}: use one of {', '.join(FAIL_HOW)}")
        if wait:
            await self._wait(
                f"the controller to mark {path} offline", lambda: not self.online_in_controller(index), timeout
            )

    async def move_replica(self, topic: str, partition: int, index: int) -> str:
        """Start an intra-broker move of ``topic``-``partition`` to directory ``index``.

        Raises:
            KraftJbodError: the broker refused (unknown topic, nothing to move, target offline).
        """
        return str(await self.control(f"move {topic} {partition} {uuid_to_base64url(self.dirs[index])}"))

    async def wait_running(self, timeout: float = 15.0) -> None:
        """Until the broker is RUNNING and the controller holds it registered and unfenced.

        Raises:
            KraftJbodError: the broker stopped, or not ready within ``timeout`` seconds.
        """
        await self._wait(
            "registered and unfenced", lambda: self.state is State.RUNNING and self.unfenced_in_controller(), timeout
        )

    async def _wait(self, what: str, probe: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not probe():
            if self.broker.stopped.is_set():
                raise KraftJbodError(f"broker {self.broker_id} stopped ({self.exit_reason}) while waiting for {what}")
            if time.monotonic() > deadline:
                raise KraftJbodError(
                    f"broker {self.broker_id}: {what} not reached within {timeout:g} s; status {self.status()}"
                )
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        """Close the broker (idempotent) and give back any write permission taken."""
        await self.broker.close()
        for path in self._unwritable:
            if path.exists():
                path.chmod(0o700)
        self._unwritable.clear()
        if self.cluster.fake_brokers.get(self.broker_id) is self:
            del self.cluster.fake_brokers[self.broker_id]


class KraftCluster:
    """A running controller and its brokers; see the module docstring.

    ``root`` is where fake brokers keep their directories (``broker-<id>/d<i>`` and
    ``broker-<id>/meta``); without one a temporary folder is made on the first
    :meth:`start_broker` and removed by :func:`stop_cluster`.
    """

    def __init__(self, server: ControllerServer, ext: Extensions, clock: ManualClock, root: Path | None = None) -> None:
        self.server = server
        self.ext = ext
        self.clock = clock
        self.brokers: dict[int, SimBroker] = {}
        self.fake_brokers: dict[int, FakeBrokerHandle] = {}
        self.root = root
        self._own_root: Path | None = None

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

    @property
    def admin_headers(self) -> dict[str, str]:
        """Headers every admin channel request needs: the token and the JSON content type."""
        token = self.ext.admin_token_value
        assert token is not None, "the admin channel has not started"
        return {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

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

    async def add_broker(
        self, broker_id: int, *, dirs: int = 2, unfence: bool = True, rack: str | None = None
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

    def _broker_root(self) -> Path:
        if self.root is None:
            self._own_root = self.root = Path(tempfile.mkdtemp(prefix="kraft-jbod-brokers-"))
        return self.root

    def fake_broker_properties(
        self, broker_id: int, *, dirs: int = 2, rack: str | None = None, props: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The broker properties :meth:`start_broker` uses (``props`` overrides any key)."""
        base = self._broker_root() / f"broker-{broker_id}"
        host, port = self.controller_address
        client_host, client_port = self.client_address
        out = {
            "process.roles": "broker",
            "node.id": str(broker_id),
            "controller.quorum.voters": f"{self.server.config.node_id}@{host}:{port}",
            "controller.listener.names": "CONTROLLER",
            # The client listener, as SimBroker does: clients that follow the broker list
            # reach the controller's Metadata/DescribeCluster listener.
            "listeners": f"PLAINTEXT://{client_host}:{client_port}",
            # ... which the fake broker must not bind itself.
            "kraft.jbod.serve.clients": "false",
            "log.dirs": ",".join(str(base / f"d{i}") for i in range(dirs)),
            # Separate, so failing any log directory leaves the broker running.
            "metadata.log.dir": str(base / "meta"),
            "broker.session.timeout.ms": str(self.server.config.session_timeout_ms),
            "kraft.jbod.control.listener": "127.0.0.1:0",
            **FAKE_BROKER_DEFAULTS,
        }
        if rack is not None:
            out["broker.rack"] = rack
        out.update(props or {})
        return out

    async def start_broker(
        self,
        broker_id: int,
        *,
        dirs: int = 2,
        rack: str | None = None,
        props: Mapping[str, str] | None = None,
        wait: bool = True,
        timeout: float = 15.0,
    ) -> FakeBrokerHandle:
        """Format ``dirs`` log directories (and a metadata directory) for a real fake broker,
        start it against this controller and, with ``wait``, return once it is RUNNING and
        the controller holds it registered and unfenced. It is closed by :func:`stop_cluster`
        (or :meth:`FakeBrokerHandle.stop`).

        Raises:
            KraftJbodError: ``broker_id`` is taken (by a SimBroker, a fake broker or the
                controller) or ``dirs`` < 1; the broker stopped or was not ready in time
                (it is closed then). ConfigError and StorageError are KraftJbodErrors.
        """
        if broker_id in self.brokers or broker_id in self.fake_brokers or broker_id == self.server.config.node_id:
            raise KraftJbodError(f"broker id {broker_id} is already used in this cluster")
        if dirs < 1:
            raise KraftJbodError(f"a broker needs at least one log directory, not {dirs}")
        config = BrokerConfig.from_properties(self.fake_broker_properties(broker_id, dirs=dirs, rack=rack, props=props))
        format_storage(config.layout, self.server.cluster_id)
        broker = FakeBroker(config)
        handle = FakeBrokerHandle(self, broker)
        self.fake_brokers[broker_id] = handle  # before start: teardown closes it whatever happens next
        try:
            await broker.start()
            if wait:
                await handle.wait_running(timeout)
        except BaseException:
            # The original error matters more than a second one while cleaning up.
            with contextlib.suppress(Exception):
                await handle.stop()
            raise
        return handle

    async def wait_for_placement(self, topic: str, *, timeout: float = 15.0) -> list[dict[str, Any]]:
        """Until every replica of ``topic`` on a fake broker has a directory (not UNASSIGNED)
        in the controller; returns the topic's partitions. SimBroker replicas are placed by
        their ``assign_all``.

        Raises:
            KraftJbodError: unknown topic, or still unplaced after ``timeout`` seconds.
        """

        def placed() -> list[dict[str, Any]] | None:
            for t in self.view()["topics"]:
                if t["name"] == topic:
                    parts: list[dict[str, Any]] = t["partitions"]
                    for p in parts:
                        for b, d in zip(p["replicas"], p["directories"], strict=True):
                            if b in self.fake_brokers and d == "UNASSIGNED":
                                return None
                    return parts
            return None

        deadline = time.monotonic() + timeout
        while (parts := placed()) is None:
            if time.monotonic() > deadline:
                known = any(t["name"] == topic for t in self.view()["topics"])
                raise KraftJbodError(f"topic {topic!r} " + ("not placed in time" if known else "does not exist"))
            await asyncio.sleep(0.02)
        return parts

    async def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1) -> Any:
        conn = await KafkaConnection.open(self.controller_address, client_id="admin")
        try:
            req = CreateTopicsRequest(
                topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=replication_factor)],
                timeout_ms=5000,
            )
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
    return ControllerConfig.from_properties(
        {
            "node.id": "3000",
            "process.roles": "controller",
            "listeners": "CONTROLLER://127.0.0.1:0",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(directory / "meta"),
            **props,
        }
    )


async def start_cluster(
    directory: Path,
    *,
    clock: ManualClock | None = None,
    extensions: Extensions | None = None,
    fsync: bool = False,
    **props: str,
) -> KraftCluster:
    """Start a controller with a client listener and an admin endpoint (use ``stop_cluster``)."""
    clock = clock or ManualClock()
    ext = extensions or Extensions(clock=clock)
    if ext.clock is not clock:
        ext.clock = clock
    if not ext.client_listeners:
        ext.client_listeners.append(ClientListener("CLIENT", "127.0.0.1", 0))
    if ext.admin is None:
        ext.admin = ("127.0.0.1", 0)
    server = ControllerServer(
        controller_config(directory, **props), cluster_id=CLUSTER_ID, fsync=fsync, extensions=ext, clock=clock
    )
    await server.start()
    return KraftCluster(server, ext, clock, root=directory)


async def stop_cluster(cluster: KraftCluster) -> None:
    """Close the fake brokers, then the SimBrokers' connections, then the controller."""
    for fb in list(cluster.fake_brokers.values()):
        await fb.stop()
    for b in list(cluster.brokers.values()):
        await b.close()
    await cluster.server.close()
    if cluster._own_root is not None:
        shutil.rmtree(cluster._own_root, ignore_errors=True)


async def cluster_for_test(clock: ManualClock) -> AsyncIterator[KraftCluster]:
    with tempfile.TemporaryDirectory(prefix="kraft-jbod-") as tmp:
        cluster = await start_cluster(Path(tmp), clock=clock)
        try:
            yield cluster
        finally:
            await stop_cluster(cluster)


class FakeBrokerFactory:
    """``await kraft_fake_brokers(n, dirs=2)``: ``n`` fake brokers with the next free ids."""

    def __init__(self, cluster: KraftCluster) -> None:
        self.cluster = cluster

    async def __call__(
        self,
        n: int = 3,
        *,
        dirs: int = 2,
        racks: list[str | None] | None = None,
        props: Mapping[str, str] | None = None,
        timeout: float = 15.0,
    ) -> list[FakeBrokerHandle]:
        """Start ``n`` brokers concurrently; each RUNNING and unfenced when this returns.

        Raises:
            KraftJbodError: as :meth:`KraftCluster.start_broker` (the others keep running
                until teardown).
        """
        c = self.cluster
        first = max([0, *c.brokers, *c.fake_brokers]) + 1
        if c.server.config.node_id in range(first, first + n):
            first = c.server.config.node_id + 1
        rack_of = racks or [None] * n
        if len(rack_of) != n:
            raise KraftJbodError(f"{len(rack_of)} racks for {n} brokers")
        # Wait for every start, so no start is left running unobserved when one fails.
        results = await asyncio.gather(
            *(c.start_broker(first + i, dirs=dirs, rack=rack_of[i], props=props, timeout=timeout) for i in range(n)),
            return_exceptions=True,
        )
        handles: list[FakeBrokerHandle] = []
        for r in results:
            if isinstance(r, BaseException):
                raise r
            handles.append(r)
        return handles
