"""The records the mock writes for a real cluster's story, next to the records Kafka's controller writes.

The same control-plane story runs against each controller, with real Kafka 4.4 brokers and
no data clients (so nothing depends on which broker a client reached first): two brokers
with two dirs register; a topic is created through a broker (forwarded) and another on the
controller's listener with a topic config; the brokers place their replicas and report
them (AssignReplicasToDirs); a dir of broker 1 is replaced by a file; broker 2 goes through
a controlled shutdown, stays down until its session expires (both controllers then fence it
a second time), and comes back. Both metadata logs are then read with our reader and
normalised (``records.py`` says what and why); the images must be equal, and the record
kinds counted alike, except what docs/divergences.md lists.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kraft_jbod.realkafka import logs, probe
from kraft_jbod.realkafka.cluster import fail_dir_as_kafka_tests_do, wait_until
from tests.realbrokers import ops, records
from tests.realbrokers.conftest import Cluster

RESERVED = {"AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ", "AAAAAAAAAAAAAAAAAAAAAg"}


def story(cluster: Cluster) -> dict[str, Any]:
    dirs = records.dir_names(cluster)  # before a dir is replaced by a file (and its id unreadable)
    ops.create_via_broker(cluster, "twin", [[1, 2], [2, 1]] * 3)
    assert ops.create_via_controller(cluster, "twin-ctl", [[2, 1]], {"min.insync.replicas": "1"}) == 0
    for b in (1, 2):
        ops.wait_for_replicas(cluster, b, "twin", 6)

    def assigned() -> bool:
        img = records.image(records.dump(cluster), {})
        return all(d not in RESERVED for p in img["partitions"].values() for d in (p["dirs"] or []))

    wait_until("every replica's directory assigned", assigned, 60)
    d1 = cluster.brokers[1].log_dirs[0]
    in_d1 = {p for t, p in probe.log_dirs(cluster.brokers[1].address)[str(d1)].partitions if t == "twin"}
    fail_dir_as_kafka_tests_do(d1)

    def moved() -> bool:
        view = cluster.metadata(["twin"], via=2)
        return all(1 not in view.partitions[("twin", p)].isr for p in in_d1)

    wait_until("replicas in the failed dir out of the ISR", moved, 90)
    cluster.stop_broker(2)
    cluster.wait_fenced(2)

    def fenced_again() -> bool:
        # Both controllers fence a silent broker once more when its session (9 s) runs out,
        # fenced already or not; whether the restart beats that is a race, so wait it out.
        fences = [
            r
            for r in records.dump(cluster)
            if r.get("type") == "BrokerRegistrationChangeRecord"
            and r["data"].get("brokerId") == 2
            and r["data"].get("fenced") == 1
        ]
        return len(fences) >= 2

    wait_until("broker 2's session expired after its controlled shutdown", fenced_again, 60, interval=1.0)
    cluster.start_broker(2)
    cluster.wait_unfenced([1, 2])

    def settled() -> bool:
        view = cluster.metadata(["twin", "twin-ctl"], via=1)
        return all(2 in v.isr for v in view.partitions.values())

    wait_until("broker 2 back in every ISR", settled, 90)
    recs = records.dump(cluster)
    return {"image": records.image(recs, dirs), "kinds": dict(records.kinds(recs)), "records": recs}


def test_mock_and_kafka_write_the_same_story(real_cluster: Callable[..., Cluster], tmp_path: Path) -> None:
    out: dict[str, dict[str, Any]] = {}
    for controller in ("mock", "kafka"):
        cluster = real_cluster(controller=controller, brokers=2, log_dirs=2)
        cluster.benign += [*logs.DIR_FAILURE, *logs.SHUTDOWN]
        out[controller] = story(cluster)
        records.save(tmp_path / f"{controller}.jsonl", out[controller]["records"])
        cluster.close()
    (tmp_path / "images.json").write_text(json.dumps({k: v["image"] for k, v in out.items()}, indent=1))
    image_diff = records.diff(out["mock"]["image"], out["kafka"]["image"])
    assert not image_diff, "images differ:\n" + "\n".join(image_diff)
    kinds_diff = records.diff(out["mock"]["kinds"], out["kafka"]["kinds"])
    assert not kinds_diff, "record kinds differ:\n" + "\n".join(kinds_diff)
