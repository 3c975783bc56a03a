"""Every binary layout the capture layer reads, declared once with ``construct``.

Strategy: each file block (pcap global and record headers, pcapng block header, SHB,
IDB, EPB/PB, options) and each packet header (Ethernet, Linux cooked v1/v2, IPv4, IPv6,
TCP) is a ``construct.Struct`` below, written in one byte order (the network order for
packet headers, little-endian for file blocks, whose order the file's magic chooses).
The file-level blocks are parsed with the *compiled* construct (:func:`compiled`): they
are read once per file or per interface, where its cost is nothing. The per-packet and
per-record paths unpack with a :class:`struct.Struct` whose format :func:`struct_of`
derives from the same declaration (construct's compiled parser builds a ``Container``
per call and measured several times slower per packet than ``unpack_from``; see
docs/capture.md), so the layout still has one home and the hot path keeps its speed.

Invariant: a declaration holds only fixed-size integer fields and ``Padding``, so its
derived format has exactly its ``sizeof()`` and unpacks its named fields in order.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Any, Final

import construct as c

__all__ = [
    "ETHERNET",
    "ETHERTYPE_IPV4",
    "IPV4",
    "IPV6",
    "LINUX_SLL",
    "LINUX_SLL2",
    "PCAPNG_BLOCK",
    "PCAPNG_EPB",
    "PCAPNG_IDB",
    "PCAPNG_OPTION",
    "PCAPNG_SHB",
    "PCAP_GLOBAL",
    "PCAP_RECORD",
    "TCP",
    "TCP_OVER_IPV4_KEY",
    "compiled",
    "struct_of",
]

# --------------------------------------------------------------------------- files

#: Classic pcap file header (after which come records).
PCAP_GLOBAL: Final = c.Struct(
    "magic" / c.Int32ul,
    "version_major" / c.Int16ul,
    "version_minor" / c.Int16ul,
    "thiszone" / c.Int32sl,
    "sigfigs" / c.Int32ul,
    "snaplen" / c.Int32ul,
    "network" / c.Int32ul,
)
#: Classic pcap record header; ``ts_frac`` is µs or ns per the magic.
PCAP_RECORD: Final = c.Struct(
    "ts_sec" / c.Int32ul, "ts_frac" / c.Int32ul, "incl_len" / c.Int32ul, "orig_len" / c.Int32ul
)
#: Every pcapng block starts with its type and total length (repeated in its trailer).
PCAPNG_BLOCK: Final = c.Struct("type" / c.Int32ul, "length" / c.Int32ul)
#: Section header block body after the block header.
PCAPNG_SHB: Final = c.Struct(
    "byte_order_magic" / c.Int32ul,
    "version_major" / c.Int16ul,
    "version_minor" / c.Int16ul,
    "section_length" / c.Int64sl,
)
#: Interface description block body after the block header (options follow).
PCAPNG_IDB: Final = c.Struct("linktype" / c.Int16ul, c.Padding(2), "snaplen" / c.Int32ul)
#: Enhanced packet block body after the block header (the obsolete PB has the same
#: layout with a 16-bit interface id and a drops count in the first 4 bytes).
PCAPNG_EPB: Final = c.Struct(
    "interface_id" / c.Int32ul,
    "ts_high" / c.Int32ul,
    "ts_low" / c.Int32ul,
    "captured_len" / c.Int32ul,
    "original_len" / c.Int32ul,
)
#: An option's code and value length (the value is padded to 32 bits).
PCAPNG_OPTION: Final = c.Struct("code" / c.Int16ul, "length" / c.Int16ul)

# --------------------------------------------------------------------------- packets

ETHERTYPE_IPV4: Final = b"\x08\x00"
#: The IPv4 protocol number of TCP, as the raw byte a fast path compares.
TCP_OVER_IPV4_KEY: Final = 6

#: Ethernet II: destination and source MACs (skipped), then the ethertype.
ETHERNET: Final = c.Struct(c.Padding(12), "ethertype" / c.Int16ub)
LINUX_SLL: Final = c.Struct(
    "packet_type" / c.Int16ub, "arphrd" / c.Int16ub, "addr_len" / c.Int16ub, c.Padding(8), "protocol" / c.Int16ub
)
LINUX_SLL2: Final = c.Struct(
    "protocol" / c.Int16ub,
    c.Padding(2),
    "ifindex" / c.Int32ub,
    "arphrd" / c.Int16ub,
    "packet_type" / c.Int8ub,
    "addr_len" / c.Int8ub,
    c.Padding(8),
)
#: The fields the decoder needs of the fixed 20-byte IPv4 header (addresses are sliced).
IPV4: Final = c.Struct(
    "version_ihl" / c.Int8ub,
    c.Padding(1),
    "total_length" / c.Int16ub,
    c.Padding(2),
    "flags_fragment" / c.Int16ub,
    c.Padding(1),
    "protocol" / c.Int8ub,
    c.Padding(10),
)
#: The fixed 40-byte IPv6 header's payload length and next header (addresses are sliced).
IPV6: Final = c.Struct(c.Padding(4), "payload_length" / c.Int16ub, "next_header" / c.Int8ub, c.Padding(33))
#: The fixed 20-byte TCP header up to the flags.
TCP: Final = c.Struct(
    "sport" / c.Int16ub,
    "dport" / c.Int16ub,
    "seq" / c.Int32ub,
    "ack" / c.Int32ub,
    "data_offset" / c.Int8ub,
    "flags" / c.Int8ub,
    c.Padding(6),
)


@cache
def struct_of(con: Any, endian: str = "") -> struct.Struct:
    """The :class:`struct.Struct` unpacking ``con``'s named fields in order (``Padding``
    becomes pad bytes). ``endian`` ``"<"`` or ``">"`` overrides the declared order (pcap
    and pcapng files choose theirs by their magic); empty keeps it.

    Raises:
        TypeError: ``con`` holds something other than fixed-size integers and padding.
    """
    parts: list[str] = []
    order = ""
    for sc in con.subcons:
        inner = getattr(sc, "subcon", sc)
        if isinstance(inner, c.FormatField):
            order = order or inner.fmtstr[0]
            parts.append(inner.fmtstr[1:])
        elif isinstance(sc, c.Padded):
            parts.append(f"{sc.length}x")
        else:
            raise TypeError(f"{type(inner).__name__} has no struct format")
    fmt = (endian or order) + "".join(parts)
    out = struct.Struct(fmt)
    if out.size != con.sizeof():
        raise TypeError(f"derived format {fmt!r} is {out.size} bytes, the declaration {con.sizeof()}")
    return out


@cache
def compiled(con: Any, big_endian: bool = False) -> Any:
    """``con`` compiled (construct's code generation), in the declared byte order or,
    with ``big_endian``, with every little-endian integer made big-endian."""
    if big_endian:
        con = c.Struct(*(_swap(sc) for sc in con.subcons))
    return con.compile()


def _swap(sc: Any) -> Any:
    inner = getattr(sc, "subcon", None)
    if isinstance(inner, c.FormatField) and inner.fmtstr[0] == "<":
        return sc.name / c.FormatField(">", inner.fmtstr[1:])
    return sc
