"""Replica placement for new partitions, the way Kafka's striped placer spreads them.

Strategy (Kafka's StripedReplicaPlacer, described in our words): the usable brokers -
registered, not shutting down, with at least one directory that is not cordoned - are
grouped by rack (no rack is a rack of its own). Each rack keeps its unfenced and its
fenced brokers in two rings, sorted by id and started at a random offset. For every
partition:

* the first replica (the preferred leader) is the next *unfenced* broker of the next rack
  that has one, starting from a rack offset that advances by one per partition;
* each further replica comes from the next rack in turn (skipping the first replica's
  rack once), taking that rack's next unfenced broker, or, when the rack has none left
  in this round, its next fenced one. Fenced brokers are therefore usable followers
  (never leaders: they are not in the ISR);
* a round ends after as many partitions as there are unfenced brokers: the ring offsets
  advance, and from then on the racks and rings are shuffled before each new round.

Errors, checked in Kafka's order (raised as :class:`PlacementError` with Kafka's text):
replication factor not positive; no unfenced usable broker; fewer usable brokers than
the replication factor.

Invariants: every list has ``replication_factor`` distinct usable brokers and starts with
an unfenced one. The randomness is a ``random.Random`` the caller seeds, so a request's
placement is reproducible (Kafka seeds from the clock; the records carry the outcome, so
replay never places anything).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from kraft_jbod.errors import KraftJbodError


class PlacementError(KraftJbodError):
    """The replicas cannot be placed; the message is Kafka's InvalidReplicationFactor text."""


@dataclass(frozen=True, slots=True)
class UsableBroker:
    broker_id: int
    rack: str | None
    fenced: bool


@dataclass
class _Ring:
    brokers: list[int] = field(default_factory=list)
    index: int = 0
    offset: int = 0
    epoch: int = 0

    def start(self, rng: random.Random) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        """The next broker of this round (``epoch``), or -1 when the round used them all."""
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch, self.index = epoch, 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


@dataclass
class _Rack:
    unfenced: _Ring = field(default_factory=_Ring)
    fenced: _Ring = field(default_factory=_Ring)

    def next_any(self, epoch: int) -> int:
        got = self.unfenced.next(epoch)
        return got if got >= 0 else self.fenced.next(epoch)


class StripedPlacer:
    """Places the partitions of one topic; build one per topic, as Kafka does."""

    def __init__(self, brokers: Iterable[UsableBroker], rng: random.Random) -> None:
        self._rng = rng
        self._racks: dict[str | None, _Rack] = {}
        self.total = 0
        self.unfenced = 0
        for b in brokers:
            rack = self._racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).brokers.append(b.broker_id)
            self.total += 1
            self.unfenced += 0 if b.fenced else 1
        for rack in self._racks.values():
            rack.unfenced.start(rng)
            rack.fenced.start(rng)
        # No rack sorts first, then names in order (Kafka's OptionalStringComparator).
        self._names: list[str | None] = sorted(self._racks, key=lambda r: (r is not None, r or ""))
        self._offset = rng.randrange(len(self._names)) if self._names else 0
        self._epoch = 0

    def check(self, replication_factor: int) -> None:
        """Raise Kafka's error for a factor these brokers cannot satisfy."""
        if replication_factor <= 0:
            raise PlacementError(
                f"Invalid replication factor {replication_factor}: the replication factor must be positive."
            )
        if self.unfenced == 0:
            raise PlacementError("All brokers are currently fenced, or have all their log directories cordoned.")
        if replication_factor > self.total:
            raise PlacementError(
                f"The target replication factor of {replication_factor} cannot be reached because only "
                f"{self.total} broker(s) are registered or some brokers have all their log directories cordoned."
            )

    def _shuffle(self) -> None:
        self._rng.shuffle(self._names)
        for rack in self._racks.values():
            self._rng.shuffle(rack.unfenced.brokers)
            self._rng.shuffle(rack.fenced.brokers)

    def place_one(self, replication_factor: int) -> list[int]:
        self.check(replication_factor)
        if self._epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self._epoch = 0
        names, epoch = self._names, self._epoch
        if self._offset == len(names):
            self._offset = 0
        first_rack = self._offset
        while True:
            got = self._racks[names[first_rack]].unfenced.next(epoch)
            if got >= 0:
                out = [got]
                break
            first_rack = (first_rack + 1) % len(names)
        rack_index = self._offset
        for _ in range(1, replication_factor):
            got = -1
            while got < 0:
                if rack_index == first_rack:
                    first_rack = -1  # the first replica's rack is skipped once
                else:
                    got = self._racks[names[rack_index]].next_any(epoch)
                rack_index = (rack_index + 1) % len(names)
            out.append(got)
        self._epoch += 1
        self._offset += 1
        return out

    def place(self, num_partitions: int, replication_factor: int) -> list[list[int]]:
        """Replica lists for ``num_partitions`` partitions.

        Raises:
            PlacementError: see :meth:`check`.
        """
        self.check(replication_factor)
        return [self.place_one(replication_factor) for _ in range(num_partitions)]


def place_replicas(
    brokers: list[int], num_partitions: int, replication_factor: int, *, start: int = 0, shift: int = 0
) -> list[list[int]]:
    """Plain round robin over ``brokers`` (no racks, no fencing), for benchmarks that build
    large layouts directly: partition ``p`` leads on ``brokers[(start + p) % n]``.

    Raises:
        ValueError: ``replication_factor`` is not in 1..len(brokers), or ``num_partitions`` < 0.
    """
    n = len(brokers)
    if not 1 <= replication_factor <= n:
        raise ValueError(f"replication factor {replication_factor} needs 1..{n} brokers")
    if num_partitions < 0:
        raise ValueError(f"negative partition count {num_partitions}")
    out: list[list[int]] = []
    step = shift % n
    for p in range(num_partitions):
        if p > 0 and p % n == 0:
            step += 1
        first = (start + p) % n
        followers = [brokers[(first + 1 + (step + j) % (n - 1)) % n] for j in range(replication_factor - 1)]
        out.append([brokers[first], *followers])
    return out
