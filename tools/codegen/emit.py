"""Emit one Python module per schema: slots classes and straight-line codecs.

Strategy:

* A struct's *layout* at a version is the tuple of, per field, whether it is on the
  wire there, tagged or not, nullable or not, compact or classic, plus the layouts
  of nested structs. Versions with equal layouts share one reader and one writer,
  so a 17-version message usually compiles to a handful of functions.
* Consecutive fixed-width fields are read with one ``struct.unpack_from`` and
  written with one ``pack``; a single bounds check precedes each group and, when it
  fails, a slow path names the exact field that ran short.
* Variable-length values call the primitives in ``kraft_jbod.wire.primitives``,
  which check declared lengths before slicing.
* Tagged fields: known tags valid at the version are decoded, known tags not valid
  at the version are rejected (Java semantics), unknown tags are kept as raw bytes
  and written back merged in ascending tag order.
* On write, a field absent at the version must hold its default unless it is
  ignorable (then it is dropped), as Kafka's generated writers do.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field

from tools.codegen.spec import MAX_VERSION, FieldSpec, MessageSpec, StructSpec, Versions

FIXED_FORMATS = {
    "bool": ("?", 1),
    "int8": ("b", 1),
    "int16": ("h", 2),
    "uint16": ("H", 2),
    "int32": ("i", 4),
    "uint32": ("I", 4),
    "int64": ("q", 8),
    "float64": ("d", 8),
    "uuid": ("16s", 16),
}

PY_SCALAR = {
    "bool": "bool",
    "int8": "int",
    "int16": "int",
    "uint16": "int",
    "int32": "int",
    "uint32": "int",
    "int64": "int",
    "float64": "float",
    "string": "str",
    "bytes": "bytes",
    "records": "bytes",
    "uuid": "_uuid.UUID",
}

SMALL_ARRAY = 32  # arrays shorter than this are read with a precompiled Struct per length

UNKNOWN_TYPE = "tuple[tuple[int, bytes], ...]"

RESERVED_ATTRS = {"unknown_tagged_fields", "encode", "decode", "read", "write", "to_json", "from_json"}


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    if keyword.iskeyword(s) or s in RESERVED_ATTRS:
        s += "_"
    return s


def module_name(message_name: str) -> str:
    return snake(message_name).rstrip("_")


def _int_default(text: str, ftype: str, where: str) -> int:
    t = text.strip()
    neg = t.startswith("-")
    body = t[1:] if neg else t
    value = int(body, 16) if body.lower().startswith("0x") else int(body, 10)
    value = -value if neg else value
    lo, hi = {
        "int8": (-(1 << 7), (1 << 7) - 1),
        "int16": (-(1 << 15), (1 << 15) - 1),
        "uint16": (0, (1 << 16) - 1),
        "int32": (-(1 << 31), (1 << 31) - 1),
        "uint32": (0, (1 << 32) - 1),
        "int64": (-(1 << 63), (1 << 63) - 1),
    }[ftype]
    if not lo <= value <= hi:
        raise ValueError(f"{where}: default {text} does not fit {ftype}")
    return value


@dataclass
class Emitter:
    spec: MessageSpec
    lines: list[str] = field(default_factory=list)
    structs_fmt: dict[str, str] = field(default_factory=dict)  # format -> constant name
    layouts: dict[tuple[str, object], int] = field(default_factory=dict)
    layout_versions: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    consts: list[str] = field(default_factory=list)
    uuid_consts: dict[int, str] = field(default_factory=dict)
    layout_names: dict[tuple[tuple[str, int], ...], str] = field(default_factory=dict)
    _sig_cache: dict[tuple[str, int], object] = field(default_factory=dict)

    # ------------------------------------------------------------------ facts per version

    def flexible(self, v: int) -> bool:
        return v in self.spec.flexible_versions

    def field_flexible(self, f: FieldSpec, v: int) -> bool:
        if f.flexible_versions is not None:
            return v in f.flexible_versions
        return self.flexible(v)

    def signature(self, s: StructSpec, v: int) -> object:
        key = (s.name, v)
        if key in self._sig_cache:
            return self._sig_cache[key]
        parts: list[object] = [self.flexible(v)]
        for f in s.fields:
            if v not in f.versions:
                parts.append(None)
                continue
            child = self.signature(f.struct, v) if f.struct is not None else None
            parts.append((v in f.tagged_versions, v in f.nullable_versions, self.field_flexible(f, v), child))
        sig = tuple(parts)
        self._sig_cache[key] = sig
        return sig

    def layout_id(self, s: StructSpec, v: int) -> int:
        sig = self.signature(s, v)
        key = (s.name, sig)
        if key not in self.layouts:
            self.layouts[key] = len([k for k in self.layouts if k[0] == s.name])
        lid = self.layouts[key]
        seen = self.layout_versions.setdefault((s.name, lid), [])
        if v not in seen:
            seen.append(v)
        return lid

    # ------------------------------------------------------------------ helpers

    def fmt_const(self, fmt: str) -> str:
        name = self.structs_fmt.get(fmt)
        if name is None:
            name = f"_S_{re.sub(r'[^A-Za-z0-9]', '_', fmt)}"
            self.structs_fmt[fmt] = name
        return name

    def array_table(self, code: str) -> str:
        name = f"_ARR_{code.replace('?', 'bool')}"
        decl = f"{name} = _array_structs({code!r})"
        if decl not in self.consts:
            self.consts.append(decl)
        return name

    def uuid_const(self, value: int) -> str:
        name = self.uuid_consts.get(value)
        if name is None:
            name = "_ZERO_UUID" if value == 0 else f"_UUID_{len(self.uuid_consts)}"
            self.uuid_consts[value] = name
        return name

    def py_type(self, f: FieldSpec) -> str:
        nullable = not f.nullable_versions.empty
        if f.is_array:
            inner = f.element_type if f.is_struct else PY_SCALAR[f.element_type]
            t = f"list[{inner}]"
        elif f.is_struct:
            t = f.element_type
        else:
            t = PY_SCALAR[f.type]
        if nullable or f.type == "records":
            t = f"{t} | None"
        return t

    def default_expr(self, f: FieldSpec) -> str:
        """A Python expression producing a fresh default value for the field."""
        where = f"{self.spec.name}.{f.name}"
        d = f.default
        if d is not None and d.strip() == "null":
            if f.nullable_versions.empty:
                raise ValueError(f"{where}: null default on a non-nullable field")
            return "None"
        if f.is_array:
            return "[]"
        if f.is_struct:
            return f"{f.element_type}()"
        t = f.type
        if t == "records":
            return "None"
        if t == "bool":
            if d is None:
                return "False"
            if d.strip().lower() not in ("true", "false"):
                raise ValueError(f"{where}: bad bool default {d!r}")
            return "True" if d.strip().lower() == "true" else "False"
        if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            return repr(_int_default(d, t, where)) if d is not None else "0"
        if t == "float64":
            return repr(float(d)) if d is not None else "0.0"
        if t == "string":
            return repr(d) if d is not None else "''"
        if t == "bytes":
            if d not in (None, ""):
                raise ValueError(f"{where}: bytes default must be empty or null")
            return "b''"
        if t == "uuid":
            if d in (None, ""):
                return self.uuid_const(0)
            from kraft_jbod.wire.primitives import uuid_from_base64url

            return self.uuid_const(uuid_from_base64url(d).int)
        raise ValueError(f"{where}: no default for type {t}")

    def default_is_mutable(self, f: FieldSpec) -> bool:
        expr = self.default_expr(f)
        return expr == "[]" or expr.endswith("()")

    def non_default_cond(self, f: FieldSpec, val: str) -> str:
        """Kafka's "is this field's value not its default" test, as an expression."""
        d = self.default_expr(f)
        if f.is_array or f.type in ("bytes", "records"):
            if d == "None":
                return f"{val} is not None"
            return f"({val} is None or len({val}) != 0)"
        if d == "None":
            return f"{val} is not None"
        return f"{val} != {d}"

    # ------------------------------------------------------------------ emission

    def emit(self) -> str:
        spec = self.spec
        body: list[str] = []
        order = self.struct_order()
        # classes
        for s in order:
            body += self.emit_class(s)
        # readers/writers per layout, for every version where the struct appears
        versions_of: dict[str, set[int]] = {s.name: set() for s in order}

        def visit(s: StructSpec, v: int) -> None:
            if v in versions_of[s.name]:
                return
            versions_of[s.name].add(v)
            for f in s.fields:
                if v in f.versions and f.struct is not None:
                    visit(f.struct, v)

        vv = spec.valid_versions
        all_versions = list(range(vv.lo, vv.hi + 1)) if not vv.empty else []
        for v in all_versions:
            visit(spec.root, v)
        for s in order:
            for v in sorted(versions_of[s.name]):
                self.layout_id(s, v)
        funcs: list[str] = []
        emitted: set[tuple[str, int]] = set()
        for s in order:
            for v in sorted(versions_of[s.name]):
                lid = self.layout_id(s, v)
                if (s.name, lid) in emitted:
                    continue
                emitted.add((s.name, lid))
                funcs += self.emit_reader(s, v, lid)
                funcs += self.emit_writer(s, v, lid)
        # version tables
        tables: list[str] = []
        root = spec.root
        readers = ", ".join(f"{v}: _read_{root.name}_{self.layout_id_peek(root, v)}" for v in all_versions)
        writers = ", ".join(f"{v}: _write_{root.name}_{self.layout_id_peek(root, v)}" for v in all_versions)
        tables.append(f"{root.name}._READERS = {{{readers}}}")
        tables.append(f"{root.name}._WRITERS = {{{writers}}}")
        for s in order:
            tables += self.emit_field_table(s)

        head = [
            f'"""Generated by tools/codegen from schemas/{spec.source or spec.name + ".json"}."""',
            "",
            "# ruff: noqa",
            "from __future__ import annotations",
            "",
            "import struct as _struct",
            "import uuid as _uuid",
            "from typing import ClassVar as _ClassVar",
            "",
            "from kraft_jbod.errors import DecodeError as _DecodeError, EncodeError as _EncodeError",
            "from kraft_jbod.wire.message import (",
            "    DEFAULT_FACTORY as _FACTORY, FieldInfo as _F, Message as _Message, Struct as _Struct,",
            ")",
            "from kraft_jbod.wire.runtime import (",
            "    absent as _absent, bad_tag as _bad_tag, check_bool as _bool, null as _null,",
            ")",
            "from kraft_jbod.wire.primitives import (",
            "    read_string as _rs, read_nullable_string as _rns,",
            "    read_compact_string as _rcs, read_nullable_compact_string as _rncs,",
            "    read_bytes as _rb, read_nullable_bytes as _rnb,",
            "    read_compact_bytes as _rcb, read_nullable_compact_bytes as _rncb,",
            "    read_array_len as _ral, read_nullable_array_len as _rnal,",
            "    read_compact_array_len as _rcal, read_nullable_compact_array_len as _rncal,",
            "    read_fixed_array as _rfa, read_uuid_array as _rua,",
            "    read_tag_count as _rtc, read_tag_header as _rth,",
            "    write_string as _ws, write_compact_string as _wcs,",
            "    write_bytes as _wb, write_compact_bytes as _wcb,",
            "    write_array_len as _wal, write_compact_array_len as _wcal,",
            "    write_tagged_section as _wts, write_uvarint as _wuv,",
            "    short_fixed as _short_fixed, uuid_from_bytes as _uuid_from_bytes,",
            "    array_structs as _array_structs,",
            ")",
            "",
        ]
        consts: list[str] = ["_new = object.__new__"]
        for fmt, name in sorted(self.structs_fmt.items(), key=lambda kv: kv[1]):
            consts.append(f"{name} = _struct.Struct('>{fmt}')")
        for value, name in sorted(self.uuid_consts.items(), key=lambda kv: kv[1]):
            consts.append(f"{name} = _uuid_from_bytes(({value}).to_bytes(16, 'big'))")
        consts += self.consts
        return "\n".join(head + consts + ["", ""] + body + funcs + ["", ""] + tables) + "\n"

    def layout_id_peek(self, s: StructSpec, v: int) -> int:
        return self.layouts[(s.name, self.signature(s, v))]

    def struct_order(self) -> list[StructSpec]:
        """Children before parents, so default_factory references resolve at import."""
        seen: dict[str, StructSpec] = {}

        def visit(s: StructSpec) -> None:
            if s.name in seen:
                return
            for f in s.fields:
                if f.struct is not None and f.struct.name != s.name:
                    visit(f.struct)
            seen[s.name] = s

        for cs in self.spec.common_structs:
            visit(cs)
        visit(self.spec.root)
        return list(seen.values())

    def emit_class(self, s: StructSpec) -> list[str]:
        """A plain slots class with its ``__init__``, ``__eq__`` and ``__repr__`` written out.

        They are what ``@dataclass(slots=True)`` would build, as source: the class costs
        nothing at import beyond compiling it into the ``.pyc``, where the decorator runs
        ``exec`` for each method of each class (the larger part of a short command's
        start-up). ``dataclasses.fields``/``replace``/``asdict`` still work: the base class
        builds ``__dataclass_fields__`` on first use (``kraft_jbod.wire.message``).
        """
        spec = self.spec
        is_root = s is spec.root
        base = "_Message" if is_root else "_Struct"
        attrs = [snake(f.name) for f in s.fields] + ["unknown_tagged_fields"]
        slots = "(" + "".join(f"{a!r}, " for a in attrs).rstrip(" ") + ")"
        out = ["", "", f"class {s.name}({base}):"]
        if is_root:
            out.append(f'    """{spec.type} {spec.name}, versions {spec.valid_versions.render()}."""')
        else:
            out.append(f'    """Struct {s.name} of {spec.name}."""')
        out.append("")
        out.append(f"    __slots__ = {slots}")
        out.append(f"    __match_args__ = {slots}")
        if is_root:
            out += self.class_facts()
        out += [f"    {snake(f.name)}: {self.py_type(f)}" for f in s.fields]
        out.append(f"    unknown_tagged_fields: {UNKNOWN_TYPE}")
        out += self.emit_init(s)
        out += self.emit_eq(s.name, attrs)
        out += self.emit_repr(attrs)
        return out

    def class_facts(self) -> list[str]:
        spec = self.spec
        vv = spec.valid_versions
        fv = spec.flexible_versions
        dv = spec.deprecated_versions
        return [
            "",
            f"    NAME: _ClassVar[str] = {spec.name!r}",
            f"    SCHEMA_TYPE: _ClassVar[str] = {spec.type!r}",
            f"    API_KEY: _ClassVar[int | None] = {spec.api_key!r}",
            f"    VALID_VERSIONS: _ClassVar[tuple[int, int]] = ({vv.lo}, {vv.hi})",
            f"    FLEXIBLE_MIN: _ClassVar[int | None] = {None if fv.empty else fv.lo}",
            f"    LATEST_VERSION_UNSTABLE: _ClassVar[bool] = {spec.latest_version_unstable}",
            f"    DEPRECATED_VERSIONS: _ClassVar[tuple[int, int] | None] = "
            f"{None if dv.empty else (dv.lo, min(dv.hi, MAX_VERSION))}",
            "",
        ]

    def emit_init(self, s: StructSpec) -> list[str]:
        """Every field a keyword with its default; a mutable default (a list, a nested
        struct) is built afresh per instance, as a dataclass ``default_factory`` is."""
        params = ["self"]
        body: list[str] = []
        for f in s.fields:
            attr = snake(f.name)
            d = self.default_expr(f)
            if self.default_is_mutable(f):
                params.append(f"{attr}: {self.py_type(f)} = _FACTORY")
                body.append(f"        self.{attr} = {d} if {attr} is _FACTORY else {attr}")
            else:
                params.append(f"{attr}: {self.py_type(f)} = {d}")
                body.append(f"        self.{attr} = {attr}")
        params.append(f"unknown_tagged_fields: {UNKNOWN_TYPE} = ()")
        body.append("        self.unknown_tagged_fields = unknown_tagged_fields")
        return ["", f"    def __init__({', '.join(params)}) -> None:", *body]

    @staticmethod
    def emit_eq(name: str, attrs: list[str]) -> list[str]:
        mine = ", ".join(f"self.{a}" for a in attrs)
        theirs = ", ".join(f"other.{a}" for a in attrs)
        return [
            "",
            "    def __eq__(self, other: object) -> bool:",
            f"        if other.__class__ is self.__class__ and isinstance(other, {name}):",
            f"            return ({mine},) == ({theirs},)",
            "        return NotImplemented",
        ]

    @staticmethod
    def emit_repr(attrs: list[str]) -> list[str]:
        parts = ", ".join(f"{a}={{self.{a}!r}}" for a in attrs)
        return ["", "    def __repr__(self) -> str:", f'        return f"{{self.__class__.__qualname__}}({parts})"']

    def emit_field_table(self, s: StructSpec) -> list[str]:
        rows = []
        for f in s.fields:
            tagged = None if f.tagged_versions.empty else (f.tagged_versions.lo, f.tagged_versions.hi)
            nullable = None if f.nullable_versions.empty else (f.nullable_versions.lo, f.nullable_versions.hi)
            flex = None
            if f.flexible_versions is not None:
                fv = f.flexible_versions
                flex = (fv.lo, fv.hi) if not fv.empty else (1, 0)
            rows.append(
                f"    _F({f.name!r}, {snake(f.name)!r}, {f.type!r}, ({f.versions.lo}, {f.versions.hi}), "
                f"{tagged!r}, {f.tag!r}, {nullable!r}, {f.ignorable!r}, lambda: {self.default_expr(f)}, "
                f"{f.element_type if f.is_struct else None}, {flex!r}),"
            )
        return [f"{s.name}._FIELDS = (", *rows, ")"]

    # ------------------------------------------------------------------ readers

    def emit_reader(self, s: StructSpec, v: int, lid: int) -> list[str]:
        versions = self.layout_versions[(s.name, lid)]
        L: list[str] = [
            "",
            "",
            f"def _read_{s.name}_{lid}(buf: bytes | bytearray | memoryview, pos: int) -> tuple[{s.name}, int]:",
            f"    # versions {_ranges(versions)}",
            "    end = len(buf)",
        ]
        L += self.reader_body(s, v, "", "    ")
        L.append("    return o, pos")
        return L

    def is_leaf(self, s: StructSpec, v: int) -> bool:
        """No struct-valued fields at ``v``: cheap enough to inline into a parent's loop."""
        return all(f.struct is None for f in s.fields if v in f.versions)

    def reader_body(self, s: StructSpec, v: int, P: str, ind: str) -> list[str]:
        """Statements reading struct ``s`` at ``v`` from ``buf``/``pos``/``end`` into ``{P}o``.

        ``P`` prefixes every local name so a leaf struct's body can be inlined into its
        parent's loop without clashing with the parent's names.
        """
        present = [f for f in s.fields if v in f.versions]
        inline = [f for f in present if v not in f.tagged_versions]
        tagged = [f for f in present if v in f.tagged_versions]
        L = self.read_inline_fields(inline, v, P, ind)
        if self.flexible(v):
            L += self.read_tagged_section(s, tagged, v, P, ind)
        # Slot stores on a bare instance: skips ``__init__`` and its default-factory
        # checks, which cost more than the stores themselves.
        L.append(f"{ind}{P}o = _new({s.name})")
        for f in s.fields:
            value = f"{P}v_{snake(f.name)}" if v in f.versions else self.default_expr(f)
            L.append(f"{ind}{P}o.{snake(f.name)} = {value}")
        L.append(f"{ind}{P}o.unknown_tagged_fields = {P + 'unknown' if self.flexible(v) else '()'}")
        return L

    def read_inline_fields(self, inline: list[FieldSpec], v: int, P: str, ind: str) -> list[str]:
        """The untagged fields in wire order, runs of fixed-width ones read as one group."""
        L: list[str] = []
        i = 0
        while i < len(inline):
            f = inline[i]
            if f.type in FIXED_FORMATS and v not in f.nullable_versions:
                group = [f]
                j = i + 1
                while j < len(inline) and inline[j].type in FIXED_FORMATS:
                    group.append(inline[j])
                    j += 1
                L += self.read_fixed_group(group, ind, P)
                i = j
                continue
            L += self.read_value(f, v, f"{P}v_{snake(f.name)}", "buf", "pos", ind, tagged_ctx=False)
            i += 1
        return L

    def read_tagged_section(self, s: StructSpec, tagged: list[FieldSpec], v: int, P: str, ind: str) -> list[str]:
        """The tagged-field section into ``{P}v_*`` and ``{P}unknown``: known tags decoded,
        tags valid only at other versions rejected, unknown ones kept raw."""
        L = [f"{ind}{P}v_{snake(f.name)}: {self.py_type(f)} = {self.default_expr(f)}" for f in tagged]
        L += [
            f"{ind}{P}unknown: {UNKNOWN_TYPE} = ()",
            f"{ind}if pos < end and buf[pos] == 0:",
            f"{ind}    pos += 1",
            f"{ind}else:",
            f"{ind}    {P}n_tags, pos = _rtc(buf, pos, '_tagged_fields')",
            f"{ind}    {P}raw_tags: list[tuple[int, bytes]] = []",
            f"{ind}    for _ in range({P}n_tags):",
            f"{ind}        {P}tag, {P}size, pos = _rth(buf, pos, '_tagged_fields')",
        ]
        branches = 0
        for f in tagged:
            L.append(f"{ind}        {'elif' if branches else 'if'} {P}tag == {f.tag}:")
            L.append(f"{ind}            {P}sub = bytes(buf[pos:pos + {P}size])")
            var = f"{P}v_{snake(f.name)}"
            L += self.read_value(f, v, var, f"{P}sub", f"{P}p", ind + "            ", tagged_ctx=True, init_pos="0")
            branches += 1
        invalid = sorted({f.tag for f in s.fields if f.tag is not None and v not in f.tagged_versions})
        if invalid:
            L.append(f"{ind}        {'elif' if branches else 'if'} {P}tag in {tuple(invalid)!r}:")
            L.append(f"{ind}            raise _bad_tag({P}tag, {v}, pos)")
            branches += 1
        raw = f"{P}raw_tags.append(({P}tag, bytes(buf[pos:pos + {P}size])))"
        if branches:
            L += [f"{ind}        else:", f"{ind}            {raw}"]
        else:
            L.append(f"{ind}        {raw}")
        L += [
            f"{ind}        pos += {P}size",
            f"{ind}    if {P}raw_tags:",
            f"{ind}        {P}unknown = tuple({P}raw_tags)",
        ]
        return L

    def read_fixed_group(self, group: list[FieldSpec], ind: str, P: str = "") -> list[str]:
        fmt = "".join(FIXED_FORMATS[f.type][0] for f in group)
        size = sum(FIXED_FORMATS[f.type][1] for f in group)
        const = self.fmt_const(fmt)
        layout = tuple((f.name, FIXED_FORMATS[f.type][1]) for f in group)
        layout_name = self.layout_names.get(layout)
        if layout_name is None:
            layout_name = f"_L{len(self.layout_names)}"
            self.layout_names[layout] = layout_name
            self.consts.append(f"{layout_name} = {layout!r}")
        names = [f"{P}r_{snake(f.name)}" if f.type == "uuid" else f"{P}v_{snake(f.name)}" for f in group]
        L = [
            f"{ind}if pos + {size} > end:",
            f"{ind}    raise _short_fixed(pos, end, {layout_name})",
        ]
        if len(names) == 1:
            L.append(f"{ind}{names[0]}, = {const}.unpack_from(buf, pos)")
        else:
            L.append(f"{ind}{', '.join(names)} = {const}.unpack_from(buf, pos)")
        for f, n in zip(group, names, strict=True):
            if f.type == "uuid":
                L.append(f"{ind}{P}v_{snake(f.name)} = _uuid_from_bytes({n})")
        L.append(f"{ind}pos += {size}")
        return L

    def read_value(
        self,
        f: FieldSpec,
        v: int,
        var: str,
        buf: str,
        pos: str,
        ind: str,
        *,
        tagged_ctx: bool,
        init_pos: str | None = None,
    ) -> list[str]:
        """Code reading field ``f`` at version ``v`` into ``var``."""
        L: list[str] = []
        if init_pos is not None:
            L.append(f"{ind}{pos} = {init_pos}")
        flex = True if tagged_ctx else self.field_flexible(f, v)
        struct_flex = True if tagged_ctx else self.flexible(v)
        nullable = v in f.nullable_versions
        name = f.name
        t = f.type
        if f.is_array:
            fn = {
                (False, False): "_ral",
                (False, True): "_rnal",
                (True, False): "_rcal",
                (True, True): "_rncal",
            }[(struct_flex, nullable)]
            if not tagged_ctx:
                L.append(f"{ind}{var}: {self.py_type(f)}")
            if struct_flex and not tagged_ctx:
                # Most arrays hold fewer than 127 elements: one byte, no call.
                L.append(f"{ind}n_{var} = {buf}[{pos}] - 1 if {pos} < end else -2")
                L.append(f"{ind}if 0 <= n_{var} < 127 and n_{var} <= end - {pos}:")
                L.append(f"{ind}    {pos} += 1")
                L.append(f"{ind}else:")
                L.append(f"{ind}    n_{var}, {pos} = {fn}({buf}, {pos}, {name!r})")
            else:
                L.append(f"{ind}n_{var}, {pos} = {fn}({buf}, {pos}, {name!r})")
            inner = ind
            if nullable:
                L.append(f"{ind}if n_{var} < 0:")
                L.append(f"{ind}    {var} = None")
                L.append(f"{ind}else:")
                inner = ind + "    "
            et = f.element_type
            if et in FIXED_FORMATS and et != "uuid":
                code = FIXED_FORMATS[et][0]
                width = FIXED_FORMATS[et][1]
                table = self.array_table(code)
                # Short arrays (replica lists, ISRs) use a precompiled Struct per length.
                limit = "end" if buf == "buf" else f"len({buf})"
                L.append(f"{inner}if n_{var} < {SMALL_ARRAY} and {pos} + {width} * n_{var} <= {limit}:")
                L.append(f"{inner}    {var} = list({table}[n_{var}].unpack_from({buf}, {pos}))")
                L.append(f"{inner}    {pos} += {width} * n_{var}")
                L.append(f"{inner}else:")
                L.append(f"{inner}    {var}, {pos} = _rfa({buf}, {pos}, n_{var}, {code!r}, {name!r})")
            elif et == "uuid":
                L.append(f"{inner}{var}, {pos} = _rua({buf}, {pos}, n_{var}, {name!r})")
            elif f.is_struct:
                lid = self.layout_id(f.struct, v) if f.struct is not None else 0
                L.append(f"{inner}{var} = []")
                L.append(f"{inner}app_{var} = {var}.append")
                L.append(f"{inner}i = 0")
                L.append(f"{inner}try:")
                L.append(f"{inner}    for i in range(n_{var}):")
                if f.struct is not None and not tagged_ctx and buf == "buf" and self.is_leaf(f.struct, v):
                    # Inlined element reader: no call and no tuple per element.
                    P = f"{var}_"
                    L += self.reader_body(f.struct, v, P, inner + "        ")
                    L.append(f"{inner}        app_{var}({P}o)")
                else:
                    L.append(f"{inner}        e_{var}, {pos} = _read_{et}_{lid}({buf}, {pos})")
                    L.append(f"{inner}        app_{var}(e_{var})")
                L.append(f"{inner}except _DecodeError as exc:")
                L.append(f"{inner}    raise exc.refine(field=f'{name}[{{i}}]')")
            else:
                fn = self.scalar_reader(et, struct_flex, False)
                L.append(f"{inner}{var} = []")
                L.append(f"{inner}app_{var} = {var}.append")
                L.append(f"{inner}for _ in range(n_{var}):")
                L.append(f"{inner}    e_{var}, {pos} = {fn}({buf}, {pos}, {name!r})")
                L.append(f"{inner}    app_{var}(e_{var})")
            return L
        if f.is_struct:
            lid = self.layout_id(f.struct, v) if f.struct is not None else 0
            inner = ind
            if nullable:
                L.append(f"{ind}if {pos} >= len({buf}):")
                L.append(
                    f"{ind}    raise _DecodeError('need 1 byte for the null marker', offset={pos}, field_path={name!r})"
                )
                L.append(f"{ind}if {buf}[{pos}] >= 0x80:")
                L.append(f"{ind}    {var} = None")
                L.append(f"{ind}    {pos} += 1")
                L.append(f"{ind}else:")
                L.append(f"{ind}    {pos} += 1")
                inner = ind + "    "
            L.append(f"{inner}try:")
            L.append(f"{inner}    {var}, {pos} = _read_{f.element_type}_{lid}({buf}, {pos})")
            L.append(f"{inner}except _DecodeError as exc:")
            L.append(f"{inner}    raise exc.refine(field={name!r})")
            return L
        if t in FIXED_FORMATS:
            fmt, size = FIXED_FORMATS[t]
            const = self.fmt_const(fmt)
            L.append(f"{ind}if {pos} + {size} > len({buf}):")
            L.append(f"{ind}    raise _short_fixed({pos}, len({buf}), (({name!r}, {size}),))")
            if t == "uuid":
                L.append(f"{ind}{var} = _uuid_from_bytes({buf}[{pos}:{pos} + 16])")
            else:
                L.append(f"{ind}{var}, = {const}.unpack_from({buf}, {pos})")
            L.append(f"{ind}{pos} += {size}")
            return L
        fn = self.scalar_reader(t, flex, nullable)
        L.append(f"{ind}{var}, {pos} = {fn}({buf}, {pos}, {name!r})")
        return L

    @staticmethod
    def scalar_reader(t: str, flex: bool, nullable: bool) -> str:
        if t == "string":
            return {(False, False): "_rs", (False, True): "_rns", (True, False): "_rcs", (True, True): "_rncs"}[
                (flex, nullable)
            ]
        if t in ("bytes", "records"):
            return {(False, False): "_rb", (False, True): "_rnb", (True, False): "_rcb", (True, True): "_rncb"}[
                (flex, nullable)
            ]
        raise ValueError(f"no scalar reader for {t}")

    # ------------------------------------------------------------------ writers

    def emit_writer(self, s: StructSpec, v: int, lid: int) -> list[str]:
        versions = self.layout_versions[(s.name, lid)]
        L: list[str] = [
            "",
            "",
            f"def _write_{s.name}_{lid}(o: {s.name}, out: bytearray) -> None:",
            f"    # versions {_ranges(versions)}",
        ]
        # The absent-field checks depend on the exact version only through presence,
        # which is part of the layout, so one function serves all its versions.
        vname = versions[0] if len(versions) == 1 else None
        vexpr = str(vname) if vname is not None else repr(_ranges(versions))
        L += self.writer_body(s, v, "o", "    ", vexpr)
        return L

    def writer_body(self, s: StructSpec, v: int, o: str, ind: str, vexpr: str) -> list[str]:
        """Statements writing the struct held in ``o`` at ``v`` to ``out``.

        No ``return``: a leaf struct's body is inlined into its parent's loop.
        """
        L: list[str] = []
        for f in s.fields:
            if v in f.versions or f.ignorable:
                continue
            cond = self.non_default_cond(f, f"{o}.{snake(f.name)}")
            L.append(f"{ind}if {cond}:")
            L.append(f"{ind}    raise _absent({f.name!r}, {vexpr})")
        present = [f for f in s.fields if v in f.versions]
        inline = [f for f in present if v not in f.tagged_versions]
        tagged = sorted((f for f in present if v in f.tagged_versions), key=lambda f: f.tag or 0)
        i = 0
        while i < len(inline):
            f = inline[i]
            if f.type in FIXED_FORMATS:
                group = [f]
                j = i + 1
                while j < len(inline) and inline[j].type in FIXED_FORMATS:
                    group.append(inline[j])
                    j += 1
                L += self.write_fixed_group(group, ind, o)
                i = j
                continue
            L += self.write_value(f, v, f"{o}.{snake(f.name)}", "out", ind, tagged_ctx=False)
            i += 1
        unknown = f"{o}.unknown_tagged_fields"
        if self.flexible(v):
            if tagged:
                # Common case first: no unknown tags to merge, so the section is written
                # directly (count, then each present field's tag, size and bytes).
                conds = [self.non_default_cond(f, f"{o}.{snake(f.name)}") for f in tagged]
                L.append(f"{ind}if not {unknown}:")
                L.append(f"{ind}    out.append({' + '.join(f'({c})' for c in conds)})")
                for f, cond in zip(tagged, conds, strict=True):
                    val = f"{o}.{snake(f.name)}"
                    L.append(f"{ind}    if {cond}:")
                    L.append(f"{ind}        tb = bytearray()")
                    L += self.write_value(f, v, val, "tb", ind + "        ", tagged_ctx=True)
                    tag_bytes = bytearray()
                    _uvarint_into(tag_bytes, f.tag or 0)
                    L.append(f"{ind}        out += {bytes(tag_bytes)!r}")
                    L.append(f"{ind}        _wuv(out, len(tb))")
                    L.append(f"{ind}        out += tb")
                L.append(f"{ind}else:")
                L.append(f"{ind}    tagged: list[tuple[int, bytes | bytearray]] = []")
                for f, cond in zip(tagged, conds, strict=True):
                    val = f"{o}.{snake(f.name)}"
                    L.append(f"{ind}    if {cond}:")
                    L.append(f"{ind}        tb = bytearray()")
                    L += self.write_value(f, v, val, "tb", ind + "        ", tagged_ctx=True)
                    L.append(f"{ind}        tagged.append(({f.tag}, tb))")
                L.append(f"{ind}    _wts(out, tagged, {unknown}, '_tagged_fields')")
            else:
                L.append(f"{ind}if {unknown}:")
                L.append(f"{ind}    _wts(out, (), {unknown}, '_tagged_fields')")
                L.append(f"{ind}else:")
                L.append(f"{ind}    out.append(0)")
        else:
            L.append(f"{ind}if {unknown}:")
            reason = "tagged fields cannot be written at non-flexible version " + vexpr.strip("'")
            L.append(f"{ind}    raise _EncodeError({reason!r})")
        return L

    def write_fixed_group(self, group: list[FieldSpec], ind: str, o: str = "o") -> list[str]:
        fmt = "".join(FIXED_FORMATS[f.type][0] for f in group)
        const = self.fmt_const(fmt)
        vals = []
        for f in group:
            a = f"{o}.{snake(f.name)}"
            if f.type == "uuid":
                vals.append(f"{a}.bytes")
            elif f.type == "bool":
                vals.append(f"({a} if {a}.__class__ is bool else _bool({a}, {f.name!r}))")
            else:
                vals.append(a)
        return [f"{ind}out += {const}.pack({', '.join(vals)})"]

    def write_value(self, f: FieldSpec, v: int, val: str, out: str, ind: str, *, tagged_ctx: bool) -> list[str]:
        L: list[str] = []
        if v not in f.nullable_versions:
            L.append(f"{ind}if {val} is None:")
            L.append(f"{ind}    raise _null({f.name!r})")
        if f.is_array:
            return L + self.write_array(f, v, val, out, ind, tagged_ctx=tagged_ctx)
        if f.is_struct:
            lid = self.layout_id(f.struct, v) if f.struct is not None else 0
            if v in f.nullable_versions:
                L.append(f"{ind}if {val} is None:")
                L.append(f"{ind}    {out}.append(0xff)")
                L.append(f"{ind}else:")
                L.append(f"{ind}    {out}.append(1)")
                L.append(f"{ind}    _write_{f.element_type}_{lid}({val}, {out})")
            else:
                L.append(f"{ind}_write_{f.element_type}_{lid}({val}, {out})")
            return L
        if f.type in FIXED_FORMATS:
            const = self.fmt_const(FIXED_FORMATS[f.type][0])
            if f.type == "uuid":
                L.append(f"{ind}{out} += {const}.pack({val}.bytes)")
            elif f.type == "bool":
                L.append(f"{ind}{out} += {const}.pack(_bool({val}, {f.name!r}))")
            else:
                L.append(f"{ind}{out} += {const}.pack({val})")
            return L
        flex = True if tagged_ctx else self.field_flexible(f, v)
        L.append(f"{ind}{self.scalar_writer(f.type, flex)}({out}, {val}, {f.name!r})")
        return L

    def write_array(self, f: FieldSpec, v: int, val: str, out: str, ind: str, *, tagged_ctx: bool) -> list[str]:
        """An array's length, then its elements: packed in one call when fixed-width,
        a leaf struct's writer inlined into the loop when it can be."""
        ev = snake(f.name).rstrip("_")
        struct_flex = True if tagged_ctx else self.flexible(v)
        name = f.name
        L = [f"{ind}{'_wcal' if struct_flex else '_wal'}({out}, {val}, {name!r})"]
        inner = ind
        if v in f.nullable_versions:
            L.append(f"{ind}if {val} is not None:")
            inner = ind + "    "
        et = f.element_type
        if et == "bool":
            L.append(f"{inner}{out} += _struct.pack(f'>{{len({val})}}?', *[_bool(x, {name!r}) for x in {val}])")
        elif et in FIXED_FORMATS and et != "uuid":
            L.append(f"{inner}{out} += _struct.pack(f'>{{len({val})}}{FIXED_FORMATS[et][0]}', *{val})")
        elif et == "uuid":
            L.append(f"{inner}{out} += b''.join([e_{ev}.bytes for e_{ev} in {val}])")
        elif f.is_struct:
            lid = self.layout_id(f.struct, v) if f.struct is not None else 0
            L.append(f"{inner}for e_{ev} in {val}:")
            if f.struct is not None and not tagged_ctx and out == "out" and self.is_leaf(f.struct, v):
                # Inlined element writer: no call per element.
                L += self.writer_body(f.struct, v, f"e_{ev}", inner + "    ", repr(str(v)))
            else:
                L.append(f"{inner}    _write_{et}_{lid}(e_{ev}, {out})")
        else:
            L.append(f"{inner}for e_{ev} in {val}:")
            L.append(f"{inner}    if e_{ev} is None:")
            L.append(f"{inner}        raise _null({name!r})")
            L.append(f"{inner}    {self.scalar_writer(et, struct_flex)}({out}, e_{ev}, {name!r})")
        return L

    @staticmethod
    def scalar_writer(t: str, flex: bool) -> str:
        if t == "string":
            return "_wcs" if flex else "_ws"
        if t in ("bytes", "records"):
            return "_wcb" if flex else "_wb"
        raise ValueError(f"no scalar writer for {t}")


def _uvarint_into(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _ranges(versions: list[int]) -> str:
    vs = sorted(versions)
    parts = []
    start = prev = vs[0]
    for x in vs[1:]:
        if x == prev + 1:
            prev = x
            continue
        parts.append(f"{start}-{prev}" if start != prev else str(start))
        start = prev = x
    parts.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(parts)


def emit_module(spec: MessageSpec) -> str:
    return Emitter(spec).emit()


__all__ = ["Emitter", "Versions", "emit_module", "module_name", "snake"]
