"""A fake broker and a real Kafka 4.4 broker in one cluster, asked the same JBOD questions.

Broker 1 is Kafka 4.4 (the real-broker build), broker 2 the fake broker (``kraft-jbod
broker`` as a process), both with two log dirs, against the mock controller at
metadata.version 4.3-IV0. A topic with both brokers as replicas is created through the real
broker; then both get the same DescribeLogDirs (v5) and AlterReplicaLogDirs (v2) requests in
three states, and their answers must have the same shape and errors:

* at rest: every dir online, sizes of its filesystem, not cordoned, the replicas spread;
* a replica moved between the broker's dirs (AlterReplicaLogDirs NONE, then found in the
  new dir), and the errors for an unknown dir and an unknown partition;
* a dir failed by replacing it with a file, as Kafka's own tests do: that dir answers
  KAFKA_STORAGE_ERROR with no replicas and no sizes, a move into it KAFKA_STORAGE_ERROR, a
  move to where a replica already is NONE;
* (a second cluster) both started with their second dir cordoned: it answers IsCordoned and
  holds no new replica, and a move into it is INVALID_REPLICA_ASSIGNMENT.

The answers of both are printed (``-s``) for the record.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.messages.alter_replica_log_dirs_request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from kraft_jbod.messages.describe_log_dirs_request import DescribeLogDirsRequest
from kraft_jbod.realkafka import logs, probe
from kraft_jbod.realkafka.cluster import fail_dir_as_kafka_tests_do, wait_until
from kraft_jbod.storage import StorageLayout, format_storage, read_meta_properties
from tests.realbrokers import ops
from tests.realbrokers.conftest import Cluster

TOPIC = "sidebyside"
# What the real broker logs in this scenario, each caused on purpose.
BENIGN = (
    logs.Benign(
        r"ERROR \[ReplicaFetcher replicaId=1, leaderId=2, fetcherId=\d+\] Error for partition ",
        "following a partition the fake broker leads",
        "the fake broker has no data path: its Fetch answers TOPIC_AUTHORIZATION_FAILED",
        detail=r"TopicAuthorizationException",
    ),
    logs.Benign(
        r"WARN \[ReplicaManager broker=1\] Unable to alter log dirs for ",
        "AlterReplicaLogDirs refused",
        "the test asks for an unknown dir, a move into an offline dir and into a cordoned one",
        detail=r"(LogDirNotFoundException|KafkaStorageException|InvalidReplicaAssignmentException)",
    ),
    logs.Benign(
        r"ERROR \[ReplicaManager broker=1\] Error while changing replica dir for partition no-such-topic-0 ",
        "AlterReplicaLogDirs for an unknown partition",
        "the test asks for a partition that does not exist (UNKNOWN_TOPIC_OR_PARTITION)",
        detail=r"UnknownTopicOrPartitionException",
    ),
    logs.DESCRIBE_OFFLINE_DIR,
)
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, KAFKA_STORAGE_ERROR, LOG_DIR_NOT_FOUND = 0, 3, 39, 56, 57


class FakeProcess:
    """``python -m kraft_jbod broker`` for broker 2, its client address read from its output;
    the port it got first is kept for restarts, as the real brokers' are."""

    def __init__(self, root: Path, controller: tuple[str, int], cluster_id: str, extra: dict[str, str]) -> None:
        self.root = root
        self.dirs = [root / "d0", root / "d1"]
        self.props = {
            "process.roles": "broker",
            "node.id": "2",
            "controller.quorum.voters": f"3000@{controller[0]}:{controller[1]}",
            "controller.listener.names": "CONTROLLER",
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": ",".join(map(str, self.dirs)),
            "metadata.log.dir": str(root / "meta"),
            "kraft.jbod.probe.interval.ms": "200",
            **{k: v.replace("{d1}", str(self.dirs[1])) for k, v in extra.items()},
        }
        self.config = root / "broker.properties"
        root.mkdir(parents=True, exist_ok=True)
        self.cluster_id = cluster_id
        self.format()
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ("", 0)
        self.start()

    def format(self) -> None:
        """``kraft-jbod storage format``: new dirs formatted, existing ids kept (--ignore-formatted)."""
        format_storage(StorageLayout.from_properties(self.props), self.cluster_id)

    def _launch(self) -> subprocess.Popen[bytes]:
        self.config.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        with open(self.root / "broker.log", "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "kraft_jbod", "broker", "-c", str(self.config)],
                stdout=subprocess.PIPE,
                stderr=log,
                env={**os.environ},
            )

    def start(self) -> None:
        self.proc = self._launch()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()
        assert line.startswith("listening on PLAINTEXT "), line + self.log_text()
        host, _, port = line.split()[-1].rpartition(":")
        self.address = (host, int(port))
        self.props["listeners"] = f"PLAINTEXT://{host}:{port}"

    def start_refused(self) -> tuple[int, str]:
        """Start a broker expected to refuse: its exit status and its log."""
        proc = self._launch()
        code = proc.wait(120)
        return code, self.log_text()

    def log_text(self) -> str:
        return (self.root / "broker.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


def _mixed(real_cluster: Callable[..., Cluster], root: Path, cordon: bool) -> tuple[Cluster, FakeProcess]:
    cluster = real_cluster(
        controller="mock", brokers=1, log_dirs=2, metadata_version="4.3-IV0", cordoned={1: [1]} if cordon else {}
    )
    assert cluster.controller is not None
    meta = read_meta_properties(cluster.controller.data_dir)
    assert meta is not None and meta.cluster_id
    extra = {"cordoned.log.dirs": "{d1}"} if cordon else {}
    return cluster, FakeProcess(root / "fake-2", cluster.controller.address, meta.cluster_id, extra)


@pytest.fixture
def mixed(real_cluster: Callable[..., Cluster], tmp_path: Path) -> Iterator[tuple[Cluster, FakeProcess]]:
    cluster, fake = _mixed(real_cluster, tmp_path, cordon=False)
    try:
        cluster.wait_unfenced([1, 2])
        yield cluster, fake
    finally:
        fake.stop()


@pytest.fixture
def mixed_cordoned(real_cluster: Callable[..., Cluster], tmp_path: Path) -> Iterator[tuple[Cluster, FakeProcess]]:
    cluster, fake = _mixed(real_cluster, tmp_path, cordon=True)
    try:
        cluster.wait_unfenced([1, 2])
        yield cluster, fake
    finally:
        fake.stop()


def describe(address: tuple[str, int]) -> Any:
    return probe.call(address, DescribeLogDirsRequest(topics=None), 5)


def shape(resp: Any, dirs: list[Path]) -> list[tuple[Any, ...]]:
    """What must agree: per dir (in log.dirs order) its error, cordon flag, whether sizes are
    there, and how many replicas of the topic it holds; the top-level error."""
    by_path = {r.log_dir: r for r in resp.results}
    out: list[tuple[Any, ...]] = [("error", resp.error_code)]
    for i, d in enumerate(dirs):
        r = by_path[str(d)]
        held = sum(len(t.partitions) for t in r.topics if t.name == TOPIC)
        out.append((i, r.error_code, r.is_cordoned, r.total_bytes > 0, r.usable_bytes > 0, held))
    return out


def where(resp: Any, dirs: list[Path]) -> dict[int, int]:
    """partition -> index of the dir that holds it (not a future replica)."""
    out = {}
    for r in resp.results:
        for t in r.topics:
            for p in t.partitions:
                if t.name == TOPIC and not p.is_future_key:
                    out[p.partition_index] = [str(d) for d in dirs].index(r.log_dir)
    return out


def alter(address: tuple[str, int], path: str, topic: str, partition: int) -> int:
    body = AlterReplicaLogDirsRequest(
        dirs=[AlterReplicaLogDir(path=path, topics=[AlterReplicaLogDirTopic(topic, [partition])])]
    )
    resp = probe.call(address, body, 2)
    (result,) = resp.results
    (part,) = result.partitions
    return int(part.error_code)


def show(name: str, resp: Any) -> None:
    print(f"--- {name}")
    for r in resp.results:
        parts = sorted(
            (t.name, p.partition_index, p.partition_size, p.is_future_key) for t in r.topics for p in t.partitions
        )
        print(
            f"  {r.log_dir} error={r.error_code} total={r.total_bytes} usable={r.usable_bytes} cordoned={r.is_cordoned} {parts}"
        )


def test_describe_and_alter_log_dirs_answer_alike(mixed: tuple[Cluster, FakeProcess]) -> None:
    cluster, fake = mixed
    cluster.benign += [*logs.DIR_FAILURE, *BENIGN]
    real = cluster.brokers[1]
    nodes = {"real": (real.address, list(real.log_dirs)), "fake": (fake.address, fake.dirs)}
    ops.create_via_broker(cluster, TOPIC, [[1, 2], [2, 1], [1, 2], [2, 1]])
    for name, (addr, dirs) in nodes.items():
        wait_until(f"{name} holding 4 replicas", lambda addr=addr, dirs=dirs: len(where(describe(addr), dirs)) == 4, 60)

    # 1. at rest
    rest = {name: describe(addr) for name, (addr, _) in nodes.items()}
    for name, resp in rest.items():
        show(f"{name} at rest", resp)
    shapes = {name: shape(rest[name], dirs) for name, (_, dirs) in nodes.items()}
    assert (
        [s[:5] for s in shapes["real"][1:]]
        == [s[:5] for s in shapes["fake"][1:]]
        == [
            (0, NONE, False, True, True),
            (1, NONE, False, True, True),
        ]
    )
    assert sum(s[5] for s in shapes["real"][1:]) == sum(s[5] for s in shapes["fake"][1:]) == 4

    # 2. a replica moved between dirs, and the errors for an unknown dir and partition
    for name, (addr, dirs) in nodes.items():
        placed = where(rest[name], dirs)
        partition = min(placed)
        target = 1 - placed[partition]
        assert alter(addr, str(dirs[target]), TOPIC, partition) == NONE, name
        wait_until(
            f"{name}: partition {partition} in dir {target}",
            lambda addr=addr, dirs=dirs, partition=partition, target=target: (
                where(describe(addr), dirs).get(partition) == target
            ),
            60,
        )
        assert alter(addr, "/no/such/dir", TOPIC, partition) == LOG_DIR_NOT_FOUND, name
        assert alter(addr, str(dirs[0]), "no-such-topic", 0) == UNKNOWN_TOPIC_OR_PARTITION, name
    for name, (addr, _) in nodes.items():
        show(f"{name} after a move", describe(addr))

    # 3. the second dir of each broker fails (replaced by a file)
    for _, dirs in nodes.values():
        fail_dir_as_kafka_tests_do(dirs[1])
    for name, (addr, dirs) in nodes.items():
        wait_until(
            f"{name}: dir 1 offline",
            lambda addr=addr, dirs=dirs: shape(describe(addr), dirs)[2][1] == KAFKA_STORAGE_ERROR,
            60,
        )
    offline = {name: describe(addr) for name, (addr, _) in nodes.items()}
    for name, resp in offline.items():
        show(f"{name} with dir 1 offline", resp)
    for name, (addr, dirs) in nodes.items():
        gone = next(r for r in offline[name].results if r.log_dir == str(dirs[1]))
        assert (gone.error_code, gone.topics, gone.total_bytes, gone.usable_bytes) == (KAFKA_STORAGE_ERROR, [], -1, -1)
        assert shape(offline[name], dirs)[1][:5] == (0, NONE, False, True, True), name
        kept = next(iter(where(offline[name], dirs)))
        assert alter(addr, str(dirs[1]), TOPIC, kept) == KAFKA_STORAGE_ERROR, name
        assert alter(addr, str(dirs[0]), TOPIC, kept) == NONE, name  # already there


def test_a_cordoned_dir_answers_alike(mixed_cordoned: tuple[Cluster, FakeProcess]) -> None:
    """Both brokers started with their second dir in cordoned.log.dirs (KIP-1066)."""
    cluster, fake = mixed_cordoned
    cluster.benign += list(BENIGN)
    real = cluster.brokers[1]
    nodes = {"real": (real.address, list(real.log_dirs)), "fake": (fake.address, fake.dirs)}
    ops.create_via_broker(cluster, TOPIC, [[1, 2], [2, 1], [1, 2], [2, 1]])
    for name, (addr, dirs) in nodes.items():
        wait_until(f"{name} holding 4 replicas", lambda addr=addr, dirs=dirs: len(where(describe(addr), dirs)) == 4, 60)
    for name, (addr, dirs) in nodes.items():
        resp = describe(addr)
        show(f"{name} with dir 1 cordoned", resp)
        assert shape(resp, dirs)[1:] == [(0, NONE, False, True, True, 4), (1, NONE, True, True, True, 0)], name
        assert alter(addr, str(dirs[1]), TOPIC, 0) == INVALID_REPLICA_ASSIGNMENT, name


RESTART_TOPIC = "restarts"
RESTART_PARTITIONS = 6


def _restart_cases(cluster: Cluster, fake: FakeProcess, node: int) -> dict[str, object]:
    """Put broker ``node`` (1 real, 2 fake) through the restart cases; what each one did."""
    real = cluster.brokers[1]
    dirs = list(real.log_dirs) if node == 1 else fake.dirs
    d2 = dirs[1]

    def address() -> tuple[str, int]:
        return real.address if node == 1 else fake.address

    def stop() -> None:
        if node == 1:
            cluster.stop_broker(1)
        else:
            fake.stop()

    def start() -> None:
        if node == 1:
            cluster.start_broker(1)
        else:
            fake.start()
        cluster.wait_unfenced([1, 2])

    def held(resp: Any) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {0: set(), 1: set()}
        for r in resp.results:
            for t in r.topics:
                if t.name == RESTART_TOPIC:
                    out[[str(d) for d in dirs].index(r.log_dir)] |= {p.partition_index for p in t.partitions}
        return out

    def offline_here() -> set[int]:
        view = probe.metadata(real.address, [RESTART_TOPIC])
        return {p for (t, p), v in view.partitions.items() if t == RESTART_TOPIC and node in v.offline_replicas}

    before = held(describe(address()))
    in_d2 = before[1]
    assert in_d2 and before[0], f"broker {node} spreads the topic over both dirs"
    out: dict[str, object] = {}

    # a. the second dir replaced by a file
    stop()
    aside = d2.with_name(d2.name + ".aside")
    shutil.move(d2, aside)
    d2.write_text("not a directory\n")
    start()
    wait_until(f"broker {node}: the file-dir's replicas offline", lambda: offline_here() == in_d2, 120)
    resp = describe(address())
    show(f"broker {node}, dir 2 a file", resp)
    gone = next(r for r in resp.results if r.log_dir == str(d2))
    out["file: dir 2"] = (gone.error_code, len(gone.topics), gone.total_bytes)
    out["file: replicas of dir 2 offline, not re-created"] = offline_here() == in_d2 and held(resp)[0] == before[0]

    # b. the original dir back
    stop()
    d2.unlink()
    shutil.move(aside, d2)
    start()
    wait_until(f"broker {node}: every replica online again", lambda: not offline_here(), 120)
    out["dir back: replicas where they were"] = held(describe(address())) == before

    # c. a new, empty, unformatted disk
    stop()
    shutil.rmtree(d2)
    d2.mkdir()
    if node == 1:
        text = cluster.broker_restart_refused(1)
        refused = f"No `meta.properties` found in {d2}" in text
    else:
        code, text = fake.start_refused()
        refused = code != 0 and f"no meta.properties in {d2}" in text
    out["empty unformatted: start refused"] = refused

    # d. formatted (--ignore-formatted keeps the other dirs' ids)
    if node == 1:
        result = cluster.format_with_kafka(real)
        assert result.returncode == 0, result.stdout + result.stderr
    else:
        fake.format()
    start()
    wait_until(f"broker {node}: every replica online again", lambda: not offline_here(), 120)
    wait_until(
        f"broker {node}: the replicas re-created",
        lambda: set().union(*held(describe(address())).values()) == set(range(RESTART_PARTITIONS)),
        120,
    )
    resp = describe(address())
    show(f"broker {node}, dir 2 formatted anew", resp)
    out["formatted: all replicas held, dirs online"] = all(r.error_code == 0 for r in resp.results)
    # Kafka's nextLogDirs puts each re-created log in the dir with the fewest: the new one.
    out["formatted: re-created in the new dir"] = held(resp)[1] == in_d2
    return out


def test_restarts_with_a_dir_gone_end_alike(mixed: tuple[Cluster, FakeProcess]) -> None:
    cluster, fake = mixed
    cluster.benign += [*logs.RESTART_WITHOUT_A_DIR, *BENIGN]
    ops.create_via_broker(cluster, RESTART_TOPIC, [[1, 2], [2, 1]] * (RESTART_PARTITIONS // 2))
    for addr in (cluster.brokers[1].address, fake.address):
        wait_until(
            "both brokers holding the topic",
            lambda addr=addr: (
                sum(len(t.partitions) for r in describe(addr).results for t in r.topics if t.name == RESTART_TOPIC)
                == RESTART_PARTITIONS
            ),
            60,
        )
    real_outcome = _restart_cases(cluster, fake, 1)
    fake_outcome = _restart_cases(cluster, fake, 2)
    for case in real_outcome:
        print(f"{case:55} real {real_outcome[case]!s:20} fake {fake_outcome[case]}")
    assert real_outcome == fake_outcome
    assert real_outcome["file: dir 2"] == (KAFKA_STORAGE_ERROR, 0, -1)
    assert all(v is True for k, v in real_outcome.items() if k != "file: dir 2"), real_outcome
