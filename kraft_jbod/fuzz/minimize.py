"""Shrinking a failing input to a small one that still fails the same way.

Strategy (delta debugging, bounded):

* The bytes are cut into frames (``mutators.split_frames``). First each complete frame
  is tried alone; then chunks of the remaining frame's payload are removed, halving the
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

import struct
from collections.abc import Awaitable, Callable

from kraft_jbod.fuzz import mutators

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
            payload = await _ddmin(frames[0], _frame, still_fails, b)
            payload = await _zero(payload, _frame, still_fails, b)
            return _frame(payload), b.used
        return b"".join(_frame(f) for f in frames), b.used

    def raw(x: bytes) -> bytes:
        return x

    out = await _ddmin(data, raw, still_fails, b)
    return await _zero(out, raw, still_fails, b), b.used
