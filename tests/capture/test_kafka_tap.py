"""The frame tap: a server's traffic to pcapng and over UDP to `capture listen`."""

from __future__ import annotations

import asyncio
import io
import json
import struct
from pathlib import Path

from kraft_jbod import codec
from kraft_jbod.capture.commands import listen
from kraft_jbod.capture.kafka import HEADER, PAIRED, TRUNCATED, decode_capture
from kraft_jbod.capture.tap import FrameTap, TapListener, parse_datagram
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.metadata_request import MetadataRequest

from .mini_server import MiniServer


async def _client(port: int) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    sends = [
        codec.encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 4, 1, "tap"),
        codec.encode_request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3, 2, "tap"),
        codec.encode_request(MetadataRequest(topics=None), 12, 3, "tap"),
    ]
    for data in sends:
        w.write(data)
        await w.drain()
        size = struct.unpack(">i", await r.readexactly(4))[0]
        await r.readexactly(size)
    w.close()
    await w.wait_closed()


async def test_tap_writes_pcapng_and_mirrors_to_listen(tmp_path: Path) -> None:
    out = io.StringIO()
    ready = asyncio.Event()
    bound: list[tuple[str, int]] = []
    listener = asyncio.create_task(listen("127.0.0.1", 0, out, count=6, timeout=5.0, ready=ready, bound=bound))
    await asyncio.wait_for(ready.wait(), 5)
    pcap = tmp_path / "tap.pcapng"
    async with FrameTap(pcapng=pcap, udp=bound[0]) as tap:
        async with MiniServer(tap=tap) as server:
            await _client(server.port)
            await asyncio.sleep(0.05)  # let the server see EOF and close its side
        await tap.flush()
    written = await asyncio.wait_for(listener, 10)
    assert written == 6
    live = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(x["kind"], x["apiName"], x["apiVersion"], x["confidence"]) for x in live] == [
        ("request", "ApiVersions", 4, HEADER),
        ("response", "ApiVersions", 0, PAIRED),
        ("request", "ApiVersions", 3, HEADER),
        ("response", "ApiVersions", 3, PAIRED),
        ("request", "Metadata", 12, HEADER),
        ("response", "Metadata", 12, PAIRED),
    ]
    assert live[5]["body"]["topics"][0]["name"] == "demo"

    with pcap.open("rb") as fh:
        from_file = list(decode_capture(fh))
    assert [f.payload for f in from_file if f.kind == "request"] == server.requests
    assert [f.payload for f in from_file if f.kind == "response"] == server.responses
    assert [f.confidence for f in from_file] == [HEADER, PAIRED] * 3


def test_listener_turns_lost_datagrams_into_a_truncated_frame() -> None:
    sent: list[bytes] = []

    class _Capture(FrameTap):
        def _send(self, kind: int, serial: int, offset: int, data: bytes, ts: int | None = None) -> None:
            from kraft_jbod.capture import tap as t

            sent.append(t._HEAD.pack(t.MAGIC, kind, serial, offset, ts or 1) + data)

    tap = _Capture()
    conn = tap.open(("127.0.0.1", 5000), ("127.0.0.1", 9093))
    req = codec.encode_request(MetadataRequest(topics=None), 12, 1, "x")
    conn.received(req[:10])
    conn.received(req[10:])
    conn.received(req)  # a second request, same bytes, corr 1 again
    conn.close()
    assert all(parse_datagram(d) is not None for d in sent)
    listener = TapListener()
    frames = []
    for i, d in enumerate(sent):
        if i == 2:  # lose the second half of the first request
            continue
        frames.extend(listener.feed(d, ("127.0.0.1", 1)))
    frames.extend(listener.finish())
    assert [f.confidence for f in frames] == [TRUNCATED, HEADER]
    assert listener.feed(b"not a tap datagram") == [] and listener.ignored == 1
