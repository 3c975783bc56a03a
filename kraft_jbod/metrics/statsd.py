"""StatsD over UDP (asyncio-dgram): counter deltas, gauge values and timings, in batches.

Strategy: :func:`lines` is pure: it turns a registry and the counter values last sent into
StatsD lines (``name:delta|c``, ``name:value|g``, ``name:ms|ms``) and the new baseline.
:class:`StatsdEmitter` sends those lines every ``interval`` seconds of its clock, packed
into datagrams of at most ``max_datagram`` bytes (1432: fits one Ethernet frame with
IPv4/IPv6 and UDP headers), and once more on close.

Invariants: a counter whose value did not move sends nothing; UDP send errors are logged
and counted, never raised into the server (metrics must not take the controller down).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kraft_jbod.clock import SYSTEM_CLOCK, Clock
from kraft_jbod.metrics.registry import Counter, Gauge, Labels, Registry, statsd_name

log = logging.getLogger(__name__)
MAX_DATAGRAM = 1432


def lines(
    registry: Registry, sent: dict[tuple[str, Labels], float], *, tags: bool = True, prefix: str = ""
) -> list[str]:
    """StatsD lines for what changed since ``sent`` (updated in place)."""
    out: list[str] = []
    for m in registry.metrics():
        if isinstance(m, Counter):
            for labels, v in m.series():
                key = (m.name, labels)
                delta = v - sent.get(key, 0)
                if delta:
                    name, suffix = statsd_name(prefix + m.name, labels, tags=tags)
                    out.append(f"{name}:{_num(delta)}|c{suffix}")
                    sent[key] = v
        elif isinstance(m, Gauge):
            for labels, v in m.series():
                name, suffix = statsd_name(prefix + m.name, labels, tags=tags)
                out.append(f"{name}:{_num(v)}|g{suffix}")
    events, registry.timer_events = registry.timer_events, []
    for tname, labels, seconds in events:
        name, suffix = statsd_name(prefix + tname, labels, tags=tags)
        out.append(f"{name}:{_num(round(seconds * 1000, 3))}|ms{suffix}")
    return out


def _num(v: float) -> str:
    return str(int(v)) if v == int(v) else repr(float(v))


def pack(items: list[str], max_datagram: int = MAX_DATAGRAM) -> list[bytes]:
    """Newline-joined datagrams no bigger than ``max_datagram`` (a longer line goes alone)."""
    out: list[bytes] = []
    cur = b""
    for line in items:
        b = line.encode()
        if cur and len(cur) + 1 + len(b) > max_datagram:
            out.append(cur)
            cur = b""
        cur = b if not cur else cur + b"\n" + b
    if cur:
        out.append(cur)
    return out


class StatsdEmitter:
    """``async with StatsdEmitter(registry, ("127.0.0.1", 8125)):`` sends until closed."""

    def __init__(
        self,
        registry: Registry,
        address: tuple[str, int],
        *,
        interval: float = 1.0,
        clock: Clock = SYSTEM_CLOCK,
        tags: bool = True,
        prefix: str = "",
    ) -> None:
        self.registry = registry
        self.address = address
        self.interval = interval
        self.clock = clock
        self.tags = tags
        self.prefix = prefix
        self._sent: dict[tuple[str, Labels], float] = {}
        self._stream: Any = None
        self._task: asyncio.Task[None] | None = None
        self.datagrams_sent = 0
        self.send_errors = 0

    async def __aenter__(self) -> StatsdEmitter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Raises: OSError: the address cannot be resolved or connected."""
        import asyncio_dgram

        self._stream = await asyncio_dgram.connect(self.address)
        self._task = asyncio.create_task(self._run(), name="statsd-emitter")

    async def flush(self) -> int:
        """Send what changed now; returns the datagrams sent."""
        if self._stream is None:
            return 0
        n = 0
        for dgram in pack(lines(self.registry, self._sent, tags=self.tags, prefix=self.prefix)):
            try:
                await self._stream.send(dgram)
                n += 1
            except OSError as exc:
                self.send_errors += 1
                log.warning("statsd send to %s failed: %s", self.address, exc)
        self.datagrams_sent += n
        return n

    async def _run(self) -> None:
        while True:
            await self.clock.sleep(self.interval)
            await self.flush()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
        if self._stream is not None:
            await self.flush()
            self._stream.close()
            self._stream = None
