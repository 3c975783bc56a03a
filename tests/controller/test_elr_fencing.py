"""ELR through the controller's fencing and unfencing when the log finalized
eligible.leader.replicas.version 1: Kafka's generateLeaderAndIsrUpdates rules (the ISR may
become empty, the members that left it below min ISR become the ELR, the last leader is
remembered, and an unfenced ELR member is elected)."""

from __future__ import annotations

from typing import Any

from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from tests.controller.harness import Cluster, dir_id


def _changes(out: Any) -> list[dict[str, Any]]:
    got = []
    for r, v in out.records:
        if isinstance(r, PartitionChangeRecord):
            assert v == 2
            d: dict[str, Any] = {}
            if r.leader != -2:
                d["leader"] = r.leader
            for name in ("isr", "eligible_leader_replicas", "last_known_elr"):
                if getattr(r, name) is not None:
                    d[name] = list(getattr(r, name))
            got.append(d)
    return got


def test_fencing_fills_the_elr_and_unfencing_elects_from_it() -> None:
    c = Cluster()
    for b in (1, 2, 3):
        c.start_broker(b, [dir_id(b, 0)])
    c.commit(
        [
            (FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0),
            (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="3"), 0),
        ]
    )
    c.create_topic("t", 1, 3)
    p = c.state.image.topics[c.state.image.topic_names["t"]].partitions[0]
    first, second, third = p.replicas  # the leader is `first`
    assert p.leader == first

    out = c.heartbeat(third, want_fence=True)
    assert _changes(out) == [{"isr": [first, second], "eligible_leader_replicas": [third]}]
    out = c.heartbeat(first, want_fence=True)
    assert _changes(out) == [{"leader": second, "isr": [second], "eligible_leader_replicas": sorted([first, third])}]
    out = c.heartbeat(second, want_fence=True)
    assert _changes(out) == [
        {"leader": -1, "isr": [], "eligible_leader_replicas": [1, 2, 3], "last_known_elr": [second]}
    ]
    assert (p.isr, p.leader, p.elr, p.last_known_elr) == ((), -1, (1, 2, 3), (second,))

    out = c.heartbeat(third)  # caught up and not asking to be fenced: unfenced
    assert _changes(out) == [
        {"leader": third, "isr": [third], "eligible_leader_replicas": sorted([first, second]), "last_known_elr": []}
    ]
    live = c.state.durable_state()
    assert c.restart().durable_state() == live
    assert c.state.check_invariants() == []


def test_alter_partition_shrink_below_min_isr_fills_the_elr_and_growth_clears_it() -> None:
    from tests.controller.test_state_alter_partition import Req, alter, make_cluster, part

    c, tid = make_cluster(level=30)
    c.commit(
        [
            (FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0),
            (ConfigRecord(resource_type=2, resource_name="t", name="min.insync.replicas", value="3"), 0),
        ]
    )
    p = part(c, tid)
    leader = p.leader
    a, b = [x for x in p.isr if x != leader]
    resp, recs = alter(c, tid, [Req(isr=[leader, a])])
    assert [x.error_code for t in resp.topics for x in t.partitions] == [0], resp
    (rec,) = [r for r, _ in recs if isinstance(r, PartitionChangeRecord)]
    assert (rec.isr, rec.eligible_leader_replicas) == ([leader, a], [b])
    assert (p.isr, p.elr) == ((leader, a), (b,))
    resp, recs = alter(c, tid, [Req(isr=[leader, a, b])])
    (rec,) = [r for r, _ in recs if isinstance(r, PartitionChangeRecord)]
    assert (rec.isr, rec.eligible_leader_replicas) == ([leader, a, b], [])
    assert p.elr == ()
    live = c.state.durable_state()
    assert c.restart().durable_state() == live


def test_unclean_restart_leaves_isr_and_elr_clean_restart_keeps_elr() -> None:
    from kraft_jbod.messages.broker_registration_request import Feature

    c = Cluster()
    for b in (1, 2, 3):
        c.start_broker(b, [dir_id(b, 0)])
    c.commit(
        [
            (FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0),
            (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="3"), 0),
        ]
    )
    c.create_topic("t", 1, 3)
    p = c.state.image.topics[c.state.image.topic_names["t"]].partitions[0]
    first, second, third = p.replicas
    c.heartbeat(third, want_fence=True)
    assert p.elr == (third,)
    feats = [
        Feature(n, 0, 1 if n == "eligible.leader.replicas.version" else hi)
        for n, hi in __import__("kraft_jbod.controller.features", fromlist=["x"]).IMPLEMENTED_MAX.items()
    ]
    # A new incarnation without PreviousBrokerEpoch (-1), once the old session expired:
    # an unclean shutdown.
    c.now += 60_000
    out = c.register(third, [dir_id(third, 0)], inc=1, extra_features=feats)
    assert out.response.error_code == 0  # type: ignore[attr-defined]
    assert _changes(out) == [{"eligible_leader_replicas": []}]
    assert not p.elr
    # The leader restarts uncleanly too: it leaves the ISR, not into the ELR.
    out = c.register(first, [dir_id(first, 0)], inc=1, extra_features=feats)
    assert _changes(out) == [{"leader": second, "isr": [second]}]
    assert (p.isr, p.leader, len(p.elr)) == ((second,), second, 0)
    live = c.state.durable_state()
    assert c.restart().durable_state() == live


def test_registering_again_after_unregistering_leaves_the_elr() -> None:
    """Kafka's stored epoch for a broker without a registration is -2, never a broker's
    PreviousBrokerEpoch: a broker unregistered while in an ELR registers again as after an
    unclean shutdown and leaves that ELR. Found by the differential twin (docs/twin.md #13)."""
    c = Cluster()
    for b in (1, 2):
        c.start_broker(b, [dir_id(b, 0)])
    c.commit(
        [
            (FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0),
            (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="2"), 0),
        ]
    )
    c.create_topic("t", 1, 2)
    p = c.state.image.topics[c.state.image.topic_names["t"]].partitions[0]
    follower = p.replicas[1]
    c.heartbeat(follower, want_fence=True)
    assert p.elr == (follower,)
    c.call(64, 0, UnregisterBrokerRequest(broker_id=follower))
    assert p.elr == (follower,)  # Kafka keeps it there too
    out = c.register(follower, [dir_id(follower, 0)], inc=1)
    assert out.response.error_code == 0  # type: ignore[attr-defined]
    assert p.elr == ()
