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


# --- issue 26: the six inputs that still ended in a traceback, and two silent failures ---

_CONTROLLER = (
    "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
    "controller.listener.names=CONTROLLER\nmetadata.log.dir={meta}\n"
)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_codec_roundtrip_deeply_nested_json_is_a_failed_line(tmp_path: Path) -> None:
    # Like any line that is not JSON: a result line naming it, the tally, exit 1 (the
    # roundtrip contract: one result per input line), never a traceback.
    (tmp_path / "in.jsonl").write_text("[" * 100_000 + "]" * 100_000 + "\n")
    proc = _run(["codec", "roundtrip", "in.jsonl"], tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    first, summary = proc.stdout.strip().splitlines()
    assert "nested too deeply" in first and summary == "0 byte-exact, 0 differ, 1 failed"


def test_decode_output_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "outdir").mkdir()
    before = _files(tmp_path)
    line = _one_line_error(_run(["decode", "--sample", "--output", "outdir", "--no-progress"], tmp_path))
    assert "outdir" in line and "is a directory" in line
    assert _files(tmp_path) == before


def test_controller_mirror_that_does_not_resolve(tmp_path: Path) -> None:
    (tmp_path / "c.properties").write_text(_CONTROLLER.format(meta=tmp_path / "meta"))
    proc = _run(["controller", "--config", "c.properties", "--mirror", "no-such-host.invalid:9999"], tmp_path)
    line = _one_line_error(proc)
    assert "--mirror" in line and "cannot resolve no-such-host.invalid" in line
    assert not (tmp_path / "meta").exists()


def test_controller_extensions_with_a_wrongly_typed_value(tmp_path: Path) -> None:
    (tmp_path / "c.properties").write_text(_CONTROLLER.format(meta=tmp_path / "meta"))
    (tmp_path / "ext.json").write_text('{"admin": 5}')
    line = _one_line_error(_run(["controller", "--config", "c.properties", "--extensions", "ext.json"], tmp_path))
    assert "admin: 5" in line and "host:port" in line
    assert not (tmp_path / "meta").exists()


def test_controller_refuses_a_socket_request_max_bytes_no_request_fits(tmp_path: Path) -> None:
    (tmp_path / "c.properties").write_text(_CONTROLLER.format(meta=tmp_path / "meta"))
    argv = ["controller", "--config", "c.properties", "--override", "socket.request.max.bytes=4"]
    line = _one_line_error(_run(argv, tmp_path))
    assert "socket.request.max.bytes=4 is below 512" in line
    assert not (tmp_path / "meta").exists()


def test_fuzz_corpus_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "corp").write_text("not a folder")
    with socket.socket() as srv:  # reachable, so the corpus is what is wrong
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        target = f"127.0.0.1:{srv.getsockname()[1]}"
        line = _one_line_error(_run(["fuzz", "--target", target, "--corpus", "corp", "--count", "1"], tmp_path))
    assert "--corpus corp" in line and "is a file" in line
    assert _files(tmp_path) == {"corp"}


def test_demo_keep_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "keepf").write_text("x")
    line = _one_line_error(_run(["demo", "--keep", "keepf", "--no-stats"], tmp_path))
    assert "--keep keepf is a file" in line
    assert _files(tmp_path) == {"keepf"}


def test_stats_out_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "x.pcapng").write_bytes(b"")
    (tmp_path / "out").write_text("x")
    line = _one_line_error(_run(["stats", "x.pcapng", "--out", "out"], tmp_path))
    assert "--out out is a file" in line
    assert (tmp_path / "out").read_text() == "x" and _files(tmp_path) == {"x.pcapng", "out"}
