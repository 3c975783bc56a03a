"""Session expiry (``Sessions.pop_expired``) finds exactly the sessions the rule names.

The sessions keep a heap of contact times so that a tick costs what expired rather than
every session; these tests hold it to the rule itself (a contact at ``t`` has expired at
``now`` when ``t < now`` and ``t + timeout < now``) checked over every session, through
random touches, forgets, clocks that stand still or step back, and odd timeouts.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft_jbod.controller.context import Sessions


def _by_the_rule(contact: dict[int, tuple[int, int]], now_ms: int, timeout_ms: int) -> list[tuple[int, int]]:
    return [(b, e) for b, (e, t) in sorted(contact.items()) if now_ms > t and t + timeout_ms < now_ms]


def test_expiry_at_the_exact_deadline() -> None:
    sessions = Sessions()
    sessions.touch(7, 3, 1_000)
    assert sessions.pop_expired(10_000, 9_000) == []  # 1,000 + 9,000 is not below 10,000
    assert sessions.pop_expired(10_001, 9_000) == [(7, 3)]
    assert sessions.contact == {}
    assert sessions.pop_expired(20_000, 9_000) == []


def test_a_later_touch_keeps_the_session() -> None:
    sessions = Sessions()
    sessions.touch(1, 1, 0)
    sessions.touch(1, 1, 5_000)
    assert sessions.pop_expired(9_500, 9_000) == []  # the entry of the first touch is left behind
    assert sessions.contact == {1: (1, 5_000)}
    assert sessions.pop_expired(14_001, 9_000) == [(1, 1)]


def test_a_forgotten_session_never_expires() -> None:
    sessions = Sessions()
    sessions.touch(2, 4, 0)
    sessions.forget(2)
    assert sessions.pop_expired(100_000, 9_000) == []


def test_expired_in_broker_id_order() -> None:
    sessions = Sessions()
    for b, t in ((5, 10), (3, 30), (9, 0), (1, 20)):
        sessions.touch(b, b * 10, t)
    assert sessions.pop_expired(10_000, 1_000) == [(1, 10), (3, 30), (5, 50), (9, 90)]


def test_the_heap_stays_bounded_when_the_clock_stands_still() -> None:
    sessions = Sessions()
    for _ in range(10_000):
        sessions.touch(1, 1, 0)
    assert len(sessions._by_contact) <= 4 * len(sessions.contact) + 65
    assert sessions.pop_expired(10_000, 1_000) == [(1, 1)]


_step = st.one_of(
    st.tuples(st.just("touch"), st.integers(0, 7), st.integers(0, 3), st.integers(-50, 50)),
    st.tuples(st.just("forget"), st.integers(0, 7), st.just(0), st.just(0)),
    st.tuples(st.just("expire"), st.just(0), st.integers(-20, 40), st.integers(0, 60)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=120))
def test_same_sessions_expire_as_by_the_rule(steps: list[tuple[str, int, int, int]]) -> None:
    sessions = Sessions()
    model: dict[int, tuple[int, int]] = {}
    now = 0
    for op, broker, a, b in steps:
        if op == "touch":
            now += b // 10  # the clock mostly moves on, sometimes stands still or steps back
            sessions.touch(broker, a, now)
            model[broker] = (a, now)
        elif op == "forget":
            sessions.forget(broker)
            model.pop(broker, None)
        else:
            timeout, at = a, now + b
            expected = _by_the_rule(model, at, timeout)
            for gone, _ in expected:
                del model[gone]
            assert sessions.pop_expired(at, timeout) == expected
        assert sessions.contact == model
