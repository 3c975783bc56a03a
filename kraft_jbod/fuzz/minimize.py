"""Shrinking a failing input to a small one that still fails the same way.

Strategy (delta debugging, bounded):

* The bytes are cut into frames (``mutators.split_frames``). First each complete frame
  is tried alone, then its prefixes of 8, 16, 32... bytes; then chunks of the remaining
  frame's payload are removed, halving the
  chunk size down to one byte (ddmin's complement step). Payloads are re-framed with a
  truthful size prefix after each cut, so a candidate is never "bytes the server waits
  for". An input whose tail is partial or invalid is shrunk as raw bytes instead, since
  its prefix is part of what fails.
* Then each remaining byte is tried as 0x00 (simpler values make a repro readable).
* ``still_fails(candidate)`` is the caller's test: it replays the candidate (on a fresh
  connection, or a fresh process for crashes) and says whether the same failure shows.
  At most ``budget`` calls are made; the smallest failing input found so far is returned.

Invariant: the result always failed ``still_fails`` (or is the input itself).
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from kraft_jbod.fuzz import mutators
from kraft_jbod.fuzz.runner import Finding, Outcome, TargetWatch, probe_server, replay

_I32 = struct.Struct(">i")

Predicate = Callable[[bytes], Awaitable[bool]]


class _Budget:
    def __init__(self, calls: int) -> None:
        self.left = calls
        self.used = 0

    def take(self) -> bool:
        if self.left <= 0:
            return False
        self.left -= 1
        self.used += 1
        return True


async def _ddmin(units: bytes, build: Callable[[bytes], bytes], fails: Predicate, budget: _Budget) -> bytes:
    current = units
    chunk = max(1, len(current) // 2)
    while chunk >= 1 and current:
        i = 0
        shrunk = False
        while i < len(current):
            candidate = current[:i] + current[i + chunk :]
            if not budget.take():
                return current
            if await fails(build(candidate)):
                current = candidate
                shrunk = True
            else:
                i += chunk
        if not shrunk:
            chunk //= 2
    return current


async def _zero(units: bytes, build: Callable[[bytes], bytes], fails: Predicate, budget: _Budget) -> bytes:
    current = bytearray(units)
    for i in range(len(current)):
        if current[i] == 0:
            continue
        candidate = bytearray(current)
        candidate[i] = 0
        if not budget.take():
            break
        if await fails(build(bytes(candidate))):
            current = candidate
    return bytes(current)


async def _shortest_prefix(units: bytes, build: Callable[[bytes], bytes], fails: Predicate, budget: _Budget) -> bytes:
    """Truncation first: most parser bugs sit in the first bytes, and one cut saves many ddmin steps."""
    n = 8
    while n < len(units):
        if not budget.take():
            break
        if await fails(build(units[:n])):
            return units[:n]
        n *= 2
    return units


def _frame(payload: bytes) -> bytes:
    return _I32.pack(len(payload)) + payload


async def minimize(data: bytes, still_fails: Predicate, *, budget: int = 200) -> tuple[bytes, int]:
    """The smallest input found that still fails, and the number of replays it took."""
    b = _Budget(budget)
    split = mutators.split_frames(data)
    if split.tail == "clean" and split.frames:
        frames = list(split.frames)
        if len(frames) > 1:
            for f in frames:
                if not b.take():
                    break
                if await still_fails(_frame(f)):
                    frames = [f]
                    break
        if len(frames) == 1:
            payload = await _shortest_prefix(frames[0], _frame, still_fails, b)
            payload = await _ddmin(payload, _frame, still_fails, b)
            payload = await _zero(payload, _frame, still_fails, b)
            return _frame(payload), b.used
        return b"".join(_frame(f) for f in frames), b.used

    def raw(x: bytes) -> bytes:
        return x

    out = await _ddmin(data, raw, still_fails, b)
    return await _zero(out, raw, still_fails, b), b.used


Restart = Callable[[], Awaitable[tuple[str, int] | None]]


async def minimize_finding(
    finding: Finding,
    host: str,
    port: int,
    *,
    timeout: float,
    watch: TargetWatch | None = None,
    restart: Restart | None = None,
    budget: int = 120,
) -> bytes | None:
    """Shrink a finding's bytes, replaying each candidate on a fresh connection.

    "Fails the same way" means the same outcome class: ``gone`` (the target process died
    or stopped accepting), ``timeout``, ``bad_answer`` or ``silent``. Before each replay the
    target must answer a probe; a target left dead or stuck by the previous replay is
    restarted with ``restart`` (a spawned target), and without one minimization stops.
    A crash or hang must fail once more on a freshly restarted target before its minimized
    bytes are returned. Returns the minimized bytes, or ``None`` when the failure does not
    reproduce alone.
    """
    addr: dict[str, Any] = {"host": host, "port": port}
    watch = watch or TargetWatch()

    async def healthy() -> bool:
        if watch.alive() and await probe_server(addr["host"], addr["port"], timeout) == "answering":
            return True
        if restart is None:
            return False
        new = await restart()
        if new is None:
            return False
        addr["host"], addr["port"] = new
        return await probe_server(addr["host"], addr["port"], timeout) == "answering"

    async def fails(candidate: bytes) -> bool:
        if not await healthy():
            raise _Unhealthy
        result = await replay(addr["host"], addr["port"], candidate, timeout, watch)
        if finding.outcome is Outcome.GONE:
            if result.outcome is Outcome.GONE:
                return True
            if result.outcome is Outcome.CLOSED:
                # The socket may close a moment before the process is reaped.
                await asyncio.sleep(0.05)
                return not watch.alive() or await probe_server(addr["host"], addr["port"], timeout) == "refused"
            return False
        return result.outcome is finding.outcome

    try:
        culprit: bytes | None = None
        # The case in flight first, then (for a crash) the other recent ones, newest first.
        for data in [finding.case.data, *(c.data for c in reversed(finding.suspects))][: 1 + budget // 4]:
            if await fails(data):
                culprit = data
                break
        if culprit is None:
            return None
        if culprit is not finding.case.data:
            finding.extra["culprit_hex"] = culprit.hex()
        small, _used = await minimize(culprit, fails, budget=budget)
        if restart is not None and finding.outcome in (Outcome.GONE, Outcome.TIMEOUT):
            # A crash or hang may come from state built up earlier (or land late): the
            # repro counts only if it fails again on a freshly started target.
            new = await restart()
            if new is None:
                return None
            addr["host"], addr["port"] = new
            if not await fails(small):
                finding.extra["minimize_note"] = "the minimized bytes do not fail on a fresh target"
                return None
    except _Unhealthy:
        return None
    return small


class _Unhealthy(Exception):
    """The target cannot be brought back to a state where a replay means anything."""
