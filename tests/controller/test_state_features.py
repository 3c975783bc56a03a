"""metadata.version table and profile helpers."""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.heartbeat import TRANSITIONS, HbInput, HbState, HeartbeatTableError, transition
from kraft_jbod.controller.placement import place_replicas
from kraft_jbod.controller.profiles import KAFKA, KIP, is_reserved_directory, profile_named
from kraft_jbod.errors import ConfigError


def test_table_round_trips_and_jbod_boundary() -> None:
    levels = fv.all_levels()
    assert [lvl for lvl, _, _ in levels] == list(range(1, len(levels) + 1))
    for lvl, name, _ in levels:
        assert fv.level_of(name) == lvl and fv.name_of(lvl) == name
    assert fv.level_of("3.7-IV2") == fv.MV_3_7_IV2 == 17
    assert fv.level_of("3.7") == 19 and fv.level_of("21") == 21
    assert not fv.supports_jbod(16) and fv.supports_jbod(17)
    assert fv.supports_jbod(fv.DEFAULT_LEVEL) and fv.is_production(fv.DEFAULT_LEVEL)
    assert fv.SUPPORTED_FEATURES["metadata.version"] == (1, fv.MAX_SUPPORTED_LEVEL)
    with pytest.raises(ConfigError):
        fv.level_of("2.8-IV0")
    with pytest.raises(ConfigError):
        fv.name_of(99)


@pytest.mark.parametrize(
    ("u", "reserved"),
    [
        (uuid.UUID(int=0), True),
        (uuid.UUID(int=99), True),
        (uuid.UUID(int=100), False),
        (uuid.UUID(int=(1 << 63) | 7), True),
        (uuid.UUID(int=1 << 64), False),
    ],
)
def test_reserved_range_is_signed(u: uuid.UUID, reserved: bool) -> None:
    assert is_reserved_directory(u) is reserved


def test_profiles_keep_reserved_ids_distinct_and_reserved() -> None:
    for prof in (KAFKA, KIP):
        ids = {prof.migrating, prof.unassigned, prof.lost}
        assert len(ids) == 3 and all(is_reserved_directory(x) for x in ids)
    assert profile_named("kip") is KIP
    with pytest.raises(ValueError):
        profile_named("zk")


def test_heartbeat_table_rejects_missing_pairs() -> None:
    assert (HbState.SHUTDOWN_NOW, HbInput.FENCE) not in TRANSITIONS
    with pytest.raises(HeartbeatTableError):
        transition(HbState.SHUTDOWN_NOW, HbInput.FENCE)
    with pytest.raises(HeartbeatTableError):
        transition(HbState.FENCED, HbInput.SHUTDOWN_CLEAR)


@pytest.mark.parametrize(("n", "parts", "rf"), [(1, 5, 1), (3, 7, 3), (5, 40, 3), (10, 33, 2)])
def test_placement_distinct_and_balanced(n: int, parts: int, rf: int) -> None:
    brokers = list(range(100, 100 + n))
    plan = place_replicas(brokers, parts, rf, start=2, shift=1)
    assert len(plan) == parts
    for replicas in plan:
        assert len(replicas) == rf and len(set(replicas)) == rf and set(replicas) <= set(brokers)
    firsts = [r[0] for r in plan]
    assert max(firsts.count(b) for b in brokers) - min(firsts.count(b) for b in brokers) <= 1
    with pytest.raises(ValueError):
        place_replicas(brokers, 1, n + 1)


def test_every_profile_field_has_a_row_in_the_divergence_table() -> None:
    import dataclasses
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "divergences.md").read_text()
    for f in dataclasses.fields(KAFKA):
        if f.name != "name":
            assert f"`{f.name}`" in doc, f.name
        if f.name not in ("name",):
            assert getattr(KAFKA, f.name) != getattr(KIP, f.name), f"{f.name} does not diverge"
