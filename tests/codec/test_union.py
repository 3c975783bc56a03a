"""The union schemas (schemas/message, schemas/metadata) against the sources they merge.

Every version of every union schema must lay out on the wire exactly as the source
that defines it says (field order, types, tags, nullability, flexibility), and the
checked-in union must be what ``python -m tools.codegen.union`` produces.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tools.codegen.spec import FieldSpec, MessageSpec, load_dir
from tools.codegen.union import _wire_key, load_sources

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"


def layout(fields: list[FieldSpec], v: int) -> list[Any]:
    out: list[Any] = []
    for f in fields:
        if v in f.versions:
            child = layout(f.struct.fields, v) if f.struct is not None else None
            out.append((_wire_key(f, v)[:5], child))
    return out


def ident(m: MessageSpec) -> tuple[str, object]:
    return (m.type, m.api_key if m.api_key is not None else m.name)


@pytest.mark.parametrize("category", ["message", "metadata"])
def test_every_version_lays_out_as_its_source(category: str) -> None:
    table = json.loads((SCHEMAS / "versions.json").read_text())["messages"]
    sources = {s.label: {ident(m): m for m in load_dir(s.path / category)} for s in load_sources(SCHEMAS)}
    checked = 0
    for u in load_dir(SCHEMAS / category):
        owned: set[int] = set()
        for label, (lo, hi) in table[u.name]["defined_by"].items():
            src = sources[label][ident(u)]
            for v in range(lo, hi + 1):
                assert layout(u.root.fields, v) == layout(src.root.fields, v), (u.name, v, label)
                assert (v in u.flexible_versions) == (v in src.flexible_versions), (u.name, v)
                owned.add(v)
                checked += 1
        vv = u.valid_versions
        assert owned == (set(range(vv.lo, vv.hi + 1)) if not vv.empty else set()), u.name
    assert checked > (700 if category == "message" else 30)


def test_union_holds_old_and_new_versions() -> None:
    specs = {m.name: m for m in load_dir(SCHEMAS / "message")}
    assert (specs["ProduceRequest"].valid_versions.lo, specs["ProduceRequest"].valid_versions.hi) == (0, 13)
    assert (specs["FetchRequest"].valid_versions.lo, specs["FetchRequest"].valid_versions.hi) == (0, 18)
    assert specs["RequestHeader"].valid_versions.lo == 0
    assert specs["LeaderAndIsrRequest"].valid_versions.hi == 7  # "none" in 4.4, kept from the snapshot
    assert {m.api_key for m in specs.values() if m.type == "request"} >= set(range(88, 95))
    records = {m.api_key for m in load_dir(SCHEMAS / "metadata")}
    assert {28, 29} <= records


def test_checked_in_union_is_current() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tools.codegen.union", "--check"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
