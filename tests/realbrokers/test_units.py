"""The real-Kafka launcher's pieces that need no Java: finding a Kafka, configs, log reading, the build cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft_jbod.errors import ConfigError
from kraft_jbod.properties import load_properties
from kraft_jbod.realkafka import configs, logs
from kraft_jbod.realkafka.cluster import ClusterSpec, new_cluster_id
from kraft_jbod.realkafka.distribution import open_distribution
from tools import kafka_broker


def _binary(tmp_path: Path, version: str) -> Path:
    home = tmp_path / f"kafka_2.13-{version}"
    (home / "libs").mkdir(parents=True)
    for name in (f"kafka_2.13-{version}.jar", f"kafka_2.13-{version}-test.jar", "kafka-clients-x.jar"):
        (home / "libs" / name).write_bytes(b"")
    return home


def test_a_binary_distribution_is_found_by_its_jar(tmp_path: Path) -> None:
    dist = open_distribution(_binary(tmp_path, "3.9.1"))
    assert dist.release == (3, 9) and dist.version == "3.9.1" and dist.kind == "distribution"
    assert dist.classpath.count(":") == 2


def test_a_release_without_jbod_in_kraft_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"KIP-858 needs 3\.7 or later"):
        open_distribution(_binary(tmp_path, "3.6.2"))


def test_a_source_build_maps_confluent_numbers_to_apache_releases(tmp_path: Path) -> None:
    jar = tmp_path / "kafka-broker.jar"
    jar.write_bytes(b"")
    (tmp_path / "classpath").write_text(str(jar) + "\n")
    (tmp_path / "BUILD-INFO").write_text("kafka version: 8.4.0-0-ccs commit: abc\n")
    dist = open_distribution(tmp_path)
    assert dist.release == (4, 4) and dist.version == "8.4.0-0-ccs" and dist.kind == "source build"


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ("missing", "not a folder"),
        ("empty", "no libs/ folder and no classpath file"),
        ("no-jar", "no kafka_2.13-X.Y.Z.jar"),
        ("broken-classpath", "class path entries missing"),
    ],
)
def test_what_is_not_a_kafka_says_why(tmp_path: Path, setup: str, message: str) -> None:
    home = tmp_path / "k"
    if setup != "missing":
        home.mkdir()
    if setup == "no-jar":
        (home / "libs").mkdir()
    if setup == "broken-classpath":
        (home / "classpath").write_text("/nonexistent/a.jar")
    with pytest.raises(ConfigError, match=message):
        open_distribution(home)


def test_properties_round_trip_through_our_reader(tmp_path: Path) -> None:
    props = configs.broker_properties(
        node_id=7,
        controller_voters="3000@127.0.0.1:9093",
        log_dirs=[tmp_path / "a b", tmp_path / "c=d"],
        metadata_dir=tmp_path / "meta",
        broker_count=1,
        cordoned=[tmp_path / "c=d"],
        overrides={"num.io.threads": "2"},
    )
    path = tmp_path / "server.properties"
    configs.write_properties(path, props)
    assert load_properties(path) == props
    # internal topics fit the cluster: one broker, factor 1
    assert props["offsets.topic.replication.factor"] == "1" and props["transaction.state.log.min.isr"] == "1"
    assert props["num.io.threads"] == "2"


def test_three_brokers_get_kafkas_internal_topic_defaults() -> None:
    props = configs.broker_properties(
        node_id=1, controller_voters="x", log_dirs=[Path("/a")], metadata_dir=Path("/m"), broker_count=5
    )
    assert props["offsets.topic.replication.factor"] == "3" and props["transaction.state.log.min.isr"] == "2"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (ClusterSpec(controller="zk"), "controller must be one of"),
        (ClusterSpec(brokers=33), "brokers"),
        (ClusterSpec(first_broker_id=2999, brokers=2), "controller's id"),
        (ClusterSpec(cordoned={1: [5]}), "cordoned dirs"),
        (ClusterSpec(heap_mb=128), "too small"),
    ],
)
def test_cluster_specs_that_cannot_work_are_refused(spec: ClusterSpec, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        spec.check()


def test_cluster_ids_never_start_with_a_dash() -> None:
    ids = [new_cluster_id() for _ in range(2000)]
    assert not any(i.startswith("-") for i in ids) and len(set(ids)) == 2000


LOG = """\
[2026-11-27 08:16:03,729] INFO all good (kafka.server.BrokerServer)
[2026-11-27 08:16:03,744] WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error in response for fetch request (x)
java.io.IOException: Connection to 2 was disconnected before the response was read
\tat somewhere
[2026-11-27 08:16:03,745] WARN [ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Error in response for fetch request (x)
java.lang.IllegalStateException: something else
[2026-11-27 08:16:03,746] ERROR Something the mock caused (kafka.server.X)
"""


def test_benign_lines_are_narrow_and_the_rest_are_problems() -> None:
    found = logs.problems(LOG, logs.SHUTDOWN)
    # the fetch error with the expected cause is explained; the same message with another
    # cause, and an unknown error, are not
    assert len(found) == 2
    assert "IllegalStateException" in found[0] and "Something the mock caused" in found[1]
    assert len(logs.problems(LOG)) == 3


def test_package_key_follows_every_input(tmp_path: Path) -> None:
    src = tmp_path / "kafka"
    (src / "broker" / "stubs").mkdir(parents=True)
    (src / "broker" / "stubs-scala").mkdir()
    (src / "kafka-4.4-broker-src.tar.gz").write_bytes(b"tarball")
    (src / "broker" / "build.sh").write_text("#!/bin/sh\n")
    (src / "broker" / "stubs" / "A.java").write_text("class A {}")
    key = kafka_broker.package_key(src)
    assert kafka_broker.package_key(src) == key
    (src / "broker" / "stubs" / "A.java").write_text("class A { int x; }")
    assert kafka_broker.package_key(src) != key


def test_a_build_counts_only_once_marked_complete(tmp_path: Path) -> None:
    (tmp_path / "classpath").write_text("x")
    assert not kafka_broker.is_built(tmp_path)
    (tmp_path / kafka_broker.BUILT_MARK).write_text("key=1\n")
    assert kafka_broker.is_built(tmp_path)
