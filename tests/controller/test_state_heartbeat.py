"""BrokerHeartbeat: the state table end to end, fencing, session timeout, offline dirs."""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller.heartbeat import HbState
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreateTopicsRequest,
)
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fence_broker_record import FenceBrokerRecord
from kraft_jbod.messages.no_op_record import NoOpRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.unfence_broker_record import UnfenceBrokerRecord
from tests.controller.harness import Cluster, dir_id


def test_stale_epoch_and_unknown_broker() -> None:
    c = Cluster()
    c.register(1)
    out = c.heartbeat(1, epoch=c.epoch(1) + 1)
    assert out.response.error_code == ErrorCode.STALE_BROKER_EPOCH and out.records == []  # type: ignore[attr-defined]
    assert out.response.is_fenced is True  # type: ignore[attr-defined]
    out = c.call(63, 0, BrokerHeartbeatRequest(broker_id=9, broker_epoch=0))
    assert out.response.error_code == ErrorCode.STALE_BROKER_EPOCH  # type: ignore[attr-defined]


def test_unfencing_sequence() -> None:
    c = Cluster()
    x = c.register(1).response.broker_epoch  # type: ignore[attr-defined]
    out = c.heartbeat(1, want_fence=True, offset=x - 1)
    r = out.response
    assert (r.is_caught_up, r.is_fenced, out.records) == (False, True, [])  # type: ignore[attr-defined]
    out = c.heartbeat(1, want_fence=True, offset=x)
    assert (out.response.is_caught_up, out.response.is_fenced) == (True, True)  # type: ignore[attr-defined]
    out = c.heartbeat(1, want_fence=False, offset=x - 1)
    assert out.response.is_fenced is True and out.records == []  # type: ignore[attr-defined]
    out = c.heartbeat(1, want_fence=False, offset=x)
    assert out.response.is_fenced is False  # type: ignore[attr-defined]
    [(rec, ver)] = out.records
    assert isinstance(rec, BrokerRegistrationChangeRecord) and (rec.fenced, ver) == (-1, 0)
    assert c.state.broker_state(1) is HbState.UNFENCED


# (current, want_fence, want_shut_down, leads?) -> (is_fenced, should_shut_down, next state)
TABLE = [
    ("fenced", True, True, False, True, True, HbState.FENCED),
    ("fenced", False, True, False, True, True, HbState.FENCED),
    ("fenced", True, False, False, True, False, HbState.FENCED),
    ("unfenced", True, True, False, True, True, HbState.FENCED),
    ("unfenced", True, False, False, True, False, HbState.FENCED),
    ("unfenced", False, True, True, False, False, HbState.CONTROLLED_SHUTDOWN),
    ("unfenced", False, True, False, True, True, HbState.FENCED),
    ("unfenced", False, False, True, False, False, HbState.UNFENCED),
]


@pytest.mark.parametrize(("start", "wf", "ws", "leads", "fenced", "shut", "after"), TABLE)
def test_heartbeat_table(start: str, wf: bool, ws: bool, leads: bool, fenced: bool, shut: bool, after: HbState) -> None:
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    if leads:
        c.call(19, 7, _topic_on([1, 2]))
        assert c.state.brokers[1].active and c.state.image.leader_count.get(1, 0) > 0
    if start == "fenced":
        c.heartbeat(1, want_fence=True)
        assert c.state.broker_state(1) is HbState.FENCED
    out = c.heartbeat(1, want_fence=wf, want_shut_down=ws)
    assert out.response.is_fenced is fenced  # type: ignore[attr-defined]
    assert out.response.should_shut_down is shut  # type: ignore[attr-defined]
    assert c.state.broker_state(1) is after
    assert c.state.check_invariants() == []


def _topic_on(replicas: list[int]) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name="t",
                num_partitions=-1,
                replication_factor=-1,
                assignments=[CreatableReplicaAssignment(0, replicas)],
            )
        ]
    )


def test_controlled_shutdown_moves_leadership_then_shuts_down() -> None:
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    c.call(19, 7, _topic_on([1, 2]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    out = c.heartbeat(1, want_shut_down=True)
    kinds = [type(r) for r, _ in out.records]
    assert kinds == [BrokerRegistrationChangeRecord, PartitionChangeRecord]
    assert out.records[0][0].in_controlled_shutdown == 1 and out.records[0][1] == 1  # type: ignore[attr-defined]
    p = c.state.partition(tid, 0)
    assert p is not None and p.leader == 2 and p.isr == (2,)
    # broker 2 has not yet replayed past the controlled-shutdown record: stay.
    c.heartbeat(2, offset=c.end_offset - 3)
    out = c.heartbeat(1, want_shut_down=True)
    assert out.response.should_shut_down is False  # type: ignore[attr-defined]
    c.heartbeat(2)
    out = c.heartbeat(1, want_shut_down=True)
    assert out.response.should_shut_down is True and out.response.is_fenced is True  # type: ignore[attr-defined]
    assert c.state.brokers[1].fenced
    assert c.state.check_invariants() == []


def test_controlled_shutdown_waits_for_the_whole_batch_that_began_it() -> None:
    # Kafka compares the active brokers' offsets with the END of the batch that started the
    # controlled shutdown (registration change, then the leadership moves), not with the
    # offset of the registration change itself.
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    c.call(19, 7, _topic_on([1, 2]))
    out = c.heartbeat(1, want_shut_down=True)
    assert [type(r) for r, _ in out.records] == [BrokerRegistrationChangeRecord, PartitionChangeRecord]
    batch_end = c.end_offset - 1
    assert c.state.brokers[1].cs_offset == batch_end
    c.heartbeat(2, offset=batch_end - 1)  # replayed the registration change only
    out = c.heartbeat(1)
    assert (out.response.is_fenced, out.response.should_shut_down) == (False, False)  # type: ignore[attr-defined]
    assert c.state.broker_state(1) is HbState.CONTROLLED_SHUTDOWN
    c.heartbeat(2, offset=batch_end)
    out = c.heartbeat(1)
    assert (out.response.is_fenced, out.response.should_shut_down) == (True, True)  # type: ignore[attr-defined]
    assert c.state.check_invariants() == []


FAR_AHEAD = 1 << 40  # an offset past anything the log holds


def _shutting_down_beside(c: Cluster, other_first: bool = True) -> None:
    """Broker 2 unfenced reporting an offset far ahead, broker 1 in controlled shutdown
    of the one partition it leads ([1, 2])."""
    c.register(2, [dir_id(2, 0), dir_id(2, 1)])
    assert c.heartbeat(2, offset=FAR_AHEAD).response.is_fenced is False  # type: ignore[attr-defined]
    c.start_broker(1)
    c.call(19, 7, _topic_on([1, 2]))
    out = c.heartbeat(1, want_shut_down=True)
    assert c.state.broker_state(1) is HbState.CONTROLLED_SHUTDOWN, out.response


def test_a_dropped_controlled_shutdown_note_ignores_another_batch_at_its_offset() -> None:
    # Dropped (server Rule 6) while a NoOp was being appended, the outcome's note names the
    # offset the NoOp then takes: replaying the NoOp there must not start a shutdown.
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    c.call(19, 7, _topic_on([1, 2]))
    req = BrokerHeartbeatRequest(1, c.epoch(1), c.end_offset - 1, want_shut_down=True)
    assert c.state.handle(63, 2, req, now_ms=c.now, next_offset=c.end_offset).records
    c.commit([(NoOpRecord(), 0)])
    assert c.state.broker_state(1) is HbState.UNFENCED
    out = c.heartbeat(1, want_shut_down=True)
    assert isinstance(out.records[0][0], BrokerRegistrationChangeRecord)
    assert c.state.broker_state(1) is HbState.CONTROLLED_SHUTDOWN


def test_the_replay_of_a_brokers_unfencing_forgets_the_offset_it_reported() -> None:
    # Kafka's heartbeat manager re-registers a broker whenever a registration record of it
    # is replayed (its unfencing included) and takes its offset as -1 until its next
    # heartbeat: broker 2 reported an offset far ahead when it was unfenced, but a
    # controlled shutdown still waits for its next heartbeat.
    c = Cluster()
    _shutting_down_beside(c)
    out = c.heartbeat(1)
    assert (out.response.is_fenced, out.response.should_shut_down) == (False, False)  # type: ignore[attr-defined]
    c.heartbeat(2, offset=FAR_AHEAD)
    out = c.heartbeat(1)
    assert (out.response.is_fenced, out.response.should_shut_down) == (True, True)  # type: ignore[attr-defined]


def test_a_heartbeat_reporting_an_offline_dir_forgets_its_own_offset() -> None:
    c = Cluster()
    _shutting_down_beside(c)
    c.heartbeat(2, offset=FAR_AHEAD)
    # The registration change of broker 2's offline directory is replayed after its offset
    # was noted: -1 again until it heartbeats once more.
    c.heartbeat(2, offset=FAR_AHEAD, offline=[dir_id(2, 1)])
    assert c.heartbeat(1).response.should_shut_down is False  # type: ignore[attr-defined]
    c.heartbeat(2, offset=FAR_AHEAD, offline=[dir_id(2, 1)])  # known already: writes nothing
    assert c.heartbeat(1).response.should_shut_down is True  # type: ignore[attr-defined]


def test_an_amended_registration_forgets_the_controlled_shutdown_in_memory() -> None:
    # Kafka keeps controlled shutdown in its heartbeat manager, which an amended
    # registration (same incarnation) starts afresh: the durable flag stays set, yet the
    # broker's next heartbeat is judged as an unfenced broker's.
    c = Cluster()
    _shutting_down_beside(c)
    out = c.register(1)  # same incarnation, same directories
    assert out.response.error_code == ErrorCode.NONE  # type: ignore[attr-defined]
    assert c.state.brokers[1].in_controlled_shutdown
    assert c.state.broker_state(1) is HbState.UNFENCED
    out = c.heartbeat(1)
    assert (out.response.is_fenced, out.response.should_shut_down, out.records) == (False, False, [])  # type: ignore[attr-defined]
    # Asking again (it leads nothing now) shuts it down at once, as from UNFENCED.
    out = c.heartbeat(1, want_shut_down=True)
    assert (out.response.is_fenced, out.response.should_shut_down) == (True, True)  # type: ignore[attr-defined]
    assert c.state.check_invariants() == []


def test_a_restarted_controller_judges_a_broker_in_controlled_shutdown_as_unfenced() -> None:
    c = Cluster()
    _shutting_down_beside(c)
    c.restart()
    assert c.state.brokers[1].in_controlled_shutdown  # the durable flag survives
    assert c.state.broker_state(1) is HbState.UNFENCED  # the in-memory state does not
    out = c.heartbeat(1)
    assert (out.response.is_fenced, out.response.should_shut_down) == (False, False)  # type: ignore[attr-defined]


def test_a_dropped_controlled_shutdown_outcome_leaves_no_trace() -> None:
    # The server's Rule 6: a heartbeat handled while an append is in flight whose outcome
    # would write is dropped and handled again after the append. Nothing of the first
    # handling may stick: handled again, it must start the controlled shutdown for real.
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    c.call(19, 7, _topic_on([1, 2]))
    req = BrokerHeartbeatRequest(1, c.epoch(1), c.end_offset - 1, want_shut_down=True)
    dropped = c.state.handle(63, 2, req, now_ms=c.now, next_offset=c.end_offset)
    assert dropped.records  # it would have written: dropped, not committed
    assert c.state.broker_state(1) is HbState.UNFENCED
    c.call(63, 2, BrokerHeartbeatRequest(2, c.epoch(2), c.end_offset - 1))  # something else first
    out = c.heartbeat(1, want_shut_down=True)
    assert isinstance(out.records[0][0], BrokerRegistrationChangeRecord)
    assert c.state.broker_state(1) is HbState.CONTROLLED_SHUTDOWN
    assert c.state.brokers[1].cs_offset == c.end_offset - 1
    assert c.state.check_invariants() == []


def test_session_timeout_fences_and_moves_leaders() -> None:
    c = Cluster(session_timeout_ms=9000)
    c.start_broker(1)
    c.start_broker(2)
    c.call(19, 7, _topic_on([1, 2]))
    c.now += 5000
    c.heartbeat(2)
    assert c.tick() == []
    c.now += 4001
    recs = c.tick()
    assert [type(r) for r, _ in recs] == [PartitionChangeRecord, BrokerRegistrationChangeRecord]
    assert c.state.brokers[1].fenced and not c.state.brokers[2].fenced
    tid = c.state.topic_id_of("t")
    assert tid is not None
    p = c.state.partition(tid, 0)
    assert p is not None and p.leader == 2
    assert c.state.check_invariants() == []


@pytest.mark.parametrize("level", [25, 30])
def test_last_isr_member_is_kept_with_no_leader_and_reelected_on_unfence(level: int) -> None:
    # Without ELR (4.0-IV3) the last ISR member stays in the ISR; with ELR (the default from
    # 4.1-IV0) the ISR empties into the ELR and the broker is the last known leader.
    c = Cluster(level=level)
    c.start_broker(1)
    c.create_topic("solo", 1, 1)
    tid = c.state.topic_id_of("solo")
    assert tid is not None
    c.heartbeat(1, want_fence=True)
    p = c.state.partition(tid, 0)
    assert p is not None and p.leader == -1
    if level < 26:
        assert (p.isr, p.elr) == ((1,), ())
    else:
        assert (p.isr, p.elr, p.last_known_elr) == ((), (1,), (1,))
    out = c.heartbeat(1)
    assert [type(r) for r, _ in out.records] == [BrokerRegistrationChangeRecord, PartitionChangeRecord]
    assert p.leader == 1 and p.leader_epoch == 2 and p.isr == (1,) and not p.elr and not p.last_known_elr


def test_old_metadata_versions_use_fence_records() -> None:
    c = Cluster(level=5)
    c.register(1, mv_range=(1, 22))
    out = c.heartbeat(1)
    assert isinstance(out.records[0][0], UnfenceBrokerRecord)
    out = c.heartbeat(1, want_fence=True)
    assert isinstance(out.records[-1][0], FenceBrokerRecord)
    assert c.state.brokers[1].fenced


def _two_brokers_three_dirs(profile: str = "kafka") -> tuple[Cluster, uuid.UUID]:
    c = Cluster(profile=profile)
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1), dir_id(1, 2)])
    c.start_broker(2, [dir_id(2, 0)])
    c.create_topic("t", 6, 2)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    for pid in range(6):
        c.assign(1, dir_id(1, pid % 3), [(tid, pid)])
    return c, tid


def test_offline_dir_moves_only_its_partitions() -> None:
    c, tid = _two_brokers_three_dirs()
    failing = dir_id(1, 0)
    victims = {p.partition_id for p in c.state.replicas_in(1, failing)}
    assert victims == {0, 3}
    out = c.heartbeat(1, offline=[failing, uuid.UUID(int=12345 << 64)])
    pcrs = [r for r, _ in out.records if isinstance(r, PartitionChangeRecord)]
    assert {r.partition_id for r in pcrs} == victims
    last, ver = out.records[-1]
    assert isinstance(last, BrokerRegistrationChangeRecord) and ver == 2
    assert last.log_dirs == [dir_id(1, 1), dir_id(1, 2)]
    for pid in range(6):
        p = c.state.partition(tid, pid)
        assert p is not None
        if pid in victims:
            assert 1 not in p.isr and p.leader == 2
        else:
            assert 1 in p.isr
    assert c.state.broker_state(1) is HbState.UNFENCED
    again = c.heartbeat(1, offline=[failing])
    assert again.records == []  # already offline: ignored
    assert c.state.check_invariants() == []


def test_kip_profile_unknown_offline_dir_is_an_error() -> None:
    c, _ = _two_brokers_three_dirs("kip")
    before = c.state.durable_state()
    out = c.heartbeat(1, offline=[dir_id(1, 0), uuid.UUID(int=12345 << 64)])
    assert out.response.error_code == ErrorCode.LOG_DIR_NOT_FOUND and out.records == []  # type: ignore[attr-defined]
    assert c.state.durable_state() == before
    out = c.heartbeat(1, offline=[dir_id(1, 0)])
    assert out.response.error_code == 0 and out.records  # type: ignore[attr-defined]


def test_offline_dirs_ignored_below_jbod_level_and_at_v0() -> None:
    c = Cluster(level=16)
    c.start_broker(1, [])
    out = c.heartbeat(1, offline=[dir_id(1, 0)])
    assert out.records == []
    c2 = Cluster()
    c2.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    out = c2.heartbeat(1, version=0)
    assert out.records == []


def test_kip_profile_keeps_multi_dir_broker_fenced_while_unassigned() -> None:
    c = Cluster(profile="kip")
    c.start_broker(2, [dir_id(2, 0)])
    c.register(1, [dir_id(1, 0), dir_id(1, 1)])
    c.call(19, 7, _topic_on([2, 1]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    out = c.heartbeat(1)
    assert out.response.is_fenced is True and out.records == []  # type: ignore[attr-defined]
    c.assign(1, dir_id(1, 1), [(tid, 0)])
    out = c.heartbeat(1)
    assert out.response.is_fenced is False  # type: ignore[attr-defined]
    # The same sequence under Kafka's rules unfences at once.
    k = Cluster()
    k.start_broker(2, [dir_id(2, 0)])
    k.register(1, [dir_id(1, 0), dir_id(1, 1)])
    k.call(19, 7, _topic_on([2, 1]))
    assert k.heartbeat(1).response.is_fenced is False  # type: ignore[attr-defined]


def test_a_broker_fenced_after_controlled_shutdown_is_a_usable_follower_again() -> None:
    # Kafka's placer skips a broker only while its controlled shutdown is in progress; once
    # the shutdown ended in fencing (the registration keeps inControlledShutdown=true) new
    # replicas may go there again, never the leader. Seen with real brokers: one of two
    # stopped, __consumer_offsets at replication factor 2 is created by Kafka's controller
    # and was refused by ours.
    c = Cluster()
    c.start_broker(1)
    c.start_broker(2)
    c.call(19, 7, _topic_on([1, 2]))
    out = c.heartbeat(1, want_shut_down=True)
    assert type(out.records[0][0]) is BrokerRegistrationChangeRecord
    # in progress: broker 1 is not usable, a factor of 2 cannot be met
    out = c.create_topic("during-shutdown", 1, 2)
    assert out.response.topics[0].error_code == 38  # type: ignore[attr-defined]
    c.heartbeat(2)
    out = c.heartbeat(1, want_shut_down=True)
    assert out.response.should_shut_down is True  # type: ignore[attr-defined]
    reg = c.state.brokers[1]
    assert reg.fenced and reg.in_controlled_shutdown
    # done: broker 1 is a usable (fenced) follower
    out = c.create_topic("after-shutdown", 4, 2)
    assert out.response.topics[0].error_code == 0, out.response  # type: ignore[attr-defined]
    tid = c.state.topic_id_of("after-shutdown")
    assert tid is not None
    for p in range(4):
        part = c.state.partition(tid, p)
        assert part is not None and sorted(part.replicas) == [1, 2] and part.leader == 2 and part.isr == (2,)


def test_unfencing_any_broker_elects_every_leaderless_partition_that_can_be() -> None:
    # Kafka's handleBrokerUnfenced runs its change builder over every leaderless partition
    # of the cluster. Here broker 3's only replica went offline with its directory, then
    # was reassigned to an online directory (an assignment judges the replica by its old
    # directory, so it elects nobody): the partition waits, leaderless, for an election
    # that broker 1's unfencing, a broker it has nothing to do with, now runs.
    c = Cluster(level=25)  # ELR off
    c.start_broker(3, [dir_id(3, 0), dir_id(3, 1)])
    c.call(19, 7, _topic_on([3]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.assign(3, dir_id(3, 0), [(tid, 0)])
    c.heartbeat(3, offline=[dir_id(3, 0)])
    c.assign(3, dir_id(3, 1), [(tid, 0)])
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr, p.dirs) == (-1, (3,), (dir_id(3, 1),))
    c.register(1)
    out = c.heartbeat(1)
    assert out.response.is_fenced is False  # type: ignore[attr-defined]
    changes = [r for r, _ in out.records if isinstance(r, PartitionChangeRecord)]
    assert [(r.topic_id, r.partition_id, r.leader) for r in changes] == [(tid, 0, 3)]
    assert c.state.check_invariants() == []


def test_fencing_plus_an_offline_dir_repeats_the_record_as_kafka_does() -> None:
    # Kafka builds a heartbeat's directory step from the state before the heartbeat, like
    # its fencing step: a partition both change gets the same record twice.
    c = Cluster(level=25)
    c.start_broker(1, [dir_id(1, 0), dir_id(1, 1)])
    c.start_broker(2)
    c.call(19, 7, _topic_on([1, 2]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.assign(1, dir_id(1, 0), [(tid, 0)])
    before = c.state.partition(tid, 0)
    assert before is not None and before.leader == 1
    epoch = before.leader_epoch
    out = c.heartbeat(1, want_fence=True, offline=[dir_id(1, 0)])
    changes = [r for r, _ in out.records if isinstance(r, PartitionChangeRecord)]
    assert len(changes) == 2 and changes[0] == changes[1]
    assert (changes[0].leader, changes[0].isr) == (2, [2])
    kinds = [type(r).__name__ for r, _ in out.records]
    assert kinds == [
        "PartitionChangeRecord",
        "BrokerRegistrationChangeRecord",
        "PartitionChangeRecord",
        "BrokerRegistrationChangeRecord",
    ]
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr, p.leader_epoch) == (2, (2,), epoch + 2)
    assert c.state.check_invariants() == []


def test_unfencing_elects_a_broker_whose_registration_still_says_shutting_down() -> None:
    # A controlled shutdown that ended in fencing leaves the durable flag set (Kafka never
    # clears it). Unfenced again, the broker is still an acceptable leader for Kafka's
    # unfencing election (its brokerToAdd), so it is elected from the ELR (docs/twin.md #20).
    c = Cluster()
    c.start_broker(2)
    c.start_broker(1)
    c.call(19, 7, _topic_on([1]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.heartbeat(1, want_shut_down=True)
    c.heartbeat(2)
    assert c.heartbeat(1, want_shut_down=True).response.should_shut_down is True  # type: ignore[attr-defined]
    assert c.state.brokers[1].in_controlled_shutdown and c.state.brokers[1].fenced
    out = c.heartbeat(1)
    assert out.response.is_fenced is False  # type: ignore[attr-defined]
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr, p.elr, p.last_known_elr) == (1, (1,), (), ())
    assert c.state.check_invariants() == []


def test_an_unfencing_election_is_not_undone_by_the_directory_step_of_the_same_heartbeat() -> None:
    # docs/twin.md #19: the broker's only registered directory (its registration amended to
    # it) holds its partition; fenced, the broker sits in the ELR; its unfencing heartbeat
    # reports every directory offline. No directory left online counts as "all online"
    # (Kafka's rule), so the unfencing election elects it; the directory step, built from
    # the state before the heartbeat (where the broker is in no ISR), changes nothing more.
    c = Cluster()
    c.start_broker(1)
    c.start_broker(4, [dir_id(4, 0)])
    c.register(4, [dir_id(4, 1)])  # amended: same incarnation, another directory
    c.call(19, 7, _topic_on([4]))
    tid = c.state.topic_id_of("t")
    assert tid is not None
    c.heartbeat(4, want_fence=True)
    out = c.heartbeat(4, offline=[dir_id(4, 1), dir_id(4, 2)])
    changes = [r for r, _ in out.records if isinstance(r, PartitionChangeRecord)]
    assert [(r.leader, r.isr) for r in changes] == [(4, [4])]
    p = c.state.partition(tid, 0)
    assert p is not None and (p.leader, p.isr, p.elr) == (4, (4,), ())
