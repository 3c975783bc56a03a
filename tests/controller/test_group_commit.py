"""Group commit in the controller's one writer (Rule 7 of controller/server.py).

Requests that arrive while an append is on disk are handled in order, each against the
records of the ones before it, appended with one fsync, and answered only once that
append has returned. The first append is held in its worker thread by a gate, so the
group forms deterministically: nothing here depends on timing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from tests.controller.test_server import CLUSTER, Client, make_config, registration


class GatedAppends:
    """Wraps ``MetadataLog.append``: records each call's size, holds the first until released,
    and fails the calls listed in ``fail``."""

    def __init__(self, server: ControllerServer, fail: Sequence[int] = ()) -> None:
        assert server.log is not None
        self.real = server.log.append
        self.sizes: list[int] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = set(fail)
        server.log.append = self  # type: ignore[method-assign]

    def __call__(self, records: Sequence[Any], *, timestamp_ms: int) -> int:
        call = len(self.sizes)
        self.sizes.append(len(records))
        if call == 0:
            self.entered.set()
            assert self.release.wait(30), "the test never released the first append"
        if call in self.fail:
            raise StorageError("disk on fire")
        return self.real(records, timestamp_ms=timestamp_ms)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ControllerServer]:
    async with ControllerServer(make_config(tmp_path), cluster_id=CLUSTER, tick_interval_ms=60_000) as s:
        yield s


async def _queue_behind_first_append(server: ControllerServer, gate: GatedAppends, brokers: list[int]) -> list[Client]:
    """Broker 1 registers and its append blocks; then each of ``brokers`` sends its
    registration, one after the other, each queued before the next is sent."""
    first = await Client.connect(server.addresses[0])
    first.writer.write(first.conn.send_request(registration(1), 3))
    assert await asyncio.to_thread(gate.entered.wait, 30)
    clients = []
    for n, b in enumerate(brokers, start=1):
        c = await Client.connect(server.addresses[0])
        c.writer.write(c.conn.send_request(registration(b), 3))
        for _ in range(1000):  # bounded wait for the request to reach the queue; no speed asserted
            if len(server._queue) == n:
                break
            await asyncio.sleep(0.01)
        assert len(server._queue) == n
        clients.append(c)
    clients.insert(0, first)
    return clients


async def test_requests_waiting_behind_an_append_share_the_next_one(server: ControllerServer) -> None:
    gate = GatedAppends(server)
    clients = await _queue_behind_first_append(server, gate, [2, 3, 4, 5])
    # Nobody is answered while broker 1's records are not on disk.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(clients[0].reader.read(1), 0.2)
    gate.release.set()
    responses = [await c.next() for c in clients]
    bodies = [getattr(r, "body", None) for r in responses]
    assert all(b is not None and b.error_code == 0 for b in bodies), bodies

    # One append for broker 1, ONE for the four that waited (one fsync), nothing else.
    assert gate.sizes == [1, 4]
    assert server.stats["group_commits"] == 1 and server.stats["group_requests"] == 4

    # Each broker's epoch is the offset of its own registration record, in arrival order.
    assert server.log is not None
    offsets = {r.broker_id: off for off, r, _ in server.log.replay() if isinstance(r, RegisterBrokerRecord)}
    assert [offsets[b] for b in (1, 2, 3, 4, 5)] == sorted(offsets.values())
    for b, body in zip((1, 2, 3, 4, 5), bodies, strict=True):
        assert body is not None and body.broker_epoch == offsets[b]
        assert server.state.brokers[b].epoch == offsets[b]
    for c in clients:
        await c.close()


async def test_a_failed_group_append_stops_the_controller_unanswered(server: ControllerServer) -> None:
    gate = GatedAppends(server, fail=[1])
    clients = await _queue_behind_first_append(server, gate, [2, 3])
    assert server.log is not None
    gate.release.set()
    first = await clients[0].next()
    assert getattr(first, "body", None) is not None and first.body.error_code == 0  # type: ignore[union-attr]
    # The group's append failed after its records were applied: nobody is answered, the
    # controller stops instead of serving a state the log does not hold.
    for c in clients[1:]:
        assert await c.is_closed_by_peer()
    await asyncio.wait_for(server.wait_stopped(), 30)
    assert isinstance(server.fatal, StorageError)
    assert gate.sizes == [1, 2]
    for c in clients:
        await c.close()
