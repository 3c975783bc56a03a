"""Per-replica CPU of the two JBOD paths that grow with a directory's size, in process.

What ``bench_vs_kafka``'s ``assign`` and ``offline*`` phases spend per replica once the
sockets, the log and the fsync are taken away: ``ControllerState.handle`` of the request,
encoding the records it returns (as the log append does) and applying them (as the server
applies a committed batch), on the
layout of ``bench_dir_failure`` (100 brokers x 10 directories, RF 3, 100,000 partitions by
default), metadata.version the default one with ELR on (``eligible.leader.replicas.version``
1, as at 4.3-IV0):

* ``assign``: AssignReplicasToDirs of all of broker 1's replicas in requests of 2,250
  partitions, as Kafka's broker sends them, alternately to its first and second
  directory (so every replica moves); a warm-up pass first, then four measured passes (the median).
* ``offline``: a heartbeat reporting one directory of 3,000 replicas offline, for 8
  brokers in turn (the median is printed).

CPU time of the process (``time.process_time``), so a loaded machine inflates it less than
wall time; the cyclic collector's thresholds are the controller process's
(``controller/commands.py``). ``--root DIR`` measures another checkout in the same run (rounds alternate:
this tree, then DIR), which is how a change's before and after are compared; the child
processes import everything from the tree they measure.

Run: ``python -m tools.bench.bench_per_replica [--rounds 3] [--partitions 100000] [--root DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# Runs in a child process with the measured tree first on sys.path.
CHILD = r"""
import gc, json, statistics, sys, time
from collections import defaultdict
from kraft_jbod import codec
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest, DirectoryData, PartitionData, TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from tools.bench.bench_dir_failure import _dir, build

try:  # the log's encoder (one compiled call per append); a tree from before it: one by one
    from kraft_jbod.controller.log import encode_metadata_values as encode
except ImportError:
    def encode(records):
        for rec, ver in records:
            codec.encode_metadata_record(rec, ver)

try:  # the collector's thresholds as the controller process sets them
    from kraft_jbod.controller.commands import _GC_THRESHOLDS
    gc.set_threshold(*_GC_THRESHOLDS)
except ImportError:
    pass
partitions = int(sys.argv[1])
state, offset = build(partitions, 8, 3000)
state.apply(offset, FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1), 0)
offset += 1
gc.collect()
gc.freeze()


def run(request):
    global offset
    out = state.handle(request[0], request[1], request[2], now_ms=0, next_offset=offset)
    encode(out.records)
    if hasattr(state, "apply_batch"):  # as the server applies a committed batch
        state.apply_batch(offset, out.records)
    else:  # a tree from before apply_batch (--root)
        for i, (rec, ver) in enumerate(out.records):
            state.apply(offset + i, rec, ver)
    offset += len(out.records)


B = 9  # not a probe broker: its replicas spread over its ten directories
held = [(tid, pid) for tid, t in state.image.topics.items() for pid, p in t.partitions.items() if B in p.replicas]


def assign_pass(flip):
    t0 = time.process_time()
    for start in range(0, len(held), 2250):
        by = defaultdict(lambda: defaultdict(list))
        for k, (tid, pid) in enumerate(held[start:start + 2250]):
            by[_dir(B, (k + flip) % 2)][tid].append(pid)
        req = AssignReplicasToDirsRequest(broker_id=B, broker_epoch=state.brokers[B].epoch, directories=[
            DirectoryData(id=d, topics=[
                TopicData(topic_id=t, partitions=[PartitionData(partition_index=p) for p in ps])
                for t, ps in ts.items()
            ]) for d, ts in by.items()
        ])
        run((73, 0, req))
    return (time.process_time() - t0) * 1e6 / len(held)


assign_pass(0)
assign = statistics.median([assign_pass(1), assign_pass(0), assign_pass(1), assign_pass(0)])
offline = []
for b in range(8):
    req = BrokerHeartbeatRequest(broker_id=b, broker_epoch=state.brokers[b].epoch,
                                 current_metadata_offset=offset, offline_log_dirs=[_dir(b, 0)])
    t0 = time.process_time()
    run((63, 1, req))
    offline.append((time.process_time() - t0) * 1e6 / 3000)
print(json.dumps({"assign": assign, "offline": statistics.median(offline), "replicas": len(held)}))
"""


def measure(root: Path, partitions: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(partitions)], env=env, cwd=root, capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=100_000)
    ap.add_argument("--root", type=Path, default=None, help="another checkout to measure in the same run")
    args = ap.parse_args(argv)
    trees = {"this tree": Path(__file__).resolve().parents[2]}
    if args.root is not None:
        trees["--root"] = args.root.resolve()
    got: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    loads = []
    for n in range(args.rounds):
        for name, root in trees.items():
            loads.append(os.getloadavg()[0])
            got[name].append(measure(root, args.partitions))
        print(f"round {n + 1}/{args.rounds} done", flush=True)
    print(f"\nCPU us per replica, median (range) over {args.rounds} rounds; load {min(loads):.1f}-{max(loads):.1f}")
    for name, runs in got.items():
        print(
            f"  {name:10} assign {_fmt([r['assign'] for r in runs])}"
            f"  offline {_fmt([r['offline'] for r in runs])}  ({int(runs[0]['replicas'])} replicas assigned)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
