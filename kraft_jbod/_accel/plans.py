"""Compile a generated class's ``_FIELDS`` table into the plan the C codec walks.

A plan describes one struct at one version, already resolved: for each field (in
declaration order, which is wire order for the non-tagged ones) whether it is on the
wire, tagged, nullable, which length encodings it uses, the plan of its struct, and
how to produce and recognise its default. The facts come from the same ``FieldInfo``
rows the generator writes from the schema specs, so a regenerated schema (new
versions, new fields) needs nothing here.

The shape is a plain tuple, parsed once by ``_ccodec.c``::

    plan  = (cls, flexible, fields, invalid_tags)
    field = (attr, kind, elem, present, tagged, tag, nullable, compact, arr_compact,
             subplan | None, dmode, default, compare_with, ignorable, dcmp)

The rules mirror tools/codegen/emit.py: strings and bytes use the field's own
flexibility (``flexibleVersions`` may override the message's), arrays use the
message's, and everything inside a tagged field is compact.
"""

from __future__ import annotations

from typing import Any

KINDS = {
    "bool": 0,
    "int8": 1,
    "int16": 2,
    "uint16": 3,
    "int32": 4,
    "uint32": 5,
    "int64": 6,
    "float64": 7,
    "uuid": 8,
    "string": 9,
    "bytes": 10,
    "records": 10,
}
K_STRUCT = 11
K_ARRAY = 12

D_CONST, D_LIST, D_CALL = 0, 1, 2
C_NE, C_NOT_NONE, C_LEN = 0, 1, 2

Plan = tuple[Any, ...]


def plan_for(cls: Any, version: int) -> Plan | None:
    """The plan of top-level class ``cls`` at ``version``, or None when out of range."""
    lo, hi = cls.VALID_VERSIONS
    if not lo <= version <= hi:
        return None
    return struct_plan(cls, version, cls.is_flexible(version), ())


def struct_plan(cls: Any, v: int, flexible: bool, stack: tuple[Any, ...]) -> Plan:
    if cls in stack:
        raise ValueError(f"{cls.__name__} contains itself")
    stack = (*stack, cls)
    fields = []
    for f in cls._FIELDS:
        present = f.present(v)
        tagged = present and flexible and f.is_tagged(v)
        if f.flexible_override is None:
            field_flex = flexible
        else:
            lo, hi = f.flexible_override
            field_flex = lo <= v <= hi
        is_array = f.type.startswith("[]")
        elem_type = f.type[2:] if is_array else f.type
        if f.struct is not None:
            elem = K_STRUCT
            sub = struct_plan(f.struct, v, flexible, stack) if present else None
        else:
            elem = KINDS[elem_type]
            sub = None
        kind = K_ARRAY if is_array else elem
        default = f.default()
        if isinstance(default, list):
            dmode, dflt = D_LIST, None
        elif f.struct is not None and default is not None:
            dmode, dflt = D_CALL, f.default
        else:
            dmode, dflt = D_CONST, default
        if is_array or f.type in ("bytes", "records"):
            dcmp = C_NOT_NONE if default is None else C_LEN
        else:
            dcmp = C_NOT_NONE if default is None else C_NE
        fields.append(
            (
                f.attr,
                kind,
                elem if is_array else 0,
                present,
                tagged,
                f.tag if f.tag is not None else 0,
                f.is_nullable(v),
                tagged or field_flex,
                tagged or flexible,
                sub,
                dmode,
                dflt,
                default,
                f.ignorable,
                dcmp,
            )
        )
    invalid = tuple(sorted({f.tag for f in cls._FIELDS if f.tag is not None and not f.is_tagged(v)}))
    return (cls, flexible, tuple(fields), invalid)
