"""One schema per message covering every version any of our Kafka sources defines.

Kafka 4.0 (KIP-896) deleted old versions from its schema files, so no single Kafka
tree describes both a 0.10 client's Produce v2 and a 4.4 broker's Fetch v18. The
sources under ``schemas/sources/`` are facts-only extracts of whole Kafka trees,
oldest first; this module folds them into the union the generator compiles
(``schemas/message``, ``schemas/metadata``) and records, per message and version,
which source defines it (``schemas/versions.json``).

Rule: a version is defined by the newest source whose ``validVersions`` contain it
(the newer tree may have re-specified an unstable version). A version only an older
source has keeps that source's layout. Merging happens field by field:

* fields are matched by name; a field renamed without a wire change (Kafka does
  this, e.g. TxnOffsetCommit's GenerationId) is matched by its position and wire
  facts at a version both sources define, and takes the newer name;
* each version attribute (versions, nullableVersions, taggedVersions, a field's
  flexibleVersions) becomes the set of versions where the defining source has it,
  written back as a range; a set that is not a range is an error;
* fields are ordered so that, at every version, the present fields come in the
  defining source's order (checked, not assumed);
* ``ignorable`` holds if any source says so (a newer tree drops the flag once the
  versions that needed it are gone); other attributes (default, mapKey, entityType,
  tag) come from the newest source that has the field.

``python -m tools.codegen.union`` rewrites the union; ``--check`` only compares.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from tools.codegen.extract import facts_json
from tools.codegen.spec import (
    MAX_VERSION,
    NONE,
    FieldSpec,
    MessageSpec,
    SchemaError,
    StructSpec,
    Versions,
    load_dir,
    parse_schema,
)

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
CATEGORIES = ("message", "metadata")


@dataclass(frozen=True, slots=True)
class Source:
    """One facts-only Kafka tree: ``label`` is how versions.json names it."""

    label: str
    path: Path


def load_sources(schemas: Path = SCHEMAS) -> list[Source]:
    """The source trees listed, oldest first, in ``schemas/sources/SOURCES.json``."""
    listing = schemas / "sources" / "SOURCES.json"
    try:
        rows = json.loads(listing.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SchemaError(f"{listing}: {exc}") from None
    return [Source(r["label"], schemas / "sources" / r["dir"]) for r in rows]


# ---------------------------------------------------------------------------- version sets


def _set(v: Versions, universe: set[int]) -> set[int]:
    if v.empty:
        return set()
    return {x for x in universe if v.lo <= x <= v.hi}


def _render(s: set[int], open_end: bool, top: int, what: str) -> Versions:
    """``s`` as a range; ``open_end`` writes ``lo+`` when it reaches ``top``."""
    if not s:
        return NONE
    lo, hi = min(s), max(s)
    if len(s) != hi - lo + 1:
        raise SchemaError(f"{what}: versions {sorted(s)} are not one range")
    if open_end and hi == top:
        hi = MAX_VERSION
    return Versions(lo, hi)


# ---------------------------------------------------------------------------- merging


@dataclass
class _Ctx:
    """Which versions each source defines for the message being merged."""

    owner: dict[int, int]  # version -> index of defining source
    top: int  # highest valid version of the union
    name: str
    valid: list[set[int]]  # per source, the versions it declares valid
    renamed: dict[str, str] = field(default_factory=dict)  # older field name -> newest

    def versions_of(self, i: int) -> set[int]:
        return {v for v, o in self.owner.items() if o == i}


def _wire_key(f: FieldSpec, v: int) -> tuple[object, ...]:
    """What the wire sees of ``f`` at ``v`` (not its name)."""
    child: tuple[object, ...] | None = None
    if f.fields is not None:
        child = tuple(_wire_key(c, v) for c in f.fields if v in c.versions)
    elem = f.element_type if f.fields is None and not f.is_struct else ("[]" if f.is_array else "struct")
    return (
        elem,
        v in f.tagged_versions,
        f.tag if v in f.tagged_versions else None,
        v in f.nullable_versions,
        None if f.flexible_versions is None else v in f.flexible_versions,
        child,
    )


def _renames(old: list[FieldSpec], new: list[FieldSpec], shared: set[int]) -> dict[str, str]:
    """Old name -> new name for fields renamed without a wire change."""
    out: dict[str, str] = {}
    new_names = {f.name for f in new}
    for v in sorted(shared):
        a = [f for f in old if v in f.versions]
        b = [f for f in new if v in f.versions]
        if len(a) != len(b):
            continue
        for fa, fb in zip(a, b, strict=True):
            if fa.name != fb.name and fa.name not in new_names and _wire_key(fa, v) == _wire_key(fb, v):
                out[fa.name] = fb.name
    return out


def _merge_attr(per_source: list[FieldSpec | None], attr: str, ctx: _Ctx, what: str, universe: set[int]) -> Versions:
    present: set[int] = set()
    open_end = False
    for i, f in enumerate(per_source):
        if f is None:
            continue
        value: Versions | None = getattr(f, attr)
        if value is None:
            continue
        mine = ctx.versions_of(i) & universe
        present |= _set(value, mine)
        open_end = open_end or (not value.empty and value.hi == MAX_VERSION)
    return _render(present, open_end, ctx.top, f"{what} {attr}")


def _merge_fields(lists: list[list[FieldSpec] | None], ctx: _Ctx, where: str) -> list[FieldSpec]:
    """Merge one struct's field lists (one per source, None where the source lacks it)."""
    # Align names: rename older fields to the newest name where the wire says they match.
    names: list[list[str]] = []
    newest: list[FieldSpec] | None = None
    newest_i = -1
    for i in range(len(lists) - 1, -1, -1):
        if lists[i] is not None:
            newest, newest_i = lists[i], i
            break
    if newest is None:
        return []
    aligned: list[list[FieldSpec] | None] = []
    for i, fl in enumerate(lists):
        if fl is None or i == newest_i:
            aligned.append(fl)
            continue
        ren = _renames(fl, newest, ctx.valid[i] & ctx.valid[newest_i])
        ctx.renamed.update(ren)
        aligned.append([replace(f, name=ren.get(f.name, f.name)) for f in fl])
    for fl in aligned:
        names.append([f.name for f in fl] if fl is not None else [])

    order = _merge_order(names, where)
    merged: list[FieldSpec] = []
    for name in order:
        per = [next((f for f in fl if f.name == name), None) if fl is not None else None for fl in aligned]
        merged.append(_merge_field(per, ctx, f"{where}.{name}"))
    _check_order(merged, aligned, ctx, where)
    return merged


def _merge_order(names: list[list[str]], where: str) -> list[str]:
    """The newest list's order, with each older-only name placed right after the name
    that precedes it in its own list (checked afterwards by ``_check_order``)."""
    order = list(names[-1])
    for seq in reversed(names[:-1]):
        prev: str | None = None
        for n in seq:
            if n not in order:
                order.insert(order.index(prev) + 1 if prev is not None else 0, n)
            prev = n
    if len(order) != len(set(order)):
        raise SchemaError(f"{where}: cannot order fields {order}")
    return order


def _check_order(merged: list[FieldSpec], aligned: list[list[FieldSpec] | None], ctx: _Ctx, where: str) -> None:
    for v, i in ctx.owner.items():
        src = aligned[i]
        if src is None:
            continue
        want = [f.name for f in src if v in f.versions]
        got = [f.name for f in merged if v in f.versions]
        if want != got:
            raise SchemaError(f"{where} v{v}: merged field order {got} differs from the source's {want}")


def _merge_field(per: list[FieldSpec | None], ctx: _Ctx, where: str) -> FieldSpec:
    newest = next(f for f in reversed(per) if f is not None)
    _check_one_type(per, ctx, where)
    universe = set(ctx.owner)
    versions = _merge_attr(per, "versions", ctx, where, universe)
    if versions.empty:
        # present in no defined version (e.g. only in an unstable range): keep as written
        versions = newest.versions
    present = _set(versions, universe)
    tagged = _merge_attr(per, "tagged_versions", ctx, where, present)
    if not tagged.empty:
        tagged = Versions(tagged.lo, MAX_VERSION)
    return FieldSpec(
        name=newest.name,
        type=newest.type,
        versions=versions,
        tagged_versions=tagged,
        tag=_merged_tag(per, tagged),
        nullable_versions=_merge_attr(per, "nullable_versions", ctx, where, present),
        default=newest.default,
        # 4.4 dropped "ignorable" where the versions that needed it were removed
        # (RequestHeader.ClientId at v0): an older source's flag still applies there.
        ignorable=any(f.ignorable for f in per if f is not None),
        map_key=newest.map_key,
        flexible_versions=_merged_flex_override(per, ctx, where, present),
        zero_copy=newest.zero_copy,
        entity_type=newest.entity_type,
        fields=_merged_children(per, ctx, where),
    )


def _check_one_type(per: list[FieldSpec | None], ctx: _Ctx, where: str) -> None:
    # A struct type may be renamed between releases (ClientMetricsResource became
    # ConfigResource); only the newest name is kept. Primitive types must agree.
    types = {(f.is_array, "struct" if f.is_struct else f.element_type) for f in per if f is not None}
    if len(types) != 1:
        raise SchemaError(f"{ctx.name}: {where} changes type between sources: {sorted(map(str, types))}")


def _merged_tag(per: list[FieldSpec | None], tagged: Versions) -> int | None:
    """The newest source's tag; an older one's when the newest no longer tags the field."""
    if tagged.empty:
        return None
    return next(f.tag for f in reversed(per) if f is not None and f.tag is not None)


def _merged_flex_override(per: list[FieldSpec | None], ctx: _Ctx, where: str, present: set[int]) -> Versions | None:
    if all(f is None or f.flexible_versions is None for f in per):
        return None
    return _merge_attr(per, "flexible_versions", ctx, where, present)


def _merged_children(per: list[FieldSpec | None], ctx: _Ctx, where: str) -> list[FieldSpec] | None:
    if all(f is None or f.fields is None for f in per):
        return None
    return _merge_fields([f.fields if f is not None else None for f in per], ctx, where)


def merge_specs(specs: list[MessageSpec | None]) -> tuple[MessageSpec, dict[int, int], dict[str, str]]:
    """The union of one message's specs (oldest first, None where a source lacks it),
    per version the index of the source that defines it, and the fields renamed."""
    present = [(i, s) for i, s in enumerate(specs) if s is not None]
    if not present:
        raise SchemaError("nothing to merge")
    newest_i, newest = present[-1]
    owner = _version_owners(present)
    for _, s in present:
        if s.api_key != newest.api_key or s.type != newest.type:
            raise SchemaError(f"{s.source}: api key or type differs from the newer {newest.source}")
    if not owner:
        return newest, owner, {}
    top = max(owner)
    ctx = _Ctx(owner, top, newest.name, [_valid_set(spec) for spec in specs])
    merged = MessageSpec(
        name=newest.name,
        type=newest.type,
        api_key=newest.api_key,
        valid_versions=Versions(min(owner), top),
        flexible_versions=_merged_flexible(specs, owner, top, newest.name),
        fields=_merge_fields([s.fields if s is not None else None for s in specs], ctx, newest.name),
        common_structs=_merged_common_structs(specs, ctx, newest.name),
        listeners=newest.listeners,
        latest_version_unstable=newest.latest_version_unstable and owner.get(top) == newest_i,
        deprecated_versions=next(
            (s.deprecated_versions for _, s in reversed(present) if not s.deprecated_versions.empty), NONE
        ),
        source=newest.source,
    )
    # parse back: resolves structs and runs every dialect check on the result
    return parse_schema(json.dumps(merged.raw()), newest.source), owner, dict(sorted(ctx.renamed.items()))


def _version_owners(present: list[tuple[int, MessageSpec]]) -> dict[int, int]:
    """Per version, the index of the newest source that defines it."""
    owner: dict[int, int] = {}
    for i, s in present:
        vv = s.valid_versions
        if not vv.empty:
            for v in range(vv.lo, vv.hi + 1):
                owner[v] = i  # later (newer) sources overwrite
    return owner


def _valid_set(spec: MessageSpec | None) -> set[int]:
    vs = spec.valid_versions if spec is not None else NONE
    return set(range(vs.lo, vs.hi + 1)) if not vs.empty else set()


def _merged_flexible(specs: list[MessageSpec | None], owner: dict[int, int], top: int, name: str) -> Versions:
    """Each version flexible as its owning source says; the result must be open-ended."""
    flex_set = {v for v, i in owner.items() if v in specs[i].flexible_versions}  # type: ignore[union-attr]
    if not flex_set:
        return NONE
    flexible = _render(flex_set, True, top, f"{name} flexibleVersions")
    if not flexible.empty and flexible.hi != MAX_VERSION:
        raise SchemaError(f"{name}: flexible versions {sorted(flex_set)} are not open-ended")
    return flexible


def _merged_common_structs(specs: list[MessageSpec | None], ctx: _Ctx, name: str) -> list[StructSpec]:
    common: list[StructSpec] = []
    names = [c.name for s in specs if s is not None for c in s.common_structs]
    for cname in dict.fromkeys(reversed(names)):
        per_c = [next((c for c in s.common_structs if c.name == cname), None) if s is not None else None for s in specs]
        cfields = _merge_fields([c.fields if c is not None else None for c in per_c], ctx, f"{name}.{cname}")
        cnewest = next(c for c in reversed(per_c) if c is not None)
        common.append(StructSpec(cname, cnewest.versions, cfields, common=True))
    return list(reversed(common))


def _layout(fields: list[FieldSpec], v: int) -> list[object]:
    """The wire layout of resolved ``fields`` at ``v`` (names left out)."""
    return [
        (_wire_key(f, v)[:5], _layout(f.struct.fields, v) if f.struct is not None else None)
        for f in fields
        if v in f.versions
    ]


def respecified(specs: list[MessageSpec | None]) -> dict[int, list[int]]:
    """Per older source index, versions it defines that the newest source lays out
    differently (Kafka changed a version while it was unstable, e.g. share-group v0)."""
    present = [(i, s) for i, s in enumerate(specs) if s is not None and not s.valid_versions.empty]
    if len(present) < 2:
        return {}
    _, newest = present[-1]
    out: dict[int, list[int]] = {}
    for i, s in present[:-1]:
        shared = s.valid_versions.intersect(newest.valid_versions)
        for v in range(shared.lo, shared.hi + 1) if not shared.empty else ():
            same_flex = (v in s.flexible_versions) == (v in newest.flexible_versions)
            if not same_flex or _layout(s.root.fields, v) != _layout(newest.root.fields, v):
                out.setdefault(i, []).append(v)
    return out


def _key(spec: MessageSpec) -> tuple[str, object]:
    """Messages are the same across sources when their api key and type match (the name
    may change, as ListClientMetricsResources became ListConfigResources), else by name."""
    if spec.api_key is not None:
        return (spec.type, spec.api_key)
    return (spec.type, spec.name)


def union(sources: list[Source]) -> tuple[dict[str, dict[str, str]], dict[str, object]]:
    """Union files by category and file name, and the versions table."""
    files: dict[str, dict[str, str]] = {}
    table: dict[str, object] = {"sources": [s.label for s in sources], "messages": {}}
    messages: dict[str, object] = {}
    for category in CATEGORIES:
        by_key: dict[tuple[str, object], list[MessageSpec | None]] = {}
        for i, src in enumerate(sources):
            folder = src.path / category
            if not folder.is_dir():
                continue
            for spec in load_dir(folder):
                slot = by_key.setdefault(_key(spec), [None] * len(sources))
                if slot[i] is not None:
                    raise SchemaError(f"{src.label}: two schemas for {_key(spec)}")
                slot[i] = spec
        out: dict[str, str] = {}
        for specs in by_key.values():
            merged, owner, renamed = merge_specs(specs)
            out[f"{merged.name}.json"] = facts_json(merged)
            ranges: dict[str, list[int]] = {}
            for v in sorted(owner):
                label = sources[owner[v]].label
                r = ranges.setdefault(label, [v, v])
                r[1] = v
            known_in = [sources[i].label for i, s in enumerate(specs) if s is not None]
            row: dict[str, object] = {"defined_by": ranges, "in": known_in}
            if renamed:
                row["renamed"] = renamed  # older sources' field names, for peers that still use them
            changed = respecified(specs)
            if changed:
                # versions an older release spoke with another layout; the newest wins here
                row["respecified"] = {sources[i].label: vs for i, vs in changed.items()}
            messages[merged.name] = row
        files[category] = out
    table["messages"] = dict(sorted(messages.items()))
    return files, table


def write(files: dict[str, dict[str, str]], table: dict[str, object], schemas: Path) -> list[str]:
    """Write (or with ``schemas`` pointing at a copy, compare); returns changed paths."""
    changed: list[str] = []
    for category, texts in files.items():
        folder = schemas / category
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.json"):
            if stale.name not in texts:
                stale.unlink()
                changed.append(f"removed {category}/{stale.name}")
        for name, text in texts.items():
            p = folder / name
            if not p.exists() or p.read_text(encoding="utf-8") != text:
                p.write_text(text, encoding="utf-8")
                changed.append(f"{category}/{name}")
    vt = schemas / "versions.json"
    text = json.dumps(table, indent=1, sort_keys=False) + "\n"
    if not vt.exists() or vt.read_text(encoding="utf-8") != text:
        vt.write_text(text, encoding="utf-8")
        changed.append("versions.json")
    return changed


def diff(files: dict[str, dict[str, str]], table: dict[str, object], schemas: Path) -> list[str]:
    problems: list[str] = []
    for category, texts in files.items():
        folder = schemas / category
        have = {p.name for p in folder.glob("*.json")} if folder.is_dir() else set()
        for name, text in texts.items():
            p = folder / name
            if not p.exists() or p.read_text(encoding="utf-8") != text:
                problems.append(f"stale {category}/{name}")
        problems += [f"unexpected {category}/{n}" for n in sorted(have - set(texts))]
    vt = schemas / "versions.json"
    if not vt.exists() or vt.read_text(encoding="utf-8") != json.dumps(table, indent=1) + "\n":
        problems.append("stale versions.json")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.codegen.union", description=__doc__)
    ap.add_argument("--schemas", type=Path, default=SCHEMAS)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    try:
        files, table = union(load_sources(args.schemas))
    except SchemaError as exc:
        print(f"union: {exc}", file=sys.stderr)
        return 2
    if args.check:
        problems = diff(files, table, args.schemas)
        for p in problems:
            print(f"union --check: {p}", file=sys.stderr)
        return 1 if problems else 0
    changed = write(files, table, args.schemas)
    print(f"union: {len(changed)} files changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
