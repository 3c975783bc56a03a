"""The typed seams of the controller's request path: what the asyncio shell needs of the
state machine, of the optional extensions (security, faults, metrics, admin channel) and
of the frame tap, written as ``Protocol``s so mypy --strict checks the whole path.

No implementation lives here; the server (``server.py``) and the extensions package
depend on these names instead of on each other's concrete classes, and the frame tap
(``capture/tap.py``) satisfies :class:`Tap` structurally without importing this module.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kraft_jbod.clock import Clock
from kraft_jbod.connection import RequestReceived
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.api_versions_response import ApiVersionsResponse
from kraft_jbod.wire.message import Message

if TYPE_CHECKING:
    from kraft_jbod.controller.context import Sliced
    from kraft_jbod.controller.image import MetadataImage
    from kraft_jbod.messages.voters_record import VotersRecord

# (record, version) pairs, as the state machine returns them and the log appends them.
RecordAndVersion = tuple[Message, int]


class Outcome(Protocol):
    """What ``StateMachine.handle`` returns: the response and the records to commit first."""

    @property
    def response(self) -> Message: ...

    @property
    def records(self) -> Sequence[RecordAndVersion]: ...


class StateMachine(Protocol):
    """The pure controller state (``controller/state.py``) as the server drives it."""

    # DescribeCluster(controllers) answers with the addresses actually bound.
    controller_endpoints: list[tuple[str, int]]
    static_configs: dict[str, str]  # DescribeConfigs of the own node lists them (the bound listeners)
    leader_epoch: int  # the raft leader epoch DescribeQuorum reports
    # The live kraft.version and, at 1, the voter set (the server sets both after replay;
    # ApiVersions and snapshots report them).
    kraft_version: int
    voters: VotersRecord | None
    image: MetadataImage  # the replayed view: snapshots write it, its size decides heap freezing

    @property
    def cluster_id(self) -> str: ...

    @property
    def node_id(self) -> int: ...

    @property
    def metadata_version(self) -> int: ...

    @property
    def finalized_features(self) -> dict[str, int]: ...

    def apply(self, offset: int, record: Message, version: int) -> None: ...

    def handle(
        self,
        api_key: int,
        api_version: int,
        body: Any,
        *,
        now_ms: int,
        next_offset: int,
        principal: str | None = None,
    ) -> Outcome: ...

    def tick(self, *, now_ms: int, next_offset: int) -> Iterable[RecordAndVersion]: ...

    def bootstrap_records(self, metadata_version: int) -> Iterable[RecordAndVersion]: ...

    def handled_api_versions(self) -> Mapping[int, tuple[int, int]]: ...

    def split(self, api_key: int, api_version: int, request: Message) -> Sliced | None:
        """Slices of a request too large to handle in one go, or None (server Rule 4)."""
        ...


class StateFactory(Protocol):
    def __call__(
        self,
        *,
        cluster_id: str,
        node_id: int,
        profile: Any,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        default_replication_factor: int,
        num_partitions: int,
        unclean_check_interval_ms: int = ...,
    ) -> StateMachine: ...


class TapConnection(Protocol):
    def received(self, data: bytes) -> None: ...

    def sent(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class Tap(Protocol):
    """A frame tap (``capture/tap.py`` FrameTap): one :class:`TapConnection` per connection."""

    def open(self, client: tuple[str, int], server: tuple[str, int]) -> TapConnection: ...


@runtime_checkable
class Peer(Protocol):
    """What a gate may do to the connection it guards."""

    peer: str
    listener: str
    closed: bool

    def respond(self, event: RequestReceived, body: Message) -> None: ...

    def close(self) -> None: ...

    def peercert(self) -> dict[str, Any] | None: ...


class Gate(Protocol):
    """One connection's checks between the read loop and the handler (SASL, ACLs, faults)."""

    @property
    def authenticated(self) -> bool:
        """True once the peer may send more than authentication requests (always on a
        listener without SASL): bigger frames are accepted and broker traffic gets priority."""
        ...

    def supported(self, base: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]: ...

    def api_versions(self, body: ApiVersionsResponse) -> ApiVersionsResponse: ...

    def admit(self, event: RequestReceived, proceed: Callable[[], None]) -> bool: ...

    def on_response(self, event: RequestReceived, body: Message) -> None: ...

    def admits_unseen(self, api_key: int) -> bool:
        """True when nothing here would act on a request of ``api_key`` (no SASL, no ACLs,
        no fault rules): the server may then answer it on its short path, without an event,
        and tells :meth:`answered_unseen` instead of :meth:`admit` and :meth:`on_response`."""
        ...

    def answered_unseen(self, api_key: int, broker_id: int, body: Message) -> None: ...


class QuorumSeatView(Protocol):
    """What the server asks of its seat in a quorum of several controllers
    (``controller/raft/seat.py``): whether it is the active controller, the raft requests
    it takes, and the commit of the one writer's records through the raft log."""

    active: bool

    def open(self, server: Any, machine: StateMachine) -> None: ...

    async def follow(self) -> None: ...

    def served(self) -> dict[int, tuple[int, int]]: ...

    async def close(self) -> None: ...

    def dispatch(self, conn: Any, ev: RequestReceived) -> bool: ...

    def not_controller(self, conn: Any, ev: RequestReceived) -> None: ...

    async def commit(self, records: list[RecordAndVersion], cause: Any = None) -> None: ...


class ServerView(Protocol):
    """What the extensions read of the running server (``server.ControllerServer``)."""

    @property
    def state(self) -> Any: ...

    @property
    def addresses(self) -> list[tuple[str, int]]: ...

    @property
    def config(self) -> ControllerConfig: ...

    @property
    def log(self) -> MetadataLog | None: ...

    @property
    def supported(self) -> dict[int, tuple[int, int]]: ...

    def submit(self, proto: Any, event: RequestReceived) -> None:
        """Queue a request for the controller's one writer (its records commit before the answer)."""

    async def open_listener(
        self, name: str, host: str, port: int, sink: Sink, ssl_context: ssl.SSLContext | None
    ) -> list[tuple[str, int]]: ...


class Sink(Protocol):
    """Where a listener's connections hand their requests (the controller, or a client API)."""

    def served(self) -> Mapping[int, tuple[int, int]]: ...

    def api_versions_response(self, version: int, request: ApiVersionsRequest) -> ApiVersionsResponse: ...

    def dispatch(self, conn: Any, event: RequestReceived) -> None: ...


class Extensions(Protocol):
    """The optional layer (``controller/extensions``): per-listener TLS, a gate per connection."""

    @property
    def clock(self) -> Clock: ...

    def ssl_context(self, listener_name: str) -> ssl.SSLContext | None: ...

    def new_gate(self, conn: Peer) -> Gate: ...

    async def start(self, server: ServerView) -> None: ...

    async def close(self) -> None: ...
