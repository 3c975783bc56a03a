"""The broker heartbeat state machine, as a table.

Strategy: a heartbeat is first reduced to one ``HbInput`` symbol (from the request's
WantFence/WantShutDown flags and a few facts the state machine supplies); the table
``TRANSITIONS[(current, input)]`` then gives the effect to carry out and the next state.
A pair missing from the table is a bug in the classifier, never a peer's fault, and
raises ``KeyError``-free :class:`HeartbeatTableError` so it cannot pass silently.

Rules (Kafka's ``BrokerHeartbeatManager.calculateNextBrokerState``):

* Rule 1: SHUTDOWN_NOW is only ever a *next* state. A broker's current state is
  derived from its registration: fenced -> FENCED, in controlled shutdown ->
  CONTROLLED_SHUTDOWN, else UNFENCED.
* Rule 2: a fenced broker unfences only when it asks (WantFence false) and has caught
  up to its own registration record (and, in the kip profile, has no UNASSIGNED
  replicas when it has several directories).
* Rule 3: a broker in controlled shutdown leaves it (SHUTDOWN_NOW) only when it leads
  nothing and every active broker has replayed past its controlled-shutdown record.
"""

from __future__ import annotations

import enum
from typing import Final

from kraft_jbod.errors import KraftJbodError


class HbState(enum.Enum):
    FENCED = "FENCED"
    UNFENCED = "UNFENCED"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    SHUTDOWN_NOW = "SHUTDOWN_NOW"

    @property
    def fenced(self) -> bool:
        """What the heartbeat response's IsFenced says for this next state."""
        return self in (HbState.FENCED, HbState.SHUTDOWN_NOW)

    @property
    def should_shut_down(self) -> bool:
        return self is HbState.SHUTDOWN_NOW


class HbInput(enum.Enum):
    FENCE_AND_SHUTDOWN = "want fence and shutdown"
    SHUTDOWN_LEADING = "want shutdown, leads partitions"
    SHUTDOWN_IDLE = "want shutdown, leads nothing"
    FENCE = "want fence"
    UNFENCE_READY = "want unfence, caught up"
    UNFENCE_NOT_READY = "want unfence, not ready"
    SHUTDOWN_PENDING = "in controlled shutdown, not done"
    SHUTDOWN_CLEAR = "in controlled shutdown, done"


class HbEffect(enum.Enum):
    NONE = "none"
    FENCE = "fence"  # ISR/leader removal, then a fencing registration change
    UNFENCE = "unfence"  # unfencing registration change, then leader elections
    ENTER_CONTROLLED_SHUTDOWN = "enter controlled shutdown"


class HeartbeatTableError(KraftJbodError):
    """A (state, input) pair the table does not define: a classifier bug."""


S, In, E = HbState, HbInput, HbEffect

TRANSITIONS: Final[dict[tuple[HbState, HbInput], tuple[HbEffect, HbState]]] = {
    (S.FENCED, In.FENCE_AND_SHUTDOWN): (E.FENCE, S.SHUTDOWN_NOW),
    (S.FENCED, In.SHUTDOWN_LEADING): (E.FENCE, S.SHUTDOWN_NOW),
    (S.FENCED, In.SHUTDOWN_IDLE): (E.FENCE, S.SHUTDOWN_NOW),
    (S.FENCED, In.FENCE): (E.NONE, S.FENCED),
    (S.FENCED, In.UNFENCE_READY): (E.UNFENCE, S.UNFENCED),
    (S.FENCED, In.UNFENCE_NOT_READY): (E.NONE, S.FENCED),
    (S.UNFENCED, In.FENCE_AND_SHUTDOWN): (E.FENCE, S.SHUTDOWN_NOW),
    (S.UNFENCED, In.FENCE): (E.FENCE, S.FENCED),
    (S.UNFENCED, In.SHUTDOWN_LEADING): (E.ENTER_CONTROLLED_SHUTDOWN, S.CONTROLLED_SHUTDOWN),
    (S.UNFENCED, In.SHUTDOWN_IDLE): (E.FENCE, S.SHUTDOWN_NOW),
    (S.UNFENCED, In.UNFENCE_READY): (E.NONE, S.UNFENCED),
    (S.UNFENCED, In.UNFENCE_NOT_READY): (E.NONE, S.UNFENCED),
    (S.CONTROLLED_SHUTDOWN, In.SHUTDOWN_PENDING): (E.NONE, S.CONTROLLED_SHUTDOWN),
    (S.CONTROLLED_SHUTDOWN, In.SHUTDOWN_CLEAR): (E.FENCE, S.SHUTDOWN_NOW),
}
del S, In, E


def classify(
    state: HbState,
    *,
    want_fence: bool,
    want_shut_down: bool,
    caught_up: bool,
    unfence_allowed: bool,
    leads_partitions: bool,
    shutdown_offset_replayed: bool,
) -> HbInput:
    """Reduce one heartbeat to its table input.

    ``unfence_allowed`` carries profile-specific vetoes (the kip profile's
    UNASSIGNED-replica rule); ``shutdown_offset_replayed`` is Rule 3's offset test.
    """
    if state is HbState.CONTROLLED_SHUTDOWN:
        if leads_partitions or not shutdown_offset_replayed:
            return HbInput.SHUTDOWN_PENDING
        return HbInput.SHUTDOWN_CLEAR
    if want_shut_down:
        if want_fence:
            return HbInput.FENCE_AND_SHUTDOWN
        return HbInput.SHUTDOWN_LEADING if leads_partitions else HbInput.SHUTDOWN_IDLE
    if want_fence:
        return HbInput.FENCE
    if caught_up and unfence_allowed:
        return HbInput.UNFENCE_READY
    return HbInput.UNFENCE_NOT_READY


def transition(state: HbState, event: HbInput) -> tuple[HbEffect, HbState]:
    """Look the pair up in the table.

    Raises:
        HeartbeatTableError: the pair is not in the table.
    """
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise HeartbeatTableError(f"no heartbeat transition from {state.value} on {event.value!r}") from None
