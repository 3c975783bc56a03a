"""Benchmark: real Kafka 4.4 brokers, a log dir failing under load, the mock vs Kafka's controller.

Each round starts a fresh cluster (two real brokers with two log dirs each, the controller
alternating between the mock and Kafka's own from the same build), creates a topic of 8
partitions led by both brokers, produces with acks=all in the background, replaces broker
1's first log dir by a plain file and measures, on one clock:

* ``detect``: failure -> the broker logs that it stops serving the dir (the broker's own
  I/O; the controller plays no part);
* ``move``: the broker's report -> every replica of that dir out of the ISR and every
  leader of it on broker 2, as broker 2's Metadata answers say (the heartbeat that carries
  OfflineLogDirs, the controller's decision, the metadata reaching broker 2);
* ``up``: JVM start -> both brokers unfenced;
* resident memory of each broker and of the controller process.

Prints the median and range per controller and the mock/Kafka ratio of each median. The
broker's heartbeat interval is 1 s here (``broker.heartbeat.interval.ms``), so ``move`` is
bounded below by the wait for the next heartbeat.

    .venv/bin/python -m tools.bench.bench_real_dir_failure [--rounds 3] [--kafka DIR] [--json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from kraft_jbod.realkafka import probe
from kraft_jbod.realkafka.cluster import ClusterSpec, RealCluster, fail_dir_as_kafka_tests_do, wait_until
from kraft_jbod.realkafka.commands import find_kafka
from kraft_jbod.realkafka.distribution import open_distribution

_STOPPING = re.compile(
    r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] WARN \[ReplicaManager broker=1\] Stopping serving", re.MULTILINE
)


def _log_time(text: str) -> float:
    m = _STOPPING.search(text)
    if m is None:
        raise RuntimeError("the broker never logged that it stopped serving the failed dir")
    # Kafka's log4j layout prints local time, as naive datetimes are read
    return dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def one_round(dist: Any, controller: str, root: Path) -> dict[str, float]:
    from confluent_kafka import Producer

    started = time.time()
    with RealCluster(dist, root, ClusterSpec(controller=controller)) as cluster:
        up = time.time() - started
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        assignment = [[1, 2], [2, 1]] * 4
        admin.create_topics(
            [NewTopic("bench", num_partitions=8, replication_factor=-1, replica_assignment=assignment)]
        )["bench"].result(60)
        d1 = cluster.brokers[1].log_dirs[0]
        wait_until(
            "broker 1 holding 8 replicas",
            lambda: sum(len(d.partitions) for d in probe.log_dirs(cluster.brokers[1].address).values()) >= 8,
            60,
        )
        in_d1 = {p for t, p in probe.log_dirs(cluster.brokers[1].address)[str(d1)].partitions if t == "bench"}
        stop = threading.Event()
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True})

        def produce() -> None:
            while not stop.is_set():
                producer.produce("bench", b"x" * 100)
                producer.poll(0.002)

        thread = threading.Thread(target=produce, daemon=True)
        thread.start()
        time.sleep(2)
        failed_at = time.time()
        fail_dir_as_kafka_tests_do(d1)

        def moved() -> bool:
            view = probe.metadata(cluster.brokers[2].address, ["bench"], timeout=5)
            return all(
                view.partitions[("bench", p)].leader == 2 and 1 not in view.partitions[("bench", p)].isr for p in in_d1
            )

        wait_until("leaders off the failed dir", moved, 120, interval=0.01)
        moved_at = time.time()
        stop.set()
        thread.join(10)
        producer.flush(60)
        detected_at = _log_time(cluster.brokers[1].process.log_text())
        rss = cluster.resident_mb()
    return {
        "up_s": up,
        "detect_s": detected_at - failed_at,
        "move_s": moved_at - detected_at,
        "total_s": moved_at - failed_at,
        "broker_rss_mb": max(rss.get("broker-1", 0.0), rss.get("broker-2", 0.0)),
        "controller_rss_mb": rss.get("controller", 0.0),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kafka", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    dist = open_distribution(find_kafka(args.kafka))
    results: dict[str, list[dict[str, float]]] = {"mock": [], "kafka": []}
    for i in range(args.rounds):
        for controller in ("mock", "kafka") if i % 2 == 0 else ("kafka", "mock"):
            root = Path(tempfile.mkdtemp(prefix="bench-real-"))
            try:
                results[controller].append(one_round(dist, controller, root))
            finally:
                shutil.rmtree(root, ignore_errors=True)
    summary: dict[str, Any] = {}
    for key in results["mock"][0]:
        row: dict[str, Any] = {}
        for controller, rounds in results.items():
            values = [r[key] for r in rounds]
            row[controller] = {"median": statistics.median(values), "min": min(values), "max": max(values)}
        kafka_median = row["kafka"]["median"]
        row["mock/kafka"] = row["mock"]["median"] / kafka_median if kafka_median else None
        summary[key] = row
    if args.json:
        print(json.dumps({"rounds": results, "summary": summary}, indent=1))
        return 0
    print(f"{'measure':18} {'mock median (range)':>26} {'kafka median (range)':>26} {'mock/kafka':>10}")
    for key, row in summary.items():
        m, k = row["mock"], row["kafka"]
        ratio = "-" if row["mock/kafka"] is None else f"{row['mock/kafka']:.2f}x"
        print(
            f"{key:18} {m['median']:10.2f} ({m['min']:.2f}-{m['max']:.2f}) {k['median']:13.2f} "
            f"({k['min']:.2f}-{k['max']:.2f}) {ratio:>10}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
