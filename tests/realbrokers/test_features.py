"""A metadata.version upgrade asked of a real broker, which forwards it to the controller.

UpdateFeatures sent to a broker reaches the controller in an Envelope; the controller
writes the new level and every broker applies it (its ApiVersions answer then lists the new
finalized level). A downgrade without the flag that allows it is refused, and an unknown
level too, with the same error codes from both controllers.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kraft_jbod.realkafka import probe
from kraft_jbod.realkafka.cluster import wait_until
from tests.realbrokers import clients, ops
from tests.realbrokers.conftest import Cluster

FROM, TO = ("4.1-IV1", 27), ("4.3-IV0", 30)
UPGRADE = 1
INVALID_UPDATE_VERSION = 95


def finalized_level(address: tuple[str, int]) -> int:
    resp = probe.call(address, ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
    levels = {f.name: f.max_version_level for f in resp.finalized_features}
    return int(levels["metadata.version"])


def update(cluster: Cluster, level: int, upgrade_type: int, *, via: int = 1) -> tuple[int, list[int]]:
    req = UpdateFeaturesRequest(
        timeout_ms=30000,
        feature_updates=[
            FeatureUpdateKey(feature="metadata.version", max_version_level=level, upgrade_type=upgrade_type)
        ],
    )
    resp = probe.call(cluster.brokers[via].address, req, 1, timeout=60)
    return int(resp.error_code), [int(r.error_code) for r in resp.results]


@pytest.mark.parametrize("controller", ["mock", "kafka"])
def test_metadata_version_upgrade_through_a_broker(real_cluster: Callable[..., Cluster], controller: str) -> None:
    cluster = real_cluster(controller=controller, brokers=2, log_dirs=2, metadata_version=FROM[0])
    assert all(finalized_level(b.address) == FROM[1] for b in cluster.brokers.values())
    ops.create_via_broker(cluster, "upgrade", [[1, 2], [2, 1]])

    # an unknown level and a downgrade without permission are refused, nothing changes
    # v1 answers a refused update at the top level, with no per-feature results
    assert update(cluster, 999, UPGRADE) == (INVALID_UPDATE_VERSION, [])
    assert update(cluster, FROM[1] - 1, UPGRADE) == (INVALID_UPDATE_VERSION, [])
    assert all(finalized_level(b.address) == FROM[1] for b in cluster.brokers.values())

    assert update(cluster, TO[1], UPGRADE, via=2) == (0, [0])
    wait_until(
        f"every broker at metadata.version {TO[0]}",
        lambda: all(finalized_level(b.address) == TO[1] for b in cluster.brokers.values()),
        60,
    )
    vals = clients.values("after-upgrade", 200)
    acked = clients.confluent_produce(cluster.bootstrap_servers, "upgrade", vals)
    got = clients.confluent_consume(cluster.bootstrap_servers, "upgrade", len(vals), group="upgrade")
    t = clients.tally(acked, got)
    assert (t.lost, t.duplicated) == (0, 0), t
