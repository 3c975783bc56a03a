"""BrokerRegistration: every error path (table-driven) and the records on success."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.errors import ConfigError, ProtocolError
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Feature
from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from tests.controller.harness import Cluster, dir_id

NEGATIVE_RESERVED = uuid.UUID(int=(1 << 63) | 5)  # msb 0, lsb negative as a signed long

ERROR_CASES: list[tuple[str, str, Callable[[Cluster], object], int]] = [
    ("kafka", "wrong cluster id", lambda c: c.register(1, cluster_id="other"), ErrorCode.INCONSISTENT_CLUSTER_ID),
    (
        "kafka",
        "live duplicate",
        lambda c: (c.register(1), c.heartbeat(1), c.register(1, inc=1))[2],
        ErrorCode.DUPLICATE_BROKER_REGISTRATION,
    ),
    ("kafka", "zk broker", lambda c: c.register(1, zk=True), ErrorCode.BROKER_ID_NOT_REGISTERED),
    ("kafka", "no log dirs", lambda c: c.register(1, []), ErrorCode.INVALID_REGISTRATION),
    ("kip", "no log dirs", lambda c: c.register(1, []), ErrorCode.INVALID_REQUEST),
    ("kafka", "v1 has no log dirs", lambda c: c.register(1, version=1), ErrorCode.INVALID_REGISTRATION),
    ("kafka", "reserved MIGRATING", lambda c: c.register(1, [uuid.UUID(int=0)]), ErrorCode.INVALID_REGISTRATION),
    (
        "kafka",
        "reserved 99",
        lambda c: c.register(1, [dir_id(1, 0), uuid.UUID(int=99)]),
        ErrorCode.INVALID_REGISTRATION,
    ),
    ("kafka", "reserved negative lsb", lambda c: c.register(1, [NEGATIVE_RESERVED]), ErrorCode.INVALID_REGISTRATION),
    ("kip", "reserved 2", lambda c: c.register(1, [uuid.UUID(int=2)]), ErrorCode.INVALID_REGISTRATION),
    ("kafka", "duplicate dir", lambda c: c.register(1, [dir_id(1, 0), dir_id(1, 0)]), ErrorCode.INVALID_REGISTRATION),
    (
        "kafka",
        "foreign dir",
        lambda c: (c.register(2), c.register(1, [dir_id(2, 0)]))[1],
        ErrorCode.INVALID_REGISTRATION,
    ),
    ("kafka", "mv range below", lambda c: c.register(1, mv_range=(1, 16)), ErrorCode.UNSUPPORTED_VERSION),
    ("kafka", "mv range above", lambda c: c.register(1, mv_range=(23, 25)), ErrorCode.UNSUPPORTED_VERSION),
    ("kafka", "mv omitted", lambda c: c.register(1, mv_range=None), ErrorCode.INVALID_REGISTRATION),
    (
        "kafka",
        "kraft.version range excludes 0",
        lambda c: c.register(1, extra_features=[Feature(fv.KRAFT_VERSION, 1, 1)]),
        ErrorCode.UNSUPPORTED_VERSION,
    ),
]


@pytest.mark.parametrize(
    ("profile", "case", "act", "code"), ERROR_CASES, ids=[f"{p}-{c}" for p, c, _, _ in ERROR_CASES]
)
def test_registration_errors(profile: str, case: str, act: Callable[[Cluster], object], code: int) -> None:
    c = Cluster(profile=profile)
    before = c.state.durable_state()
    start = c.end_offset
    out = act(c)
    assert out.response.error_code == code, ErrorCode(out.response.error_code).name  # type: ignore[attr-defined]
    assert out.records == []  # type: ignore[attr-defined]
    assert out.response.broker_epoch == -1  # type: ignore[attr-defined]
    if case not in ("live duplicate", "foreign dir"):
        assert c.end_offset == start
        assert c.state.durable_state() == before


def test_success_epoch_is_record_offset_and_record_shape() -> None:
    c = Cluster()
    c.create_topic  # noqa: B018 - harness sanity: methods exist
    offset = c.end_offset
    out = c.register(1, [dir_id(1, 1), dir_id(1, 0)])
    assert out.response.error_code == 0  # type: ignore[attr-defined]
    assert out.response.broker_epoch == offset  # type: ignore[attr-defined]
    [(rec, ver)] = out.records
    assert isinstance(rec, RegisterBrokerRecord) and ver == fv.register_broker_record_version(fv.DEFAULT_LEVEL)
    assert rec.fenced is True and rec.broker_epoch == offset
    assert rec.log_dirs == [dir_id(1, 1), dir_id(1, 0)]  # request order, as Kafka copies it
    assert c.state.brokers[1].registered_dirs == (dir_id(1, 0), dir_id(1, 1))  # the image sorts
    assert c.state.brokers[1].reg_offset == offset


def test_expired_session_allows_new_incarnation_with_new_epoch() -> None:
    c = Cluster(session_timeout_ms=9000)
    first = c.register(1).response.broker_epoch  # type: ignore[attr-defined]
    c.now += 9001
    out = c.register(1, inc=1)
    assert out.response.error_code == 0  # type: ignore[attr-defined]
    assert out.response.broker_epoch > first  # type: ignore[attr-defined]


def test_same_incarnation_amends_keeping_epoch_and_fencing() -> None:
    c = Cluster()
    c.start_broker(1)
    epoch = c.epoch(1)
    out = c.register(1)
    assert out.response.broker_epoch == epoch  # type: ignore[attr-defined]
    rec = out.records[-1][0]
    assert isinstance(rec, RegisterBrokerRecord) and rec.fenced is False
    assert c.state.brokers[1].reg_offset == c.end_offset - 1


def test_an_amended_registration_changes_no_partition_whatever_its_dirs() -> None:
    # Kafka writes only the RegisterBrokerRecord for the same incarnation: a directory
    # dropped from the list takes no replica out of any ISR (found by the twin).
    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.start_broker(2)
    c.create_topic("t", 1, 2)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.assign(1, dir_id(1, 1), [(tid, 0)])
    before = c.state.partition(tid, 0)
    assert before is not None and 1 in before.isr
    isr, leader = before.isr, before.leader
    out = c.register(1, [dir_id(1, 0)])
    assert [type(r) for r, _ in out.records] == [RegisterBrokerRecord]
    after = c.state.partition(tid, 0)
    assert after is not None and (after.isr, after.leader) == (isr, leader)
    assert c.state.check_invariants() == []


def test_pre_jbod_level_ignores_log_dirs() -> None:
    c = Cluster(level=16)
    out = c.register(1, [], mv_range=(1, 16))
    assert out.response.error_code == 0  # type: ignore[attr-defined]
    [(rec, ver)] = out.records
    assert ver == 2 and rec.log_dirs == []  # type: ignore[attr-defined]
    out = c.register(2, [uuid.UUID(int=0)], mv_range=(1, 16))
    assert out.response.error_code == 0  # type: ignore[attr-defined]
    assert c.state.brokers[2].registered_dirs == ()


@pytest.mark.parametrize(("level", "expected"), [(4, 0), (7, 1), (8, 2), (16, 2), (17, 3), (22, 3)])
def test_register_record_version_follows_metadata_version(level: int, expected: int) -> None:
    c = Cluster(level=level)
    out = c.register(1, mv_range=(1, 22))
    assert out.records[-1][1] == expected


def _boot(level: int) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for rec, ver in ControllerState.bootstrap_records(level):
        assert ver == 0
        if isinstance(rec, ConfigRecord):
            # Kafka's activation adds the cluster min.insync.replicas when ELR is on, last.
            assert (rec.resource_type, rec.resource_name, rec.name, rec.value) == (4, "", "min.insync.replicas", "1")
            out.append(("config min.insync.replicas", 1))
            continue
        assert isinstance(rec, FeatureLevelRecord)
        out.append((rec.name, rec.feature_level))
    return out


# What Kafka 4.4's formatter finalizes (BootstrapMetadata.fromVersions with each feature's
# defaultLevel): metadata.version first, then the rest sorted by name, zeros left out;
# eligible.leader.replicas.version 1 from 26 (4.1-IV0), with the min.insync.replicas record.
ELR_ON = [("config min.insync.replicas", 1)]
BOOTSTRAP = [
    (5, [("metadata.version", 5)]),
    (17, [("metadata.version", 17)]),
    (21, [("metadata.version", 21)]),
    (22, [("metadata.version", 22), ("group.version", 1)]),
    (24, [("metadata.version", 24), ("group.version", 1), ("transaction.version", 2)]),
    (25, [("metadata.version", 25), ("group.version", 1), ("transaction.version", 2)]),
    (
        26,
        [
            ("metadata.version", 26),
            ("eligible.leader.replicas.version", 1),
            ("group.version", 1),
            ("transaction.version", 2),
            *ELR_ON,
        ],
    ),
    (
        28,
        [
            ("metadata.version", 28),
            ("eligible.leader.replicas.version", 1),
            ("group.version", 1),
            ("share.version", 1),
            ("transaction.version", 2),
            *ELR_ON,
        ],
    ),
    (
        29,
        [
            ("metadata.version", 29),
            ("eligible.leader.replicas.version", 1),
            ("group.version", 1),
            ("share.version", 1),
            ("streams.version", 1),
            ("transaction.version", 2),
            *ELR_ON,
        ],
    ),
]


@pytest.mark.parametrize(("level", "expected"), BOOTSTRAP)
def test_bootstrap_records_as_kafkas_formatter(level: int, expected: list[tuple[str, int]]) -> None:
    assert _boot(level) == expected


def test_bootstrap_range() -> None:
    for bad in (3, fv.MAX_SUPPORTED_LEVEL + 1):
        with pytest.raises(ConfigError):
            ControllerState.bootstrap_records(bad)


def test_unknown_api_and_version_close_the_connection() -> None:
    c = Cluster()
    with pytest.raises(ProtocolError):
        c.state.handle(1, 12, BrokerRegistrationRequest(), now_ms=0, next_offset=0)
    with pytest.raises(ProtocolError):
        c.state.handle(62, 5, BrokerRegistrationRequest(), now_ms=0, next_offset=0)
    assert c.state.handled_api_versions()[62] == (0, 4)
    assert c.state.handled_api_versions()[73] == (0, 0)
