"""Controller CPU on its two bulk paths, with the compiled codec and with the Python one.

1. ``create``: CreateTopics through the state machine until ``--partitions`` partitions
   exist (topics of 1,000 partitions, RF 3, 100 registered brokers with 10 directories
   each): ``handle()``, the records appended to a real metadata log (encoding, record
   batches, CRC; fsync off), and ``apply()`` of every record.
2. ``replay``: a fresh state replays that log from disk (``MetadataLog.replay()``: batch
   parsing, CRC, record decoding) and applies every record; ``decode`` is the same read
   without ``apply`` (the share of reading and decoding).

Each backend runs in its own process (``KRAFT_JBOD_CODEC=python`` / ``c``), one after
the other; figures are CPU seconds of that process (``time.process_time``). The python
backend is the "before" (the codec this project had before the compiled one), ``c`` the
"after"; the state machine code is the same in both.

Run: ``python -m tools.bench.bench_controller_cpu [--partitions 200000]`` (the issue's
figures are at ``--partitions 1000000``, which takes several minutes per backend).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

BROKERS = 100
DIRS = 10
PER_TOPIC = 1000


def _run(partitions: int) -> dict[str, Any]:
    from kraft_jbod import codec_backend
    from kraft_jbod.controller import features as fv
    from kraft_jbod.controller.log import MetadataLog
    from kraft_jbod.controller.state import ControllerState
    from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord

    def fresh() -> ControllerState:
        return ControllerState(cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=3000)

    out: dict[str, Any] = {"backend": codec_backend(), "partitions": partitions}
    with tempfile.TemporaryDirectory(prefix="bench-ctl-") as tmp:
        log = MetadataLog.open(Path(tmp), fsync=False)
        state = fresh()

        def commit(records: list[Any]) -> None:
            base = log.append(records, timestamp_ms=0)
            for i, (rec, ver) in enumerate(records):
                state.apply(base + i, rec, ver)

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
        t = time.process_time()
        made = 0
        topic = 0
        while made < partitions:
            n = min(PER_TOPIC, partitions - made)
            req = CreateTopicsRequest(topics=[CreatableTopic(name=f"t{topic}", num_partitions=n, replication_factor=3)])
            outcome = state.handle(19, 7, req, now_ms=0, next_offset=log.end_offset)
            response: Any = outcome.response
            if response.topics[0].error_code != 0:
                raise SystemExit(f"CreateTopics failed: {response.topics[0]}")
            commit(outcome.records)
            made += n
            topic += 1
        out["create_cpu_s"] = time.process_time() - t
        out["records"] = log.end_offset
        log.close()

        log = MetadataLog.open(Path(tmp), fsync=False, lock=False)
        t = time.process_time()
        count = sum(1 for _ in log.replay())
        out["decode_cpu_s"] = time.process_time() - t
        replayed = fresh()
        t = time.process_time()
        for offset, rec, ver in log.replay():
            replayed.apply(offset, rec, ver)
        out["replay_cpu_s"] = time.process_time() - t
        out["replayed_records"] = count
        log.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--partitions", type=int, default=200_000)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(_run(args.partitions)))
        return 0
    results = {}
    for backend in ("python", "c"):
        env = {**os.environ, "KRAFT_JBOD_CODEC": backend}
        proc = subprocess.run(
            [sys.executable, "-m", "tools.bench.bench_controller_cpu", "--child", "--partitions", str(args.partitions)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            print(f"{backend}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
            return 1
        results[backend] = json.loads(proc.stdout)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"{args.partitions} partitions, {results['c']['records']} records; CPU seconds, python codec -> C codec")
    for key, label in (
        ("create_cpu_s", "CreateTopics (handle + log append + apply)"),
        ("decode_cpu_s", "log read + decode"),
        ("replay_cpu_s", "replay (read + decode + apply)"),
    ):
        before, after = results["python"][key], results["c"][key]
        print(f"  {label:<44} {before:8.2f} -> {after:8.2f}   ({before / after:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
