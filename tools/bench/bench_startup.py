"""Start-up of whole ``kraft-jbod`` commands, and decode against ``tshark -r`` per file.

What a user waits for when a command is short is the interpreter and the imports, not
the work. This benchmark runs each command as a fresh process, the way a user or a
script does, and measures per process:

* CPU time (user + system of the child, from ``os.wait4``): the figure that means
  something on a shared, loaded machine;
* wall time: the figure the targets are written in (issue 28: ``--version`` under
  0.1 s, ``decode`` of a one-frame file under 0.2 s), only meaningful on an idle machine;
* how many ``kraft_jbod`` modules the command imported (``sys.modules`` at exit; not
  ``-X importtime``, which does not see modules loaded through ``importlib.import_module``,
  as the CLI's command modules are).

Bytecode: this machine sets ``PYTHONDONTWRITEBYTECODE=1``, so every run would compile every
module it imports from source, which an installed package never does (pip writes the
``.pyc`` files). The children run without it, after one warm-up run of each command has
written ``__pycache__`` (ignored by git); ``--no-bytecode-cache`` measures the other way.

Commands:

1. ``python -m kraft_jbod --version``;
2. ``python -m kraft_jbod decode --no-progress ONE`` where ONE is a pcapng holding one
   BrokerHeartbeat v1 request, written here with the project's own pcapng writer;
3. ``python -m kraft_jbod decode --no-progress FILE`` against ``tshark -r FILE -T json``
   for every pcap/pcapng under ../shared/captures, one process per file, summed per round.

Rounds alternate (every command once per round, tshark and decode in turn per file), so
load drifts hit both sides alike; medians and ranges over ``--rounds`` are printed, and
the ratio decode/tshark per round (< 1 means kraft-jbod used less CPU).

``--root DIR`` measures another checkout (its directory goes first on PYTHONPATH), which
is how the "before" figures of a change are taken from an unchanged tree.

Run: ``python -m tools.bench.bench_startup [--rounds 5] [--root DIR] [--no-tshark]
[--no-bytecode-cache]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

CAPTURES = Path(__file__).resolve().parents[3] / "shared" / "captures"
if not CAPTURES.is_dir():  # a work tree next to the main checkout
    CAPTURES = Path("/work/shared/captures")


def write_one_frame(path: Path) -> None:
    """A pcapng with the handshake and one BrokerHeartbeat v1 request (one Kafka frame)."""
    from kraft_jbod import codec
    from kraft_jbod.capture.pcapng_writer import PcapngWriter, TcpConversation
    from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest

    body = BrokerHeartbeatRequest(
        broker_id=1,
        broker_epoch=42,
        current_metadata_offset=1000,
        offline_log_dirs=[uuid.UUID(int=0x1111_1111_2222_3333_4444_5555_5555_5555)],
    )
    with path.open("wb") as fh:
        conv = TcpConversation(PcapngWriter(fh))
        conv.client_send(codec.encode_request(body, 1, 7, "broker-1"))


def run(cmd: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float, bytes]:
    """Wall and CPU seconds of one whole process (stdout drained), and its stderr.

    The child is reaped with ``os.wait4`` (not ``Popen.wait``) to get its own rusage.
    ``cwd`` matters: ``python -m`` puts the working directory first on ``sys.path``.
    """
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd)
    assert proc.stdout is not None and proc.stderr is not None
    # Drain both pipes without reaping: stderr is small (import times), stdout may not be.
    err_chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: err_chunks.append(proc.stderr.read() if proc.stderr else b""))
    reader.start()
    while proc.stdout.read(1 << 20):
        pass
    reader.join()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    err = b"".join(err_chunks)
    if code not in (0, 1):  # 1: a frame of a real capture did not decode; still a full run
        raise SystemExit(f"{' '.join(cmd[:6])} failed with exit code {code}: {err[-500:]!r}")
    return wall, usage.ru_utime + usage.ru_stime, err


# ``python -c PROBE ARGS...`` runs ``python -m kraft_jbod ARGS...`` and writes the names in
# sys.modules at exit on stderr (tests/test_startup_imports.py uses the same idea).
PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: sys.stderr.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
    "runpy.run_module('kraft_jbod', run_name='__main__', alter_sys=True)\n"
)


def kraft_modules(stderr: bytes) -> list[str]:
    """The kraft_jbod modules a PROBE run had imported when it exited."""
    for line in stderr.decode(errors="replace").splitlines():
        if line.startswith("MODULES "):
            return [m for m in line.split()[1:] if m == "kraft_jbod" or m.startswith("kraft_jbod.")]
    raise SystemExit(f"no module list from the probe: {stderr[-500:]!r}")


def _ours(python: str, *args: str) -> list[str]:
    return [python, "-m", "kraft_jbod", *args]


def _fmt(values: list[float], unit: float = 1000.0) -> str:
    return f"median {statistics.median(values) * unit:7.1f}  range {min(values) * unit:6.1f}-{max(values) * unit:6.1f}"


def _child_env(root: Path, no_bytecode_cache: bool) -> dict[str, str]:
    """The children's environment: ``root`` first on PYTHONPATH, the pure-Python codec
    choice left to the default, and the bytecode cache on or off."""
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("KRAFT_JBOD_CODEC", None)
    if no_bytecode_cache:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
        # No reading of caches either: a prefix no run has written to.
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp(prefix="bench-startup-nopyc-")
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _decode_vs_tshark_round(
    python: str, tshark: str, files: list[Path], env: dict[str, str], root: Path, r: int
) -> tuple[float, float, float, float]:
    """One round over every capture: (our cpu, tshark cpu, our wall, tshark wall) summed."""
    oc = tc = ow = tw = 0.0
    for i, path in enumerate(files):
        ours = _ours(python, "decode", "--no-progress", str(path), "--port", "9092", "--port", "36333")
        port = 36333 if "deepflow" in str(path) else 9092
        theirs = [tshark, "-r", str(path), "-T", "json", "-d", f"tcp.port=={port},kafka"]
        # Alternate which tool goes first, per file and per round.
        pair = [("ours", ours), ("tshark", theirs)]
        if (i + r) % 2:
            pair.reverse()
        for who, cmd in pair:
            w, c, _ = run(cmd, env, root)
            if who == "ours":
                ow += w
                oc += c
            else:
                tw += w
                tc += c
    return oc, tc, ow, tw


def _print_vs_tshark(rounds: list[tuple[float, float, float, float]], n_files: int) -> None:
    ours_cpu, ts_cpu, ours_wall, ts_wall = (list(col) for col in zip(*rounds, strict=True))
    ratios = [o / t for o, t in zip(ours_cpu, ts_cpu, strict=True)]
    wratios = [o / t for o, t in zip(ours_wall, ts_wall, strict=True)]
    print(f"\n{n_files} captures in {CAPTURES}, one process per file, summed per round, seconds")
    print(f"  kraft-jbod decode  cpu {_fmt(ours_cpu, 1)}   wall {_fmt(ours_wall, 1)}")
    print(f"  tshark -r -T json  cpu {_fmt(ts_cpu, 1)}   wall {_fmt(ts_wall, 1)}")
    print(
        f"  decode/tshark cpu {statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}), "
        f"wall {statistics.median(wratios):.2f}x (range {min(wratios):.2f}-{max(wratios):.2f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[2], help="checkout to measure")
    ap.add_argument("--no-tshark", action="store_true", help="skip the decode vs tshark part")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--no-bytecode-cache", action="store_true", help="compile every module in every run")
    args = ap.parse_args()
    root = args.root.resolve()
    env = _child_env(root, args.no_bytecode_cache)
    tshark = None if args.no_tshark else shutil.which("tshark")
    files = sorted(p for p in CAPTURES.glob("*/*") if p.suffix in (".pcap", ".pcapng"))
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    print(
        f"root {root}; python {args.python}; load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
        f"bytecode cache {'off' if args.no_bytecode_cache else 'on'}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        one = Path(tmp) / "one-frame.pcapng"
        write_one_frame(one)
        commands = {
            "--version": _ours(args.python, "--version"),
            "decode one frame": _ours(args.python, "decode", "--no-progress", str(one)),
        }
        for label, cmd in commands.items():
            # Also the warm-up run that writes __pycache__ (unless --no-bytecode-cache).
            _, _, err = run([args.python, "-c", PROBE, *cmd[3:]], env, root)
            mods = kraft_modules(err)
            messages = sum(m.startswith("kraft_jbod.messages.") for m in mods)
            print(f"{label}: {len(mods)} kraft_jbod modules imported ({messages} of kraft_jbod.messages)")
        if tshark and not args.no_bytecode_cache:
            for path in files:  # warm-up: whatever a real capture needs is compiled once
                run(_ours(args.python, "decode", "--no-progress", str(path)), env, root)
        cpu: dict[str, list[float]] = {k: [] for k in commands}
        wall: dict[str, list[float]] = {k: [] for k in commands}
        vs_tshark: list[tuple[float, float, float, float]] = []
        for r in range(args.rounds):
            for label, cmd in commands.items():
                w, c, _ = run(cmd, env, root)
                wall[label].append(w)
                cpu[label].append(c)
            if tshark and files:
                vs_tshark.append(_decode_vs_tshark_round(args.python, tshark, files, env, root, r))
            print(f"round {r + 1}/{args.rounds} done (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    print(f"\nper process, {args.rounds} rounds, milliseconds")
    for label in commands:
        print(f"  {label:18s} cpu {_fmt(cpu[label])}   wall {_fmt(wall[label])}")
    if vs_tshark:
        _print_vs_tshark(vs_tshark, len(files))
    elif not args.no_tshark:
        print(
            "\n(decode vs tshark skipped: "
            + ("no tshark: apt-get install -y tshark)" if not tshark else "no captures)")
        )


if __name__ == "__main__":
    main()
