"""The first hour of a new user, in a fresh virtualenv built from the wheel.

One module-scoped fixture builds the wheel (``pip wheel --no-deps``), fetches the base
dependencies and pytest with pip's ordinary client into a folder (pip's cache makes this
quick), creates a new venv and installs from those files only (``--no-index``). Then,
from a folder outside the repository and without PYTHONPATH, as a user would:

* ``kraft-jbod --version`` and ``--help`` of every command and subcommand;
* ``kraft-jbod demo`` with nothing but the base install: it runs to the end, writes its
  capture and says in one line that the conformance job needs the spark extra;
* every command that needs an extra says which, in one line, exit 2, no traceback;
* a user-style pytest file: without pytest-asyncio the unrelated test passes and the
  fixture test fails alone with a line naming pytest-asyncio; with it, both pass with no
  configuration at all (pytest-asyncio's strict mode).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The base install, as the package declares it (so the test follows new dependencies).
BASE = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]

USER_TEST = """
def test_arithmetic():
    assert 1 + 1 == 2


async def test_cluster_starts_with_no_brokers(kraft_cluster):
    host, port = kraft_cluster.server.addresses[0]
    assert host == "127.0.0.1" and port > 0
    assert not kraft_cluster.brokers
"""


class Fresh:
    def __init__(self, root: Path, deps: Path) -> None:
        self.root = root
        self.deps = deps
        self.bin = root / "venv" / "bin"
        self.home = root / "user"
        self.home.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        self.env["PATH"] = f"{self.bin}{os.pathsep}{self.env.get('PATH', '')}"

    def run(self, *argv: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), cwd=cwd or self.home, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def kj(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.bin / "kraft-jbod"), *argv, timeout=timeout)

    def pip(self, *argv: str) -> None:
        proc = self.run(str(self.bin / "python"), "-m", "pip", "--disable-pip-version-check", *argv, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def _pip(*argv: str, cwd: Path = ROOT) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fresh]:
    root = tmp_path_factory.mktemp("fresh")
    wheels, deps = root / "wheels", root / "deps"
    _pip("wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT))
    _pip("download", "-q", "-d", str(deps), *BASE, "pytest", "pytest-asyncio")
    venv.EnvBuilder(with_pip=True).create(root / "venv")
    f = Fresh(root, deps)
    (wheel,) = wheels.glob("kraft_jbod-*.whl")
    f.pip("install", "-q", "--no-index", "--find-links", str(deps), str(wheel), "pytest")
    yield f


def _commands(f: Fresh) -> list[list[str]]:
    """Every command path, read from the installed parser itself."""
    code = (
        "import argparse, json\n"
        "from kraft_jbod.cli import build_parser\n"
        "out = []\n"
        "def walk(p, path):\n"
        "    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]\n"
        "    if path: out.append(path)\n"
        "    for a in subs:\n"
        "        for name, sp in a.choices.items(): walk(sp, path + [name])\n"
        "walk(build_parser(), [])\n"
        "print(json.dumps(out))\n"
    )
    proc = f.run(str(f.bin / "python"), "-c", code)
    assert proc.returncode == 0, proc.stderr
    import json

    return [list(c) for c in json.loads(proc.stdout)]


def test_version_and_every_help(fresh: Fresh) -> None:
    from kraft_jbod import __version__

    v = fresh.kj("--version")
    assert v.returncode == 0 and v.stdout.startswith(f"kraft-jbod {__version__} (codec: "), v.stdout
    commands = _commands(fresh)
    assert ["demo"] in commands and ["topics", "create"] in commands and ["codec", "roundtrip"] in commands
    for cmd in commands:
        proc = fresh.kj(*cmd, "--help")
        assert proc.returncode == 0, (cmd, proc.stderr)
        assert proc.stdout.startswith("usage: kraft-jbod " + " ".join(cmd)), (cmd, proc.stdout[:200])
        assert "Traceback" not in proc.stderr


def test_demo_runs_on_the_base_install(fresh: Fresh) -> None:
    proc = fresh.kj("demo", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every broker's metadata image matches the controller's log" in proc.stdout
    assert "conformance job skipped: it needs the spark extra (pip install 'kraft-jbod[spark]')" in proc.stdout
    assert (fresh.home / "kraft-jbod-demo.pcapng").stat().st_size > 10_000
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("argv", "extra"),
    [
        (["fuzz", "--target", "127.0.0.1:9"], "fuzz"),
        (["stats", "x.pcapng", "--out", "out"], "spark"),
        (["capture", "listen", "127.0.0.1:0", "--timeout", "1"], "net"),
        (["controller", "--config", "c.properties", "--mirror", "127.0.0.1:9"], "net"),
    ],
)
def test_a_missing_extra_is_one_line(fresh: Fresh, argv: list[str], extra: str) -> None:
    (fresh.home / "c.properties").write_text(
        "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={fresh.home / 'meta'}\n"
    )
    proc = fresh.kj(*argv)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"needs the {extra} extra" in proc.stderr and f"pip install 'kraft-jbod[{extra}]'" in proc.stderr
    assert not (fresh.home / "meta").exists()  # nothing created on disk before refusing


def test_user_pytest_file_outside_the_repo(fresh: Fresh) -> None:
    project = fresh.root / "project"
    project.mkdir()
    (project / "test_mine.py").write_text(USER_TEST)
    python = str(fresh.bin / "python")
    without = fresh.run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, timeout=300)
    # No pytest-asyncio: the plugin loads, the plain test passes, the fixture test explains itself.
    assert "Error while loading plugin" not in without.stdout + without.stderr
    assert "1 passed" in without.stdout and "1 error" in without.stdout, without.stdout + without.stderr
    assert "needs pytest-asyncio: pip install pytest-asyncio" in without.stdout
    fresh.pip("install", "-q", "--no-index", "--find-links", str(fresh.deps), "pytest-asyncio")
    with_it = fresh.run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", cwd=project, timeout=300)
    assert with_it.returncode == 0, with_it.stdout + with_it.stderr
    assert "2 passed" in with_it.stdout
