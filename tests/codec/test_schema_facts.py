"""Our facts-only schema files against Apache Kafka's own schema files.

Every wire fact of every message, record and header must match the reference tree
(``../shared/reference/kafka-schemas``) exactly; a difference in either direction
fails. The files must also be facts only: no ``about`` texts and no comments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tools.codegen.spec import FieldSpec, MessageSpec, load_dir

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference" / "kafka-schemas"
OURS = ROOT / "schemas"


def field_facts(f: FieldSpec) -> dict[str, Any]:
    return {
        "name": f.name,
        "type": f.type,
        "versions": f.versions.render(),
        "taggedVersions": f.tagged_versions.render(),
        "tag": f.tag,
        "nullableVersions": f.nullable_versions.render(),
        "default": f.default,
        "ignorable": f.ignorable,
        "mapKey": f.map_key,
        "flexibleVersions": None if f.flexible_versions is None else f.flexible_versions.render(),
        "fields": None if f.fields is None else [field_facts(x) for x in f.fields],
    }


def message_facts(m: MessageSpec) -> dict[str, Any]:
    return {
        "name": m.name,
        "type": m.type,
        "apiKey": m.api_key,
        "validVersions": m.valid_versions.render(),
        "flexibleVersions": m.flexible_versions.render(),
        "latestVersionUnstable": m.latest_version_unstable,
        "deprecatedVersions": m.deprecated_versions.render(),
        "fields": [field_facts(f) for f in m.fields],
        "commonStructs": [
            {"name": s.name, "versions": s.versions.render(), "fields": [field_facts(f) for f in s.fields]}
            for s in m.common_structs
        ],
    }


SOURCES = OURS / "sources"
# (our facts-only source tree, Kafka's own files it was extracted from)
PAIRS = [("snapshot-2024-10-25", REFERENCE), ("kafka-4.4", REFERENCE / "4.4")]
# files a source has that the reference folder keeps elsewhere: 4.4's raft schema
ELSEWHERE = {"QuorumStateData.json": REFERENCE / "raft"}


@pytest.mark.parametrize("category", ["message", "metadata"])
@pytest.mark.parametrize(("source", "reference"), PAIRS, ids=[p[0] for p in PAIRS])
def test_every_fact_matches_kafka(source: str, reference: Path, category: str) -> None:
    theirs = {m.source: message_facts(m) for m in load_dir(reference / category)}
    ours = {m.source: message_facts(m) for m in load_dir(SOURCES / source / category)}
    for name, folder in ELSEWHERE.items():
        if name in ours and name not in theirs:
            theirs.update({m.source: message_facts(m) for m in load_dir(folder) if m.source == name})
    assert sorted(ours) == sorted(theirs), "the set of schema files differs"
    differences = [name for name in sorted(ours) if ours[name] != theirs[name]]
    assert not differences, f"facts differ in {differences[:10]}"
    assert len(ours) >= 25


def test_every_api_key_kafka_defines_is_covered() -> None:
    reference_keys: set[tuple[str, int | None]] = set()
    for _, reference in PAIRS:
        reference_keys |= {
            (m.type, m.api_key) for m in load_dir(reference / "message") if m.type in ("request", "response")
        }
    our_keys = {(m.type, m.api_key) for m in load_dir(OURS / "message") if m.type in ("request", "response")}
    assert our_keys == reference_keys
    assert {("request", 62), ("request", 63), ("request", 73), ("request", 94)} <= our_keys


def test_schema_files_hold_facts_only() -> None:
    paths = sorted(OURS.glob("*/*.json")) + sorted(SOURCES.glob("*/*/*.json"))
    assert len(paths) > 600
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert '"about"' not in text, path.name
        assert "//" not in text, path.name


def test_provenance_is_recorded() -> None:
    pinned = (SOURCES / "snapshot-2024-10-25" / "KAFKA_VERSION").read_text(encoding="utf-8")
    assert "4.0.0-SNAPSHOT" in pinned and "1eb7644349cb07139d6a3c1ad1986979647cac99" in pinned
    newest = (SOURCES / "kafka-4.4" / "KAFKA_VERSION").read_text(encoding="utf-8")
    assert "4.4" in newest and "8d3916cfe15f13a2d878c79d302ba2d63172f0af" in newest
    assert "KIP-896" in (OURS / "PROVENANCE.md").read_text(encoding="utf-8")


def test_kip858_facts_present() -> None:
    specs = {m.name: m for m in load_dir(OURS / "metadata")}
    register = specs["RegisterBrokerRecord"]
    log_dirs = next(f for f in register.fields if f.name == "LogDirs")
    assert log_dirs.type == "[]uuid" and log_dirs.versions.render() == "3+"
    change = specs["PartitionChangeRecord"]
    directories = next(f for f in change.fields if f.name == "Directories")
    assert directories.tag == 8 and directories.type == "[]uuid"
    partition = specs["PartitionRecord"]
    assert any(f.name == "Directories" and f.versions.render() == "1+" for f in partition.fields)
