"""``kraft-jbod quorum``: a controller quorum on loopback, failed over on command.

* ``quorum failover``: starts N raft voters on 127.0.0.1 (free ports, a temporary folder or
  ``--dir``), writes records through the leader, loses the leader ``--failovers`` times
  (``--how`` kill, pause, isolate or move), waits for each next leader, and prints one line
  per failover and a summary: election times, records acknowledged, records lost (0 when
  the quorum is right), and whether every voter's log on disk is a prefix-consistent copy.
* ``quorum simulate``: the same on the seeded in-memory network in simulated time, with
  Kafka's default timeouts and optional message loss; fast enough for thousands of failovers.

With ``--dynamic`` both run kraft.version 1 (voters from an initial set, each with a
directory id) and change the voter set before every failover, in turn: a new voter is
started with no voter set and added (AddRaftVoter), then one is removed (RemoveRaftVoter),
every second removal the leader itself; the summary counts them.

Exit status 1 when a record was lost or the logs disagree.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft_jbod import console

if TYPE_CHECKING:
    from kraft_jbod.controller.raft.messages import Entry
    from kraft_jbod.testing.quorum import LocalQuorum

_HOW = ("kill", "pause", "isolate", "move")


def register(sub: Any) -> None:
    q = sub.add_parser("quorum", help="a controller quorum on loopback, failed over on command")
    qs = q.add_subparsers(dest="quorum_command", required=True)
    f = qs.add_parser("failover", help="N voters over TCP; lose the leader again and again")
    f.add_argument("--voters", type=int, default=3)
    f.add_argument("--failovers", type=int, default=5)
    f.add_argument("--how", choices=_HOW, default="kill")
    f.add_argument("--records", type=int, default=10, help="records written before each failover")
    f.add_argument("--dir", type=Path, help="keep the voters' folders here (default: a temporary folder)")
    f.add_argument("--json", action="store_true", help="the summary as one JSON line")
    f.add_argument("--dynamic", action="store_true", help="kraft.version 1: add and remove voters between failovers")
    f.set_defaults(func=cmd_failover)
    s = qs.add_parser("simulate", help="the same in simulated time (Kafka's default timeouts)")
    s.add_argument("--voters", type=int, default=3)
    s.add_argument("--failovers", type=int, default=100)
    s.add_argument("--how", choices=("kill", "pause", "isolate", "resign"), default="kill")
    s.add_argument("--drop-rate", type=float, default=0.0, help="share of messages lost (0-1)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--json", action="store_true")
    s.add_argument("--dynamic", action="store_true", help="kraft.version 1: add and remove voters between failovers")
    s.set_defaults(func=cmd_simulate)


def cmd_simulate(args: argparse.Namespace) -> int:
    from kraft_jbod.controller.raft.simulation import SafetyViolation, run_failovers

    if args.voters < 1 or args.failovers < 0 or not 0 <= args.drop_rate < 1:
        return console.fail("quorum simulate: --voters >= 1, --failovers >= 0 and 0 <= --drop-rate < 1")
    try:
        r = run_failovers(
            args.failovers,
            voters=args.voters,
            how=args.how,
            seed=args.seed,
            drop_rate=args.drop_rate,
            dynamic=args.dynamic,
        )
    except SafetyViolation as exc:
        console.error(f"quorum simulate: {exc}")
        return 1
    summary = {
        "failovers": r.failovers,
        "election_ms_median": r.median_ms,
        "election_ms_worst": r.worst_ms,
        "committed": r.committed,
        "acknowledged": r.acknowledged,
        "lost": r.lost,
    }
    if args.dynamic:
        summary |= {"voters_added": r.voters_added, "voters_removed": r.voters_removed}
    _print(summary, args.json)
    return 1 if r.lost else 0


def cmd_failover(args: argparse.Namespace) -> int:
    import asyncio
    import tempfile

    if args.voters < 1 or args.failovers < 0 or args.records < 1:
        return console.fail("quorum failover: --voters >= 1, --failovers >= 0 and --records >= 1")
    if args.dir is not None and args.dir.exists() and not args.dir.is_dir():
        return console.fail(f"quorum failover: --dir {args.dir} is a file; it names a folder")
    if args.dir is not None:
        return asyncio.run(_failover(args, args.dir))
    with tempfile.TemporaryDirectory(prefix="kraft-jbod-quorum-") as tmp:
        return asyncio.run(_failover(args, Path(tmp)))


async def _failover(args: argparse.Namespace, directory: Path) -> int:
    from kraft_jbod.testing.quorum import LocalQuorum

    acknowledged: list[tuple[int, bytes]] = []
    changes = {"add": 0, "remove": 0}
    async with LocalQuorum(directory, voters=args.voters, dynamic=args.dynamic) as quorum:
        for i, (host, port) in sorted(quorum.addresses.items()):
            console.listening(f"voter-{i}", host, port)
        await quorum.wait_for_leader(timeout=60)
        for r in range(args.failovers):
            acknowledged += await _write_round(quorum, r, args.records)
            if args.dynamic:
                await _change_voters(quorum, r, args.voters, changes)
            leader = await quorum.wait_for_leader()
            assert leader.node is not None
            old, epoch = leader.node_id, leader.node.epoch
            await _lose(quorum, args.how, old)
            new = await quorum.wait_for_leader(above_epoch=epoch, timeout=60)
            assert new.node is not None
            console.line(
                f"failover {r + 1}: voter {old} lost ({args.how}), voter {new.node_id} leads epoch "
                f"{new.node.epoch} after {quorum.elections[-1]} ms"
            )
            await _bring_back(quorum, args.how, old)
        await _settle(quorum)
        elections = list(quorum.elections)
    summary = _summary(quorum.logs(), acknowledged, elections)
    if args.dynamic:
        summary |= {"voters_added": changes["add"], "voters_removed": changes["remove"]}
    _print(summary, args.json)
    return 1 if summary["lost"] or not summary["logs_consistent"] else 0


async def _change_voters(quorum: LocalQuorum, round_no: int, floor: int, changes: dict[str, int]) -> None:
    """Even rounds add a new voter; odd ones remove one while more than ``floor`` vote (every
    second removal the leader)."""
    if round_no % 2 == 0:
        new_id = max(quorum.ids) + 1
        await quorum.add_voter(new_id, timeout=60)
        changes["add"] += 1
        console.line(f"voter {new_id} added: voters {sorted(quorum.voter_set())}")
        return
    voters = quorum.voter_set()
    leader = await quorum.wait_for_leader()
    if len(voters) <= floor:
        return
    victim = leader.node_id if round_no % 4 == 3 else max(v for v in voters if v != leader.node_id)
    await quorum.remove_voter(victim, timeout=60)
    changes["remove"] += 1
    new = await quorum.wait_for_leader(timeout=60)
    console.line(f"voter {victim} removed: voters {sorted(quorum.voter_set())}, voter {new.node_id} leads")


async def _write_round(quorum: LocalQuorum, round_no: int, records: int) -> list[tuple[int, bytes]]:
    """Write ``records`` through the leader, one at a time; those acknowledged (committed)."""
    done = []
    for i in range(records):
        payload = b"record-%d-%d" % (round_no, i)
        offset, epoch = await quorum.write([payload])
        if await quorum.wait_committed(offset, epoch):
            done.append((offset, payload))
    return done


async def _lose(quorum: LocalQuorum, how: str, node_id: int) -> None:
    if how == "kill":
        await quorum.kill(node_id)
    elif how == "pause":
        quorum.pause(node_id)
    elif how == "isolate":
        quorum.isolate(node_id)
    else:
        quorum.move_leadership()


async def _bring_back(quorum: LocalQuorum, how: str, node_id: int) -> None:
    if how == "kill":
        await quorum.restart(node_id)
    elif how == "pause":
        quorum.resume(node_id)
    elif how == "isolate":
        quorum.heal(node_id)


async def _settle(quorum: LocalQuorum) -> None:
    """A last write, then until every voter holds it (bounded)."""
    import asyncio

    final, epoch = await quorum.write([b"last"])
    await quorum.wait_committed(final, epoch)
    for _ in range(500):
        if all(v.log is not None and v.log.end_offset > final for v in quorum.voters.values()):
            return
        await asyncio.sleep(0.02)


def _summary(
    logs: dict[int, list[Entry]], acknowledged: list[tuple[int, bytes]], elections: list[int]
) -> dict[str, Any]:
    import statistics

    longest = max(logs.values(), key=len)
    consistent = all(entries == longest[: len(entries)] and len(entries) == len(longest) for entries in logs.values())
    # By offset: a batch of Kafka's form may hold several records (a VotersRecord batch does).
    by_offset = {e.offset: e for e in longest}
    lost = sum(1 for o, p in acknowledged if o not in by_offset or by_offset[o].payload != p)
    return {
        "failovers": len(elections),
        "election_ms_median": statistics.median(elections) if elections else None,
        "election_ms_worst": max(elections) if elections else None,
        "committed": longest[-1].next_offset if longest else 0,
        "acknowledged": len(acknowledged),
        "lost": lost,
        "logs_consistent": consistent,
    }


def _print(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        console.json_line(summary)
    else:
        console.line(" ".join(f"{k}={v}" for k, v in summary.items()))
