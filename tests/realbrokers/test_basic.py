"""Real Kafka brokers register, catch up and serve real clients, against both controllers.

Every scenario runs twice: against the mock and against Kafka's own controller from the
same Kafka build. The assertions are the same for both: what clients observe must not
depend on which controller runs the cluster.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kraft_jbod.realkafka import probe
from tests.realbrokers import clients, ops
from tests.realbrokers.conftest import Cluster

CONTROLLERS = ["mock", "kafka"]


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_register_unfence_and_serve_three_clients(real_cluster: Callable[..., Cluster], controller: str) -> None:
    cluster = real_cluster(controller=controller, brokers=2, log_dirs=2)
    view = cluster.wait_unfenced()
    assert set(view.brokers) == {1, 2}
    # every broker registered both of its dirs, each reachable through DescribeLogDirs
    for broker in cluster.brokers.values():
        dirs = probe.log_dirs(broker.address)
        assert set(dirs) == {str(d) for d in broker.log_dirs}
        assert all(d.error_code == 0 for d in dirs.values())

    # partitions led by both brokers, created through a broker (forwarded) and the controller
    ops.create_via_broker(cluster, "via-broker", [[1, 2], [2, 1], [1, 2], [2, 1]])
    assert ops.create_via_controller(cluster, "via-controller", [[2, 1], [1, 2]]) == 0
    assert set(ops.leaders(cluster, "via-broker").values()) == {1, 2}
    assert set(ops.leaders(cluster, "via-controller").values()) == {1, 2}
    if controller == "mock":  # only the mock has a client listener of its own
        assert ops.create_via_controller(cluster, "via-client-listener", [[1, 2]], listener="client") == 0
        assert ops.leaders(cluster, "via-client-listener") == {0: 1}

    for name, (produce, consume) in clients.CLIENTS.items():
        for topic in ("via-broker", "via-controller"):
            vals = clients.values(f"{name}-{topic}", 300)
            acked = produce(cluster.bootstrap_servers, topic, vals)
            got = consume(cluster.bootstrap_servers, topic, len(vals), group=f"g-{name}-{topic}")
            mine = [v for v in got if v.startswith(f"{name}-{topic}".encode())]
            t = clients.tally(acked, mine)
            assert (t.acknowledged, t.lost, t.duplicated) == (300, 0, 0), (name, topic, t)

    # replicas sit in the brokers' dirs, and every dir reported holds what the broker has
    for broker in cluster.brokers.values():
        held = set().union(*(d.partitions for d in probe.log_dirs(broker.address).values()))
        assert {("via-broker", p) for p in range(4)} <= held
