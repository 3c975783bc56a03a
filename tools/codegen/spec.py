"""The schema model: Kafka's JSON message-schema dialect parsed into typed specs.

The dialect (facts, not Kafka's text): a file describes one message (``type`` is
``request``, ``response``, ``header``, ``metadata`` or ``data``) with ``validVersions``,
``flexibleVersions`` and a tree of ``fields``. A field has a ``type`` (a primitive, a
struct name, or ``[]`` of either), the ``versions`` it exists in, optional
``taggedVersions`` + ``tag``, ``nullableVersions``, ``default``, ``ignorable``,
``mapKey``, a per-field ``flexibleVersions`` override (strings and bytes only) and,
for structs, nested ``fields``. ``commonStructs`` declares structs shared by name.

Version strings: ``"A+"`` (A up to 32767), ``"A-B"``, ``"A"`` and ``"none"``.

Files may contain ``//`` comments, which this module strips (outside strings)
before parsing. Every inconsistency raises ``SchemaError`` naming file and field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_VERSION = 32767

PRIMITIVES = frozenset(
    {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64", "string", "bytes", "uuid", "records"}
)


class SchemaError(Exception):
    """A schema file that does not follow the dialect."""


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; ``lo > hi`` encodes the empty range ``none``."""

    lo: int
    hi: int

    @staticmethod
    def parse(text: object, what: str) -> Versions:
        if not isinstance(text, str):
            raise SchemaError(f"{what}: version range must be a string, got {text!r}")
        s = text.strip()
        if s == "none":
            return NONE
        m = re.fullmatch(r"(\d+)\+", s)
        if m:
            return Versions(int(m.group(1)), MAX_VERSION)
        m = re.fullmatch(r"(\d+)-(\d+)", s)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise SchemaError(f"{what}: empty range {s!r}")
            return Versions(lo, hi)
        m = re.fullmatch(r"\d+", s)
        if m:
            return Versions(int(s), int(s))
        raise SchemaError(f"{what}: cannot parse version range {s!r}")

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def __contains__(self, v: object) -> bool:
        return isinstance(v, int) and self.lo <= v <= self.hi

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Versions(lo, hi) if lo <= hi else NONE

    def render(self) -> str:
        if self.empty:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NONE = Versions(1, 0)


@dataclass(slots=True)
class FieldSpec:
    name: str
    type: str
    versions: Versions
    tagged_versions: Versions = NONE
    tag: int | None = None
    nullable_versions: Versions = NONE
    default: str | None = None
    ignorable: bool = False
    map_key: bool = False
    flexible_versions: Versions | None = None
    zero_copy: bool = False
    entity_type: str | None = None
    fields: list[FieldSpec] | None = None
    struct: StructSpec | None = None  # resolved after parsing

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element_type not in PRIMITIVES

    def raw(self) -> dict[str, Any]:
        """The field back in dialect form: wire facts only, in a stable key order."""
        d: dict[str, Any] = {"name": self.name, "type": self.type, "versions": self.versions.render()}
        if not self.tagged_versions.empty:
            d["taggedVersions"] = self.tagged_versions.render()
            d["tag"] = self.tag
        if not self.nullable_versions.empty:
            d["nullableVersions"] = self.nullable_versions.render()
        if self.default is not None:
            d["default"] = self.default
        if self.ignorable:
            d["ignorable"] = True
        if self.map_key:
            d["mapKey"] = True
        if self.flexible_versions is not None:
            d["flexibleVersions"] = self.flexible_versions.render()
        if self.zero_copy:
            d["zeroCopy"] = True
        if self.entity_type is not None:
            d["entityType"] = self.entity_type
        if self.fields is not None:
            d["fields"] = [f.raw() for f in self.fields]
        return d


@dataclass(slots=True)
class StructSpec:
    name: str
    versions: Versions
    fields: list[FieldSpec]
    common: bool = False


@dataclass(slots=True)
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    fields: list[FieldSpec]
    common_structs: list[StructSpec] = field(default_factory=list)
    listeners: list[str] | None = None
    latest_version_unstable: bool = False
    deprecated_versions: Versions = NONE
    source: str = ""
    structs: dict[str, StructSpec] = field(default_factory=dict)

    @property
    def root(self) -> StructSpec:
        return self.structs[self.name]

    def raw(self) -> dict[str, Any]:
        d: dict[str, Any] = {}
        if self.api_key is not None:
            d["apiKey"] = self.api_key
        d["type"] = self.type
        if self.listeners is not None:
            d["listeners"] = list(self.listeners)
        d["name"] = self.name
        d["validVersions"] = self.valid_versions.render()
        if not self.deprecated_versions.empty:
            d["deprecatedVersions"] = self.deprecated_versions.render()
        d["flexibleVersions"] = self.flexible_versions.render()
        if self.latest_version_unstable:
            d["latestVersionUnstable"] = True
        d["fields"] = [f.raw() for f in self.fields]
        if self.common_structs:
            d["commonStructs"] = [
                {"name": s.name, "versions": s.versions.render(), "fields": [f.raw() for f in s.fields]}
                for s in self.common_structs
            ]
        return d


def strip_comments(text: str) -> str:
    """Remove ``//`` comments that are outside JSON strings."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
            continue
        if c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _default_text(value: object, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return value
    raise SchemaError(f"{what}: unsupported default {value!r}")


def _parse_field(d: dict[str, Any], what: str) -> FieldSpec:
    try:
        name = d["name"]
        ftype = d["type"]
    except KeyError as exc:
        raise SchemaError(f"{what}: field without {exc.args[0]}") from None
    where = f"{what}.{name}"
    if "versions" not in d:
        raise SchemaError(f"{where}: no versions")
    tag = d.get("tag")
    if tag is not None:
        try:
            tag = int(tag)
        except (TypeError, ValueError):
            raise SchemaError(f"{where}: tag {tag!r} is not an integer") from None
    fs = FieldSpec(
        name=name,
        type=ftype,
        versions=Versions.parse(d["versions"], where),
        tagged_versions=Versions.parse(d["taggedVersions"], where) if "taggedVersions" in d else NONE,
        tag=tag,
        nullable_versions=Versions.parse(d["nullableVersions"], where) if "nullableVersions" in d else NONE,
        default=_default_text(d.get("default"), where),
        ignorable=bool(d.get("ignorable", False)),
        map_key=bool(d.get("mapKey", False)),
        flexible_versions=Versions.parse(d["flexibleVersions"], where) if "flexibleVersions" in d else None,
        zero_copy=bool(d.get("zeroCopy", False)),
        entity_type=d.get("entityType"),
        fields=[_parse_field(x, where) for x in d["fields"]] if "fields" in d else None,
    )
    if (fs.tag is None) != fs.tagged_versions.empty:
        raise SchemaError(f"{where}: tag and taggedVersions must come together")
    return fs


def parse_schema(text: str, source: str = "") -> MessageSpec:
    """Parse one schema file's text. Raises SchemaError."""
    try:
        d = json.loads(strip_comments(text))
    except json.JSONDecodeError as exc:
        raise SchemaError(f"{source}: not JSON after stripping comments: {exc}") from None
    if not isinstance(d, dict):
        raise SchemaError(f"{source}: top level is not an object")
    try:
        name = d["name"]
        mtype = d["type"]
    except KeyError as exc:
        raise SchemaError(f"{source}: no {exc.args[0]}") from None
    spec = MessageSpec(
        name=name,
        type=mtype,
        api_key=d.get("apiKey"),
        valid_versions=Versions.parse(d.get("validVersions", "none"), name),
        flexible_versions=Versions.parse(d.get("flexibleVersions", "none"), name),
        fields=[_parse_field(x, name) for x in d.get("fields", [])],
        common_structs=[
            StructSpec(
                name=c["name"],
                versions=Versions.parse(c.get("versions", "0+"), f"{name}.{c['name']}"),
                fields=[_parse_field(x, f"{name}.{c['name']}") for x in c["fields"]],
                common=True,
            )
            for c in d.get("commonStructs", [])
        ],
        listeners=d.get("listeners"),
        latest_version_unstable=bool(d.get("latestVersionUnstable", False)),
        deprecated_versions=Versions.parse(d["deprecatedVersions"], name) if "deprecatedVersions" in d else NONE,
        source=source,
    )
    _resolve(spec)
    return spec


def _resolve(spec: MessageSpec) -> None:
    """Build the struct table and link every struct-typed field to its StructSpec."""
    structs: dict[str, StructSpec] = {}
    for cs in spec.common_structs:
        structs[cs.name] = cs
    structs[spec.name] = StructSpec(spec.name, spec.valid_versions, spec.fields)

    def collect(fields: list[FieldSpec], where: str) -> None:
        for f in fields:
            if f.fields is not None:
                sname = f.element_type
                if sname in structs:
                    raise SchemaError(f"{spec.source}: struct {sname} defined twice ({where}.{f.name})")
                structs[sname] = StructSpec(sname, f.versions, f.fields)
                collect(f.fields, f"{where}.{f.name}")

    collect(spec.fields, spec.name)
    for cs in spec.common_structs:
        collect(cs.fields, cs.name)

    def link(fields: list[FieldSpec], where: str) -> None:
        for f in fields:
            if f.is_struct:
                s = structs.get(f.element_type)
                if s is None:
                    raise SchemaError(f"{spec.source}: {where}.{f.name} has unknown type {f.type}")
                f.struct = s
            elif f.fields is not None:
                raise SchemaError(f"{spec.source}: {where}.{f.name} is primitive but has fields")
            _check_field(spec, f, where)
        tags = sorted(f.tag for f in fields if f.tag is not None)
        if len(tags) != len(set(tags)):
            raise SchemaError(f"{spec.source}: duplicate tags in {where}")

    for s in structs.values():
        link(s.fields, s.name)
    spec.structs = structs


def _check_field(spec: MessageSpec, f: FieldSpec, where: str) -> None:
    w = f"{spec.source}: {where}.{f.name}"
    if not f.tagged_versions.empty:
        if f.tagged_versions.hi != MAX_VERSION:
            raise SchemaError(f"{w}: taggedVersions must be open-ended")
        if f.type == "records":
            raise SchemaError(f"{w}: records cannot be tagged")
    if f.flexible_versions is not None and f.element_type not in ("string", "bytes"):
        raise SchemaError(f"{w}: only strings and bytes may override flexibleVersions")
    if f.type == "uuid" and not f.nullable_versions.empty:
        raise SchemaError(f"{w}: uuid cannot be nullable")
    if f.type.startswith("[][]"):
        raise SchemaError(f"{w}: arrays of arrays are not allowed")


def load_schema(path: Path) -> MessageSpec:
    return parse_schema(path.read_text(encoding="utf-8"), source=path.name)


def load_dir(directory: Path) -> list[MessageSpec]:
    """Every ``*.json`` schema directly inside ``directory``, sorted by file name."""
    return [load_schema(p) for p in sorted(directory.glob("*.json"))]
