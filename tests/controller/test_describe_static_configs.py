"""DescribeConfigs of the controller's own node lists its static ``listeners`` (every address
it bound, port 0 resolved, client listeners included) and ``controller.listener.names``,
with source STATIC_BROKER_CONFIG (4), as Kafka's controller lists its KafkaConfig; the
cluster default and the client listener list dynamic configs only."""

from __future__ import annotations

import pytest

from kraft_jbod.controller.apis.configs import static_listener_configs
from kraft_jbod.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kraft_jbod.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraft_jbod.pytest_plugin import KafkaConnection, KraftCluster

STATIC, DYNAMIC_BROKER, DEFAULT, LIST = 4, 2, 5, 7


def _describe(name: str, keys: list[str] | None, synonyms: bool = False) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=[DescribeConfigsResource(resource_type=4, resource_name=name, configuration_keys=keys)],
        include_synonyms=synonyms,
    )


async def _ask(address: tuple[str, int], req: DescribeConfigsRequest, version: int = 4) -> dict[str, object]:
    conn = await KafkaConnection.open(address)
    try:
        resp = await conn.call(req, version)
    finally:
        await conn.close()
    [result] = resp.results
    assert result.error_code == 0, result.error_message
    return {c.name: c for c in result.configs}


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_own_node_lists_the_bound_listeners_as_static_configs(kraft_cluster: KraftCluster, version: int) -> None:
    node = kraft_cluster.server.config.node_id
    (chost, cport), (khost, kport) = kraft_cluster.controller_address, kraft_cluster.client_address
    assert cport != 0 and kport != 0
    got = await _ask(
        kraft_cluster.controller_address, _describe(str(node), ["listeners", "controller.listener.names"]), version
    )
    listeners, names = got["listeners"], got["controller.listener.names"]
    assert listeners.value == f"CONTROLLER://{chost}:{cport},CLIENT://{khost}:{kport}"  # type: ignore[attr-defined]
    assert names.value == "CONTROLLER"  # type: ignore[attr-defined]
    for entry in (listeners, names):
        assert entry.config_source == STATIC  # type: ignore[attr-defined]
        assert entry.config_type == (LIST if version >= 3 else 0)  # type: ignore[attr-defined]
    # Kafka: listeners is a per-broker dynamic config, controller.listener.names is not.
    assert (listeners.read_only, names.read_only) == (False, True)  # type: ignore[attr-defined]


async def test_synonyms_and_a_dynamic_override_come_first(kraft_cluster: KraftCluster) -> None:
    node = str(kraft_cluster.server.config.node_id)
    got = await _ask(kraft_cluster.controller_address, _describe(node, ["listeners"], synonyms=True))
    chain = [(s.source, s.value) for s in got["listeners"].synonyms]  # type: ignore[attr-defined]
    assert [src for src, _ in chain] == [STATIC, DEFAULT]
    assert chain[1][1] == "PLAINTEXT://:9092"

    conn = await KafkaConnection.open(kraft_cluster.controller_address)
    try:
        op = AlterableConfig(name="listeners", config_operation=0, value="CLIENT://elsewhere:1")
        resp = await conn.call(
            IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(4, node, [op])], validate_only=False), 1
        )
    finally:
        await conn.close()
    assert resp.responses[0].error_code == 0, resp.responses[0].error_message
    got = await _ask(kraft_cluster.controller_address, _describe(node, ["listeners"], synonyms=True))
    entry = got["listeners"]
    assert (entry.value, entry.config_source) == ("CLIENT://elsewhere:1", DYNAMIC_BROKER)  # type: ignore[attr-defined]
    assert [s.source for s in entry.synonyms] == [DYNAMIC_BROKER, STATIC, DEFAULT]  # type: ignore[attr-defined]


async def test_all_keys_include_them_but_not_the_cluster_default_nor_the_client_listener(
    kraft_cluster: KraftCluster,
) -> None:
    node = str(kraft_cluster.server.config.node_id)
    everything = await _ask(kraft_cluster.controller_address, _describe(node, None))
    assert {"listeners", "controller.listener.names"} <= set(everything)
    cluster_default = await _ask(kraft_cluster.controller_address, _describe("", None))
    assert not {"listeners", "controller.listener.names"} & set(cluster_default)
    through_clients = await _ask(kraft_cluster.client_address, _describe(node, None))
    assert not {"listeners", "controller.listener.names"} & set(through_clients)


@pytest.mark.parametrize(
    ("bound", "expected"),
    [
        ([("CONTROLLER", "127.0.0.1", 9093)], "CONTROLLER://127.0.0.1:9093"),
        # every interface: IPv4 and IPv6 sockets on one port, written as Kafka writes it
        ([("CONTROLLER", "0.0.0.0", 9093), ("CONTROLLER", "::", 9093)], "CONTROLLER://:9093"),
        ([("CONTROLLER", "::", 9093), ("CONTROLLER", "0.0.0.0", 9093)], "CONTROLLER://:9093"),
        # a name resolving to two addresses keeps the first; IPv6 bracketed
        ([("CLIENT", "::1", 5), ("CLIENT", "127.0.0.1", 6)], "CLIENT://[::1]:5"),
        (
            [("CONTROLLER", "127.0.0.1", 1), ("CLIENT", "127.0.0.1", 2), ("OTHER", "10.1.2.3", 3)],
            "CONTROLLER://127.0.0.1:1,CLIENT://127.0.0.1:2,OTHER://10.1.2.3:3",
        ),
    ],
)
def test_listeners_value_from_the_bound_sockets(bound: list[tuple[str, str, int]], expected: str) -> None:
    out = static_listener_configs(bound, ["CONTROLLER", "C2"])
    assert out == {"listeners": expected, "controller.listener.names": "CONTROLLER,C2"}
