"""The KIP-858 controller as a pure state machine: requests in, records and responses out.

No I/O, no clock, no randomness, no asyncio. The server owns the log and the lock; per
request it calls :meth:`ControllerState.handle` (which only *proposes* records), appends
those records as one batch, then feeds each committed record back through
:meth:`ControllerState.apply`. Replaying a log through ``apply`` therefore rebuilds
exactly the state the live controller had.

The pieces, split the way h11 splits its state from its connection:

* :mod:`~kraft_jbod.controller.image` - the replayed view; one ``apply`` per record type,
  through a table. Durable state changes only there.
* :mod:`~kraft_jbod.controller.draft` - the overlay the records of one request are
  generated against, and the shared rules (fence, unfence, elect, directories offline).
* :mod:`~kraft_jbod.controller.apis` - one module per API family: ``brokers``
  (registration, heartbeat, unregister, session expiry), ``directories``
  (AssignReplicasToDirs), ``topics`` (CreateTopics, DeleteTopics, AlterPartition),
  ``producer_ids`` and ``describe``.
* :mod:`~kraft_jbod.controller.routes` - the table ``ROUTES``: one ``Route`` per API with
  everything the controller knows about it (request class, handler, versions, listeners,
  authorization, error answer).
* this module - the :class:`ControllerState` facade the server, the demo, ``status`` and
  the tests use; it dispatches through ``ROUTES`` (and gives the context a router over it).

Adding an API: write ``handle_x(ctx, call, request) -> Outcome`` in a module under
``controller/apis/`` and add one ``Route`` to ``routes.py`` (docs/architecture.md).

Invariants (``check_invariants``): a leader is in its partition's ISR and Replicas, on a
registered active broker, in a directory that broker has online; an ISR is never empty;
Directories runs parallel to Replicas; the index, the leader counts and the
directory-owner map agree with the partitions and registrations.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Final, Literal

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.apis import brokers, deadlines, partition_ops
from kraft_jbod.controller.context import Call, ControllerContext, Outcome, RecordAndVersion, Sliced
from kraft_jbod.controller.draft import Draft
from kraft_jbod.controller.heartbeat import HbState
from kraft_jbod.controller.image import (
    APPLIERS,
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerInfo,
    MetadataImage,
    Partition,
    TopicInfo,
    apply_partition_change,
)
from kraft_jbod.controller.limits import MAX_PARTITIONS_PER_SLICE
from kraft_jbod.controller.profiles import Profile, profile_named
from kraft_jbod.controller.routes import ROUTES, Route, handled_versions
from kraft_jbod.errors import ConfigError, ProtocolError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.fence_broker_record import FenceBrokerRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.messages.unfence_broker_record import UnfenceBrokerRecord
from kraft_jbod.messages.unregister_broker_record import UnregisterBrokerRecord
from kraft_jbod.messages.voters_record import VotersRecord
from kraft_jbod.wire.message import Message

# Each route's (lowest, highest) version, read once: handle() asks for every request.
_VERSIONS: dict[int, tuple[int, int]] = {}

__all__ = [
    "NO_LEADER",
    "NO_LEADER_CHANGE",
    "ROUTES",
    "BrokerInfo",
    "ControllerState",
    "Outcome",
    "Partition",
    "RecordAndVersion",
    "Route",
    "TopicInfo",
]

# Kept for callers that name keys this way; the routes use ApiKey.
API_CREATE_TOPICS = ApiKey.CREATE_TOPICS
API_DELETE_TOPICS = ApiKey.DELETE_TOPICS
API_ALTER_PARTITION = ApiKey.ALTER_PARTITION
API_DESCRIBE_CLUSTER = ApiKey.DESCRIBE_CLUSTER
API_BROKER_REGISTRATION = ApiKey.BROKER_REGISTRATION
API_BROKER_HEARTBEAT = ApiKey.BROKER_HEARTBEAT
API_UNREGISTER_BROKER = ApiKey.UNREGISTER_BROKER
API_ALLOCATE_PRODUCER_IDS = ApiKey.ALLOCATE_PRODUCER_IDS
API_ASSIGN_REPLICAS_TO_DIRS = ApiKey.ASSIGN_REPLICAS_TO_DIRS


# Records whose replay re-registers a broker in Kafka's heartbeat manager (its offset is -1
# until its next heartbeat), with the field naming the broker.
_BROKER_ID_OF: Final[dict[type, str]] = {
    RegisterBrokerRecord: "broker_id",
    BrokerRegistrationChangeRecord: "broker_id",
    FenceBrokerRecord: "id",
    UnfenceBrokerRecord: "id",
}


class _Router:
    """Dispatch through ``ROUTES`` for a handler that hands a request on (Envelope).

    Stateless, one for all: the context it needs is passed in, so the context holds no
    reference back to its ControllerState (no cycle keeps a dropped image alive until
    the cyclic collector runs).
    """

    def served(self) -> dict[int, tuple[int, int]]:
        return handled_versions()

    def route(self, ctx: ControllerContext, call: Call, api_key: int, body: Message) -> Outcome:
        """Handle ``body`` as api ``api_key``.

        Raises:
            ProtocolError: the key is not handled here or the body is not its request class.
        """
        route = ROUTES.get(api_key)
        if route is None or route.handler is None:
            raise ProtocolError(f"api key {api_key} is not handled by the controller")
        if not isinstance(body, route.request_type):
            raise ProtocolError(f"api key {api_key} got a {type(body).__name__} body")
        return route.handler(ctx, call, body)


ROUTER: Final = _Router()


class ControllerState:
    """The controller's metadata and the rules that change it. See the module docstring."""

    def __init__(
        self,
        *,
        cluster_id: str,
        node_id: int,
        profile: Literal["kafka", "kip"] = "kafka",
        session_timeout_ms: int = 9000,
        heartbeat_interval_ms: int = 2000,
        default_replication_factor: int = 1,
        num_partitions: int = 1,
        controller_endpoints: Iterable[tuple[str, int]] = (),
        unclean_check_interval_ms: int = 5 * 60 * 1000,
    ) -> None:
        prof = profile_named(profile)
        self.image = MetadataImage(prof)
        self.ctx = ControllerContext(
            cluster_id=cluster_id,
            node_id=node_id,
            profile=prof,
            image=self.image,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            unclean_check_interval_ms=unclean_check_interval_ms,
            default_replication_factor=default_replication_factor,
            default_num_partitions=num_partitions,
            controller_endpoints=list(controller_endpoints),
        )
        self.ctx.router = ROUTER  # Envelope re-dispatches through the same table
        self._unclean_check_due: int | None = None  # when the periodic unclean election runs next

    # ------------------------------------------------------------------ settings

    @property
    def cluster_id(self) -> str:
        return self.ctx.cluster_id

    @property
    def node_id(self) -> int:
        return self.ctx.node_id

    @property
    def profile(self) -> Profile:
        return self.ctx.profile

    @property
    def session_timeout_ms(self) -> int:
        return self.ctx.session_timeout_ms

    @property
    def heartbeat_interval_ms(self) -> int:
        return self.ctx.heartbeat_interval_ms

    @property
    def default_replication_factor(self) -> int:
        return self.ctx.default_replication_factor

    @property
    def default_num_partitions(self) -> int:
        return self.ctx.default_num_partitions

    @property
    def controller_endpoints(self) -> list[tuple[str, int]]:
        return self.ctx.controller_endpoints

    @controller_endpoints.setter
    def controller_endpoints(self, endpoints: list[tuple[str, int]]) -> None:
        self.ctx.controller_endpoints = list(endpoints)

    @property
    def static_configs(self) -> dict[str, str]:
        """Static configs DescribeConfigs lists for this node (the bound ``listeners``)."""
        return self.ctx.static_configs

    @static_configs.setter
    def static_configs(self, configs: dict[str, str]) -> None:
        self.ctx.static_configs = dict(configs)

    @property
    def leader_epoch(self) -> int:
        """The raft leader epoch the server runs at (DescribeQuorum reports it)."""
        return self.ctx.leader_epoch

    @leader_epoch.setter
    def leader_epoch(self, epoch: int) -> None:
        self.ctx.leader_epoch = epoch

    @property
    def kraft_version(self) -> int:
        """The live kraft.version: 1 when the log holds a voter set (controller/voters.py)."""
        return self.ctx.kraft_version

    @kraft_version.setter
    def kraft_version(self, level: int) -> None:
        self.ctx.kraft_version = level

    @property
    def voters(self) -> VotersRecord | None:
        """The voter set in force at kraft.version 1 (the last VotersRecord), else None."""
        return self.ctx.voters

    @voters.setter
    def voters(self, record: VotersRecord | None) -> None:
        self.ctx.voters = record

    # ------------------------------------------------------------------ read-only views

    @property
    def metadata_version(self) -> int:
        """Finalized metadata.version; an empty log means 3.0-IV1 (level 1), as in Kafka."""
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
    def last_applied_offset(self) -> int:
        return self.image.last_applied_offset

    def topic_id_of(self, name: str) -> uuid.UUID | None:
        return self.image.topic_names.get(name)

    def partitions(self) -> Iterator[Partition]:
        return self.image.partitions()

    def partition(self, topic_id: uuid.UUID, partition_id: int) -> Partition | None:
        return self.image.partition(topic_id, partition_id)

    def replicas_in(self, broker_id: int, directory: uuid.UUID) -> set[Partition]:
        """Partitions with a replica on ``broker_id`` assigned to ``directory`` (a view)."""
        return self.image.replicas_in(broker_id, directory)

    def broker_state(self, broker_id: int) -> HbState | None:
        reg = self.image.brokers.get(broker_id)
        return None if reg is None else reg.hb_state

    @property
    def next_producer_id(self) -> int | None:
        """First id of the next producer-id block; None before any ProducerIdsRecord."""
        return self.image.next_producer_id

    def handled_api_versions(self) -> dict[int, tuple[int, int]]:
        """Api key -> (min, max) this state machine answers; ApiVersions is the server's."""
        return handled_versions()

    def durable_state(self) -> dict[str, Any]:
        """Everything the log determines, in comparable form (replay must reproduce it)."""
        return self.image.durable_state()

    # ------------------------------------------------------------------ bootstrap

    @staticmethod
    def bootstrap_records(metadata_version_level: int) -> list[RecordAndVersion]:
        """Records a fresh log starts with, as Kafka 4.4's formatter computes them.

        ``FeatureLevelRecord(metadata.version)`` first, then one FeatureLevelRecord per other
        feature a new cluster gets at this level (sorted by name, level > 0 only; kraft.version
        is a control record, never a FeatureLevelRecord: at kraft.version 1 the server writes
        KRaftVersionRecord and VotersRecord in the first control batch, see
        :mod:`~kraft_jbod.controller.voters`). Written as one atomic batch without
        the Begin/EndTransactionRecord pair Kafka's activation adds from 3.6-IV1, so the
        FeatureLevelRecord is the log's first record. No ZkMigrationStateRecord: 4.x writes none.

        Raises:
            ConfigError: the level is below 3.3-IV0 or above what we support.
        """
        level = metadata_version_level
        if not fv.MINIMUM_BOOTSTRAP_LEVEL <= level <= fv.MAX_SUPPORTED_LEVEL:
            raise ConfigError(
                f"metadata.version {level} is outside the bootstrap range "
                f"{fv.MINIMUM_BOOTSTRAP_LEVEL}..{fv.MAX_SUPPORTED_LEVEL}"
            )
        records: list[RecordAndVersion] = [(FeatureLevelRecord(name=fv.METADATA_VERSION, feature_level=level), 0)]
        defaults = fv.default_feature_levels(level)
        for name, feature_level in sorted(defaults.items()):
            if feature_level > 0:
                records.append((FeatureLevelRecord(name=name, feature_level=feature_level), 0))
        if defaults.get(fv.ELR_VERSION, 0) > 0:
            # With ELR on, Kafka's controller activation adds the cluster-level
            # min.insync.replicas (its own default, 1) after the bootstrap features.
            records.append((ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="1"), 0))
        return records

    # ------------------------------------------------------------------ apply / handle / tick

    def apply(self, offset: int, record: Message, version: int) -> None:
        """Apply one committed record at its log offset.

        Raises:
            StorageError: the record contradicts the state (unknown broker, topic or
                partition, bad Directories length); the log is not one we wrote.
        """
        # MetadataImage.apply inlined: replaying a million records pays for every call.
        kind = type(record)
        applier = APPLIERS.get(kind)
        if applier is not None:
            applier(self.image, offset, record, version)
        self.image.last_applied_offset = offset
        if kind in _BROKER_ID_OF:
            self.ctx.sessions.forget_offset(getattr(record, _BROKER_ID_OF[kind]))
        elif kind is UnregisterBrokerRecord:
            self.ctx.sessions.forget(record.broker_id)  # type: ignore[attr-defined]
        if self.ctx.sessions.cs_batch_end:
            self._controlled_shutdown_batch(offset, record)

    def apply_batch(self, base: int, records: Sequence[RecordAndVersion]) -> None:
        """``apply`` of each of ``records`` at ``base``, ``base + 1``, ...: a committed batch
        in one call. A PartitionChangeRecord (thousands of them when a directory fails or
        replicas are assigned) goes straight to its applier when no controlled shutdown
        waits for its batch's end, which is all ``apply`` would do with it.

        Raises:
            StorageError: as ``apply``; the records before the bad one are applied.
        """
        img = self.image
        sessions = self.ctx.sessions
        offset = base
        for record, version in records:
            if type(record) is PartitionChangeRecord and not sessions.cs_batch_end:
                apply_partition_change(img, offset, record, version)
                img.last_applied_offset = offset
            else:
                self.apply(offset, record, version)
            offset += 1

    def _controlled_shutdown_batch(self, offset: int, record: Message) -> None:
        """A controlled shutdown this controller began: its offset is the end of that batch,
        set when the batch's first record is replayed at the offset noted (the heartbeat
        handler noted all three). A note whose offset passes without that record is stale:
        its outcome was dropped (server Rule 6), and another batch took the offset."""
        notes = self.ctx.sessions.cs_batch_end
        for broker_id, (first, end, first_record) in list(notes.items()):
            if first > offset:
                continue
            del notes[broker_id]
            reg = self.image.brokers.get(broker_id)
            if first == offset and record == first_record and reg is not None and not reg.fenced:
                reg.cs_offset = end

    def handle(
        self,
        api_key: int,
        api_version: int,
        request: Message,
        *,
        now_ms: int,
        next_offset: int,
        principal: str | None = None,
    ) -> Outcome:
        """Turn one decoded request into a response and the records it needs.

        Raises:
            ProtocolError: an api key or version this controller does not answer, or a
                body of the wrong type; Kafka closes the connection for these.
        """
        route = ROUTES.get(api_key)
        if route is None or route.handler is None:
            raise ProtocolError(f"api key {api_key} is not handled by the controller")
        lo, hi = _VERSIONS.get(api_key) or _VERSIONS.setdefault(api_key, route.valid_versions)
        if not lo <= api_version <= hi:
            raise ProtocolError(f"api key {api_key} version {api_version} is not supported")
        if not isinstance(request, route.request_type):
            raise ProtocolError(f"api key {api_key} got a {type(request).__name__} body")
        sessions = self.ctx.sessions
        if not sessions.activated:
            sessions.activate(self.image, now_ms)
        expired = deadlines.expired_answer(request)
        if expired is not None:
            return Outcome(expired, [])
        call = Call(api_version=api_version, now_ms=now_ms, next_offset=next_offset, principal=principal)
        return route.handler(self.ctx, call, request)

    def split(self, api_key: int, api_version: int, request: Message) -> Sliced | None:
        """Slices of a request too large to handle in one go (see ``Route.split``), or None.

        Each slice is an ordinary request of the same api: the server hands them to
        :meth:`handle` one at a time, committing each slice's records before the next, and
        answers with ``merge`` of their responses.
        """
        route = ROUTES.get(api_key)
        if route is None or route.split is None or not isinstance(request, route.request_type):
            return None
        return route.split(request, MAX_PARTITIONS_PER_SLICE)

    def tick(self, *, now_ms: int, next_offset: int) -> list[RecordAndVersion]:
        """Fence every broker whose session expired; records for one batch.

        The first ``handle`` or ``tick`` after a replay is when this controller becomes
        active: every unfenced broker's session starts then (Kafka's activate()).
        """
        self.ctx.sessions.activate(self.image, now_ms)
        records = brokers.expire_sessions(self.ctx, now_ms)
        if records:
            return records  # the unclean check waits for the next tick: it must see this batch
        due = self._unclean_check_due
        if due is None or now_ms < due:
            if due is None:  # the periodic task starts when this controller becomes active
                self._unclean_check_due = now_ms + self.ctx.unclean_check_interval_ms
            return records
        records, more = partition_ops.elect_unclean_leaderless(self.ctx)
        # as Kafka's periodic task: at once again while it hit its cap, else after the interval
        self._unclean_check_due = now_ms if more else now_ms + self.ctx.unclean_check_interval_ms
        return records

    # ------------------------------------------------------------------ invariants

    def check_invariants(self) -> list[str]:
        """Every broken invariant, as readable lines (empty when all hold). O(partitions)."""
        img = self.image
        problems: list[str] = []
        empty = Draft(self.ctx)
        leaders: dict[int, int] = {}
        leaderless: set[Partition] = set()
        index_count = 0
        for topic in img.topics.values():
            if img.topic_names.get(topic.name) != topic.topic_id:
                problems.append(f"topic {topic.name!r} missing from the name map")
            for p in topic.partitions.values():
                index_count += _partition_problems(img, empty, f"{topic.name}-{p.partition_id}", p, leaders, problems)
                if p.leader < 0:
                    leaderless.add(p)
        indexed = sum(len(bucket) for per in img.index.values() for bucket in per.values())
        if indexed != index_count:
            problems.append(f"index holds {indexed} replicas, partitions have {index_count}")
        if leaders != img.leader_count:
            problems.append(f"leader counts {img.leader_count} != actual {leaders}")
        if leaderless != img.leaderless:
            problems.append(f"leaderless set holds {len(img.leaderless)} partitions, {len(leaderless)} have no leader")
        owners = {x: b for b, reg in img.brokers.items() for x in reg.online_dirs}
        if owners != img.dir_owner:
            problems.append("directory owner map out of date")
        for b, reg in img.brokers.items():
            if not reg.online_set <= set(reg.registered_dirs):
                problems.append(f"broker {b}: online dirs not within registered dirs")
        return problems


def _partition_problems(
    img: MetadataImage, empty: Draft, where: str, p: Partition, leaders: dict[int, int], problems: list[str]
) -> int:
    """Append ``p``'s broken invariants to ``problems``, count its leader; return its replica count."""
    if len(p.dirs) != len(p.replicas):
        problems.append(f"{where}: {len(p.dirs)} dirs for {len(p.replicas)} replicas")
        return 0
    if len(set(p.replicas)) != len(p.replicas):
        problems.append(f"{where}: repeated replica in {p.replicas}")
    if not p.isr and not empty.elr_enabled():
        problems.append(f"{where}: empty ISR")  # with ELR (KIP-966) the ISR may be empty
    if set(p.elr) & set(p.isr):
        problems.append(f"{where}: ELR {p.elr} overlaps ISR {p.isr}")  # Kafka logs this as an error
    # No "ELR within replicas" check: Kafka's change builder keeps a replica that a completed
    # reassignment removes in the ELR when the new ISR is below min ISR (never elected).
    if not set(p.isr) <= set(p.replicas):
        problems.append(f"{where}: ISR {p.isr} not within replicas {p.replicas}")
    for b, directory in zip(p.replicas, p.dirs, strict=True):
        if p not in img.index.get(b, {}).get(directory, ()):
            problems.append(f"{where}: replica ({b}, {directory}) missing from the index")
    if p.leader == NO_LEADER:
        return len(p.replicas)
    leaders[p.leader] = leaders.get(p.leader, 0) + 1
    reg = img.brokers.get(p.leader)
    if p.leader not in p.isr:
        problems.append(f"{where}: leader {p.leader} not in ISR {p.isr}")
    elif p.leader not in p.replicas:
        problems.append(f"{where}: leader {p.leader} not a replica")
    elif reg is None or reg.fenced or reg.cs_offset >= 0:
        # (Not the durable "in controlled shutdown" flag: a broker whose shutdown ended in
        # fencing keeps it, and Kafka's unfencing election elects it all the same.)
        problems.append(f"{where}: leader {p.leader} is not an active broker")
    elif not empty.dir_online(p.leader, p.dir_of(p.leader)) and p.dir_of(p.leader) in reg.registered_dirs:
        # (A directory that an amended registration no longer lists keeps its replicas as
        # they were, leaders included, as in Kafka: only a dir reported offline counts.)
        problems.append(f"{where}: leader {p.leader} is in offline dir {p.dir_of(p.leader)}")
    return len(p.replicas)
