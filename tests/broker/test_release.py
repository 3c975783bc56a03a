"""``kraft.jbod.broker.release``: the feature ranges a real broker of that release registers,
checked against Kafka 4.4's own BrokerFeatures and against our controller's refusals."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kraft_jbod.broker import releases
from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller import features as fv
from kraft_jbod.controller.config import parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, broker_properties, controller_config, wait_for
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.storage import StorageLayout, format_storage
from tests.oracles.kafka44 import require_kafka_oracle

PROBE = Path(__file__).resolve().parent / "java" / "FeatureProbe.java"


def test_the_source_snapshot_row_is_what_kafkas_broker_features_give() -> None:
    oracle = require_kafka_oracle()
    java = shutil.which("java")
    assert java is not None, "the Kafka oracle is built but no java runs it"
    done = subprocess.run(
        [java, "-cp", os.pathsep.join(map(str, oracle.classpath)), str(PROBE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    kafka: dict[str, tuple[int, int]] = {}
    latest = -1
    for line in done.stdout.splitlines():
        words = line.split()
        if words[0] == "latest_production":
            latest = int(words[1])
        else:
            kafka[words[0]] = (int(words[1]), int(words[2]))
    assert releases.supported_features(releases.SOURCE_SNAPSHOT) == kafka
    assert latest == fv.LATEST_PRODUCTION_LEVEL == 30
    # 4.4.0 as released differs in metadata.version's top only (PR #23235: 4.4-IV2 production).
    released = releases.supported_features("4.4")
    assert released[fv.METADATA_VERSION] == (7, 33) and fv.name_of(33) == "4.4-IV2"
    assert {k: v for k, v in released.items() if k != fv.METADATA_VERSION} == {
        k: v for k, v in kafka.items() if k != fv.METADATA_VERSION
    }


@pytest.mark.parametrize("release", releases.RELEASES)
def test_every_release_fits_what_our_controller_implements(release: str) -> None:
    ranges = releases.supported_features(release)
    assert next(iter(ranges)) == fv.METADATA_VERSION
    for name, (lo, hi) in ranges.items():
        c_lo, c_hi = fv.SUPPORTED_FEATURES[name]
        assert c_lo <= lo <= hi <= c_hi, (release, name)
    # Before 4.0 a broker still offers the 3.0-3.3 levels; from 4.0 on it does not.
    assert ranges[fv.METADATA_VERSION][0] == (1 if release.startswith("3.") else 7)


def test_the_derived_rows_follow_the_feature_bootstrap_levels() -> None:
    assert releases.supported_features("3.7") == {fv.METADATA_VERSION: (1, 19)}
    assert releases.supported_features("3.9") == {fv.METADATA_VERSION: (1, 21), fv.KRAFT_VERSION: (0, 1)}
    assert releases.supported_features("4.0") == {
        fv.METADATA_VERSION: (7, 25),
        fv.KRAFT_VERSION: (0, 1),
        fv.GROUP_VERSION: (0, 1),
        fv.TRANSACTION_VERSION: (0, 2),
    }
    assert releases.supported_features("4.3")[fv.SHARE_VERSION] == (0, 1)
    assert releases.supported_features("4.4")[fv.SHARE_VERSION] == (0, 2)
    # Below BrokerRegistration v4 features with minimum 0 are left out (KAFKA-17492).
    assert [f.name for f in releases.registration_features("4.4", 3)] == [fv.METADATA_VERSION]


def test_an_unknown_release_is_a_config_error(tmp_path: Path) -> None:
    props = parse_properties(broker_properties(tmp_path, 1, 9093) + "kraft.jbod.broker.release=2.8\n")
    with pytest.raises(ConfigError, match=r"kraft\.jbod\.broker\.release: unknown release '2\.8' \(known: 3\.7"):
        BrokerConfig.from_properties(props)


async def _register(tmp_path: Path, port: int, node: int, release: str) -> FakeBroker:
    extra = f"kraft.jbod.broker.release={release}\ninitial.broker.registration.timeout.ms=1500\n"
    props = parse_properties(broker_properties(tmp_path, node, port) + extra)
    format_storage(StorageLayout.from_properties(props), CLUSTER_ID)
    broker = FakeBroker(BrokerConfig.from_properties(props))
    await broker.start()
    return broker


async def test_a_44_broker_cannot_join_a_cluster_below_33_iv3_but_a_39_broker_can(tmp_path: Path) -> None:
    level = fv.level_of("3.3-IV2")  # 6: a 3.x broker offers it, a 4.x broker does not
    controller = ControllerServer(
        controller_config(tmp_path), cluster_id=CLUSTER_ID, metadata_version=level, fsync=False
    )
    await controller.start()
    port = controller.addresses[0][1]
    new = await _register(tmp_path, port, 1, "4.4")
    old = await _register(tmp_path, port, 2, "3.9")
    try:
        await wait_for("the 3.9 broker to register", lambda: 2 in controller.state.image.brokers, 20)
        await new.stopped.wait()
        assert new.exit_reason is not None
        assert f"error {ErrorCode.UNSUPPORTED_VERSION}" in new.exit_reason, new.exit_reason
        assert 1 not in controller.state.image.brokers
        registered = dict((n, (lo, hi)) for n, lo, hi in controller.state.image.brokers[2].features)
        assert registered == {fv.METADATA_VERSION: (1, 21), fv.KRAFT_VERSION: (0, 1)}
    finally:
        await new.close()
        await old.close()
        await controller.close()


async def test_the_default_release_registers_what_440_registers(tmp_path: Path) -> None:
    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    broker = await _register(tmp_path, controller.addresses[0][1], 1, "4.4")
    try:
        await wait_for("registration", lambda: 1 in controller.state.image.brokers, 20)
        registered = {n: (lo, hi) for n, lo, hi in controller.state.image.brokers[1].features}
        assert registered == releases.supported_features("4.4")
        assert registered[fv.METADATA_VERSION] == (7, 33)
    finally:
        await broker.close()
        await controller.close()
