"""Every binary layout the capture layer reads, declared once.

Strategy: each file block (pcap global and record headers, pcapng block header, SHB,
IDB, EPB/PB, options) and each packet header (Ethernet, Linux cooked v1/v2, IPv4, IPv6,
TCP) is a :class:`Layout` below: its named fixed-size integer fields and pad bytes in one
byte order (the network order for packet headers, little-endian for file blocks, whose
order the file's magic chooses). Every reader unpacks with the :class:`struct.Struct`
that :func:`struct_of` derives from a declaration, per packet as per file, so a layout
has one home and the hot path costs one ``unpack_from``. :func:`parse` names the fields
of a block read once per file or per interface.

Why not a declarative parsing library: these are fixed-size integer headers, which
``struct`` reads directly, and such a library cost a one-frame ``decode`` about 30 ms of
imports, an eighth of its start-up (tools/bench/README.md, bench_startup).

Invariant: a declaration holds only fixed-size integer fields and pad bytes, so its
format's size is the header's and it unpacks its named fields in order.
"""

from __future__ import annotations

import struct
from functools import cache
from typing import Final

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
    "Layout",
    "parse",
    "struct_of",
]

_INT_CODES: Final = frozenset("bBhHiIqQ")


class Layout:
    """A fixed-size header: ``(name, struct code)`` fields in order, in byte order
    ``order`` (``"<"`` or ``">"``); a field named ``""`` with code ``"Nx"`` is N pad bytes.

    Raises:
        TypeError: a field is neither a fixed-size integer nor padding.
    """

    __slots__ = ("codes", "names", "order")

    def __init__(self, order: str, *fields: tuple[str, str]) -> None:
        for name, code in fields:
            integer = code in _INT_CODES and name
            padding = not name and code.endswith("x") and code[:-1].isdigit()
            if not (integer or padding):
                raise TypeError(f"field {name!r} {code!r} is neither a named integer nor padding")
        self.order = order
        self.codes = "".join(code for _, code in fields)
        self.names = tuple(name for name, _ in fields if name)

    def sizeof(self) -> int:
        return struct.calcsize(self.order + self.codes)


def _u8(name: str) -> tuple[str, str]:
    return (name, "B")


def _u16(name: str) -> tuple[str, str]:
    return (name, "H")


def _u32(name: str) -> tuple[str, str]:
    return (name, "I")


def _i32(name: str) -> tuple[str, str]:
    return (name, "i")


def _i64(name: str) -> tuple[str, str]:
    return (name, "q")


def _pad(n: int) -> tuple[str, str]:
    return ("", f"{n}x")


# --------------------------------------------------------------------------- files

#: Classic pcap file header (after which come records).
PCAP_GLOBAL: Final = Layout(
    "<",
    _u32("magic"),
    _u16("version_major"),
    _u16("version_minor"),
    _i32("thiszone"),
    _u32("sigfigs"),
    _u32("snaplen"),
    _u32("network"),
)
#: Classic pcap record header; ``ts_frac`` is µs or ns per the magic.
PCAP_RECORD: Final = Layout("<", _u32("ts_sec"), _u32("ts_frac"), _u32("incl_len"), _u32("orig_len"))
#: Every pcapng block starts with its type and total length (repeated in its trailer).
PCAPNG_BLOCK: Final = Layout("<", _u32("type"), _u32("length"))
#: Section header block body after the block header.
PCAPNG_SHB: Final = Layout(
    "<", _u32("byte_order_magic"), _u16("version_major"), _u16("version_minor"), _i64("section_length")
)
#: Interface description block body after the block header (options follow).
PCAPNG_IDB: Final = Layout("<", _u16("linktype"), _pad(2), _u32("snaplen"))
#: Enhanced packet block body after the block header (the obsolete PB has the same
#: layout with a 16-bit interface id and a drops count in the first 4 bytes).
PCAPNG_EPB: Final = Layout(
    "<", _u32("interface_id"), _u32("ts_high"), _u32("ts_low"), _u32("captured_len"), _u32("original_len")
)
#: An option's code and value length (the value is padded to 32 bits).
PCAPNG_OPTION: Final = Layout("<", _u16("code"), _u16("length"))

# --------------------------------------------------------------------------- packets

ETHERTYPE_IPV4: Final = b"\x08\x00"
#: The IPv4 protocol number of TCP, as the raw byte a fast path compares.
TCP_OVER_IPV4_KEY: Final = 6

#: Ethernet II: destination and source MACs (skipped), then the ethertype.
ETHERNET: Final = Layout(">", _pad(12), _u16("ethertype"))
LINUX_SLL: Final = Layout(">", _u16("packet_type"), _u16("arphrd"), _u16("addr_len"), _pad(8), _u16("protocol"))
LINUX_SLL2: Final = Layout(
    ">", _u16("protocol"), _pad(2), _u32("ifindex"), _u16("arphrd"), _u8("packet_type"), _u8("addr_len"), _pad(8)
)
#: The fields the decoder needs of the fixed 20-byte IPv4 header (addresses are sliced).
IPV4: Final = Layout(
    ">",
    _u8("version_ihl"),
    _pad(1),
    _u16("total_length"),
    _pad(2),
    _u16("flags_fragment"),
    _pad(1),
    _u8("protocol"),
    _pad(10),
)
#: The fixed 40-byte IPv6 header's payload length and next header (addresses are sliced).
IPV6: Final = Layout(">", _pad(4), _u16("payload_length"), _u8("next_header"), _pad(33))
#: The fixed 20-byte TCP header up to the flags.
TCP: Final = Layout(
    ">", _u16("sport"), _u16("dport"), _u32("seq"), _u32("ack"), _u8("data_offset"), _u8("flags"), _pad(6)
)


@cache
def struct_of(layout: Layout, endian: str = "") -> struct.Struct:
    """The :class:`struct.Struct` unpacking ``layout``'s named fields in order (padding
    skipped). ``endian`` ``"<"`` or ``">"`` overrides the declared order (pcap and pcapng
    files choose theirs by their magic); empty keeps it."""
    return struct.Struct((endian or layout.order) + layout.codes)


def parse(layout: Layout, buf: bytes, endian: str = "") -> dict[str, int]:
    """``layout``'s fields by name, unpacked from the start of ``buf`` (at least
    ``layout.sizeof()`` bytes: the caller checks, as it reports where a file is short)."""
    return dict(zip(layout.names, struct_of(layout, endian).unpack_from(buf), strict=True))
