"""Controller quorum failovers: how many, how long each election took, what was lost.

Two runs, each losing the leader again and again while records are written through it:

* ``sim``: three :class:`~kraft_jbod.controller.raft.node.RaftNode` voters on the seeded
  in-memory network (``controller/raft/simulation.py``) with Kafka's default timeouts
  (election 1 s, fetch 2 s), ``--sim-failovers`` times per kind (kill, pause, isolate,
  resign), optionally with message loss. Times are simulated milliseconds, so they do not
  depend on the machine's load; the safety checker runs at every simulated millisecond.
* ``tcp``: three voters over TCP on 127.0.0.1 (``kraft_jbod.testing.quorum.LocalQuorum``,
  the test timeouts: election 300 ms, fetch 600 ms), ``--tcp-failovers`` kills and
  restarts of the leader. Wall-clock times; each voter's log is read back from disk at the
  end and compared (prefix-consistent, same length).

"Acknowledged" counts writes whose offset the leader of their epoch reported committed;
"lost" counts acknowledged writes missing from the final logs (must be 0).

Run: ``python -m tools.bench.bench_quorum_failover [--sim-failovers 50] [--tcp-failovers 20]
[--drop-rate 0.05] [--json]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from kraft_jbod.controller.raft.simulation import run_failovers
from kraft_jbod.testing.quorum import LocalQuorum


def _sim(failovers: int, drop_rate: float, seed: int) -> list[dict[str, Any]]:
    rows = []
    for how in ("kill", "pause", "isolate", "resign"):
        r = run_failovers(failovers, how=how, seed=seed, drop_rate=drop_rate)
        rows.append(
            {
                "run": f"sim-{how}",
                "failovers": r.failovers,
                "election_ms_median": r.median_ms,
                "election_ms_worst": r.worst_ms,
                "committed": r.committed,
                "acknowledged": r.acknowledged,
                "lost": r.lost,
            }
        )
    return rows


async def _tcp(failovers: int, directory: Path) -> dict[str, Any]:
    acknowledged: list[tuple[int, bytes]] = []
    async with LocalQuorum(directory) as quorum:
        await quorum.wait_for_leader(timeout=30)
        for r in range(failovers):
            for i in range(20):
                payload = b"w-%d-%d" % (r, i)
                offset, epoch = await quorum.write([payload])
                if await quorum.wait_committed(offset, epoch):
                    acknowledged.append((offset, payload))
            leader = await quorum.wait_for_leader()
            assert leader.node is not None
            old, epoch = leader.node_id, leader.node.epoch
            await quorum.kill(old)
            await quorum.wait_for_leader(above_epoch=epoch, timeout=60)
            await quorum.restart(old)
        final, epoch = await quorum.write([b"last"])
        await quorum.wait_committed(final, epoch)
        for _ in range(500):
            if all(v.log is not None and v.log.end_offset > final for v in quorum.voters.values()):
                break
            await asyncio.sleep(0.02)
        elections = list(quorum.elections)
    logs = LocalQuorum(directory).logs()
    longest = max(logs.values(), key=len)
    consistent = all(entries == longest[: len(entries)] and len(entries) == len(longest) for entries in logs.values())
    lost = sum(1 for o, p in acknowledged if o >= len(longest) or longest[o].payload != p)
    return {
        "run": "tcp-kill",
        "failovers": len(elections),
        "election_ms_median": statistics.median(elections),
        "election_ms_worst": max(elections),
        "committed": len(longest),
        "acknowledged": len(acknowledged),
        "lost": lost,
        "logs_consistent": consistent,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--sim-failovers", type=int, default=50)
    parser.add_argument("--tcp-failovers", type=int, default=20)
    parser.add_argument("--drop-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = _sim(args.sim_failovers, args.drop_rate, args.seed)
    if args.tcp_failovers > 0:
        with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp:
            rows.append(asyncio.run(_tcp(args.tcp_failovers, Path(tmp))))
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(
            f"{'run':<12} {'failovers':>9} {'median ms':>10} {'worst ms':>9} {'committed':>10} {'acked':>7} {'lost':>5}"
        )
        for r in rows:
            print(
                f"{r['run']:<12} {r['failovers']:>9} {r['election_ms_median']:>10.0f} {r['election_ms_worst']:>9} "
                f"{r['committed']:>10} {r['acknowledged']:>7} {r['lost']:>5}"
            )
    return 1 if any(r["lost"] for r in rows) or not all(r.get("logs_consistent", True) for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
