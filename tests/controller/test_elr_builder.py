"""KIP-966 in the change builder (partitions.build_change, Rule 5), case by case against
the rules of Kafka 4.4's PartitionChangeBuilder: ELR tracking on ISR shrink below min ISR,
election from the ELR, the last known leader, unclean shutdown, unclean elections, and the
clearing of leftover ELR when the feature is off."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from kraft_jbod.controller.apis import partitions as ap
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord

TID = uuid.UUID(int=9)
D = uuid.UUID(int=70)
MV = 30


def part(
    isr: Sequence[int],
    leader: int,
    elr: Sequence[int] = (),
    lke: Sequence[int] = (),
    replicas: Sequence[int] = (1, 2, 3, 4),
) -> ap.PartView:
    return ap.PartView(
        tuple(replicas), tuple(isr), leader, (D,) * len(replicas), elr=tuple(elr), last_known_elr=tuple(lke)
    )


def build(p: ap.PartView, alive: set[int], **kw: Any) -> PartitionChangeRecord | None:
    return ap.build_change(
        p,
        TID,
        0,
        acceptable=lambda b, _d: b in alive,
        default_dir=lambda _b: D,
        metadata_version=MV,
        elr_enabled=kw.pop("elr", True),
        **kw,
    )


def fields(rec: PartitionChangeRecord | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    out: dict[str, Any] = {}
    if rec.leader != ap.NO_LEADER_CHANGE:
        out["leader"] = rec.leader
    for name in ("isr", "eligible_leader_replicas", "last_known_elr"):
        if getattr(rec, name) is not None:
            out[name] = list(getattr(rec, name))
    if rec.leader_recovery_state != -1:
        out["lrs"] = rec.leader_recovery_state
    return out


CASES = [
    # (what, partition, alive, build args, expected record fields)
    (
        "shrink below min ISR: the leaving member joins the ELR",
        part([1, 2, 3], 1),
        {1, 2, 3, 4},
        dict(target_isr=[1, 2], min_isr=3),
        {"isr": [1, 2], "eligible_leader_replicas": [3]},
    ),
    (
        "shrink that stays at min ISR: no ELR",
        part([1, 2, 3], 1),
        {1, 2, 3, 4},
        dict(target_isr=[1, 2], min_isr=2),
        {"isr": [1, 2]},
    ),
    (
        "ISR back at min ISR clears the ELR",
        part([1], 1, elr=[2]),
        {1, 2, 3, 4},
        dict(target_isr=[1, 2], min_isr=2),
        {"isr": [1, 2], "eligible_leader_replicas": []},
    ),
    (
        "the last ISR member leaves: ISR empty, no leader, it is in the ELR and is the last known leader",
        part([1], 1),
        set(),
        dict(target_isr=[], min_isr=2),
        {"leader": -1, "isr": [], "eligible_leader_replicas": [1], "last_known_elr": [1]},
    ),
    (
        "empty ISR: an ELR member leads, becomes the ISR alone and leaves the ELR",
        part([1], 1, elr=[2, 3]),
        {2, 3},
        dict(target_isr=[], min_isr=3),
        {"leader": 2, "isr": [2], "eligible_leader_replicas": [1, 3]},
    ),
    (
        "unclean shutdown: the broker leaves ISR and ELR and is not eligible",
        part([1, 2], 1, elr=[3]),
        {1, 2, 3, 4},
        dict(target_isr=[1], min_isr=3, unclean_shutdown=[2, 3]),
        {"isr": [1], "eligible_leader_replicas": []},
    ),
    (
        "unclean shutdown of an ELR member only",
        part([1], 1, elr=[2, 3]),
        {1, 2, 3, 4},
        dict(target_isr=[1], min_isr=3, unclean_shutdown=[3]),
        {"eligible_leader_replicas": [2]},
    ),
    (
        "the last known leader comes back: elected uncleanly, RECOVERING, LastKnownElr emptied",
        part([], -1, lke=[1]),
        {1},
        dict(min_isr=2),
        {"leader": 1, "isr": [1], "lrs": 1, "last_known_elr": []},
    ),
    (
        "the last known leader is not used while an ELR member exists",
        part([], -1, elr=[3], lke=[1]),
        {1},
        dict(min_isr=2),
        None,
    ),
    (
        "an unclean election empties the ELR",
        part([], -1, elr=[3], lke=[1, 2]),
        {4},
        dict(min_isr=2, election=ap.UNCLEAN),
        {"leader": 4, "isr": [4], "lrs": 1, "eligible_leader_replicas": [], "last_known_elr": []},
    ),
    ("nothing to change: no record", part([1, 2], 1), {1, 2, 3, 4}, dict(min_isr=2), None),
    (
        "ELR off: a leftover ELR is cleared by the next change, LastKnownElr kept",
        part([1, 2, 3], 1, elr=[4], lke=[4]),
        {1, 2, 3, 4},
        dict(target_isr=[1, 2], min_isr=3, elr=False),
        {"isr": [1, 2], "eligible_leader_replicas": []},
    ),
    (
        "ELR off: the ISR never becomes empty",
        part([1], 1),
        set(),
        dict(target_isr=[], min_isr=2, elr=False),
        {"leader": -1},
    ),
]


@pytest.mark.parametrize(("what", "p", "alive", "args", "expected"), CASES, ids=[c[0] for c in CASES])
def test_builder_follows_kafkas_elr_rules(
    what: str, p: ap.PartView, alive: set[int], args: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    assert fields(build(p, alive, **dict(args))) == expected, what


def test_elr_order_is_a_java_hash_sets() -> None:
    assert ap.java_hash_set_order([3, 1, 2, 1]) == [1, 2, 3]
    assert ap.java_hash_set_order([17, 1, 16]) == [16, 17, 1]  # buckets 0, 1, 1 (insertion order within)
    assert ap.java_hash_set_order(list(range(13, 0, -1))) == list(range(1, 14))  # resized to 32
    rec = build(part([17, 16, 1], 17, replicas=(17, 16, 1)), {17}, target_isr=[17], min_isr=3)
    assert fields(rec) == {"isr": [17], "eligible_leader_replicas": [16, 1]}
