"""Kafka 4.4's own snapshot reader and image judge our ``.checkpoint`` files.

For each run, ``java/SnapshotProbe.java`` opens our snapshot with Kafka's
``FileRawSnapshotReader`` + ``RecordsSnapshotReader`` (CRC checks on, header required),
replays it through ``MetadataDelta``, and replays the full log the same way: every area of
the two Kafka images (features, cluster, topics, configs, producer ids, ACLs) must be equal.
It also prints Kafka's own ``MetadataImage.write`` of the log's image: our snapshot must hold
the same records, byte for byte once re-serialised by Kafka (the order differs only where
Kafka walks hash maps).

Needs the Kafka 4.4 oracle (``tools/kafka_oracle.py``): skipped where it cannot be found or
built, failed under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from kraft_jbod import codec
from kraft_jbod.controller import snapshot as snap
from kraft_jbod.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from tests.controller.harness import Cluster, dir_id
from tests.controller.test_admin_kafka_image import scripted_run
from tests.oracles.kafka44 import require_kafka_oracle

SOURCE = Path(__file__).resolve().parent / "java" / "SnapshotProbe.java"
CACHE = Path(__file__).resolve().parents[2] / ".cache" / "snapshot-probe"


@pytest.fixture(scope="module")
def snapshot_probe() -> list[str]:
    oracle = require_kafka_oracle()
    javac, java = shutil.which("javac"), shutil.which("java")
    assert javac is not None and java is not None  # the oracle build needed them
    classpath = os.pathsep.join(str(p) for p in oracle.classpath)
    digest = hashlib.sha256(SOURCE.read_bytes() + classpath.encode()).hexdigest()[:20]
    out = CACHE / digest
    if not (out / "SnapshotProbe.class").is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
        try:
            done = subprocess.run(
                [javac, "-nowarn", "--release", "17", "-d", str(staging), "-cp", classpath, str(SOURCE)],
                capture_output=True,
                text=True,
                check=False,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr
            with contextlib.suppress(OSError):
                staging.rename(out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return [java, "-XX:+UseSerialGC", "-cp", f"{out}{os.pathsep}{classpath}", "SnapshotProbe"]


def _probe(
    probe: list[str], c: Cluster, directory: Path, *, epoch: int = 4
) -> tuple[dict[str, str], list[str], list[str]]:
    path = snap.write_image_snapshot(directory, c.state.image, epoch=epoch, last_contained_timestamp=4242)
    sid = snap.parse_name(path.name)
    assert sid is not None
    log_file = directory / "log.hex"
    log_file.write_text("\n".join(raw.hex() for raw in c.log))
    done = subprocess.run(
        [*probe, str(log_file), str(directory), str(sid.end_offset), str(sid.epoch)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    facts: dict[str, str] = {}
    kafka_write: list[str] = []
    ours: list[str] = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key == "kafka.write":
            kafka_write.append(value)
        elif key == "snapshot.record":
            ours.append(value)
        else:
            facts[key] = value
    return facts, kafka_write, ours


def _normalised(records: list[str]) -> Counter[str]:
    """Records as a multiset, with each broker's supported features sorted by name: Kafka keeps
    them in a hash map, so its writer's order there says nothing."""
    out: Counter[str] = Counter()
    for h in records:
        rec, ver = codec.decode_metadata_record(bytes.fromhex(h))
        if isinstance(rec, RegisterBrokerRecord):
            rec.features.sort(key=lambda f: f.name)
        out[codec.encode_metadata_record(rec, ver).hex()] += 1
    return out


def _jbod_run() -> Cluster:
    c = Cluster()  # the default level: cordoned dirs, ELR-era records
    for b in (1, 2, 3):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1), dir_id(b, 2)])
    c.create_topic("t0", 6, 3)
    c.create_topic("t1", 3, 2)
    c.heartbeat(1, offline=[dir_id(1, 2)])
    c.heartbeat(3, cordoned=[dir_id(3, 0)], version=2)
    c.heartbeat(2, want_shut_down=True)
    c.call(67, 0, AllocateProducerIdsRequest(broker_id=1, broker_epoch=c.epoch(1)))
    return c


@pytest.mark.parametrize("run", [_jbod_run, scripted_run], ids=["jbod", "admin"])
def test_kafka_reads_our_snapshot_into_the_image_of_the_log(
    snapshot_probe: list[str], run: object, tmp_path: Path
) -> None:
    c = run()  # type: ignore[operator]
    facts, kafka_write, ours = _probe(snapshot_probe, c, tmp_path)
    assert facts["header.lastContainedLogTimestamp"] == "4242"
    for area in ("features", "cluster", "topics", "configs", "producerIds", "acls"):
        assert facts[f"equal.{area}"] == "true", area
    assert int(facts["count.brokers"]) == len(c.state.brokers)
    assert int(facts["count.topics"]) == len(c.state.topics)
    # The same records Kafka's own image writer produces.
    assert _normalised(ours) == _normalised(kafka_write)
    # metadata.version leads, as Kafka writes it.
    assert ours[0] == kafka_write[0]


def test_the_comparison_can_fail(snapshot_probe: list[str], tmp_path: Path) -> None:
    c = _jbod_run()
    # Damage the image after the log was written: the snapshot then disagrees with the log.
    p = next(iter(c.state.partitions()))
    p.partition_epoch += 5
    facts, kafka_write, ours = _probe(snapshot_probe, c, tmp_path)
    assert facts["equal.topics"] == "false"
    assert _normalised(ours) != _normalised(kafka_write)
