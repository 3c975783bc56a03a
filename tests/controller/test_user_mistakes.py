"""Operator mistakes get a clear error (exit 2 or 1, one line, no traceback) and change
nothing on disk. Port in use and an absurd socket.request.max.bytes are in
test_server_bounds.py; a damaged log and `log recover` in test_log.py."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from kraft_jbod import cli

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _controller_props(tmp_path: Path, metadata_dir: Path) -> Path:
    p = tmp_path / "c.properties"
    p.write_text(
        "node.id=1\nprocess.roles=controller\nlisteners=CONTROLLER://127.0.0.1:0\n"
        f"controller.listener.names=CONTROLLER\nmetadata.log.dir={metadata_dir}\n"
    )
    return p


def test_a_file_where_the_metadata_directory_belongs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "meta"
    afile.write_text("keep me")
    rc = cli.main(["controller", "--config", str(_controller_props(tmp_path, afile)), "--log-level", "ERROR"])
    err = capsys.readouterr().err
    assert rc == 2 and "is a file, not a directory" in err and "Traceback" not in err
    assert afile.read_text() == "keep me"


def test_a_directory_where_a_file_belongs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "adir").mkdir()
    props = _controller_props(tmp_path, tmp_path / "meta")
    for argv in (
        ["controller", "--config", str(tmp_path / "adir")],
        ["controller", "--config", str(props), "--extensions", str(tmp_path / "adir")],
        ["controller", "--config", str(props), "--capture", str(tmp_path / "adir")],
    ):
        assert cli.main([*argv, "--log-level", "ERROR"]) == 2, argv
        err = capsys.readouterr().err
        assert "directory" in err and "Traceback" not in err, (argv, err)
    assert not (tmp_path / "meta").exists()


def test_deeply_nested_json_settings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.json").write_text(deep)
    for name, doc in (
        ("faults", {"faults": "deep.json"}),
        ("credentials", {"credentials": "deep.json"}),
        ("acls", {"acls": "deep.json"}),
    ):
        (tmp_path / "ext.json").write_text(json.dumps(doc))
        rc = cli.main(
            [
                "controller",
                "--config",
                str(_controller_props(tmp_path, tmp_path / "meta")),
                "--extensions",
                str(tmp_path / "ext.json"),
                "--log-level",
                "ERROR",
            ]
        )
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err and "deep.json" in err, (name, err)
    (tmp_path / "ext.json").write_text(deep)
    rc = cli.main(
        [
            "controller",
            "--config",
            str(_controller_props(tmp_path, tmp_path / "meta")),
            "--extensions",
            str(tmp_path / "ext.json"),
        ]
    )
    assert rc == 2 and "is not JSON" in capsys.readouterr().err
    assert not (tmp_path / "meta").exists()


def test_status_against_something_that_is_not_the_admin_channel(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    port = srv.getsockname()[1]

    def serve() -> None:
        for _ in range(2):
            c, _ = srv.accept()
            c.recv(1000)
            c.sendall(b"SSH-2.0-OpenSSH_9\r\n")
            c.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    monkeypatch.setenv("KRAFT_JBOD_ADMIN_TOKEN", "t" * 20)
    assert cli.main(["status", "--admin", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert "not an HTTP server" in err and "Traceback" not in err
    assert cli.main(["faults", "--admin", f"127.0.0.1:{port}", "list"]) == 2
    assert "not an HTTP server" in capsys.readouterr().err
    srv.close()
    # And without a token: told how to give one, nothing sent.
    monkeypatch.delenv("KRAFT_JBOD_ADMIN_TOKEN")
    assert cli.main(["status", "--admin", f"127.0.0.1:{port}"]) == 2
    assert "--token-file" in capsys.readouterr().err


def test_decode_output_is_not_emptied_by_a_missing_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "frames.jsonl"
    out.write_text("precious\n")
    assert cli.main(["decode", str(tmp_path / "missing.pcapng"), "--output", str(out)]) == 2
    assert "missing.pcapng" in capsys.readouterr().err
    assert out.read_text() == "precious\n"
    assert not list(tmp_path.glob("*.partial"))


def _broker_props(tmp_path: Path, dirs: list[Path]) -> Path:
    p = tmp_path / "b.properties"
    p.write_text(
        "node.id=1\nprocess.roles=broker\ncontroller.quorum.bootstrap.servers=127.0.0.1:9093\n"
        f"log.dirs={','.join(map(str, dirs))}\nmetadata.log.dir={dirs[0]}\n"
    )
    return p


def test_storage_format_refuses_one_directory_listed_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    real = tmp_path / "d1"
    real.mkdir()
    link = tmp_path / "d1-link"
    link.symlink_to(real)
    props = _broker_props(tmp_path, [real, link])
    assert cli.main(["storage", "format", "-c", str(props), "--cluster-id", CLUSTER]) == 2
    assert "are the same directory" in capsys.readouterr().err
    assert list(real.iterdir()) == []  # nothing written


def test_storage_info_fails_on_duplicate_directory_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    d1.mkdir()
    d2.mkdir()
    props = _broker_props(tmp_path, [d1, d2])
    assert cli.main(["storage", "format", "-c", str(props), "--cluster-id", CLUSTER]) == 0
    capsys.readouterr()
    (d2 / "meta.properties").write_text((d1 / "meta.properties").read_text())  # a copied disk
    assert cli.main(["storage", "info", "-c", str(props)]) == 1
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert "error" not in rows[0] and "is also in" in rows[1]["error"]


_EXT_KEYS = ("faults", "credentials", "acls", "listeners", "client_listeners", "admin", "admin_token")
_EXT_KEYS += ("admin_token_file", "admin_allow_remote", "statsd", "statsd_interval", "manual_clock")


@pytest.mark.parametrize("key", _EXT_KEYS)
def test_extensions_with_any_wrongly_typed_value_are_a_config_error(key: str, tmp_path: Path) -> None:
    # Every JSON type for every key: accepted or a ConfigError, never TypeError/AttributeError
    # (those ended `controller --extensions` in a traceback).
    from kraft_jbod.controller.extensions import Extensions
    from kraft_jbod.errors import ConfigError

    refused = 0
    for value in (5, -1, 1.5, True, None, "x", [], {}, [5], [{}], {"a": 5}, [{"name": 5}]):
        try:
            Extensions.from_json({key: value}, tmp_path)
        except ConfigError:
            refused += 1
    assert refused > 0
