"""Capture decoding, transport half: pcap/pcapng files to Kafka frames.

Layers, each usable alone: :mod:`.pcapfile` (capture records), :mod:`.packets`
(link/IP/TCP headers to :class:`~.packets.TcpSegment`), :mod:`.reassembly` (per-direction
byte streams with explicit gaps), :mod:`.streams` (int32-size-prefixed frames per
direction, flows with client/server sides) and :mod:`.pcapng_writer` (synthetic captures).
"""
