"""Crash test: SIGKILL the real ``kraft-jbod controller`` process mid-stream, restart it on
the same metadata dir, and prove every acknowledged record survived.

Many concurrent broker connections register (one RegisterBrokerRecord each, its offset
being the broker epoch) and then unfence (one BrokerRegistrationChangeRecord). A response
is only sent after its records are fsync'd, so everything a client saw acknowledged must
be in the log after the kill: checked over the wire (a heartbeat with the acknowledged
epoch is accepted, not STALE_BROKER_EPOCH) and by replaying the log into a fresh state.
"""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import uuid
from pathlib import Path

import pytest

from kraft_jbod.connection import NEED_DATA, ClientConnection, ResponseReceived
from kraft_jbod.controller import features
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Listener
from kraft_jbod.messages.error_codes import ErrorCode

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
CLIENTS = 40
KILL_AFTER_ACKS = 1000


class Conn:
    def __init__(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.r, self.w, self.c = r, w, ClientConnection(client_id="crash")

    async def call(self, body: object, version: int) -> object | None:
        """The response body, or None when the connection died first."""
        try:
            self.w.write(self.c.send_request(body, version))  # type: ignore[arg-type]
            while (ev := self.c.next_event()) is NEED_DATA:
                data = await asyncio.wait_for(self.r.read(65536), 20)
                self.c.receive_data(data)
        except (ConnectionError, OSError):
            return None
        return ev.body if isinstance(ev, ResponseReceived) else None


async def start_controller(config: Path) -> tuple[asyncio.subprocess.Process, tuple[str, int]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kraft_jbod.cli",
        "controller",
        "--config",
        str(config),
        "--cluster-id",
        CLUSTER,
        "--log-level",
        "WARNING",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
    m = re.fullmatch(r"listening on (?:[A-Z0-9_.-]+ )?(\S+):(\d+)\n", line)
    assert m, f"unexpected first line {line!r}"
    return proc, (m.group(1), int(m.group(2)))


def registration(b: int) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=b,
        cluster_id=CLUSTER,
        incarnation_id=uuid.UUID(int=b + 1),
        listeners=[Listener("PLAINTEXT", "127.0.0.1", 9092, 0)],
        features=features.registration_features(),
        log_dirs=[uuid.UUID(int=(b << 32) | 500), uuid.UUID(int=(b << 32) | 501)],
    )


async def test_sigkill_loses_no_acknowledged_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "controller.properties"
    config.write_text(
        "node.id=3000\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={tmp_path / 'meta'}\n"
        # Each broker heartbeats once: on a loaded machine the run outlasts the default 9 s
        # session and the first brokers would be fenced by expiry, not lost by the crash.
        "broker.session.timeout.ms=600000\n"
    )
    proc, addr = await start_controller(config)
    registered: dict[int, int] = {}  # broker id -> acknowledged epoch
    unfenced: set[int] = set()
    sent = 0
    killed = asyncio.Event()

    async def worker(n: int) -> None:
        nonlocal sent
        r, w = await asyncio.open_connection(*addr)
        conn = Conn(r, w)
        for k in range(10_000):  # bounded; the kill ends it long before
            if killed.is_set():
                break
            b = n * 10_000 + k
            sent += 1
            resp = await conn.call(registration(b), 3)
            if resp is None:
                break
            assert getattr(resp, "error_code") == 0, resp  # noqa: B009
            epoch = int(getattr(resp, "broker_epoch"))  # noqa: B009
            registered[b] = epoch
            if len(registered) + len(unfenced) >= KILL_AFTER_ACKS and not killed.is_set():
                killed.set()
                proc.send_signal(signal.SIGKILL)  # mid-stream: the other workers are still sending
            sent += 1
            hb = await conn.call(BrokerHeartbeatRequest(b, epoch, epoch, want_fence=False), 1)
            if hb is None:
                break
            assert not getattr(hb, "is_fenced"), hb  # noqa: B009
            unfenced.add(b)
        w.close()

    await asyncio.wait_for(asyncio.gather(*(worker(n) for n in range(CLIENTS))), 120)
    assert await asyncio.wait_for(proc.wait(), 30) == -signal.SIGKILL
    acked = len(registered) + len(unfenced)
    assert acked >= KILL_AFTER_ACKS

    # Straight after the kill, before anything else touches it: replay the log offline.
    state = ControllerState(cluster_id=CLUSTER, node_id=3000)
    with MetadataLog.open(tmp_path / "meta" / "__cluster_metadata-0", read_only=True) as log:
        n_records = 0
        for offset, record, version in log.replay():
            state.apply(offset, record, version)
            n_records += 1
    for b, epoch in registered.items():
        assert state.brokers[b].epoch == epoch
    for b in unfenced:
        assert not state.brokers[b].fenced
    assert state.check_invariants() == []

    # Restart on the same dir; every acknowledged epoch is still the broker's epoch.
    proc2, addr2 = await start_controller(config)
    r, w = await asyncio.open_connection(*addr2)
    conn = Conn(r, w)
    for b, epoch in sorted(registered.items()):
        hb = await conn.call(BrokerHeartbeatRequest(b, epoch, epoch, want_fence=False), 1)
        assert hb is not None and getattr(hb, "error_code") != ErrorCode.STALE_BROKER_EPOCH, (b, epoch, hb)  # noqa: B009
    w.close()
    proc2.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc2.wait(), 30) == 0
    assert proc2.stderr is not None
    stderr2 = (await proc2.stderr.read()).decode()
    assert "ERROR" not in stderr2 and "Traceback" not in stderr2, stderr2

    with capsys.disabled():
        sys.stderr.write(
            f"\n[crash test] clients={CLIENTS} requests sent={sent} acknowledged={acked} "
            f"(registrations={len(registered)}, unfences={len(unfenced)}) unacknowledged at kill={sent - acked} "
            f"records in log after kill={n_records} brokers in log={len(state.brokers)} acknowledged lost=0\n"
        )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_signal_stops_gracefully_with_log_flushed(tmp_path: Path, sig: signal.Signals) -> None:
    config = tmp_path / "controller.properties"
    config.write_text(
        "node.id=3000\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={tmp_path / 'meta'}\n"
    )
    proc, addr = await start_controller(config)
    r, w = await asyncio.open_connection(*addr)
    conn = Conn(r, w)
    resp = await conn.call(registration(1), 3)
    assert resp is not None and getattr(resp, "error_code") == 0  # noqa: B009
    proc.send_signal(sig)
    assert await asyncio.wait_for(proc.wait(), 30) == 0
    assert proc.stdout is not None
    assert await proc.stdout.read() == b""  # exactly one "listening on" line was printed
    w.close()
    # The lock is free and the log whole: a writer can open it and finds the registration.
    with MetadataLog.open(tmp_path / "meta" / "__cluster_metadata-0") as log:
        kinds = [type(rec).__name__ for _, rec, _ in log.replay()]
        assert log.truncated_bytes == 0
    assert kinds[-1] == "RegisterBrokerRecord"
