"""Benchmark: failing one log directory costs O(replicas in it), not O(partitions).

Builds a controller state with 100 brokers x 10 directories and N partitions (RF 3,
replicas spread evenly over the directories), then measures one heartbeat reporting a
directory offline: ``handle()`` plus ``apply()`` of every record it produced, plus
encoding those records the way the log would. The failed ("probe") directories hold
the share of replicas a directory really holds at the large size (``--per-dir``,
default ``large x RF / (brokers x dirs)`` = 3,000 at 1M partitions) at *both* cluster
sizes, so the measurement isolates what the *rest* of the cluster costs: with the
(broker, directory) index it should cost nothing. Run at 100,000 and 1,000,000 partitions in the same process and
print the ratio (target <= 1.3x) and the process RSS.

    .venv/bin/python -m tools.bench.bench_dir_failure [--small N] [--large N] [--reps R]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import uuid

from kraft_jbod import codec
from kraft_jbod.controller import features as fv
from kraft_jbod.controller.placement import place_replicas
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.partition_record import PartitionRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord
from kraft_jbod.messages.topic_record import TopicRecord

BROKERS = 100
DIRS = 10
RF = 3
PARTITIONS_PER_TOPIC = 1000


def _dir(broker: int, index: int) -> uuid.UUID:
    return uuid.UUID(int=(0x1000 + broker) << 64 | (0x100 + index))


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def build(partitions: int, probes: int, per_dir: int) -> tuple[ControllerState, int]:
    """A state as replay would leave it; returns it and the next log offset."""
    state = ControllerState(cluster_id="bench", node_id=3000)
    offset = 0
    state.apply(offset, FeatureLevelRecord(name="metadata.version", feature_level=fv.DEFAULT_LEVEL), 0)
    offset += 1
    for b in range(BROKERS):
        dirs = [_dir(b, i) for i in range(DIRS)]
        reg = RegisterBrokerRecord(
            broker_id=b, incarnation_id=uuid.UUID(int=b + 1000), broker_epoch=offset, fenced=False, log_dirs=dirs
        )
        state.apply(offset, reg, 3)
        offset += 1
    brokers = list(range(BROKERS))
    probe_fill = [0] * probes  # directory 0 of brokers 0..probes-1 gets exactly per_dir replicas
    made = 0
    t = 0
    while made < partitions:
        n = min(PARTITIONS_PER_TOPIC, partitions - made)
        tid = uuid.UUID(int=(0x7777 << 64) | t)
        state.apply(offset, TopicRecord(name=f"topic-{t}", topic_id=tid), 0)
        offset += 1
        plan = place_replicas(brokers, n, RF, start=made, shift=made // BROKERS)
        for pid, replicas in enumerate(plan):
            global_index = made + pid
            dirs = []
            for r, b in enumerate(replicas):
                index = (global_index // BROKERS + r) % DIRS
                if b < probes:
                    if probe_fill[b] < per_dir:
                        probe_fill[b] += 1
                        index = 0
                    elif index == 0:
                        index = 1 + global_index % (DIRS - 1)
                dirs.append(_dir(b, index))
            rec = PartitionRecord(
                partition_id=pid,
                topic_id=tid,
                replicas=replicas,
                isr=list(replicas),
                leader=replicas[0],
                leader_epoch=0,
                partition_epoch=0,
                directories=dirs,
            )
            state.apply(offset, rec, 1)
            offset += 1
        made += n
        t += 1
    if min(probe_fill, default=per_dir) < per_dir:
        raise SystemExit(f"{partitions} partitions cannot fill {probes} probe dirs with {per_dir} replicas")
    return state, offset


def fail_one_dir(state: ControllerState, offset: int, broker: int, directory: uuid.UUID) -> tuple[float, int, int]:
    """Seconds for handle + encode + apply of one offline-dir heartbeat; records; offset."""
    reg = state.brokers[broker]
    req = BrokerHeartbeatRequest(
        broker_id=broker, broker_epoch=reg.epoch, current_metadata_offset=offset, offline_log_dirs=[directory]
    )
    start = time.perf_counter()
    out = state.handle(63, 1, req, now_ms=0, next_offset=offset)
    for rec, ver in out.records:
        codec.encode_metadata_record(rec, ver)
    for i, (rec, ver) in enumerate(out.records):
        state.apply(offset + i, rec, ver)
    elapsed = time.perf_counter() - start
    assert isinstance(out.records[-1][0], BrokerRegistrationChangeRecord)
    return elapsed, len(out.records), offset + len(out.records)


def measure(partitions: int, reps: int, per_dir: int) -> tuple[float, int, float, float]:
    t0 = time.perf_counter()
    state, offset = build(partitions, reps, per_dir)
    build_s = time.perf_counter() - t0
    times: list[float] = []
    records = 0
    for k in range(reps):
        elapsed, n, offset = fail_one_dir(state, offset, k, _dir(k, 0))
        times.append(elapsed)
        records = n
    problems = state.check_invariants() if partitions <= 100_000 else []
    assert problems == [], problems[:5]
    rss = rss_mib()
    del state
    gc.collect()
    return statistics.median(times), records, build_s, rss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=100_000)
    ap.add_argument("--large", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument(
        "--per-dir",
        type=int,
        default=0,
        help="replicas in each failed directory (default: a directory's real share at --large)",
    )
    args = ap.parse_args()
    if args.per_dir <= 0:
        args.per_dir = args.large * RF // (BROKERS * DIRS)
    small = measure(args.small, args.reps, args.per_dir)
    large = measure(args.large, args.reps, args.per_dir)
    for n, (t, recs, build_s, rss) in ((args.small, small), (args.large, large)):
        print(
            f"{n:>9} partitions: fail one dir median {t * 1e3:8.2f} ms  records {recs:5d}  "
            f"(build {build_s:5.1f} s, RSS after build {rss:7.0f} MiB)"
        )
    ratio = large[0] / small[0]
    print(f"failed directory holds {args.per_dir} replicas at both sizes")
    print(f"ratio large/small time: {ratio:.2f}x (target <= 1.3x)")
    print(f"RSS with {args.large} partitions: {large[3]:.0f} MiB (target < 2048 MiB)")


if __name__ == "__main__":
    main()
