"""Snapshots on a quorum of full controllers: every controller snapshots its committed state,
the log prefix below a snapshot goes by Kafka's retention rule, and a voter that was down
meanwhile catches up with FetchSnapshot (the leader answers its Fetch with a SnapshotId),
reloads its state from the snapshot, fetches on, and can then lead and manage the brokers.
A broker started late catches up from the leader's snapshot the same way."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kraft_jbod.controller import snapshot as snapshots
from kraft_jbod.controller.raft.seat import QuorumSeat
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.testing.quorum import ControllerQuorum
from tests.controller.test_controller_quorum import _create_topic, _placed, _start_broker, _unfenced, _until

pytestmark = pytest.mark.asyncio

# Snapshot after every 2 KB of records; keep as little log as Kafka's rule allows.
SNAPSHOTTING = {
    "metadata.log.max.record.bytes.between.snapshots": "2048",
    "metadata.max.retention.bytes": "1",
}


def _seat(server: ControllerServer) -> QuorumSeat:
    seat = server.quorum
    assert isinstance(seat, QuorumSeat)
    return seat


def _raft_log(server: ControllerServer):  # type: ignore[no-untyped-def]
    voter = _seat(server).voter
    assert voter is not None and voter.log is not None
    return voter.log


async def test_a_voter_down_while_the_leader_cut_its_log_catches_up_by_snapshot(tmp_path: Path) -> None:
    async with ControllerQuorum(tmp_path / "quorum", voters=3, props=SNAPSHOTTING) as quorum:
        active = await quorum.wait_for_active(timeout=30)
        voters = quorum.voters_property
        brokers = [await _start_broker(tmp_path, b, voters) for b in (1, 2)]
        try:
            await _until("brokers unfenced", lambda: all(_unfenced(active, b) for b in brokers), 30)
            victim = next(i for i in quorum.ids if i != active.config.node_id)
            await quorum.kill(victim, record=False)
            # Records enough for several snapshots; the leader's log start moves past the victim's end.
            victim_end = 0
            for n in range(12):
                assert await _create_topic(active, f"t{n}", 3) == ErrorCode.NONE
            leader_log = _raft_log(active)
            await _until("the leader cut its log", lambda: leader_log.start_offset > 0, 20)
            sids = snapshots.list_snapshots(active.config.metadata_partition_dir)
            assert sids and leader_log.snapshots[-1] == (sids[-1].end_offset, sids[-1].epoch)
            assert active.log is not None and active.log.start_offset > 0  # the committed copy too
            print(
                f"\nleader snapshot {sids[-1].file_name} "
                f"({(active.config.metadata_partition_dir / sids[-1].file_name).stat().st_size} bytes), "
                f"raft log start {leader_log.start_offset}, end {leader_log.end_offset}"
            )

            started = time.monotonic()
            back = await quorum.restart(victim)
            back_log = _raft_log(back)
            victim_end = back_log.end_offset
            assert victim_end < leader_log.start_offset
            await _until("the victim loaded a snapshot", lambda: _seat(back).snapshots_loaded, 30)
            await _until(
                "the victim holds every topic",
                lambda: all(f"t{n}" in back.state.image.topic_names for n in range(12)),
                30,
            )
            await _until("the victim fetched on", lambda: back_log.end_offset == leader_log.end_offset, 30)
            caught_up_ms = int((time.monotonic() - started) * 1000)
            print(
                f"victim: end {victim_end} -> loaded {_seat(back).snapshots_loaded} in "
                f"{_seat(back).snapshot_load_ms} ms, caught up in {caught_up_ms} ms"
            )
            assert back_log.start_offset >= _seat(back).snapshots_loaded[0][0] > victim_end
            # The same state once both applied the same committed batches (brokers keep writing).
            await _until(
                "the victim's state is the leader's",
                lambda: (
                    back.log is not None
                    and active.log is not None
                    and back.log.end_offset == active.log.end_offset
                    and snapshots.comparable(back.state.image) == snapshots.comparable(active.state.image)
                ),
                30,
            )
            assert back.state.image.controllers.keys() == active.state.image.controllers.keys()

            # The caught-up voter leads (leadership moved to it) and manages the brokers.
            new = active
            for _ in range(5):
                epoch = quorum.epoch_of(new)
                voter = _seat(new).voter
                assert voter is not None
                voter.resign(victim)
                new = await quorum.wait_for_active(above_epoch=epoch, timeout=30)
                if new.config.node_id == victim:
                    break
            assert new.config.node_id == victim
            assert await _create_topic(new, "after", 2) == ErrorCode.NONE
            await _until("the new topic is placed", lambda: _placed(new, "after"), 30)
            await _until("brokers unfenced by the new leader", lambda: all(_unfenced(new, b) for b in brokers), 30)

            # A broker started now fetches from the start: the leader's snapshot first.
            late = await _start_broker(tmp_path, 3, voters)
            brokers.append(late)
            await _until("the late broker unfenced", lambda: _unfenced(new, late), 30)
            await _until(
                "the late broker's image has every topic",
                lambda: {f"t{n}" for n in range(12)} <= set(late.image.topic_names.values()),
                30,
            )
        finally:
            for b in brokers:
                await b.close()
