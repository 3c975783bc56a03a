"""Start-up stays light: what ``kraft-jbod --version`` and a small ``decode`` import.

Speed is measured in tools/bench/bench_startup.py; this file keeps it by counting instead:
each command runs in a fresh interpreter that writes ``sys.modules`` on exit, and the tests
bound the kraft_jbod modules it loaded and forbid the heavy ones (the generated codec on
``--version``, servers, hypothesis, Spark, other areas' code on ``decode``). A failure
names the module that crept in; move its import into the handler that needs it.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kraft_jbod import cli

ROOT = Path(__file__).resolve().parents[1]

# ``python -c PROBE ARGS...`` is ``python -m kraft_jbod ARGS...`` that also writes the
# names in sys.modules at exit, on stderr's last line.
PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
    "runpy.run_module('kraft_jbod', run_name='__main__', alter_sys=True)\n"
)

# Never on a short command's path: servers, property testing, Spark, the HTTP client.
HEAVY = ("asyncio", "hypothesis", "pyspark", "pyarrow", "pandas", "http.client", "ssl")


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    full_env.pop("KRAFT_JBOD_CODEC", None)  # the default selection unless a test sets one
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=ROOT, env=full_env, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.rstrip("\n").rsplit("\n", 1)[-1]
    assert last.startswith("MODULES "), proc.stderr
    return proc.stdout, set(last.split()[1:])


def _ours(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "kraft_jbod" or m.startswith("kraft_jbod.")}


def _heavy(modules: set[str], extra: tuple[str, ...] = ()) -> set[str]:
    return {m for m in modules if m.split(".")[0] in HEAVY or m in HEAVY or m in extra}


def test_version_imports_almost_nothing() -> None:
    out, modules = _run("--version")
    assert out.startswith("kraft-jbod ") and "(codec: " in out
    ours = _ours(modules)
    # kraft_jbod, cli, console, errors, and _accel with its extension: no command module,
    # no generated message, no wire code.
    assert len(ours) <= 6, sorted(ours)
    assert not {m for m in ours if m.startswith(("kraft_jbod.messages", "kraft_jbod.wire", "kraft_jbod.codec"))}
    assert not _heavy(modules, ("dataclasses", "logging", "crc32c", "cramjam")), sorted(_heavy(modules))


@pytest.mark.parametrize("choice", [None, "python"])
def test_version_reports_the_backend_the_codec_installs(choice: str | None) -> None:
    # --version finds the backend without importing the codec; it must name the one the
    # codec's import then installs.
    env = {} if choice is None else {"KRAFT_JBOD_CODEC": choice}
    out, _ = _run("--version", env=env)
    reported = out.strip().rsplit("codec: ", 1)[1].rstrip(")")
    base = {k: v for k, v in os.environ.items() if k != "KRAFT_JBOD_CODEC"}  # as _run does
    proc = subprocess.run(
        [sys.executable, "-c", "import kraft_jbod.wire.message, kraft_jbod._accel as a; print(a.backend())"],
        cwd=ROOT,
        env={**base, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert reported == proc.stdout.strip()
    if choice == "python":
        assert reported == "python"


def test_registering_every_command_stays_light() -> None:
    # `kraft-jbod --help` (and an unknown command) registers them all.
    code = "import sys\nfrom kraft_jbod import cli\ncli.build_parser()\nprint(' '.join(sorted(sys.modules)))\n"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    modules = set(proc.stdout.split())
    ours = _ours(modules)
    assert set(cli.COMMAND_MODULES) <= ours
    assert not {m for m in ours if m.startswith(("kraft_jbod.messages", "kraft_jbod.wire", "kraft_jbod.codec."))}
    assert "kraft_jbod.codec" not in ours
    # Registration modules plus their packages, budget (the decode options) and the basics.
    assert len(ours) <= len(cli.COMMAND_MODULES) * 2 + 6, sorted(ours)
    assert not _heavy(modules, ("dataclasses", "logging", "crc32c")), sorted(_heavy(modules))


def test_command_table_matches_what_each_module_registers() -> None:
    # cli.COMMAND_MODULES decides which module a command word loads; it must say what
    # register() really adds, in the same order.
    seen: list[str] = []
    for module, commands in cli.COMMAND_MODULES.items():
        sub = argparse.ArgumentParser().add_subparsers()
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == commands, module
        seen += commands
    assert len(seen) == len(set(seen)), "a command registered by two modules"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--version"], ()),
        (["decode", "x.pcap"], ("kraft_jbod.capture.commands",)),
        (["log", "dump", "d"], ("kraft_jbod.controller.commands",)),
        (["-h"], tuple(cli.COMMAND_MODULES)),
        (["--he"], tuple(cli.COMMAND_MODULES)),
        (["-h", "decode"], tuple(cli.COMMAND_MODULES)),
        (["nonsense"], tuple(cli.COMMAND_MODULES)),
        ([], tuple(cli.COMMAND_MODULES)),
    ],
)
def test_modules_for(argv: list[str], expected: tuple[str, ...]) -> None:
    assert cli.modules_for(argv) == expected


def _one_frame(path: Path) -> None:
    from kraft_jbod import codec
    from kraft_jbod.capture.pcapng_writer import PcapngWriter, TcpConversation
    from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest

    body = BrokerHeartbeatRequest(broker_id=1, broker_epoch=42, offline_log_dirs=[uuid.UUID(int=5)])
    with path.open("wb") as fh:
        TcpConversation(PcapngWriter(fh)).client_send(codec.encode_request(body, 1, 7, "broker-1"))


def test_decode_of_one_frame_imports_only_what_it_needs(tmp_path: Path) -> None:
    capture = tmp_path / "one.pcapng"
    _one_frame(capture)
    out, modules = _run("decode", "--no-progress", str(capture))
    [line] = out.splitlines()
    frame = json.loads(line)
    assert (frame["apiName"], frame["body"]["brokerEpoch"]) == ("BrokerHeartbeat", 42)
    ours = _ours(modules)
    generated = {m.removeprefix("kraft_jbod.messages.") for m in ours if m.startswith("kraft_jbod.messages.")}
    # The frame's own message, the headers and the fact tables; not the other 230 modules.
    assert generated == {
        "broker_heartbeat_request",
        "request_header",
        "response_header",
        "api_keys",
        "error_codes",
        "releases",
    }
    other_areas = ("controller", "broker", "fuzz", "analytics", "demo", "storage", "realkafka", "metrics", "security")
    assert not {m for m in ours if m.split(".")[1:2] and m.split(".")[1] in other_areas}, sorted(ours)
    assert "kraft_jbod.capture.sample" not in ours  # only with --sample
    assert len(ours) <= 36, sorted(ours)
    # No record batch, so no checksum or compression library; IPv4 addresses need no
    # socket module.
    assert not _heavy(modules, ("crc32c", "cramjam", "logging", "socket")), sorted(_heavy(modules))
