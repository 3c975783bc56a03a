"""KIP-858 checks over a controller-plane capture: events out of frames, findings out of events.

Strategy, in two pure stages so an engine can run the first per task and the second per
capture set:

1. :class:`EventCollector` watches decoded frames and emits small typed *events*
   (:data:`Event`): a BrokerRegistration, BrokerHeartbeat or AssignReplicasToDirs request
   merged with its response (matched by connection and correlation id), and each metadata
   record carried by a Fetch of the metadata log (:class:`RecordEvent`, with its log
   offset and the record's fields by their schema names).
2. :func:`check` replays the events of one capture set in time order through a small
   model of the controller's view (brokers: registered and online directories, epoch,
   fencing; partitions: replicas, directories, leader) and reports :data:`RULES`
   findings.

Rules (Apache Kafka's behaviour is the reference; see protocol-notes §6):

* ``HEARTBEAT_UNREGISTERED_OFFLINE_DIR``: a heartbeat names an OfflineLogDir the broker's
  current registration does not list.
* ``ASSIGNMENT_TO_OFFLINE_DIR``: an AssignReplicasToDirs entry the controller accepted, or
  a partition record, places a replica in a directory that is not online for its broker
  (LOST, or a real id outside the broker's online set).
* ``BROKER_EPOCH_REGRESSION``: a broker's epoch goes backwards: a registration yields an
  epoch below the previous one (or equal for a new incarnation), or the controller accepts
  a heartbeat carrying an epoch older than the current one.
* ``UNFENCED_WITH_UNASSIGNED_REPLICAS``: a broker registered with several directories
  becomes unfenced while one of its replicas is still UNASSIGNED. This is the KIP's text;
  Kafka's controller leaves it to the broker (it keeps WantFence), so the severity is
  ``warning``.
* ``REPLICA_ON_CORDONED_BROKER`` (KIP-1066): a PartitionRecord, or a PartitionChangeRecord
  that adds a replica, puts a new replica on a broker whose online directories are all
  cordoned (Kafka's BrokerRegistration.hasUncordonedDirs is false: its placer skips such
  brokers and a manual assignment naming one is refused). The cordoned set is the
  controller's view: RegisterBrokerRecord and BrokerRegistrationChangeRecord.
* ``HEARTBEAT_CORDONED_DIR_NOT_ONLINE`` (KIP-1066): a heartbeat's CordonedLogDirs names a
  directory the broker's registration does not list (error), or one it reported offline
  (warning: Kafka's broker keeps a failed dir in the set until its config changes, and
  Kafka's controller takes the list as given).
* ``LEADER_ON_OFFLINE_DIR``: at the end of the capture a partition is still led by a
  broker whose directory for it was reported offline, although metadata was written after
  the report (the controller had its chance to move the leader).

Invariants: a rule that needs state the capture never showed (a registration that predates
it, partitions never seen in the metadata log) gives an ``indeterminate`` finding once per
broker and rule, never a violation. Metadata records seen several times (every broker
fetches the log) are applied once, by offset. Findings are aggregated per (rule, broker,
subject) with a count and the first and last time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from kraft_jbod.capture.kafka import DecodedFrame
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.wire.primitives import is_reserved_directory_id, uuid_from_base64url, uuid_to_base64url

__all__ = [
    "EVENT_TYPES",
    "RULES",
    "AssignEvent",
    "Event",
    "EventCollector",
    "Finding",
    "HeartbeatEvent",
    "LogStartEvent",
    "RecordEvent",
    "RegistrationEvent",
    "check",
    "check_events",
    "event_from_state",
    "event_state",
]

PREFIX: Final = "KIP858."
HEARTBEAT_UNREGISTERED_OFFLINE_DIR: Final = PREFIX + "HEARTBEAT_UNREGISTERED_OFFLINE_DIR"
ASSIGNMENT_TO_OFFLINE_DIR: Final = PREFIX + "ASSIGNMENT_TO_OFFLINE_DIR"
BROKER_EPOCH_REGRESSION: Final = PREFIX + "BROKER_EPOCH_REGRESSION"
UNFENCED_WITH_UNASSIGNED_REPLICAS: Final = PREFIX + "UNFENCED_WITH_UNASSIGNED_REPLICAS"
LEADER_ON_OFFLINE_DIR: Final = PREFIX + "LEADER_ON_OFFLINE_DIR"
REPLICA_ON_CORDONED_BROKER: Final = PREFIX + "REPLICA_ON_CORDONED_BROKER"
HEARTBEAT_CORDONED_DIR_NOT_ONLINE: Final = PREFIX + "HEARTBEAT_CORDONED_DIR_NOT_ONLINE"
RULES: Final = (
    HEARTBEAT_UNREGISTERED_OFFLINE_DIR,
    ASSIGNMENT_TO_OFFLINE_DIR,
    BROKER_EPOCH_REGRESSION,
    UNFENCED_WITH_UNASSIGNED_REPLICAS,
    LEADER_ON_OFFLINE_DIR,
    REPLICA_ON_CORDONED_BROKER,
    HEARTBEAT_CORDONED_DIR_NOT_ONLINE,
)

MIGRATING: Final = "AAAAAAAAAAAAAAAAAAAAAA"
UNASSIGNED: Final = "AAAAAAAAAAAAAAAAAAAAAQ"
LOST: Final = "AAAAAAAAAAAAAAAAAAAAAg"

_WATCHED: Final = (ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ASSIGN_REPLICAS_TO_DIRS, ApiKey.FETCH)


# --------------------------------------------------------------------------- events


def _ids(values: Iterable[Any] | None) -> list[str]:
    return [uuid_to_base64url(v) for v in values or ()]


@dataclass(slots=True, kw_only=True)
class RegistrationEvent:
    """A BrokerRegistration and its answer (``epoch`` and ``error_code`` stay ``None``
    when the answer was not captured). Directories are base64url ids."""

    ts: int
    conn: str | None
    corr: int | None = None
    broker: int
    log_dirs: list[str]
    incarnation: str | None
    epoch: int | None = None
    error_code: int | None = None


@dataclass(slots=True, kw_only=True)
class HeartbeatEvent:
    """A BrokerHeartbeat and its answer; ``cordoned_dirs`` is ``None`` when the request
    did not carry the field (v0-1, or a broker not caught up)."""

    ts: int
    conn: str | None
    corr: int | None = None
    broker: int
    epoch: int | None
    offline_dirs: list[str]
    cordoned_dirs: list[str] | None
    want_fence: bool
    is_fenced: bool | None = None
    error_code: int | None = None


@dataclass(slots=True, kw_only=True)
class AssignEvent:
    """An AssignReplicasToDirs and its answer: ``[directory, topic id, partition, error
    code]`` per entry (the code ``None`` until the answer)."""

    ts: int
    conn: str | None
    corr: int | None = None
    broker: int
    epoch: int | None
    assignments: list[list[Any]]
    error_code: int | None = None


@dataclass(slots=True, kw_only=True)
class LogStartEvent:
    """A Fetch carried the metadata log's first batch: the capture holds the whole history."""

    ts: int
    conn: str | None


@dataclass(slots=True, kw_only=True)
class RecordEvent:
    """One metadata record fetched from the log: its offset, name and fields (by their
    schema names, as the decoder's record view gives them)."""

    ts: int
    conn: str | None
    offset: int
    name: str
    data: dict[str, Any]


Event = RegistrationEvent | HeartbeatEvent | AssignEvent | LogStartEvent | RecordEvent
EVENT_TYPES: Final = (RegistrationEvent, HeartbeatEvent, AssignEvent, LogStartEvent, RecordEvent)
_EVENT_BY_NAME: Final[dict[str, type[Event]]] = {cls.__name__: cls for cls in EVENT_TYPES}


def event_state(ev: Event) -> tuple[str, dict[str, Any]]:
    """An event as builtins (what a task ships): its class name and fields."""
    return type(ev).__name__, {f.name: getattr(ev, f.name) for f in dataclasses.fields(ev)}


def event_from_state(state: Any) -> Event:
    """The event :func:`event_state` gave.

    Raises:
        KeyError, TypeError, ValueError: not such a state.
    """
    name, values = state
    return _EVENT_BY_NAME[name](**values)


class EventCollector:
    """Decoded frames in, controller-plane events out; see the module docstring.

    ``feed`` returns the events a frame completes; ``finish`` returns requests whose
    response never came (their response fields stay ``None``). Never raises for content.
    """

    def __init__(self) -> None:
        self._pending: dict[tuple[str, int], RegistrationEvent | HeartbeatEvent | AssignEvent] = {}

    def feed(self, f: DecodedFrame) -> list[Event]:
        key = f.api_key
        if key not in _WATCHED or f.body is None:
            return []
        if f.kind == "request":
            if key == ApiKey.FETCH or f.correlation_id is None:
                return []
            self._pending[(f.connection_id, f.correlation_id)] = self._request_event(f)
            return []
        if key == ApiKey.FETCH:
            return self._records(f)
        found = self._pending.pop((f.connection_id, f.correlation_id or 0), None)
        if found is None:
            return []  # a response alone names no broker
        self._response(found, f)
        return [found]

    def finish(self) -> list[Event]:
        out: list[Event] = list(self._pending.values())
        self._pending.clear()
        return out

    @staticmethod
    def _request_event(f: DecodedFrame) -> RegistrationEvent | HeartbeatEvent | AssignEvent:
        b = f.body
        ts, conn, corr = f.timestamp_ns, f.connection_id, f.correlation_id
        if f.api_key == ApiKey.BROKER_REGISTRATION:
            return RegistrationEvent(
                ts=ts,
                conn=conn,
                corr=corr,
                broker=b.broker_id,
                log_dirs=_ids(getattr(b, "log_dirs", None)),
                incarnation=uuid_to_base64url(b.incarnation_id),
            )
        if f.api_key == ApiKey.BROKER_HEARTBEAT:
            cordoned = getattr(b, "cordoned_log_dirs", None)  # None: not sent (v0-1, or not caught up)
            return HeartbeatEvent(
                ts=ts,
                conn=conn,
                corr=corr,
                broker=b.broker_id,
                epoch=b.broker_epoch,
                offline_dirs=_ids(getattr(b, "offline_log_dirs", None)),
                cordoned_dirs=None if cordoned is None else _ids(cordoned),
                want_fence=bool(b.want_fence),
            )
        return AssignEvent(
            ts=ts,
            conn=conn,
            corr=corr,
            broker=b.broker_id,
            epoch=b.broker_epoch,
            assignments=[
                [uuid_to_base64url(d.id), uuid_to_base64url(t.topic_id), p.partition_index, None]
                for d in b.directories
                for t in d.topics
                for p in t.partitions
            ],
        )

    @staticmethod
    def _response(ev: RegistrationEvent | HeartbeatEvent | AssignEvent, f: DecodedFrame) -> None:
        b = f.body
        ev.ts = f.timestamp_ns
        ev.error_code = getattr(b, "error_code", None)
        if isinstance(ev, RegistrationEvent):
            ev.epoch = getattr(b, "broker_epoch", None)
        elif isinstance(ev, HeartbeatEvent):
            ev.is_fenced = bool(b.is_fenced)
        else:
            codes = {
                (uuid_to_base64url(d.id), uuid_to_base64url(t.topic_id), p.partition_index): p.error_code
                for d in b.directories
                for t in d.topics
                for p in t.partitions
            }
            for a in ev.assignments:
                a[3] = codes.get((a[0], a[1], a[2]))

    @staticmethod
    def _records(f: DecodedFrame) -> list[Event]:
        out: list[Event] = []
        for field_records in f.records:
            if not field_records.get("metadataLog"):
                continue
            for batch in field_records.get("batches", ()):
                base = batch.get("baseOffset")
                if base is None:
                    continue
                if base == 0:
                    # The log's first batch (a control batch in KRaft): the capture holds the
                    # whole metadata history, so what it lacks did not happen.
                    out.append(LogStartEvent(ts=f.timestamp_ns, conn=f.connection_id))
                for rec in batch.get("records", ()):
                    m = rec.get("metadataRecord")
                    if m is None:
                        continue
                    out.append(
                        RecordEvent(
                            ts=f.timestamp_ns,
                            conn=f.connection_id,
                            offset=base + rec.get("offsetDelta", 0),
                            name=m["name"],
                            data=m["data"],
                        )
                    )
        return out


# --------------------------------------------------------------------------- model


@dataclass(slots=True)
class Finding:
    """One aggregated finding: ``verdict`` is ``violation`` or ``indeterminate``."""

    rule: str
    verdict: str
    severity: str
    broker: int | None
    subject: str
    detail: str
    first_ts: int
    last_ts: int
    count: int = 1
    conn: str | None = None


@dataclass(slots=True)
class _Broker:
    registered: set[str] | None = None  # None: no registration captured
    online: set[str] | None = None
    epoch: int | None = None
    incarnation: str | None = None
    fenced: bool | None = None
    offline_since: dict[str, int] = field(default_factory=dict)
    cordoned: set[str] | None = None  # None: never reported (Kafka: has uncordoned dirs)

    def fully_cordoned(self) -> bool:
        """Kafka's hasUncordonedDirs, negated, over the online directories."""
        if not self.online or self.cordoned is None:
            return False
        return self.online <= self.cordoned


@dataclass(slots=True)
class _Partition:
    replicas: list[int]
    directories: list[str]
    leader: int


def _reserved(d: str) -> bool:
    try:
        return is_reserved_directory_id(uuid_from_base64url(d))
    except ValueError:
        return False


class _Checker:
    def __init__(self) -> None:
        self.brokers: dict[int, _Broker] = {}
        self.parts: dict[tuple[str, int], _Partition] = {}
        self.applied: set[int] = set()
        self.last_record_ts: int | None = None
        self.findings: dict[tuple[str, str, int | None, str], Finding] = {}
        # Directory id -> "broker B dir I" (I: its place in the registration's LogDirs) from the
        # registrations the capture holds, so
        # findings name directories as people know them.
        self.dir_names: dict[str, str] = {}
        self.log_from_start = False  # a Fetch answer carrying the metadata log's first batch was seen

    def dir_label(self, d: str) -> str:
        name = self.dir_names.get(d)
        return f"{d} ({name})" if name else d

    def broker(self, bid: int) -> _Broker:
        b = self.brokers.get(bid)
        if b is None:
            b = self.brokers[bid] = _Broker()
        return b

    def report(
        self,
        rule: str,
        verdict: str,
        bid: int | None,
        subject: str,
        detail: str,
        ts: int,
        conn: str | None,
        severity: str = "error",
    ) -> None:
        k = (rule, verdict, bid, subject)
        f = self.findings.get(k)
        if f is None:
            self.findings[k] = Finding(
                rule, verdict, severity if verdict == "violation" else "info", bid, subject, detail, ts, ts, 1, conn
            )
        else:
            f.count += 1
            f.last_ts = max(f.last_ts, ts)
            f.first_ts = min(f.first_ts, ts)

    # -- directory placement ------------------------------------------------------

    def dir_offline(self, b: _Broker, d: str) -> bool | None:
        """Kafka's isOnline, negated: None when the broker's directories are unknown."""
        if d in (UNASSIGNED, MIGRATING):
            return False
        if d == LOST:
            return True
        if b.online is None:
            return None
        if not b.online and not b.registered:
            return False  # registered without directories: pre-JBOD, always online
        return d not in b.online

    def placement(self, bid: int, d: str, subject: str, ts: int, conn: str | None, how: str) -> None:
        b = self.broker(bid)
        off = self.dir_offline(b, d)
        if off is None:
            self.report(
                ASSIGNMENT_TO_OFFLINE_DIR,
                "indeterminate",
                bid,
                "registration not captured",
                "directory placements seen for a broker whose registration predates the capture",
                ts,
                conn,
            )
        elif off:
            self.report(
                ASSIGNMENT_TO_OFFLINE_DIR,
                "violation",
                bid,
                f"{subject} -> {d}",
                f"{how} places the replica of broker {bid} in directory {self.dir_label(d)}, which is not online",
                ts,
                conn,
            )

    # -- events -------------------------------------------------------------------

    def registration(self, ev: RegistrationEvent) -> None:
        if ev.error_code not in (0, None) or ev.epoch is None:
            return
        self.registered(
            ev.broker,
            ev.log_dirs,
            ev.epoch,
            ev.incarnation,
            ev.ts,
            ev.conn,
            "BrokerRegistration response",
        )

    def registered(
        self, bid: int, dirs: list[str], epoch: int, incarnation: str | None, ts: int, conn: str | None, how: str
    ) -> None:
        b = self.broker(bid)
        if b.epoch is not None:
            same = incarnation is not None and incarnation == b.incarnation
            if epoch < b.epoch or (epoch == b.epoch and not same):
                self.report(
                    BROKER_EPOCH_REGRESSION,
                    "violation",
                    bid,
                    f"{b.epoch} -> {epoch}",
                    f"{how} gives broker {bid} epoch {epoch} after epoch {b.epoch}"
                    + ("" if same else " (new incarnation)"),
                    ts,
                    conn,
                )
        if incarnation != b.incarnation:
            b.fenced = True  # a new incarnation registers fenced
        b.epoch = epoch if b.epoch is None else max(epoch, b.epoch)
        b.incarnation = incarnation
        b.registered = set(dirs)
        b.online = set(dirs)
        for i, d in enumerate(dirs):
            self.dir_names[d] = f"broker {bid} dir {i}"
        b.offline_since = {}

    def heartbeat(self, ev: HeartbeatEvent) -> None:
        bid, ts, conn = ev.broker, ev.ts, ev.conn
        b = self.broker(bid)
        accepted = ev.error_code == 0
        epoch = ev.epoch
        if accepted and epoch is not None and b.epoch is not None and epoch < b.epoch:
            self.report(
                BROKER_EPOCH_REGRESSION,
                "violation",
                bid,
                f"heartbeat {epoch} < {b.epoch}",
                f"the controller accepted a heartbeat of broker {bid} with epoch {epoch}, older "
                f"than its current epoch {b.epoch}",
                ts,
                conn,
            )
        for d in ev.offline_dirs or ():
            if b.registered is None:
                self.report(
                    HEARTBEAT_UNREGISTERED_OFFLINE_DIR,
                    "indeterminate",
                    bid,
                    "registration not captured",
                    "heartbeats name offline directories but the broker's registration predates the capture",
                    ts,
                    conn,
                )
            elif d not in b.registered:
                self.report(
                    HEARTBEAT_UNREGISTERED_OFFLINE_DIR,
                    "violation",
                    bid,
                    d,
                    f"heartbeat of broker {bid} names offline directory {self.dir_label(d)}, which its "
                    f"registration does not list ({len(b.registered)} registered)",
                    ts,
                    conn,
                )
            elif accepted or ev.error_code is None:
                if b.online is not None:
                    b.online.discard(d)
                b.offline_since.setdefault(d, ts)
        for d in ev.cordoned_dirs or ():
            if b.registered is None:
                self.report(
                    HEARTBEAT_CORDONED_DIR_NOT_ONLINE,
                    "indeterminate",
                    bid,
                    "registration not captured",
                    "heartbeats name cordoned directories but the broker's registration predates the capture",
                    ts,
                    conn,
                )
            elif d not in b.registered:
                self.report(
                    HEARTBEAT_CORDONED_DIR_NOT_ONLINE,
                    "violation",
                    bid,
                    d,
                    f"heartbeat of broker {bid} names cordoned directory {self.dir_label(d)}, which its "
                    f"registration does not list ({len(b.registered)} registered)",
                    ts,
                    conn,
                )
            elif b.online is not None and d not in b.online:
                self.report(
                    HEARTBEAT_CORDONED_DIR_NOT_ONLINE,
                    "violation",
                    bid,
                    d,
                    f"heartbeat of broker {bid} names cordoned directory {self.dir_label(d)}, which is offline",
                    ts,
                    conn,
                    severity="warning",
                )
        if ev.is_fenced is not None and accepted:
            self.fence_state(bid, ev.is_fenced, ts, conn, "heartbeat response")

    def fence_state(self, bid: int, fenced: bool, ts: int, conn: str | None, how: str) -> None:
        b = self.broker(bid)
        was = b.fenced
        b.fenced = fenced
        if fenced or was is False:
            return
        if b.registered is None or len(b.registered) < 2:
            return
        mine = [(k, p) for k, p in self.parts.items() if bid in p.replicas]
        if not mine:
            if self.log_from_start or 0 in self.applied:
                # The capture holds the metadata log from its first record: the broker hosts
                # no replica yet, which is a fact, not a gap (the demo's own capture).
                return
            self.report(
                UNFENCED_WITH_UNASSIGNED_REPLICAS,
                "indeterminate",
                bid,
                "partitions not captured",
                f"broker {bid} with {len(b.registered)} directories was unfenced; its replicas' "
                "directories are not in the capture",
                ts,
                conn,
            )
            return
        for (topic, part), p in mine:
            i = p.replicas.index(bid)
            if i < len(p.directories) and p.directories[i] == UNASSIGNED:
                self.report(
                    UNFENCED_WITH_UNASSIGNED_REPLICAS,
                    "violation",
                    bid,
                    f"{topic}-{part}",
                    f"{how} unfenced broker {bid} ({len(b.registered)} directories) while its "
                    f"replica of {topic}-{part} is still UNASSIGNED",
                    ts,
                    conn,
                    severity="warning",
                )

    def assign(self, ev: AssignEvent) -> None:
        if ev.error_code not in (0, None):
            return
        bid = ev.broker
        for d, topic, part, code in ev.assignments or ():
            if code not in (0, None):
                continue
            self.placement(bid, d, f"{topic}-{part}", ev.ts, ev.conn, "AssignReplicasToDirs")
            p = self.parts.get((topic, part))
            if p is not None and bid in p.replicas:
                i = p.replicas.index(bid)
                while len(p.directories) < len(p.replicas):
                    p.directories.append(UNASSIGNED)
                p.directories[i] = d

    def record(self, ev: RecordEvent) -> None:
        off = ev.offset
        if off in self.applied:
            return
        self.applied.add(off)
        ts, conn, data, name = ev.ts, ev.conn, ev.data or {}, ev.name
        self.last_record_ts = ts
        if name == "RegisterBrokerRecord":
            self.registered(
                data["brokerId"],
                data.get("logDirs") or [],
                data["brokerEpoch"],
                data.get("incarnationId"),
                ts,
                conn,
                f"RegisterBrokerRecord at offset {off}",
            )
            self.broker(data["brokerId"]).fenced = bool(data.get("fenced", True))
            cordoned = data.get("cordonedLogDirs")
            self.broker(data["brokerId"]).cordoned = None if cordoned is None else set(cordoned)
        elif name == "BrokerRegistrationChangeRecord":
            bid = data["brokerId"]
            b = self.broker(bid)
            dirs = data.get("logDirs") or []
            if dirs and b.registered is not None:
                b.online = set(dirs)
                for d in b.registered - b.online:
                    b.offline_since.setdefault(d, ts)
            if data.get("cordonedLogDirs") is not None:
                b.cordoned = set(data["cordonedLogDirs"])
            fenced = data.get("fenced", 0)
            if fenced:
                self.fence_state(bid, fenced > 0, ts, conn, f"BrokerRegistrationChangeRecord at offset {off}")
        elif name in ("FenceBrokerRecord", "UnfenceBrokerRecord"):
            self.fence_state(data["id"], name == "FenceBrokerRecord", ts, conn, f"{name} at offset {off}")
        elif name == "UnregisterBrokerRecord":
            self.brokers.pop(data.get("brokerId", -1), None)
        elif name in ("PartitionRecord", "PartitionChangeRecord"):
            self.partition(name, data, ts, conn, off)

    def partition(self, name: str, data: dict[str, Any], ts: int, conn: str | None, off: int) -> None:
        k = (data["topicId"], data["partitionId"])
        p = self.parts.get(k)
        before = set() if p is None or name == "PartitionRecord" else set(p.replicas)
        if name == "PartitionRecord" or (p is not None and data.get("replicas") is not None):
            for bid in data.get("replicas") or ():
                if bid not in before and self.broker(bid).fully_cordoned():
                    self.report(
                        REPLICA_ON_CORDONED_BROKER,
                        "violation",
                        bid,
                        f"{k[0]}-{k[1]}",
                        f"{name} at offset {off} places a new replica of {k[0]}-{k[1]} on broker {bid}, "
                        "whose online directories are all cordoned",
                        ts,
                        conn,
                    )
        if name == "PartitionRecord":
            replicas = list(data.get("replicas") or [])
            dirs = list(data.get("directories") or [])
            p = _Partition(replicas, dirs, data.get("leader", -1))
            self.parts[k] = p
        else:
            if p is None:
                return  # the partition's creation predates the capture
            if data.get("replicas") is not None:
                p.replicas = list(data["replicas"])
            if data.get("directories") is not None:
                p.directories = list(data["directories"])
            if data.get("leader", -2) != -2:
                p.leader = data["leader"]
            if data.get("directories") is None:
                return
        for i, bid in enumerate(p.replicas):
            if i < len(p.directories):
                d = p.directories[i]
                if not _reserved(d) or d == LOST:
                    self.placement(bid, d, f"{k[0]}-{k[1]}", ts, conn, f"{name} at offset {off}")

    def finish(self, end_ts: int) -> None:
        for (topic, part), p in self.parts.items():
            bid = p.leader
            if bid < 0 or bid not in p.replicas:
                continue
            b = self.brokers.get(bid)
            i = p.replicas.index(bid)
            if b is None or i >= len(p.directories):
                continue
            d = p.directories[i]
            since = b.offline_since.get(d)
            if since is None:
                continue
            if self.last_record_ts is not None and self.last_record_ts > since:
                self.report(
                    LEADER_ON_OFFLINE_DIR,
                    "violation",
                    bid,
                    f"{topic}-{part}",
                    f"broker {bid} still leads {topic}-{part} from directory {self.dir_label(d)}, reported "
                    "offline, although metadata was written after the report",
                    end_ts,
                    None,
                )
            else:
                self.report(
                    LEADER_ON_OFFLINE_DIR,
                    "indeterminate",
                    bid,
                    f"{topic}-{part}",
                    f"broker {bid} leads {topic}-{part} from offline directory {self.dir_label(d)}; "
                    "no metadata was captured after the report",
                    end_ts,
                    None,
                )


def check(events: Iterable[Event]) -> list[Finding]:
    """Run every rule over one capture set's events (any order; sorted here by time, ties
    kept in the given order). Returns findings sorted by rule, broker and subject."""
    ordered = sorted(enumerate(events), key=lambda ie: (ie[1].ts or 0, ie[0]))
    c = _Checker()
    end = 0
    for _, ev in ordered:
        end = max(end, ev.ts or 0)
        if isinstance(ev, RegistrationEvent):
            c.registration(ev)
        elif isinstance(ev, HeartbeatEvent):
            c.heartbeat(ev)
        elif isinstance(ev, AssignEvent):
            c.assign(ev)
        elif isinstance(ev, RecordEvent):
            c.record(ev)
        else:
            c.log_from_start = True
    c.finish(end)
    return sorted(
        c.findings.values(), key=lambda f: (f.rule, f.verdict, -1 if f.broker is None else f.broker, f.subject)
    )


def check_events(events: Iterable[Any]) -> list[Finding]:
    """:func:`check` over the events the tasks collected. Anything that
    is not an event is skipped, and events the checker cannot follow give one
    ``indeterminate`` finding, never a failure (they came from a worker of this tool)."""
    events = [ev for ev in events if isinstance(ev, EVENT_TYPES)]
    try:
        return check(events)
    except (KeyError, TypeError, ValueError) as exc:
        return [
            Finding(
                "KIP858.CHECKER",
                "indeterminate",
                "info",
                None,
                "checker",
                f"events could not be checked: {type(exc).__name__}: {exc}",
                0,
                0,
            )
        ]
