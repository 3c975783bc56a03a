"""``kraft-jbod demo``: a controller and three JBOD brokers on loopback, one disk fails.

What it does, on embedded defaults, in a temporary folder it removes afterwards:

1. formats storage for three brokers with two log directories each (plus a separate
   metadata directory, so losing a log directory does not halt the broker);
2. starts the mock controller and the three fake brokers over real TCP; each registers
   with its LogDirs, replicates the metadata log through Fetch and unfences;
3. creates two topics; the brokers place every new replica in a directory and tell the
   controller with AssignReplicasToDirs;
4. removes one log directory of broker 1 from disk; the broker's probe notices, the next
   heartbeat carries OfflineLogDirs, and the controller moves leadership and ISR away;
5. prints a timeline and the leaders/ISRs before and after, then checks every broker's
   metadata image against the controller's own log.

All traffic the brokers exchange is written to a pcapng capture. The run is bounded:
every wait has a deadline and a failed wait raises :class:`DemoError` naming what did
not happen. ``run_demo`` is what the CLI and the tests call; it never prints itself but
hands each line to ``out``.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.image import MetadataImage
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import BrokerEvent, Channel, FakeBroker
from kraft_jbod.controller.config import ControllerConfig
from kraft_jbod.controller.log import MetadataLog
from kraft_jbod.errors import KraftJbodError
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.properties import parse_properties
from kraft_jbod.storage import StorageLayout, format_storage
from kraft_jbod.wire.primitives import UNASSIGNED_DIRECTORY, uuid_to_base64url

CLUSTER_ID = "S2pCb0RlbW9DbHVzdGVyMQ"  # base64url of b"KjBoDemoCluster1"
CONTROLLER_ID = 3000
BROKERS = (1, 2, 3)
TOPICS = (("orders", 6, 3), ("events", 4, 2))
FAILED_BROKER = 1
FAILED_DIR_INDEX = 1


class DemoError(KraftJbodError):
    """A step of the demo did not happen in time or checks failed."""


@dataclass
class DemoResult:
    lines: list[str] = field(default_factory=list)
    events: list[BrokerEvent] = field(default_factory=list)
    failed_dir: uuid.UUID | None = None
    before: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    after: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    capture: Path | None = None
    controller_log: list[tuple[int, Any, int]] = field(default_factory=list)
    broker_images: dict[int, MetadataImage] = field(default_factory=dict)
    directories: dict[int, list[uuid.UUID]] = field(default_factory=dict)
    seconds: float = 0.0


def controller_config(workdir: Path, port: int = 0) -> ControllerConfig:
    return ControllerConfig.from_properties(
        {
            "node.id": str(CONTROLLER_ID),
            "process.roles": "controller",
            "listeners": f"CONTROLLER://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "metadata.log.dir": str(workdir / "controller"),
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "250",
        }
    )


def broker_properties(workdir: Path, broker_id: int, controller_port: int) -> str:
    """A Kafka broker properties file for fake broker ``broker_id``."""
    base = workdir / f"broker-{broker_id}"
    return "\n".join(
        [
            "process.roles=broker",
            f"node.id={broker_id}",
            f"controller.quorum.voters={CONTROLLER_ID}@127.0.0.1:{controller_port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            # Each fake broker serves clients on its own port (kraft.jbod.serve.clients).
            "listeners=PLAINTEXT://127.0.0.1:0",
            f"log.dirs={base / 'd0'},{base / 'd1'}",
            f"metadata.log.dir={base / 'meta'}",
            "broker.heartbeat.interval.ms=250",
            "broker.session.timeout.ms=3000",
            "log.dir.failure.timeout.ms=5000",
            "kraft.jbod.probe.interval.ms=200",
            "",
        ]
    )


async def wait_for(what: str, check: Callable[[], bool], timeout_s: float, step_s: float = 0.05) -> None:
    """Poll ``check`` until true; DemoError naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise DemoError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        await asyncio.sleep(step_s)


def _table(state: Any) -> dict[tuple[str, int], tuple[int, tuple[int, ...]]]:
    out: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = {}
    for topic in state.topics.values():
        for pid, p in topic.partitions.items():
            out[(topic.name, pid)] = (p.leader, tuple(p.isr))
    return out


def _dir_label(dirs: dict[uuid.UUID, str], d: uuid.UUID) -> str:
    if d == UNASSIGNED_DIRECTORY:
        return "UNASSIGNED"
    return dirs.get(d, uuid_to_base64url(d)[:8])


async def run_demo(
    workdir: Path,
    *,
    out: Callable[[str], None] = lambda line: None,
    capture: Path | None = None,
    between: Callable[[str, Any], Awaitable[None]] | None = None,
) -> DemoResult:
    """Run the scenario in ``workdir`` (which must be empty or new). See the module docstring.

    ``between(step, context)`` is awaited after each named step (tests use it to restart
    things in the middle).

    Raises:
        DemoError: a step did not complete in time or the final checks failed.
    """
    from kraft_jbod.controller.server import ControllerServer

    result = DemoResult(capture=capture)
    t0 = time.monotonic()

    def say(line: str) -> None:
        result.lines.append(line)
        out(line)

    def on_event(ev: BrokerEvent) -> None:
        result.events.append(ev)
        if _shown(ev):
            say(f"  +{time.monotonic() - t0:6.2f}s  broker {ev.broker_id}  {ev.kind:<10} {ev.text}")

    tap: Any = None
    if capture is not None:
        from kraft_jbod.capture.tap import FrameTap

        tap = FrameTap(pcapng=capture)
        await tap.start()
    ctx: dict[str, Any] = {"workdir": workdir}
    controller = ControllerServer(controller_config(workdir), cluster_id=CLUSTER_ID, fsync=False)
    brokers: dict[int, FakeBroker] = {}
    labels: dict[uuid.UUID, str] = {}
    try:
        await controller.start()
        port = controller.addresses[0][1]
        ctx["controller"] = controller
        say(f"controller {CONTROLLER_ID} listening on 127.0.0.1:{port} (metadata log in {workdir / 'controller'})")
        for b in BROKERS:
            brokers[b] = FakeBroker(_format_broker(workdir, b, port, result, labels), tap=tap, on_event=on_event)
        say("formatted storage: 3 brokers x 2 log dirs, each with its own directory.id")
        say("timeline:")
        for broker in brokers.values():
            await broker.start()
        ctx["brokers"] = brokers
        await wait_for(
            "every broker to be RUNNING (unfenced)",
            lambda: all(br.lifecycle.state is State.RUNNING for br in brokers.values()),
            30,
        )
        if between is not None:
            await between("running", ctx)
            controller = ctx["controller"]
            port = controller.addresses[0][1]
        await _create_topics(port, tap)
        say(f"  +{time.monotonic() - t0:6.2f}s  created topics " + ", ".join(f"{n} ({p}x{rf})" for n, p, rf in TOPICS))
        state = controller.state

        def placed() -> bool:
            parts = list(state.partitions())
            return (
                bool(parts)
                and all(UNASSIGNED_DIRECTORY not in p.dirs for p in parts)
                and all(br.queue.queued == 0 for br in brokers.values())
            )

        await wait_for("every replica to be assigned to a directory", placed, 30)
        if between is not None:
            await between("placed", ctx)
            controller = ctx["controller"]
            state = controller.state
        await wait_for("the controller state to settle", placed, 30)
        result.before = _table(state)
        say("leaders and ISRs before the failure (partition: leader [isr] dirs):")
        for line in _partition_lines(state, labels):
            say("  " + line)

        victim = brokers[FAILED_BROKER]
        failed_path = victim.config.layout.log_dirs[FAILED_DIR_INDEX]
        failed = next(d.dir_id for d in victim.dirs.dirs.values() if d.path == failed_path)
        result.failed_dir = failed
        hosted = len(state.replicas_in(FAILED_BROKER, failed))
        say(f"  +{time.monotonic() - t0:6.2f}s  removing {failed_path} ({labels[failed]}, {hosted} replicas) from disk")
        shutil.rmtree(failed_path)

        def moved_away() -> bool:
            reg = state.brokers.get(FAILED_BROKER)
            if reg is None or failed in reg.online_set:
                return False
            return all(p.leader != FAILED_BROKER or p.dir_of(FAILED_BROKER) != failed for p in state.partitions())

        await wait_for("the controller to take the failed directory offline", moved_away, 30)
        mlog = controller.log
        assert mlog is not None
        log_end = mlog.end_offset
        await wait_for(
            "brokers to replicate the change",
            lambda: all(br.follower.published_offset >= log_end - 1 for br in brokers.values()),
            30,
        )
        result.after = _table(state)
        say("leaders and ISRs after the failure:")
        for line in _partition_lines(state, labels):
            say("  " + line)
        changed = sorted(k for k in result.after if result.after[k] != result.before.get(k))
        say(f"{len(changed)} partitions changed leader or ISR; no leader sits on {labels[failed]}")
        result.broker_images = {b: br.image for b, br in brokers.items()}
    finally:
        for broker in brokers.values():
            await broker.close()
        await controller.close()
        if tap is not None:
            await tap.aclose()
    with MetadataLog.open(controller.config.metadata_partition_dir, read_only=True) as mlog:
        result.controller_log = list(mlog.replay())
    _check(result)
    _report_log(result, say)
    result.seconds = time.monotonic() - t0
    say(f"done in {result.seconds:.1f}s")
    return result


def _shown(ev: BrokerEvent) -> bool:
    """Whether a broker event goes on the timeline (directory assignments only when the
    last one of a broker arrives)."""
    if ev.kind in ("registered", "state", "dir-failed", "reported", "stop", "move"):
        return True
    return ev.kind == "assigned" and "0/" not in ev.text


def _format_broker(workdir: Path, b: int, port: int, result: DemoResult, labels: dict[uuid.UUID, str]) -> BrokerConfig:
    """Write broker ``b``'s properties, format its storage, and label its log directories."""
    path = workdir / f"broker-{b}" / "server.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(broker_properties(workdir, b, port), encoding="utf-8")
    props = parse_properties(path.read_text(encoding="utf-8"))
    for r in format_storage(StorageLayout.from_properties(props), CLUSTER_ID):
        if r.path.name in ("d0", "d1") and r.meta.directory_id is not None:
            labels[r.meta.directory_id] = f"b{b}/{r.path.name}"
            result.directories.setdefault(b, []).append(r.meta.directory_id)
    return BrokerConfig.from_properties(props)


async def _create_topics(port: int, tap: Any) -> None:
    """Create the demo's topics through an admin connection; DemoError if one is refused."""
    admin = Channel("admin", ("127.0.0.1", port), "demo-admin", 5000, tap)
    try:
        req = CreateTopicsRequest(
            topics=[CreatableTopic(name=n, num_partitions=p, replication_factor=rf) for n, p, rf in TOPICS],
            timeout_ms=5000,
        )
        resp = await admin.call(19, lambda v: req)
    finally:
        admin.close()
    for t in resp.topics:
        if t.error_code != 0:
            raise DemoError(f"CreateTopics {t.name}: error {t.error_code} {t.error_message}")


def _report_log(result: DemoResult, say: Callable[[str], None]) -> None:
    """Say what the controller's log holds, and where the capture went."""
    summary = _log_summary(result)
    say(
        f"controller log: {summary['registrations']} registrations, {summary['unfenced']} unfencings, "
        f"{summary['assignments']} directory assignments, {summary['offline']} directory-offline change(s)"
    )
    say("every broker's metadata image matches the controller's log")
    if result.capture is not None:
        say(f"capture of all broker traffic: {result.capture}")


def _partition_lines(state: Any, labels: dict[uuid.UUID, str]) -> list[str]:
    lines = []
    for topic in sorted(state.topics.values(), key=lambda t: t.name):
        for pid, p in sorted(topic.partitions.items()):
            dirs = " ".join(_dir_label(labels, d) for d in p.dirs)
            lines.append(f"{topic.name}-{pid}: leader {p.leader} isr {list(p.isr)} dirs {dirs}")
    return lines


def image_from_log(records: list[tuple[int, Any, int]]) -> MetadataImage:
    image = MetadataImage()
    for offset, record, version in records:
        image.apply(offset, record, version)
    return image


def _check(result: DemoResult) -> None:
    truth = image_from_log(result.controller_log)
    for b, image in result.broker_images.items():
        if image.partitions != {k: v for k, v in truth.partitions.items() if k in image.partitions} or set(
            image.partitions
        ) != set(truth.partitions):
            raise DemoError(f"broker {b}'s partitions differ from the controller's log")


def _log_summary(result: DemoResult) -> dict[str, int]:
    s = {"registrations": 0, "unfenced": 0, "assignments": 0, "offline": 0}
    for _, rec, _ in result.controller_log:
        if isinstance(rec, RegisterBrokerRecord):
            s["registrations"] += 1
        elif isinstance(rec, BrokerRegistrationChangeRecord):
            if rec.fenced == -1:
                s["unfenced"] += 1
            if rec.log_dirs:
                s["offline"] += 1
        elif isinstance(rec, PartitionChangeRecord) and rec.directories is not None:
            s["assignments"] += 1
    return s


def run(capture: Path | None, keep: Path | None, out: Callable[[str], None]) -> DemoResult:
    """Synchronous entry for the CLI: a temporary folder (or ``keep``), always cleaned up
    unless ``keep`` was given."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        return asyncio.run(run_demo(keep, out=out, capture=capture))
    with tempfile.TemporaryDirectory(prefix="kraft-jbod-demo-") as tmp:
        return asyncio.run(run_demo(Path(tmp), out=out, capture=capture))
