"""Kafka's record compression codecs, by the attribute id in a batch or legacy message.

Ids: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd. The codecs themselves come from cramjam;
this module adds Kafka's framing and the safety rules:

* gzip: one RFC 1952 member on write; reading goes through the gzip decoder as is.
* snappy: written in the xerial block framing Kafka's Java client uses (``\\x82SNAPPY\\x00``,
  int32 version 1, int32 compatible version 1, then blocks of int32 length + raw snappy,
  32 KiB of input per block). Reading accepts that framing or a bare raw snappy block, as
  Kafka's reader does. The xerial version fields are not checked (some producers write them
  little-endian).
* lz4: the LZ4 frame format with independent blocks, no content size and no content checksum
  (what Kafka writes). Kafka's 0.8/0.9 brokers computed the frame header checksum over the
  magic number too; :func:`decompress` accepts that broken checksum as well as the right one,
  and ``compress(..., broken_lz4_checksum=True)`` writes it (Kafka still does, for magic 0).
* zstd: one zstd frame.

Invariants:

* :func:`decompress` raises only :class:`DecodeError`, whatever the input; the codec
  library's errors are wrapped.
* Its output never exceeds ``max_size`` bytes, and it never holds a buffer larger than
  ``max_size`` bytes: decompression writes into a bounded buffer that grows geometrically
  from a small first guess, so a zip bomb costs at most ``max_size`` of memory before it is
  refused. Going past ``max_size`` raises :class:`BudgetExceeded` (a DecodeError): the
  data may be fine, the caller's budget is not.
* :func:`compress` raises only :class:`EncodeError` (unknown codec).
* Without cramjam (a stock Spark worker: compiled libraries do not travel with the
  shipped package) gzip still reads and writes through the standard library's zlib, with
  the same bound; snappy, lz4 and zstd raise :class:`CodecUnavailable` (a DecodeError or
  an EncodeError) naming the missing library, which the capture decoder reports as an
  anomaly of the frame instead of failing the task.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

from kraft_jbod.errors import BudgetExceeded, DecodeError, EncodeError

# cramjam is imported on the first compressed batch, not with this module: its import is a
# measurable part of a short command's start-up (tools/bench/README.md, bench_startup), and
# most frames are not compressed. ``CRAMJAM`` (module attribute, below) says whether it is
# installed.
cramjam: Any = None
_cramjam_looked_up = False

Buffer = bytes | bytearray | memoryview

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODEC_NAMES: dict[int, str] = {
    NONE: "none",
    GZIP: "gzip",
    SNAPPY: "snappy",
    LZ4: "lz4",
    ZSTD: "zstd",
}

DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024
"""Default bound on the decompressed size of one batch (or legacy wrapper message)."""

_FIRST_GUESS = 64 * 1024

_BE_i = struct.Struct(">i")
_BE_ii = struct.Struct(">ii")
_LE_I = struct.Struct("<I")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_XERIAL_BLOCK = 32 * 1024

_LZ4_MAGIC = b"\x04\x22\x4d\x18"

# What cramjam raises on bad input (DecompressionError for nearly everything; the others are
# kept in case a codec reports through the standard I/O error types).
_CODEC_ERRORS: tuple[type[BaseException], ...] = (OSError, ValueError)


def _load_cramjam() -> None:
    """Import cramjam once, if it is installed (see the module docstring for without)."""
    global cramjam, _cramjam_looked_up, _CODEC_ERRORS
    if _cramjam_looked_up:
        return
    _cramjam_looked_up = True
    try:
        import cramjam as lib
    except ImportError:
        return
    cramjam = lib
    _CODEC_ERRORS = (lib.DecompressionError, OSError, ValueError, BufferError)


def __getattr__(name: str) -> Any:
    if name == "CRAMJAM":  # whether cramjam is installed (snappy, lz4 and zstd need it)
        _load_cramjam()
        return cramjam is not None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class CodecUnavailable(DecodeError, EncodeError):
    """A codec whose library is not installed here (cramjam, for snappy, lz4 and zstd)."""

    def __init__(self, codec: str) -> None:
        text = (
            f"{codec} needs the cramjam library, which is not installed here "
            "(pip install cramjam on this machine or worker; see docs/spark.md)"
        )
        DecodeError.__init__(self, text)


def _need_cramjam(codec: str) -> None:
    if cramjam is None:
        raise CodecUnavailable(codec)


def _gzip_zlib(data: Buffer, max_size: int) -> bytes:
    """gzip through the standard library, bounded like :func:`_bounded` (no cramjam)."""
    d = zlib.decompressobj(31)
    try:
        out = d.decompress(bytes(data), max_size + 1)
    except zlib.error as exc:
        raise DecodeError(f"corrupt gzip data: {exc}") from None
    if len(out) > max_size:
        raise BudgetExceeded(f"gzip data decompresses to more than the {max_size}-byte limit")
    if not d.eof:
        raise DecodeError("corrupt gzip data: truncated stream")
    return out


# --- xxHash32, needed only for the one-byte LZ4 frame header checksum -----------------------

_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data``; the LZ4 frame header checksum is ``(xxh32(desc) >> 8) & 0xff``."""
    n = len(data)
    p = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while p + 16 <= n:
            a, b, c, d = struct.unpack_from("<IIII", data, p)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            p += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while p + 4 <= n:
        (k,) = _LE_I.unpack_from(data, p)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        p += 4
    while p < n:
        h = (_rotl((h + data[p] * _P5) & _M32, 11) * _P1) & _M32
        p += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# --- bounded decompression ----------------------------------------------------------------


def _overflowed(exc: BaseException) -> bool:
    # cramjam reports "output buffer too small" with these messages; anything else means the
    # input itself is bad and growing the buffer would not help.
    text = str(exc)
    return "failed to write whole buffer" in text or "smaller than required" in text


def _bounded(
    decoder_into: Callable[[Buffer, bytearray], int],
    data: Buffer,
    max_size: int,
    codec: str,
) -> bytes:
    """Run a cramjam ``decompress_into`` with an output buffer growing up to ``max_size``."""
    size = min(max_size, max(_FIRST_GUESS, 4 * len(data)))
    while True:
        out = bytearray(size)
        try:
            n = decoder_into(data, out)
        except _CODEC_ERRORS as exc:
            del out  # free the small buffer before allocating the bigger one
            if _overflowed(exc):
                if size >= max_size:
                    raise BudgetExceeded(f"{codec} data decompresses to more than the {max_size}-byte limit") from None
                size = min(max_size, size * 4)
                continue
            raise DecodeError(f"corrupt {codec} data: {exc}") from None
        del out[n:]
        return bytes(out)


def _snappy_raw(data: Buffer, max_size: int) -> bytes:
    try:
        need = cramjam.snappy.decompress_raw_len(data)
    except _CODEC_ERRORS as exc:
        raise DecodeError(f"corrupt snappy data: {exc}") from None
    if need > max_size:
        raise BudgetExceeded(f"snappy data decompresses to more than the {max_size}-byte limit")
    out = bytearray(need)
    try:
        n = cramjam.snappy.decompress_raw_into(data, out)
    except _CODEC_ERRORS as exc:
        raise DecodeError(f"corrupt snappy data: {exc}") from None
    if n != need:
        raise DecodeError("corrupt snappy data: length header disagrees with the content")
    return bytes(out)


def _snappy_decompress(data: Buffer, max_size: int) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != _XERIAL_MAGIC or len(mv) < _XERIAL_HEADER_SIZE:
        return _snappy_raw(mv, max_size)
    parts: list[bytes] = []
    total = 0
    p = _XERIAL_HEADER_SIZE
    end = len(mv)
    while p < end:
        if end - p < 4:
            raise DecodeError("xerial snappy block length truncated", offset=p)
        (n,) = _BE_i.unpack_from(mv, p)
        p += 4
        if n < 0 or n > end - p:
            raise DecodeError(f"xerial snappy block length {n} exceeds the data", offset=p - 4)
        block = _snappy_raw(mv[p : p + n], max_size - total)
        total += len(block)
        parts.append(block)
        p += n
    return b"".join(parts)


def _lz4_decompress(data: Buffer, max_size: int) -> bytes:
    mv = memoryview(data)
    if len(mv) >= 7 and bytes(mv[:4]) == _LZ4_MAGIC:
        flg = mv[4]
        hc_pos = 14 if flg & 0x08 else 6  # an 8-byte content size sits before the checksum
        if len(mv) > hc_pos:
            descriptor = bytes(mv[4:hc_pos])
            right = (xxh32(descriptor) >> 8) & 0xFF
            broken = (xxh32(bytes(mv[0:hc_pos])) >> 8) & 0xFF
            if mv[hc_pos] != right and mv[hc_pos] == broken:
                fixed = bytearray(mv)
                fixed[hc_pos] = right
                return _bounded(cramjam.lz4.decompress_into, fixed, max_size, "lz4")
    return _bounded(cramjam.lz4.decompress_into, mv, max_size, "lz4")


def decompress(codec: int, data: Buffer, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress ``data`` written with Kafka codec ``codec``; output is at most ``max_size``.

    Raises DecodeError for an unknown codec, corrupt data or output above ``max_size``.
    """
    if codec == NONE:
        if len(data) > max_size:
            raise BudgetExceeded(f"data larger than the {max_size}-byte limit")
        return bytes(data)
    _load_cramjam()
    if codec == GZIP:
        if cramjam is None:
            return _gzip_zlib(data, max_size)
        return _bounded(cramjam.gzip.decompress_into, data, max_size, "gzip")
    if codec == SNAPPY:
        _need_cramjam("snappy")
        return _snappy_decompress(data, max_size)
    if codec == LZ4:
        _need_cramjam("lz4")
        return _lz4_decompress(data, max_size)
    if codec == ZSTD:
        _need_cramjam("zstd")
        return _bounded(cramjam.zstd.decompress_into, data, max_size, "zstd")
    raise DecodeError(f"unknown compression codec {codec}")


# --- compression --------------------------------------------------------------------------


def _snappy_compress(data: Buffer) -> bytes:
    out = bytearray(_XERIAL_MAGIC)
    out += _BE_ii.pack(1, 1)
    mv = memoryview(data)
    for p in range(0, len(mv), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[p : p + _XERIAL_BLOCK]))
        out += _BE_i.pack(len(block))
        out += block
    return bytes(out)


def _lz4_compress(data: Buffer, broken_checksum: bool) -> bytes:
    comp = cramjam.lz4.Compressor(block_linked=False, content_checksum=False)
    comp.compress(bytes(data))
    frame = bytes(comp.finish())
    if not broken_checksum:
        return frame
    flg = frame[4]
    hc_pos = 14 if flg & 0x08 else 6
    fixed = bytearray(frame)
    fixed[hc_pos] = (xxh32(frame[0:hc_pos]) >> 8) & 0xFF
    return bytes(fixed)


def compress(codec: int, data: Buffer, *, broken_lz4_checksum: bool = False) -> bytes:
    """Compress ``data`` with Kafka codec ``codec`` in the framing Kafka writes.

    ``broken_lz4_checksum`` writes the LZ4 header checksum the way Kafka does for magic-0
    message sets. Raises EncodeError for an unknown codec.
    """
    if codec == NONE:
        return bytes(data)
    _load_cramjam()
    if codec == GZIP:
        if cramjam is None:
            return zlib.compress(bytes(data), wbits=31)
        return bytes(cramjam.gzip.compress(bytes(data)))
    if codec in (SNAPPY, LZ4, ZSTD):
        _need_cramjam(CODEC_NAMES[codec])
    if codec == SNAPPY:
        return _snappy_compress(data)
    if codec == LZ4:
        return _lz4_compress(data, broken_lz4_checksum)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data)))
    raise EncodeError(f"unknown compression codec {codec}")
