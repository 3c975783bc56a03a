"""Runtime base of the generated message classes.

Every generated struct is a slots class deriving from :class:`Struct`; every
top-level schema (request, response, header, metadata record, data) derives from
:class:`Message`. The generated classes carry their ``__init__``, ``__eq__`` and
``__repr__`` as source (what ``@dataclass(slots=True)`` would build, without building
it at import); ``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass``
still accept them through ``__dataclass_fields__``, built here on first use per class.
The generated module supplies, per class:

* ``_FIELDS``: a tuple of :class:`FieldInfo`, the schema facts of each field in
  wire order. Slow paths (JSON conversion, encode diagnostics, the fuzzer's
  strategies) walk it; the hot paths never do.
* ``_READERS`` / ``_WRITERS`` (messages only): one straight-line function per
  version, compiled by ``tools/codegen``.

Contract: ``decode``/``read`` raise only ``DecodeError``; ``encode``/``write`` raise
only ``EncodeError``.
"""

from __future__ import annotations

import base64
import builtins
import math
import struct
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, TypeVar

from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.wire.primitives import INT_RANGES, uuid_from_base64url, uuid_to_base64url

if TYPE_CHECKING:
    from dataclasses import Field

T = TypeVar("T", bound="Message")


class _Factory:
    """The default of an ``__init__`` argument whose value is built per instance."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


# Typed Any so a generated ``items: list[Item] = DEFAULT_FACTORY`` checks.
DEFAULT_FACTORY: Any = _Factory()


class _DataclassFields:
    """``__dataclass_fields__`` of a generated class, built the first time it is asked for.

    The fields come from a throwaway dataclass with the same names, types and defaults
    (the generated ``_FIELDS`` table), so ``dataclasses`` itself makes them; the result
    is stored on the class, replacing this descriptor there.
    """

    def __get__(self, obj: object, cls: type[Struct]) -> dict[str, Field[Any]]:
        import dataclasses  # here: short commands never need it

        annotations = getattr(cls, "__annotations__", {})
        namespace: dict[str, Any] = {"__module__": cls.__module__, "__qualname__": cls.__qualname__}
        types: dict[str, Any] = {}
        for f in cls._FIELDS:
            types[f.attr] = annotations.get(f.attr, "Any")
            default = f.default()
            if isinstance(default, (list, Struct)):
                namespace[f.attr] = dataclasses.field(default_factory=f.default)
            else:
                namespace[f.attr] = default
        types["unknown_tagged_fields"] = annotations.get("unknown_tagged_fields", "Any")
        namespace["unknown_tagged_fields"] = ()
        namespace["__annotations__"] = types
        shadow: type = dataclasses.dataclass(type(cls.__name__, (), namespace))
        built = {f.name: f for f in dataclasses.fields(shadow)}
        setattr(cls, "__dataclass_fields__", built)  # noqa: B010 (a dunder on purpose)
        return built


class FieldInfo(NamedTuple):
    """Wire facts of one field, as the generator saw them in the schema."""

    name: str  # schema name, e.g. "BrokerId"
    attr: str  # python attribute, e.g. "broker_id"
    type: str  # schema type, e.g. "int32", "[]uuid", "[]Listener"
    versions: tuple[int, int]
    tagged: tuple[int, int] | None
    tag: int | None
    nullable: tuple[int, int] | None
    ignorable: bool
    default: Callable[[], Any]
    struct: builtins.type[Struct] | None
    flexible_override: tuple[int, int] | None

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def is_tagged(self, version: int) -> bool:
        return self.tagged is not None and self.tagged[0] <= version <= self.tagged[1]

    def is_nullable(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]

    @property
    def json_name(self) -> str:
        return self.name[:1].lower() + self.name[1:]


class Struct:
    """Base of every generated struct (array elements, nested and common structs)."""

    __slots__ = ()
    _FIELDS: ClassVar[tuple[FieldInfo, ...]] = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]] = _DataclassFields()  # type: ignore[assignment]
    unknown_tagged_fields: tuple[tuple[int, bytes], ...]

    def to_json(self, version: int) -> dict[str, Any]:
        """The value in the JSON shape of Kafka's generated JSON converters."""
        return _struct_to_json(self, version)

    @classmethod
    def from_json(cls, obj: dict[str, Any], version: int) -> Any:
        """Inverse of :meth:`to_json`; missing fields keep their defaults.

        Raises:
            ValueError: a value of the wrong JSON type.
        """
        return _struct_from_json(cls, obj, version)


class Message(Struct):
    """Base of every generated top-level schema."""

    __slots__ = ()
    NAME: ClassVar[str] = ""
    SCHEMA_TYPE: ClassVar[str] = ""
    API_KEY: ClassVar[int | None] = None
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, -1)
    FLEXIBLE_MIN: ClassVar[int | None] = None
    LATEST_VERSION_UNSTABLE: ClassVar[bool] = False
    DEPRECATED_VERSIONS: ClassVar[tuple[int, int] | None] = None
    _READERS: ClassVar[dict[int, Callable[[Any, int], tuple[Any, int]]]] = {}
    _WRITERS: ClassVar[dict[int, Callable[[Any, bytearray], None]]] = {}

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        return cls.FLEXIBLE_MIN is not None and version >= cls.FLEXIBLE_MIN

    @classmethod
    def read(cls: type[T], buf: bytes | bytearray | memoryview, pos: int, version: int) -> tuple[T, int]:
        """Decode one message at ``buf[pos:]``; returns it and the position after it.

        Raises:
            DecodeError: bad bytes or a version outside ``VALID_VERSIONS``.
        """
        reader = cls._READERS.get(version)
        if reader is None:
            raise DecodeError(
                f"can't read version {version} of {cls.NAME}", api_key=cls.API_KEY, version=version, offset=pos
            )
        try:
            result: tuple[T, int] = reader(buf, pos)
            return result
        except DecodeError as exc:
            raise exc.refine(api_key=cls.API_KEY, version=version, message=cls.NAME) from None
        except (struct.error, IndexError, ValueError, OverflowError, RecursionError) as exc:
            # The generated readers check lengths before reading; reaching here means a
            # reader bug, still reported as a decode failure rather than a crash.
            raise DecodeError(
                f"malformed input: {exc}", api_key=cls.API_KEY, version=version, message=cls.NAME, offset=pos
            ) from None

    @classmethod
    def decode(cls: type[T], data: bytes | bytearray | memoryview, version: int) -> T:
        """Decode a whole buffer; trailing bytes are an error here (see ``read``).

        Raises:
            DecodeError: bad bytes, a bad version, or bytes left over.
        """
        value, pos = cls.read(data, 0, version)
        if pos != len(data):
            raise DecodeError(
                f"{len(data) - pos} trailing bytes after the message",
                api_key=cls.API_KEY,
                version=version,
                message=cls.NAME,
                offset=pos,
            )
        return value

    def write(self, out: bytearray, version: int) -> None:
        """Append the encoding at ``version`` to ``out``.

        Raises:
            EncodeError: a value the wire cannot carry at this version.
        """
        writer = self._WRITERS.get(version)
        if writer is None:
            raise EncodeError(f"can't write version {version} of {self.NAME}")
        mark = len(out)
        try:
            writer(self, out)
        except EncodeError:
            del out[mark:]
            raise
        except (struct.error, TypeError, AttributeError, ValueError, OverflowError) as exc:
            del out[mark:]
            raise EncodeError(f"{self.NAME} v{version}: {diagnose(self, version) or exc}") from None

    def encode(self, version: int) -> bytes:
        out = bytearray()
        self.write(out, version)
        return bytes(out)


# --------------------------------------------------------------------------- diagnostics


def _check_scalar(kind: str, value: Any, path: str) -> str | None:
    if kind in INT_RANGES:
        lo, hi = INT_RANGES[kind]
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{path}: expected int, got {type(value).__name__}"
        if not lo <= value <= hi:
            return f"{path}: {value} out of range for {kind}"
    elif kind == "bool" and not isinstance(value, bool):
        return f"{path}: expected bool, got {type(value).__name__}"
    elif kind == "float64" and not isinstance(value, (int, float)):
        return f"{path}: expected float, got {type(value).__name__}"
    elif kind == "uuid" and not isinstance(value, uuid.UUID):
        return f"{path}: expected uuid.UUID, got {type(value).__name__}"
    elif kind == "string" and value is not None and not isinstance(value, str):
        return f"{path}: expected str, got {type(value).__name__}"
    elif kind in ("bytes", "records") and value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
        return f"{path}: expected bytes, got {type(value).__name__}"
    return None


def diagnose(obj: Struct, version: int, path: str = "") -> str | None:
    """Find the first field whose value the wire cannot carry; a slow path for errors."""
    for f in obj._FIELDS:
        if not f.present(version):
            continue
        here = f"{path}.{f.name}" if path else f.name
        value = getattr(obj, f.attr, None)
        if value is None:
            if not f.is_nullable(version):
                return f"{here}: None in a non-nullable field"
            continue
        elem = f.type[2:] if f.type.startswith("[]") else f.type
        if f.type.startswith("[]"):
            if not isinstance(value, (list, tuple)):
                return f"{here}: expected a list, got {type(value).__name__}"
            for i, item in enumerate(value):
                if f.struct is not None:
                    if not isinstance(item, f.struct):
                        return f"{here}[{i}]: expected {f.struct.__name__}, got {type(item).__name__}"
                    found = diagnose(item, version, f"{here}[{i}]")
                else:
                    if item is None:
                        return f"{here}[{i}]: array elements cannot be null"
                    found = _check_scalar(elem, item, f"{here}[{i}]")
                if found:
                    return found
        elif f.struct is not None:
            if not isinstance(value, f.struct):
                return f"{here}: expected {f.struct.__name__}, got {type(value).__name__}"
            found = diagnose(value, version, here)
            if found:
                return found
        else:
            found = _check_scalar(f.type, value, here)
            if found:
                return found
    return None


# --------------------------------------------------------------------------- JSON


def _scalar_to_json(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "uuid":
        return uuid_to_base64url(value)
    if kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "float64":
        # Kafka's JSON (Jackson) writes non-finite doubles as these strings.
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return float(value)
    return value


def _non_default(f: FieldInfo, value: Any) -> bool:
    default = f.default()
    if f.type.startswith("[]") or f.type in ("bytes", "records"):
        if default is None:
            return value is not None
        return value is None or len(value) != 0
    return bool(value != default)


def _struct_to_json(obj: Struct, version: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in obj._FIELDS:
        if not f.present(version):
            continue
        value = getattr(obj, f.attr)
        if f.is_tagged(version) and not _non_default(f, value):
            continue
        out[f.json_name] = _value_to_json(f, value, version)
    return out


def _value_to_json(f: FieldInfo, value: Any, version: int) -> Any:
    if value is None:
        return None
    if f.type.startswith("[]"):
        if f.struct is not None:
            return [_struct_to_json(v, version) for v in value]
        return [_scalar_to_json(f.type[2:], v) for v in value]
    if f.struct is not None:
        return _struct_to_json(value, version)
    return _scalar_to_json(f.type, value)


def _scalar_from_json(kind: str, value: Any, path: str) -> Any:
    if value is None:
        return None
    if kind == "uuid":
        return uuid_from_base64url(value)
    if kind in ("bytes", "records"):
        return base64.b64decode(value)
    if kind == "float64":
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{path}: expected a JSON boolean")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise ValueError(f"{path}: expected a JSON string")
        return value
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{path}: expected a JSON integer")
    return value


def _struct_from_json(cls: type[Struct], obj: Any, version: int, path: str = "") -> Any:
    if not isinstance(obj, dict):
        raise ValueError(f"{path or cls.__name__}: expected a JSON object")
    inst = cls()
    for f in cls._FIELDS:
        if f.json_name not in obj:
            continue
        here = f"{path}.{f.json_name}" if path else f.json_name
        raw = obj[f.json_name]
        if raw is None:
            value: Any = None
        elif f.type.startswith("[]"):
            if not isinstance(raw, list):
                raise ValueError(f"{here}: expected a JSON array")
            if f.struct is not None:
                value = [_struct_from_json(f.struct, v, version, f"{here}[{i}]") for i, v in enumerate(raw)]
            else:
                value = [_scalar_from_json(f.type[2:], v, here) for v in raw]
        elif f.struct is not None:
            value = _struct_from_json(f.struct, raw, version, here)
        else:
            value = _scalar_from_json(f.type, raw, here)
        setattr(inst, f.attr, value)
    return inst


# The compiled codec (kraft_jbod/_accel) takes over decode/read/encode/write when it is
# built, falling back to the methods above; KRAFT_JBOD_CODEC=python keeps these.
from kraft_jbod._accel import install as _install_codec  # noqa: E402

_install_codec(Message)
