"""A local target process the fuzzer starts, watches and restarts.

Strategy:

* The command runs with stdout and stderr piped into bounded ring buffers (the last
  ``keep_lines`` lines each), drained by background tasks so a chatty target never
  blocks on a full pipe.
* Where it listens comes from the caller (``host``/``port``), or from the first stdout
  line matching ``ready_pattern`` (default: the ``listening on HOST:PORT`` line of
  ``kraft-jbod controller``). Readiness is then a TCP connect that succeeds.
* ``alive()`` is ``returncode is None``; an exit while fuzzing is a crash finding whose
  detail carries the exit status and the last stderr lines.
* RSS comes from ``/proc/PID/status`` (VmRSS), sampled every ``rss_interval`` seconds
  while the target runs: baseline after start, peak, last. Above ``rss_limit`` it is a
  memory finding (``rss_exceeded``) and the process is killed, so a blow-up never takes
  the machine with it. Linux only; elsewhere the figures stay 0.
* ``restart()`` is bounded by ``max_restarts``: a target that keeps dying ends the run.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from kraft_jbod.errors import ConfigError
from kraft_jbod.fuzz.runner import TargetWatch

DEFAULT_READY = r"listening on (?:[A-Za-z0-9_.-]+ )?\[?([^\]\s]+?)\]?:(\d+)(?=\s|$)"


def read_rss(pid: int) -> int:
    """Resident set size of ``pid`` in bytes (0 when /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


class SpawnedTarget(TargetWatch):
    """``async with SpawnedTarget(argv) as t: t.host, t.port``; stops the process on exit."""

    def __init__(
        self,
        argv: Sequence[str] | str,
        *,
        host: str | None = None,
        port: int | None = None,
        ready_pattern: str = DEFAULT_READY,
        startup_timeout: float = 30.0,
        rss_interval: float = 0.25,
        rss_limit: int | None = None,
        max_restarts: int = 0,
        keep_lines: int = 200,
        env: dict[str, str] | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        self.argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
        if not self.argv:
            raise ConfigError("the command to spawn is empty")
        self.host = host or "127.0.0.1"
        self.port = port
        self._fixed_port = port
        self.ready = re.compile(ready_pattern)
        self.startup_timeout = startup_timeout
        self.rss_interval = rss_interval
        self.rss_limit = rss_limit
        self.max_restarts = max_restarts
        self.restarts = 0
        self.env = env
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None
        self.stdout: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self.stderr: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._tasks: list[asyncio.Task[None]] = []
        self.rss_baseline = 0
        self.rss_peak = 0
        self.rss_last = 0
        self.rss_exceeded = False
        self.rss_kills = 0
        self._killed_for_rss = 0
        self.exits: list[int] = []

    async def __aenter__(self) -> SpawnedTarget:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> tuple[str, int]:
        """Start the process and wait until it accepts connections.

        A process found above ``rss_limit`` is killed (SIGKILL to its group) and counted
        in ``rss_kills``; the runner then sees it gone and restarts it if allowed.

        Raises:
            ConfigError: it cannot be started, exits early, or never becomes ready.
        """
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *self.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,  # its own process group: stop() reaches its children
            )
        except OSError as exc:
            raise ConfigError(f"cannot start {self.argv[0]}: {exc}") from None
        found: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._tasks = [
            asyncio.create_task(self._drain(self.proc.stdout, self.stdout, found)),
            asyncio.create_task(self._drain(self.proc.stderr, self.stderr, found)),
        ]
        try:
            if self._fixed_port is None:
                self.host, self.port = await asyncio.wait_for(asyncio.shield(found), self.startup_timeout)
            await self._wait_accepting()
        except (TimeoutError, ConfigError):
            detail = self.exit_detail()
            await self.stop()
            raise ConfigError(f"{self.argv[0]} did not become ready within {self.startup_timeout}s{detail}") from None
        self._killed_for_rss = 0
        self.rss_last = read_rss(self.proc.pid)
        if not self.rss_baseline:
            self.rss_baseline = self.rss_last  # the first start's; restarts keep it and the peak
        self.rss_peak = max(self.rss_peak, self.rss_last)
        self._tasks.append(asyncio.create_task(self._sample()))
        return self.host, int(self.port or 0)

    async def _drain(
        self, stream: asyncio.StreamReader, ring: collections.deque[str], found: asyncio.Future[tuple[str, int]]
    ) -> None:
        while True:
            try:
                line = await stream.readline()
            except (ValueError, OSError):  # an over-long line: skip what is buffered
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            ring.append(text)
            if not found.done():
                m = self.ready.search(text)
                if m:
                    found.set_result((m.group(1), int(m.group(2))))

    async def _wait_accepting(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise ConfigError("exited during startup")
            try:
                _r, w = await asyncio.open_connection(self.host, self.port)
                w.close()
                return
            except OSError:
                await asyncio.sleep(0.05)
        raise ConfigError("not accepting connections")

    async def _sample(self) -> None:
        while self.proc is not None and self.proc.returncode is None:
            rss = read_rss(self.proc.pid)
            if rss:
                self.rss_last = rss
                self.rss_peak = max(self.rss_peak, rss)
                if self.rss_limit is not None and rss > self.rss_limit:
                    # Recorded, then stopped: a target eating memory must not take the machine.
                    self.rss_exceeded = True
                    self.rss_kills += 1
                    self._killed_for_rss = rss
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self.proc.pid, signal.SIGKILL)
                    return
            await asyncio.sleep(self.rss_interval)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def exit_detail(self) -> str:
        if self.proc is None or self.proc.returncode is None:
            return ""
        code = self.proc.returncode
        how = f"signal {signal.Signals(-code).name}" if code < 0 and -code in signal.valid_signals() else f"code {code}"
        tail = " | ".join(list(self.stderr)[-5:])
        if self._killed_for_rss:
            how += f" (killed by the fuzzer: RSS {self._killed_for_rss >> 20} MiB above the limit)"
        return f"; target exited with {how}" + (f"; stderr: {tail}" if tail else "")

    async def wait_exit(self, timeout: float) -> int | None:
        """The exit status once the process has ended, or ``None`` if it still runs after ``timeout``."""
        if self.proc is None:
            return None
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            return None

    async def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if proc is not None and proc.returncode is not None:
            self.exits.append(proc.returncode)
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t
        self._tasks = []

    async def restart(self) -> tuple[str, int] | None:
        if self.restarts >= self.max_restarts:
            return None
        self.restarts += 1
        await self.stop()
        self.port = self._fixed_port
        try:
            return await self.start()
        except ConfigError:
            return None

    def rss_report(self) -> dict[str, int]:
        return {
            "baseline": self.rss_baseline,
            "peak": self.rss_peak,
            "last": self.rss_last,
            "killed_above_limit": self.rss_kills,
        }


def controller_command(directory: str | Path | None = None, python: str = sys.executable) -> list[str]:
    """Argv of our mock controller on 127.0.0.1 port 0 with a fresh metadata dir (no fsync)."""
    base = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="kraft-jbod-fuzz-"))
    base.mkdir(parents=True, exist_ok=True)
    config = base / "controller.properties"
    config.write_text(
        "node.id=3000\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={base / 'meta'}\n",
        encoding="utf-8",
    )
    return [python, "-m", "kraft_jbod.cli", "controller", "--config", str(config), "--no-fsync", "--log-level", "ERROR"]
