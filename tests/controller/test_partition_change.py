"""The partition change builder step by step (controller/partition_change.py).

Each step of Kafka's PartitionChangeBuilder is a function of its own here; these tests pin
each one against the rule it implements, then a few whole builds where steps interact
(tests/controller/test_elr_builder.py covers KIP-966 through the whole builder)."""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller import partition_change as pc
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord

TID = uuid.UUID(int=9)
DA, DB, DC, DNEW = (uuid.UUID(int=70 + i) for i in range(4))
MV = 30  # a JBOD level past 3.6-IV0


def view(**kw: object) -> pc.PartView:
    base: dict[str, object] = {"replicas": (1, 2, 3), "isr": (1, 2, 3), "leader": 1, "dirs": (DA, DB, DC)}
    base.update(kw)
    return pc.PartView(**base)  # type: ignore[arg-type]


def rec() -> PartitionChangeRecord:
    return PartitionChangeRecord(partition_id=0, topic_id=TID)


# ---------------------------------------------------------------------------- Rule 1


def test_reassignment_completes_once_the_adding_replicas_are_in_the_isr() -> None:
    assert pc.complete_reassignment([1, 2, 3, 4], [4], [1], [2, 3, 4]) == ([2, 3, 4], [2, 3, 4])


def test_reassignment_waits_for_an_adding_replica_outside_the_isr() -> None:
    assert pc.complete_reassignment([1, 2, 3, 4], [4], [1], [1, 2, 3]) is None


def test_reassignment_never_leaves_an_empty_isr_or_replica_set() -> None:
    assert pc.complete_reassignment([1, 2], [2], [1], [1]) is None  # only removing replicas in the ISR
    assert pc.complete_reassignment([1], [], [1], [1]) is None


def test_shrinking_reassignment_needs_every_target_replica_in_the_isr() -> None:
    assert pc.complete_reassignment([1, 2, 3], [], [1], [1, 2]) is None
    assert pc.complete_reassignment([1, 2, 3], [], [1], [1, 2, 3]) == ([2, 3], [2, 3])


def test_no_reassignment_in_progress_completes_nothing() -> None:
    assert pc.complete_reassignment([1, 2], [], [], [1, 2]) is None


# ---------------------------------------------------------------------------- Rule 4 (read)


def test_directories_follow_the_target_replicas() -> None:
    p = view()
    assert pc.target_directories(p, [1, 2, 3], lambda b: DNEW) == [DA, DB, DC]
    assert pc.target_directories(p, [3, 4], lambda b: DNEW) == [DC, DNEW]


# ---------------------------------------------------------------------------- Rule 5


def test_elr_is_empty_at_or_above_min_isr() -> None:
    assert pc.target_elr([1, 2, 3], [], [1, 2], min_isr=2) == []


def test_elr_below_min_isr_keeps_the_replicas_that_left_cleanly() -> None:
    assert pc.target_elr([1, 2, 3], [], [1], min_isr=2) == [2, 3]
    assert pc.target_elr([1, 2, 3], [4], [1], min_isr=2, unclean_shutdown=[3]) == [2, 4]


def test_java_hash_set_order_iterates_by_bucket() -> None:
    assert pc.java_hash_set_order([3, 1, 2, 1]) == [1, 2, 3]
    assert pc.java_hash_set_order([17, 1, 16]) == [16, 17, 1]


# ---------------------------------------------------------------------------- Rule 2


def test_try_election_takes_the_first_valid_replica() -> None:
    assert pc.try_election([3, 2, 1], lambda b: b < 3) == 2
    assert pc.try_election([3], lambda b: False) == pc.NO_LEADER


def test_last_known_leader_only_with_isr_and_elr_empty_and_one_known() -> None:
    p = view(isr=(), leader=-1, last_known_elr=(2,))
    assert pc.last_known_leader(p, [], [], lambda b: True, elr_on=True) == 2
    assert pc.last_known_leader(p, [], [], lambda b: False, elr_on=True) == pc.NO_LEADER
    assert pc.last_known_leader(p, [], [3], lambda b: True, elr_on=True) == pc.NO_LEADER
    assert pc.last_known_leader(p, [], [], lambda b: True, elr_on=False) == pc.NO_LEADER
    two = view(isr=(), leader=-1, last_known_elr=(2, 3))
    assert pc.last_known_leader(two, [], [], lambda b: True, elr_on=True) == pc.NO_LEADER


@pytest.mark.parametrize(
    ("election", "leader", "alive", "isr", "expected"),
    [
        (pc.ONLINE, 1, {1, 2, 3}, [1, 2, 3], pc.Election(1)),  # keeps a leader that may lead
        (pc.ONLINE, 1, {2, 3}, [1, 2, 3], pc.Election(2)),  # else the first eligible replica
        (pc.ONLINE, 1, {2, 3}, [1, 3], pc.Election(3)),  # eligible = in the ISR
        (pc.PREFERRED, 2, {1, 2, 3}, [1, 2, 3], pc.Election(1)),  # the preferred replica
        (pc.PREFERRED, 2, {2, 3}, [1, 2, 3], pc.Election(2)),  # else keep the leader
        (pc.PREFERRED, -1, {1, 3}, [2, 3], pc.Election(3)),  # else the next eligible
        (pc.ONLINE, 1, set(), [1, 2, 3], pc.Election(pc.NO_LEADER)),
        (pc.UNCLEAN, 1, {3}, [1], pc.Election(3, unclean=True)),  # outside the ISR
        (pc.UNCLEAN, 1, {1}, [1], pc.Election(1)),  # clean when the ISR allows
    ],
)
def test_elect_leader(election: int, leader: int, alive: set[int], isr: list[int], expected: pc.Election) -> None:
    p = view(leader=leader, isr=tuple(isr))
    got = pc.elect_leader(p, election, [1, 2, 3], isr, [], lambda b: b in alive, elr_on=False)
    assert got == expected


def test_elect_leader_from_the_elr_when_the_isr_is_empty() -> None:
    p = view(isr=(), leader=-1, elr=(2, 3))
    assert pc.elect_leader(p, pc.ONLINE, [1, 2, 3], [], [2, 3], lambda b: b != 2, elr_on=True) == pc.Election(3)


def test_elect_leader_falls_back_to_the_last_known_leader_as_unclean() -> None:
    p = view(isr=(), leader=-1, last_known_elr=(2,))
    got = pc.elect_leader(p, pc.ONLINE, [1, 2, 3], [], [], lambda b: b == 2, elr_on=True)
    assert got == pc.Election(2, unclean=True)


def test_record_election_from_the_elr_makes_it_the_isr() -> None:
    r = rec()
    isr, elr = pc.record_election(r, view(isr=(), leader=-1), pc.Election(3), [], [2, 3])
    assert (r.leader, isr, elr, r.isr) == (3, [3], [2], None)


def test_record_election_unclean_sets_isr_and_recovering() -> None:
    r = rec()
    pc.record_election(r, view(isr=(1,), leader=-1), pc.Election(3, unclean=True), [1], [])
    assert (r.leader, r.isr, r.leader_recovery_state) == (3, [3], pc.RECOVERING)


def test_record_election_same_leader_writes_nothing() -> None:
    r = rec()
    assert pc.record_election(r, view(), pc.Election(1), [1, 2], [5]) == ([1, 2], [5])
    assert pc.is_no_op(r)


# ---------------------------------------------------------------------------- ELR and ISR fields


def test_isr_and_elr_recorded_where_they_change() -> None:
    r = rec()
    pc.record_elr_and_isr(r, view(), [1], [2, 3], elr_on=True)
    assert (r.isr, r.eligible_leader_replicas) == ([1], [2, 3])


def test_elr_off_clears_a_leftover_elr_and_keeps_a_nonempty_isr_rule() -> None:
    r = rec()
    pc.record_elr_and_isr(r, view(elr=(3,)), [], [3], elr_on=False)
    assert (r.isr, r.eligible_leader_replicas) == (None, [])  # ISR never empty without ELR


def test_unclean_election_empties_the_elr() -> None:
    r = rec()
    r.isr = [3]
    pc.record_elr_and_isr(r, view(elr=(2,)), [3], [2], elr_on=True)
    assert (r.isr, r.eligible_leader_replicas) == ([3], [])


# ---------------------------------------------------------------------------- Rule 3


def test_leader_epoch_bumped_when_replicas_leave() -> None:
    r = rec()
    pc.bump_leader_epoch(r, view(), [1, 2], MV)
    assert r.leader == 1


def test_leader_epoch_bumped_on_isr_shrink_only_before_3_6() -> None:
    r = rec()
    r.isr = [1, 2]
    pc.bump_leader_epoch(r, view(), [1, 2, 3], MV)
    assert r.leader == pc.NO_LEADER_CHANGE
    pc.bump_leader_epoch(r, view(), [1, 2, 3], pc.MV_3_6_IV0 - 1)
    assert r.leader == 1


def test_leader_epoch_left_alone_when_the_leader_changes() -> None:
    r = rec()
    r.leader = 2
    pc.bump_leader_epoch(r, view(), [2], MV)
    assert r.leader == 2


# ---------------------------------------------------------------------------- LastKnownElr


def test_last_known_elr_set_when_first_leaderless_and_cleared_with_a_leader() -> None:
    r = rec()
    r.leader = pc.NO_LEADER
    pc.record_last_known_elr(r, view(leader=2))
    assert r.last_known_elr == [2]
    again = rec()
    again.leader = pc.NO_LEADER
    pc.record_last_known_elr(again, view(leader=-1, last_known_elr=(2,)))
    assert again.last_known_elr is None  # only the first time
    led = rec()
    led.leader = 3
    pc.record_last_known_elr(led, view(leader=-1, last_known_elr=(2,)))
    assert led.last_known_elr == []


# ---------------------------------------------------------------------------- Rule 4 (write), reassignment


def test_directories_recorded_only_at_jbod_levels() -> None:
    r = rec()
    pc.record_replicas_and_directories(r, view(), [1, 2, 3], [DA, DB, DC], {2: DNEW}, MV)
    assert (r.directories, r.replicas) == ([DA, DNEW, DC], None)
    old = rec()
    pc.record_replicas_and_directories(old, view(), [1, 2, 3], [DA, DB, DC], {2: DNEW}, 1)
    assert old.directories is None


def test_replicas_recorded_when_they_change() -> None:
    r = rec()
    pc.record_replicas_and_directories(r, view(), [2, 3], [DB, DC], None, MV)
    assert (r.replicas, r.directories) == ([2, 3], [DB, DC])


def test_reassignment_fields_and_requested_recovery_state() -> None:
    r = rec()
    pc.record_reassignment(r, view(adding=(4,), leader_recovery_state=pc.RECOVERING), [], [], pc.RECOVERED)
    assert (r.adding_replicas, r.removing_replicas, r.leader_recovery_state) == ([], None, pc.RECOVERED)
    elected = rec()
    elected.leader_recovery_state = pc.RECOVERING  # an unclean election wins over the request
    pc.record_reassignment(elected, view(), [], [], pc.RECOVERED)
    assert elected.leader_recovery_state == pc.RECOVERING


# ---------------------------------------------------------------------------- whole builds


def build(p: pc.PartView, alive: set[int], **kw: object) -> PartitionChangeRecord | None:
    return pc.build_change(
        p,
        TID,
        0,
        acceptable=lambda b, _d: b in alive,
        default_dir=lambda _b: DNEW,
        metadata_version=MV,
        **kw,  # type: ignore[arg-type]
    )


def test_nothing_to_change_is_none() -> None:
    assert build(view(), {1, 2, 3}) is None


def test_leader_leaving_the_isr_elects_the_next_and_shrinks_the_isr() -> None:
    r = build(view(), {2, 3}, target_isr=[2, 3])
    assert r is not None and (r.leader, r.isr) == (2, [2, 3])


def test_completed_reassignment_drops_removing_replicas_and_bumps_the_epoch() -> None:
    p = view(replicas=(1, 2, 3, 4), isr=(1, 2, 3, 4), dirs=(DA, DB, DC, DNEW), adding=(4,), removing=(1,))
    r = build(p, {1, 2, 3, 4})
    assert r is not None
    assert (r.replicas, r.isr, r.leader, r.adding_replicas, r.removing_replicas) == ([2, 3, 4], [2, 3, 4], 2, [], [])
    assert r.directories == [DB, DC, DNEW]


def test_target_dirs_change_directories_but_not_the_judgement() -> None:
    # broker 1 leads from DA; the request moves it to DNEW, which is offline: the election
    # still judges broker 1 by DA, so it keeps leading
    r = pc.build_change(
        view(),
        TID,
        0,
        acceptable=lambda b, d: d != DNEW,
        default_dir=lambda _b: DNEW,
        metadata_version=MV,
        target_dirs={1: DNEW},
    )
    assert r is not None and (r.leader, r.directories) == (pc.NO_LEADER_CHANGE, [DNEW, DB, DC])
