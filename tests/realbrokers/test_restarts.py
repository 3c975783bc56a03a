"""A broker's controlled shutdown and restarts with a dir in each state, against both controllers.

One broker (1, two dirs) goes through, in order: controlled shutdown while it leads
(SIGTERM; leadership moves to broker 2, producers go on); a plain restart; a restart with
its second dir replaced by a file (the dir is offline from the start: its replicas stay
offline and out of the ISR, the others rejoin); a restart with the original dir back
(everything rejoins); a restart on a new, empty disk (Kafka 4.4 refuses it: "No
meta.properties found"); and, after Kafka's ``kafka-storage format --ignore-formatted``,
a restart on that disk (it gets a new directory id; the replicas that lived on the old
disk are re-created, the broker tells the controller where with AssignReplicasToDirs, and
they rejoin the ISR). Every acknowledged message is consumed back at the end.

What happens at each step is the same with the mock and with Kafka's own controller: these
assertions are what both were seen to do.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest

from kraft_jbod.realkafka import logs, probe
from kraft_jbod.realkafka.cluster import wait_until
from kraft_jbod.storage.meta import read_meta_properties
from tests.realbrokers import clients, ops
from tests.realbrokers.conftest import Cluster

KAFKA_STORAGE_ERROR = 56
TOPIC = "restarts"
PARTITIONS = 6


def isr_view(cluster: Cluster) -> dict[int, tuple[tuple[int, ...], tuple[int, ...]]]:
    view = cluster.metadata([TOPIC], via=2)
    return {p: (v.isr, v.offline_replicas) for (t, p), v in view.partitions.items() if t == TOPIC}


def wait_all_in_isr(cluster: Cluster) -> None:
    wait_until(
        "broker 1 back in every ISR",
        lambda: all(1 in isr and not off for isr, off in isr_view(cluster).values()),
        120,
    )


@pytest.mark.parametrize("controller", ["mock", "kafka"])
def test_controlled_shutdown_and_restarts(real_cluster: Callable[..., Cluster], controller: str) -> None:
    cluster = real_cluster(controller=controller, brokers=2, log_dirs=2)
    cluster.benign += logs.RESTART_WITHOUT_A_DIR
    broker = cluster.brokers[1]
    d1, d2 = broker.log_dirs
    ops.create_via_broker(cluster, TOPIC, [[1, 2], [2, 1]] * (PARTITIONS // 2))
    ops.wait_for_replicas(cluster, 1, TOPIC, PARTITIONS)
    in_d2 = {p for t, p in probe.log_dirs(broker.address)[str(d2)].partitions if t == TOPIC}
    assert in_d2 and len(in_d2) < PARTITIONS, "the broker spreads the topic over both dirs"
    acked = clients.confluent_produce(cluster.bootstrap_servers, TOPIC, clients.values("before", 300))

    # 1. controlled shutdown of a leader: leadership moves, producers go on
    assert 1 in ops.leaders(cluster, TOPIC).values()
    assert cluster.stop_broker(1) in (0, 143)  # 143: the JVM ends with SIGTERM after its shutdown hook
    cluster.wait_fenced(1)
    assert set(ops.leaders(cluster, TOPIC, via=2).values()) == {2}
    acked += clients.confluent_produce(cluster.bootstrap_servers, TOPIC, clients.values("down", 300))

    # 2. plain restart: unfenced, back in every ISR
    cluster.start_broker(1)
    cluster.wait_unfenced([1, 2])
    wait_all_in_isr(cluster)

    # 3. restart with the second dir replaced by a file: that dir is offline from the start
    cluster.stop_broker(1)
    aside = d2.with_name("d2.aside")
    shutil.move(d2, aside)
    d2.write_text("not a directory\n")
    cluster.start_broker(1)
    cluster.wait_unfenced([1, 2])
    dirs = probe.log_dirs(broker.address)
    assert dirs[str(d1)].error_code == 0
    assert dirs[str(d2)].error_code == KAFKA_STORAGE_ERROR and not dirs[str(d2)].partitions

    def settled() -> bool:
        view = isr_view(cluster)
        return all(
            (1 not in isr and 1 in off) if p in in_d2 else (1 in isr and not off) for p, (isr, off) in view.items()
        )

    wait_until("replicas of the file-dir offline, the others in the ISR", settled, 120)
    acked += clients.confluent_produce(cluster.bootstrap_servers, TOPIC, clients.values("file", 300))

    # 4. the original dir back: every replica rejoins
    cluster.stop_broker(1)
    d2.unlink()
    shutil.move(aside, d2)
    cluster.start_broker(1)
    wait_all_in_isr(cluster)
    dirs = probe.log_dirs(broker.address)
    assert {p for t, p in dirs[str(d2)].partitions if t == TOPIC} == in_d2

    # 5. a new, empty disk: Kafka 4.4 refuses to start until it is formatted
    old_id = read_meta_properties(d2)
    cluster.stop_broker(1)
    shutil.rmtree(d2)
    d2.mkdir()
    log = cluster.broker_restart_refused(1)
    assert f"No `meta.properties` found in {d2}" in log

    # 6. formatted with Kafka's tool (--ignore-formatted keeps d1 and the metadata dir as they are)
    result = cluster.format_with_kafka(broker)
    assert result.returncode == 0, result.stdout + result.stderr
    new_id = read_meta_properties(d2)
    assert old_id is not None and new_id is not None and new_id.directory_id != old_id.directory_id
    cluster.start_broker(1)
    wait_all_in_isr(cluster)
    dirs = probe.log_dirs(broker.address)
    held = {p for d in dirs.values() for t, p in d.partitions if t == TOPIC}
    assert held == set(range(PARTITIONS)) and all(d.error_code == 0 for d in dirs.values())

    got = clients.confluent_consume(cluster.bootstrap_servers, TOPIC, len(acked), group="after-restarts")
    t = clients.tally(acked, got)
    assert (t.acknowledged, t.lost, t.duplicated) == (900, 0, 0), t
