"""Controller restart CPU: newest snapshot + log tail vs replaying the whole metadata log.

Setup (not timed): 100 registered brokers with 10 directories each, then CreateTopics
through the state machine until ``--partitions`` partitions exist (topics of 1,000
partitions, RF 3), appended to a real metadata log (fsync off). A snapshot of that image
is written (``controller/snapshot.py``, Kafka's ``.checkpoint`` format) and the log rolled,
as the server does, then a tail of ``--tail-topics`` more topics is appended after it.

Timed, each in a fresh process so neither warms the other (CPU seconds of that process,
``time.process_time``):

* ``full``: open the log (recovery: every batch length- and CRC-checked) and replay every
  record into a fresh ``ControllerState`` (what a restart cost before snapshots).
* ``snapshot``: open the log (whose segments below the snapshot were deleted, as the server
  does after a snapshot), load the newest snapshot (read, CRC, decode, apply) and replay
  only the records after it: ``snapshot.restart``, what ``ControllerServer.start`` runs.

Both run with the collector paused, as ``snapshot.restart`` does (it halves either).

``--history-rounds K`` first moves the leadership of every partition K times
(PartitionChangeRecords, as elections write) before the snapshot: a log with history, where
the snapshot is smaller than the log. With K = 0 the log holds only the creations, so the
snapshot holds the same records as the log and the two restarts cost about the same.

Both end states must agree (``snapshot.comparable``), or the run fails. The ratio
snapshot/full is what to compare on a loaded machine.

``--baseline REV`` adds a third restart in the same run: the full replay as the code of git
revision REV did it (its own ``kraft_jbod`` and this benchmark, from ``git archive``, with
its compiled codec built by ``cc`` when there is one), on the same log. Against the
revision before snapshots existed, that is "the CPU replaying the full log took".

Run: ``python -m tools.bench.bench_restart [--partitions 1000000] [--baseline REV] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

BROKERS = 100
DIRS = 10
PER_TOPIC = 1000
CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _build(directory: Path, partitions: int, tail_topics: int, history: int, segment_bytes: int) -> dict[str, Any]:
    from kraft_jbod.controller import features as fv
    from kraft_jbod.controller import snapshot as snap
    from kraft_jbod.controller.log import MetadataLog
    from kraft_jbod.controller.state import ControllerState
    from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord

    log = MetadataLog.open(directory, fsync=False, segment_bytes=segment_bytes)
    state = ControllerState(cluster_id=CLUSTER, node_id=3000)

    def commit(records: list[Any]) -> None:
        base = log.append(records, timestamp_ms=0)
        for i, (rec, ver) in enumerate(records):
            state.apply(base + i, rec, ver)

    def create(topic: int, n: int) -> None:
        req = CreateTopicsRequest(topics=[CreatableTopic(name=f"t{topic}", num_partitions=n, replication_factor=3)])
        outcome = state.handle(19, 7, req, now_ms=0, next_offset=log.end_offset)
        response: Any = outcome.response
        if response.topics[0].error_code != 0:
            raise SystemExit(f"CreateTopics failed: {response.topics[0]}")
        commit(outcome.records)

    commit(ControllerState.bootstrap_records(fv.DEFAULT_LEVEL))
    commit(
        [
            (
                RegisterBrokerRecord(
                    broker_id=b,
                    incarnation_id=uuid.UUID(int=b + 1),
                    broker_epoch=log.end_offset + b,
                    fenced=False,
                    log_dirs=[uuid.UUID(int=(b + 1) << 64 | d) for d in range(DIRS)],
                ),
                3,
            )
            for b in range(BROKERS)
        ]
    )
    made = topic = 0
    while made < partitions:
        n = min(PER_TOPIC, partitions - made)
        create(topic, n)
        made += n
        topic += 1
    # History: rounds of leadership moving to the next replica of every partition (the
    # PartitionChangeRecords an election writes), so the log is longer than the image.
    from kraft_jbod.messages.partition_change_record import PartitionChangeRecord

    pcv = fv.partition_change_record_version(state.metadata_version)
    for r in range(history):
        batch: list[Any] = []
        for p in list(state.partitions()):
            leader = p.replicas[(r + 1) % len(p.replicas)]
            batch.append((PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id, leader=leader), pcv))
            if len(batch) == PER_TOPIC:
                commit(batch)
                batch = []
        commit(batch)
    t = time.process_time()
    path = snap.write_image_snapshot(
        directory, state.image, epoch=log.leader_epoch, last_contained_timestamp=0, fsync=False
    )
    write_cpu = time.process_time() - t
    log.roll()  # as the server does after a snapshot
    for _ in range(tail_topics):
        create(topic, 10)
        topic += 1
    out = {
        "records": log.end_offset,
        "snapshot_bytes": path.stat().st_size,
        "snapshot_write_cpu_s": write_cpu,
        "log_bytes": sum(p.stat().st_size for p in log.segment_paths),
    }
    log.close()
    # The full-replay copy: the whole log, no snapshot (a restart before snapshots).
    full = directory.parent / "full"
    shutil.copytree(directory, full, ignore=shutil.ignore_patterns("*.checkpoint", ".lock"))
    # The snapshot copy: segments wholly below the snapshot deleted, as the server does
    # (it rolls the log at each snapshot, so that is all of them).
    sid = snap.parse_name(path.name)
    assert sid is not None
    with MetadataLog.open(directory, fsync=False) as log:
        out["segments_deleted"] = log.delete_segments_below(sid.end_offset)
        out["log_bytes_after_snapshot"] = sum(p.stat().st_size for p in log.segment_paths)
    return out


def _restart(directory: Path, mode: str) -> dict[str, Any]:
    from kraft_jbod.controller import snapshot as snap
    from kraft_jbod.controller.log import MetadataLog
    from kraft_jbod.controller.state import ControllerState

    t = time.process_time()
    log = MetadataLog.open(directory, fsync=False, lock=False, read_only=True)
    state = ControllerState(cluster_id=CLUSTER, node_id=3000)
    if mode == "snapshot":
        done = snap.restart(state, log, directory)
        assert done.snapshot is not None, "no snapshot"
    else:
        # The whole log, as a start without snapshots did (same collector policy).
        with snap.collector_paused():
            replayed = 0
            for offset, rec, ver in log.replay(0):
                state.apply(offset, rec, ver)
                replayed += 1
        done = snap.Restart(None, replayed)
    replayed = done.replayed
    cpu = time.process_time() - t
    log.close()
    digest = hash(repr(snap.comparable(state.image)))
    return {"cpu_s": cpu, "replayed_records": replayed, "partitions": state.image.partition_total, "digest": digest}


ROOT = Path(__file__).resolve().parents[2]


def _baseline_tree(rev: str, parent: Path) -> tuple[Path, str]:
    """The code of ``rev`` in ``parent/baseline`` and the codec it will run on."""
    tree = parent / "baseline"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", rev, "kraft_jbod", "tools"], cwd=ROOT, capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"--baseline {rev}: git archive failed: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    source = tree / "kraft_jbod" / "_accel" / "_ccodec.c"
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not source.exists() or compiler is None:
        return tree, "python"
    target = source.with_name("_ccodec" + str(sysconfig.get_config_var("EXT_SUFFIX")))
    include = sysconfig.get_paths()["include"]
    built = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", f"-I{include}", str(source), "-o", str(target)],
        capture_output=True,
        check=False,
    )
    return tree, "c" if built.returncode == 0 else "python"


def _child(args: list[str], tree: Path | None = None, codec: str | None = None) -> dict[str, Any]:
    env = dict(os.environ, PYTHONHASHSEED="0")
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    if codec is not None:
        env["KRAFT_JBOD_CODEC"] = codec
    done = subprocess.run(
        [sys.executable, "-m", "tools.bench.bench_restart", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=tree,
    )
    if done.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=200_000)
    ap.add_argument("--tail-topics", type=int, default=10)
    ap.add_argument(
        "--history-rounds", type=int, default=0, help="rounds of leader moves over every partition before the snapshot"
    )
    ap.add_argument("--segment-bytes", type=int, default=64 * 1024 * 1024, help="metadata log segment size")
    ap.add_argument(
        "--baseline", metavar="REV", help="also time the full replay of git revision REV's code on the same log"
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--_build", help=argparse.SUPPRESS)
    ap.add_argument("--_restart", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a._build:
        print(json.dumps(_build(Path(a._build), a.partitions, a.tail_topics, a.history_rounds, a.segment_bytes)))
        return 0
    if a._restart:
        print(json.dumps(_restart(Path(a._restart[0]), a._restart[1])))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        snapdir = str(Path(tmp) / "snapshot")
        built = _child(
            [
                "--partitions",
                str(a.partitions),
                "--tail-topics",
                str(a.tail_topics),
                "--history-rounds",
                str(a.history_rounds),
                "--segment-bytes",
                str(a.segment_bytes),
                "--_build",
                snapdir,
            ]
        )
        full = _child(["--_restart", str(Path(tmp) / "full"), "full"])
        fast = _child(["--_restart", snapdir, "snapshot"])
        base = None
        if a.baseline:
            tree, base_codec = _baseline_tree(a.baseline, Path(tmp))
            base = _child(["--_restart", str(Path(tmp) / "full"), "full"], tree, base_codec)
            if base["partitions"] != full["partitions"]:
                print("the baseline's full replay built a different number of partitions", file=sys.stderr)
                return 1
    if full["digest"] != fast["digest"] or full["partitions"] != fast["partitions"]:
        print("the two restarts built different states", file=sys.stderr)
        return 1
    out = {
        "partitions": a.partitions,
        "history_rounds": a.history_rounds,
        **built,
        "full_cpu_s": full["cpu_s"],
        "snapshot_cpu_s": fast["cpu_s"],
        "tail_records": fast["replayed_records"],
        "ratio": fast["cpu_s"] / full["cpu_s"],
    }
    if base is not None:
        out.update(
            {
                "baseline": a.baseline,
                "baseline_codec": base_codec,
                "baseline_full_cpu_s": base["cpu_s"],
                "ratio_to_baseline": fast["cpu_s"] / base["cpu_s"],
            }
        )
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>22}: {v:.3f}" if isinstance(v, float) else f"{k:>22}: {v}")
        print(f"snapshot restart / full replay = {out['ratio']:.3f}")
        if base is not None:
            print(f"snapshot restart / full replay at {a.baseline} = {out['ratio_to_baseline']:.3f} (target <= 0.200)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
