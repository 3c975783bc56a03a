"""When and how the running controller writes a metadata snapshot (:mod:`.snapshot` writes it).

After every commit the server asks :meth:`SnapshotDriver.after_commit`. When the policy
(bytes since the last snapshot, or time) says so, the image is written in a worker thread.

Rule 1: the server's one writer waits for the write, so the image holds still; meanwhile
``writing`` is True and the server answers what writes nothing (its Rule 5), through the
``while_writing`` callback.
Rule 2: a failed snapshot loses nothing (the log still holds every record): it is logged
and the next one is tried when the policy says so again.
Rule 3: after a snapshot the log is rolled at its end offset when they meet, segments
wholly below it are deleted (the log start offset moves up) and older snapshots go. On a
quorum of several controllers the seat (``raft/seat.py``) deletes instead, by Kafka's
retention rule.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from pathlib import Path

from kraft_jbod.clock import Clock
from kraft_jbod.controller import snapshot as snapshots
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.controller.seams import StateMachine
from kraft_jbod.errors import KraftJbodError

log = logging.getLogger(__name__)


class SnapshotDriver:
    def __init__(
        self,
        directory: Path,
        policy: snapshots.SnapshotPolicy,
        *,
        clock: Clock,
        fsync: bool,
        stats: collections.Counter[str],
    ) -> None:
        self.directory = directory
        self.policy = policy
        self.clock = clock
        self.fsync = fsync
        self.stats = stats
        self.latest: tuple[int, int] | None = None  # (end offset, epoch) of the newest snapshot
        self.writing = False
        # Rule 3 at once (a single controller); a quorum's seat applies Kafka's retention instead.
        self.clean_at_once = True

    def restored(self, sid: snapshots.SnapshotId | None) -> None:
        """The server started from ``sid`` (None: from the log alone); the policy starts now."""
        if sid is not None:
            self.latest = (sid.end_offset, sid.epoch)
        self.policy.taken(self.clock.monotonic_ms())

    async def after_commit(
        self,
        metadata_log: MetadataLog,
        state: StateMachine,
        ts: int,
        while_writing: Callable[[], None],
        *,
        counted: bool = False,
    ) -> snapshots.SnapshotId | None:
        """Snapshot ``state``'s image if the policy says so (Rules 1-3); the id written.
        ``counted``: the caller told the policy the committed bytes itself."""
        if metadata_log.batches and not counted:
            self.policy.committed(metadata_log.batches[-1].size)
        now = self.clock.monotonic_ms()
        if not self.policy.due(now):
            return None
        self.policy.taken(now)
        img, epoch = state.image, metadata_log.leader_epoch
        kv, vs = state.kraft_version, state.voters
        try:
            writing = asyncio.get_running_loop().run_in_executor(
                None,
                lambda: snapshots.write_image_snapshot(
                    self.directory,
                    img,
                    epoch=epoch,
                    last_contained_timestamp=ts,
                    fsync=self.fsync,
                    kraft_version=kv,
                    voters=None if vs is None else (vs, 0),
                ),
            )
            self.writing = True
            try:
                while_writing()
                path = await writing
            finally:
                self.writing = False
        except Exception as exc:  # Rule 2
            log.error("writing a metadata snapshot failed: %s", exc)
            return None
        self.stats["snapshots"] += 1
        log.info("wrote metadata snapshot %s", path.name)
        sid = snapshots.parse_name(path.name)
        assert sid is not None
        self.latest = (sid.end_offset, sid.epoch)
        if self.clean_at_once:
            self._clean(metadata_log, sid)
        return sid

    def _clean(self, metadata_log: MetadataLog, sid: snapshots.SnapshotId) -> None:
        """Rule 3."""
        try:
            if sid.end_offset == metadata_log.end_offset:
                metadata_log.roll()  # so everything the snapshot holds can go
            deleted = metadata_log.delete_segments_below(sid.end_offset)
            for old in snapshots.list_snapshots(self.directory):
                if old < sid:
                    (self.directory / old.file_name).unlink(missing_ok=True)
        except (KraftJbodError, OSError) as exc:
            log.error("cleaning the metadata log after a snapshot failed: %s", exc)
            return
        if deleted:
            log.info("deleted %d metadata log segments; log start offset %d", deleted, metadata_log.start_offset)
