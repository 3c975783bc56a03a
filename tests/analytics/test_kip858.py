"""KIP-858 checks: each rule fires on its story, stays quiet on a correct one, and says
"indeterminate" when the capture lacks the state it needs."""

from __future__ import annotations

import dataclasses
import io
import json
from typing import Any

from kraft_jbod.analytics import kip858 as K
from kraft_jbod.capture.kafka import decode_capture
from kraft_jbod.capture.sample import build_sample

D1, D2, D3 = "AAAAAAAAAAEAAAAAAAABAA", "AAAAAAAAAAEAAAAAAAABAQ", "AAAAAAAAAAEAAAAAAAABAg"
ROGUE = "AAAAAAAAAAAAAAAAAADerQ"
TOPIC = "AAAAAAAAAAAAAAAAAAAD6A"


def reg(ts: int, broker: int = 1, dirs: list[str] | None = None, epoch: int = 10, inc: str = "I1") -> K.Event:
    return K.RegistrationEvent(
        ts=ts,
        broker=broker,
        log_dirs=dirs if dirs is not None else [D1, D2],
        incarnation=inc,
        epoch=epoch,
        error_code=0,
        conn="c",
    )


def hb(
    ts: int,
    broker: int = 1,
    epoch: int = 10,
    offline: list[str] | None = None,
    fenced: bool = False,
    error: int = 0,
    cordoned: list[str] | None = None,
) -> K.HeartbeatEvent:
    return K.HeartbeatEvent(
        ts=ts,
        broker=broker,
        epoch=epoch,
        offline_dirs=offline or [],
        cordoned_dirs=cordoned,
        want_fence=False,
        is_fenced=fenced,
        error_code=error,
        conn="c",
    )


def assign(ts: int, assignments: list[list[Any]]) -> K.Event:
    return K.AssignEvent(ts=ts, broker=1, epoch=10, error_code=0, conn="c", assignments=assignments)


def rec(ts: int, offset: int, name: str, **data: Any) -> K.Event:
    return K.RecordEvent(ts=ts, offset=offset, name=name, data=data, conn="f")


def part(ts: int, offset: int, p: int, replicas: list[int], dirs: list[str], leader: int) -> K.Event:
    return rec(
        ts,
        offset,
        "PartitionRecord",
        topicId=TOPIC,
        partitionId=p,
        replicas=replicas,
        isr=replicas,
        leader=leader,
        directories=dirs,
    )


def rules(findings: list[K.Finding], verdict: str = "violation") -> list[tuple[str, int | None, str]]:
    return [(f.rule, f.broker, f.subject) for f in findings if f.verdict == verdict]


def test_clean_story_has_no_violation() -> None:
    events = [
        reg(1),
        part(2, 50, 0, [1], [D1], 1),
        hb(3),
        hb(4, offline=[D2]),
        assign(5, [[D1, TOPIC, 0, 0]]),
        hb(6, offline=[D2]),
    ]
    assert rules(K.check(events)) == []


def test_heartbeat_naming_an_unregistered_dir() -> None:
    f = K.check([reg(1), hb(2, offline=[ROGUE]), hb(3, offline=[ROGUE])])
    assert rules(f) == [(K.HEARTBEAT_UNREGISTERED_OFFLINE_DIR, 1, ROGUE)]
    assert f[0].count == 2 and (f[0].first_ts, f[0].last_ts) == (2, 3)


def test_heartbeat_without_registration_is_indeterminate() -> None:
    f = K.check([hb(2, offline=[ROGUE])])
    assert rules(f) == [] and rules(f, "indeterminate") == [
        (K.HEARTBEAT_UNREGISTERED_OFFLINE_DIR, 1, "registration not captured")
    ]


def test_assignment_to_offline_and_unknown_dirs() -> None:
    entries = assign(
        5,
        [
            [D2, TOPIC, 0, 0],
            [D3, TOPIC, 1, 0],
            [D1, TOPIC, 2, 0],
            [K.LOST, TOPIC, 3, 0],
            [D3, TOPIC, 4, 6],
        ],
    )
    f = K.check([reg(1), hb(2, offline=[D2]), entries])
    assert sorted(rules(f)) == sorted(
        [
            (K.ASSIGNMENT_TO_OFFLINE_DIR, 1, f"{TOPIC}-0 -> {D2}"),
            (K.ASSIGNMENT_TO_OFFLINE_DIR, 1, f"{TOPIC}-1 -> {D3}"),
            (K.ASSIGNMENT_TO_OFFLINE_DIR, 1, f"{TOPIC}-3 -> {K.LOST}"),
        ]
    )


def test_partition_record_placing_replica_in_offline_dir() -> None:
    events = [reg(1), hb(2, offline=[D2]), part(3, 7, 0, [1], [D2], 1)]
    # Written after the report, the record also leaves the leader on the offline directory.
    assert rules(K.check(events)) == [
        (K.ASSIGNMENT_TO_OFFLINE_DIR, 1, f"{TOPIC}-0 -> {D2}"),
        (K.LEADER_ON_OFFLINE_DIR, 1, f"{TOPIC}-0"),
    ]


def test_epoch_regressions() -> None:
    f = K.check([reg(1, epoch=10), reg(2, epoch=9, inc="I2"), hb(3, epoch=8)])
    got = rules(f)
    assert (K.BROKER_EPOCH_REGRESSION, 1, "10 -> 9") in got
    assert (K.BROKER_EPOCH_REGRESSION, 1, "heartbeat 8 < 10") in got
    # Rejected stale heartbeats and same-incarnation re-registrations are fine.
    assert rules(K.check([reg(1, epoch=10), hb(2, epoch=8, error=77), reg(3, epoch=10)])) == []
    assert rules(K.check([reg(1, epoch=10), reg(3, epoch=10, inc="I9")])) == [
        (K.BROKER_EPOCH_REGRESSION, 1, "10 -> 10")
    ]


def test_unfenced_with_unassigned_replicas() -> None:
    events = [reg(1), part(2, 1, 0, [1, 2], [K.UNASSIGNED, D3], 2), hb(3, fenced=True), hb(4, fenced=False)]
    assert rules(K.check(events)) == [(K.UNFENCED_WITH_UNASSIGNED_REPLICAS, 1, f"{TOPIC}-0")]
    (f,) = [x for x in K.check(events) if x.verdict == "violation"]
    assert f.severity == "warning"
    # After an assignment the same unfencing is fine; a single-dir broker is never flagged.
    assigned = [
        *events[:3],
        assign(3, [[D1, TOPIC, 0, 0]]),
        hb(4, fenced=False),
    ]
    assert rules(K.check(assigned)) == []
    single = [reg(1, dirs=[D1]), *events[1:]]
    assert rules(K.check(single)) == []


def test_leader_left_on_offline_dir() -> None:
    base = [reg(1), part(2, 1, 0, [1, 2], [D2, D3], 1), hb(3, offline=[D2])]
    later = rec(4, 2, "BrokerRegistrationChangeRecord", brokerId=1, brokerEpoch=10, fenced=0, logDirs=[D1])
    assert rules(K.check([*base, later])) == [(K.LEADER_ON_OFFLINE_DIR, 1, f"{TOPIC}-0")]
    moved = rec(
        5, 3, "PartitionChangeRecord", topicId=TOPIC, partitionId=0, leader=2, isr=[2], replicas=None, directories=None
    )
    assert rules(K.check([*base, later, moved])) == []
    assert [r for r in rules(K.check(base), "indeterminate") if r[0] == K.LEADER_ON_OFFLINE_DIR] == [
        (K.LEADER_ON_OFFLINE_DIR, 1, f"{TOPIC}-0")
    ]


def test_duplicate_records_applied_once() -> None:
    r = rec(2, 5, "RegisterBrokerRecord", brokerId=1, brokerEpoch=10, incarnationId="I1", logDirs=[D1, D2], fenced=True)
    # Two brokers fetched the same record: it is no second registration with the same epoch.
    assert rules(K.check([r, dataclasses.replace(r, ts=3, conn="g")])) == []


def test_events_from_the_sample_capture() -> None:
    col = K.EventCollector()
    events: list[K.Event] = []
    for f in decode_capture(io.BytesIO(build_sample())):
        events.extend(col.feed(f))
    events.extend(col.finish())
    kinds = [type(e) for e in events]
    assert kinds.count(K.RegistrationEvent) == 2 and kinds.count(K.AssignEvent) == 1
    assert {e.name for e in events if isinstance(e, K.RecordEvent)} == {"RegisterBrokerRecord", "PartitionRecord"}
    hbs = [e for e in events if isinstance(e, K.HeartbeatEvent)]
    assert any(e.offline_dirs == ["PJ4felstTI6fChssPU5fYA"] and e.error_code == 0 for e in hbs)
    # What a task ships is builtins (JSON-ready) and gives the same events back.
    assert all(K.event_from_state(json.loads(json.dumps(K.event_state(e)))) == e for e in events)
    # DIR_B was registered by broker 1: its offline report is legitimate.
    assert rules(K.check(events)) == []


def test_check_events_tolerates_garbage() -> None:
    out = K.check_events(["{not an event", reg(1), hb(2, offline=[ROGUE]), []])
    assert [f.rule for f in out if f.verdict == "violation"] == [K.HEARTBEAT_UNREGISTERED_OFFLINE_DIR]
    broken = K.check_events([K.RecordEvent(ts=1, conn="f", offset=1, name="RegisterBrokerRecord", data={})])
    assert broken and broken[0].verdict == "indeterminate"


def test_unfenced_with_no_replicas_is_determinate_when_the_log_is_whole() -> None:
    # A broker unfenced before any topic exists: with the metadata log captured from offset 0
    # that is known (no replica, nothing to check); without it, the capture lacks the state.
    whole = [rec(0, 0, "FeatureLevelRecord", featureLevel=21), reg(1), hb(2, fenced=True), hb(3, fenced=False)]
    assert K.check(whole) == []
    partial = whole[1:]
    assert [(f.rule, f.verdict) for f in K.check(partial)] == [(K.UNFENCED_WITH_UNASSIGNED_REPLICAS, "indeterminate")]


def test_the_logs_first_batch_makes_the_capture_whole() -> None:
    # KRaft's log starts with a control batch at offset 0: seeing it in a Fetch answer is
    # what tells the checker that the capture holds the whole history (the demo's case).
    events = [
        K.LogStartEvent(ts=0, conn="f"),
        rec(0, 1, "FeatureLevelRecord", featureLevel=21),
        reg(1),
        hb(2, fenced=True),
        hb(3, fenced=False),
    ]
    assert K.check(events) == []
    assert [f.verdict for f in K.check(events[1:])] == ["indeterminate"]


# ---------------------------------------------------------------- KIP-1066 cordoning


def reg_rec(ts: int, offset: int, broker: int, dirs: list[str], cordoned: list[str] | None) -> K.Event:
    return rec(
        ts,
        offset,
        "RegisterBrokerRecord",
        brokerId=broker,
        brokerEpoch=offset,
        incarnationId=f"I{broker}",
        logDirs=dirs,
        fenced=False,
        cordonedLogDirs=cordoned,
    )


def cordon_rec(ts: int, offset: int, broker: int, cordoned: list[str]) -> K.Event:
    return rec(ts, offset, "BrokerRegistrationChangeRecord", brokerId=broker, brokerEpoch=1, cordonedLogDirs=cordoned)


def test_new_replica_on_a_fully_cordoned_broker() -> None:
    events = [
        reg_rec(1, 1, 1, [D1, D2], None),
        reg_rec(2, 2, 2, [D3], None),
        cordon_rec(3, 3, 1, [D1, D2]),
        part(4, 4, 0, [2], [D3], 2),  # fine: broker 2 is not cordoned
        part(5, 5, 1, [1, 2], [D1, D3], 2),
    ]  # broker 1 is fully cordoned
    assert rules(K.check(events)) == [(K.REPLICA_ON_CORDONED_BROKER, 1, f"{TOPIC}-1")]


def test_partly_cordoned_or_existing_replicas_are_fine() -> None:
    events = [
        reg_rec(1, 1, 1, [D1, D2], [D1]),
        reg_rec(2, 2, 2, [D3], None),
        part(3, 3, 0, [1, 2], [D2, D3], 1),  # D2 is still open
        cordon_rec(4, 4, 1, [D1, D2]),
        # broker 1 already hosted the replica: a change that keeps it adds nothing
        rec(5, 5, "PartitionChangeRecord", topicId=TOPIC, partitionId=0, replicas=[2, 1], leader=2),
        cordon_rec(6, 6, 2, [D3]),
        # a new partition on broker 1, now fully cordoned, is a violation
        part(7, 7, 1, [1], [D1], 1),
    ]
    f = K.check(events)
    assert rules(f) == [(K.REPLICA_ON_CORDONED_BROKER, 1, f"{TOPIC}-1")]
    grow = [
        *events,
        rec(8, 8, "PartitionChangeRecord", topicId=TOPIC, partitionId=0, replicas=[2, 1, 3], leader=2),
        # a reassignment adding fully cordoned broker 2 to partition 1
        rec(9, 9, "PartitionChangeRecord", topicId=TOPIC, partitionId=1, replicas=[1, 2], leader=1),
    ]
    assert rules(K.check(grow)) == [
        (K.REPLICA_ON_CORDONED_BROKER, 1, f"{TOPIC}-1"),  # 3: no registration
        (K.REPLICA_ON_CORDONED_BROKER, 2, f"{TOPIC}-1"),
    ]


def test_uncordoned_broker_may_take_replicas_again() -> None:
    events = [reg_rec(1, 1, 1, [D1], [D1]), cordon_rec(2, 2, 1, []), part(3, 3, 0, [1], [D1], 1)]
    assert rules(K.check(events)) == []


def cordon_hb(ts: int, cordoned: list[str] | None, offline: list[str] | None = None) -> K.Event:
    return hb(ts, offline=offline, cordoned=cordoned)


def test_heartbeat_cordoned_dirs_must_be_online_registered_dirs() -> None:
    assert rules(K.check([reg(1), cordon_hb(2, [D1]), cordon_hb(3, None), cordon_hb(4, [])])) == []
    f = K.check([reg(1), cordon_hb(2, [D1, ROGUE])])
    assert rules(f) == [(K.HEARTBEAT_CORDONED_DIR_NOT_ONLINE, 1, ROGUE)] and f[0].severity == "error"
    f = K.check([reg(1), cordon_hb(2, [D2], offline=[D2]), cordon_hb(3, [D2], offline=[D2])])
    assert rules(f) == [(K.HEARTBEAT_CORDONED_DIR_NOT_ONLINE, 1, D2)]
    assert f[0].severity == "warning" and f[0].count == 2
    f = K.check([cordon_hb(2, [D1])])
    assert rules(f, "indeterminate") == [(K.HEARTBEAT_CORDONED_DIR_NOT_ONLINE, 1, "registration not captured")]
