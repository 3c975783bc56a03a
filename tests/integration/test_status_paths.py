"""`kraft-jbod status` shows directory ids (all the controller knows); with --broker-ctl it
adds each fake broker's paths beside them, and broker-ctl takes either."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from kraft_jbod import cli
from kraft_jbod.pytest_plugin import KraftCluster
from kraft_jbod.wire.primitives import uuid_to_base64url


async def test_status_shows_ids_and_with_broker_ctl_paths(
    kraft_cluster: KraftCluster, kraft_fake_brokers: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    [broker] = await kraft_fake_brokers(1, dirs=2)
    host, port = kraft_cluster.ext.admin_address  # type: ignore[misc]
    token = str(kraft_cluster.server.config.metadata_log_dir / "admin.token")
    base = ["status", "--admin", f"{host}:{port}", "--token-file", token]
    assert await asyncio.to_thread(cli.main, base) == 0
    plain = capsys.readouterr().out
    assert "the controller never sees paths" in plain and "--broker-ctl" in plain
    chost, cport = broker.broker.control_address
    ctl = ["--broker-ctl", f"{chost}:{cport}"]
    assert await asyncio.to_thread(cli.main, [*base, *ctl]) == 0
    text = capsys.readouterr().out
    for dir_id, path in zip(broker.dirs, broker.log_dirs, strict=True):
        assert f"{uuid_to_base64url(dir_id)} {path}" in text
    assert await asyncio.to_thread(cli.main, [*base, *ctl, "--json"]) == 0
    view = json.loads(capsys.readouterr().out)
    assert sorted(d["path"] for d in view["brokers"][0]["directories"]) == sorted(str(p) for p in broker.log_dirs)
    # broker-ctl takes the id exactly as status printed it.
    first = view["brokers"][0]["directories"][0]["id"]
    assert await asyncio.to_thread(cli.main, ["broker-ctl", f"{chost}:{cport}", "cordon", first]) == 0
    assert capsys.readouterr().out.count('"ok": true') == 1
    assert await asyncio.to_thread(cli.main, [*base, "--broker-ctl", "127.0.0.1:1"]) == 2
    assert "cannot read broker-ctl 127.0.0.1:1" in capsys.readouterr().err
