"""Fault injection from the mock, seen by real Kafka brokers and clients.

Only the mock can be told to misbehave, so these run against it alone:

* BrokerHeartbeat answers dropped for broker 1: its session expires, the mock fences it and
  moves its leaderships to broker 2, producers go on through broker 2; once the rule is
  removed the next heartbeat is answered and broker 1 is unfenced again;
* AssignReplicasToDirs refused (an error code, three times): the real broker's assignment
  manager logs the failure and retries, and the directories the broker reports land in the
  metadata in the end.
"""

from __future__ import annotations

from collections.abc import Callable

from kraft_jbod.realkafka import logs
from kraft_jbod.realkafka.cluster import wait_until
from tests.realbrokers import clients, ops
from tests.realbrokers.conftest import Cluster

RESERVED_DIRS = ("UNASSIGNED", "LOST", "MIGRATING")  # how /status names the reserved ids
UNKNOWN_SERVER_ERROR = -1

ASSIGNMENT_RETRIED = logs.Benign(
    r"ERROR \[AssignmentsManager id=\d+\] handleResponse: \d+ assignments failed; global error: Response-level "
    r"error: UNKNOWN_SERVER_ERROR\. Retrying\.",
    "AssignReplicasToDirs refused by a fault rule",
    "the broker's assignment manager reports each refused assignment and retries",
)
SESSION_LOST = logs.Benign(
    r"(WARN|ERROR) \[BrokerLifecycleManager id=\d+\] Broker \d+ sent a heartbeat request but received error ",
    "heartbeats dropped by a fault rule",
    "the broker reports the heartbeat it sent without answer",
)


def partition_dirs(cluster: Cluster, topic: str) -> list[list[str]]:
    status = cluster.controller.admin("GET", "/status") if cluster.controller else {}
    for t in status["topics"]:
        if t["name"] == topic:
            return [p["directories"] for p in sorted(t["partitions"], key=lambda p: p["partition"])]
    return []


def test_dropped_heartbeats_fence_a_broker_and_its_leaders_move(real_cluster: Callable[..., Cluster]) -> None:
    cluster = real_cluster(controller="mock", brokers=2, log_dirs=2)
    cluster.benign += [SESSION_LOST, *logs.SHUTDOWN]
    assert cluster.controller is not None
    ops.create_via_broker(cluster, "faults", [[1, 2], [2, 1]] * 2)
    acked = clients.confluent_produce(cluster.bootstrap_servers, "faults", clients.values("a", 200))

    rule = {"id": "drop-hb-1", "match": {"api": "BrokerHeartbeat", "broker_id": 1}, "action": {"type": "drop"}}
    cluster.controller.admin("POST", "/faults", {"rules": [{**rule, "trigger": {"type": "always"}}]})
    cluster.wait_fenced(1, timeout=60)
    wait_until("every leader on broker 2", lambda: set(ops.leaders(cluster, "faults", via=2).values()) == {2}, 60)
    acked += clients.confluent_produce(cluster.bootstrap_servers, "faults", clients.values("b", 200))
    history = cluster.controller.admin("GET", "/faults/history")
    assert any(f["rule"] == "drop-hb-1" for f in history), history

    cluster.controller.admin("DELETE", "/faults/drop-hb-1")
    cluster.wait_unfenced([1, 2], timeout=90)
    got = clients.confluent_consume(cluster.bootstrap_servers, "faults", len(acked), group="after-fence")
    t = clients.tally(acked, got)
    assert (t.acknowledged, t.lost, t.duplicated) == (400, 0, 0), t


def test_refused_assignments_are_retried_until_they_land(real_cluster: Callable[..., Cluster]) -> None:
    cluster = real_cluster(controller="mock", brokers=2, log_dirs=2)
    cluster.benign.append(ASSIGNMENT_RETRIED)
    assert cluster.controller is not None
    rule = {
        "id": "refuse-assign",
        "match": {"api": "AssignReplicasToDirs"},
        "action": {"type": "error", "error_code": UNKNOWN_SERVER_ERROR},
        "trigger": {"type": "times", "n": 3},
    }
    cluster.controller.admin("POST", "/faults", {"rules": [rule]})
    ops.create_via_broker(cluster, "assigned", [[1, 2], [2, 1]] * 2)

    def assigned() -> bool:
        dirs = partition_dirs(cluster, "assigned")
        return bool(dirs) and all(d not in RESERVED_DIRS for p in dirs for d in p)

    wait_until("every replica's directory assigned despite the refusals", assigned, 90)
    fired = [f for f in cluster.controller.admin("GET", "/faults/history") if f["rule"] == "refuse-assign"]
    assert 1 <= len(fired) <= 3 and all(f["api_key"] == 73 for f in fired), fired
