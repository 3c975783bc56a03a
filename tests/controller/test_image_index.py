"""The replica index under bulk directory moves (``MetadataImage.index_move_dirs``).

An assignment moves a broker's replicas between two directories by the thousand, and the
image keeps the two buckets of its last move to use again. Moves back and forth, buckets
emptied and dropped, topics deleted and partitions moved by another broker in between:
after every step the index holds exactly the partitions' replicas (``check_invariants``),
and a restart replaying the log rebuilds the same image.
"""

from __future__ import annotations

import random

from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from tests.controller.harness import Cluster, dir_id


def test_the_index_follows_moves_back_and_forth() -> None:
    c = Cluster()
    for b in range(1, 4):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1), dir_id(b, 2)])
    for name in ("a", "b", "c"):
        assert c.create_topic(name, 12, 3).response.topics[0].error_code == 0  # type: ignore[attr-defined]
    rng = random.Random(28)
    names = ["a", "b", "c"]
    for step in range(40):
        b = rng.randint(1, 3)
        target = dir_id(b, rng.randint(0, 2))
        tids = [c.state.topic_id_of(n) for n in names]
        held = [
            (tid, p.partition_id)
            for tid in tids
            if tid is not None
            for p in c.state.topics[tid].partitions.values()
            if b in p.replicas and rng.random() < 0.7
        ]
        c.assign(b, target, held)
        assert c.state.check_invariants() == [], step
        if step in (12, 25) and len(names) > 1:  # a topic goes: its buckets may empty
            gone = names.pop(rng.randrange(len(names)))
            out = c.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name=gone)], timeout_ms=1000))
            assert out.records, gone
            assert c.state.check_invariants() == [], step
    # every replica of the last topic into one directory per broker: the others empty
    tid = c.state.topic_id_of(names[0])
    assert tid is not None
    for b in range(1, 4):
        c.assign(b, dir_id(b, 2), [(tid, p.partition_id) for p in c.state.topics[tid].partitions.values()])
        assert c.state.check_invariants() == []
    before = c.state.durable_state()
    assert c.restart().durable_state() == before


def test_a_bucket_dropped_by_a_deletion_is_not_used_again() -> None:
    """The last move's target bucket empties when its topic is deleted (the index drops
    it); the same move right after must not add to the dropped bucket."""
    c = Cluster()
    for b in range(1, 4):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1)])
    assert c.create_topic("a", 2, 3).response.topics[0].error_code == 0  # type: ignore[attr-defined]
    assert c.create_topic("x", 1, 3).response.topics[0].error_code == 0  # type: ignore[attr-defined]
    a, x = c.state.topic_id_of("a"), c.state.topic_id_of("x")
    assert a is not None and x is not None
    c.assign(1, dir_id(1, 0), [(a, 0), (a, 1), (x, 0)])
    c.assign(1, dir_id(1, 1), [(x, 0)])  # the last move: broker 1, dir 0 -> dir 1
    out = c.call(20, 6, DeleteTopicsRequest(topics=[DeleteTopicState(name="x")], timeout_ms=1000))
    assert out.records
    assert dir_id(1, 1) not in c.state.image.index[1]  # its bucket is gone
    c.assign(1, dir_id(1, 1), [(a, 0)])  # the same move again
    assert c.state.check_invariants() == []
    assert c.state.replicas_in(1, dir_id(1, 1)) == {c.state.partition(a, 0)}
