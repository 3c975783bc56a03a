"""What the fake broker advertises (broker/advertise.py): the pure rules, table-driven, then
the whole path: a controller with a client listener, fake brokers without
advertised.listeners whose own listeners serve nothing, and real clients (librdkafka,
kafka-python) whose follow-up connections to the advertised brokers must get answers."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from kraft_jbod.broker import advertise
from kraft_jbod.broker.config import BrokerConfig, Voter
from kraft_jbod.broker.server import OUR_VERSIONS, Channel, FakeBroker, UnsupportedApi
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, controller_config, wait_for
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.properties import Listener
from kraft_jbod.pytest_plugin import KraftCluster
from kraft_jbod.storage import format_storage

VOTER = Voter(3000, "10.0.0.7", 9093)


def _answer(
    configs: Mapping[str, str | None], *, name: str = "3000", error: int = 0, message: str | None = None
) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(
        results=[
            DescribeConfigsResult(
                error_code=error,
                error_message=message,
                resource_type=4,
                resource_name=name,
                configs=[DescribeConfigsResourceResult(name=k, value=v, config_source=4) for k, v in configs.items()],
            )
        ]
    )


CONTROLLER_NAMES = {"controller.listener.names": "CONTROLLER"}

# (case, answer, expected listeners, words the problem must contain)
CASES: list[tuple[str, DescribeConfigsResponse, tuple[Listener, ...], str]] = [
    (
        "one client listener",
        _answer({"listeners": "CONTROLLER://10.0.0.7:9093,CLIENT://10.0.0.7:9094", **CONTROLLER_NAMES}),
        (Listener("CLIENT", "10.0.0.7", 9094),),
        "",
    ),
    (
        "several client listeners, in the controller's order",
        _answer(
            {
                "listeners": "INTERNAL://10.0.0.7:9095,CONTROLLER://10.0.0.7:9093,EXTERNAL://kafka.example:19094",
                **CONTROLLER_NAMES,
            }
        ),
        (Listener("INTERNAL", "10.0.0.7", 9095), Listener("EXTERNAL", "kafka.example", 19094)),
        "",
    ),
    (
        "two controller listener names",
        _answer(
            {
                "listeners": "CONTROLLER://h:1,CONTROLLER2://h:2,CLIENT://h:3",
                "controller.listener.names": "controller, CONTROLLER2",
            }
        ),
        (Listener("CLIENT", "h", 3),),
        "",
    ),
    (
        "IPv6 host",
        _answer({"listeners": "CONTROLLER://[::1]:9093,CLIENT://[fe80::1%eth0]:9094", **CONTROLLER_NAMES}),
        (Listener("CLIENT", "fe80::1%eth0", 9094),),
        "",
    ),
    (
        "every interface: the host the broker reaches the controller at",
        _answer(
            {"listeners": "CONTROLLER://:9093,CLIENT://:9094,OTHER://0.0.0.0:9095,V6://[::]:9096", **CONTROLLER_NAMES}
        ),
        (Listener("CLIENT", "10.0.0.7", 9094), Listener("OTHER", "10.0.0.7", 9095), Listener("V6", "10.0.0.7", 9096)),
        "",
    ),
    (
        "no controller.listener.names: the voter's port is the controller's",
        _answer({"listeners": "CONTROLLER://10.0.0.7:9093,CLIENT://10.0.0.7:9094"}),
        (Listener("CLIENT", "10.0.0.7", 9094),),
        "",
    ),
    (
        "no client listener",
        _answer({"listeners": "CONTROLLER://10.0.0.7:9093", **CONTROLLER_NAMES}),
        (),
        "no client listener",
    ),
    ("no listeners entry", _answer(CONTROLLER_NAMES), (), "no listeners"),
    ("null listeners value", _answer({"listeners": None, **CONTROLLER_NAMES}), (), "no listeners"),
    ("unparseable listeners", _answer({"listeners": "CLIENT:9094", **CONTROLLER_NAMES}), (), "not NAME://host:port"),
    (
        "refusal with a message",
        _answer({}, error=ErrorCode.INVALID_REQUEST, message="Unexpected broker id"),
        (),
        "INVALID_REQUEST (42): Unexpected broker id",
    ),
    (
        "authorization error",
        _answer({}, error=ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
        (),
        "CLUSTER_AUTHORIZATION_FAILED (31)",
    ),
    (
        "an answer about another resource",
        _answer({"listeners": "CLIENT://h:1"}, name="7"),
        (),
        "no BROKER 3000 result",
    ),
]


@pytest.mark.parametrize(("case", "resp", "expected", "problem"), CASES, ids=[c[0] for c in CASES])
def test_client_listeners_from_describe_configs(
    case: str, resp: DescribeConfigsResponse, expected: tuple[Listener, ...], problem: str
) -> None:
    learned = advertise.from_describe_configs(resp, VOTER)
    assert learned.listeners == expected
    if expected:
        assert learned.problem is None
    else:
        assert learned.problem is not None and problem in learned.problem


def test_the_request_names_the_controller_node_and_the_two_keys() -> None:
    req = advertise.describe_request(3000)
    [res] = req.resources
    assert (res.resource_type, res.resource_name, res.configuration_keys) == (
        4,
        "3000",
        ["listeners", "controller.listener.names"],
    )


def _config(**extra: str) -> BrokerConfig:
    props = {
        "node.id": "1",
        "process.roles": "broker",
        "controller.quorum.voters": "3000@10.0.0.7:9093",
        "log.dirs": "/x/d0,/x/d1",
        "metadata.log.dir": "/x/meta",
        "listeners": "PLAINTEXT://:9092",
        **extra,
    }
    return BrokerConfig.from_properties(props)


def test_advertised_listeners_win_and_the_controller_is_not_needed() -> None:
    cfg = _config(**{"advertised.listeners": "PLAINTEXT://public.example:19092"})
    learned = advertise.Learned((Listener("CLIENT", "10.0.0.7", 9094),))
    for answer in (None, learned):
        chosen = advertise.choose(cfg, answer)
        assert chosen.listeners == (Listener("PLAINTEXT", "public.example", 19092),)
        assert (chosen.source, chosen.warning) == ("advertised.listeners", None)


def test_learned_client_listeners_are_advertised_without_warning() -> None:
    cfg = _config()
    assert cfg.advertised_listeners == ()
    chosen = advertise.choose(cfg, advertise.Learned((Listener("CLIENT", "10.0.0.7", 9094),)))
    assert chosen.listeners == (Listener("CLIENT", "10.0.0.7", 9094),)
    assert chosen.warning is None and "controller 3000" in chosen.source


@pytest.mark.parametrize("problem", ["the controller has no client listener", "the controller refused DescribeConfigs"])
def test_without_client_listeners_the_own_listeners_and_a_warning_that_says_the_fix(problem: str) -> None:
    chosen = advertise.choose(_config(), advertise.Learned(problem=problem))
    assert chosen.listeners == (Listener("PLAINTEXT", "localhost", 9092),)
    assert chosen.source == "listeners"
    assert chosen.warning is not None
    for words in (
        problem,
        "PLAINTEXT://localhost:9092",
        "find nothing there",
        "advertised.listeners",
        "client_listeners",
    ):
        assert words in chosen.warning


def test_a_controller_without_describe_configs_is_unsupported_not_a_broken_channel() -> None:
    ch = Channel("heartbeat", ("127.0.0.1", 1), "1", 1000)
    ch.versions = {ApiKey.BROKER_REGISTRATION: (0, 4)}
    with pytest.raises(UnsupportedApi):
        ch.version(ApiKey.DESCRIBE_CONFIGS)
    ch.versions[ApiKey.DESCRIBE_CONFIGS] = (0, 3)
    assert ch.version(ApiKey.DESCRIBE_CONFIGS) == 3
    assert OUR_VERSIONS[ApiKey.DESCRIBE_CONFIGS] == (1, 4)


# ---------------------------------------------------------------------------- the whole path


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _registered(server: ControllerServer, broker_id: int) -> list[tuple[str, str, int]]:
    reg = server.state.image.brokers[broker_id]
    return [(name, host, port) for name, host, port, _proto in reg.listeners]


async def test_a_controller_without_client_listener_gets_the_own_listeners_and_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    host, port = controller.addresses[0]
    base = tmp_path / "b1"
    cfg = BrokerConfig.from_properties(
        {
            "node.id": "1",
            "process.roles": "broker",
            "controller.quorum.voters": f"{controller.config.node_id}@{host}:{port}",
            "listeners": "PLAINTEXT://127.0.0.1:9092",
            # The advertising of a broker that serves no clients itself.
            "kraft.jbod.serve.clients": "false",
            "log.dirs": f"{base}/d0,{base}/d1",
            "metadata.log.dir": f"{base}/meta",
            "broker.heartbeat.interval.ms": "200",
        }
    )
    format_storage(cfg.layout, CLUSTER_ID)
    caplog.set_level(logging.INFO, logger="kraft_jbod.broker.server")
    try:
        async with FakeBroker(cfg) as broker:
            await wait_for("broker 1 registered", lambda: 1 in controller.state.image.brokers, 15)
            assert _registered(controller, 1) == [("PLAINTEXT", "127.0.0.1", 9092)]
            assert broker.advertised is not None and broker.advertised.source == "listeners"
    finally:
        await controller.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "the controller has no client listener" in warnings[0]
    assert "find nothing there" in warnings[0]
    infos = [r.getMessage() for r in caplog.records if "advertise:" in r.getMessage()]
    assert infos == ["broker 1: advertise: PLAINTEXT://127.0.0.1:9092 (from listeners)"]


def _librdkafka(bootstrap: str) -> tuple[dict[int, str], list[str]]:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    md = admin.list_topics(timeout=10)
    brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
    # CreateTopics goes to the controller Metadata names, one of the brokers, through
    # the endpoint that broker advertised: it needs a follow-up connection that works.
    futures = admin.create_topics([NewTopic("rdkafka-topic", 2, 1)], operation_timeout=10, request_timeout=10)
    futures["rdkafka-topic"].result(timeout=15)
    return brokers, sorted(admin.list_topics(timeout=10).topics)


def _kafka_python(bootstrap: str) -> list[str]:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        # KafkaAdminClient sends CreateTopics to the controller broker id from Metadata.
        admin.create_topics([NewTopic("python-topic", 1, 1)], timeout_ms=10000)
        return sorted(admin.list_topics())
    finally:
        admin.close()


async def test_real_clients_follow_the_advertised_client_listener(kraft_cluster: KraftCluster) -> None:
    # The brokers' own listeners lead nowhere: only what they learn from the controller
    # can make the clients' follow-up connections succeed.
    nowhere = {"listeners": f"PLAINTEXT://127.0.0.1:{_dead_port()}"}
    for b in (1, 2):
        await kraft_cluster.start_broker(b, props=nowhere)
    client_host, client_port = kraft_cluster.client_address
    for b in (1, 2):
        handle = kraft_cluster.fake_brokers[b]
        assert handle.config.advertised_listeners == ()
        assert _registered(kraft_cluster.server, b) == [("CLIENT", client_host, client_port)]
        shown = [e.text for e in handle.broker.events if e.kind == "advertise"]
        assert shown == [
            f"CLIENT://{client_host}:{client_port} (from the client listeners of controller 3000, by DescribeConfigs)"
        ]

    brokers, topics = await asyncio.to_thread(_librdkafka, kraft_cluster.bootstrap)
    assert brokers == {1: kraft_cluster.bootstrap, 2: kraft_cluster.bootstrap}
    assert "rdkafka-topic" in topics
    assert "python-topic" in await asyncio.to_thread(_kafka_python, kraft_cluster.bootstrap)
    names = set(kraft_cluster.server.state.image.topic_names)
    assert {"rdkafka-topic", "python-topic"} <= names


async def test_advertised_listeners_still_win_over_the_controller(kraft_cluster: KraftCluster) -> None:
    props: dict[str, Any] = {
        "listeners": "PLAINTEXT://127.0.0.1:9092",
        "advertised.listeners": "PLAINTEXT://public.example:19092",
    }
    handle = await kraft_cluster.start_broker(1, props=props)
    assert _registered(kraft_cluster.server, 1) == [("PLAINTEXT", "public.example", 19092)]
    assert [e.text for e in handle.broker.events if e.kind == "advertise"] == [
        "PLAINTEXT://public.example:19092 (from advertised.listeners)"
    ]
