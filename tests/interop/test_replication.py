"""Metadata replication: Kafka's ``KafkaRaftClient`` as an observer of our controller.

The observer is the one a Kafka broker runs (``java/KraftInterop.java``): a real
``NetworkClient`` under ``KafkaNetworkChannel``, a ``KafkaRaftLog`` on disk, the
``MetadataLoader`` registered as its listener. It must find the leader, follow the log to
the high watermark, follow it across a controller restart (new leader epoch), and log no
raft warning or error on the way (Kafka's log4j2 output is collected per JVM).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.interop import kafka_logs
from tests.interop.broker_ops import (
    assign_round_robin,
    check_all_views,
    create_topic,
    start_java_broker,
    wait_synced,
)
from tests.interop.harness import ControllerThread, InteropJvm

Factory = Callable[..., ControllerThread]


def _raft_problems(jvm: InteropJvm, since: int = 0) -> list[tuple[str, str, str, str]]:
    return kafka_logs.problems(jvm.log_lines()[since:], logger_prefix="org.apache.kafka.raft")


def test_observer_follows_to_the_high_watermark(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    before = len(interop.log_lines())
    ctl = controller_factory()
    dirs = start_java_broker(interop, ctl, tmp_path, 1, 2)
    for i in range(5):
        create_topic(ctl, f"topic-{i}", 3, 1)
    assign_round_robin(interop, ctl, 1, dirs)
    state = wait_synced(interop, ctl, 1)
    end = ctl.end_offset()
    # Kafka's raft client: leader found, log copied to our end offset, HWM there too.
    assert state["leader"] == 3000
    assert state["leader_epoch"] == 1
    interop("wait", broker=1, until="offset", offset=end - 1, timeout_ms=10000)
    state = interop("broker", broker=1)
    assert state["log_end_offset"] == end
    assert state["high_watermark"] == end
    assert state["faults"] == 0
    check_all_views(interop, ctl, 1)
    assert _raft_problems(interop, before) == []


def test_observer_follows_across_a_controller_restart(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    ctl = controller_factory()
    dirs = start_java_broker(interop, ctl, tmp_path, 1, 2)
    create_topic(ctl, "before", 2, 1)
    assign_round_robin(interop, ctl, 1, dirs)
    wait_synced(interop, ctl, 1)
    before = len(interop.log_lines())
    ctl.restart()
    # A restarted controller writes a LeaderChangeMessage at a new epoch; Kafka's observer
    # reconnects, learns the epoch, and keeps going. The broker stays registered.
    create_topic(ctl, "after", 2, 1)
    assign_round_robin(interop, ctl, 1, dirs)
    state = wait_synced(interop, ctl, 1, timeout_ms=30000)
    assert state["leader"] == 3000
    assert state["leader_epoch"] == 2
    state = interop("wait", broker=1, until="state", state="RUNNING", timeout_ms=10000)
    assert state["faults"] == 0
    image = interop("image", broker=1)["image"]
    assert [t["name"] for t in image["topics"]] == ["after", "before"]
    check_all_views(interop, ctl, 1)
    problems = _raft_problems(interop, before)
    assert problems == [], problems
