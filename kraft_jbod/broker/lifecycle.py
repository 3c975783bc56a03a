"""The broker lifecycle as a table: (state, input) -> (effect, next state).

States follow Kafka's BrokerState: STARTING until the controller says we caught up,
RECOVERY (caught up, still fenced) until a heartbeat answers IsFenced=false, RUNNING,
PENDING_CONTROLLED_SHUTDOWN after a shutdown request while RUNNING (heartbeats carry
WantShutDown) until ShouldShutDown, then SHUTTING_DOWN; a shutdown requested in any other
state skips the controlled part, as Kafka's does.
What is not in the table is an error (h2 ``stream.py`` style): the shell
must never feed an input the state cannot take.

Rule 1 (WantFence): a broker asks to be unfenced only once the controller said it caught
up, its first image is published, and, with several log directories (KIP-858), no
replica-to-directory assignment is still queued. Once RUNNING it never asks to be fenced.
Rule 2 (OfflineLogDirs): every directory that ever failed is sent in every heartbeat
until the process restarts. A failure counts as reported once a heartbeat carrying it
got an error-free answer.
Rule 4 (KIP-1066, cordoned.log.dirs): from the first caught-up answer on, at
metadata.version 4.3-IV0 or later, every heartbeat (v2) carries the cordoned directories.
Rule 3 (log.dir.failure.timeout.ms): if a failure is still unreported after the timeout
and the broker leads a partition in that directory, the broker shuts down.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from kraft_jbod.errors import KraftJbodError
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraft_jbod.wire.primitives import uuid_signed_key


class State(enum.Enum):
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"


class Input(enum.Enum):
    CAUGHT_UP = "caught up"
    UNFENCED = "unfenced"
    FENCED = "fenced by the controller"
    SHUTDOWN_REQUESTED = "shutdown requested"
    SHOULD_SHUT_DOWN = "controller says shut down"
    DIR_FAILURE_TIMEOUT = "directory failure not reported in time"
    METADATA_DIR_FAILED = "metadata directory failed"


class Effect(enum.Enum):
    NONE = "none"
    PUBLISH_RUNNING = "running"
    STOP = "stop"
    HALT = "halt"


class LifecycleError(KraftJbodError):
    """An input the current state does not accept (a bug in the shell)."""


S, In, E = State, Input, Effect
_TABLE: dict[tuple[State, Input], tuple[Effect, State]] = {
    (S.STARTING, In.CAUGHT_UP): (E.NONE, S.RECOVERY),
    (S.RECOVERY, In.UNFENCED): (E.PUBLISH_RUNNING, S.RUNNING),
    (S.RUNNING, In.FENCED): (E.NONE, S.RECOVERY),
    (S.STARTING, In.SHUTDOWN_REQUESTED): (E.STOP, S.SHUTTING_DOWN),
    # Kafka's BrokerLifecycleManager runs a controlled shutdown only from RUNNING: in any
    # other state it skips it and shuts down at once; a second request changes nothing.
    (S.RECOVERY, In.SHUTDOWN_REQUESTED): (E.STOP, S.SHUTTING_DOWN),
    (S.RUNNING, In.SHUTDOWN_REQUESTED): (E.NONE, S.PENDING_CONTROLLED_SHUTDOWN),
    (S.PENDING_CONTROLLED_SHUTDOWN, In.SHUTDOWN_REQUESTED): (E.NONE, S.PENDING_CONTROLLED_SHUTDOWN),
    (S.PENDING_CONTROLLED_SHUTDOWN, In.SHOULD_SHUT_DOWN): (E.STOP, S.SHUTTING_DOWN),
}
for _s in (S.STARTING, S.RECOVERY, S.RUNNING, S.PENDING_CONTROLLED_SHUTDOWN):
    _TABLE[(_s, In.DIR_FAILURE_TIMEOUT)] = (E.HALT, S.SHUTTING_DOWN)
    _TABLE[(_s, In.METADATA_DIR_FAILED)] = (E.HALT, S.SHUTTING_DOWN)


def transition(state: State, event: Input) -> tuple[Effect, State]:
    """Raises LifecycleError for a pair the table does not hold."""
    try:
        return _TABLE[(state, event)]
    except KeyError:
        raise LifecycleError(f"{event.value!r} cannot happen in state {state.value}") from None


@dataclass
class Lifecycle:
    """Lifecycle state plus what heartbeats carry; pure (time is passed in)."""

    broker_id: int
    multi_dir: bool
    failure_timeout_ms: int = 30000
    state: State = State.STARTING
    epoch: int = -1
    image_published: bool = False
    offline_dirs: dict[uuid.UUID, int] = field(default_factory=dict)  # dir -> failure time (ms)
    reported: set[uuid.UUID] = field(default_factory=set)
    history: list[tuple[State, Input, State]] = field(default_factory=list)
    # Rule 4 (KIP-1066): the cordoned dirs configured (cordoned.log.dirs or a command), and
    # what heartbeats carry: None until the first caught-up answer (Kafka reads the config
    # then, so that dynamic changes have arrived), the configured set afterwards.
    configured_cordoned: set[uuid.UUID] = field(default_factory=set)
    cordoned: set[uuid.UUID] | None = None

    def feed(self, event: Input) -> Effect:
        effect, nxt = transition(self.state, event)
        self.history.append((self.state, event, nxt))
        self.state = nxt
        return effect

    def want_fence(self, queued_assignments: int) -> bool:
        """Rule 1."""
        if self.state in (State.RUNNING, State.PENDING_CONTROLLED_SHUTDOWN):
            return False
        ready = self.state is State.RECOVERY and self.image_published
        if self.multi_dir and queued_assignments > 0:
            ready = False
        return not ready

    def dir_failed(self, directory: uuid.UUID, now_ms: int) -> bool:
        """Record a failure; False when it was already known."""
        if directory in self.offline_dirs:
            return False
        self.offline_dirs[directory] = now_ms
        return True

    def set_cordoned(self, dirs: set[uuid.UUID]) -> None:
        """A change of the cordoned dirs; heartbeats carry it once caught up (Rule 4)."""
        self.configured_cordoned = set(dirs)
        if self.cordoned is not None:
            self.cordoned = set(dirs)

    def heartbeat(
        self, metadata_offset: int, queued_assignments: int, cordon_supported: bool = False
    ) -> BrokerHeartbeatRequest:
        """The next heartbeat (Rule 2: the whole accumulated OfflineLogDirs, Kafka's order;
        Rule 4: CordonedLogDirs once caught up, when metadata.version supports it)."""
        cordoned = None
        if cordon_supported and self.cordoned is not None:
            cordoned = sorted(self.cordoned, key=uuid_signed_key)
        return BrokerHeartbeatRequest(
            broker_id=self.broker_id,
            broker_epoch=self.epoch,
            current_metadata_offset=metadata_offset,
            want_fence=self.want_fence(queued_assignments),
            want_shut_down=self.state is State.PENDING_CONTROLLED_SHUTDOWN,
            offline_log_dirs=sorted(self.offline_dirs, key=uuid_signed_key),
            cordoned_log_dirs=cordoned,
        )

    def on_heartbeat(self, sent: BrokerHeartbeatRequest, resp: BrokerHeartbeatResponse) -> list[Effect]:
        """Inputs derived from an answer, fed through the table; the effects in order."""
        if resp.error_code != 0:
            return []
        self.reported.update(sent.offline_log_dirs)
        effects: list[Effect] = []
        if self.state is State.STARTING and resp.is_caught_up:
            effects.append(self.feed(Input.CAUGHT_UP))
            self.cordoned = set(self.configured_cordoned)
        if self.state is State.RECOVERY and not resp.is_fenced and not sent.want_fence:
            effects.append(self.feed(Input.UNFENCED))
        elif self.state is State.RUNNING and resp.is_fenced:
            effects.append(self.feed(Input.FENCED))
        if self.state is State.PENDING_CONTROLLED_SHUTDOWN and resp.should_shut_down:
            effects.append(self.feed(Input.SHOULD_SHUT_DOWN))
        return effects

    def overdue_failures(self, now_ms: int) -> list[uuid.UUID]:
        """Failed directories still unreported after the timeout (Rule 3 asks the caller
        whether it leads partitions there)."""
        return [
            d for d, t in self.offline_dirs.items() if d not in self.reported and now_ms - t >= self.failure_timeout_ms
        ]
