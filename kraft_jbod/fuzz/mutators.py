"""Schema-aware mutations of Kafka request frames, aimed at where implementations break.

Strategy:

* :func:`trace` re-encodes a generated message by walking its field table (``_FIELDS``)
  and records a :class:`Site` for every length, count, null marker, tag, tag size and
  fixed-width integer, plus every tagged-field section. The walk's bytes are compared
  with the generated encoder's: if they differ (a schema corner the walk does not know)
  the sites are dropped and only byte-level mutations apply. So a site offset is always
  the offset of real bytes of the real encoding.
* :func:`build_frame` frames a request (header + body) and keeps the sites of both.
* :func:`mutate` applies one structural operator (chosen by weight among those that
  have a site to work on), then sometimes one byte-level operator. Every choice comes
  from the ``random.Random`` it is given, so a mutant is reproducible from its seed.

Operators (``OPERATORS``), each named in the mutant's ``ops``:

* lengths: declared length larger than the frame (the KAFKA-14063 class), negative,
  null where not nullable, huge array counts, overlong and over-wide unsigned varints;
* tagged fields: duplicate, unsorted, unknown, known-but-wrong-version tags, lying tag
  sizes, a tagged section in a non-flexible version;
* headers: header version mismatches, another or out-of-range api version, unknown
  api keys, the KIP-511 ApiVersions path (a version above any server's, garbage body);
* frames: truncation, trailing bytes, lying size prefixes, empty frames, two frames in
  one write;
* bytes: bit flips, interesting byte values, boundary integers in fixed-width fields.

Invariant: the output is only bytes. Whether a server must answer, close or wait is
decided later from those bytes (:func:`split_frames`), never from the operator's name.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraft_jbod import codec, messages
from kraft_jbod.errors import EncodeError
from kraft_jbod.messages.request_header import RequestHeader
from kraft_jbod.wire.message import FieldInfo, Message, Struct

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_FIXED = {
    "bool": (1, ">?"),
    "int8": (1, ">b"),
    "int16": (2, ">h"),
    "uint16": (2, ">H"),
    "int32": (4, ">i"),
    "uint32": (4, ">I"),
    "int64": (8, ">q"),
    "float64": (8, ">d"),
}
_INT_WIDTH = {"int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8}

# Site kinds.
STR16 = "str16"  # int16 string length
LEN32 = "len32"  # int32 bytes/records length
COUNT32 = "count32"  # int32 array count
ULEN = "ulen"  # unsigned varint length+1 (compact string/bytes)
UCOUNT = "ucount"  # unsigned varint count+1 (compact array)
NULL8 = "null8"  # int8 marker of a nullable struct
INT = "int"  # a fixed-width integer field
TAGCOUNT = "tagcount"
TAG = "tag"
TAGSIZE = "tagsize"
LENGTHS = (STR16, LEN32, COUNT32, ULEN, UCOUNT)
UVARINTS = (ULEN, UCOUNT, TAGCOUNT, TAG, TAGSIZE)


@dataclass(frozen=True, slots=True)
class Site:
    """Where one mutable wire element sits in the encoding."""

    kind: str
    offset: int
    width: int
    path: str
    nullable: bool = False
    signed: bool = True  # for INT sites


@dataclass(frozen=True, slots=True)
class TagSection:
    """One tagged-field section: its bytes ``[offset, end)`` and the struct owning it."""

    offset: int
    end: int
    owner: type[Struct]
    version: int
    entries: tuple[tuple[int, bytes], ...]


@dataclass(slots=True)
class Traced:
    """An encoding with its sites; ``exact`` says the walk matched the real encoder."""

    data: bytes
    sites: list[Site] = field(default_factory=list)
    sections: list[TagSection] = field(default_factory=list)
    exact: bool = True

    def shifted(self, by: int) -> tuple[list[Site], list[TagSection]]:
        sites = [Site(s.kind, s.offset + by, s.width, s.path, s.nullable, s.signed) for s in self.sites]
        secs = [TagSection(t.offset + by, t.end + by, t.owner, t.version, t.entries) for t in self.sections]
        return sites, secs


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class _Walker:
    """Writes a struct field by field the way the wire rules say, noting every site."""

    def __init__(self, owner_flexible: Callable[[int], bool]) -> None:
        self.out = bytearray()
        self.sites: list[Site] = []
        self.sections: list[TagSection] = []
        self._flexible = owner_flexible

    def _site(self, kind: str, start: int, path: str, nullable: bool = False, signed: bool = True) -> None:
        self.sites.append(Site(kind, start, len(self.out) - start, path, nullable, signed))

    def struct(self, obj: Any, cls: type[Struct], version: int, path: str) -> None:
        flexible = self._flexible(version)
        tagged: list[tuple[int, FieldInfo, Any]] = []
        for f in cls._FIELDS:
            if not f.present(version):
                continue
            value = getattr(obj, f.attr)
            if flexible and f.is_tagged(version):
                if _tag_written(f, value) and f.tag is not None:
                    tagged.append((f.tag, f, value))
                continue
            self.field(f, value, version, flexible, f"{path}.{f.name}" if path else f.name)
        if flexible:
            self.section(cls, version, tagged, tuple(getattr(obj, "unknown_tagged_fields", ())), path)

    def section(
        self,
        cls: type[Struct],
        version: int,
        tagged: list[tuple[int, FieldInfo, Any]],
        unknown: tuple[tuple[int, bytes], ...],
        path: str,
    ) -> None:
        items: list[tuple[int, bytes, list[Site], list[TagSection]]] = []
        for tag, f, value in tagged:
            sub = _Walker(lambda _v: True)
            if value is None:
                sub.out += b"\x00"
            else:
                sub.field(f, value, version, True, f"{path}.{f.name}" if path else f.name, tagged=True)
            items.append((tag, bytes(sub.out), sub.sites, sub.sections))
        items += [(tag, data, [], []) for tag, data in unknown]
        items.sort(key=lambda t: t[0])
        start = len(self.out)
        s = len(self.out)
        self.out += uvarint(len(items))
        self._site(TAGCOUNT, s, path)
        for tag, data, sites, secs in items:
            s = len(self.out)
            self.out += uvarint(tag)
            self._site(TAG, s, path)
            s = len(self.out)
            self.out += uvarint(len(data))
            self._site(TAGSIZE, s, path)
            base = len(self.out)
            self.out += data
            self.sites += [Site(x.kind, x.offset + base, x.width, x.path, x.nullable, x.signed) for x in sites]
            self.sections += [TagSection(t.offset + base, t.end + base, t.owner, t.version, t.entries) for t in secs]
        self.sections.append(TagSection(start, len(self.out), cls, version, tuple((t, d) for t, d, _s, _x in items)))

    def field(self, f: FieldInfo, value: Any, version: int, flexible: bool, path: str, tagged: bool = False) -> None:
        kind = f.type
        nullable = f.is_nullable(version)
        if kind.startswith("[]"):
            self.array(f, value, version, flexible, path, nullable)
        elif f.struct is not None:
            if nullable and not tagged:
                s = len(self.out)
                self.out += _I8.pack(-1 if value is None else 1)
                self._site(NULL8, s, path, nullable=True)
            elif nullable and tagged:
                self.out += b"\x01"
            if value is not None:
                self.struct(value, f.struct, version, path)
        else:
            fl = flexible
            if f.flexible_override is not None:
                lo, hi = f.flexible_override
                fl = lo <= version <= hi
            self.scalar(kind, value, fl, path, nullable)

    def array(self, f: FieldInfo, value: Any, version: int, flexible: bool, path: str, nullable: bool) -> None:
        s = len(self.out)
        if flexible:
            self.out += uvarint(0 if value is None else len(value) + 1)
            self._site(UCOUNT, s, path, nullable)
        else:
            self.out += _I32.pack(-1 if value is None else len(value))
            self._site(COUNT32, s, path, nullable)
        if value is None:
            return
        for i, item in enumerate(value):
            here = f"{path}[{i}]"
            if f.struct is not None:
                self.struct(item, f.struct, version, here)
            else:
                self.scalar(f.type[2:], item, flexible, here, False)

    def scalar(self, kind: str, value: Any, flexible: bool, path: str, nullable: bool) -> None:
        s = len(self.out)
        if kind in _FIXED:
            fmt = _FIXED[kind][1]
            self.out += struct.pack(fmt, value)
            if kind in _INT_WIDTH:
                self._site(INT, s, path, signed=kind not in ("uint16", "uint32"))
        elif kind == "uuid":
            self.out += value.bytes
        elif kind == "string":
            raw = None if value is None else value.encode("utf-8")
            if flexible:
                self.out += uvarint(0 if raw is None else len(raw) + 1)
                self._site(ULEN, s, path, nullable)
            else:
                self.out += _I16.pack(-1 if raw is None else len(raw))
                self._site(STR16, s, path, nullable)
            self.out += raw or b""
        elif kind in ("bytes", "records"):
            raw = None if value is None else bytes(value)
            if flexible:
                self.out += uvarint(0 if raw is None else len(raw) + 1)
                self._site(ULEN, s, path, nullable)
            else:
                self.out += _I32.pack(-1 if raw is None else len(raw))
                self._site(LEN32, s, path, nullable)
            self.out += raw or b""
        else:
            raise ValueError(f"unknown wire type {kind}")


def _tag_written(f: FieldInfo, value: Any) -> bool:
    default = f.default()
    if value is None:
        return default is not None
    if default is None:
        return True
    if f.type.startswith("[]") or f.type in ("bytes", "records"):
        return len(value) != 0
    return bool(value != default)


def trace(obj: Message, version: int) -> Traced:
    """The encoding of ``obj`` at ``version`` with its sites.

    Raises:
        EncodeError: ``obj`` does not encode at ``version``.
    """
    real = obj.encode(version)
    cls = type(obj)
    walker = _Walker(cls.is_flexible)
    try:
        walker.struct(obj, cls, version, "")
    except (struct.error, ValueError, TypeError, AttributeError, OverflowError):
        return Traced(real, exact=False)
    if bytes(walker.out) != real:
        return Traced(real, exact=False)
    return Traced(real, walker.sites, walker.sections)


def header_version(api_key: int, api_version: int) -> int:
    return codec.request_header_version(api_key, api_version)


def encode_header(api_key: int, api_version: int, corr: int, client_id: str | None, hv: int) -> Traced:
    header = RequestHeader(api_key, api_version, corr, client_id)
    return trace(header, hv)


@dataclass(slots=True)
class Frame:
    """A request payload (no size prefix) and where its pieces are."""

    api_key: int
    api_version: int
    correlation_id: int
    payload: bytes
    header_len: int
    sites: list[Site]
    sections: list[TagSection]
    body: Any = None

    def framed(self) -> bytes:
        return _I32.pack(len(self.payload)) + self.payload


def build_frame(body: Message, api_version: int, corr: int, client_id: str | None = "kraft-jbod-fuzz") -> Frame:
    """Frame ``body`` as a request at ``api_version``, keeping the sites of header and body.

    Raises:
        EncodeError: the body does not encode at that version.
    """
    if body.API_KEY is None:
        raise EncodeError(f"{type(body).__name__} is not a request")
    hv = header_version(body.API_KEY, api_version)
    head = encode_header(body.API_KEY, api_version, corr, client_id, hv)
    traced = trace(body, api_version)
    sites, secs = traced.shifted(len(head.data))
    return Frame(
        body.API_KEY,
        api_version,
        corr,
        head.data + traced.data,
        len(head.data),
        head.sites + sites,
        head.sections + secs,
        body,
    )


# --------------------------------------------------------------------------- operators


@dataclass(slots=True)
class Mutant:
    """Bytes to write on one connection (size prefixes included) and how they were made."""

    data: bytes
    ops: list[str]


class _Ctx:
    """The frame being mutated: payload bytes plus sites still valid (before any shift)."""

    def __init__(self, frame: Frame, rng: random.Random) -> None:
        self.frame = frame
        self.rng = rng
        self.payload = bytearray(frame.payload)
        self.prefix: bytes | None = None  # a lying size prefix, when set
        self.extra: bytes = b""  # bytes after this frame (another frame)


def _replace(ctx: _Ctx, site: Site, new: bytes) -> None:
    ctx.payload[site.offset : site.offset + site.width] = new


def _encode_like(site: Site, value: int) -> bytes:
    if site.kind == STR16:
        return _I16.pack(max(-(1 << 15), min((1 << 15) - 1, value)))
    if site.kind in (LEN32, COUNT32):
        return _I32.pack(max(-(1 << 31), min((1 << 31) - 1, value)))
    if site.kind == NULL8:
        return _I8.pack(max(-128, min(127, value)))
    return uvarint(max(0, min(0xFFFFFFFF, value)))


def _pick(ctx: _Ctx, kinds: tuple[str, ...], pred: Callable[[Site], bool] | None = None) -> Site | None:
    cands = [s for s in ctx.frame.sites if s.kind in kinds and (pred is None or pred(s))]
    return ctx.rng.choice(cands) if cands else None


def op_length_overflow(ctx: _Ctx) -> bool:
    """A declared length or count larger than what the frame holds (KAFKA-14063)."""
    site = _pick(ctx, (*LENGTHS, TAGSIZE, TAGCOUNT))
    if site is None:
        return False
    remaining = len(ctx.payload) - site.offset - site.width
    delta = ctx.rng.choice((1, 2, 9, 1 << 16, 1 << 24, 1 << 30))
    bias = 1 if site.kind in (ULEN, UCOUNT) else 0
    _replace(ctx, site, _encode_like(site, remaining + delta + bias))
    return True


def op_length_negative(ctx: _Ctx) -> bool:
    """Negative lengths: -1 (null) where the field is not nullable, and below -1."""
    site = _pick(ctx, (STR16, LEN32, COUNT32, NULL8))
    if site is None:
        return False
    _replace(ctx, site, _encode_like(site, ctx.rng.choice((-1, -2, -7, -(1 << 31)))))
    return True


def op_null_not_nullable(ctx: _Ctx) -> bool:
    """The null marker in a field whose version does not allow null."""
    site = _pick(ctx, (STR16, LEN32, COUNT32, ULEN, UCOUNT, NULL8), lambda s: not s.nullable)
    if site is None:
        return False
    _replace(ctx, site, _encode_like(site, 0 if site.kind in (ULEN, UCOUNT) else -1))
    return True


def op_huge_count(ctx: _Ctx) -> bool:
    """Array counts that would allocate gigabytes if trusted."""
    site = _pick(ctx, (COUNT32, UCOUNT, TAGCOUNT))
    if site is None:
        return False
    value = ctx.rng.choice((0x7FFFFFFF, 0x10000000, 0xFFFFFFFF, 1 << 20))
    _replace(ctx, site, _encode_like(site, value))
    return True


def op_varint_overlong(ctx: _Ctx) -> bool:
    """Unsigned varints with padding continuation bytes, more than 5 bytes, or over 32 bits."""
    site = _pick(ctx, UVARINTS)
    if site is None:
        return False
    raw = ctx.payload[site.offset : site.offset + site.width]
    value = 0
    for i, b in enumerate(raw):
        value |= (b & 0x7F) << (7 * i)
    style = ctx.rng.choice(("pad5", "pad6", "pad10", "over32", "unterminated"))
    if style == "over32":
        new = b"\xff\xff\xff\xff\x7f"
    elif style == "unterminated":
        new = b"\x80" * ctx.rng.randint(1, 12)
    else:
        total = {"pad5": 5, "pad6": 6, "pad10": 10}[style]
        groups = [(value >> (7 * i)) & 0x7F for i in range(total)]
        new = bytes(g | 0x80 for g in groups[:-1]) + bytes([groups[-1]])
    _replace(ctx, site, new)
    return True


def _rewrite_section(ctx: _Ctx, sec: TagSection, entries: list[tuple[int, bytes]]) -> None:
    out = bytearray(uvarint(len(entries)))
    for tag, data in entries:
        out += uvarint(tag) + uvarint(len(data)) + data
    ctx.payload[sec.offset : sec.end] = out


def op_tags(ctx: _Ctx) -> bool:
    """Duplicate, unsorted, unknown, wrong-version and oversized tags in a tagged section."""
    if not ctx.frame.sections:
        return False
    rng = ctx.rng
    sec = rng.choice(ctx.frame.sections)
    entries = list(sec.entries)
    owner_tags = {f.tag: f for f in sec.owner._FIELDS if f.tag is not None}
    wrong = [t for t, f in owner_tags.items() if not f.is_tagged(sec.version)]
    style = rng.choice(("duplicate", "unsorted", "unknown", "wrong_version", "huge_tag", "size_lie", "garbage_known"))
    if style == "duplicate" and entries:
        entries.append(rng.choice(entries))
        entries.sort(key=lambda t: t[0])
    elif style == "unsorted" and len(entries) >= 2:
        entries.reverse()
    elif style == "unsorted":
        entries += [(9, b"\x01"), (3, b"\x02")]
    elif style == "wrong_version" and wrong:
        entries.append((rng.choice(wrong), rng.randbytes(rng.randint(0, 17))))
    elif style == "huge_tag":
        entries.append((rng.choice((0x7FFFFFFF, 0xFFFFFFFF, 1 << 28)), b"\x00"))
    elif style == "size_lie":
        out = bytearray(uvarint(len(entries) + 1))
        for tag, data in entries:
            out += uvarint(tag) + uvarint(len(data)) + data
        out += uvarint(rng.randint(0, 50)) + uvarint(rng.choice((0x7FFFFFFF, 1 << 20, 200)))
        ctx.payload[sec.offset : sec.end] = out
        return True
    elif style == "garbage_known" and owner_tags:
        entries.append((rng.choice(list(owner_tags)), rng.randbytes(rng.randint(0, 9))))
        entries.sort(key=lambda t: t[0])
    else:
        used = set(owner_tags) | {t for t, _ in entries}
        tag = rng.choice([t for t in range(60) if t not in used] or [1000])
        entries.append((tag, rng.randbytes(rng.randint(0, 9))))
        entries.sort(key=lambda t: t[0])
    _rewrite_section(ctx, sec, entries)
    return True


def op_tags_not_flexible(ctx: _Ctx) -> bool:
    """A tagged section after the body of a version that has none."""
    cls = messages.request_class(ctx.frame.api_key)
    if cls is None or cls.is_flexible(ctx.frame.api_version):
        return False
    ctx.payload += b"\x01" + uvarint(ctx.rng.randint(0, 5)) + b"\x02\xab\xcd"
    return True


def op_header_version(ctx: _Ctx) -> bool:
    """The body after a header of another version (v1 before a flexible body, v2 before a classic one)."""
    f = ctx.frame
    real = header_version(f.api_key, f.api_version)
    other = ctx.rng.choice([v for v in (0, 1, 2) if v != real])
    head = encode_header(f.api_key, f.api_version, f.correlation_id, "fuzz", other).data
    ctx.payload[: f.header_len] = head
    return True


def op_api_version(ctx: _Ctx) -> bool:
    """Another version number over the same body, in or out of the known range."""
    f = ctx.frame
    cls = messages.request_class(f.api_key)
    hi = cls.VALID_VERSIONS[1] if cls is not None else 0
    new = ctx.rng.choice((-1, -32768, 32767, hi + 1, max(0, f.api_version - 1), f.api_version + 1))
    ctx.payload[2:4] = _I16.pack(new)
    return True


def op_api_key(ctx: _Ctx) -> bool:
    """An api key no schema defines."""
    top = max(messages.REQUESTS) + 1
    new = ctx.rng.choice((-1, -32768, 32767, top, top + ctx.rng.randint(0, 500), 4, 5, 6))
    ctx.payload[0:2] = _I16.pack(new)
    return True


def op_kip511(ctx: _Ctx) -> bool:
    """ApiVersions at a version above any server's, with a body the server must not parse."""
    rng = ctx.rng
    version = rng.choice((5, 6, 100, 32767, rng.randint(5, 32767)))
    head = encode_header(18, version, ctx.frame.correlation_id, rng.choice(("fuzz", None, "")), 2).data
    body = rng.choice((b"", b"\x00", rng.randbytes(rng.randint(0, 40)), b"\x05kafka\x04x.y\x00"))
    ctx.payload = bytearray(head + body)
    return True


def op_truncate(ctx: _Ctx) -> bool:
    """A frame that ends early (its size prefix tells the truth about the shorter payload)."""
    if not ctx.payload:
        return False
    del ctx.payload[ctx.rng.randint(0, len(ctx.payload) - 1) :]
    return True


def op_trailing(ctx: _Ctx) -> bool:
    """Bytes after a complete body."""
    ctx.payload += ctx.rng.choice((b"\x00", b"\xff" * 3, ctx.rng.randbytes(ctx.rng.randint(1, 32))))
    return True


def op_bitflip(ctx: _Ctx) -> bool:
    if not ctx.payload:
        return False
    for _ in range(ctx.rng.randint(1, 4)):
        i = ctx.rng.randrange(len(ctx.payload))
        ctx.payload[i] ^= 1 << ctx.rng.randint(0, 7)
    return True


def op_interesting_bytes(ctx: _Ctx) -> bool:
    if not ctx.payload:
        return False
    for _ in range(ctx.rng.randint(1, 3)):
        i = ctx.rng.randrange(len(ctx.payload))
        ctx.payload[i] = ctx.rng.choice((0x00, 0xFF, 0x7F, 0x80, 0x01))
    return True


def op_int_boundary(ctx: _Ctx) -> bool:
    """Well-formed but hostile integers: -1, 0, the extremes of the field's width."""
    site = _pick(ctx, (INT,))
    if site is None:
        return False
    bits = site.width * 8
    if site.signed:
        choices = (-1, 0, 1, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)
        new = ctx.rng.choice(choices).to_bytes(site.width, "big", signed=True)
    else:
        new = ctx.rng.choice((0, 1, (1 << bits) - 1)).to_bytes(site.width, "big")
    _replace(ctx, site, new)
    return True


def op_frame_prefix(ctx: _Ctx) -> bool:
    """A size prefix that lies: longer than the payload sent, negative, tiny or huge."""
    n = len(ctx.payload)
    ctx.prefix = _I32.pack(
        ctx.rng.choice((n + 1, n + 1000, -1, -(1 << 31), 0, 3, 7, 0x7FFFFFFF, 100 * 1024 * 1024 + 1))
    )
    return True


def op_empty_frame(ctx: _Ctx) -> bool:
    ctx.payload = bytearray()
    return True


def op_pipeline(ctx: _Ctx) -> bool:
    """Two frames in one write: this one, then a copy with one byte-level mutation."""
    other = bytearray(ctx.payload)
    if other:
        other[ctx.rng.randrange(len(other))] ^= 0xFF
    ctx.extra = _I32.pack(len(other)) + bytes(other)
    return True


Operator = Callable[[_Ctx], bool]

# name -> (operator, weight). Structural operators dominate: they reach deeper code.
OPERATORS: dict[str, tuple[Operator, int]] = {
    "length_overflow": (op_length_overflow, 10),
    "length_negative": (op_length_negative, 5),
    "null_not_nullable": (op_null_not_nullable, 5),
    "huge_count": (op_huge_count, 5),
    "varint_overlong": (op_varint_overlong, 5),
    "tags": (op_tags, 8),
    "tags_not_flexible": (op_tags_not_flexible, 2),
    "header_version": (op_header_version, 4),
    "api_version": (op_api_version, 4),
    "api_key": (op_api_key, 2),
    "kip511": (op_kip511, 3),
    "truncate": (op_truncate, 6),
    "trailing": (op_trailing, 4),
    "bitflip": (op_bitflip, 6),
    "interesting_bytes": (op_interesting_bytes, 4),
    "int_boundary": (op_int_boundary, 6),
    "frame_prefix": (op_frame_prefix, 3),
    "empty_frame": (op_empty_frame, 1),
    "pipeline": (op_pipeline, 2),
}
_BYTE_LEVEL = ("truncate", "trailing", "bitflip", "interesting_bytes")


def mutate(frame: Frame, rng: random.Random, *, only: str | None = None) -> Mutant:
    """One structural mutation of ``frame`` (sometimes followed by a byte-level one).

    ``only`` forces one operator by name (tests, and users chasing one bug class).

    Raises:
        KeyError: ``only`` names no operator.
    """
    ctx = _Ctx(frame, rng)
    ops: list[str] = []
    if only is not None:
        if OPERATORS[only][0](ctx):
            ops.append(only)
    else:
        names = list(OPERATORS)
        weights = [OPERATORS[n][1] for n in names]
        for _ in range(8):  # an operator may find nothing to work on; try another
            name = rng.choices(names, weights)[0]
            if OPERATORS[name][0](ctx):
                ops.append(name)
                break
        if rng.random() < 0.15:
            name = rng.choice(_BYTE_LEVEL)
            if OPERATORS[name][0](ctx):
                ops.append(name)
    prefix = ctx.prefix if ctx.prefix is not None else _I32.pack(len(ctx.payload))
    return Mutant(prefix + bytes(ctx.payload) + ctx.extra, ops)


# --------------------------------------------------------------------------- reading mutants back


@dataclass(frozen=True, slots=True)
class Split:
    """What a server must do with some bytes: the complete frames, and how the stream ends.

    ``frames`` are the payloads of frames the server receives whole and must answer or
    close on; ``tail`` is ``"clean"`` (nothing after them), ``"partial"`` (an incomplete
    frame: the sender must half-close so the server sees EOF) or ``"invalid"`` (a size
    prefix no server may accept: negative, below a request header, or above ``max_frame``).
    """

    frames: tuple[bytes, ...]
    tail: str


def split_frames(data: bytes, max_frame: int = codec.DEFAULT_MAX_FRAME) -> Split:
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        if len(data) - pos < 4:
            return Split(tuple(frames), "partial")
        (size,) = _I32.unpack_from(data, pos)
        if size < 8 or size > max_frame:
            return Split(tuple(frames), "invalid")
        if pos + 4 + size > len(data):
            return Split(tuple(frames), "partial")
        frames.append(data[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return Split(tuple(frames), "clean")


def describe(data: bytes) -> list[dict[str, Any]]:
    """A JSON-able account of each frame in ``data``: header fields and, when it decodes, the body."""
    out: list[dict[str, Any]] = []
    pos = 0
    while pos + 4 <= len(data):
        (size,) = _I32.unpack_from(data, pos)
        payload = data[pos + 4 : pos + 4 + max(size, 0)]
        entry: dict[str, Any] = {"size_prefix": size, "payload_bytes": len(payload)}
        if len(payload) >= 8:
            key, ver, corr = codec.peek_request(payload)
            entry.update(api_key=key, api_name=codec.api_name(key), api_version=ver, correlation_id=corr)
            try:
                decoded = codec.decode_request(payload)
            except Exception as exc:  # any failure is what we report, never a crash here
                entry["decode_error"] = str(exc)
            else:
                entry["header_version"] = decoded.header_version
                entry["body"] = decoded.body.to_json(ver)
                if decoded.trailing:
                    entry["trailing_hex"] = decoded.trailing.hex()
        out.append(entry)
        if size < 0:
            break
        pos += 4 + size
    if pos < len(data):
        out.append({"tail_hex": data[pos:].hex()})
    return out
