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


# The snapshot loader and writer of _ccodec.c (build_partitions, encode_partitions) run
# PartitionRecord values by a program per record version: the plan's fields in wire order,
# each an operation on one slot of the image's partition class. The operations are the
# few field shapes the record uses; a schema that adds a field of another shape, or one
# the image has no slot for, gets no program for that version (the Python path runs).
OP_I8, OP_I32, OP_UUID, OP_I32S, OP_UUIDS = range(5)
_OPS = {
    (KINDS["int8"], 0): OP_I8,
    (KINDS["int32"], 0): OP_I32,
    (KINDS["uuid"], 0): OP_UUID,
    (K_ARRAY, KINDS["int32"]): OP_I32S,
    (K_ARRAY, KINDS["uuid"]): OP_UUIDS,
}
# The slots the compiled loader gives a meaning to, in the order _ccodec.c numbers them:
# the topic id (looked up in the image), the partition id (the key in the topic's
# partitions), the replicas, their dirs (made canonical objects) and the leader (counted).
PARTITION_ROLES = ("topic", "partition", "replicas", "dirs", "leader")

# step = (op, slot index, present, tagged, tag, nullable, default | None)
Step = tuple[int, int, bool, bool, int, bool, Any]


def partition_program(
    record_cls: Any, version: int, field_slots: dict[str, str], slots: tuple[str, ...]
) -> tuple[Step, ...] | None:
    """The program of ``record_cls`` at ``version`` over ``slots``; None when a field on the
    wire has no slot or no operation, or a slot is filled by no field."""
    plan = plan_for(record_cls, version)
    if plan is None:
        return None
    wire: list[Step] = []
    tagged: list[Step] = []
    for field in plan[2]:
        attr, kind, elem, present, is_tagged, tag, nullable = field[:7]
        slot = field_slots.get(attr)
        op = _OPS.get((kind, elem))
        if slot is None or op is None:
            if present:
                return None
            continue
        default = field[12]  # the field's default value (what an absent field reads as)
        if op in (OP_UUID, OP_UUIDS):
            default = None  # the topic and dirs are filled by their roles
        elif op == OP_I32S:
            default = ()  # a partition holds tuples, never None
        step = (op, slots.index(slot), present, is_tagged, tag, nullable, default)
        (tagged if is_tagged else wire).append(step)
    if {slots[s[1]] for s in wire + tagged} != set(slots):
        return None
    return (*wire, *sorted(tagged, key=lambda s: s[4]))
