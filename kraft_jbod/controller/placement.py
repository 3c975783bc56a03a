"""Replica placement for new partitions: pure and deterministic.

Strategy: the classic rack-unaware round robin. Partition ``p``'s first replica is
broker ``(start + p) mod n``; followers sit at distinct offsets ``1 + (shift + j) mod
(n - 1)`` from it, and ``shift`` grows by one every ``n`` partitions so consecutive rounds
do not repeat the same follower sets.

Invariants: every returned list has ``replication_factor`` distinct broker ids taken
from ``brokers``; the same inputs give the same output (the state machine must be
replayable, so it never draws random numbers).
"""

from __future__ import annotations

from collections.abc import Sequence


def place_replicas(
    brokers: Sequence[int], num_partitions: int, replication_factor: int, *, start: int = 0, shift: int = 0
) -> list[list[int]]:
    """Replica lists for ``num_partitions`` partitions over ``brokers`` (already sorted).

    Raises:
        ValueError: ``replication_factor`` is not in 1..len(brokers), or ``num_partitions`` < 0.
    """
    n = len(brokers)
    if not 1 <= replication_factor <= n:
        raise ValueError(f"replication factor {replication_factor} needs 1..{n} brokers")
    if num_partitions < 0:
        raise ValueError(f"negative partition count {num_partitions}")
    first_base = start % n
    step = shift % n
    out: list[list[int]] = []
    for p in range(num_partitions):
        if p > 0 and p % n == 0:
            step += 1
        first = (first_base + p) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[(first + 1 + (step + j) % (n - 1)) % n])
        out.append(replicas)
    return out
