"""Which message codec runs: the compiled C codec or the pure-Python reference.

The generated modules in ``kraft_jbod.messages`` are the codec and its reference.
``_ccodec`` (kraft_jbod/_accel/_ccodec.c, built by ``pip install`` when a C compiler
is there, skipped quietly when not) is an accelerator for the same classes: it walks
plans compiled from the generated field tables (``plans.py``) and, on anything it
does not handle or any bad input, hands the call to the pure-Python method, so the
values, bytes and errors are the reference's by construction.

Selection, once at import of ``kraft_jbod.wire.message`` (which calls :func:`install`):

* ``KRAFT_JBOD_CODEC=auto`` (default): C when the extension imports, else Python;
* ``KRAFT_JBOD_CODEC=c``: C, and an ``ImportError`` naming the cause when it is absent
  (CI uses this so a failed build cannot pass as a green run of the C path);
* ``KRAFT_JBOD_CODEC=python``: the pure-Python codec.

:func:`use` switches at run time (tests run the codec suite under both).

:func:`current` answers "which one runs" without importing the message machinery: before
``kraft_jbod.wire.message`` is imported it returns :func:`choose`, the very function
:func:`install` applies, so ``kraft-jbod --version`` stays light and truthful. This module
imports only ``os`` and ``typing`` at the top (and the extension, a few hundred µs).
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

ENV = "KRAFT_JBOD_CODEC"
BACKENDS = ("c", "python")

# The interface this module expects of the extension (its CCODEC_ABI_VERSION): an
# extension built from another _ccodec.c is not used at all, rather than probed function
# by function.
ABI_VERSION = 4

_c: ModuleType | None
_c_error: str | None
try:
    from kraft_jbod._accel import _ccodec as _c

    _c_error = None
    if getattr(_c, "ABI_VERSION", None) != ABI_VERSION:
        _c_error = (
            f"kraft_jbod/_accel/_ccodec was built from another _ccodec.c "
            f"(interface {getattr(_c, 'ABI_VERSION', 1)}, this package needs {ABI_VERSION})"
        )
        _c = None
except ImportError as exc:  # no compiler at install time, or a source checkout without a build
    _c = None
    _c_error = str(exc)

_message: Any = None
_python: dict[str, Any] = {}
_active = "python"
_records_ready = False
_partitions_ready = False


def available() -> bool:
    """True when the compiled codec was built and imports."""
    return _c is not None


def backend() -> str:
    """``"c"`` or ``"python"``: what ``Message.decode``/``encode`` run now."""
    return _active


def choose() -> str:
    """The backend ``KRAFT_JBOD_CODEC`` and the build select: what :func:`install` applies.

    Raises:
        ImportError: an unknown ``KRAFT_JBOD_CODEC`` value, or ``c`` asked for but the
            extension is not built.
    """
    choice = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if choice not in ("auto", *BACKENDS):
        raise ImportError(f"{ENV}={choice!r}: expected auto, c or python")
    if choice == "python" or (choice == "auto" and _c is None):
        return "python"
    if _c is None:
        raise ImportError(f"the compiled codec is not built ({_c_error}); reinstall with a C compiler")
    return "c"


def current() -> str:
    """``"c"`` or ``"python"``: what runs now, or what will run once the codec is imported.

    Raises:
        ImportError: see :func:`choose` (only before the codec is imported).
    """
    return _active if _message is not None else choose()


def install(message_cls: Any) -> None:
    """Remember the pure-Python methods of ``Message`` and apply ``KRAFT_JBOD_CODEC``."""
    global _message
    _message = message_cls
    for name in ("decode", "read", "encode", "write"):
        _python[name] = message_cls.__dict__[name]
    use(choose())


def use(name: str) -> None:
    """Switch every message class to backend ``name`` (``"c"`` or ``"python"``).

    Raises:
        ImportError: ``"c"`` asked for but the extension is not built.
        ValueError: an unknown backend name.
    """
    global _active
    if name not in BACKENDS:
        raise ValueError(f"unknown codec backend {name!r}; expected one of {BACKENDS}")
    if _message is None:
        raise RuntimeError("kraft_jbod.wire.message has not been imported")
    if name == "c":
        if _c is None:
            raise ImportError(f"the compiled codec is not built ({_c_error}); reinstall with a C compiler")
        import uuid  # here: only the compiled codec needs it, and --version must not

        from kraft_jbod._accel.plans import plan_for

        _c.configure(
            uuid.UUID,
            uuid.SafeUUID.unknown,
            plan_for,
            _python["decode"].__func__,
            _python["read"].__func__,
            _python["encode"],
            _python["write"],
        )
        _message.decode = _c.class_decode
        _message.read = _c.class_read
        _message.encode = _c.encode
        _message.write = _c.write
    else:
        for attr, value in _python.items():
            setattr(_message, attr, value)
    _active = name


def register_record_class(cls: type) -> None:
    """Tell the compiled record framer which class to build (``wire.records.Record``, a
    slotted dataclass whose fields are a v2 record's, in wire order)."""
    global _records_ready
    import dataclasses  # here: loaded anyway by the caller, and --version must stay light

    if _c is not None:
        _c.configure_records(cls, tuple(f.name for f in dataclasses.fields(cls)))
        _records_ready = True


def frame_records(data: bytes, count: int) -> list[Any] | None:
    """The ``count`` records of an uncompressed v2 batch body, framed by the compiled
    codec; None when it is not active or hands the input back (the Python reader then
    runs and returns the records or raises its exact error)."""
    if _active != "c" or not _records_ready:
        return None
    assert _c is not None
    framed: list[Any] | None = _c.frame_records(data, count)
    return framed


def register_partition_class(
    cls: type, record_cls: Any, field_slots: dict[str, str], roles: dict[str, str], frame_prefix: bytes
) -> None:
    """Tell the compiled snapshot loader and writer which class to build and read
    (``controller.image.Partition``) and how ``record_cls`` (PartitionRecord) maps onto it.

    ``field_slots``: the slot each record field fills; ``roles``: the slot of each of
    :data:`plans.PARTITION_ROLES`; ``frame_prefix``: the bytes a framed value of
    ``record_cls`` starts with. The layout itself comes from the record's field plan
    (:func:`plans.partition_program`), one program per version. When ``cls`` has a slot no
    field fills, the compiled path stays off (objects it built would lack it).
    """
    global _partitions_ready
    _partitions_ready = False
    if _c is None:
        return
    from kraft_jbod._accel import plans

    slots = tuple(dict.fromkeys(field_slots.values()))
    if set(slots) != set(getattr(cls, "__slots__", ())):
        return
    lo, hi = record_cls.VALID_VERSIONS
    programs = tuple(
        plans.partition_program(record_cls, v, field_slots, slots) if v >= lo else None for v in range(hi + 1)
    )
    role_slots = tuple(slots.index(roles[r]) for r in plans.PARTITION_ROLES)
    _c.configure_partitions(cls, slots, role_slots, frame_prefix, programs)
    _partitions_ready = True


def build_partitions(
    values: list[bytes],
    start: int,
    topics: dict[bytes, tuple[Any, dict[int, Any]]],
    canon: dict[bytes, Any],
    migrating: Any,
    counts: dict[int, int],
) -> tuple[int, list[Any], list[Any], bool] | None:
    """Snapshot PartitionRecord values into image partitions (see ``_ccodec.c``); None
    when the compiled codec is not active (the caller decodes and applies them)."""
    if _active != "c" or not _partitions_ready:
        return None
    assert _c is not None
    result: tuple[int, list[Any], list[Any], bool] = _c.build_partitions(
        values, start, topics, canon, migrating, counts
    )
    return result


def write_records(records: list[Any]) -> bytes | None:
    """The records section of an uncompressed v2 batch, written by the compiled codec;
    None when it is not active or hands the records back (the Python writer then runs)."""
    if _active != "c" or not _records_ready:
        return None
    assert _c is not None
    written: bytes | None = _c.write_records(records)
    return written


def frame_values(values: list[bytes]) -> bytes | None:
    """The records section of a batch of ``values`` (no keys, no headers, deltas 0..n-1),
    by the compiled codec; None when it is not active."""
    if _active != "c" or not _records_ready:
        return None
    assert _c is not None
    section: bytes | None = _c.frame_values(values)
    return section


def encode_partitions(parts: list[Any], version: int) -> list[bytes] | None:
    """Framed PartitionRecord values for image partitions (the snapshot writer's); None
    when the compiled codec is not active or hands them back."""
    if _active != "c" or not _partitions_ready:
        return None
    assert _c is not None
    values: list[bytes] | None = _c.encode_partitions(parts, version)
    return values


def encode_metadata_values(records: list[Any], prefixes: dict[type, bytes]) -> list[bytes] | None:
    """Framed values of ``(record, version)`` pairs, as ``codec.encode_metadata_record``
    writes each, in one call of the compiled codec (``prefixes``: each record class's frame
    version and record type). None when it is not active or hands the records back (the
    Python path then encodes them or raises its exact error)."""
    if _active != "c":
        return None
    assert _c is not None
    values: list[bytes] | None = _c.encode_metadata_values(records, prefixes)
    return values


def count_prefixed(values: list[bytes], start: int, prefix: bytes) -> int | None:
    """How many of ``values[start:]`` in a row begin with ``prefix``; None when the
    compiled codec is not active."""
    if _active != "c" or not _partitions_ready:
        return None
    assert _c is not None
    count: int = _c.count_prefixed(values, start, prefix)
    return count


def group_replicas(parts: list[Any]) -> list[tuple[int, Any, list[Any]]] | None:
    """Every replica of ``parts`` grouped by (broker, dir object); None when the compiled
    codec is not active."""
    if _active != "c" or not _partitions_ready:
        return None
    assert _c is not None
    groups: list[tuple[int, Any, list[Any]]] = _c.group_replicas(parts)
    return groups


def set_uuid_cache(enabled: bool) -> None:
    """Turn the compiled codec's UUID object cache on or off (off by default; see _ccodec.c).

    Either way the cache is emptied. Benchmarks measure both settings.
    """
    if _c is not None:
        _c.set_uuid_cache(enabled)


def set_lazy_arrays(enabled: bool) -> None:
    """Decode arrays of structs and of uuids on first access (the default) or at once.

    Either way callers see lists and equal values; the setting only moves the work of
    building the elements from the decode to the first read of the array (see _ccodec.c,
    "lazy arrays"). Benchmarks measure both settings.
    """
    if _c is not None:
        _c.set_lazy_arrays(enabled)
