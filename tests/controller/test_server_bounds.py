"""The controller under a hostile peer or careless operator: fair service, bounded memory,
connection limits, listeners on every interface (controller/service.py, server.py).

Timings are not asserted here (they live in tools/bench/bench_flood.py): these tests
assert that the heartbeat IS answered while others flood, that a budget IS respected,
that a limit IS applied.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path

import pytest

from kraft_jbod import codec
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from tests.controller.test_server import CLUSTER, Client, make_config, register_and_unfence


def _frame(body: object, version: int, corr: int = 1) -> bytes:
    return codec.encode_request(body, version, corr, "flooder")  # type: ignore[arg-type]


async def _flood(addr: tuple[str, int], stop: asyncio.Event, frame: bytes, batch: int) -> int:
    """Pipeline ``frame`` as fast as the socket takes it, never reading a response."""
    _r, w = await asyncio.open_connection(*addr)
    sent = 0
    try:
        while not stop.is_set():
            w.write(frame * batch)
            sent += batch
            try:
                await asyncio.wait_for(w.drain(), 0.05)
            except TimeoutError:
                pass
            await asyncio.sleep(0)
    except ConnectionError:
        pass
    finally:
        w.close()
    return sent


async def test_heartbeats_are_answered_while_clients_flood(tmp_path: Path) -> None:
    cfg = make_config(tmp_path)
    async with ControllerServer(cfg, cluster_id=CLUSTER, fsync=False, tick_interval_ms=50) as server:
        addr = server.addresses[0]
        broker = await Client.connect(addr)
        epoch = await register_and_unfence(broker, 1)
        stop = asyncio.Event()
        versions = _frame(ApiVersionsRequest(), 0)
        # CreateTopics naming far more topics than a request may carry: refused from its count.
        many = CreateTopicsRequest(topics=[CreatableTopic(f"t{i}", 0, 1) for i in range(12_000)], timeout_ms=1000)
        floods = [asyncio.create_task(_flood(addr, stop, versions, 2000)) for _ in range(2)]
        floods.append(asyncio.create_task(_flood(addr, stop, _frame(many, 5), 1)))
        try:
            await asyncio.sleep(0.5)  # the floods are running
            latencies = []
            for _ in range(20):
                t0 = time.perf_counter()
                hb = await asyncio.wait_for(
                    broker.call(BrokerHeartbeatRequest(1, epoch, server.log.end_offset - 1, want_fence=False), 1), 10
                )
                latencies.append(time.perf_counter() - t0)
                assert hb.error_code == 0 and not hb.is_fenced
            assert server.stats["refused_oversized"] >= 1
            # The flooders never read: what waits for them in our buffers stays bounded.
            unread = sum(c.transport.get_write_buffer_size() for c in server.service.connections if c.transport)
            assert unread < 8 << 20, unread
        finally:
            stop.set()
            sent = await asyncio.gather(*floods)
        assert sum(sent) > 1000  # the flood really ran
        assert len(latencies) == 20


async def test_a_peer_that_does_not_read_is_not_served_until_it_does(tmp_path: Path) -> None:
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, fsync=False) as server:
        r, w = await asyncio.open_connection(*server.addresses[0])
        for _ in range(100):
            if server.service.connections:
                break
            await asyncio.sleep(0.01)
        (conn,) = server.service.connections
        conn.pause_writing()  # what the transport does when its buffer passes the high-water mark
        w.write(_frame(ApiVersionsRequest(), 0) * 3)
        for _ in range(100):
            if len(conn.frames) == 3:
                break
            await asyncio.sleep(0.01)
        assert len(conn.frames) == 3 and not conn.in_flight
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(r.read(1), 0.2)
        conn.resume_writing()
        for _ in range(3):
            (size,) = struct.unpack(">i", await asyncio.wait_for(r.readexactly(4), 5))
            await asyncio.wait_for(r.readexactly(size), 5)
        assert not conn.frames
        w.close()


async def test_too_many_topics_refused_with_policy_violation_before_decoding(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, **{"kraft.jbod.max.topics.per.request": "5"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, fsync=False) as server:
        c = await Client.connect(server.addresses[0])
        end = server.log.end_offset
        resp = await c.call(CreateTopicsRequest(topics=[CreatableTopic(f"t{i}", 1, 1) for i in range(6)]), 7)
        assert resp.topics == []  # not echoed: the names were never decoded
        assert server.stats["refused_oversized"] == 1 and server.log.end_offset == end
        ok = await c.call(CreateTopicsRequest(topics=[CreatableTopic(f"t{i}", 1, 1) for i in range(5)]), 7)
        assert [t.error_code for t in ok.topics] != []  # five are decoded and answered per topic
        await c.close()


async def test_memory_budget_holds_readers_back_without_losing_requests(tmp_path: Path) -> None:
    # Budget of 1 MiB, frames up to 600 KiB: two large frames cannot be buffered at once.
    cfg = make_config(tmp_path, **{"queued.max.request.bytes": str(1 << 20), "socket.request.max.bytes": "614400"})
    async with ControllerServer(cfg, cluster_id=CLUSTER, fsync=False) as server:
        big = ApiVersionsRequest(client_software_name="x", client_software_version="1")
        payload = _frame(big, 3)
        # Pad a frame to ~500 KiB: trailing bytes after a body are tolerated (and reported).
        pad = b"\0" * (500 * 1024)
        frame = struct.pack(">i", len(payload) - 4 + len(pad)) + payload[4:] + pad
        peak = 0
        writers = []
        # Six peers each send all of a large frame but its last byte, and hold it there.
        for _ in range(6):
            r, w = await asyncio.open_connection(*server.addresses[0])
            writers.append((r, w))
            w.write(frame[:-1])
        for _ in range(100):
            peak = max(peak, server.service.reserved)
            await asyncio.sleep(0.005)
        assert server.stats["memory_waits"] >= 1  # some could not reserve and stopped reading
        for _r, w in writers:
            w.write(frame[-1:])
        for _ in range(100):
            peak = max(peak, server.service.reserved)
            await asyncio.sleep(0.002)
        got = 0
        for r, _w in writers:
            (size,) = struct.unpack(">i", await asyncio.wait_for(r.readexactly(4), 10))
            await asyncio.wait_for(r.readexactly(size), 10)
            got += 1
        assert got == 6  # every request was served in the end
        assert 0 < peak <= 1 << 20
        assert server.service.reserved == 0
        for _r, w in writers:
            w.close()


async def test_idle_connections_are_closed_and_caps_refuse_new_ones(tmp_path: Path) -> None:
    cfg = make_config(
        tmp_path,
        **{"connections.max.idle.ms": "1500", "max.connections": "4", "max.connections.per.ip": "3"},
    )
    async with ControllerServer(cfg, cluster_id=CLUSTER, fsync=False) as server:
        addr = server.addresses[0]
        conns = [await asyncio.open_connection(*addr) for _ in range(3)]
        await asyncio.sleep(0.05)
        r4, w4 = await asyncio.open_connection(*addr)  # the fourth from the same IP
        assert await asyncio.wait_for(r4.read(10), 5) == b""
        assert server.stats["connections_refused"] == 1
        # Idle for longer than connections.max.idle.ms: closed by the server.
        for r, _w in conns:
            assert await asyncio.wait_for(r.read(10), 5) == b""
        assert server.stats["idle_closed"] >= 3
        for _r, w in [*conns, (r4, w4)]:
            w.close()
        # And a fresh, active connection is served.
        c = await Client.connect(addr)
        resp = await c.call(ApiVersionsRequest(), 0)
        assert resp.error_code == 0
        await c.close()


async def test_a_wildcard_listener_binds_ipv4_and_ipv6_on_one_port(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, listeners="CONTROLLER://:0")
    async with ControllerServer(cfg, cluster_id=CLUSTER, fsync=False) as server:
        ports = {p for _h, p in server.addresses}
        assert len(ports) == 1, server.addresses
        port = ports.pop()
        hosts = {h for h, _p in server.addresses}
        assert "0.0.0.0" in hosts
        c = await Client.connect(("127.0.0.1", port))
        assert (await c.call(ApiVersionsRequest(), 0)).error_code == 0
        await c.close()
        if "::" in hosts:
            c6 = await Client.connect(("::1", port))
            assert (await c6.call(ApiVersionsRequest(), 0)).error_code == 0
            await c6.close()


async def test_a_port_in_use_is_a_clear_error_and_nothing_is_written(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        cfg = make_config(tmp_path, listeners=f"CONTROLLER://127.0.0.1:{port}")
        server = ControllerServer(cfg, cluster_id=CLUSTER, fsync=False)
        with pytest.raises(ConfigError, match=f"listener CONTROLLER: cannot listen on 127.0.0.1:{port}: "):
            await server.start()
        assert not (tmp_path / "meta").exists()  # nothing written before the bind failed


def test_absurd_socket_request_max_bytes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"socket\.request\.max\.bytes=2147483647 is above queued\.max\.request\.bytes"
    ):
        make_config(tmp_path, **{"socket.request.max.bytes": "2147483647"})
    # Raising the budget too (or -1, Kafka's default: no budget) makes it a deliberate choice.
    cfg = make_config(tmp_path, **{"socket.request.max.bytes": "2147483647", "queued.max.request.bytes": "-1"})
    assert isinstance(cfg, ControllerConfig) and cfg.queued_max_request_bytes == -1
    with pytest.raises(ConfigError, match=r"queued\.max\.request\.bytes"):
        make_config(tmp_path, **{"queued.max.request.bytes": "0"})


async def test_pre_auth_frames_are_held_to_the_sasl_limit(tmp_path: Path) -> None:
    from kraft_jbod.controller.extensions import Extensions, ListenerSecurity
    from kraft_jbod.security.credentials import CredentialStore

    ext = Extensions(listeners={"CONTROLLER": ListenerSecurity(sasl=("PLAIN",))}, credentials=CredentialStore())
    cfg = make_config(tmp_path)
    async with ControllerServer(cfg, cluster_id=CLUSTER, fsync=False, extensions=ext) as server:
        r, w = await asyncio.open_connection(*server.addresses[0])
        # A 1 MiB frame prefix before authenticating: refused on the prefix, nothing buffered.
        w.write(struct.pack(">i", 1 << 20) + b"\0" * 1024)
        assert await asyncio.wait_for(r.read(10), 5) == b""
        assert server.stats["protocol_errors"] == 1
        assert server.service.reserved == 0
        w.close()


def test_running_out_of_file_descriptors_is_one_log_line_not_a_traceback_storm(tmp_path: Path) -> None:
    import resource
    import subprocess
    import sys

    props = tmp_path / "c.properties"
    props.write_text(
        "node.id=3000\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={tmp_path / 'meta'}\n"
    )

    def low_fd_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kraft_jbod.cli",
            "controller",
            "--config",
            str(props),
            "--cluster-id",
            CLUSTER,
            "--no-fsync",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=low_fd_limit,
    )
    socks: list[socket.socket] = []
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on CONTROLLER 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        for _ in range(120):
            s = socket.socket()
            s.settimeout(5)
            s.connect(("127.0.0.1", port))
            socks.append(s)
        time.sleep(1.5)
        # The peers go away: the controller serves again.
        for s in socks:
            s.close()
        socks.clear()
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                    c.sendall(_frame(ApiVersionsRequest(), 0))
                    c.settimeout(5)
                    if c.recv(4):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the controller did not serve again after descriptors were freed"
            time.sleep(0.2)
    finally:
        for s in socks:
            s.close()
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    assert 1 <= err.count("refusing new connections") <= 2, err
