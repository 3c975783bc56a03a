"""One Kafka JVM: started in its own process group, waited for by its log, stopped for sure.

Invariants:

* every wait is bounded: :meth:`KafkaProcess.wait_for_line` and :meth:`KafkaProcess.stop`
  take a deadline and fail (or escalate to SIGKILL) past it;
* a started process is always reaped: :meth:`stop` sends SIGTERM (Kafka's controlled
  shutdown), then SIGKILL to the whole process group, and waits for the exit status;
* the JVM writes stdout and stderr to one log file that outlives it, so a failure can be
  read after the fact; the logging configuration is ours and logs to the console (Kafka 4
  reads Log4j 2 properties, 3.x reads Log4j 1 properties: both are written, each release
  reads its own);
* heap and JIT settings are small by default (256 MB heap, the serial collector, C1 only):
  two brokers and a controller fit a loaded 2-core machine.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kraft_jbod.errors import KraftJbodError
from kraft_jbod.realkafka.distribution import KafkaDistribution, java_executable

DEFAULT_HEAP_MB: Final = 256
# Log4j 2 (Kafka 4.x): our pattern puts the level second, where logs.py looks for it.
LOG4J2: Final = """\
status = warn
shutdownHook = disable
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
logger.requests.name = kafka.request.logger
logger.requests.level = WARN
"""
# Log4j 1 (reload4j in Kafka 3.x), the same layout.
LOG4J1: Final = """\
log4j.rootLogger=INFO, console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""


class KafkaProcessError(KraftJbodError):
    """A Kafka JVM did not start, did not reach a state in time, or exited early."""


def write_logging_config(folder: Path) -> list[str]:
    """Write both logging configurations into ``folder``; the JVM flags that select them."""
    folder.mkdir(parents=True, exist_ok=True)
    v2, v1 = folder / "log4j2.properties", folder / "log4j.properties"
    v2.write_text(LOG4J2)
    v1.write_text(LOG4J1)
    return [f"-Dlog4j2.configurationFile={v2}", f"-Dlog4j.configuration=file:{v1}"]


def jvm_flags(heap_mb: int) -> list[str]:
    return [
        f"-Xmx{heap_mb}m",
        f"-Xms{heap_mb}m",
        "-XX:+UseSerialGC",
        # C1 only: Kafka's JIT threads otherwise take a large share of two cores at start.
        "-XX:TieredStopAtLevel=1",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
    ]


class KafkaProcess:
    """A ``kafka.Kafka`` JVM (broker or controller) on one properties file."""

    def __init__(
        self,
        name: str,
        dist: KafkaDistribution,
        config: Path,
        log_path: Path,
        *,
        heap_mb: int = DEFAULT_HEAP_MB,
        extra_jvm: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.dist = dist
        self.config = config
        self.log_path = log_path
        self.heap_mb = heap_mb
        self.extra_jvm = list(extra_jvm)
        self.popen: subprocess.Popen[bytes] | None = None
        self._log_offset = 0  # where the current run's lines start in the log file

    @property
    def pid(self) -> int | None:
        return None if self.popen is None else self.popen.pid

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def start(self) -> None:
        """Start the JVM; the log file is appended to (a restart keeps the earlier run's lines)."""
        if self.running():
            raise KafkaProcessError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        logging_flags = write_logging_config(self.log_path.parent / "logging")
        cmd = [
            java_executable(),
            *jvm_flags(self.heap_mb),
            *logging_flags,
            *self.extra_jvm,
            "-cp",
            self.dist.classpath,
            "kafka.Kafka",
            str(self.config),
        ]
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
            )

    def log_text(self, *, this_run: bool = True) -> str:
        """The log, from the current run's first line (or from the file's start)."""
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            if this_run:
                f.seek(self._log_offset)
            return f.read().decode("utf-8", "replace")

    def wait_for_line(self, pattern: str | re.Pattern[str], timeout: float) -> re.Match[str]:
        """The first match of ``pattern`` in this run's log, waiting up to ``timeout`` seconds.

        Raises:
            KafkaProcessError: the process exited, or the deadline passed; with the log's tail.
        """
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            m = regex.search(self.log_text())
            if m:
                return m
            if not self.running():
                raise KafkaProcessError(
                    f"{self.name} exited ({self._exit_text()}) before logging {regex.pattern!r}:\n{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise KafkaProcessError(
                    f"{self.name}: no {regex.pattern!r} in its log after {timeout:.0f} s:\n{self.tail()}"
                )
            time.sleep(0.1)

    def tail(self, lines: int = 25) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def _exit_text(self) -> str:
        code = None if self.popen is None else self.popen.poll()
        return "not started" if code is None else f"exit status {code}"

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL to the group past ``timeout``.

        Returns the exit status (None when it was not running).
        """
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.popen.wait(30)
        return self.popen.returncode

    def terminate(self) -> None:
        """SIGTERM without waiting (several nodes can shut down at once); :meth:`stop` reaps."""
        if self.popen is not None and self.popen.poll() is None:
            self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the JVM's whole group at once (a crash, not a shutdown)."""
        if self.popen is not None and self.popen.poll() is None:
            self._signal(signal.SIGKILL)
            self.popen.wait(30)

    def pause(self) -> None:
        """SIGSTOP: the JVM stops answering, its sockets stay open (a hung node)."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        assert self.popen is not None
        try:
            os.killpg(self.popen.pid, sig)
        except ProcessLookupError:
            pass

    def resident_mb(self) -> float | None:
        """Resident memory of the JVM in MiB (VmRSS), None when it is not running."""
        if not self.running():
            return None
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None


def run_tool(
    dist: KafkaDistribution, main_class: str, args: Sequence[str], log_dir: Path, *, timeout: float = 120.0
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools (e.g. ``kafka.tools.StorageTool``) to completion.

    Raises:
        KafkaProcessError: it did not finish within ``timeout`` seconds.
    """
    cmd = [
        java_executable(),
        "-Xmx128m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        *write_logging_config(log_dir / "logging"),
        "-cp",
        dist.classpath,
        main_class,
        *args,
    ]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise KafkaProcessError(f"{main_class} {' '.join(args)} did not finish in {timeout:.0f} s") from None
