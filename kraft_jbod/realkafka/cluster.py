"""A controller and N real Kafka brokers with K log dirs each, on loopback, brought up in order.

The controller is either the mock (``kraft-jbod controller`` in its own process, with its
client listener and admin channel) or Kafka's own KRaft controller from the same Kafka
(``process.roles=controller``), so any scenario can run against both and be compared.

Order and invariants:

* up: storage formatted (every log dir and the metadata dir get ``meta.properties`` with a
  ``directory.id``), the controller started and listening, then every broker started; the
  cluster is up when every broker logged its start and every broker lists every broker in a
  Metadata answer (a KRaft broker's cache holds unfenced brokers only);
* down: brokers first (SIGTERM: Kafka's controlled shutdown needs its controller; a broker
  whose controller is gone retries for minutes), then the controller; every process is
  reaped, past a deadline by SIGKILL; :meth:`RealCluster.close` is idempotent and runs from
  ``with`` blocks, Ctrl-C included;
* ports: every listener binds port 0 at first start (two clusters at once never collide),
  except Kafka's controller, whose port its voters string must name before it starts: a free
  port is taken then, and the start is retried on another if it was taken meanwhile. A node
  restarted keeps its port, so clients' bootstrap lists stay valid.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from kraft_jbod.errors import ConfigError, KraftJbodError
from kraft_jbod.realkafka import configs, probe
from kraft_jbod.realkafka.distribution import KafkaDistribution
from kraft_jbod.realkafka.process import DEFAULT_HEAP_MB, KafkaProcess, KafkaProcessError, run_tool
from kraft_jbod.storage import format_storage
from kraft_jbod.storage.meta import StorageLayout
from kraft_jbod.wire.primitives import uuid_to_base64url

T = TypeVar("T")
CONTROLLER_ID: Final = 3000
DEFAULT_METADATA_VERSION: Final = "4.3-IV0"
_AWAITING: Final = re.compile(r"Awaiting socket connections on ([\w.:\[\]-]+?):(\d+)\.")
_STARTED: Final = re.compile(r"Kafka ?Server started")
_MOCK_LISTENING: Final = re.compile(r"^listening on (\w+) \[?([^\]\s]+?)\]?:(\d+)$", re.MULTILINE)
CONTROLLER_KINDS: Final = ("mock", "kafka")


class ClusterError(KraftJbodError):
    """The cluster did not come up, or a node did not reach the state waited for."""


def new_cluster_id() -> str:
    """A random cluster id that does not start with ``-`` (as Kafka's ``Uuid.randomUuid``:
    command-line parsers would take it for an option)."""
    while True:
        text = uuid_to_base64url(uuid.uuid4())
        if not text.startswith("-"):
            return text


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_until(what: str, check: Callable[[], T | None], timeout: float, interval: float = 0.2) -> T:
    """Poll ``check`` until it returns a value that is not None/False; bounded by ``timeout``.

    Raises:
        ClusterError: the deadline passed; the message names ``what`` and the last exception.
    """
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = check()
            if value is not None and value is not False:
                return value
        except (probe.ProbeError, OSError, KeyError) as exc:
            last = exc
        if time.monotonic() > deadline:
            raise ClusterError(
                f"timed out after {timeout:.0f} s waiting for {what}" + (f" (last: {last})" if last else "")
            )
        time.sleep(interval)


def _write_mock_extensions(folder: Path, client: tuple[str, int], admin: tuple[str, int]) -> Path:
    """The mock's ``--extensions`` file: its client listener and admin channel at these addresses."""
    path = folder / "extensions.json"
    path.write_text(
        json.dumps({"client_listeners": [f"CLIENT://{client[0]}:{client[1]}"], "admin": f"{admin[0]}:{admin[1]}"})
    )
    return path


class MockControllerProcess(KafkaProcess):
    """``python -m kraft_jbod controller`` as a process, logging where a Kafka JVM would."""

    def __init__(self, name: str, config: Path, log_path: Path, args: Sequence[str]) -> None:
        super().__init__(name, _NO_DIST, config, log_path)
        self.args = list(args)

    def start(self) -> None:
        if self.running():
            raise KafkaProcessError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = [sys.executable, "-m", "kraft_jbod", "controller", "--config", str(self.config), *self.args]
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )


_NO_DIST: Final = KafkaDistribution(Path("."), "", (0, 0), "mock", "mock")


@dataclass
class ControllerNode:
    """The cluster's controller: the mock or Kafka's, its address and, for the mock, its extras."""

    kind: str
    node_id: int
    process: KafkaProcess
    data_dir: Path
    config_path: Path
    host: str = "127.0.0.1"
    port: int = 0
    admin_address: tuple[str, int] | None = None
    client: tuple[str, int] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def voters(self) -> str:
        return configs.voters_string(self.node_id, self.host, self.port)

    def admin_token(self) -> str | None:
        path = self.data_dir / "admin.token"
        return path.read_text().strip() if path.is_file() else None

    def metadata_log_dir(self) -> Path:
        return self.data_dir / "__cluster_metadata-0"

    def admin(self, method: str, path: str, body: object = None, *, timeout: float = 10.0) -> Any:
        """A request to the mock's admin channel (``/status``, ``/faults``...); its JSON answer.

        Raises:
            ClusterError: not the mock, or the channel answered an error status.
        """
        if self.admin_address is None:
            raise ClusterError(f"the {self.kind} controller has no admin channel (only the mock has one)")
        host, port = self.admin_address
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://{host}:{port}{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.admin_token()}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as exc:
            raise ClusterError(f"admin {method} {path}: HTTP {exc.code}: {exc.read().decode()[:300]}") from None
        except OSError as exc:
            raise ClusterError(f"admin {method} {path}: {exc}") from None
        return json.loads(text) if text.strip() else None


@dataclass
class BrokerNode:
    """One real broker: its id, folders, properties and process."""

    node_id: int
    root: Path
    log_dirs: list[Path]
    metadata_dir: Path
    config_path: Path
    process: KafkaProcess
    props: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 0

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ClusterSpec:
    """What to run. ``broker_overrides`` apply to every broker, ``per_broker`` to one id."""

    brokers: int = 2
    log_dirs: int = 2
    controller: str = "mock"
    metadata_version: str = DEFAULT_METADATA_VERSION
    first_broker_id: int = 1
    heap_mb: int = DEFAULT_HEAP_MB
    cluster_id: str | None = None
    cordoned: Mapping[int, Sequence[int]] = field(default_factory=dict)  # broker id -> dir indexes
    broker_overrides: Mapping[str, str] = field(default_factory=dict)
    per_broker: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    controller_overrides: Mapping[str, str] = field(default_factory=dict)
    mock_args: Sequence[str] = ()
    start_timeout: float = 180.0

    def check(self) -> None:
        """Raises ConfigError for counts or a controller kind that cannot work."""
        if self.controller not in CONTROLLER_KINDS:
            raise ConfigError(f"controller must be one of {', '.join(CONTROLLER_KINDS)}, not {self.controller!r}")
        if not 0 <= self.brokers <= 32:
            raise ConfigError(f"brokers: {self.brokers} (want 0 to 32; 0 runs the controller alone)")
        if not 1 <= self.log_dirs <= 16:
            raise ConfigError(f"log dirs per broker: {self.log_dirs} (want 1 to 16)")
        if self.heap_mb < 192:
            raise ConfigError(f"heap: {self.heap_mb} MB is too small for a Kafka broker (192 MB runs out at start)")
        ids = range(self.first_broker_id, self.first_broker_id + self.brokers)
        if CONTROLLER_ID in ids:
            raise ConfigError(f"broker ids {ids.start}-{ids.stop - 1} include the controller's id {CONTROLLER_ID}")
        for broker_id, dirs in self.cordoned.items():
            if broker_id not in ids or any(not 0 <= d < self.log_dirs for d in dirs):
                raise ConfigError(f"cordoned dirs {list(dirs)} of broker {broker_id}: no such broker or dir")


class RealCluster:
    """A running controller and real brokers; use as a context manager (``with``)."""

    def __init__(self, dist: KafkaDistribution, workdir: Path, spec: ClusterSpec | None = None) -> None:
        self.dist = dist
        self.spec = spec or ClusterSpec()
        self.spec.check()
        if self.spec.controller == "kafka" and not dist.at_least(3, 7):
            raise ConfigError(f"Kafka {dist.version} has no KRaft controller with JBOD support")
        self.workdir = workdir
        self.cluster_id = self.spec.cluster_id or new_cluster_id()
        self.controller: ControllerNode | None = None
        self.brokers: dict[int, BrokerNode] = {}
        self._closed = False

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> RealCluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Format, start the controller, then the brokers; wait until every broker is unfenced.

        Raises:
            ClusterError, KafkaProcessError: something did not come up (with the log's tail).
        """
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.controller = self._start_controller()
        for i in range(self.spec.brokers):
            self.add_broker(self.spec.first_broker_id + i, start=False)
        for broker in self.brokers.values():
            broker.process.start()
        for broker in self.brokers.values():
            self._wait_broker_started(broker)
        if self.brokers:
            self.wait_unfenced(timeout=self.spec.start_timeout)

    def close(self) -> None:
        """Brokers first, then the controller; every process reaped. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for broker in self.brokers.values():
            if broker.process.running():
                broker.process.resume()
        stoppers = [b for b in self.brokers.values() if b.process.running()]
        for broker in stoppers:  # SIGTERM all at once, then wait: shutdowns overlap
            broker.process.terminate()
        for broker in stoppers:
            broker.process.stop(timeout=60)
        if self.controller is not None:
            self.controller.process.resume()
            self.controller.process.stop(timeout=30)

    # ------------------------------------------------------------------ controller
    def _start_controller(self) -> ControllerNode:
        root = self.workdir / "controller"
        data = root / "data"
        config_path = root / "controller.properties"
        log_path = root / "controller.log"
        if self.spec.controller == "mock":
            return self._start_mock(root, data, config_path, log_path)
        return self._start_kafka_controller(data, config_path, log_path)

    def _start_mock(self, root: Path, data: Path, config_path: Path, log_path: Path) -> ControllerNode:
        props = configs.mock_controller_properties(
            node_id=CONTROLLER_ID, metadata_dir=data, overrides=self.spec.controller_overrides
        )
        configs.write_properties(config_path, props)
        extensions = _write_mock_extensions(root, ("127.0.0.1", 0), ("127.0.0.1", 0))
        args = [
            "--cluster-id",
            self.cluster_id,
            "--metadata-version",
            self.spec.metadata_version,
            "--extensions",
            str(extensions),
            *self.spec.mock_args,
        ]
        process = MockControllerProcess("controller", config_path, log_path, args)
        node = ControllerNode("mock", CONTROLLER_ID, process, data, config_path)
        process.start()
        self._read_mock_ports(node)
        return node

    def _read_mock_ports(self, node: ControllerNode) -> None:
        node.process.wait_for_line(re.compile(r"^listening on ADMIN ", re.MULTILINE), timeout=60)
        for name, host, port in _MOCK_LISTENING.findall(node.process.log_text()):
            if name == configs.CONTROLLER_LISTENER:
                node.host, node.port = host, int(port)
            elif name == "ADMIN":
                node.admin_address = (host, int(port))
            elif name == "CLIENT":
                node.client = (host, int(port))

    def _start_kafka_controller(self, data: Path, config_path: Path, log_path: Path) -> ControllerNode:
        process = KafkaProcess("controller", self.dist, config_path, log_path, heap_mb=self.spec.heap_mb)
        node = ControllerNode("kafka", CONTROLLER_ID, process, data, config_path)
        for attempt in range(3):
            node.port = free_port()
            props = configs.kafka_controller_properties(
                node_id=CONTROLLER_ID, port=node.port, log_dir=data, overrides=self.spec.controller_overrides
            )
            configs.write_properties(config_path, props)
            if attempt == 0:
                self._format_kafka_controller(config_path)
            process.start()
            try:
                process.wait_for_line(_AWAITING, timeout=self.spec.start_timeout)
                return node
            except KafkaProcessError:
                if "Address already in use" not in process.log_text() or attempt == 2:
                    raise
                process.stop(timeout=10)
        raise AssertionError("unreachable")

    def _format_kafka_controller(self, config_path: Path) -> None:
        args = [
            "format",
            "-t",
            self.cluster_id,
            "-c",
            str(config_path),
            "--release-version",
            self.spec.metadata_version,
        ]
        result = run_tool(self.dist, "kafka.tools.StorageTool", args, self.workdir / "controller")
        if result.returncode != 0:
            raise ClusterError(
                f"Kafka's storage tool refused to format the controller (exit {result.returncode}): "
                f"{(result.stdout + result.stderr).strip()[-1500:]}"
            )

    def restart_controller(self, *, kill: bool = False, down_seconds: float = 0.0) -> None:
        """Stop (SIGTERM, or SIGKILL with ``kill``) and start the controller on the same port."""
        node = self._controller()
        if kill:
            node.process.kill()
        else:
            node.process.stop(timeout=30)
        if down_seconds:
            time.sleep(down_seconds)
        if node.kind == "mock":
            assert isinstance(node.process, MockControllerProcess)
            node.process.args = [*node.process.args, "--override", f"listeners=CONTROLLER://{node.host}:{node.port}"]
            if node.admin_address is not None:
                self._pin_mock_admin(node)
            node.process.start()
            self._read_mock_ports(node)
        else:
            node.process.start()
            node.process.wait_for_line(_AWAITING, timeout=self.spec.start_timeout)

    def _pin_mock_admin(self, node: ControllerNode) -> None:
        assert node.admin_address is not None and node.client is not None
        _write_mock_extensions(node.config_path.parent, node.client, node.admin_address)

    def _controller(self) -> ControllerNode:
        if self.controller is None:
            raise ClusterError("the cluster has not been started")
        return self.controller

    # ------------------------------------------------------------------ brokers
    def add_broker(self, node_id: int, *, start: bool = True, log_dirs: int | None = None) -> BrokerNode:
        """Format and (by default) start one more broker with ``log_dirs`` dirs."""
        controller = self._controller()
        if node_id in self.brokers:
            raise ConfigError(f"broker {node_id} already exists")
        root = self.workdir / f"broker-{node_id}"
        dirs = [root / f"d{i + 1}" for i in range(log_dirs or self.spec.log_dirs)]
        meta = root / "meta"
        cordoned = [dirs[i] for i in self.spec.cordoned.get(node_id, ())]
        overrides = {**self.spec.broker_overrides, **self.spec.per_broker.get(node_id, {})}
        props = configs.broker_properties(
            node_id=node_id,
            controller_voters=controller.voters,
            log_dirs=dirs,
            metadata_dir=meta,
            broker_count=max(self.spec.brokers, len(self.brokers) + 1),
            cordoned=cordoned,
            overrides=overrides,
        )
        broker = self._new_broker(node_id, root, dirs, meta, props)
        self.format_broker(StorageLayout(node_id, tuple(dirs), meta))
        if start:
            self.start_broker(node_id)
        return broker

    def add_custom_broker(self, props: dict[str, str], *, start: bool = True) -> BrokerNode:
        """A broker on properties of the caller's (e.g. a rendered deployment's), pointed at
        this cluster's controller (``controller.quorum.voters`` is replaced) and formatted
        with Kafka's own storage tool, as a deployment would. ``log.dirs`` and
        ``metadata.log.dir`` are used as given: map them to local folders first.

        Raises:
            ConfigError: no ``node.id`` or no ``log.dirs``, or that broker id exists.
        """
        layout = StorageLayout.from_properties(props)
        if layout.node_id in self.brokers:
            raise ConfigError(f"broker {layout.node_id} already exists")
        props = {**props, "controller.quorum.voters": self._controller().voters}
        props.pop("controller.quorum.bootstrap.servers", None)
        root = self.workdir / f"broker-{layout.node_id}"
        broker = self._new_broker(layout.node_id, root, list(layout.log_dirs), layout.metadata_log_dir, props)
        result = self.format_with_kafka(broker)
        if result.returncode != 0:
            raise ClusterError(
                f"Kafka's storage tool refused broker {layout.node_id}'s dirs (exit {result.returncode}): "
                f"{(result.stdout + result.stderr).strip()[-1500:]}"
            )
        if start:
            self.start_broker(layout.node_id)
        return broker

    def _new_broker(self, node_id: int, root: Path, dirs: list[Path], meta: Path, props: dict[str, str]) -> BrokerNode:
        config_path = root / "server.properties"
        configs.write_properties(config_path, props)
        process = KafkaProcess(
            f"broker-{node_id}", self.dist, config_path, root / "server.log", heap_mb=self.spec.heap_mb
        )
        broker = BrokerNode(node_id, root, dirs, meta, config_path, process, props)
        self.brokers[node_id] = broker
        return broker

    def format_broker(self, layout: StorageLayout) -> None:
        """meta.properties with a directory.id in every dir (existing ids are kept)."""
        format_storage(layout, self.cluster_id)

    def format_with_kafka(
        self, broker: BrokerNode, *, ignore_formatted: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Format ``broker``'s dirs with Kafka's own storage tool (as ``kafka-storage format``)."""
        args = ["format", f"--cluster-id={self.cluster_id}", "-c", str(broker.config_path)]
        if ignore_formatted:
            args.append("--ignore-formatted")
        if self.dist.at_least(4, 0):
            args += ["--release-version", self.spec.metadata_version]
        return run_tool(self.dist, "kafka.tools.StorageTool", args, broker.root)

    def _wait_broker_started(self, broker: BrokerNode) -> None:
        m = broker.process.wait_for_line(_AWAITING, timeout=self.spec.start_timeout)
        if broker.port == 0:
            broker.port = int(m.group(2))
            if "," not in broker.props.get("listeners", ","):
                # one listener (ours): pin its port, so a restart keeps clients' bootstrap lists valid
                name = broker.props["listeners"].split(":", 1)[0]
                broker.props["listeners"] = f"{name}://{broker.host}:{broker.port}"
                configs.write_properties(broker.config_path, broker.props)
        broker.process.wait_for_line(_STARTED, timeout=self.spec.start_timeout)

    def stop_broker(self, node_id: int, *, timeout: float = 60.0) -> int | None:
        """Controlled shutdown (SIGTERM) of one broker; its exit status."""
        return self.brokers[node_id].process.stop(timeout=timeout)

    def kill_broker(self, node_id: int) -> None:
        self.brokers[node_id].process.kill()

    def start_broker(self, node_id: int, *, wait: bool = True) -> None:
        """Start a stopped broker again (same dirs, same port)."""
        broker = self.brokers[node_id]
        broker.process.start()
        if wait:
            self._wait_broker_started(broker)

    def wait_started(self, node_id: int) -> None:
        """Until a broker started with ``wait=False`` has started (listening, caught up)."""
        self._wait_broker_started(self.brokers[node_id])

    def broker_restart_refused(self, node_id: int, timeout: float = 120.0) -> str:
        """Start a broker expected to refuse; its log once it exited (raises if it stays up)."""
        broker = self.brokers[node_id]
        broker.process.start()
        assert broker.process.popen is not None
        try:
            broker.process.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise ClusterError(f"broker {node_id} did not exit within {timeout:.0f} s") from None
        return broker.process.log_text()

    # ------------------------------------------------------------------ views
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.port)

    def running_brokers(self) -> list[BrokerNode]:
        return [b for b in self.brokers.values() if b.process.running()]

    def wait_unfenced(self, ids: Sequence[int] | None = None, timeout: float = 120.0) -> probe.ClusterView:
        """Until every running broker's metadata lists the brokers ``ids`` (default: all running)."""
        want = set(ids if ids is not None else (b.node_id for b in self.running_brokers()))
        askers = self.running_brokers()
        if not askers:
            raise ClusterError("no broker is running")

        def check() -> probe.ClusterView | None:
            views = [probe.metadata(b.address, [], timeout=5) for b in askers]
            return views[0] if all(want <= set(v.brokers) for v in views) else None

        return wait_until(f"brokers {sorted(want)} unfenced", check, timeout)

    def wait_fenced(self, node_id: int, timeout: float = 60.0) -> None:
        """Until no running broker other than ``node_id`` lists it (fenced or gone)."""
        askers = [b for b in self.running_brokers() if b.node_id != node_id]

        def check() -> bool:
            return all(node_id not in probe.metadata(b.address, [], timeout=5).brokers for b in askers)

        wait_until(f"broker {node_id} fenced", check, timeout)

    def metadata(self, topics: list[str] | None = None, via: int | None = None) -> probe.ClusterView:
        broker = self.brokers[via] if via is not None else self.running_brokers()[0]
        return probe.metadata(broker.address, topics)

    def resident_mb(self) -> dict[str, float]:
        """Resident memory of every running node, in MiB."""
        out: dict[str, float] = {}
        nodes: list[tuple[str, KafkaProcess]] = [(f"broker-{b.node_id}", b.process) for b in self.brokers.values()]
        if self.controller is not None:
            nodes.append(("controller", self.controller.process))
        for name, process in nodes:
            rss = process.resident_mb()
            if rss is not None:
                out[name] = rss
        return out

    def describe(self) -> dict[str, object]:
        """Where everything listens, for people and scripts."""
        c = self._controller()
        out: dict[str, object] = {
            "cluster_id": self.cluster_id,
            "controller": {"kind": c.kind, "node_id": c.node_id, "address": f"{c.host}:{c.port}"},
            "bootstrap_servers": self.bootstrap_servers,
            "brokers": [
                {
                    "node_id": b.node_id,
                    "address": b.bootstrap,
                    "log_dirs": [str(d) for d in b.log_dirs],
                    "log": str(b.process.log_path),
                }
                for b in self.brokers.values()
            ],
            "kafka": f"{self.dist.version} ({self.dist.kind}: {self.dist.home})",
        }
        if c.admin_address is not None:
            out["controller"] = {**out["controller"], "admin": f"{c.admin_address[0]}:{c.admin_address[1]}"}  # type: ignore[dict-item]
        if c.client is not None:
            out["controller"] = {**out["controller"], "client": f"{c.client[0]}:{c.client[1]}"}  # type: ignore[dict-item]
        return out


def fail_dir_as_kafka_tests_do(path: Path) -> None:
    """Replace a log dir by a plain file (how Kafka's own tests fail a disk)."""
    shutil.rmtree(path)
    path.write_text("this log dir was replaced by a file to fail it\n")


def restore_dir(path: Path) -> None:
    """Undo :func:`fail_dir_as_kafka_tests_do`: an empty dir again (no meta.properties)."""
    if path.is_file():
        path.unlink()
    path.mkdir(parents=True, exist_ok=True)
