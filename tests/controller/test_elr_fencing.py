"""ELR through the controller's fencing and unfencing when the log finalized
eligible.leader.replicas.version 1: Kafka's generateLeaderAndIsrUpdates rules (the ISR may
become empty, the members that left it below min ISR become the ELR, the last leader is
remembered, and an unfenced ELR member is elected)."""

from __future__ import annotations

from typing import Any

from kraft_jbod.messages.config_record import ConfigRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
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
    c.commit([
        (FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0),
        (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="3"), 0),
    ])
    c.create_topic("t", 1, 3)
    p = c.state.image.topics[c.state.image.topic_names["t"]].partitions[0]
    first, second, third = p.replicas  # the leader is `first`
    assert p.leader == first

    out = c.heartbeat(third, want_fence=True)
    assert _changes(out) == [{"isr": [first, second], "eligible_leader_replicas": [third]}]
    out = c.heartbeat(first, want_fence=True)
    assert _changes(out) == [{"leader": second, "isr": [second],
                              "eligible_leader_replicas": sorted([first, third])}]
    out = c.heartbeat(second, want_fence=True)
    assert _changes(out) == [{"leader": -1, "isr": [], "eligible_leader_replicas": [1, 2, 3],
                              "last_known_elr": [second]}]
    assert (p.isr, p.leader, p.elr, p.last_known_elr) == ((), -1, (1, 2, 3), (second,))

    out = c.heartbeat(third)  # caught up and not asking to be fenced: unfenced
    assert _changes(out) == [{"leader": third, "isr": [third],
                              "eligible_leader_replicas": sorted([first, second]), "last_known_elr": []}]
    live = c.state.durable_state()
    assert c.restart().durable_state() == live
    assert c.state.check_invariants() == []
