"""Fault injection as data: rules that match requests and say what goes wrong with them.

A :class:`Rule` is three plain values:

* a :class:`Match` (api key, broker id, directory, topic/partition, listener; each
  ``None`` matches anything),
* an :class:`Action` (``error``, ``delay``, ``drop``, ``stall``, ``fence``,
  ``offline_dir``, ``refuse_registration``, ``stale_epoch``),
* a :class:`Trigger` (``always``, ``once``, ``nth``, ``times``, ``probability``).

:class:`FaultInjector` holds the rules and decides, per request, which one fires. It never
touches sockets or the controller state: the server glue (``kraft_jbod.controller.extensions``)
carries the decision out. So a decision is a pure function of the rules, their counters and
the seeded random source, and a run with the same seed and the same requests fires the same
rules.

Rules:

* Rule 1: rules are tried in insertion order; the first one whose match holds *and* whose
  trigger fires wins. A rule whose match holds counts the request as ``seen`` whether it
  fires or not; ``nth``/``times``/``once`` count seen requests.
* Rule 2: every fired rule is counted (``fired``), logged at WARNING with the request it
  hit, and appended to a bounded history (``history``).
* Rule 3: the random source is one ``random.Random(seed)`` per injector and is drawn only
  for ``probability`` rules whose match holds, so adding a rule that never matches does not
  shift the sequence of the others.
* Rule 4: bad rule data raises :class:`~kraft_jbod.errors.ConfigError` naming the rule and
  the field; nothing is half-added (``load``/``replace`` validate everything first).

File format (JSON)::

    {"seed": 7,
     "rules": [{"id": "slow-hb", "match": {"api": "BrokerHeartbeat", "broker_id": 1},
                "action": {"type": "delay", "ms": 500}, "trigger": {"type": "nth", "n": 3}}]}
"""

from __future__ import annotations

import collections
import itertools
import json
import logging
import random
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from kraft_jbod import messages
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.wire.primitives import uuid_from_base64url, uuid_to_base64url

log = logging.getLogger(__name__)

ActionType = Literal["error", "delay", "drop", "stall", "fence", "offline_dir", "refuse_registration", "stale_epoch"]
TriggerType = Literal["always", "once", "nth", "times", "probability"]

ACTION_TYPES: Final[tuple[str, ...]] = (
    "error",
    "delay",
    "drop",
    "stall",
    "fence",
    "offline_dir",
    "refuse_registration",
    "stale_epoch",
)
TRIGGER_TYPES: Final[tuple[str, ...]] = ("always", "once", "nth", "times", "probability")

# Actions that only make sense on one api; a rule without an api key gets this one.
_DEFAULT_API: Final[dict[str, int]] = {
    "fence": ApiKey.BROKER_HEARTBEAT,
    "offline_dir": ApiKey.BROKER_HEARTBEAT,
    "refuse_registration": ApiKey.BROKER_REGISTRATION,
}
_MAX_HISTORY = 1000
_MAX_DELAY_MS = 24 * 3600 * 1000


def api_key_of(value: object) -> int:
    """An api key from an int or a name (``"BrokerHeartbeat"``, ``"BrokerHeartbeatRequest"``).

    Raises:
        ConfigError: not a known api key or name.
    """
    if isinstance(value, bool):
        raise ConfigError(f"api {value!r} is not an api key or name")
    if isinstance(value, int):
        if value not in messages.REQUESTS:
            raise ConfigError(f"api key {value} is unknown")
        return value
    if isinstance(value, str):
        wanted = value.removesuffix("Request").lower()
        for key, (_module, cls_name) in messages.REQUESTS.items():
            if cls_name.removesuffix("Request").lower() == wanted:
                return int(key)
        if value.isdigit():
            return api_key_of(int(value))
    raise ConfigError(f"api {value!r} is not an api key or name")


def _parse_uuid(value: object, where: str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value) if len(value) == 36 else uuid_from_base64url(value)
        except ValueError:
            pass
    raise ConfigError(f"{where}: {value!r} is not a uuid (base64url or 8-4-4-4-12 hex)")


def _int_field(d: Mapping[str, Any], key: str, where: str, *, minimum: int, default: int | None = None) -> int:
    if key not in d:
        if default is None:
            raise ConfigError(f"{where}: {key} is required")
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ConfigError(f"{where}: {key} must be an integer >= {minimum}, not {v!r}")
    return v


def _opt_int(d: Mapping[str, Any], key: str, where: str) -> int | None:
    if d.get(key) is None:
        return None
    return _int_field(d, key, where, minimum=-(2**31))


def _check_keys(d: Mapping[str, Any], allowed: Iterable[str], where: str) -> None:
    extra = sorted(set(d) - set(allowed))
    if extra:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(extra)}")


# --------------------------------------------------------------------------- the data


@dataclass(frozen=True, slots=True)
class Match:
    """Which requests a rule applies to. ``None`` everywhere matches every request."""

    api_key: int | None = None
    broker_id: int | None = None
    directory: uuid.UUID | None = None
    topic: str | None = None  # a name, or a topic id in base64url
    partition: int | None = None
    listener: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.api_key is not None:
            out["api"] = messages.REQUESTS[self.api_key][1].removesuffix("Request")
        if self.broker_id is not None:
            out["broker_id"] = self.broker_id
        if self.directory is not None:
            out["directory"] = uuid_to_base64url(self.directory)
        if self.topic is not None:
            out["topic"] = self.topic
        if self.partition is not None:
            out["partition"] = self.partition
        if self.listener is not None:
            out["listener"] = self.listener
        return out

    @classmethod
    def from_json(cls, d: object, where: str = "match") -> Match:
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be an object")
        _check_keys(d, ("api", "api_key", "broker_id", "directory", "topic", "partition", "listener"), where)
        api = d.get("api", d.get("api_key"))
        topic = d.get("topic")
        if topic is not None and not isinstance(topic, str):
            raise ConfigError(f"{where}: topic must be a string")
        listener = d.get("listener")
        if listener is not None and not isinstance(listener, str):
            raise ConfigError(f"{where}: listener must be a string")
        return cls(
            api_key=None if api is None else api_key_of(api),
            broker_id=_opt_int(d, "broker_id", where),
            directory=None if d.get("directory") is None else _parse_uuid(d["directory"], f"{where}.directory"),
            topic=topic,
            partition=_opt_int(d, "partition", where),
            listener=None if listener is None else listener.upper(),
        )


@dataclass(frozen=True, slots=True)
class Action:
    """What happens to a matched request.

    * ``error``: answer at once with ``error_code`` (the state is not consulted).
    * ``delay``: hold the request ``ms`` milliseconds of the server clock, then handle it.
    * ``drop``: close the connection without answering.
    * ``stall``: never answer (the connection stays open and reads nothing more).
    * ``fence``: the broker's heartbeat is handled as if it asked to be fenced.
    * ``offline_dir``: the broker's heartbeat reports ``directory`` offline.
    * ``refuse_registration``: BrokerRegistration answered with ``error_code``
      (default INVALID_REGISTRATION).
    * ``stale_epoch``: answered with STALE_BROKER_EPOCH.
    """

    type: ActionType
    error_code: int = 0
    ms: int = 0
    directory: uuid.UUID | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type in ("error", "refuse_registration"):
            out["error_code"] = self.error_code
        if self.type == "delay":
            out["ms"] = self.ms
        if self.directory is not None:
            out["directory"] = uuid_to_base64url(self.directory)
        return out

    @classmethod
    def from_json(cls, d: object, where: str = "action") -> Action:
        if isinstance(d, str):
            d = {"type": d}
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be an object or an action name")
        _check_keys(d, ("type", "error_code", "ms", "directory"), where)
        kind = d.get("type")
        if kind not in ACTION_TYPES:
            raise ConfigError(f"{where}: type {kind!r} is not one of {', '.join(ACTION_TYPES)}")
        if kind == "error":
            code = _int_field(d, "error_code", where, minimum=-1)
            if code == 0 or code > 32767:
                raise ConfigError(f"{where}: error_code must be a non-zero int16, not {code}")
            return cls("error", error_code=code)
        if kind == "refuse_registration":
            code = _int_field(d, "error_code", where, minimum=-1, default=ErrorCode.INVALID_REGISTRATION)
            if code == 0 or code > 32767:
                raise ConfigError(f"{where}: error_code must be a non-zero int16, not {code}")
            return cls("refuse_registration", error_code=code)
        if kind == "delay":
            ms = _int_field(d, "ms", where, minimum=0)
            if ms > _MAX_DELAY_MS:
                raise ConfigError(f"{where}: ms {ms} is above a day")
            return cls("delay", ms=ms)
        if kind == "offline_dir":
            directory = None if d.get("directory") is None else _parse_uuid(d["directory"], f"{where}.directory")
            return cls("offline_dir", directory=directory)
        if kind == "stale_epoch":
            return cls("stale_epoch", error_code=ErrorCode.STALE_BROKER_EPOCH)
        return cls(kind)


@dataclass(frozen=True, slots=True)
class Trigger:
    """When a matching request fires the rule.

    * ``always``: every match.
    * ``once``: the first match only.
    * ``nth``: exactly the ``n``-th match (1-based).
    * ``times``: the first ``n`` matches.
    * ``probability``: each match with probability ``p`` from the injector's seeded source.
    """

    type: TriggerType = "always"
    n: int = 1
    p: float = 1.0

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        if self.type in ("nth", "times"):
            out["n"] = self.n
        if self.type == "probability":
            out["p"] = self.p
        return out

    @classmethod
    def from_json(cls, d: object, where: str = "trigger") -> Trigger:
        if d is None:
            return cls()
        if isinstance(d, str):
            d = {"type": d}
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be an object or a trigger name")
        _check_keys(d, ("type", "n", "p"), where)
        kind = d.get("type", "always")
        if kind not in TRIGGER_TYPES:
            raise ConfigError(f"{where}: type {kind!r} is not one of {', '.join(TRIGGER_TYPES)}")
        if kind in ("nth", "times"):
            return cls(kind, n=_int_field(d, "n", where, minimum=1))
        if kind == "probability":
            p = d.get("p")
            if isinstance(p, bool) or not isinstance(p, int | float) or not 0.0 <= float(p) <= 1.0:
                raise ConfigError(f"{where}: p must be a number in [0, 1], not {p!r}")
            return cls("probability", p=float(p))
        return cls(kind)

    def fires(self, seen: int, rng: random.Random) -> bool:
        """Whether the ``seen``-th match (1-based) fires."""
        if self.type == "always":
            return True
        if self.type == "once":
            return seen == 1
        if self.type == "nth":
            return seen == self.n
        if self.type == "times":
            return seen <= self.n
        return rng.random() < self.p

    def exhausted(self, seen: int) -> bool:
        """No later match can fire."""
        if self.type == "once":
            return seen >= 1
        if self.type in ("nth", "times"):
            return seen >= self.n
        return False


@dataclass(slots=True)
class Rule:
    """One rule and its counters."""

    id: str
    match: Match
    action: Action
    trigger: Trigger = field(default_factory=Trigger)
    enabled: bool = True
    seen: int = 0
    fired: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "match": self.match.to_json(),
            "action": self.action.to_json(),
            "trigger": self.trigger.to_json(),
            "enabled": self.enabled,
            "seen": self.seen,
            "fired": self.fired,
        }

    @classmethod
    def from_json(cls, d: object, default_id: str) -> Rule:
        """A rule from its JSON form; counters start at 0 (``seen``/``fired`` are ignored).

        Raises:
            ConfigError: a field that is missing, unknown or out of range.
        """
        if not isinstance(d, dict):
            raise ConfigError(f"rule {default_id}: must be an object")
        rid = d.get("id", default_id)
        if not isinstance(rid, str) or not rid:
            raise ConfigError(f"rule {default_id}: id must be a non-empty string")
        where = f"rule {rid}"
        _check_keys(d, ("id", "match", "action", "trigger", "enabled", "seen", "fired"), where)
        if "action" not in d:
            raise ConfigError(f"{where}: action is required")
        action = Action.from_json(d["action"], f"{where}.action")
        match = Match.from_json(d.get("match"), f"{where}.match")
        if match.api_key is None and action.type in _DEFAULT_API:
            match = Match(
                api_key=_DEFAULT_API[action.type],
                broker_id=match.broker_id,
                directory=match.directory,
                topic=match.topic,
                partition=match.partition,
                listener=match.listener,
            )
        if action.type == "offline_dir" and action.directory is None:
            if match.directory is None:
                raise ConfigError(f"{where}: offline_dir needs action.directory or match.directory")
            action = Action("offline_dir", directory=match.directory)
        enabled = d.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{where}: enabled must be true or false")
        return cls(rid, match, action, Trigger.from_json(d.get("trigger"), f"{where}.trigger"), enabled)


# --------------------------------------------------------------------------- requests


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What a rule can match on, extracted once per request (see :func:`facts_of`)."""

    api_key: int
    api_version: int
    broker_id: int | None = None
    directories: frozenset[uuid.UUID] = frozenset()
    partitions: frozenset[tuple[str, int]] = frozenset()  # (topic name or base64url id, index)
    topics: frozenset[str] = frozenset()
    listener: str | None = None


def facts_of(
    api_key: int,
    api_version: int,
    body: Any,
    *,
    listener: str | None = None,
    connection_broker: int | None = None,
    topic_name: Callable[[uuid.UUID], str | None] | None = None,
) -> RequestFacts:
    """The matchable facts of a decoded request body.

    ``broker_id`` comes from the body when it has one, else from the connection (the
    broker that registered or heartbeated on it before). ``topic_name`` resolves topic
    ids so a rule may name a topic by name even when the request carries ids.
    """
    broker = getattr(body, "broker_id", None)
    if not isinstance(broker, int) or isinstance(broker, bool):
        broker = connection_broker
    dirs: set[uuid.UUID] = set()
    parts: set[tuple[str, int]] = set()
    topics: set[str] = set()
    for attr in ("log_dirs", "offline_log_dirs"):
        for d in getattr(body, attr, None) or ():
            if isinstance(d, uuid.UUID):
                dirs.add(d)

    def add_topic(tid: uuid.UUID | None, name: str | None) -> list[str]:
        keys: list[str] = []
        if tid is not None and tid.int != 0:
            keys.append(uuid_to_base64url(tid))
            if topic_name is not None:
                resolved = topic_name(tid)
                if resolved is not None:
                    keys.append(resolved)
        if name:
            keys.append(name)
        topics.update(keys)
        return keys

    for dd in getattr(body, "directories", None) or ():  # AssignReplicasToDirs
        d_id = getattr(dd, "id", None)
        if isinstance(d_id, uuid.UUID):
            dirs.add(d_id)
        for td in getattr(dd, "topics", None) or ():
            keys = add_topic(getattr(td, "topic_id", None), None)
            for pd in getattr(td, "partitions", None) or ():
                for k in keys:
                    parts.add((k, int(pd.partition_index)))
    for t in getattr(body, "topics", None) or ():  # CreateTopics, Metadata, DeleteTopics v6+
        if api_key == ApiKey.ASSIGN_REPLICAS_TO_DIRS:
            break
        add_topic(getattr(t, "topic_id", None), getattr(t, "name", None))
    for name in getattr(body, "topic_names", None) or ():
        if isinstance(name, str):
            topics.add(name)
    return RequestFacts(
        api_key=api_key,
        api_version=api_version,
        broker_id=broker,
        directories=frozenset(dirs),
        partitions=frozenset(parts),
        topics=frozenset(topics),
        listener=None if listener is None else listener.upper(),
    )


def matches(m: Match, f: RequestFacts) -> bool:
    if m.api_key is not None and m.api_key != f.api_key:
        return False
    if m.broker_id is not None and m.broker_id != f.broker_id:
        return False
    if m.listener is not None and m.listener != f.listener:
        return False
    if m.directory is not None and m.directory not in f.directories and m.api_key != ApiKey.BROKER_HEARTBEAT:
        # A heartbeat rule naming a directory is about that broker's directory (to take it
        # offline), not about directories the heartbeat happens to list.
        return False
    if m.partition is not None:
        if m.topic is not None:
            return (m.topic, m.partition) in f.partitions
        return any(p == m.partition for _, p in f.partitions)
    return not (m.topic is not None and m.topic not in f.topics)


# --------------------------------------------------------------------------- the injector


@dataclass(frozen=True, slots=True)
class Fired:
    """One fired rule, as logged and kept in the history."""

    seq: int
    rule_id: str
    action: Action
    api_key: int
    api_version: int
    broker_id: int | None
    listener: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "rule": self.rule_id,
            "action": self.action.to_json(),
            "api_key": self.api_key,
            "api_version": self.api_version,
            "broker_id": self.broker_id,
            "listener": self.listener,
        }


class FaultInjector:
    """The rule set, its counters and its seeded random source.

    Thread-safe: the admin channel may change rules from another thread than the loop's.
    """

    def __init__(self, rules: Iterable[Rule] = (), *, seed: int = 0) -> None:
        self._lock = threading.Lock()
        self._rules: dict[str, Rule] = {}
        self._seed = seed
        self._rng = random.Random(seed)
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self.history: collections.deque[Fired] = collections.deque(maxlen=_MAX_HISTORY)
        self.fired_total = 0
        self.listeners: list[Callable[[Fired], None]] = []
        self.replace(rules)

    # -- changes

    @property
    def seed(self) -> int:
        return self._seed

    def reseed(self, seed: int) -> None:
        with self._lock:
            self._seed = seed
            self._rng = random.Random(seed)

    def _fresh_id(self) -> str:
        while True:
            rid = f"rule-{next(self._ids)}"
            if rid not in self._rules:
                return rid

    def add(self, rule: Rule | Mapping[str, Any]) -> Rule:
        """Add a rule (a :class:`Rule` or its JSON form) at the end; returns it.

        Raises:
            ConfigError: invalid rule data, or a rule with that id already exists.
        """
        with self._lock:
            r = rule if isinstance(rule, Rule) else Rule.from_json(dict(rule), self._fresh_id())
            if r.id in self._rules:
                raise ConfigError(f"rule {r.id} already exists")
            self._rules[r.id] = r
        log.info("fault rule %s added: %s", r.id, json.dumps(r.to_json(), sort_keys=True))
        return r

    def remove(self, rule_id: str) -> Rule:
        """Remove a rule; returns it.

        Raises:
            ConfigError: no rule with that id.
        """
        with self._lock:
            r = self._rules.pop(rule_id, None)
        if r is None:
            raise ConfigError(f"no fault rule {rule_id!r}")
        log.info("fault rule %s removed", rule_id)
        return r

    def set_enabled(self, rule_id: str, enabled: bool) -> Rule:
        """Raises: ConfigError: no rule with that id."""
        with self._lock:
            r = self._rules.get(rule_id)
            if r is None:
                raise ConfigError(f"no fault rule {rule_id!r}")
            r.enabled = enabled
        return r

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def replace(self, rules: Iterable[Rule | Mapping[str, Any]]) -> None:
        """Swap the whole rule set; all or nothing.

        Raises:
            ConfigError: any rule is invalid or two share an id (the old set stays).
        """
        fresh: dict[str, Rule] = {}
        for i, item in enumerate(rules, 1):
            if not isinstance(item, Rule | Mapping):
                raise ConfigError(f"rule-{i}: expected a rule object, got {item!r}")
            r = item if isinstance(item, Rule) else Rule.from_json(dict(item), f"rule-{i}")
            if r.id in fresh:
                raise ConfigError(f"rule {r.id} appears twice")
            fresh[r.id] = r
        with self._lock:
            self._rules = fresh

    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules.values())

    def get(self, rule_id: str) -> Rule | None:
        with self._lock:
            return self._rules.get(rule_id)

    # -- files

    def load_json(self, doc: object) -> None:
        """Replace rules (and the seed, when given) from a parsed document.

        Raises:
            ConfigError: the document is not ``{"seed"?: int, "rules": [...]}`` or a rule is bad.
        """
        if isinstance(doc, list):
            doc = {"rules": doc}
        if not isinstance(doc, dict):
            raise ConfigError('a fault file holds an object {"seed": ..., "rules": [...]}')
        _check_keys(doc, ("seed", "rules"), "fault file")
        rules = doc.get("rules", [])
        if not isinstance(rules, list):
            raise ConfigError("fault file: rules must be a list")
        self.replace(rules)
        if "seed" in doc:
            seed = doc["seed"]
            if isinstance(seed, bool) or not isinstance(seed, int):
                raise ConfigError(f"fault file: seed must be an integer, not {seed!r}")
            self.reseed(seed)

    @classmethod
    def from_file(cls, path: Path) -> FaultInjector:
        """Raises: ConfigError: unreadable file, not JSON, or bad rules."""
        inj = cls()
        inj.load_file(path)
        return inj

    def load_file(self, path: Path) -> None:
        """Raises: ConfigError: unreadable file, not JSON, or bad rules."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read fault file {path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"fault file {path} is not UTF-8: {exc.reason}") from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"fault file {path}: not JSON: {exc.msg} at line {exc.lineno}") from None
        except RecursionError:
            raise ConfigError(f"fault file {path}: JSON nested too deeply") from None
        self.load_json(doc)

    def to_json(self) -> dict[str, Any]:
        return {"seed": self._seed, "rules": [r.to_json() for r in self.rules()], "fired_total": self.fired_total}

    # -- decisions

    def decide(self, facts: RequestFacts) -> Rule | None:
        """The rule that fires for this request, or ``None`` (Rules 1-3 of the module)."""
        with self._lock:
            chosen: Rule | None = None
            for r in self._rules.values():
                if not r.enabled or not matches(r.match, facts):
                    continue
                if r.trigger.exhausted(r.seen):
                    continue
                r.seen += 1
                if r.trigger.fires(r.seen, self._rng):
                    r.fired += 1
                    chosen = r
                    break
            if chosen is None:
                return None
            self.fired_total += 1
            event = Fired(
                next(self._seq),
                chosen.id,
                chosen.action,
                facts.api_key,
                facts.api_version,
                facts.broker_id,
                facts.listener,
            )
            self.history.append(event)
            callbacks = list(self.listeners)
        log.warning(
            "fault rule %s fired: %s on %s v%d (broker %s, listener %s)",
            chosen.id,
            json.dumps(chosen.action.to_json(), sort_keys=True),
            messages.REQUESTS.get(facts.api_key, ("", str(facts.api_key)))[1].removesuffix("Request"),
            facts.api_version,
            facts.broker_id,
            facts.listener,
        )
        for cb in callbacks:
            cb(event)
        return chosen

    def fired_counts(self) -> dict[str, int]:
        return {r.id: r.fired for r in self.rules()}

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules())

    def __len__(self) -> int:
        return len(self.rules())
