"""What every API handler receives: the image, the controller's settings and its soft state.

Handlers are plain functions ``handler(ctx, call, request) -> Outcome`` living in
``kraft_jbod.controller.apis``; they read ``ctx.image`` (or the read-only views of it
below), may change only soft state (``ctx.sessions``), and return the records they
propose. ``routes.py`` names each handler in its API's ``Route``; ``state.py`` dispatches
through that table and gives the context the :class:`Router` a handler re-dispatches
through (Envelope), so no handler imports the table.

Soft state is what a restart forgets and Kafka keeps in memory too: the time of each
broker's last heartbeat and the metadata offset it last reported.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kraft_jbod.controller.acl_image import AclImage
from kraft_jbod.controller.config_image import ConfigImage
from kraft_jbod.controller.image import BrokerInfo, MetadataImage, TopicInfo
from kraft_jbod.controller.profiles import Profile
from kraft_jbod.messages.voters_record import VotersRecord
from kraft_jbod.wire.message import Message

RecordAndVersion = tuple[Message, int]


@dataclass
class Outcome:
    """What one request produced: the response, and records to commit before sending it."""

    response: Message
    records: list[RecordAndVersion]


@dataclass
class Sliced:
    """A large request cut into requests of the same api (``bodies``, built lazily, one per
    ``next``), each handled and committed in turn by the server, and how their responses,
    in that order, make the one answer (call ``merge`` once ``bodies`` is exhausted)."""

    bodies: Iterator[Message]
    merge: Callable[[list[Message]], Message]


@dataclass(frozen=True, slots=True)
class Call:
    """The per-request facts a handler may need besides the body."""

    api_version: int
    now_ms: int
    next_offset: int  # log offset the first proposed record will get
    principal: str | None = None


class Router(Protocol):
    """The dispatch table as a handler sees it: what is served, and handling one request."""

    def served(self) -> Mapping[int, tuple[int, int]]:
        """Api key -> (lowest, highest) version the state machine answers."""
        ...

    def route(self, ctx: ControllerContext, call: Call, api_key: int, body: Message) -> Outcome:
        """Handle ``body`` as api ``api_key``.

        Raises:
            ProtocolError: the key is not served or the body is not of its request class.
        """
        ...


class Sessions:
    """Broker sessions, heartbeat contact times and reported metadata offsets (soft: not in the log).

    As Kafka 4.4's BrokerHeartbeatTracker: a session belongs to a (broker id, broker
    epoch) and exists only once that epoch has been heard from (a heartbeat), or, for a
    broker already unfenced when the controller becomes active, from that moment. A
    registration alone opens no session, and fencing does not close one: only its expiry
    (``session.timeout.ms`` without a heartbeat) does, and expiry fences the broker.
    """

    __slots__ = ("_by_contact", "activated", "contact", "cs_batch_end", "metadata_offset")

    def __init__(self) -> None:
        # broker id -> (epoch, last contact ms); written only through touch() and forget(),
        # which keep _by_contact in step
        self.contact: dict[int, tuple[int, int]] = {}
        # A min-heap of (last contact ms, broker id, epoch), one entry per touch: a tick
        # looks only at the entries old enough to have expired, not at every session. An
        # entry is current while contact still holds its (epoch, ms); later touches and
        # forget() leave the older ones behind, dropped when they reach the top.
        self._by_contact: list[tuple[int, int, int]] = []
        self.metadata_offset: dict[int, int] = {}
        # broker id -> (offset of the first record of the batch starting its controlled
        # shutdown, end offset of that batch, that first record), noted by the heartbeat
        # handler for the replay
        self.cs_batch_end: dict[int, tuple[int, int, Message]] = {}
        self.activated = False

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """Open a session for every unfenced broker, once, when the controller starts serving."""
        if self.activated:
            return
        self.activated = True
        for b, reg in image.brokers.items():
            if not reg.fenced and b not in self.contact:
                self.touch(b, reg.epoch, now_ms)

    def forget(self, broker_id: int) -> None:
        self.contact.pop(broker_id, None)
        self.metadata_offset.pop(broker_id, None)

    def forget_offset(self, broker_id: int) -> None:
        """A registration, registration change, fence or unfence record of this broker was
        replayed: Kafka's heartbeat manager re-registers the broker then and its offset is
        -1 until its next heartbeat (so a controlled shutdown waits for that heartbeat)."""
        self.metadata_offset.pop(broker_id, None)

    def touch(self, broker_id: int, epoch: int, now_ms: int) -> None:
        self.contact[broker_id] = (epoch, now_ms)
        heap = self._by_contact
        heapq.heappush(heap, (now_ms, broker_id, epoch))
        if len(heap) > 4 * len(self.contact) + 64:
            # Left-behind entries outnumber the sessions (heartbeats faster than the
            # timeout, or a clock that stands still): rebuild from the sessions alone.
            self._by_contact = [(t, b, e) for b, (e, t) in self.contact.items()]
            heapq.heapify(self._by_contact)

    @staticmethod
    def _expired(last_ms: int, now_ms: int, timeout_ms: int) -> bool:
        return now_ms > last_ms and last_ms + timeout_ms < now_ms

    def valid(self, broker_id: int, epoch: int, now_ms: int, timeout_ms: int) -> bool:
        """Whether (broker, epoch) has a session that has not expired."""
        got = self.contact.get(broker_id)
        return got is not None and got[0] == epoch and not self._expired(got[1], now_ms, timeout_ms)

    def pop_expired(self, now_ms: int, timeout_ms: int) -> list[tuple[int, int]]:
        """Remove and return every expired (broker id, epoch), in broker id order.

        A contact at ``t`` has expired when ``t < now_ms`` and ``t + timeout_ms < now_ms``
        (:meth:`_expired`), i.e. when ``t`` is below the smaller of the two bounds: the
        expired sessions are the heap's oldest entries, so the cost is that of what expired
        (and of the left-behind entries passed on the way), not of every session."""
        bound = min(now_ms, now_ms - timeout_ms)
        heap, contact = self._by_contact, self.contact
        out: list[tuple[int, int]] = []
        while heap and heap[0][0] < bound:
            t, b, e = heapq.heappop(heap)
            if contact.get(b) == (e, t):
                del contact[b]
                out.append((b, e))
        out.sort()
        return out

    def lowest_active_offset(self, image: MetadataImage) -> int:
        """The lowest metadata offset of the brokers Kafka's heartbeat manager calls active
        (unfenced, not shutting down in memory: ``cs_offset`` only, whatever the durable
        flag says), max long when none is. A broker's offset is the one its last heartbeat
        reported, or -1 once a registration record of it has been replayed since
        (:meth:`forget_offset`)."""
        lowest: int | None = None
        for b, reg in image.brokers.items():
            if not reg.fenced and reg.cs_offset < 0:
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
    unclean_check_interval_ms: int = 5 * 60 * 1000
    default_replication_factor: int = 1
    default_num_partitions: int = 1
    controller_endpoints: list[tuple[str, int]] = field(default_factory=list)
    # Static configs DescribeConfigs lists for the own node (the server sets the bound listeners).
    static_configs: dict[str, str] = field(default_factory=dict)
    leader_epoch: int = 1  # the raft leader epoch (the server sets it; DescribeQuorum reports it)
    # The live kraft.version and, at 1, the voter set of the log (controller/voters.py); the
    # server sets both after replay. Neither is a FeatureLevelRecord, so not in the image.
    kraft_version: int = 0
    voters: VotersRecord | None = None
    # The ids of controller.quorum.voters (the static voters; none with bootstrap servers):
    # each must have registered before a feature changes, as Kafka's QuorumFeatures check.
    quorum_node_ids: tuple[int, ...] = ()
    sessions: Sessions = field(default_factory=Sessions)
    # The dispatch table (state.py sets it); None only for a context built without one.
    router: Router | None = None

    # Read-only views of the image, the surface the admin API modules are written against.

    @property
    def metadata_version(self) -> int:
        return self.image.metadata_version

    @property
    def finalized_features(self) -> dict[str, int]:
        return dict(self.image.features)

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self.image.brokers

    @property
    def topics(self) -> dict[uuid.UUID, TopicInfo]:
        return self.image.topics

    @property
    def configs(self) -> ConfigImage:
        return self.image.configs

    @property
    def acls(self) -> AclImage:
        return self.image.acls

    def topic_id_of(self, name: str) -> uuid.UUID | None:
        return self.image.topic_names.get(name)
