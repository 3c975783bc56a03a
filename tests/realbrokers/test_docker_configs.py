"""The compose clusters' rendered configs boot the real Kafka 4.4 broker and the mock as they are.

``docker/generated/CLUSTER/*.properties`` are what the containers run. Without a Docker
engine they are run here directly, with only what a container supplies mapped: volume
paths to local folders, the compose hostnames and fixed ports to 127.0.0.1 and free ports
(advertised listeners then default to the bound ones). The controller gets the compose
file's cluster id and metadata.version; the brokers are formatted with Kafka's own storage
tool as ``docker/format-storage.sh`` does. Every broker of the cluster must come up and be
unfenced, with its JBOD dirs (and the cordoned one) as rendered.

The mixed cluster (3.9 and 4.1 brokers at 3.9-IV0) runs its rendered brokers on this Kafka 4.4
build: the config keys are the same, and a 4.4 broker joins a 3.9-IV0 cluster.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kraft_jbod.properties import load_properties
from kraft_jbod.realkafka import probe
from tests.realbrokers.conftest import Cluster

DOCKER = Path(__file__).resolve().parents[2] / "docker"


def compose_controller_args(cluster_name: str) -> tuple[str, str]:
    doc = yaml.safe_load((DOCKER / f"compose-{cluster_name}.yaml").read_text())
    cmd = doc["services"]["controller"]["command"]
    return cmd[cmd.index("--cluster-id") + 1], cmd[cmd.index("--metadata-version") + 1]


def map_listeners(value: str) -> str:
    # NAME://HOST:PORT or NAME://:PORT -> NAME://127.0.0.1:0
    return ",".join(re.sub(r"^(\w+)://[^,]*$", r"\1://127.0.0.1:0", item.strip()) for item in value.split(","))


def map_paths(props: dict[str, str], root: Path) -> dict[str, str]:
    out = dict(props)
    for key in ("log.dirs", "metadata.log.dir", "cordoned.log.dirs", "log.dir"):
        if key in out:
            out[key] = ",".join(str(root / p.strip().lstrip("/")) for p in out[key].split(",") if p.strip())
    return out


@pytest.mark.parametrize("cluster_name", ["kafka44", "mixed"])
def test_rendered_cluster_boots(real_cluster: Callable[..., Cluster], cluster_name: str, tmp_path: Path) -> None:
    rendered = DOCKER / "generated" / cluster_name
    cluster_id, level = compose_controller_args(cluster_name)
    ctl = load_properties(rendered / "controller.properties")
    ctl = map_paths(ctl, tmp_path / "controller-volume")
    ctl["listeners"] = map_listeners(ctl["listeners"])
    cluster = real_cluster(
        controller="mock", brokers=0, cluster_id=cluster_id, metadata_version=level, controller_overrides=ctl
    )
    brokers = sorted(p for p in rendered.glob("*.properties") if p.name != "controller.properties")
    assert len(brokers) >= 2
    cordoned: dict[int, set[str]] = {}
    for path in brokers:
        props = map_paths(load_properties(path), tmp_path / path.stem)
        props["listeners"] = map_listeners(props["listeners"])
        props.pop("advertised.listeners", None)
        broker = cluster.add_custom_broker(props)
        assert len(broker.log_dirs) >= 2
        cordoned[broker.node_id] = {d for d in props.get("cordoned.log.dirs", "").split(",") if d}
    view = cluster.wait_unfenced()
    assert set(view.brokers) == set(cluster.brokers)
    for broker in cluster.brokers.values():
        dirs = probe.log_dirs(broker.address)
        assert set(dirs) == {str(d) for d in broker.log_dirs}
        assert {p for p, d in dirs.items() if d.is_cordoned} == cordoned[broker.node_id]
