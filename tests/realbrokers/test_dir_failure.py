"""A log dir fails under load the way Kafka's own tests fail one (replaced by a plain file).

The broker meets the IOException, takes the dir offline and reports it in its next
BrokerHeartbeat (OfflineLogDirs); the controller moves leadership and ISR off the replicas
in that dir; producers with acks=all and idempotence go on through the other broker, and
every acknowledged message is consumed back once. Against both controllers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from kraft_jbod.realkafka import logs, probe
from kraft_jbod.realkafka.cluster import fail_dir_as_kafka_tests_do, wait_until
from tests.realbrokers import clients, ops
from tests.realbrokers.conftest import Cluster

CONTROLLERS = ["mock", "kafka"]


class BackgroundProducer:
    """confluent-kafka producing one message every few ms until stopped; counts acks."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.acked: list[bytes] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "logger": clients.RDKAFKA_LOG,
            }
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(self.topic, value=f"bg-{i:07d}".encode(), on_delivery=self._on_delivery)
            self._producer.poll(0.005)
            i += 1

    def start(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> list[bytes]:
        self._stop.set()
        self._thread.join(30)
        left = self._producer.flush(timeout)
        del self._producer  # a producer left alive reconnects to the stopped cluster for ever
        assert left == 0, f"{left} messages unacknowledged after {timeout} s (errors {self.errors[:3]})"
        return self.acked


def replicas_in(cluster: Cluster, broker_id: int, path: str) -> set[tuple[str, int]]:
    return set(probe.log_dirs(cluster.brokers[broker_id].address)[path].partitions)


@pytest.mark.parametrize("controller", CONTROLLERS)
def test_dir_replaced_by_file_under_load(real_cluster: Callable[..., Cluster], controller: str) -> None:
    cluster = real_cluster(controller=controller, brokers=2, log_dirs=2)
    cluster.benign += logs.DIR_FAILURE
    assignment = [[1, 2], [2, 1]] * 4
    ops.create_via_broker(cluster, "orders", assignment)
    d1 = str(cluster.brokers[1].log_dirs[0])
    ops.wait_for_replicas(cluster, 1, "orders", len(assignment))
    in_d1 = {tp for tp in replicas_in(cluster, 1, d1) if tp[0] == "orders"}
    led_in_d1 = {tp for tp in in_d1 if ops.leaders(cluster, "orders")[tp[1]] == 1}
    assert led_in_d1, "the placement put no leader of broker 1 in its first dir; nothing to move"

    producer = BackgroundProducer(cluster.bootstrap_servers, "orders").start()
    wait_until("the producer's first acks", lambda: len(producer.acked) > 200, 60)
    failed_at = time.monotonic()
    fail_dir_as_kafka_tests_do(cluster.brokers[1].log_dirs[0])

    def moved() -> bool:
        view = cluster.metadata(["orders"], via=2)
        return all(view.partitions[tp].leader == 2 and 1 not in view.partitions[tp].isr for tp in in_d1)

    wait_until("leaders and ISR off broker 1's failed dir", moved, 90, interval=0.05)
    moved_after = time.monotonic() - failed_at
    acked_at_move = len(producer.acked)
    wait_until("acks after the move", lambda: len(producer.acked) > acked_at_move + 200, 90)
    acked = producer.stop()

    # the broker is still up and unfenced: only one of its two dirs failed
    assert cluster.brokers[1].process.running()
    view = cluster.wait_unfenced([1, 2])
    assert set(view.brokers) == {1, 2}
    dirs = probe.log_dirs(cluster.brokers[1].address)
    assert dirs[d1].error_code != 0  # KAFKA_STORAGE_ERROR for the failed dir
    # replicas outside the failed dir stay in the ISR
    view = cluster.metadata(["orders"], via=2)
    for (topic, p), part in view.partitions.items():
        if (topic, p) not in in_d1:
            assert 1 in part.isr, (topic, p, part)

    got = clients.confluent_consume(cluster.bootstrap_servers, "orders", len(acked), group="after-failure")
    t = clients.tally(acked, got)
    assert (t.lost, t.duplicated) == (0, 0), t
    print(f"[{controller}] dir failure -> leaders moved in {moved_after:.2f} s; {t}")
