"""AssignReplicasToDirs' short path (``Draft._only_directories_change``) against the builder.

When only a replica's directory changes, ``Draft.assign_dir`` writes the record itself
instead of running the change builder. Every (partition, replica, directory) of clusters
in many shapes (leaders and followers in offline directories, fenced and shut-down
brokers, leaderless partitions, ELR on and off, metadata.version with and without
ELR records) is assigned both ways, and the answers and records must be equal.
"""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.draft import Draft
from kraft_jbod.controller.image import NO_LEADER, Partition
from kraft_jbod.controller.seams import Outcome
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from tests.controller.harness import Cluster, dir_id

LOST = uuid.UUID(int=2)


def _shaped_cluster(level: int) -> Cluster:
    """Five brokers with two directories each, 24 partitions (RF 3, min ISR 2) and 12 more
    (min ISR 1), then:
    broker 2's first directory offline, brokers 3 and 1 fenced, broker 4 shut down, so
    partitions have leaders and ISRs of every kind (some leaderless, some with an ELR when
    it is on)."""
    c = Cluster(level=level)
    for b in range(1, 6):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1)])
    topic = CreatableTopic(
        name="t", num_partitions=24, replication_factor=3, configs=[CreatableTopicConfig("min.insync.replicas", "2")]
    )
    assert c.call(19, 7, CreateTopicsRequest(topics=[topic])).response.topics[0].error_code == 0  # type: ignore[attr-defined]
    assert c.create_topic("u", 12, 3).response.topics[0].error_code == 0  # type: ignore[attr-defined]
    for b in range(1, 6):  # each replica to a directory chosen by its partition
        tid = c.state.topic_id_of("t")
        assert tid is not None
        for d in (0, 1):
            parts = [
                (tid, p.partition_id)
                for p in c.state.topics[tid].partitions.values()
                if b in p.replicas and (p.partition_id + b) % 2 == d
            ]
            c.assign(b, dir_id(b, d), parts)
    c.heartbeat(2, offline=[dir_id(2, 0)])
    c.heartbeat(3, want_fence=True)
    c.heartbeat(4, want_shut_down=True)
    c.heartbeat(1, want_fence=True)
    _odd_states(c, level)
    return c


def _odd_states(c: Cluster, level: int) -> None:
    """States the controller itself does not leave but a log may hold (the short path
    must step aside for them): a fenced leader, a leader outside the ISR, an ELR beside a
    full ISR, a last known ELR beside a leader."""
    tid = c.state.topic_id_of("t")
    assert tid is not None
    parts = sorted(c.state.topics[tid].partitions.values(), key=lambda p: p.partition_id)
    ver = fv.partition_change_record_version(level)
    fenced_leader = next(p for p in parts if 3 in p.replicas)
    c.commit(
        [(PartitionChangeRecord(fenced_leader.partition_id, tid, isr=list(fenced_leader.replicas), leader=3), ver)]
    )
    outside = next(p for p in parts if p.leader >= 0 and p is not fenced_leader)
    others = [b for b in outside.replicas if b != outside.leader]
    c.commit([(PartitionChangeRecord(outside.partition_id, tid, isr=others), ver)])
    if level >= fv.MV_4_0_IV1:
        full = next(p for p in parts if p.leader >= 0 and p not in (fenced_leader, outside))
        change = PartitionChangeRecord(
            full.partition_id, tid, isr=list(full.replicas), eligible_leader_replicas=[full.replicas[-1]]
        )
        c.commit([(change, ver)])
        # a leader beside a last known ELR (forgotten once another leader is elected)
        active = {b for b, reg in c.state.brokers.items() if reg.active}
        candidates = [
            p
            for p in parts
            if p.leader in active and len(active & set(p.replicas)) >= 2 and p not in (fenced_leader, outside, full)
        ]
        for remembered in candidates[:4]:
            change = PartitionChangeRecord(
                remembered.partition_id,
                tid,
                isr=list(remembered.replicas),
                eligible_leader_replicas=[],
                last_known_elr=[remembered.replicas[-1]],
            )
            c.commit([(change, ver)])


def _assign_both_ways(
    c: Cluster, monkeypatch: pytest.MonkeyPatch, req: AssignReplicasToDirsRequest, taken: list[bool]
) -> None:
    """The request handled with the short paths where they apply (``taken`` gets each
    decision: True when ``Draft.assign_dirs`` wrote a replica's record itself, then those
    of ``_assign_untouched`` and ``_only_directories_change`` for the replicas it handed
    to ``assign_dir``) and with the builder always; same answer, same records."""
    only = Draft._only_directories_change
    untouched = Draft._assign_untouched
    one_by_one = Draft.assign_dir
    handed: list[object] = []

    def handle() -> Outcome:
        return c.state.handle(73, 0, req, now_ms=c.now, next_offset=c.end_offset)

    def each(self: Draft, parts: list[Partition], broker_id: int, directory: uuid.UUID, offline: bool) -> None:
        for p in parts:
            self.assign_dir(p, broker_id, directory, offline)

    with monkeypatch.context() as m:
        m.setattr(Draft, "_only_directories_change", lambda *a: taken.append(only(*a)) or taken[-1])
        m.setattr(Draft, "_assign_untouched", lambda *a: taken.append(untouched(*a)) or taken[-1])
        m.setattr(Draft, "assign_dir", lambda self, p, *a: handed.append(p) or one_by_one(self, p, *a))
        short = handle()
    named = sum(len(t.partitions) for d in req.directories for t in d.topics)
    if len(handed) < named:
        taken.append(True)
    with monkeypatch.context() as m:
        m.setattr(Draft, "assign_dirs", each)
        m.setattr(Draft, "_only_directories_change", lambda *a, **k: False)
        m.setattr(Draft, "_assign_untouched", lambda *a, **k: False)
        built = handle()
    assert short.response == built.response
    assert short.records == built.records, (req, short.records, built.records)


@pytest.mark.parametrize("level", [fv.MV_3_7_IV2, fv.MV_4_0_IV1, fv.DEFAULT_LEVEL])
def test_the_short_path_writes_what_the_builder_writes(level: int, monkeypatch: pytest.MonkeyPatch) -> None:
    c = _shaped_cluster(level)
    tid = c.state.topic_id_of("t")
    assert tid is not None
    shapes = set()
    taken: list[bool] = []
    for p in c.state.topics[tid].partitions.values():
        shapes.add((p.leader >= 0, len(p.isr), bool(p.elr)))
        for b in p.replicas:
            if b not in c.state.brokers:
                continue
            for target in (dir_id(b, 0), dir_id(b, 1), LOST):
                req = AssignReplicasToDirsRequest(
                    broker_id=b,
                    broker_epoch=c.epoch(b),
                    directories=[
                        DirectoryData(
                            id=target, topics=[TopicData(topic_id=tid, partitions=[PartitionData(p.partition_id)])]
                        )
                    ],
                )
                _assign_both_ways(c, monkeypatch, req, taken)
    # The sweep took both paths, and met leaderless partitions and shrunken ISRs (and ELRs
    # where they exist), not only healthy partitions.
    assert True in taken and False in taken
    assert any(not led for led, _, _ in shapes) and any(isr < 3 for _, isr, _ in shapes), shapes
    if level >= fv.MV_4_1_IV0:  # ELR on by default
        assert any(elr for _, _, elr in shapes), shapes


@pytest.mark.parametrize("level", [fv.MV_4_0_IV1, fv.DEFAULT_LEVEL])
def test_the_isr_shrink_short_paths_write_what_the_builder_writes(level: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Draft._remove_with_elr`` (a replica leaving the ISR with ELR on, as when its
    directory goes offline) against the builder, for every replica of every partition:
    both short paths, a follower leaving (``_only_isr_shrinks``) and the leader leaving
    with a clean successor (``_clean_successor``), must write what the builder writes."""
    c = _shaped_cluster(level)
    c.commit([(FeatureLevelRecord(name=fv.ELR_VERSION, feature_level=1), 0)])
    only = Draft._only_isr_shrinks
    successor = Draft._clean_successor
    taken: list[bool] = []
    successors: list[int] = []
    for p in c.state.image.partitions():
        for b in p.replicas:
            with monkeypatch.context() as m:
                m.setattr(Draft, "_only_isr_shrinks", lambda *a: taken.append(only(*a)) or taken[-1])
                m.setattr(Draft, "_clean_successor", lambda *a: successors.append(successor(*a)) or successors[-1])
                short = Draft(c.state.ctx)
                short.remove_from_isr(p, b)
            with monkeypatch.context() as m:
                m.setattr(Draft, "_only_isr_shrinks", lambda *a: False)
                m.setattr(Draft, "_clean_successor", lambda *a: NO_LEADER)
                built = Draft(c.state.ctx)
                built.remove_from_isr(p, b)
            assert short.records == built.records, (p, b)
            assert short.parts == built.parts and short.elrs == built.elrs
    assert True in taken and False in taken
    # the leader's short path was taken, and also declined (no clean successor)
    assert any(s >= 0 for s in successors) and NO_LEADER in successors, successors


@pytest.mark.parametrize("level", [fv.MV_3_7_IV2, fv.MV_4_0_IV1, fv.DEFAULT_LEVEL])
def test_a_failed_directory_short_path_writes_what_the_builder_writes(
    level: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Draft.dirs_offline``'s short steps for untouched partitions (``_leave_dir``'s loop
    and ``_leave_untouched``) against the builder, for every directory of every registered broker of the shaped
    cluster (ELR on where the level has it), one directory at a time and two at once:
    same records, same draft views."""
    c = _shaped_cluster(level)
    if level >= fv.MV_4_0_IV1:
        c.commit([(FeatureLevelRecord(name=fv.ELR_VERSION, feature_level=1), 0)])
    taken = _fail_each_directory_both_ways(c, monkeypatch)
    if level >= fv.MV_4_0_IV1:  # with ELR on the short step was taken, and also declined
        assert True in taken and False in taken
    else:
        assert not taken  # ELR off: never asked


@pytest.mark.parametrize("level", [fv.MV_4_0_IV1, fv.DEFAULT_LEVEL])
def test_a_failed_leader_hands_over_within_the_isr(level: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every partition led by its first replica, the second out of the ISR though it may
    lead: a leader whose directory fails hands over to the third (the ISR's), both ways."""
    c = Cluster(level=level)
    for b in range(1, 4):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1)])
    assert c.create_topic("v", 6, 3).response.topics[0].error_code == 0  # type: ignore[attr-defined]
    vid = c.state.topic_id_of("v")
    assert vid is not None
    for b in range(1, 4):
        held = [(vid, p.partition_id) for p in c.state.topics[vid].partitions.values() if b in p.replicas]
        c.assign(b, dir_id(b, 0), held[: len(held) // 2])
        c.assign(b, dir_id(b, 1), held[len(held) // 2 :])
    ver = fv.partition_change_record_version(level)
    for p in c.state.topics[vid].partitions.values():
        first, _, third = p.replicas
        c.commit([(PartitionChangeRecord(p.partition_id, vid, isr=[first, third], leader=first), ver)])
    c.commit([(FeatureLevelRecord(name=fv.ELR_VERSION, feature_level=1), 0)])
    assert all(p.leader == p.replicas[0] for p in c.state.topics[vid].partitions.values())
    _fail_each_directory_both_ways(c, monkeypatch)


def _fail_each_directory_both_ways(c: Cluster, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each directory of each broker failed alone, then all of a broker's at once, with
    the short steps and with the builder always: the same records and draft views. The
    decisions of ``_leave_untouched`` come back."""
    untouched = Draft._leave_untouched
    taken: list[bool] = []
    for b, reg in sorted(c.state.brokers.items()):
        for dirs in [[d] for d in reg.online_dirs] + [list(reg.online_dirs)]:
            with monkeypatch.context() as m:
                m.setattr(Draft, "_leave_untouched", lambda *a: taken.append(untouched(*a)) or taken[-1])
                short = Draft(c.state.ctx)
                short.dirs_offline(reg, dirs)
            with monkeypatch.context() as m:
                m.setattr(Draft, "_leave_dir", lambda self, parts, b: [self.leave_offline_dir(p, b) for p in parts])
                m.setattr(Draft, "_leave_untouched", lambda *a: False)
                m.setattr(Draft, "_only_isr_shrinks", lambda *a: False)
                m.setattr(Draft, "_clean_successor", lambda *a: NO_LEADER)
                built = Draft(c.state.ctx)
                built.dirs_offline(reg, dirs)
            assert short.records == built.records, (b, dirs)
            assert short.parts == built.parts and short.elrs == built.elrs
    return taken


@pytest.mark.parametrize("level", [fv.MV_3_7_IV2, fv.MV_4_0_IV1, fv.DEFAULT_LEVEL])
def test_a_whole_topic_in_one_request_writes_what_the_builder_writes(
    level: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``Draft.assign_dirs`` over many partitions of a topic at once (in a mixed order, one
    named twice, one the broker holds no replica of, one that does not exist, and two
    topics in one directory entry) against the builder, for every broker and directory."""
    c = _shaped_cluster(level)
    tid, uid = c.state.topic_id_of("t"), c.state.topic_id_of("u")
    assert tid is not None and uid is not None
    taken: list[bool] = []
    for b in sorted(c.state.brokers):
        for target in (dir_id(b, 0), dir_id(b, 1), LOST):
            for t in (tid, uid):
                held = sorted(p.partition_id for p in c.state.topics[t].partitions.values() if b in p.replicas)
                other = next(p.partition_id for p in c.state.topics[t].partitions.values() if b not in p.replicas)
                mixed = held[1::2] + held[::2] + held[:1] + [other, 999]
                other_topic = uid if t == tid else tid
                req = AssignReplicasToDirsRequest(
                    broker_id=b,
                    broker_epoch=c.epoch(b),
                    directories=[
                        DirectoryData(
                            id=target,
                            topics=[
                                TopicData(topic_id=t, partitions=[PartitionData(i) for i in mixed]),
                                TopicData(topic_id=other_topic, partitions=[PartitionData(0), PartitionData(1)]),
                            ],
                        )
                    ],
                )
                _assign_both_ways(c, monkeypatch, req, taken)
    assert True in taken and False in taken
