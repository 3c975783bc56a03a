"""Observability: Prometheus text over HTTP, StatsD over UDP, JSON-lines logs, ``kraft-jbod status``."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import urllib.request

import asyncio_dgram
import pytest

from kraft_jbod import cli
from kraft_jbod.metrics import logs
from kraft_jbod.metrics.registry import Registry
from kraft_jbod.metrics.statsd import StatsdEmitter, lines, pack
from kraft_jbod.pytest_plugin import KraftCluster


def test_prometheus_text_format() -> None:
    reg = Registry()
    c = reg.counter("requests_total", "requests")
    c.inc(labels={"api": "Metadata", "error": 0})
    c.inc(2, labels={"api": 'we"ird\n', "error": 3})
    reg.gauge("up", "liveness", lambda: 1.0)
    reg.observe("lat_seconds", 0.003)
    text = reg.prometheus()
    assert "# TYPE kraft_jbod_requests_total counter" in text
    assert 'kraft_jbod_requests_total{api="Metadata",error="0"} 1' in text
    assert 'kraft_jbod_requests_total{api="we\\"ird\\n",error="3"} 2' in text
    assert "kraft_jbod_up 1" in text
    assert 'kraft_jbod_lat_seconds_bucket{le="0.0025"} 0' in text
    assert 'kraft_jbod_lat_seconds_bucket{le="0.005"} 1' in text
    assert "kraft_jbod_lat_seconds_count 1" in text


def test_statsd_lines_send_deltas_only() -> None:
    reg = Registry()
    c = reg.counter("hits")
    c.inc(3, labels={"api": "X"})
    sent: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    assert lines(reg, sent) == ["kraft_jbod_hits:3|c|#api:X"]
    assert lines(reg, sent) == []
    c.inc(labels={"api": "X"})
    assert lines(reg, sent, tags=False) == ["kraft_jbod_hits.X:1|c"]
    assert [len(d) <= 20 for d in pack(["a" * 8, "b" * 8, "c" * 8], 20)] == [True, True]


async def test_statsd_over_udp_and_prometheus_endpoint(kraft_cluster: KraftCluster) -> None:
    b = await kraft_cluster.add_broker(1)
    await kraft_cluster.create_topic("m", partitions=2, replication_factor=1)
    await b.fail_directory(0)
    receiver = await asyncio_dgram.bind(("127.0.0.1", 0))
    emitter = StatsdEmitter(kraft_cluster.ext.registry, receiver.sockname, clock=kraft_cluster.clock)
    await emitter.start()
    try:
        assert await emitter.flush() >= 1
        data, _ = await asyncio.wait_for(receiver.recv(), 5)
        got = data.decode().split("\n")
        assert any(x.startswith("kraft_jbod_requests_total:") and "api:BrokerHeartbeat" in x for x in got)
        assert "kraft_jbod_offline_directories:1|g|#broker:1" in got
    finally:
        await emitter.close()
        receiver.close()
    url = kraft_cluster.admin_url + "/metrics"
    req = urllib.request.Request(url, headers=kraft_cluster.admin_headers)
    text = await asyncio.to_thread(lambda: urllib.request.urlopen(req, timeout=10).read().decode())
    assert 'kraft_jbod_brokers{state="UNFENCED"} 1' in text
    assert "kraft_jbod_fenced_brokers 0" in text
    assert 'kraft_jbod_partitions{kind="all"} 2' in text
    assert 'kraft_jbod_requests_total{api="CreateTopics",error="0",listener="CONTROLLER"} 1' in text
    assert "kraft_jbod_metadata_log_append_seconds_count" in text
    size = [line for line in text.splitlines() if line.startswith("kraft_jbod_metadata_log_bytes ")]
    assert size and int(size[0].split()[1]) > 0


def test_json_lines_logs() -> None:
    out = io.StringIO()
    handler = logs.setup("INFO", json_lines=True, stream=out)
    try:
        logging.getLogger("kraft_jbod.test").warning("broker %d fenced", 3, extra={"broker": 3})
    finally:
        logging.getLogger().removeHandler(handler)
    row = json.loads(out.getvalue().strip().splitlines()[-1])
    assert row["msg"] == "broker 3 fenced" and row["broker"] == 3 and row["level"] == "WARNING"


async def test_status_command_reads_the_admin_endpoint(kraft_cluster: KraftCluster, capsys: object) -> None:
    await kraft_cluster.add_broker(7)
    await kraft_cluster.create_topic("s", partitions=1, replication_factor=1)
    host, port = kraft_cluster.ext.admin_address  # type: ignore[misc]
    token = str(kraft_cluster.server.config.metadata_log_dir / "admin.token")
    rc = await asyncio.to_thread(cli.main, ["status", "--admin", f"{host}:{port}", "--token-file", token, "--json"])
    assert rc == 0
    view = json.loads(capsys.readouterr().out)  # type: ignore[attr-defined]
    assert view["brokers"][0]["id"] == 7 and view["topics"][0]["partitions"][0]["leader"] == 7
    rc = await asyncio.to_thread(cli.main, ["status", "--admin", f"{host}:{port}", "--token-file", token])
    text = capsys.readouterr().out  # type: ignore[attr-defined]
    assert rc == 0 and "s-0  leader 7" in text and "UNFENCED" in text


def test_status_command_unreachable_admin(capsys: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KRAFT_JBOD_ADMIN_TOKEN", "x" * 20)
    rc = cli.main(["status", "--admin", "127.0.0.1:1"])
    assert rc == 2
    assert "cannot reach" in capsys.readouterr().err  # type: ignore[attr-defined]
