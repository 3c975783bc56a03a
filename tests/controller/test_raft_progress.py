"""A leader's record of a voter's fetching (DescribeQuorum's LastFetch / LastCaughtUp)."""

from __future__ import annotations

from kraft_jbod.controller.raft.progress import FetchProgress


def test_caught_up_at_the_leaders_end_or_at_its_previous_end() -> None:
    p = FetchProgress()
    assert (p.end_offset, p.last_fetch_ms, p.last_caught_up_ms) == (-1, -1, -1)
    p.fetched(0, 10, now_ms=100)  # behind: not caught up
    assert (p.end_offset, p.last_fetch_ms, p.last_caught_up_ms) == (0, 100, -1)
    p.fetched(10, 15, now_ms=200)  # reached where the leader ended at the last fetch
    assert (p.last_fetch_ms, p.last_caught_up_ms) == (200, 100)
    p.fetched(12, 20, now_ms=300)  # short of 15: unchanged
    assert (p.end_offset, p.last_fetch_ms, p.last_caught_up_ms) == (12, 300, 100)
    p.fetched(20, 20, now_ms=400)  # at the leader's end now
    assert p.last_caught_up_ms == 400


def test_times_never_go_back() -> None:
    p = FetchProgress()
    p.fetched(5, 5, now_ms=500)
    p.fetched(5, 5, now_ms=400)
    assert (p.last_fetch_ms, p.last_caught_up_ms) == (500, 500)
