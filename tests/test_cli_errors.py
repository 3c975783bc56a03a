"""Errors a user can cause: one line on stderr, exit 2, no traceback, nothing half-made on disk."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "kraft_jbod.cli", *argv],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kraft-jbod: "), proc.stderr
    return lines[0]


def test_controller_port_in_use_creates_nothing(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        (tmp_path / "c.properties").write_text(
            "node.id=1\nprocess.roles=controller\n"
            f"listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n"
            f"metadata.log.dir={tmp_path / 'meta'}\n"
        )
        line = _one_line_error(_run(["controller", "--config", "c.properties"], tmp_path))
    assert f"CONTROLLER listener 127.0.0.1:{port}" in line and "in use" in line
    assert not (tmp_path / "meta").exists()


def test_stats_without_java_says_so(tmp_path: Path) -> None:
    python_dir = str(Path(sys.executable).parent)
    line = _one_line_error(_run(["stats", "x.pcapng", "--out", "out"], tmp_path, {"PATH": python_dir, "JAVA_HOME": ""}))
    assert "Java 17" in line or "spark extra" in line  # the spark extra may be absent where this runs
    assert not (tmp_path / "out").exists()


def test_topics_against_nothing(tmp_path: Path) -> None:
    line = _one_line_error(_run(["topics", "create", "t", "--controller", "127.0.0.1:9"], tmp_path))
    assert "cannot reach the controller at 127.0.0.1:9" in line
