"""The header layouts: sizes as the formats define them, fields by name, byte order chosen
by the file, and declarations that cannot describe a variable-size field."""

from __future__ import annotations

import struct

import pytest

from kraft_jbod.capture import headers as h

# Sizes fixed by the pcap/pcapng formats and by Ethernet, Linux cooked v1/v2, IPv4, IPv6
# and TCP (the fixed parts).
SIZES = {
    "PCAP_GLOBAL": 24,
    "PCAP_RECORD": 16,
    "PCAPNG_BLOCK": 8,
    "PCAPNG_SHB": 16,
    "PCAPNG_IDB": 8,
    "PCAPNG_EPB": 20,
    "PCAPNG_OPTION": 4,
    "ETHERNET": 14,
    "LINUX_SLL": 16,
    "LINUX_SLL2": 20,
    "IPV4": 20,
    "IPV6": 40,
    "TCP": 20,
}


@pytest.mark.parametrize(("name", "size"), sorted(SIZES.items()))
def test_each_layout_has_its_format_size(name: str, size: int) -> None:
    layout = getattr(h, name)
    assert layout.sizeof() == size
    assert h.struct_of(layout).size == size


def test_parse_names_fields_in_the_file_byte_order() -> None:
    # A classic pcap global header as a big-endian writer lays it out.
    raw = struct.pack(">IHHiIII", 0xA1B2C3D4, 2, 4, -3600, 0, 262144, 0x1000_0001)
    assert h.parse(h.PCAP_GLOBAL, raw, ">") == {
        "magic": 0xA1B2C3D4,
        "version_major": 2,
        "version_minor": 4,
        "thiszone": -3600,
        "sigfigs": 0,
        "snaplen": 262144,
        "network": 0x1000_0001,
    }
    little = h.parse(h.PCAP_GLOBAL, raw, "<")
    assert little["version_major"] == 0x0200  # the same bytes read the other way round


def test_padding_is_skipped_and_network_order_kept() -> None:
    tcp = bytes.fromhex("1f90c35000000064000000c85018fe8800000000")
    assert h.parse(h.TCP, tcp) == {
        "sport": 8080,
        "dport": 50000,
        "seq": 100,
        "ack": 200,
        "data_offset": 0x50,
        "flags": 0x18,
    }
    ipv4 = bytes.fromhex("450000341c464000400600007f0000017f000001")
    assert h.parse(h.IPV4, ipv4) == {"version_ihl": 0x45, "total_length": 52, "flags_fragment": 0x4000, "protocol": 6}


@pytest.mark.parametrize("field", [("name", "s"), ("name", "4s"), ("", "I"), ("pad", "2x"), ("", "x2")])
def test_a_layout_holds_only_named_integers_and_padding(field: tuple[str, str]) -> None:
    with pytest.raises(TypeError, match="neither a named integer nor padding"):
        h.Layout(">", ("ok", "H"), field)
