"""What a leader knows of each voter's fetching: DescribeQuorum's per-voter state.

A leader keeps one :class:`FetchProgress` per other voter of its epoch (a new epoch starts
them blank: -1 everywhere) and updates it on every fetch it accepts (not one answered with a
diverging epoch or an error), as Kafka's leader does:

* ``end_offset``: the offset the voter fetched from (its log end).
* ``last_fetch_ms``: when it last fetched.
* ``last_caught_up_ms``: the last time its log end was known to match the leader's: the
  time of a fetch at (or past) the leader's log end of that moment, or, when a fetch reaches
  the leader's log end as it was at the previous fetch, the time of that previous fetch
  (the voter held everything the leader held then).

Times are the caller's clock (the core's monotonic milliseconds); the shell turns them into
wall-clock times for the wire.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class FetchProgress:
    end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1

    def fetched(self, fetch_offset: int, leader_end: int, now_ms: int) -> None:
        """An accepted fetch from ``fetch_offset`` while the leader's log ends at ``leader_end``."""
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif self.leader_end_at_last_fetch > 0 and fetch_offset >= self.leader_end_at_last_fetch:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leader_end_at_last_fetch = leader_end
        self.last_fetch_ms = max(self.last_fetch_ms, now_ms)
        self.end_offset = fetch_offset
