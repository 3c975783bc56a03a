"""Cordoned log dirs (KIP-1066) at metadata.version 4.3-IV0, against both controllers.

Broker 1 starts with its second dir in ``cordoned.log.dirs``: it registers it cordoned, no
new replica is placed there, and DescribeLogDirs (v5) from the real broker shows it with
IsCordoned. Broker 2 has no cordoned dir: its answer says so.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kraft_jbod.realkafka import probe
from tests.realbrokers import ops
from tests.realbrokers.conftest import Cluster


@pytest.mark.parametrize("controller", ["mock", "kafka"])
def test_cordoned_dir_gets_no_new_replica(real_cluster: Callable[..., Cluster], controller: str) -> None:
    cluster = real_cluster(controller=controller, brokers=2, log_dirs=2, metadata_version="4.3-IV0", cordoned={1: [1]})
    d1, d2 = (str(d) for d in cluster.brokers[1].log_dirs)
    ops.create_via_broker(cluster, "cordoned", [[1, 2], [2, 1]] * 4)
    ops.wait_for_replicas(cluster, 1, "cordoned", 8)

    dirs = probe.log_dirs(cluster.brokers[1].address)
    assert dirs[d2].is_cordoned and not dirs[d1].is_cordoned
    assert not {tp for tp in dirs[d2].partitions if tp[0] == "cordoned"}
    assert {p for t, p in dirs[d1].partitions if t == "cordoned"} == set(range(8))
    other = probe.log_dirs(cluster.brokers[2].address)
    assert not any(d.is_cordoned for d in other.values())
    # broker 2 spreads its replicas over both of its dirs
    assert all(any(t == "cordoned" for t, _ in d.partitions) for d in other.values())
