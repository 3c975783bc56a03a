"""Real clients (librdkafka via confluent-kafka, kafka-python) talk to our mini server over
loopback while tshark records the traffic; the capture is decoded back and compared with
the bytes the server received and sent.

Needs tshark (``apt-get install -y tshark``), root (to capture on ``lo``), and the test
dependencies ``confluent-kafka==2.16.1`` and ``kafka-python==3.0.12``. A missing one fails
the test with a message saying so: a skip would hide that the check did not run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from kraft_jbod.capture.kafka import HEADER, PAIRED, decode_capture, reencode

from .mini_server import MiniServer


def _need_tools() -> str:
    tshark = shutil.which("tshark")
    if tshark is None:
        pytest.fail("tshark is not installed: apt-get install -y tshark")
    if os.geteuid() != 0:
        pytest.fail("capturing on lo needs root (run the test suite as root)")
    try:
        import confluent_kafka  # noqa: F401
        import kafka  # noqa: F401
    except ImportError as exc:
        pytest.fail(f"test dependency missing ({exc}): pip install confluent-kafka==2.16.1 kafka-python==3.0.12")
    return tshark


def _start_tshark(tshark: str, port: int, out: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [tshark, "-i", "lo", "-f", f"tcp port {port}", "-w", str(out), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 15
    seen = b""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen += line
        if b"Capturing on" in line:
            # The message comes when dumpcap opens the interface; give the kernel filter
            # a moment to attach before the first client connects.
            time.sleep(1.0)
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    pytest.fail(f"tshark did not start capturing: {seen.decode(errors='replace')}")


def _confluent(port: int) -> list[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "ck-admin", "socket.timeout.ms": 5000})
    md = admin.list_topics(timeout=10)
    return sorted(md.topics)


def _kafka_python(port: int) -> list[str]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", client_id="kp-consumer", request_timeout_ms=10000)
    try:
        return sorted(consumer.topics())
    finally:
        consumer.close()


async def test_real_clients_over_loopback_decode_back_to_what_was_exchanged(tmp_path: Path) -> None:
    tshark = _need_tools()
    pcap = tmp_path / "live.pcapng"
    async with MiniServer() as server:
        proc = _start_tshark(tshark, server.port, pcap)
        try:
            assert await asyncio.to_thread(_confluent, server.port) == ["demo"]
            assert await asyncio.to_thread(_kafka_python, server.port) == ["demo"]
            await asyncio.sleep(0.5)  # the last packets reach the capture
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    with pcap.open("rb") as fh:
        frames = list(decode_capture(fh, ports=[server.port]))
    requests = [f for f in frames if f.kind == "request"]
    responses = [f for f in frames if f.kind == "response"]
    # Everything the server read and wrote is in the capture, byte for byte.
    assert Counter(f.payload for f in requests) == Counter(server.requests)
    assert Counter(f.payload for f in responses) == Counter(server.responses)
    assert {f.confidence for f in requests} == {HEADER}
    assert {f.confidence for f in responses} == {PAIRED}
    assert all(f.client_id in ("ck-admin", "kp-consumer") for f in responses)
    for f in frames:
        assert reencode(f) == f.payload, (f.api_name, f.api_version, f.anomalies)
    clients = {f.client_id for f in requests}
    assert {"ck-admin", "kp-consumer"} <= clients
    seen = {(f.client_id, f.api_name, f.api_version) for f in requests}
    # librdkafka asks ApiVersions v3 then Metadata v12; kafka-python tries v4 first and
    # falls back (KIP-511) to v3.
    assert ("ck-admin", "ApiVersions", 3) in seen and ("ck-admin", "Metadata", 12) in seen
    assert ("kp-consumer", "ApiVersions", 4) in seen and ("kp-consumer", "ApiVersions", 3) in seen
    fallback = [f for f in responses if f.api_key == 18 and f.body.error_code == 35]
    assert fallback and all(f.api_version == 0 for f in fallback)
    # librdkafka's all-topics Metadata v12 request carries 3 trailing bytes; they are
    # reported, and kept so the frame still re-encodes byte for byte.
    rd_meta = [f for f in requests if f.client_id == "ck-admin" and f.api_key == 3 and f.body.topics is None]
    assert rd_meta
    for f in rd_meta:
        assert f.trailing and any("trailing" in a for a in f.anomalies)
