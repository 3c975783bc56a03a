"""The pytest plugin loads lazily (issue 26): pytest imports it in every run of an
environment where kraft-jbod is installed, so loading it imports nothing of the stack;
each fixture imports what it needs when a test first uses it. The import time itself is
measured by tools/bench/bench_plugin_import.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# What a test file records: the kraft_jbod modules loaded when each test runs.
_PROBE = textwrap.dedent(
    """
    import json, os, sys

    def _record(name):
        loaded = sorted(m for m in sys.modules if m == "kraft_jbod" or m.startswith("kraft_jbod."))
        with open(os.environ["PROBE_OUT"], "a") as fh:
            fh.write(json.dumps([name, loaded]) + "\\n")

    def test_plain():
        _record("plain")

    def test_clock(kraft_clock):
        _record("clock")

    async def test_cluster(kraft_cluster):
        _record("cluster")
        assert kraft_cluster.view()["brokers"] == []
    """
)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def test_importing_the_plugin_loads_nothing_else_of_kraft_jbod() -> None:
    code = (
        "import sys, json, pytest\n"
        "before = set(sys.modules)\n"
        "import kraft_jbod.pytest_plugin\n"
        "print(json.dumps(sorted(m for m in set(sys.modules) - before if m.startswith('kraft_jbod'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == ["kraft_jbod", "kraft_jbod.pytest_plugin"]


def test_fixtures_import_the_stack_only_when_used(tmp_path: Path) -> None:
    (tmp_path / "test_probe.py").write_text(_PROBE)
    out = tmp_path / "probe.jsonl"
    # Plugins named explicitly (autoload off), so the run does not depend on entry points.
    plugins = ["-p", "pytest_asyncio.plugin", "-p", "kraft_jbod.pytest_plugin", "-p", "no:cacheprovider"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugins],
        cwd=tmp_path,
        env=_env(PROBE_OUT=str(out), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = {name: set(mods) for name, mods in (json.loads(line) for line in out.read_text().splitlines())}
    assert seen["plain"] == {"kraft_jbod", "kraft_jbod.pytest_plugin"}
    assert seen["clock"] - seen["plain"] == {"kraft_jbod.clock"}
    assert {"kraft_jbod.testing.cluster", "kraft_jbod.controller.server", "kraft_jbod.broker.server"} <= seen["cluster"]


def test_the_old_names_still_import_from_the_plugin() -> None:
    from kraft_jbod import pytest_plugin
    from kraft_jbod.pytest_plugin import CLUSTER_ID, KraftCluster, start_cluster
    from kraft_jbod.testing import cluster

    assert (KraftCluster, start_cluster, CLUSTER_ID) == (
        cluster.KraftCluster,
        cluster.start_cluster,
        cluster.CLUSTER_ID,
    )
    assert set(pytest_plugin.__all__) >= set(pytest_plugin._LAZY)
    try:
        pytest_plugin.no_such_name  # noqa: B018 - the attribute access is the test
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
