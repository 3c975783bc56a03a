"""`kraft-jbod controller --extensions FILE`: faults and the admin channel from the command line."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_controller_cli_loads_extensions(tmp_path: Path) -> None:
    admin_port = _free_port()
    (tmp_path / "faults.json").write_text(
        json.dumps(
            {
                "seed": 1,
                "rules": [
                    {
                        "id": "no-assign",
                        "match": {"api": "AssignReplicasToDirs"},
                        "action": {"type": "error", "error_code": 7},
                        "trigger": {"type": "always"},
                    }
                ],
            }
        )
    )
    (tmp_path / "ext.json").write_text(json.dumps({"faults": "faults.json", "admin": f"127.0.0.1:{admin_port}"}))
    (tmp_path / "controller.properties").write_text(
        "node.id=3000\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={tmp_path / 'meta'}\n"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kraft_jbod.cli",
            "controller",
            "--config",
            str(tmp_path / "controller.properties"),
            "--extensions",
            str(tmp_path / "ext.json"),
            "--no-fsync",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on CONTROLLER 127.0.0.1:"), proc.stderr.read() if proc.stderr else line
        listed = subprocess.run(
            [
                sys.executable,
                "-m",
                "kraft_jbod.cli",
                "faults",
                "--admin",
                f"127.0.0.1:{admin_port}",
                "--token-file",
                str(tmp_path / "meta" / "admin.token"),
                "list",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert listed.returncode == 0, listed.stderr
        assert "no-assign" in listed.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0
