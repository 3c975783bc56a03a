"""What every API handler receives: the image, the controller's settings and its soft state.

Handlers are plain functions ``handler(ctx, call, request) -> Outcome`` living in
``kraft_jbod.controller.apis``; they read ``ctx.image``, may change only soft state
(``ctx.sessions``), and return the records they propose. ``state.py`` routes requests
to them through its table.

Soft state is what a restart forgets and Kafka keeps in memory too: the time of each
broker's last heartbeat and the metadata offset it last reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kraft_jbod.controller.image import MetadataImage
from kraft_jbod.controller.profiles import Profile
from kraft_jbod.wire.message import Message

RecordAndVersion = tuple[Message, int]


@dataclass
class Outcome:
    """What one request produced: the response, and records to commit before sending it."""

    response: Message
    records: list[RecordAndVersion]


@dataclass(frozen=True, slots=True)
class Call:
    """The per-request facts a handler may need besides the body."""

    api_version: int
    now_ms: int
    next_offset: int  # log offset the first proposed record will get
    principal: str | None = None


class Sessions:
    """Heartbeat times and reported metadata offsets (soft: not in the log)."""

    __slots__ = ("last_contact", "metadata_offset")

    def __init__(self) -> None:
        self.last_contact: dict[int, int] = {}
        self.metadata_offset: dict[int, int] = {}

    def forget(self, broker_id: int) -> None:
        self.last_contact.pop(broker_id, None)
        self.metadata_offset.pop(broker_id, None)

    def valid(self, broker_id: int, now_ms: int, timeout_ms: int) -> bool:
        """A broker never heard from starts its session now (as after a controller restart)."""
        last = self.last_contact.setdefault(broker_id, now_ms)
        return now_ms - last <= timeout_ms

    def lowest_active_offset(self, image: MetadataImage) -> int:
        """The lowest metadata offset any active broker reported (max long when none is active)."""
        lowest: int | None = None
        for b, reg in image.brokers.items():
            if reg.active:
                off = self.metadata_offset.get(b, -1)
                lowest = off if lowest is None or off < lowest else lowest
        return (1 << 63) - 1 if lowest is None else lowest


@dataclass
class ControllerContext:
    """Settings plus the image and the soft state; one per controller."""

    cluster_id: str
    node_id: int
    profile: Profile
    image: MetadataImage
    session_timeout_ms: int = 9000
    heartbeat_interval_ms: int = 2000
    default_replication_factor: int = 1
    default_num_partitions: int = 1
    controller_endpoints: list[tuple[str, int]] = field(default_factory=list)
    sessions: Sessions = field(default_factory=Sessions)

    @property
    def metadata_version(self) -> int:
        return self.image.metadata_version
