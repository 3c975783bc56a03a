"""Drive Kafka 4.4's own classes (``java/KraftInterop.java``) against our controller.

Two pieces:

* :class:`InteropJvm`: compiles the Java harness against the oracle class path (class files
  cached under ``.cache/kafka-interop/<hash of sources and jar>/``, built in a temporary
  directory and renamed into place), starts one JVM and exchanges one JSON line per command.
  Kafka's log4j2 output goes to a file the tests read (``log_lines``), and the JVM logs every
  class it loads (``-Xlog:class+load``), which is how ``kafka_classes_loaded`` counts the
  Kafka classes a module exercised.
* :class:`ControllerThread`: our controller (``ControllerServer`` with a client listener and
  the admin endpoint, on the system clock) in its own thread and event loop, so the tests
  stay synchronous while Kafka's threads talk to it over loopback. ``restart()`` keeps the
  metadata directory and the port, as a restarted controller process would.

Invariant: a reply is paired with its command by ``id``; a JVM that answers out of step or
dies is killed and reported with the tail of its stderr.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import IO, Any, Final, TypeVar

from kraft_jbod.clock import SYSTEM_CLOCK
from kraft_jbod.controller.extensions import ClientListener, Extensions
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.pytest_plugin import CLUSTER_ID, KraftCluster, controller_config, stop_cluster
from kraft_jbod.wire.primitives import uuid_to_base64url
from tools.kafka_oracle import REPO_ROOT, Oracle

T = TypeVar("T")

JAVA_DIR: Final = Path(__file__).resolve().parent / "java"
MAIN_CLASS: Final = "KraftInterop"
CACHE_DIR: Final = REPO_ROOT / ".cache" / "kafka-interop"
CONTROLLER_ID: Final = 3000

LOG4J2_TEMPLATE: Final = """\
status = error
appender.file.type = File
appender.file.name = F
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %p %c [%t] %m%n
rootLogger.level = {level}
rootLogger.appenderRef.f.ref = F
"""

LOG_LINE = re.compile(r"^(TRACE|DEBUG|INFO|WARN|ERROR|FATAL) (\S+) \[([^\]]*)\] (.*)$")


class InteropError(Exception):
    """The harness JVM refused a command (``java_error``), is unavailable, or died."""

    def __init__(self, message: str, java_error: str | None = None) -> None:
        super().__init__(message)
        self.java_error = java_error


def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's ``Uuid.toString()``: unpadded base64url of the 16 bytes."""
    return uuid_to_base64url(u)


def compile_harness(oracle: Oracle, cache_dir: Path = CACHE_DIR) -> Path:
    """Compile every ``java/*.java`` against the oracle unless this exact build is cached."""
    sources = sorted(JAVA_DIR.glob("*.java"))
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    jar = oracle.jar.stat()
    digest.update(f"{oracle.jar}\0{jar.st_size}\0{jar.st_mtime_ns}".encode())
    out = cache_dir / digest.hexdigest()[:20]
    if (out / f"{MAIN_CLASS}.class").is_file():
        return out
    javac = (
        shutil.which("javac")
        if not os.environ.get("JAVA_HOME")
        else str(Path(os.environ["JAVA_HOME"]) / "bin" / "javac")
    )
    if javac is None:
        raise InteropError("javac not found")
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=cache_dir))
    try:
        result = subprocess.run(
            [
                javac,
                "-nowarn",
                "--release",
                "17",
                "-encoding",
                "UTF-8",
                "-d",
                str(staging),
                "-cp",
                oracle.classpath_string(),
                *map(str, sources),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise InteropError(f"javac failed:\n{result.stderr}{result.stdout}")
        try:
            staging.rename(out)
        except OSError:
            if not (out / f"{MAIN_CLASS}.class").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


class InteropJvm:
    """One JVM running ``KraftInterop``; ``close()`` ends it. One caller at a time."""

    def __init__(self, oracle: Oracle, workdir: Path) -> None:
        classes = compile_harness(oracle)
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_file = workdir / "kafka.log"
        self.class_log = workdir / "classes.log"
        config = workdir / "log4j2.properties"
        config.write_text(
            LOG4J2_TEMPLATE.format(log=self.log_file, level=os.environ.get("KRAFT_JBOD_INTEROP_LOG_LEVEL", "info"))
        )
        java = (
            shutil.which("java")
            if not os.environ.get("JAVA_HOME")
            else str(Path(os.environ["JAVA_HOME"]) / "bin" / "java")
        )
        assert java is not None
        self._stderr: IO[bytes] = (workdir / "stderr.txt").open("w+b")
        self._proc: subprocess.Popen[str] | None = subprocess.Popen(
            [
                java,
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-Xss1m",
                f"-Dlog4j2.configurationFile={config}",
                f"-Xlog:class+load=info:file={self.class_log}",
                "-cp",
                os.pathsep.join([str(classes), oracle.classpath_string()]),
                MAIN_CLASS,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            encoding="utf-8",
            bufsize=1,
        )
        self._next = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.poll() is None and proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.write('{"op":"quit"}\n')
                    proc.stdin.flush()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        finally:
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            self._stderr.close()

    def _stderr_tail(self) -> str:
        with contextlib.suppress(OSError, ValueError):
            self._stderr.seek(0)
            return self._stderr.read()[-4000:].decode("utf-8", "replace")
        return ""

    def raw(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one command; return the reply whether ``ok`` or not.

        Raises:
            InteropError: the JVM is closed, died or answered out of step.
        """
        with self._lock:
            proc = self._proc
            if proc is None or proc.stdin is None or proc.stdout is None:
                raise InteropError("the interop JVM is closed")
            ident = self._next
            self._next += 1
            err: OSError | None = None
            try:
                proc.stdin.write(json.dumps({"op": op, "id": ident, **fields}) + "\n")
                proc.stdin.flush()
                line = proc.stdout.readline()
            except OSError as exc:
                line = ""
                err = exc
            if not line:
                tail = self._stderr_tail()
                proc.kill()
                self._proc = None
                raise InteropError(f"interop JVM died ({err or proc.poll()}); stderr:\n{tail}")
            reply: dict[str, Any] = json.loads(line)
            if reply.pop("id", None) != ident:
                proc.kill()
                self._proc = None
                raise InteropError(f"interop JVM answered out of step: {line[:300]!r}")
            return reply

    def __call__(self, op: str, **fields: Any) -> dict[str, Any]:
        """Send one command; raise when Java refused it.

        Raises:
            InteropError: ``ok`` false (``java_error`` holds Java's message), or as :meth:`raw`.
        """
        reply = self.raw(op, **fields)
        if not reply.get("ok"):
            raise InteropError(f"{op}: {reply.get('error')}", java_error=str(reply.get("error")))
        return reply

    # -- Kafka's logs and classes ----------------------------------------------------------

    def log_lines(self) -> list[tuple[str, str, str, str]]:
        """Kafka's log4j2 lines so far as ``(level, logger, thread, message)``."""
        if not self.log_file.exists():
            return []
        out = []
        for line in self.log_file.read_text(errors="replace").splitlines():
            m = LOG_LINE.match(line)
            if m:
                out.append((m.group(1), m.group(2), m.group(3), m.group(4)))
        return out

    def kafka_classes_loaded(self) -> set[str]:
        """Every ``org.apache.kafka`` class this JVM loaded (from ``-Xlog:class+load``)."""
        if not self.class_log.exists():
            return set()
        names = set()
        for line in self.class_log.read_text(errors="replace").splitlines():
            m = re.search(r"\] (org\.apache\.kafka\.\S+) source:", line)
            if m:
                names.add(m.group(1))
        return names


class ControllerThread:
    """Our controller in a background thread with its own event loop (see module doc)."""

    def __init__(
        self,
        root: Path,
        *,
        metadata_version: int | None = None,
        semantics: str = "kafka",
        props: dict[str, str] | None = None,
        kraft_version: int = 0,
    ) -> None:
        self.root = root
        self.metadata_version = metadata_version
        self.kraft_version = kraft_version  # 1: a dynamic quorum (``controller --standalone``)
        self.props = {
            "kraft.jbod.semantics": semantics,
            "broker.session.timeout.ms": "2500",
            "broker.heartbeat.interval.ms": "200",
            **(props or {}),
        }
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="interop-controller", daemon=True)
        self._thread.start()
        self.cluster: KraftCluster | None = None
        self.port = 0
        self.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        """Run a coroutine on the controller's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the controller's loop thread (the state is only touched there)."""

        async def wrapper() -> T:
            return fn()

        return self.run(wrapper())

    def start(self) -> None:
        async def go() -> KraftCluster:
            ext = Extensions(
                clock=SYSTEM_CLOCK, client_listeners=[ClientListener("CLIENT", "127.0.0.1", 0)], admin=("127.0.0.1", 0)
            )
            props = dict(self.props, listeners=f"CONTROLLER://127.0.0.1:{self.port}")
            server = ControllerServer(
                controller_config(self.root, **props),
                cluster_id=CLUSTER_ID,
                fsync=False,
                extensions=ext,
                clock=SYSTEM_CLOCK,
                metadata_version=self.metadata_version,
                kraft_version=self.kraft_version,
            )
            await server.start()
            return KraftCluster(server, ext, SYSTEM_CLOCK, root=self.root)  # type: ignore[arg-type]

        self.cluster = self.run(go())
        self.port = self.cluster.server.addresses[0][1]

    def stop(self) -> None:
        if self.cluster is not None:
            cluster, self.cluster = self.cluster, None
            self.run(stop_cluster(cluster))

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
            self.loop.close()

    # -- what the tests look at ------------------------------------------------------------

    @property
    def server(self) -> ControllerServer:
        assert self.cluster is not None
        return self.cluster.server

    @property
    def voters(self) -> str:
        return f"{CONTROLLER_ID}@127.0.0.1:{self.port}"

    @property
    def bootstrap_servers(self) -> str:
        """controller.quorum.bootstrap.servers for a broker of a dynamic quorum."""
        return f"127.0.0.1:{self.port}"

    @property
    def metadata_dir(self) -> Path:
        return Path(self.server.config.metadata_log_dir)

    @property
    def client_address(self) -> tuple[str, int]:
        assert self.cluster is not None
        host, port = next(iter(self.cluster.ext.client_addresses.values()))
        return host, port

    def view(self) -> dict[str, Any]:
        """What ``kraft-jbod status --json`` prints: ``GET /status`` on the admin endpoint."""
        import urllib.request

        assert self.cluster is not None and self.cluster.ext.admin_address is not None
        host, port = self.cluster.ext.admin_address
        req = urllib.request.Request(f"http://{host}:{port}/status", headers=self.cluster.admin_headers)
        with urllib.request.urlopen(req, timeout=10) as resp:
            view: dict[str, Any] = json.loads(resp.read())
        return view

    def end_offset(self) -> int:
        return self.call(lambda: int(self.server.log.end_offset))  # type: ignore[union-attr]

    def records(self) -> list[dict[str, Any]]:
        """Every data record of the metadata log, as ``kraft-jbod log dump`` prints them."""
        from kraft_jbod import codec
        from kraft_jbod.controller.log import MetadataLog

        def read() -> list[dict[str, Any]]:
            out = []
            log = MetadataLog.open(self.server.config.metadata_partition_dir, read_only=True)
            try:
                for info, batch in log.iter_batches():
                    if info.is_control:
                        continue
                    for rec in batch.records:
                        record, version = codec.decode_metadata_record(rec.value or b"")
                        out.append(
                            {
                                "offset": info.base_offset + rec.offset_delta,
                                "type": type(record).__name__,
                                "version": version,
                                "data": record.to_json(version),
                            }
                        )
            finally:
                log.close()
            return out

        return self.call(read)

    def wait(self, probe: Callable[[], T], timeout: float = 15.0, interval: float = 0.05) -> T:
        """Poll ``probe`` (in the test thread) until truthy; bounded."""
        import time

        deadline = time.monotonic() + timeout
        last = probe()
        while not last:
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not reached in {timeout}s; last value {last!r}")
            time.sleep(interval)
            last = probe()
        return last


def broker_dirs(root: Path, broker_id: int, count: int) -> dict[str, str]:
    """``count`` log dirs for a Kafka broker: ``{path: directory id}`` in ``log.dirs`` order.

    The ids are what a broker would read from each dir's meta.properties; Kafka's
    lifecycle manager is handed them directly, so nothing is formatted on disk.
    """
    base = root / f"java-broker-{broker_id}"
    dirs: dict[str, str] = {}
    for i in range(count):
        path = base / f"d{i}"
        path.mkdir(parents=True, exist_ok=True)
        dirs[str(path)] = kafka_uuid(uuid.uuid4())
    return dirs


def iter_topics(view: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for t in view["topics"]:
        for p in t["partitions"]:
            yield t["name"], p
