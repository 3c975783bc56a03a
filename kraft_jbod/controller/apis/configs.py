"""Dynamic configs: IncrementalAlterConfigs, AlterConfigs, DescribeConfigs and ConfigRecord.

The controller keeps dynamic configs per resource, (type, name) -> {key: value}, exactly as
the ConfigRecords in the log say (:class:`~kraft_jbod.controller.config_image.ConfigImage`); a record with a null value
removes the key, and a resource with no keys left disappears. Deleting a topic drops its
configs (Kafka's replay of RemoveTopicRecord does the same).

Rules for the two alter APIs (Kafka's ControllerApis and ConfigurationControlManager):

* Rule 1: an unknown resource type answers UNSUPPORTED_VERSION; a resource named twice
  answers INVALID_REQUEST "Duplicate resource." once and is not changed (a third mention
  is ignored). Those answers come first, in request order, then the others.
* Rule 2: one result per resource, all keys or none. Only TOPIC and BROKER resources are
  persisted (BROKER_LOGGER changes are answered for the controller's own node and write
  nothing; other types answer INVALID_REQUEST "Unknown resource type").
* Rule 3: a topic must be a legal name and exist (UNKNOWN_TOPIC_OR_PARTITION); a broker
  name is "" (the cluster default) or a registered node id (BROKER_ID_NOT_REGISTERED).
  Topic keys must be known topic configs with values of their type (INVALID_CONFIG with
  Kafka's "Unknown topic config name" / "Invalid value ..." messages). Values longer
  than 32767 characters are refused.
* Rule 4: a record is written only when the value changes, except for BROKER resources,
  which always get one (brokers reload on it). AlterConfigs (legacy) replaces the whole
  set: keys it does not name are deleted. ``validate_only`` writes nothing.
* Rule 5: APPEND/SUBTRACT need a LIST config; they start from the current value (or the
  default) and keep the order of first appearance.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.config_image import (
    BROKER,
    T_BOOLEAN,
    T_DOUBLE,
    T_INT,
    T_LIST,
    T_LONG,
    T_STRING,
    TOPIC,
    TOPIC_CONFIGS,
)
from kraft_jbod.controller.context import ControllerContext
from kraft_jbod.controller.limits import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP
from kraft_jbod.messages.alter_configs_request import AlterConfigsRequest
from kraft_jbod.messages.alter_configs_response import AlterConfigsResourceResponse as LegacyResult
from kraft_jbod.messages.alter_configs_response import AlterConfigsResponse
from kraft_jbod.messages.clear_elr_record import ClearElrRecord
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.create_topics_response import CreatableTopicConfigs
from kraft_jbod.messages.describe_configs_request import DescribeConfigsRequest
from kraft_jbod.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.incremental_alter_configs_request import IncrementalAlterConfigsRequest
from kraft_jbod.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)
from kraft_jbod.wire.message import Message

RecordAndVersion = tuple[Message, int]

MIN_ISR: Final = "min.insync.replicas"
BROKER_LOGGER: Final = 8
CLIENT_METRICS: Final = 16
GROUP: Final = 32
KNOWN_TYPES: Final = frozenset({TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP})
TYPE_NAMES: Final = {
    TOPIC: "TOPIC",
    BROKER: "BROKER",
    BROKER_LOGGER: "BROKER_LOGGER",
    CLIENT_METRICS: "CLIENT_METRICS",
    GROUP: "GROUP",
}

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES: Final = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

INVALID_CONFIG: Final = ErrorCode.INVALID_CONFIG
# ConfigSource and ConfigType codes of DescribeConfigs (facts of Kafka's protocol).
SOURCE_TOPIC: Final = 1
SOURCE_DYNAMIC_BROKER: Final = 2
SOURCE_DYNAMIC_DEFAULT_BROKER: Final = 3
SOURCE_STATIC_BROKER: Final = 4
SOURCE_DEFAULT: Final = 5
_TYPE_WORD: Final = {T_INT: "INT", T_LONG: "LONG", T_DOUBLE: "DOUBLE"}
_MAX_VALUE_LEN: Final = 32767
_LOG_LEVELS: Final = frozenset({"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"})
_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")
# The static configs the controller lists for its own node, as Kafka's does (its
# KafkaConfig): whether each is read-only (``listeners`` is a per-broker dynamic config in
# Kafka, ``controller.listener.names`` is not) and Kafka's default, if it has one.
_STATIC_KEYS: Final[dict[str, tuple[bool, str | None]]] = {
    "controller.listener.names": (True, None),
    "listeners": (False, "PLAINTEXT://:9092"),
}
_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::"})


# ---------------------------------------------------------------------------- validation


class _Refused(Exception):
    def __init__(self, code: int, message: str | None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def topic_name_error(name: str) -> str | None:
    """Kafka's Topic.validate message for an illegal name, else None."""
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > 249:
        return "Topic name is illegal, it can't be longer than 249 characters, topic name: " + name
    if not _TOPIC_NAME.fullmatch(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than ASCII alphanumerics, '
            "'.', '_' and '-'"
        )
    return None


def _check_value(key: str, value: str) -> None:
    spec = TOPIC_CONFIGS[key]
    text = value.strip()

    def bad(why: str) -> _Refused:
        return _Refused(INVALID_CONFIG, f"Invalid value {value} for configuration {key}: {why}")

    number: float | None = None
    if spec.type == T_BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise bad("Expected value to be either true or false")
    elif spec.type in (T_INT, T_LONG):
        bits = 31 if spec.type == T_INT else 63
        try:
            n = int(text)
        except ValueError:
            raise bad(f"Not a number of type {_TYPE_WORD[spec.type]}") from None
        if not -(2**bits) <= n < 2**bits:
            raise bad(f"Not a number of type {_TYPE_WORD[spec.type]}")
        number = n
    elif spec.type == T_DOUBLE:
        try:
            number = float(text)
        except ValueError:
            raise bad("Not a number of type DOUBLE") from None
    if number is not None and spec.at_least is not None and number < spec.at_least:
        limit = int(spec.at_least) if spec.at_least == int(spec.at_least) else spec.at_least
        raise bad(f"Value must be at least {limit}")
    if spec.one_of:
        items = [x.strip() for x in text.split(",")] if spec.type == T_LIST else [text]
        for item in items:
            if item not in spec.one_of:
                raise bad(f"String must be one of: {', '.join(spec.one_of)}")


def _validate_topic_configs(configs: dict[str, str]) -> None:
    for key in configs:
        if key not in TOPIC_CONFIGS:
            raise _Refused(INVALID_CONFIG, f"Unknown topic config name: {key}")
    for key, value in configs.items():
        _check_value(key, value)


def _broker_id(name: str) -> int | None:
    """The node id a BROKER resource names; None for the cluster default ("")."""
    if not name:
        return None
    try:
        node = int(name)
    except ValueError:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Unable to parse broker name {name}") from None
    if node < 0:
        raise _Refused(ErrorCode.INVALID_REQUEST, "Invalid negative broker ID.")
    return node


def _validate_resource(st: ControllerContext, rtype: int, name: str, configs: dict[str, str]) -> None:
    """Kafka's ControllerConfigurationValidator, then the existence check (Rule 3)."""
    if rtype == TOPIC:
        if not name:
            raise _Refused(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        err = topic_name_error(name)
        if err is not None:
            raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        _validate_topic_configs(configs)
        if st.topic_id_of(name) is None:
            raise _Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    elif rtype == BROKER:
        node = _broker_id(name)
        if node is not None and node not in st.brokers and node != st.node_id:
            raise _Refused(ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {node} found.")
    else:
        raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown resource type {TYPE_NAMES.get(rtype, rtype)}")


def _record(rtype: int, name: str, key: str, value: str | None) -> RecordAndVersion:
    return ConfigRecord(resource_type=rtype, resource_name=name, name=key, value=value), 0


def clear_elr_records(st: ControllerContext, records: list[RecordAndVersion]) -> list[RecordAndVersion]:
    """ClearElrRecords for the ``min.insync.replicas`` changes among ``records``, as Kafka's
    ConfigurationControlManager appends them when eligible.leader.replicas.version >= 1:
    one naming the topic for a topic config, one with an empty name (every topic) for a
    broker or cluster config; none with ELR off."""
    if st.finalized_features.get(fv.ELR_VERSION, 0) < 1:
        return []
    out: list[RecordAndVersion] = []
    for rec, _version in records:
        if isinstance(rec, ConfigRecord) and rec.name == MIN_ISR:
            out.append((ClearElrRecord(topic_name=rec.resource_name if rec.resource_type == TOPIC else ""), 0))
    return out


def _check_min_isr_transition(st: ControllerContext, rtype: int, name: str, key: str, value: str | None) -> None:
    """Kafka's ConfigurationControlManager with eligible leader replicas on: a broker's own
    ``min.insync.replicas`` cannot be set or removed, nor the cluster-level one removed (the
    effective min ISR the ELR rules use comes from the topic or the cluster config only).

    Raises:
        _Refused: INVALID_CONFIG with Kafka's message.
    """
    if rtype != BROKER or key != MIN_ISR or st.finalized_features.get(fv.ELR_VERSION, 0) < 1:
        return
    if name:
        raise _Refused(INVALID_CONFIG, f"Broker-level {MIN_ISR} cannot be altered while ELR is enabled.")
    if value is None:
        raise _Refused(INVALID_CONFIG, f"Cluster-level {MIN_ISR} cannot be removed while ELR is enabled.")


def _split(value: str | None) -> list[str]:
    return [] if value is None else [x for x in value.split(",") if x]


def _incremental_resource(
    st: ControllerContext, rtype: int, name: str, ops: dict[str, tuple[int, str | None]]
) -> list[RecordAndVersion]:
    """Records for one resource's operations, all or nothing (Rules 2-5).

    Raises:
        _Refused: the resource's error.
    """
    current = st.configs.get(rtype, name)
    records: list[RecordAndVersion] = []
    after = dict(current)
    for key, (op, arg) in ops.items():
        old = current.get(key)
        new: str | None
        if op == SET:
            new = arg
        elif op == DELETE:
            new = None
        elif op in (APPEND, SUBTRACT):
            spec = TOPIC_CONFIGS.get(key) if rtype == TOPIC else None
            if spec is None or spec.type != T_LIST:
                raise _Refused(INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {key} because its type is not LIST.")
            parts = _split(old if old is not None else spec.default)
            for item in (arg or "").split(","):
                if op == APPEND and item not in parts:
                    parts.append(item)
                elif op == SUBTRACT and item in parts:
                    parts.remove(item)
            new = ",".join(parts)
        else:
            raise _Refused(ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for key {key}.")
        if new != old or rtype == BROKER:
            _check_min_isr_transition(st, rtype, name, key, new)
            records.append(_record(rtype, name, key, new))
        if new is None:
            after.pop(key, None)
        else:
            if len(new) > _MAX_VALUE_LEN:
                raise _Refused(
                    INVALID_CONFIG,
                    "The configuration value cannot be added because it exceeds the "
                    f"maximum value size of {_MAX_VALUE_LEN} bytes.",
                )
            after[key] = new
    _validate_resource(st, rtype, name, after)
    return records


def _legacy_resource(
    st: ControllerContext, rtype: int, name: str, wanted: dict[str, str | None]
) -> list[RecordAndVersion]:
    current = st.configs.get(rtype, name)
    records = [
        _record(rtype, name, key, value)
        for key, value in wanted.items()
        if value != current.get(key) or rtype == BROKER
    ]
    records += [_record(rtype, name, key, None) for key in current if key not in wanted]
    after = {k: v for k, v in wanted.items() if v is not None}
    for _rec, _v in records:
        value = getattr(_rec, "value", None)
        _check_min_isr_transition(st, rtype, name, getattr(_rec, "name", ""), value)
        if value is not None and len(value) > _MAX_VALUE_LEN:
            raise _Refused(
                INVALID_CONFIG,
                "The configuration value cannot be added because it exceeds the "
                f"maximum value size of {_MAX_VALUE_LEN} bytes.",
            )
    _validate_resource(st, rtype, name, after)
    return records


def _logger_result(
    st: ControllerContext, name: str, ops: Iterable[tuple[str, int, str | None]]
) -> tuple[int, str | None]:
    """BROKER_LOGGER on the controller: only its own node; nothing is persisted."""
    try:
        node = int(name)
    except ValueError:
        return ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}"
    if node != st.node_id:
        return ErrorCode.INVALID_REQUEST, f"Unexpected node id. Expected {st.node_id}, but got {node}"
    for logger, op, value in ops:
        if op == SET and (value or "").upper() not in _LOG_LEVELS:
            return INVALID_CONFIG, (
                f"Cannot set the log level of {logger} to {value} as it is not a supported log level."
            )
        if op not in (SET, DELETE):
            return ErrorCode.INVALID_REQUEST, (
                f"Operation {_OP_NAMES.get(op, op)} is not allowed for the BROKER_LOGGER resource"
            )
    return 0, None


def incremental_alter_configs(
    st: ControllerContext, api_version: int, req: IncrementalAlterConfigsRequest
) -> tuple[IncrementalAlterConfigsResponse, list[RecordAndVersion]]:
    """IncrementalAlterConfigs (Rules 1-5)."""
    early: list[AlterConfigsResourceResponse] = []
    loggers: list[AlterConfigsResourceResponse] = []
    changes: dict[tuple[int, str], dict[str, tuple[int, str | None]]] = {}
    duplicates: set[tuple[int, str]] = set()
    for res in req.resources:
        key = (res.resource_type, res.resource_name)
        if res.resource_type == BROKER_LOGGER:
            code, msg = _logger_result(
                st, res.resource_name, [(c.name, c.config_operation, c.value) for c in res.configs]
            )
            loggers.append(AlterConfigsResourceResponse(code, msg, res.resource_type, res.resource_name))
            continue
        if res.resource_type not in KNOWN_TYPES:
            early.append(
                AlterConfigsResourceResponse(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"Unknown resource type {res.resource_type}.",
                    res.resource_type,
                    res.resource_name,
                )
            )
            continue
        if key in duplicates:
            continue
        if key in changes:
            duplicates.add(key)
            del changes[key]
            early.append(
                AlterConfigsResourceResponse(
                    ErrorCode.INVALID_REQUEST, "Duplicate resource.", res.resource_type, res.resource_name
                )
            )
            continue
        changes[key] = {c.name: (c.config_operation, c.value) for c in res.configs}
    results = list(early)
    records: list[RecordAndVersion] = []
    for (rtype, name), ops in changes.items():
        try:
            mine = _incremental_resource(st, rtype, name, ops)
        except _Refused as exc:
            results.append(AlterConfigsResourceResponse(exc.code, exc.message, rtype, name))
            continue
        records += mine
        results.append(AlterConfigsResourceResponse(0, None, rtype, name))
    results += loggers
    records += clear_elr_records(st, records)
    if len(records) > MAX_RECORDS_PER_USER_OP:
        # Kafka's bounded record list throws: the whole request fails, even ValidateOnly.
        refused = [
            AlterConfigsResourceResponse(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH, r.resource_type, r.resource_name)
            for r in req.resources
        ]
        return IncrementalAlterConfigsResponse(responses=refused), []
    return IncrementalAlterConfigsResponse(responses=results), [] if req.validate_only else records


def alter_configs(
    st: ControllerContext, api_version: int, req: AlterConfigsRequest
) -> tuple[AlterConfigsResponse, list[RecordAndVersion]]:
    """AlterConfigs, the legacy whole-set replacement (Rules 1-4)."""
    early: list[LegacyResult] = []
    changes: dict[tuple[int, str], dict[str, str | None]] = {}
    duplicates: set[tuple[int, str]] = set()
    for res in req.resources:
        key = (res.resource_type, res.resource_name)
        if res.resource_type not in KNOWN_TYPES:
            early.append(
                LegacyResult(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"Unknown resource type {res.resource_type}.",
                    res.resource_type,
                    res.resource_name,
                )
            )
            continue
        if key in duplicates:
            continue
        if key in changes:
            duplicates.add(key)
            del changes[key]
            early.append(
                LegacyResult(ErrorCode.INVALID_REQUEST, "Duplicate resource.", res.resource_type, res.resource_name)
            )
            continue
        changes[key] = {c.name: c.value for c in res.configs}
    results = list(early)
    records: list[RecordAndVersion] = []
    for (rtype, name), wanted in changes.items():
        try:
            mine = _legacy_resource(st, rtype, name, wanted)
        except _Refused as exc:
            results.append(LegacyResult(exc.code, exc.message, rtype, name))
            continue
        records += mine
        results.append(LegacyResult(0, None, rtype, name))
    records += clear_elr_records(st, records)
    if len(records) > MAX_RECORDS_PER_USER_OP:
        refused = [
            LegacyResult(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH, r.resource_type, r.resource_name)
            for r in req.resources
        ]
        return AlterConfigsResponse(responses=refused), []
    return AlterConfigsResponse(responses=results), [] if req.validate_only else records


# ---------------------------------------------------------------------------- DescribeConfigs


def _entry(
    api_version: int,
    name: str,
    value: str | None,
    source: int,
    ctype: int,
    synonyms: list[DescribeConfigsSynonym],
    include_synonyms: bool,
    read_only: bool = False,
) -> DescribeConfigsResourceResult:
    entry = DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_sensitive=False,
        synonyms=synonyms if include_synonyms else [],
        config_type=ctype if api_version >= 3 else 0,
        documentation=None,
    )
    if api_version == 0:
        entry.is_default = source == SOURCE_DEFAULT
    return entry


def _topic_entries(
    st: ControllerContext, api_version: int, topic: str, keys: list[str] | None, synonyms: bool
) -> list[DescribeConfigsResourceResult]:
    overrides = st.configs.get(TOPIC, topic)
    defaults = st.configs.get(BROKER, "")
    out = []
    for key, spec in sorted(TOPIC_CONFIGS.items()):
        if keys is not None and key not in keys:
            continue
        chain: list[DescribeConfigsSynonym] = []
        if key in overrides:
            chain.append(DescribeConfigsSynonym(key, overrides[key], SOURCE_TOPIC))
        if spec.synonym is not None and spec.synonym in defaults:
            chain.append(DescribeConfigsSynonym(spec.synonym, defaults[spec.synonym], SOURCE_DYNAMIC_DEFAULT_BROKER))
        chain.append(DescribeConfigsSynonym(spec.synonym or key, spec.default, SOURCE_DEFAULT))
        top = chain[0]
        out.append(_entry(api_version, key, top.value, top.source, spec.type, chain, synonyms))
    return out


def static_listener_configs(bound: Iterable[tuple[str, str, int]], controller_names: Iterable[str]) -> dict[str, str]:
    """The static ``listeners`` and ``controller.listener.names`` the controller reports
    for its own node: every listener it actually bound, controller and client listeners,
    in Kafka's ``NAME://HOST:PORT,...`` syntax, with port 0 resolved to the real port.

    A listener bound on every interface (IPv4 and IPv6 sockets on one port) is written
    with an empty host, as Kafka's ``listeners`` writes it; a host name that resolved to
    several addresses keeps the first. IPv6 hosts are bracketed.
    """
    seen: dict[str, tuple[str, int]] = {}
    for name, host, port in bound:
        if name in seen:
            if host in _WILDCARDS:
                seen[name] = ("", seen[name][1])
            continue
        seen[name] = ("" if host in _WILDCARDS else host, port)
    parts = [f"{name}://[{h}]:{p}" if ":" in h else f"{name}://{h}:{p}" for name, (h, p) in seen.items()]
    return {"listeners": ",".join(parts), "controller.listener.names": ",".join(controller_names)}


def _broker_entries(
    st: ControllerContext,
    api_version: int,
    node: int | None,
    keys: list[str] | None,
    synonyms: bool,
    static: dict[str, str] | None = None,
) -> list[DescribeConfigsResourceResult]:
    """Dynamic configs of the node and the cluster default; for the controller's own node
    also its static configs (``static``), each with Kafka's synonym chain: per-broker
    dynamic, cluster default, static, Kafka's default."""
    defaults = st.configs.get(BROKER, "")
    own = {} if node is None else st.configs.get(BROKER, str(node))
    static = static or {}
    out = []
    for key in sorted(set(defaults) | set(own) | set(static)):
        if keys is not None and key not in keys:
            continue
        chain = []
        if key in own:
            chain.append(DescribeConfigsSynonym(key, own[key], SOURCE_DYNAMIC_BROKER))
        if key in defaults:
            chain.append(DescribeConfigsSynonym(key, defaults[key], SOURCE_DYNAMIC_DEFAULT_BROKER))
        read_only, ctype = False, T_STRING
        if key in static:
            chain.append(DescribeConfigsSynonym(key, static[key], SOURCE_STATIC_BROKER))
            read_only, default = _STATIC_KEYS.get(key, (True, None))
            ctype = T_LIST
            if default is not None:
                chain.append(DescribeConfigsSynonym(key, default, SOURCE_DEFAULT))
        top = chain[0]
        out.append(_entry(api_version, key, top.value, top.source, ctype, chain, synonyms, read_only))
    return out


def describe_configs(
    st: ControllerContext, api_version: int, req: DescribeConfigsRequest, *, any_broker: bool = False
) -> DescribeConfigsResponse:
    """DescribeConfigs as the controller answers it (KIP-919), from the dynamic configs.

    Topics list every topic config with its effective value and source; brokers list the
    dynamic configs held for the node and the cluster default. On the controller listener
    only the controller's own id or "" may be named, and the own id lists the static
    ``listeners`` and ``controller.listener.names`` too (source STATIC_BROKER_CONFIG), as
    Kafka's controller lists its KafkaConfig: a fake broker without
    ``advertised.listeners`` learns the client listener from them. ``any_broker`` (the
    client listener, which stands in for the brokers) accepts any registered broker id
    too, and lists dynamic configs only.
    """
    resp = DescribeConfigsResponse()
    for res in req.resources:
        result = DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        resp.results.append(result)
        keys = None if res.configuration_keys is None else list(res.configuration_keys)
        try:
            if res.resource_type == TOPIC:
                err = topic_name_error(res.resource_name)
                if err is not None:
                    raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
                if st.topic_id_of(res.resource_name) is None:
                    result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    result.error_message = ""
                    continue
                result.configs = _topic_entries(st, api_version, res.resource_name, keys, req.include_synonyms)
            elif res.resource_type == BROKER:
                node = _broker_id(res.resource_name)
                ok = node is None or node == st.node_id or (any_broker and node in st.brokers)
                if not ok:
                    raise _Refused(
                        ErrorCode.INVALID_REQUEST,
                        f"Unexpected broker id, expected {st.node_id} or empty "
                        f"string, but received {res.resource_name}",
                    )
                static = st.static_configs if not any_broker and node == st.node_id else None
                result.configs = _broker_entries(st, api_version, node, keys, req.include_synonyms, static)
            else:
                raise _Refused(
                    ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {TYPE_NAMES.get(res.resource_type)}"
                )
        except _Refused as exc:
            result.error_code, result.error_message = exc.code, exc.message
    return resp


# ---------------------------------------------------------------------------- CreateTopics


def creation_records(
    st: ControllerContext, topic: str, configs: Iterable[tuple[str, str | None]]
) -> list[RecordAndVersion] | tuple[int, str | None]:
    """ConfigRecords for a topic created with ``configs``, or (error code, message).

    As Kafka's CreateTopics: a null value refuses the topic ("Null value not supported for
    topic configs: a,b"); the rest is an incremental SET on a resource that does not exist
    yet (so no existence check), validated as IncrementalAlterConfigs validates it. The
    records go right after the TopicRecord.
    """
    ops: dict[str, tuple[int, str | None]] = {}
    nulls: list[str] = []
    for key, value in configs:
        if value is None:
            nulls.append(key)
        else:
            ops[key] = (SET, value)
    if nulls:
        return INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(nulls)
    if not ops:
        return []
    records: list[RecordAndVersion] = []
    try:
        for key, (_op, value) in ops.items():
            if value is not None and len(value) > _MAX_VALUE_LEN:
                raise _Refused(
                    INVALID_CONFIG,
                    "The configuration value cannot be added because it exceeds the "
                    f"maximum value size of {_MAX_VALUE_LEN} bytes.",
                )
            records.append(_record(TOPIC, topic, key, value))
        _validate_topic_configs({k: v for k, (_o, v) in ops.items() if v is not None})
    except _Refused as exc:
        return exc.code, exc.message
    return records


def effective_topic_configs(st: ControllerContext, overrides: dict[str, str]) -> list[tuple[str, str | None, int]]:
    """(name, value, source) of every topic config a new topic with ``overrides`` has
    (CreateTopics v5+ answers list them)."""
    defaults = st.configs.get(BROKER, "")
    out: list[tuple[str, str | None, int]] = []
    for key, spec in sorted(TOPIC_CONFIGS.items()):
        if key in overrides:
            out.append((key, overrides[key], SOURCE_TOPIC))
        elif spec.synonym is not None and spec.synonym in defaults:
            out.append((key, defaults[spec.synonym], SOURCE_DYNAMIC_DEFAULT_BROKER))
        else:
            out.append((key, spec.default, SOURCE_DEFAULT))
    return out


def created_topic_configs(st: ControllerContext, records: list[RecordAndVersion]) -> list[CreatableTopicConfigs]:
    """CreateTopics v5+ ``Configs``: every topic config of the new topic and its source."""
    overrides = {r.name: r.value for r, _ in records if isinstance(r, ConfigRecord) and r.value is not None}
    return [
        CreatableTopicConfigs(name=name, value=value, read_only=False, config_source=source, is_sensitive=False)
        for name, value, source in effective_topic_configs(st, overrides)
    ]
