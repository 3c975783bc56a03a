"""Primitive readers and writers for Kafka message bodies.

Strategy: the generated codecs in ``kraft_jbod.messages`` inline fixed-width fields
as grouped ``struct`` calls and call into this module only for variable-length
values (strings, bytes, arrays, unsigned varints, tagged-field sections).

Invariants every reader keeps:

* Readers have the shape ``(buf, pos, field) -> (value, new_pos)``; ``field`` is the
  schema path of what is being read and is only used to build a ``DecodeError``.
* A declared length is compared with the bytes that remain *before* anything is
  sliced or allocated, so a hostile 2 GiB length costs nothing.
* The only exception a reader raises is ``DecodeError``.

Writers append to a caller-owned ``bytearray`` and raise ``EncodeError`` for values
the wire cannot carry (an over-long string, an out-of-range varint).
"""

from __future__ import annotations

import base64
import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.wire.varint import read_unsigned_varint, write_unsigned_varint

Buffer = bytes | bytearray | memoryview

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

MAX_CLASSIC_STRING = 0x7FFF

# Inclusive value ranges of the schema's integer types.
INT_RANGES: dict[str, tuple[int, int]] = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}

# --------------------------------------------------------------------------- uuids

_UUID_NEW = object.__new__
_UUID_SET = object.__setattr__
_SAFE_UNKNOWN = uuid.SafeUUID.unknown


_UUID_CACHE: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_MAX = 65536


def uuid_from_bytes(raw: bytes | bytearray | memoryview) -> uuid.UUID:
    """Build a UUID from 16 big-endian bytes without ``uuid.UUID``'s validation cost.

    Topic and directory ids repeat across a message and across messages, and UUIDs are
    immutable, so a bounded cache hands back the same object for the same bytes.
    """
    key = bytes(raw)
    u = _UUID_CACHE.get(key)
    if u is None:
        u = _UUID_NEW(uuid.UUID)
        _UUID_SET(u, "int", int.from_bytes(key, "big"))
        _UUID_SET(u, "is_safe", _SAFE_UNKNOWN)
        if len(_UUID_CACHE) >= _UUID_CACHE_MAX:
            _UUID_CACHE.clear()
        _UUID_CACHE[key] = u
    return u


ZERO_UUID = uuid_from_bytes(bytes(16))

# Reserved directory ids (Kafka's DirectoryId): the low UUIDs never name a real disk.
MIGRATING_DIRECTORY = uuid.UUID(int=0)
UNASSIGNED_DIRECTORY = uuid.UUID(int=1)
LOST_DIRECTORY = uuid.UUID(int=2)


def is_reserved_directory_id(u: uuid.UUID) -> bool:
    """Kafka's reserved directory range: msb == 0 and the lsb, read as a signed long, < 100.

    The signed read matters: msb 0 with the top lsb bit set is negative, hence reserved.
    """
    msb, lsb = uuid_signed_key(u)
    return msb == 0 and lsb < 100


def uuid_to_base64url(u: uuid.UUID) -> str:
    """Kafka's string form of a UUID: base64url of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode("ascii")


def uuid_from_base64url(text: str) -> uuid.UUID:
    """Parse Kafka's 22-character base64url UUID form.

    Raises:
        ValueError: the text is not 16 bytes of base64url.
    """
    if len(text) != 22:
        raise ValueError(f"a Kafka uuid is 22 base64url characters, got {len(text)}: {text!r}")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not base64url: {text!r}") from exc
    if len(raw) != 16:
        raise ValueError(f"not a 16-byte uuid: {text!r}")
    return uuid_from_bytes(raw)


def uuid_signed_key(u: uuid.UUID) -> tuple[int, int]:
    """Sort key matching Kafka's ``Uuid.compareTo``: signed (msb, lsb)."""
    msb, lsb = u.int >> 64, u.int & 0xFFFFFFFFFFFFFFFF
    if msb >= 1 << 63:
        msb -= 1 << 64
    if lsb >= 1 << 63:
        lsb -= 1 << 64
    return msb, lsb


# --------------------------------------------------------------------------- errors


def short_read(pos: int, need: int, have: int, field: str) -> DecodeError:
    return DecodeError(f"need {need} bytes, {max(have - pos, 0)} remain", offset=pos, field_path=field)


def short_fixed(pos: int, buf_len: int, layout: Sequence[tuple[str, int]]) -> DecodeError:
    """Name the exact field of a grouped fixed-width read that ran past the end."""
    at = pos
    for name, width in layout:
        if at + width > buf_len:
            return short_read(at, width, buf_len, name)
        at += width
    return short_read(pos, at - pos, buf_len, layout[0][0] if layout else "")


# --------------------------------------------------------------------------- varints


def read_uvarint(buf: Buffer, pos: int, field: str) -> tuple[int, int]:
    """Kafka's ``readUnsignedVarint`` (``wire.varint``) with the field named on failure.

    At most 5 bytes; like Kafka, bits above 32 in the fifth byte are dropped, and the
    callers' length checks then refuse what such a value claims.
    """
    try:
        return read_unsigned_varint(buf, pos)
    except DecodeError as exc:
        raise exc.refine(field=field) from None


# One implementation of the unsigned varint writer serves message bodies and records.
write_uvarint = write_unsigned_varint


# --------------------------------------------------------------------------- strings


def _utf8(buf: Buffer, pos: int, n: int, field: str) -> str:
    try:
        return str(buf[pos : pos + n], "utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"invalid UTF-8: {exc.reason}", offset=pos, field_path=field) from None


def read_string(buf: Buffer, pos: int, field: str) -> tuple[str, int]:
    """Classic non-nullable string: int16 length then UTF-8."""
    end = len(buf)
    if pos + 2 > end:
        raise short_read(pos, 2, end, field)
    n = (buf[pos] << 8) | buf[pos + 1]
    if n >= 0x8000:
        raise DecodeError("non-nullable field was serialized as null", offset=pos, field_path=field)
    pos += 2
    if pos + n > end:
        raise short_read(pos, n, end, field)
    return _utf8(buf, pos, n, field), pos + n


def read_nullable_string(buf: Buffer, pos: int, field: str) -> tuple[str | None, int]:
    end = len(buf)
    if pos + 2 > end:
        raise short_read(pos, 2, end, field)
    n = (buf[pos] << 8) | buf[pos + 1]
    pos += 2
    if n >= 0x8000:
        if n == 0xFFFF:
            return None, pos
        raise DecodeError(f"negative string length {n - 0x10000}", offset=pos - 2, field_path=field)
    if pos + n > end:
        raise short_read(pos, n, end, field)
    return _utf8(buf, pos, n, field), pos + n


def read_compact_string(buf: Buffer, pos: int, field: str) -> tuple[str, int]:
    end = len(buf)
    if pos < end and buf[pos] < 0x80:
        n = buf[pos]
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos, field)
    if n == 0:
        raise DecodeError("non-nullable field was serialized as null", offset=pos - 1, field_path=field)
    n -= 1
    if n > MAX_CLASSIC_STRING:
        raise DecodeError(f"string length {n} exceeds 32767", offset=pos, field_path=field)
    if pos + n > end:
        raise short_read(pos, n, end, field)
    return _utf8(buf, pos, n, field), pos + n


def read_nullable_compact_string(buf: Buffer, pos: int, field: str) -> tuple[str | None, int]:
    end = len(buf)
    if pos < end and buf[pos] < 0x80:
        n = buf[pos]
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos, field)
    if n == 0:
        return None, pos
    n -= 1
    if n > MAX_CLASSIC_STRING:
        raise DecodeError(f"string length {n} exceeds 32767", offset=pos, field_path=field)
    if pos + n > end:
        raise short_read(pos, n, end, field)
    return _utf8(buf, pos, n, field), pos + n


def _encode_utf8(value: str, field: str) -> bytes:
    if not isinstance(value, str):
        raise EncodeError(f"expected str, got {type(value).__name__}", field_path=field)
    raw = value.encode("utf-8")
    if len(raw) > MAX_CLASSIC_STRING:
        raise EncodeError(f"string of {len(raw)} bytes exceeds 32767", field_path=field)
    return raw


def write_string(out: bytearray, value: str | None, field: str) -> None:
    if value is None:
        out += b"\xff\xff"
        return
    raw = _encode_utf8(value, field)
    out += INT16.pack(len(raw))
    out += raw


def write_compact_string(out: bytearray, value: str | None, field: str) -> None:
    if value is None:
        out.append(0)
        return
    raw = _encode_utf8(value, field)
    n = len(raw) + 1
    if n < 0x80:
        out.append(n)
    else:
        write_uvarint(out, n)
    out += raw


# --------------------------------------------------------------------------- bytes


def read_bytes(buf: Buffer, pos: int, field: str) -> tuple[bytes, int]:
    end = len(buf)
    if pos + 4 > end:
        raise short_read(pos, 4, end, field)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        raise DecodeError("non-nullable field was serialized as null", offset=pos - 4, field_path=field)
    if pos + n > end:
        raise short_read(pos, n, end, field)
    return bytes(buf[pos : pos + n]), pos + n


def read_nullable_bytes(buf: Buffer, pos: int, field: str) -> tuple[bytes | None, int]:
    end = len(buf)
    if pos + 4 > end:
        raise short_read(pos, 4, end, field)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return None, pos
        raise DecodeError(f"negative bytes length {n}", offset=pos - 4, field_path=field)
    if pos + n > end:
        raise short_read(pos, n, end, field)
    return bytes(buf[pos : pos + n]), pos + n


def read_compact_bytes(buf: Buffer, pos: int, field: str) -> tuple[bytes, int]:
    n, pos = read_uvarint(buf, pos, field)
    if n == 0:
        raise DecodeError("non-nullable field was serialized as null", offset=pos - 1, field_path=field)
    n -= 1
    end = len(buf)
    if pos + n > end:
        raise short_read(pos, n, end, field)
    return bytes(buf[pos : pos + n]), pos + n


def read_nullable_compact_bytes(buf: Buffer, pos: int, field: str) -> tuple[bytes | None, int]:
    n, pos = read_uvarint(buf, pos, field)
    if n == 0:
        return None, pos
    n -= 1
    end = len(buf)
    if pos + n > end:
        raise short_read(pos, n, end, field)
    return bytes(buf[pos : pos + n]), pos + n


def _check_bytes(value: object, field: str) -> bytes | bytearray | memoryview:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise EncodeError(f"expected bytes, got {type(value).__name__}", field_path=field)
    return value


def write_bytes(out: bytearray, value: bytes | None, field: str) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
        return
    raw = _check_bytes(value, field)
    out += INT32.pack(len(raw))
    out += raw


def write_compact_bytes(out: bytearray, value: bytes | None, field: str) -> None:
    if value is None:
        out.append(0)
        return
    raw = _check_bytes(value, field)
    write_uvarint(out, len(raw) + 1)
    out += raw


# --------------------------------------------------------------------------- arrays


def read_array_len(buf: Buffer, pos: int, field: str) -> tuple[int, int]:
    """Classic non-nullable array count, checked against the bytes that remain."""
    end = len(buf)
    if pos + 4 > end:
        raise short_read(pos, 4, end, field)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        raise DecodeError("non-nullable field was serialized as null", offset=pos - 4, field_path=field)
    if n > end - pos:
        raise DecodeError(f"array of {n} elements but only {end - pos} bytes remain", offset=pos - 4, field_path=field)
    return n, pos


def read_nullable_array_len(buf: Buffer, pos: int, field: str) -> tuple[int, int]:
    """Classic nullable array count; -1 means null."""
    end = len(buf)
    if pos + 4 > end:
        raise short_read(pos, 4, end, field)
    (n,) = INT32.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        if n == -1:
            return -1, pos
        raise DecodeError(f"negative array length {n}", offset=pos - 4, field_path=field)
    if n > end - pos:
        raise DecodeError(f"array of {n} elements but only {end - pos} bytes remain", offset=pos - 4, field_path=field)
    return n, pos


def read_compact_array_len(buf: Buffer, pos: int, field: str) -> tuple[int, int]:
    end = len(buf)
    if pos < end and buf[pos] < 0x80:
        n = buf[pos]
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos, field)
    if n == 0:
        raise DecodeError("non-nullable field was serialized as null", offset=pos - 1, field_path=field)
    n -= 1
    if n > end - pos:
        raise DecodeError(f"array of {n} elements but only {end - pos} bytes remain", offset=pos, field_path=field)
    return n, pos


def read_nullable_compact_array_len(buf: Buffer, pos: int, field: str) -> tuple[int, int]:
    end = len(buf)
    if pos < end and buf[pos] < 0x80:
        n = buf[pos]
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos, field)
    if n == 0:
        return -1, pos
    n -= 1
    if n > end - pos:
        raise DecodeError(f"array of {n} elements but only {end - pos} bytes remain", offset=pos, field_path=field)
    return n, pos


def write_array_len(out: bytearray, value: Sequence[object] | None, field: str) -> None:
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        out += INT32.pack(len(value))


def write_compact_array_len(out: bytearray, value: Sequence[object] | None, field: str) -> None:
    if value is None:
        out.append(0)
    else:
        n = len(value) + 1
        if n < 0x80:
            out.append(n)
        else:
            write_uvarint(out, n)


_ARRAY_STRUCTS: dict[tuple[str, int], struct.Struct] = {}
_SMALL_ARRAY_TABLES: dict[str, list[struct.Struct]] = {}


def array_structs(code: str, count: int = 32) -> list[struct.Struct]:
    """``Struct(">{n}{code}")`` for n < count, shared by every generated module."""
    table = _SMALL_ARRAY_TABLES.get(code)
    if table is None or len(table) < count:
        table = _SMALL_ARRAY_TABLES[code] = [struct.Struct(f">{n}{code}") for n in range(count)]
    return table


def read_fixed_array(buf: Buffer, pos: int, count: int, code: str, field: str) -> tuple[list[Any], int]:
    """``count`` fixed-width values (``code`` is a struct letter) in one precompiled unpack."""
    fmt = _ARRAY_STRUCTS.get((code, count))
    if fmt is None:
        fmt = struct.Struct(f">{count}{code}")
        if count < 256:
            _ARRAY_STRUCTS[(code, count)] = fmt
    end = len(buf)
    if pos + fmt.size > end:
        raise short_read(pos, fmt.size, end, field)
    return list(fmt.unpack_from(buf, pos)), pos + fmt.size


def read_uuid_array(buf: Buffer, pos: int, count: int, field: str) -> tuple[list[uuid.UUID], int]:
    need = count * 16
    end = len(buf)
    if pos + need > end:
        raise short_read(pos, need, end, field)
    out = [uuid_from_bytes(buf[p : p + 16]) for p in range(pos, pos + need, 16)]
    return out, pos + need


# --------------------------------------------------------------------------- tagged fields


def read_tag_header(buf: Buffer, pos: int, field: str) -> tuple[int, int, int]:
    """Read ``tag`` and ``size`` of one tagged field; checks size against what remains."""
    tag, pos = read_uvarint(buf, pos, field)
    size, pos = read_uvarint(buf, pos, field)
    if pos + size > len(buf):
        raise short_read(pos, size, len(buf), f"{field}[tag {tag}]")
    return tag, size, pos


def read_tag_count(buf: Buffer, pos: int, field: str) -> tuple[int, int]:
    end = len(buf)
    if pos < end and buf[pos] < 0x80:
        return buf[pos], pos + 1
    n, pos = read_uvarint(buf, pos, field)
    # Every tagged field costs at least two bytes (tag and size).
    if n > (end - pos) // 2:
        raise DecodeError(f"{n} tagged fields cannot fit in {end - pos} bytes", offset=pos, field_path=field)
    return n, pos


def write_tagged_section(
    out: bytearray,
    known: Sequence[tuple[int, bytes | bytearray]],
    unknown: Iterable[tuple[int, bytes]],
    field: str,
) -> None:
    """Write known and preserved unknown tagged fields merged in ascending tag order.

    ``known`` must already be ascending (the generator emits it that way). An
    unknown tag equal to a known one is refused, as Kafka's raw-tag writer does.
    """
    merged: list[tuple[int, bytes | bytearray]] = list(known)
    unknown_list = sorted(unknown, key=lambda t: t[0])
    if unknown_list:
        known_tags = {t for t, _ in known}
        for tag, _ in unknown_list:
            if tag in known_tags:
                raise EncodeError(f"unknown tagged field {tag} collides with a known tag", field_path=field)
        merged.extend(unknown_list)
        merged.sort(key=lambda t: t[0])
    write_uvarint(out, len(merged))
    for tag, data in merged:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
