"""Where the controller follows Kafka 4.4's controller code (issue 12, items 1-7), one table per item.

Each expectation is what Kafka's ClusterControlManager, BrokerHeartbeatManager /
BrokerHeartbeatTracker, ReplicationControlManager, StripedReplicaPlacer and
MetadataCache do for the same sequence (read from Kafka 4.4's source).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from kraft_jbod.controller import client_api
from kraft_jbod.controller import features as fv
from kraft_jbod.controller import replication as rp
from kraft_jbod.controller.heartbeat import HbState
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener
from kraft_jbod.messages.create_topics_request import CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from kraft_jbod.wire.constants import METADATA_TOPIC_ID
from tests.controller.harness import CLUSTER_ID, Cluster, dir_id, incarnation

TIMEOUT = 9000

# ---------------------------------------------------------------------- item 1: sessions


def _never_heartbeated(c: Cluster) -> None:
    c.register(1)


def _fenced_heartbeating(c: Cluster) -> None:
    c.register(1)
    c.heartbeat(1, offset=0)  # not caught up: stays fenced, but the session is live


def _fenced_by_want_fence(c: Cluster) -> None:
    c.start_broker(1)
    assert c.heartbeat(1, want_fence=True).response.is_fenced  # type: ignore[attr-defined]


def _fenced_by_expiry(c: Cluster) -> None:
    c.start_broker(1)
    c.now += TIMEOUT + 1
    assert c.tick()  # fencing records
    assert c.state.brokers[1].fenced


def _unfenced_live(c: Cluster) -> None:
    c.start_broker(1)


def _unfenced_after_restart(c: Cluster) -> None:
    c.start_broker(1)
    c.restart()  # activation opens a session for every unfenced broker


def _fenced_after_restart(c: Cluster) -> None:
    c.register(1)
    c.heartbeat(1, offset=0)
    c.restart()  # a fenced broker gets no session at activation


def _live_session_then_silence(c: Cluster) -> None:
    c.register(1)
    c.heartbeat(1, offset=0)
    c.now += TIMEOUT + 1


# setup -> does a new incarnation get DUPLICATE_BROKER_REGISTRATION?
SESSION_CASES: list[tuple[str, Callable[[Cluster], None], bool]] = [
    ("registered, never heartbeated", _never_heartbeated, False),
    ("fenced, heartbeating", _fenced_heartbeating, True),
    ("fenced by WantFence, heartbeating", _fenced_by_want_fence, True),
    ("fenced by session expiry", _fenced_by_expiry, False),
    ("unfenced, live session", _unfenced_live, True),
    ("unfenced, controller restarted", _unfenced_after_restart, True),
    ("fenced, controller restarted", _fenced_after_restart, False),
    ("fenced, heartbeats stopped past the timeout", _live_session_then_silence, False),
]


@pytest.mark.parametrize(("case", "setup", "duplicate"), SESSION_CASES, ids=[c for c, _, _ in SESSION_CASES])
def test_new_incarnation_against_a_session(case: str, setup: Callable[[Cluster], None], duplicate: bool) -> None:
    c = Cluster(session_timeout_ms=TIMEOUT)
    setup(c)
    offset = c.end_offset
    out = c.register(1, inc=7)
    if duplicate:
        assert out.response.error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION  # type: ignore[attr-defined]
        assert out.records == []
    else:
        assert out.response.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
        # The new epoch is the offset of the new RegisterBrokerRecord (the last record).
        assert out.response.broker_epoch == offset + len(out.records) - 1  # type: ignore[attr-defined]
        assert c.state.brokers[1].incarnation_id == incarnation(1, 7)
        assert c.state.brokers[1].fenced


def test_silent_fenced_broker_is_fenced_again_on_expiry() -> None:
    """Kafka 4.4 expires any session, fenced or not, and writes the fencing change again."""
    c = Cluster(session_timeout_ms=TIMEOUT)
    c.register(1)
    c.heartbeat(1, offset=0)
    c.now += TIMEOUT + 1
    [(rec, _)] = c.tick()
    assert isinstance(rec, BrokerRegistrationChangeRecord) and rec.fenced == 1
    assert c.tick() == []  # the session is gone: nothing more


def test_registration_alone_opens_no_session_so_it_never_expires() -> None:
    c = Cluster(session_timeout_ms=TIMEOUT)
    c.register(1)
    c.now += 10 * TIMEOUT
    assert c.tick() == []


# ---------------------------------------------------------------------- item 2: LogDirs order


@pytest.mark.parametrize("order", [[2, 0, 1], [0, 1, 2], [1, 2, 0]])
def test_register_record_keeps_request_order(order: list[int]) -> None:
    c = Cluster()
    dirs = [dir_id(1, i) for i in order]
    rec = c.register(1, dirs).records[-1][0]
    assert isinstance(rec, RegisterBrokerRecord) and rec.log_dirs == dirs
    # Kafka's BrokerRegistration (the image) sorts them.
    assert c.state.brokers[1].registered_dirs == tuple(sorted(dirs, key=lambda u: u.int))


def test_amended_registration_keeps_request_order_too() -> None:
    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    rec = c.register(1, [dir_id(1, 1), dir_id(1, 0)]).records[-1][0]
    assert isinstance(rec, RegisterBrokerRecord) and rec.log_dirs == [dir_id(1, 1), dir_id(1, 0)]


# ---------------------------------------------------------------------- item 3: placement


def _register_rack(c: Cluster, broker: int, rack: str | None) -> None:
    req = BrokerRegistrationRequest(
        broker_id=broker,
        cluster_id=CLUSTER_ID,
        incarnation_id=incarnation(broker),
        listeners=[Listener("PLAINTEXT", "localhost", 9092 + broker, 0)],
        features=[
            Feature("metadata.version", 1, fv.NEWEST_LEVEL),
            *(Feature(n, 0, hi) for n, hi in fv.IMPLEMENTED_MAX.items()),
        ],
        rack=rack,
        log_dirs=[dir_id(broker, 0)],
    )
    assert c.call(62, 4, req).response.error_code == 0  # type: ignore[attr-defined]


def _create(c: Cluster, n: int, rf: int, name: str = "t") -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=n, replication_factor=rf)])


PLACEMENT_ERRORS = [
    # (unfenced, fenced, rf, message)
    (
        0,
        2,
        1,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced, "
        "or have all their log directories cordoned.",
    ),
    (
        1,
        1,
        3,
        "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be "
        "reached because only 2 broker(s) are registered or some brokers have all their log "
        "directories cordoned.",
    ),
    (
        0,
        0,
        1,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced, "
        "or have all their log directories cordoned.",
    ),
]


@pytest.mark.parametrize(("unfenced", "fenced", "rf", "message"), PLACEMENT_ERRORS)
def test_placement_errors_use_kafkas_messages(unfenced: int, fenced: int, rf: int, message: str) -> None:
    c = Cluster()
    for b in range(1, unfenced + 1):
        c.start_broker(b)
    for b in range(unfenced + 1, unfenced + fenced + 1):
        c.register(b)
    [res] = c.call(19, 7, _create(c, 1, rf)).response.topics  # type: ignore[attr-defined]
    assert (res.error_code, res.error_message) == (ErrorCode.INVALID_REPLICATION_FACTOR, message)


@pytest.mark.parametrize(("rf", "n"), [(-2, 1), (0, 1)])
def test_non_positive_replication_factor_message(rf: int, n: int) -> None:
    c = Cluster()
    c.start_broker(1)
    [res] = c.call(19, 7, _create(c, n, rf)).response.topics  # type: ignore[attr-defined]
    assert res.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert res.error_message == "Replication factor must be larger than 0, or -1 to use the default value."


def test_fenced_brokers_are_followers_never_leaders_nor_in_isr() -> None:
    c = Cluster()
    c.start_broker(1)
    c.register(2)
    c.register(3)
    out = c.call(19, 7, _create(c, 12, 3))
    assert out.response.topics[0].error_code == 0  # type: ignore[attr-defined]
    parts = [r for r, _ in out.records if not hasattr(r, "name")]
    assert len(parts) == 12
    for p in parts:
        assert sorted(p.replicas) == [1, 2, 3]  # type: ignore[attr-defined]
        assert p.replicas[0] == 1 and p.leader == 1 and p.isr == [1]  # type: ignore[attr-defined]


def test_racks_are_spread_and_leaders_balanced() -> None:
    c = Cluster()
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    for b, rack in racks.items():
        _register_rack(c, b, rack)
        c.heartbeat(b)
    out = c.call(19, 7, _create(c, 60, 3))
    parts = [r for r, _ in out.records if not hasattr(r, "name")]
    leaders: dict[int, int] = {}
    for p in parts:
        assert len({racks[b] for b in p.replicas}) == 3  # type: ignore[attr-defined]
        leaders[p.replicas[0]] = leaders.get(p.replicas[0], 0) + 1  # type: ignore[attr-defined]
    assert sorted(leaders) == [1, 2, 3, 4, 5, 6] and max(leaders.values()) - min(leaders.values()) <= 2


def test_broker_in_controlled_shutdown_is_not_usable() -> None:
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    c.create_topic("lead", 2, 2)  # broker 2 leads one partition, so it stays in controlled shutdown
    c.heartbeat(2, want_shut_down=True)
    assert c.state.broker_state(2) is HbState.CONTROLLED_SHUTDOWN
    [res] = c.call(19, 7, _create(c, 1, 2)).response.topics  # type: ignore[attr-defined]
    assert res.error_code == ErrorCode.INVALID_REPLICATION_FACTOR and "only 1 broker(s)" in res.error_message


MANUAL_CASES = [
    (
        [[1], [1]],
        [0, 0],
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "Found multiple manual partition assignments for partition 0",
    ),
    (
        [[]],
        [0],
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes an empty replica list.",
    ),
    (
        [[9]],
        [0],
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 9, but no such broker is registered.",
    ),
    (
        [[1, 1]],
        [0],
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes the broker 1 more than once.",
    ),
    (
        [[1], [1, 2]],
        [0, 1],
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes a partition with 2 replica(s), but this is not consistent "
        "with previous partitions, which have 1 replica(s).",
    ),
    (
        [[2]],
        [0],
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled shutdown.",
    ),
    ([[1]], [1], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"),
]


@pytest.mark.parametrize(("assignments", "indices", "code", "message"), MANUAL_CASES)
def test_manual_assignment_errors(assignments: list[list[int]], indices: list[int], code: int, message: str) -> None:
    c = Cluster()
    c.start_broker(1)
    c.register(2)
    topic = CreatableTopic(
        name="m",
        num_partitions=-1,
        replication_factor=-1,
        assignments=[CreatableReplicaAssignment(i, a) for i, a in zip(indices, assignments, strict=True)],
    )
    [res] = c.call(19, 7, CreateTopicsRequest(topics=[topic])).response.topics  # type: ignore[attr-defined]
    assert (res.error_code, res.error_message) == (code, message)


# ---------------------------------------------------------------------- item 4: offline dir released


def test_offline_directory_is_released_to_other_brokers() -> None:
    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    out = c.register(2, [dir_id(1, 1)])
    assert out.response.error_code == ErrorCode.INVALID_REGISTRATION  # type: ignore[attr-defined]
    c.heartbeat(1, offline=[dir_id(1, 1)])
    out = c.register(2, [dir_id(1, 1)])
    assert out.response.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    # ... and broker 1, restarting with it, is now the one refused.
    c.now += TIMEOUT + 1
    out = c.register(1, [dir_id(1, 0), dir_id(1, 1)], inc=1)
    assert out.response.error_code == ErrorCode.INVALID_REGISTRATION  # type: ignore[attr-defined]
    assert c.state.check_invariants() == []
    c.restart()
    assert c.state.check_invariants() == []


# ---------------------------------------------------------------------- item 5: 10,000 records per operation


@pytest.mark.parametrize(
    ("partitions", "validate_only", "ok"), [(9_999, False, True), (10_000, False, False), (10_000, True, False)]
)
def test_create_topics_record_limit(partitions: int, validate_only: bool, ok: bool) -> None:
    c = Cluster()
    c.start_broker(1)
    req = _create(c, partitions, 1)
    req.validate_only = validate_only
    out = c.call(19, 7, req)
    [res] = out.response.topics  # type: ignore[attr-defined]
    if ok:
        assert res.error_code == 0 and len(out.records) == partitions + 1 == 10_000
    else:
        assert (res.error_code, res.error_message) == (
            ErrorCode.POLICY_VIOLATION,
            "Unable to perform excessively large batch operation.",
        )
        assert out.records == []


def test_create_topics_record_limit_counts_every_topic() -> None:
    c = Cluster()
    c.start_broker(1)
    req = CreateTopicsRequest(
        topics=[CreatableTopic(name=f"t{i}", num_partitions=5_000, replication_factor=1) for i in range(2)]
    )
    out = c.call(19, 7, req)
    assert [r.error_code for r in out.response.topics] == [ErrorCode.POLICY_VIOLATION] * 2  # type: ignore[attr-defined]
    assert out.records == []


# ---------------------------------------------------------------------- item 6: offline replicas in views


def _metadata_offline(c: Cluster) -> list[int]:
    resp = client_api.metadata_response(c.state, 12, MetadataRequest(topics=None))
    return list(resp.topics[0].partitions[0].offline_replicas)


def test_replica_in_a_directory_missing_after_restart_is_offline_everywhere() -> None:
    c = Cluster(session_timeout_ms=TIMEOUT)
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.start_broker(2)
    topic = CreatableTopic(
        name="t", num_partitions=-1, replication_factor=-1, assignments=[CreatableReplicaAssignment(0, [2, 1])]
    )
    c.call(19, 7, CreateTopicsRequest(topics=[topic]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.assign(1, dir_id(1, 1), [(tid, 0)])
    assert _metadata_offline(c) == []
    # Broker 1 restarts without dir 1 (same incarnation: an amended registration).
    c.register(1, [dir_id(1, 0)])
    assert _metadata_offline(c) == [1]
    view = client_api.cluster_view(c.state)
    assert view["topics"][0]["partitions"][0]["offline_replicas"] == [1]


def test_replica_in_a_failed_directory_is_offline() -> None:
    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.create_topic("t", 1, 1)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.assign(1, dir_id(1, 0), [(tid, 0)])
    c.heartbeat(1, offline=[dir_id(1, 0)])
    assert _metadata_offline(c) == [1]


# ---------------------------------------------------------------------- item 7: unfence plus offline


def test_unfence_and_offline_in_one_heartbeat_writes_one_record_per_partition() -> None:
    c = Cluster(level=25)  # without ELR: the last ISR member stays in the ISR when fenced
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.create_topic("t", 2, 1)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.assign(1, dir_id(1, 0), [(tid, 0)])
    c.assign(1, dir_id(1, 1), [(tid, 1)])
    c.heartbeat(1, want_fence=True)  # both partitions lose their leader, ISR stays [1]
    out = c.heartbeat(1, offline=[dir_id(1, 0)])
    kinds = [(type(r).__name__, getattr(r, "partition_id", None)) for r, _ in out.records]
    # Unfence first, then the election of the partition in the surviving dir, then the dirs.
    assert kinds == [
        ("BrokerRegistrationChangeRecord", None),
        ("PartitionChangeRecord", 1),
        ("BrokerRegistrationChangeRecord", None),
    ]
    assert isinstance(out.records[1][0], PartitionChangeRecord) and out.records[1][0].leader == 1
    assert c.state.partition(tid, 0).leader == -1  # type: ignore[union-attr]
    assert c.state.partition(tid, 1).leader == 1  # type: ignore[union-attr]
    assert c.state.check_invariants() == []


# ---------------------------------------------------------------------- KIP-1066 cordoned directories (issue 13)


def _cordon_records(out: object) -> list[list[uuid.UUID] | None]:
    return [
        r.cordoned_log_dirs
        for r, v in out.records  # type: ignore[attr-defined]
        if isinstance(r, BrokerRegistrationChangeRecord) and v == 3
    ]


def test_cordoned_dirs_recorded_when_the_set_changes() -> None:
    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    assert c.state.brokers[1].cordoned_dirs is None  # unknown until the broker says
    out = c.heartbeat(1, version=2)  # null: the broker has not caught up yet
    assert _cordon_records(out) == []
    out = c.heartbeat(1, version=2, cordoned=[])
    assert _cordon_records(out) == [[]]  # unknown -> known, even when empty
    assert c.heartbeat(1, version=2, cordoned=[]).records == []
    out = c.heartbeat(1, version=2, cordoned=[dir_id(1, 1), dir_id(1, 0)])
    assert _cordon_records(out) == [[dir_id(1, 1), dir_id(1, 0)]]  # as sent
    assert c.heartbeat(1, version=2, cordoned=[dir_id(1, 0), dir_id(1, 1)]).records == []  # same set
    assert c.state.brokers[1].cordoned_dirs == (dir_id(1, 1), dir_id(1, 0))
    assert not c.state.brokers[1].has_uncordoned_dirs
    # Cordoning moves nothing: still unfenced, nothing left the ISR.
    assert c.state.broker_state(1) is HbState.UNFENCED
    before = c.state.durable_state()
    c.restart()
    assert c.state.durable_state() == before


def test_cordoning_is_ignored_below_4_3() -> None:
    c = Cluster(level=29)
    c.start_broker(1)
    assert c.heartbeat(1, version=2, cordoned=[dir_id(1, 0)]).records == []


def test_placement_skips_fully_cordoned_brokers_and_manual_assignment_is_refused() -> None:
    c = Cluster()
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.start_broker(2)
    c.heartbeat(1, version=2, cordoned=[dir_id(1, 0)])  # one dir left: still usable
    out = c.call(19, 7, _create(c, 4, 2))
    assert out.response.topics[0].error_code == 0  # type: ignore[attr-defined]
    c.heartbeat(1, version=2, cordoned=[dir_id(1, 0), dir_id(1, 1)])
    [res] = c.call(19, 7, _create(c, 1, 2, name="u")).response.topics  # type: ignore[attr-defined]
    assert res.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert (
        "only 1 broker(s) are registered or some brokers have all their log directories cordoned" in res.error_message
    )
    out = c.call(19, 7, _create(c, 3, 1, name="v"))
    parts = [r for r, _ in out.records if not hasattr(r, "name")]
    assert parts and all(p.replicas == [2] for p in parts)  # type: ignore[attr-defined]
    topic = CreatableTopic(
        name="m", num_partitions=-1, replication_factor=-1, assignments=[CreatableReplicaAssignment(0, [1, 2])]
    )
    [res] = c.call(19, 7, CreateTopicsRequest(topics=[topic])).response.topics  # type: ignore[attr-defined]
    assert (res.error_code, res.error_message) == (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 1, but all its log directories are cordoned.",
    )


def test_reregistration_forgets_cordoned_dirs() -> None:
    c = Cluster()
    c.start_broker(1)
    c.heartbeat(1, version=2, cordoned=[dir_id(1, 0)])
    rec = c.register(1).records[-1][0]
    assert isinstance(rec, RegisterBrokerRecord) and rec.cordoned_log_dirs is None
    assert c.state.brokers[1].cordoned_dirs is None and c.state.brokers[1].has_uncordoned_dirs


# ---------------------------------------------------------------------- Fetch v18 (KIP-1166)


@pytest.mark.parametrize(
    ("version", "observer_hw", "parked"),
    [
        (17, 0, True),  # before v18 an idle fetch at the end always waits
        (18, 2**63 - 1, True),  # "not supported" marker: waits
        (18, -1, False),  # unknown: behind, answered at once
        (18, 1, False),  # behind ours
        (18, 3, True),  # caught up (our high watermark is the end offset, 3)
    ],
)
def test_fetch_v18_answers_at_once_when_the_observer_high_watermark_is_behind(
    tmp_path: Path, version: int, observer_hw: int, parked: bool
) -> None:
    log = MetadataLog.open(tmp_path / "log", fsync=False)
    log.leader_epoch = 1
    log.append([(NoOpRecord(), 0)] * 3, timestamp_ms=1)
    part = FetchPartition(
        partition=0, current_leader_epoch=1, fetch_offset=3, last_fetched_epoch=1, high_watermark=observer_hw
    )
    req = FetchRequest(
        cluster_id=CLUSTER_ID, max_wait_ms=500, topics=[FetchTopic(topic_id=METADATA_TOPIC_ID, partitions=[part])]
    )
    req = FetchRequest.decode(req.encode(version), version)
    answer = rp.handle_fetch(req, version, cluster_id=CLUSTER_ID, leader=rp.Leader(3000, 1, "127.0.0.1", 9093), log=log)
    assert (answer.park_ms > 0) is parked
    assert answer.response.responses[0].partitions[0].high_watermark == 3
    log.close()


def test_unregister_broker_record_limit() -> None:
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    for name in ("a", "b"):
        assert c.call(19, 7, _create(c, 5_000, 2, name=name)).records  # 10,000 partitions, both in every ISR
    out = c.call(64, 0, UnregisterBrokerRequest(broker_id=1))
    assert (out.response.error_code, out.response.error_message) == (  # type: ignore[attr-defined]
        ErrorCode.POLICY_VIOLATION,
        "Unable to perform excessively large batch operation.",
    )
    assert out.records == [] and 1 in c.state.brokers
