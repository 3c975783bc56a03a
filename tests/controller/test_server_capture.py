"""The controller's own capture: every frame it exchanges, to pcapng and over UDP."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kraft_jbod.capture.kafka import decode_capture
from kraft_jbod.capture.tap import FrameTap, TapListener
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from tests.controller.test_server import CLUSTER, Client, dirs_of, make_config, register_and_unfence


async def test_controller_writes_a_decodable_pcapng(tmp_path: Path) -> None:
    pcap = tmp_path / "controller.pcapng"
    tap = FrameTap(pcapng=pcap)
    await tap.start()
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, tap=tap) as server:
        client = await Client.connect(server.addresses[0])
        epoch = await register_and_unfence(client, 1)
        await client.call(BrokerHeartbeatRequest(1, epoch, epoch, offline_log_dirs=[dirs_of(1)[0]]), 1)
        await client.close()
    await tap.aclose()

    with pcap.open("rb") as f:
        frames = list(decode_capture(f))
    requests = [fr for fr in frames if fr.kind == "request"]
    responses = [fr for fr in frames if fr.kind == "response"]
    assert [fr.api_key for fr in requests] == [62, 63, 63]
    assert all(fr.confidence == "paired" for fr in responses) and len(responses) == 3
    assert all(fr.canonical for fr in frames)
    registered = responses[0].body
    assert registered.error_code == 0 and registered.broker_epoch == epoch
    assert requests[2].body.offline_log_dirs == [dirs_of(1)[0]]


async def test_controller_mirrors_frames_over_udp(tmp_path: Path) -> None:
    import asyncio_dgram

    receiver = await asyncio_dgram.bind(("127.0.0.1", 0))
    listener = TapListener()
    tap = FrameTap(udp=receiver.sockname[:2])
    await tap.start()
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, tap=tap) as server:
        client = await Client.connect(server.addresses[0])
        await register_and_unfence(client, 2)
        await client.close()
    await tap.aclose()
    frames: list[Any] = []
    while len([f for f in frames if f.kind == "response"]) < 2:
        data, addr = await asyncio.wait_for(receiver.recv(), 10)
        frames += listener.feed(data, addr)
    receiver.close()
    assert [(f.kind, f.api_key) for f in frames] == [
        ("request", 62),
        ("response", 62),
        ("request", 63),
        ("response", 63),
    ]
    assert frames[1].body.error_code == 0 and frames[3].body.is_fenced is False
