"""Kafka's variable-length integers: zig-zag varint/varlong and unsigned varint.

Three encodings, all seven bits per byte, least-significant group first, high bit set on
every byte but the last:

* ``varint``: a signed int32, zig-zag mapped (``(n << 1) ^ (n >> 31)``), at most 5 bytes.
  Used only inside record batches (record length, offset delta, key/value/header lengths).
* ``varlong``: a signed int64, zig-zag mapped, at most 10 bytes (record timestamp delta).
* ``unsigned varint``: an unsigned 32-bit value, at most 5 bytes (compact lengths, tagged
  fields, the metadata record frame).

Invariants, matching Kafka's ``ByteUtils``:

* Readers accept every encoding Kafka's readers accept, including non-minimal ones (``80 00``
  is 0) and a last byte carrying bits above the type's width (they are dropped, as Java's
  int/long arithmetic drops them). They reject an encoding whose last allowed byte still has
  the continuation bit set with :class:`DecodeError` ``"varint is too long"`` /
  ``"varlong is too long"``, and running out of bytes with :class:`DecodeError`.
* Writers emit the minimal encoding and raise :class:`EncodeError` for values outside the
  type's range, so anything written reads back as the same value.
* Readers are ``(buf, pos) -> (value, new_pos)``; writers append to a caller-owned bytearray.

The one-byte case is by far the most common in record batches, so every function tests for
it first and returns without looping.
"""

from __future__ import annotations

from kraft_jbod.errors import DecodeError, EncodeError

Buffer = bytes | bytearray | memoryview

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_UINT32_LIMIT = 1 << 32
_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1


def _truncated(what: str, pos: int) -> DecodeError:
    return DecodeError(f"{what} truncated: buffer ended inside it", offset=pos)


def read_unsigned_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read an unsigned varint (0 <= value < 2**32) at ``pos``.

    Raises DecodeError if the buffer ends first or a fifth byte has the continuation bit.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
        value = b & 0x7F
        shift = 7
        p = pos + 1
        while True:
            b = buf[p]
            p += 1
            if b < 0x80:
                return (value | (b << shift)) & _MASK32, p
            value |= (b & 0x7F) << shift
            shift += 7
            if shift > 28:
                raise DecodeError("varint is too long", offset=pos)
    except IndexError:
        raise _truncated("unsigned varint", pos) from None


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag signed varint (an int32) at ``pos``.

    Raises DecodeError if the buffer ends first or a fifth byte has the continuation bit.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        value = b & 0x7F
        shift = 7
        p = pos + 1
        while True:
            b = buf[p]
            p += 1
            if b < 0x80:
                value = (value | (b << shift)) & _MASK32
                return (value >> 1) ^ -(value & 1), p
            value |= (b & 0x7F) << shift
            shift += 7
            if shift > 28:
                raise DecodeError("varint is too long", offset=pos)
    except IndexError:
        raise _truncated("varint", pos) from None


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag signed varlong (an int64) at ``pos``.

    Raises DecodeError if the buffer ends first or a tenth byte has the continuation bit.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        value = b & 0x7F
        shift = 7
        p = pos + 1
        while True:
            b = buf[p]
            p += 1
            if b < 0x80:
                value = (value | (b << shift)) & _MASK64
                return (value >> 1) ^ -(value & 1), p
            value |= (b & 0x7F) << shift
            shift += 7
            if shift > 63:
                raise DecodeError("varlong is too long", offset=pos)
    except IndexError:
        raise _truncated("varlong", pos) from None


def _write_groups(out: bytearray, value: int) -> None:
    # value is non-negative and already known to need more than one byte.
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def write_unsigned_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (0 <= value < 2**32) as an unsigned varint.

    Raises EncodeError when the value is out of range.
    """
    if 0 <= value < 0x80:
        out.append(value)
        return
    if not 0 <= value < _UINT32_LIMIT:
        raise EncodeError(f"unsigned varint out of range: {value}")
    _write_groups(out, value)


def write_varint(out: bytearray, value: int) -> None:
    """Append ``value`` (an int32) as a zig-zag varint.

    Raises EncodeError when the value does not fit in an int32.
    """
    if 0 <= value < 0x40:
        out.append(value << 1)
        return
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise EncodeError(f"varint out of int32 range: {value}")
    _write_groups(out, ((value << 1) ^ (value >> 31)) & _MASK32)


def write_varlong(out: bytearray, value: int) -> None:
    """Append ``value`` (an int64) as a zig-zag varlong.

    Raises EncodeError when the value does not fit in an int64.
    """
    if 0 <= value < 0x40:
        out.append(value << 1)
        return
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise EncodeError(f"varlong out of int64 range: {value}")
    _write_groups(out, ((value << 1) ^ (value >> 63)) & _MASK64)


def varint_size(value: int) -> int:
    """Bytes :func:`write_varint` uses for ``value`` (assumed in int32 range)."""
    z = ((value << 1) ^ (value >> 31)) & _MASK32
    return (z.bit_length() + 6) // 7 or 1


def varlong_size(value: int) -> int:
    """Bytes :func:`write_varlong` uses for ``value`` (assumed in int64 range)."""
    z = ((value << 1) ^ (value >> 63)) & _MASK64
    return (z.bit_length() + 6) // 7 or 1


def unsigned_varint_size(value: int) -> int:
    """Bytes :func:`write_unsigned_varint` uses for ``value`` (assumed in range)."""
    return (value.bit_length() + 6) // 7 or 1
