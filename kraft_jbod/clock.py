"""Injectable clocks: the controller's sense of time, so tests advance it instead of sleeping.

Two implementations of one small protocol:

* :class:`SystemClock` reads ``time.monotonic_ns`` / ``time.time`` and sleeps with
  ``asyncio.sleep``: what production uses.
* :class:`ManualClock` holds its time in integers and only moves when told to
  (:meth:`ManualClock.advance`). ``sleep`` parks the caller on a future that ``advance``
  resolves once the clock reaches the sleeper's deadline.

Invariants:

* Monotonic time never goes backwards (``advance`` refuses a negative step; ``set_ms``
  refuses an earlier time). Wall time moves by the same steps.
* A sleeper on a :class:`ManualClock` wakes only when the clock has reached its deadline,
  never because real time passed; sleepers wake in deadline order.
* Both clocks count in integer milliseconds, as the controller's state machine does.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """What the server needs of time: two readings and an awaitable sleep."""

    def monotonic_ms(self) -> int:
        """Milliseconds on a clock that never goes back (session timeouts, deadlines)."""
        ...

    def wall_ms(self) -> int:
        """Milliseconds since the epoch (record batch timestamps)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


class SystemClock:
    """Real time."""

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that moves only when :meth:`advance` (or :meth:`set_ms`) is called.

    ``start_ms`` is the monotonic reading at creation; ``wall_start_ms`` the wall reading
    (default: a fixed instant, 2024-01-01T00:00:00Z, so logs written by a test repeat).
    """

    def __init__(self, start_ms: int = 0, *, wall_start_ms: int = 1_704_067_200_000) -> None:
        if start_ms < 0:
            raise ValueError("start_ms must not be negative")
        self._now = start_ms
        self._wall_offset = wall_start_ms - start_ms
        # (deadline, sequence, future): the sequence keeps equal deadlines in FIFO order.
        self._sleepers: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def monotonic_ms(self) -> int:
        return self._now

    def wall_ms(self) -> int:
        return self._now + self._wall_offset

    @property
    def sleepers(self) -> int:
        """How many sleeps are waiting (cancelled ones excluded)."""
        return sum(1 for _, _, fut in self._sleepers if not fut.done())

    async def sleep(self, seconds: float) -> None:
        ms = max(0, round(seconds * 1000))
        if ms == 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + ms, next(self._seq), fut))
        await fut

    def advance(self, ms: int) -> int:
        """Move time forward by ``ms`` and wake every sleeper whose deadline passed.

        Returns how many sleepers were woken. Woken coroutines run at the loop's next
        turn; ``await clock.settle()`` gives them that turn.

        Raises:
            ValueError: ``ms`` is negative.
        """
        if ms < 0:
            raise ValueError(f"a clock cannot go back ({ms} ms)")
        return self._move_to(self._now + ms)

    def set_ms(self, now_ms: int) -> int:
        """Move time to ``now_ms`` (not earlier than now); returns the sleepers woken.

        Raises:
            ValueError: ``now_ms`` is earlier than the current reading.
        """
        if now_ms < self._now:
            raise ValueError(f"a clock cannot go back (from {self._now} to {now_ms})")
        return self._move_to(now_ms)

    def _move_to(self, now_ms: int) -> int:
        self._now = now_ms
        woken = 0
        while self._sleepers and self._sleepers[0][0] <= now_ms:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)
                woken += 1
        return woken

    async def settle(self, turns: int = 5) -> None:
        """Give woken coroutines a few loop turns (bounded: never loops forever)."""
        for _ in range(max(1, turns)):
            await asyncio.sleep(0)

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now})"


SYSTEM_CLOCK = SystemClock()
