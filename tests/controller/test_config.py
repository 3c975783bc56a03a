"""Kafka properties parsing (java.util.Properties rules) and the controller's typed config."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from kraft_jbod.controller.config import (
    ControllerConfig,
    Listener,
    load,
    parse_listeners,
    parse_override,
    parse_properties,
)
from kraft_jbod.errors import ConfigError

BASE = {"node.id": "1", "listeners": "CONTROLLER://127.0.0.1:0", "controller.listener.names": "CONTROLLER"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=b", {"a": "b"}),
        ("a:b", {"a": "b"}),
        ("a b", {"a": "b"}),
        ("  a  =  b c  ", {"a": "b c  "}),
        ("a==b", {"a": "=b"}),
        ("a = : b", {"a": ": b"}),
        ("# c\n! c\n\n   \na=1", {"a": "1"}),
        ("key\\ with\\:odd\\=chars=v", {"key with:odd=chars": "v"}),
        ("a=one\\\n    two\\\n\tthree", {"a": "onetwothree"}),
        ("a=x\\\\\nb=y", {"a": "x\\", "b": "y"}),
        ("a=tab\\there\\nnl\\u0041\\q", {"a": "tab\there\nnlAq"}),
        ("a=1\r\nb=2\rc=3", {"a": "1", "b": "2", "c": "3"}),
        ("a=1\na=2", {"a": "2"}),
        ("a", {"a": ""}),
        ("a=\\\n# not a comment", {"a": "# not a comment"}),
        ("# comment \\\nb=2", {"b": "2"}),
        ("a=end\\", {"a": "end"}),
        ("\u00e9=\u00fc", {"\u00e9": "\u00fc"}),
    ],
)
def test_properties_syntax(text: str, expected: dict[str, str]) -> None:
    assert parse_properties(text) == expected


def test_bad_unicode_escape_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"line 2: malformed \\uxxxx"):
        parse_properties("a=1\nb=\\u12G4")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("CONTROLLER://127.0.0.1:9093", [Listener("CONTROLLER", "127.0.0.1", 9093)]),
        ("controller://:0", [Listener("CONTROLLER", "", 0)]),
        (
            "CONTROLLER://[::1]:0, PLAIN://localhost:9092",
            [Listener("CONTROLLER", "::1", 0), Listener("PLAIN", "localhost", 9092)],
        ),
    ],
)
def test_listeners(value: str, expected: list[Listener]) -> None:
    assert parse_listeners(value) == expected


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("CONTROLLER:9093", "not NAME://host:port"),
        ("CONTROLLER://host", "not NAME://host:port"),
        ("CONTROLLER://host:70000", "outside 0-65535"),
        ("CONTROLLER://host:-1", "outside 0-65535"),
        ("A://h:1,a://h:2", "more than once"),
    ],
)
def test_bad_listeners(value: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_listeners(value)


def test_defaults_are_kafkas() -> None:
    cfg = ControllerConfig.from_properties({**BASE, "log.dirs": "/data/d1, /data/d2"})
    assert cfg.node_id == 1
    assert cfg.session_timeout_ms == 9000
    assert cfg.heartbeat_interval_ms == 2000
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.default_replication_factor == 1 and cfg.num_partitions == 1
    assert cfg.semantics == "kafka"
    # metadata.log.dir falls back to the first log.dirs entry, as in Kafka.
    assert cfg.metadata_log_dir == Path("/data/d1")
    assert cfg.metadata_partition_dir == Path("/data/d1/__cluster_metadata-0")
    assert cfg.controller_listeners == [Listener("CONTROLLER", "127.0.0.1", 0)]


def test_metadata_log_dir_precedence() -> None:
    assert ControllerConfig.from_properties({**BASE}).metadata_log_dir == Path("/tmp/kafka-logs")
    assert ControllerConfig.from_properties({**BASE, "log.dir": "/x"}).metadata_log_dir == Path("/x")
    cfg = ControllerConfig.from_properties({**BASE, "log.dirs": "/a", "metadata.log.dir": "/m"})
    assert cfg.metadata_log_dir == Path("/m")


def test_every_setting_read() -> None:
    cfg = ControllerConfig.from_properties(
        {
            **BASE,
            "listeners": "CONTROLLER://127.0.0.1:0,OTHER://[::1]:0",
            "controller.listener.names": "CONTROLLER,OTHER",
            "broker.session.timeout.ms": "1500",
            "broker.heartbeat.interval.ms": " 300 ",
            "socket.request.max.bytes": "1024",
            "default.replication.factor": "3",
            "num.partitions": "8",
            "kraft.jbod.semantics": "kip",
        }
    )
    assert (cfg.session_timeout_ms, cfg.heartbeat_interval_ms, cfg.socket_request_max_bytes) == (1500, 300, 1024)
    assert (cfg.default_replication_factor, cfg.num_partitions, cfg.semantics) == (3, 8, "kip")
    assert [li.name for li in cfg.controller_listeners] == ["CONTROLLER", "OTHER"]


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("node.id", "one", "node.id: 'one' is not an integer"),
        ("node.id", "-1", "node.id: '-1' must be at least 0"),
        ("broker.session.timeout.ms", "0", "broker.session.timeout.ms: '0' must be at least 1"),
        ("socket.request.max.bytes", "99999999999", "socket.request.max.bytes: '99999999999' is outside the int32"),
        ("num.partitions", "1.5", "num.partitions: '1.5' is not an integer"),
        ("kraft.jbod.semantics", "zk", "kraft.jbod.semantics: 'zk'"),
        ("process.roles", "broker", "controller role only"),
        ("process.roles", "controller,zookeeper", "unknown role 'zookeeper'"),
        ("controller.listener.names", "NOPE", "NOPE is not in listeners"),
        ("listener.security.protocol.map", "CONTROLLER:SSL", "CONTROLLER:SSL is not supported"),
    ],
)
def test_bad_values_name_key_and_value(key: str, value: str, match: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(match)):
        ControllerConfig.from_properties({**BASE, key: value})


def test_required_keys() -> None:
    with pytest.raises(ConfigError, match=r"node\.id is required"):
        ControllerConfig.from_properties({k: v for k, v in BASE.items() if k != "node.id"})
    with pytest.raises(ConfigError, match=r"controller\.listener\.names is required"):
        ControllerConfig.from_properties({k: v for k, v in BASE.items() if k != "controller.listener.names"})


def test_unknown_keys_kept_and_warned(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        cfg = ControllerConfig.from_properties({**BASE, "some.future.key": "x", "log.dirs": "/d"})
    assert cfg.unknown == {"some.future.key": "x"}
    assert "some.future.key" in caplog.text and "log.dirs" not in caplog.text


def test_overrides(tmp_path: Path) -> None:
    f = tmp_path / "c.properties"
    f.write_text("node.id=1\nlisteners=CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n")
    cfg = load(f, ["node.id=7", "listeners=CONTROLLER://127.0.0.1:0", "metadata.log.dir=/a=b"])
    assert cfg.node_id == 7 and cfg.listeners[0].port == 0 and cfg.metadata_log_dir == Path("/a=b")
    assert parse_override(" k = v=w") == ("k", " v=w")
    with pytest.raises(ConfigError, match="not key=value"):
        parse_override("novalue")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load(tmp_path / "missing.properties")
