"""The controller's story at INFO: what the committed records and refused requests mean.

Strategy: observe, never participate. The server calls :meth:`Story.committed` once per
batch it appended (with what caused it: a request or the session-timeout tick) and
:meth:`Story.responded` once per response; nothing here is called from the state
handlers, so splitting or rewriting them cannot lose a log line, and a record that
reaches the log is told exactly once, whichever handler wrote it.

Each event is a :class:`StoryEvent` (pure data, built without I/O, so tests read them
directly) and one log line on the ``kraft_jbod.story`` logger with the same fields as
``extra`` (``event``, ``broker``, ``epoch``, ``dirs``, ...), so JSON logs
(:mod:`kraft_jbod.metrics.logs`) carry them as keys.

Told: registrations (broker, epoch, directories), fencing and unfencing with the reason,
directories going offline and the partitions whose leader or ISR moved in the same
batch, topics created (partitions, replication factor) and deleted, brokers
unregistered, controlled shutdowns, and each refused request with Kafka's error name.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kraft_jbod.controller import routes
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fence_broker_record import FenceBrokerRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.messages.remove_topic_record import RemoveTopicRecord
from kraft_jbod.messages.topic_record import TopicRecord
from kraft_jbod.messages.unfence_broker_record import UnfenceBrokerRecord
from kraft_jbod.messages.unregister_broker_record import UnregisterBrokerRecord
from kraft_jbod.wire.primitives import uuid_to_base64url

log = logging.getLogger("kraft_jbod.story")

__all__ = ["Story", "StoryEvent"]


@dataclass(slots=True, frozen=True)
class StoryEvent:
    event: str  # registered, fenced, unfenced, dir-offline, topic-created, topic-deleted, refused, ...
    text: str
    fields: dict[str, Any] = field(default_factory=dict)


def _ids(dirs: Iterable[uuid.UUID]) -> list[str]:
    return [uuid_to_base64url(d) for d in dirs]


def _error_name(code: int) -> str:
    return ErrorCode.name_of(code)


_ITEM_LISTS = ("topics", "responses", "results", "directories")
# Per generated (slotted) response class: which of _ITEM_LISTS it has. Every response is
# looked at, most have none (a heartbeat's), and each getattr miss costs an exception.
_ITEM_LISTS_OF: dict[type, tuple[str, ...]] = {}


def _first_error(body: Any) -> tuple[int, str | None, str | None]:
    """(code, message, what) of the first non-zero error: top level, then per item."""
    code = getattr(body, "error_code", 0)
    if isinstance(code, int) and code:
        return code, getattr(body, "error_message", None), None
    kind = type(body)
    attrs = _ITEM_LISTS_OF.get(kind)
    if attrs is None:
        attrs = tuple(a for a in _ITEM_LISTS if hasattr(kind, a)) if "__slots__" in kind.__dict__ else _ITEM_LISTS
        if attrs is not _ITEM_LISTS:
            _ITEM_LISTS_OF[kind] = attrs
    for attr in attrs:
        for item in getattr(body, attr, None) or ():
            sub = getattr(item, "error_code", 0)
            if isinstance(sub, int) and sub:
                return sub, getattr(item, "error_message", None), getattr(item, "name", None)
    return 0, None, None


class Story:
    """Turns committed record batches and responses into story events (and log lines)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.log = logger or log
        self._dirs: dict[int, set[uuid.UUID]] = {}  # broker -> online directories, as the log says
        self._topics: dict[uuid.UUID, str] = {}
        self._fenced: dict[int, bool] = {}

    # ------------------------------------------------------------------ committed records

    def committed(
        self, records: Iterable[tuple[Any, int]], cause: Any = None, *, tell: bool = True
    ) -> list[StoryEvent]:
        """Events for one appended batch; ``cause`` is the request body, or None for a tick.

        ``tell=False`` only learns (records replayed at start-up are history, not news).
        """
        events: list[StoryEvent] = []
        new_topics: dict[uuid.UUID, list[Any]] = {}
        # A failed directory moves tens of thousands of partitions in one batch: they are
        # kept as (topic id as an int, partition), hashed in C (a uuid.UUID hashes in
        # Python code), and each topic's name is looked up once, when first met.
        moved: set[tuple[int, int]] = set()
        names: dict[int, str] = {}
        topics = self._topics
        for record, _version in records:
            kind = type(record)
            # The kinds of which one batch holds thousands first, tested by exact type.
            if kind is PartitionChangeRecord:
                if record.leader != -2 or record.isr is not None:
                    topic = record.topic_id.int
                    if topic not in names:
                        name = topics.get(record.topic_id)
                        names[topic] = uuid_to_base64url(record.topic_id) if name is None else name
                    moved.add((topic, record.partition_id))
                continue
            if kind is PartitionRecord:
                if new_topics and record.topic_id in new_topics:
                    new_topics[record.topic_id].append(record)
                continue
            if isinstance(record, RegisterBrokerRecord):
                b = record.broker_id
                self._dirs[b] = set(record.log_dirs)
                self._fenced[b] = bool(record.fenced)
                dirs = _ids(record.log_dirs)
                events.append(
                    StoryEvent(
                        "registered",
                        f"broker {b} registered with epoch {record.broker_epoch}, "
                        f"{len(dirs)} log dir(s) {dirs}, rack {record.rack or '-'}"
                        + (" (fenced)" if record.fenced else ""),
                        {"broker": b, "epoch": record.broker_epoch, "dirs": dirs, "rack": record.rack},
                    )
                )
            elif isinstance(record, BrokerRegistrationChangeRecord):
                events.extend(
                    self._change(
                        record.broker_id,
                        record.broker_epoch,
                        record.fenced,
                        record.in_controlled_shutdown,
                        record.log_dirs,
                        cause,
                    )
                )
            elif isinstance(record, FenceBrokerRecord):
                events.extend(self._change(record.id, record.epoch, 1, 0, [], cause))
            elif isinstance(record, UnfenceBrokerRecord):
                events.extend(self._change(record.id, record.epoch, -1, 0, [], cause))
            elif isinstance(record, UnregisterBrokerRecord):
                self._dirs.pop(record.broker_id, None)
                events.append(
                    StoryEvent(
                        "unregistered",
                        f"broker {record.broker_id} unregistered",
                        {"broker": record.broker_id, "epoch": record.broker_epoch},
                    )
                )
            elif isinstance(record, TopicRecord):
                self._topics[record.topic_id] = record.name
                new_topics[record.topic_id] = []
            elif isinstance(record, RemoveTopicRecord):
                name = self._topics.pop(record.topic_id, uuid_to_base64url(record.topic_id))
                events.append(
                    StoryEvent(
                        "topic-deleted",
                        f"topic {name} deleted",
                        {"topic": name, "topic_id": uuid_to_base64url(record.topic_id)},
                    )
                )
        for tid, parts in new_topics.items():
            name = self._topics[tid]
            rf = max((len(p.replicas) for p in parts), default=0)
            events.append(
                StoryEvent(
                    "topic-created",
                    f"topic {name} created: {len(parts)} partition(s), replication factor {rf}",
                    {
                        "topic": name,
                        "topic_id": uuid_to_base64url(tid),
                        "partitions": len(parts),
                        "replication_factor": rf,
                    },
                )
            )
        if moved:
            shown = sorted([f"{names[t]}-{p}" for t, p in moved])
            events.append(
                StoryEvent(
                    "partitions-moved",
                    f"{len(shown)} partition(s) changed leader or ISR: {', '.join(shown[:20])}"
                    + (" ..." if len(shown) > 20 else ""),
                    {"partitions": shown},
                )
            )
        if tell:
            for ev in events:
                self.log.info("%s", ev.text, extra={"event": ev.event, **ev.fields})
        return events

    def _change(
        self, b: int, epoch: int, fenced: int, shutdown: int, log_dirs: list[uuid.UUID] | None, cause: Any
    ) -> list[StoryEvent]:
        out: list[StoryEvent] = []
        if log_dirs:
            before = self._dirs.get(b, set())
            now = set(log_dirs)
            offline = sorted(before - now, key=str)
            self._dirs[b] = now
            if offline:
                out.append(
                    StoryEvent(
                        "dir-offline",
                        f"broker {b}: log dir(s) {_ids(offline)} offline; {len(now)} still online",
                        {"broker": b, "epoch": epoch, "offline_dirs": _ids(offline), "online_dirs": _ids(now)},
                    )
                )
        if fenced == 1 and not self._fenced.get(b, False):
            self._fenced[b] = True
            reason = self._fence_reason(cause)
            out.append(
                StoryEvent(
                    "fenced",
                    f"broker {b} (epoch {epoch}) fenced: {reason}",
                    {"broker": b, "epoch": epoch, "reason": reason},
                )
            )
        elif fenced == -1 and self._fenced.get(b, True):
            self._fenced[b] = False
            reason = "caught up with the metadata log" if cause is not None else "unfenced"
            out.append(
                StoryEvent(
                    "unfenced",
                    f"broker {b} (epoch {epoch}) unfenced: {reason}",
                    {"broker": b, "epoch": epoch, "reason": reason},
                )
            )
        if shutdown == 1:
            out.append(
                StoryEvent(
                    "controlled-shutdown", f"broker {b} (epoch {epoch}) is shutting down", {"broker": b, "epoch": epoch}
                )
            )
        return out

    @staticmethod
    def _fence_reason(cause: Any) -> str:
        if cause is None:
            return "session expired (no heartbeat within broker.session.timeout.ms)"
        if getattr(cause, "want_shut_down", False):
            return "controlled shutdown"
        if getattr(cause, "want_fence", False):
            return "the broker asked to be fenced"
        return f"{type(cause).__name__.removesuffix('Request')}"

    # ------------------------------------------------------------------ responses

    def responded(self, peer: str, api_key: int, api_version: int, body: Any) -> StoryEvent | None:
        """A refused request (any non-zero error in the response), told with its error name."""
        if api_key in (ApiKey.FETCH, ApiKey.API_VERSIONS):
            return None  # replication polls and version probes refuse as a matter of course
        code, message, what = _first_error(body)
        if not code:
            return None
        api = routes.log_name(api_key) or type(body).__name__.removesuffix("Response")
        name = _error_name(code)
        text = f"refused {api} v{api_version} from {peer}: {name} ({code})"
        if what:
            text += f" for {what}"
        if message:
            text += f": {message}"
        ev = StoryEvent(
            "refused", text, {"api": api, "api_version": api_version, "peer": peer, "error_code": code, "error": name}
        )
        self.log.info("%s", ev.text, extra={"event": ev.event, **ev.fields})
        return ev
