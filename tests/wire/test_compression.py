"""Kafka codecs: round trips, Kafka framing details, garbage input and zip bombs."""

from __future__ import annotations

import struct
import tracemalloc

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.wire.compression import (
    DEFAULT_MAX_DECOMPRESSED,
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    compress,
    decompress,
    xxh32,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
MiB = 1024 * 1024


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=4000) | st.binary(max_size=8).map(lambda b: b * 20000))
@settings(max_examples=40)
def test_round_trip(codec: int, data: bytes) -> None:
    assert decompress(codec, compress(codec, data), DEFAULT_MAX_DECOMPRESSED) == data


@pytest.mark.parametrize("codec", CODECS)
def test_accepts_memoryview_and_bytearray(codec: int) -> None:
    data = b"kafka " * 10000
    packed = compress(codec, memoryview(data))
    assert decompress(codec, bytearray(packed)) == data
    assert decompress(codec, memoryview(packed)) == data


def test_unknown_codec() -> None:
    with pytest.raises(DecodeError):
        decompress(5, b"x")
    with pytest.raises(DecodeError):
        decompress(7, b"")
    with pytest.raises(EncodeError):
        compress(5, b"x")


def test_snappy_xerial_framing_and_blocks() -> None:
    data = bytes(range(256)) * 300  # 76800 bytes: three 32 KiB blocks
    packed = compress(SNAPPY, data)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    p, blocks, out = 16, 0, b""
    while p < len(packed):
        (n,) = struct.unpack_from(">i", packed, p)
        out += bytes(cramjam.snappy.decompress_raw(packed[p + 4 : p + 4 + n]))
        p += 4 + n
        blocks += 1
    assert blocks == 3 and out == data


def test_snappy_raw_block_and_little_endian_xerial_versions_accepted() -> None:
    data = b"plain raw snappy " * 100
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data
    block = bytes(cramjam.snappy.compress_raw(data))
    odd = b"\x82SNAPPY\x00" + struct.pack("<ii", 1, 1) + struct.pack(">i", len(block)) + block
    assert decompress(SNAPPY, odd) == data


def test_snappy_xerial_bad_block_length() -> None:
    block = bytes(cramjam.snappy.compress_raw(b"abc"))
    bad = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", 999) + block
    with pytest.raises(DecodeError):
        decompress(SNAPPY, bad)
    with pytest.raises(DecodeError):
        decompress(SNAPPY, bad[:18])


def test_xxh32_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_frame_is_what_kafka_writes() -> None:
    packed = compress(LZ4, b"x" * 200000)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg = packed[4]
    assert flg >> 6 == 1  # frame version 01
    assert flg & 0x20  # independent blocks: Kafka's reader cannot follow linked blocks
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert packed[6] == (xxh32(packed[4:6]) >> 8) & 0xFF
    assert packed.endswith(b"\x00\x00\x00\x00")


def test_lz4_broken_header_checksum_of_old_kafka() -> None:
    data = b"magic zero lz4 " * 50
    broken = compress(LZ4, data, broken_lz4_checksum=True)
    assert broken[6] == (xxh32(broken[:6]) >> 8) & 0xFF
    assert broken[6] != (xxh32(broken[4:6]) >> 8) & 0xFF
    with pytest.raises(cramjam.DecompressionError):
        cramjam.lz4.decompress(broken)  # a plain LZ4 reader refuses it…
    assert decompress(LZ4, broken) == data  # …Kafka's (and ours) reads it
    wrong = bytearray(broken)
    wrong[6] ^= 0x5A
    with pytest.raises(DecodeError):
        decompress(LZ4, bytes(wrong))


@pytest.mark.parametrize("codec", CODECS)
@given(data=st.binary(max_size=300))
@settings(max_examples=150)
def test_garbage_raises_only_decode_error(codec: int, data: bytes) -> None:
    try:
        out = decompress(codec, data, 1 * MiB)
    except DecodeError:
        return
    assert len(out) <= 1 * MiB


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
@given(data=st.data())
@settings(max_examples=100)
def test_mutated_streams_raise_only_decode_error(codec: int, data: st.DataObject) -> None:
    packed = bytearray(compress(codec, b"some moderately compressible text " * 40))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(packed) - 1))
        packed[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(packed)))
    try:
        decompress(codec, bytes(packed[:cut]), 1 * MiB)
    except DecodeError:
        pass


def _bomb(codec: int) -> tuple[bytes, int]:
    """A small payload that claims about 1 GiB; returns (payload, claimed size)."""
    if codec == SNAPPY:
        # The raw snappy preamble claims 1 GiB of output while the body is tiny.
        claim = 1 << 30
        pre = bytearray()
        v = claim
        while v >= 0x80:
            pre.append((v & 0x7F) | 0x80)
            v >>= 7
        pre.append(v)
        return bytes(pre) + bytes(cramjam.snappy.compress_raw(b"\0" * 1000))[2:], claim
    chunk = compress(codec, b"\0" * (16 * MiB))
    return chunk * 64, 64 * 16 * MiB  # concatenated members/frames decode back to back


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_zip_bomb_refused_under_limit(codec: int) -> None:
    payload, claim = _bomb(codec)
    assert claim >= 1 << 30 and len(payload) < 8 * MiB
    tracemalloc.start()
    try:
        with pytest.raises(DecodeError, match="limit"):
            decompress(codec, payload, 4 * MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # The output buffer never grows past the limit (the payload itself is not traced here).
    assert peak < 4 * MiB + 1 * MiB


def test_zip_bomb_refused_at_default_limit() -> None:
    payload, _ = _bomb(ZSTD)
    with pytest.raises(DecodeError, match="limit"):
        decompress(ZSTD, payload)


def test_xerial_bomb_refused_across_blocks() -> None:
    block = bytes(cramjam.snappy.compress_raw(b"\0" * MiB))
    stream = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    stream += (struct.pack(">i", len(block)) + block) * 20
    assert decompress(SNAPPY, stream, 32 * MiB) == b"\0" * (20 * MiB)
    with pytest.raises(DecodeError, match="limit"):
        decompress(SNAPPY, stream, 8 * MiB)


@pytest.mark.parametrize("codec", CODECS)
def test_exact_limit_is_allowed(codec: int) -> None:
    data = b"ab" * 50000
    assert decompress(codec, compress(codec, data), len(data)) == data
    with pytest.raises(DecodeError):
        decompress(codec, compress(codec, data), len(data) - 1)
