"""Serving Fetch and FetchSnapshot to observers, beside the one writer, never behind it.

:mod:`.replication` decides each answer (pure); this module is its asyncio side. Each
request gets its own task, so a long poll parked in :class:`~.replication.FetchWaiter`
never holds the writer queue, and an append wakes every parked fetch (:meth:`notify`).

Rule 1: the answer names this controller as the leader in the log's current epoch, with
the address the observer reached (Fetch v17 NodeEndpoints).
Rule 2: a bug while answering closes only that connection, counted in ``handler_bugs``.
Rule 3: on close, parked fetches wake and their tasks are cancelled.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft_jbod import codec
from kraft_jbod.connection import RequestReceived
from kraft_jbod.controller import replication
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.messages.api_keys import ApiKey

if TYPE_CHECKING:
    from kraft_jbod.controller.service import Connection

log = logging.getLogger(__name__)


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class FetchService:
    """Fetch and FetchSnapshot for one controller (see the module docstring)."""

    def __init__(
        self,
        *,
        node_id: int,
        metadata_dir: Path,
        stats: collections.Counter[str],
        cluster_id: Callable[[], str],
        latest_snapshot: Callable[[], tuple[int, int] | None],
    ) -> None:
        self.node_id = node_id
        self.metadata_dir = metadata_dir
        self.stats = stats
        self._cluster_id = cluster_id
        self._latest_snapshot = latest_snapshot
        self.waiter = replication.FetchWaiter()
        self.log: MetadataLog | None = None
        self.closing = False
        self._tasks: set[asyncio.Task[None]] = set()

    def notify(self) -> None:
        """The log grew: wake the parked fetches."""
        self.waiter.notify()

    def close(self) -> None:
        """Rule 3."""
        self.closing = True
        self.waiter.close()
        for task in list(self._tasks):
            task.cancel()

    def serve(self, proto: Connection, event: RequestReceived) -> None:
        """Answer a Fetch/FetchSnapshot off the writer queue: reads never wait for appends."""
        task = asyncio.get_running_loop().create_task(self._serve(proto, event))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, proto: Connection, event: RequestReceived) -> None:
        assert self.log is not None
        host, port = proto.local
        leader = replication.Leader(self.node_id, self.log.leader_epoch, host, port)  # Rule 1
        try:
            body: Any
            if event.api_key == ApiKey.FETCH_SNAPSHOT:
                body = replication.handle_fetch_snapshot(
                    event.body,
                    event.api_version,
                    cluster_id=self._cluster_id(),
                    leader=leader,
                    directory=self.metadata_dir,
                )
            else:
                body = await self._long_poll(event, leader)
        except Exception:
            self.stats["handler_bugs"] += 1  # Rule 2
            log.exception("closing %s: bug while serving %s", proto.peer, codec.api_name(event.api_key))
            proto.close()
            return
        proto.respond(event, body)

    async def _long_poll(self, event: RequestReceived, leader: replication.Leader) -> Any:
        assert self.log is not None
        started = _monotonic_ms()
        while True:
            generation = self.waiter.generation
            answer = replication.handle_fetch(
                event.body,
                event.api_version,
                cluster_id=self._cluster_id(),
                leader=leader,
                log=self.log,
                shutting_down=self.closing,
                snapshot=self._latest_snapshot(),
            )
            if answer.park_ms <= 0:
                return answer.response
            remaining = answer.park_ms - (_monotonic_ms() - started)
            if remaining <= 0 or not await self.waiter.wait(generation, remaining):
                return answer.response
