"""Kafka 4.4's broker control plane against our controller.

Each test runs Kafka's ``BrokerLifecycleManager`` (over the real
``NodeToControllerChannelManagerImpl``), ``AssignmentsManager`` and a ``KafkaRaftClient``
observer feeding ``MetadataLoader`` (see ``java/KraftInterop.java``) against a controller
on loopback, asserts every state Kafka's objects reach and what our controller answered
them, then reads the controller's log back (records written) and compares Kafka's image
with our views (``broker_ops.check_all_views``).

Where Kafka's code and our controller disagree, the test asserts Kafka's behaviour, and
the controller is fixed (docs/interop.md lists each disagreement found and its fix).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.interop import kafka_view
from tests.interop.broker_ops import (
    assign_round_robin,
    check_all_views,
    create_topic,
    exchanges,
    start_java_broker,
    wait_synced,
)
from tests.interop.harness import ControllerThread, InteropJvm, kafka_uuid

Factory = Callable[..., ControllerThread]


def records_of(ctl: ControllerThread, kind: str) -> list[dict[str, Any]]:
    return [r for r in ctl.records() if r["type"] == kind]


def test_register_catch_up_unfence(interop: InteropJvm, controller_factory: Factory, tmp_path: Path) -> None:
    ctl = controller_factory()
    dirs = start_java_broker(interop, ctl, tmp_path, 1, 3)
    state = interop("broker", broker=1)
    assert state["state"] == "RUNNING"
    assert state["caught_up"] == state["unfenced"] == "done"
    assert state["controlled_shutdown"] == "pending"
    assert state["leader"] == 3000
    assert state["faults"] == 0

    # What the controller answered Kafka's broker.
    reg = exchanges(interop, 1, "BrokerRegistration")
    assert len(reg) == 1
    assert reg[0]["version"] == 4
    assert reg[0]["response"]["errorCode"] == 0
    # Kafka sends its log dirs sorted by Uuid.
    assert reg[0]["request"]["logDirs"] == sorted(dirs.values(), key=_uuid_order)
    epoch = reg[0]["response"]["brokerEpoch"]
    assert state["epoch"] == epoch
    beats = exchanges(interop, 1, "BrokerHeartbeat")
    # Negotiated by Kafka's NetworkClient from our ApiVersions: BrokerHeartbeat v2 (KIP-1066).
    assert {b["version"] for b in beats} == {2}
    # At the default level (4.3-IV0) Kafka sends CordonedLogDirs once caught up: none here.
    assert ctl.view()["metadata_version"] == 30
    assert all("cordonedLogDirs" not in b["request"] for b in beats[: caught_index(beats) + 1])
    assert all(b["request"]["cordonedLogDirs"] == [] for b in beats[caught_index(beats) + 1 :])
    assert all(b["response"]["errorCode"] == 0 for b in beats)
    assert all(b["request"]["brokerEpoch"] == epoch for b in beats)
    # (The first heartbeat may already be caught up: the observer can fetch the registration
    # record before Kafka's manager sends it.)
    assert beats[0]["response"]["isFenced"] is True
    caught = next(i for i, b in enumerate(beats) if b["response"]["isCaughtUp"])
    unfenced = next(i for i, b in enumerate(beats) if not b["response"]["isFenced"])
    assert caught <= unfenced
    # Kafka asks to be unfenced only once told to (setReadyToUnfence).
    assert beats[unfenced]["request"]["wantFence"] is False

    # The controller's log: the registration at the epoch's offset, then the unfencing.
    regs = records_of(ctl, "RegisterBrokerRecord")
    assert [r["offset"] for r in regs] == [epoch]
    assert sorted(regs[0]["data"]["logDirs"]) == sorted(dirs.values())
    change_records = records_of(ctl, "BrokerRegistrationChangeRecord")
    assert all(c["version"] == 3 for c in change_records if "cordonedLogDirs" in c["data"])
    changes = [c["data"] for c in change_records]
    assert [c["fenced"] for c in changes if "fenced" in c] == [-1]
    # Kafka's ReplicationControlManager writes one v3 record when the cordoned set goes from
    # unknown (null) to known ([] here), and none while it stays the same.
    assert [c["cordonedLogDirs"] for c in changes if "cordonedLogDirs" in c] == [[]]
    check_all_views(interop, ctl, 1)
    interop("stop_broker", broker=1)


def caught_index(beats: list[dict[str, Any]]) -> int:
    """Index of the heartbeat whose answer said the broker caught up."""
    return next(i for i, b in enumerate(beats) if b["response"]["isCaughtUp"])


def _uuid_order(u: str) -> tuple[int, int]:
    # Kafka's Uuid.compareTo: most significant long, then least, both signed.
    import base64

    raw = base64.urlsafe_b64decode(u + "==")
    msb, lsb = int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:], "big", signed=True)
    return msb, lsb


def test_assignments_and_dir_failure_then_reregistration_without_it(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    ctl = controller_factory()
    dirs1 = start_java_broker(interop, ctl, tmp_path, 1, 2)
    dirs2 = start_java_broker(interop, ctl, tmp_path, 2, 2)
    create_topic(ctl, "events", 6, 2)
    placed = {1: assign_round_robin(interop, ctl, 1, dirs1), 2: assign_round_robin(interop, ctl, 2, dirs2)}
    assert len(placed[1]) == len(placed[2]) == 6
    assigns = exchanges(interop, 1, "AssignReplicasToDirs")
    assert assigns and {e["version"] for e in assigns} == {0}
    for e in assigns:
        assert e["request"]["brokerEpoch"] == interop("broker", broker=1)["epoch"]
        assert e["response"]["errorCode"] == 0
        for t in e["response"]["directories"]:
            for tt in t["topics"]:
                assert all(p["errorCode"] == 0 for p in tt["partitions"])
    view = ctl.view()
    for t in view["topics"]:
        for p in t["partitions"]:
            for r, d in zip(p["replicas"], p["directories"], strict=True):
                assert d == placed[r][("events", p["partition"])]
    check_all_views(interop, ctl, 1)

    # Broker 1's second directory fails: Kafka reports it in OfflineLogDirs.
    first, failed = list(dirs1.values())
    leaders_before = {p["partition"]: p["leader"] for p in view["topics"][0]["partitions"]}
    interop("fail_dir", broker=1, dir=failed)
    interop(
        "wait",
        broker=1,
        until="exchanges",
        api="BrokerHeartbeat",
        count=len(exchanges(interop, 1, "BrokerHeartbeat")) + 2,
        timeout_ms=10000,
    )
    offline_beats = [b for b in exchanges(interop, 1, "BrokerHeartbeat") if b["request"].get("offlineLogDirs")]
    assert offline_beats and offline_beats[0]["request"]["offlineLogDirs"] == [failed]
    assert all(b["response"]["errorCode"] == 0 for b in offline_beats)
    assert interop("broker", broker=1)["state"] == "RUNNING"
    change = [c for c in records_of(ctl, "BrokerRegistrationChangeRecord") if c["data"].get("logDirs")]
    assert change and change[-1]["data"]["brokerId"] == 1
    assert change[-1]["data"]["logDirs"] == [first]
    view = ctl.view()
    for p in view["topics"][0]["partitions"]:
        in_failed = placed[1][("events", p["partition"])] == failed
        if in_failed:
            assert 1 not in p["isr"] and p["leader"] != 1
            assert p["leader"] == 2
        else:
            assert p["leader"] == leaders_before[p["partition"]]
    check_all_views(interop, ctl, 1)

    # Broker 1 restarts without the failed directory: a new incarnation, one log dir.
    first_epoch = interop("stop_broker", broker=1)["epoch"]
    remaining = {k: v for k, v in dirs1.items() if v != failed}
    start_java_broker(interop, ctl, tmp_path, 1, dirs=remaining, unfence=False)
    reg = exchanges(interop, 1, "BrokerRegistration")
    assert reg[-1]["request"]["logDirs"] == [first]
    codes = [r["response"]["errorCode"] for r in reg]
    assert set(codes) <= {0, 101}, codes  # 101 DUPLICATE_BROKER_REGISTRATION while the old session lives
    assert reg[-1]["response"]["errorCode"] == 0
    interop("unfence", broker=1, timeout_ms=20000)
    # Kafka completes the unfence future just before it switches to RUNNING.
    state = interop("wait", broker=1, until="state", state="RUNNING", timeout_ms=5000)
    assert state["epoch"] > first_epoch
    wait_synced(interop, ctl, 1)
    image = interop("image", broker=1)["image"]
    b1 = next(b for b in image["brokers"] if b["id"] == 1)
    assert b1["directories"] == [first] and not b1["fenced"]
    check_all_views(interop, ctl, 1)
    interop("stop_broker", broker=1)
    interop("stop_broker", broker=2)


def test_restart_right_after_controlled_shutdown_waits_for_the_session(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    """Kafka 4.4 keeps a broker's session while it heartbeats, fenced or not: every heartbeat
    refreshes ``BrokerHeartbeatTracker`` (``ClusterControlManager.trackBrokerHeartbeat``), fencing
    does not clear it, and ``registerBroker`` refuses a new incarnation while
    ``hasValidSession`` holds. So a broker restarted right after its controlled shutdown (which
    fenced it) is refused with DUPLICATE_BROKER_REGISTRATION until the old session expires, and
    Kafka's lifecycle manager retries until then. (Issue 12 item 1 says a fenced broker holds
    no session; Kafka 4.4's code says otherwise, and our controller agrees with the code.)"""
    ctl = controller_factory()
    dirs1 = start_java_broker(interop, ctl, tmp_path, 1, 2)
    start_java_broker(interop, ctl, tmp_path, 2, 2)
    create_topic(ctl, "logs", 4, 1)
    assign_round_robin(interop, ctl, 1, dirs1)
    done = interop("shutdown", broker=1, timeout_ms=15000)
    assert done["controlled_shutdown_done"] is True
    b1 = next(b for b in ctl.view()["brokers"] if b["id"] == 1)
    assert b1["fenced"] is True
    epoch = interop("stop_broker", broker=1)["epoch"]
    kept = dict(list(dirs1.items())[:1])
    start_java_broker(interop, ctl, tmp_path, 1, dirs=kept, unfence=False, previous_epoch=epoch)
    codes = [r["response"]["errorCode"] for r in exchanges(interop, 1, "BrokerRegistration")]
    assert codes[-1] == 0 and codes[0] == 101 and set(codes[:-1]) == {101}, codes
    assert interop("broker", broker=1)["epoch"] > epoch


def _restart_with_a_dir_missing(
    interop: InteropJvm, ctl: ControllerThread, tmp_path: Path
) -> tuple[dict[tuple[str, int], str], str]:
    dirs1 = start_java_broker(interop, ctl, tmp_path, 1, 2)
    start_java_broker(interop, ctl, tmp_path, 2, 1)
    create_topic(ctl, "logs", 4, 2)
    placed = assign_round_robin(interop, ctl, 1, dirs1)
    assert interop("shutdown", broker=1, timeout_ms=15000)["controlled_shutdown_done"] is True
    epoch = interop("stop_broker", broker=1)["epoch"]
    kept = dict(list(dirs1.items())[:1])
    start_java_broker(interop, ctl, tmp_path, 1, dirs=kept, unfence=True, previous_epoch=epoch)
    wait_synced(interop, ctl, 1)
    return placed, list(dirs1.values())[1]


def test_restart_with_a_dir_missing(interop: InteropJvm, controller_factory: Factory, tmp_path: Path) -> None:
    """Once registered again without a dir, Kafka's broker sees the replicas in it offline."""
    ctl = controller_factory()
    placed, missing = _restart_with_a_dir_missing(interop, ctl, tmp_path)
    image = interop("image", broker=1, listener="PLAINTEXT")
    b1 = next(b for b in image["image"]["brokers"] if b["id"] == 1)
    assert b1["directories"] == [d for d in b1["directories"] if d != missing] and len(b1["directories"]) == 1
    assert not b1["fenced"]
    # Kafka's metadata cache: a replica whose directory its broker no longer lists is offline.
    kafka_md = kafka_view.metadata_from_kafka_cache(image["metadata"])
    for (topic, partition), where in placed.items():
        offline = kafka_md[(topic, partition)]["offline"]
        assert (1 in offline) == (where == missing), (topic, partition, offline)
        part = next(p for p in image["image"]["topics"][0]["partitions"] if p["partition"] == partition)
        assert (1 in part["replicas_in_offline_dirs"]) == (where == missing)
    check_all_views(interop, ctl, 1)


def test_restart_with_a_dir_missing_offline_in_our_views(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    """Our status view and client listener agree with Kafka's metadata cache
    (KRaftMetadataCache.isReplicaInOfflineDir via BrokerRegistration.hasOnlineDir)."""
    ctl = controller_factory()
    placed, missing = _restart_with_a_dir_missing(interop, ctl, tmp_path)
    offline_in_status = {
        (t["name"], p["partition"]): p["offline_replicas"] for t in ctl.view()["topics"] for p in t["partitions"]
    }
    for key, where in placed.items():
        assert (1 in offline_in_status[key]) == (where == missing), key
    check_all_views(interop, ctl, 1)


def test_controlled_shutdown_of_a_leader(interop: InteropJvm, controller_factory: Factory, tmp_path: Path) -> None:
    ctl = controller_factory()
    dirs1 = start_java_broker(interop, ctl, tmp_path, 1, 2)
    dirs2 = start_java_broker(interop, ctl, tmp_path, 2, 2)
    create_topic(ctl, "orders", 4, 2)
    assign_round_robin(interop, ctl, 1, dirs1)
    assign_round_robin(interop, ctl, 2, dirs2)
    led = [p["partition"] for p in ctl.view()["topics"][0]["partitions"] if p["leader"] == 1]
    assert led, "broker 1 leads nothing; the scenario needs a leader"

    reply = interop("shutdown", broker=1, timeout_ms=15000)
    assert reply["controlled_shutdown_done"] is True
    assert reply["state"] in ("PENDING_CONTROLLED_SHUTDOWN", "SHUTTING_DOWN")
    beats = exchanges(interop, 1, "BrokerHeartbeat")
    asked = [b for b in beats if b["request"]["wantShutDown"]]
    assert asked and asked[-1]["response"]["shouldShutDown"] is True
    assert all(b["response"]["errorCode"] == 0 for b in asked)
    view = ctl.view()
    for p in view["topics"][0]["partitions"]:
        assert p["leader"] == 2
        assert 1 not in p["isr"]
    b1 = next(b for b in view["brokers"] if b["id"] == 1)
    assert b1["in_controlled_shutdown"] or b1["fenced"]
    check_all_views(interop, ctl, 2)
    interop("stop_broker", broker=1)
    interop("stop_broker", broker=2)


@pytest.mark.parametrize("level", [17, 22, 30])
def test_lifecycle_at_metadata_versions(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path, level: int
) -> None:
    """3.7-IV2 (first JBOD level), 4.0-IV0 and 4.3-IV0: Kafka's image carries the level we
    bootstrapped, and Kafka sends CordonedLogDirs exactly from 4.3-IV0."""
    ctl = controller_factory(metadata_version=level)
    dirs = start_java_broker(interop, ctl, tmp_path, 1, 2)
    create_topic(ctl, "t", 2, 1)
    assign_round_robin(interop, ctl, 1, dirs)
    wait_synced(interop, ctl, 1)
    image = interop("image", broker=1)["image"]
    assert image["features"]["metadata.version"] == level
    beats = exchanges(interop, 1, "BrokerHeartbeat")
    after_catch_up = beats[caught_index(beats) + 1 :]
    assert after_catch_up
    assert all(("cordonedLogDirs" in b["request"]) == (level >= 30) for b in after_catch_up)
    check_all_views(interop, ctl, 1)
    interop("stop_broker", broker=1)


def test_cordoned_dirs_at_4_3(interop: InteropJvm, controller_factory: Factory, tmp_path: Path) -> None:
    ctl = controller_factory(metadata_version=30)
    d0 = str(tmp_path / "java-broker-1" / "d0")
    dirs = start_java_broker(interop, ctl, tmp_path, 1, 2, cordoned=[d0])
    ids = list(dirs.values())
    beats = exchanges(interop, 1, "BrokerHeartbeat")
    assert beats[-1]["version"] == 2
    assert beats[-1]["request"]["cordonedLogDirs"] == [ids[0]]
    assert all(b["response"]["errorCode"] == 0 for b in beats)
    wait_synced(interop, ctl, 1)
    image = interop("image", broker=1)["image"]
    b1 = image["brokers"][0]
    assert b1["cordoned_directories"] == [ids[0]] and not b1["fenced"]
    # Cordon both: no new replica may be placed on the broker.
    reply = interop("cordon", broker=1, dirs=ids)
    assert reply["supported"] is True
    interop("wait", broker=1, until="exchanges", api="BrokerHeartbeat", count=len(beats) + 2, timeout_ms=10000)
    wait_synced(interop, ctl, 1)
    b1 = interop("image", broker=1)["image"]["brokers"][0]
    assert sorted(b1["cordoned_directories"]) == sorted(ids)
    assert interop("broker", broker=1)["state"] == "RUNNING"
    check_all_views(interop, ctl, 1)
    interop("stop_broker", broker=1)


def test_kip_profile_divergence_on_reserved_dir_ids(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    """Expected divergence (docs/divergences.md row 1): under ``kip`` a new replica's directory
    is Uuid(0,0), KIP-858's UNASSIGNED_DIR, which Kafka's DirectoryId reads as MIGRATING."""
    ctl = controller_factory(semantics="kip")
    dirs = start_java_broker(interop, ctl, tmp_path, 1, 2)
    create_topic(ctl, "k", 2, 1)
    wait_synced(interop, ctl, 1)
    view = ctl.view()
    assert [p["directories"] for p in view["topics"][0]["partitions"]] == [["UNASSIGNED"], ["UNASSIGNED"]]
    image = interop("image", broker=1)["image"]
    kafka_dirs = [p["directories"] for p in image["topics"][0]["partitions"]]
    assert [[kafka_view.kafka_dir_label(d) for d in ds] for ds in kafka_dirs] == [["MIGRATING"], ["MIGRATING"]]
    # Kafka's AssignmentsManager still places the replicas; our kip controller accepts them.
    assign_round_robin(interop, ctl, 1, dirs)
    check_all_views(interop, ctl, 1, profile="kip")
    interop("stop_broker", broker=1)


def test_fake_broker_and_kafka_broker_side_by_side(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    ctl = controller_factory()
    assert ctl.cluster is not None
    fake = ctl.run(ctl.cluster.start_broker(10, dirs=2), timeout=30)
    dirs = start_java_broker(interop, ctl, tmp_path, 1, 2)
    create_topic(ctl, "mixed", 4, 2)
    assign_round_robin(interop, ctl, 1, dirs)
    # The fake broker assigns its own replicas from its image.
    ctl.wait(lambda: all(d != "UNASSIGNED" for _, p in _parts(ctl) for d in p["directories"]), timeout=20)
    wait_synced(interop, ctl, 1)
    image = interop("image", broker=1)["image"]
    assert {b["id"] for b in image["brokers"]} == {1, 10}
    assert all(not b["fenced"] for b in image["brokers"])
    # The fake broker fails a directory; Kafka's broker sees its registration shrink.
    ctl.run(fake.fail_directory(0), timeout=20)
    wait_synced(interop, ctl, 1)
    image = interop("image", broker=1)["image"]
    b10 = next(b for b in image["brokers"] if b["id"] == 10)
    assert b10["directories"] == [kafka_uuid(fake.dirs[1])]
    kafka_view.assert_image_matches_view(image, ctl.view())
    loaded = interop("load_log", dir=str(ctl.metadata_dir))
    assert loaded["faults"] == []
    kafka_view.assert_image_matches_view(loaded["image"], ctl.view())
    interop("stop_broker", broker=1)


def _parts(ctl: ControllerThread) -> list[tuple[str, dict[str, Any]]]:
    return [(t["name"], p) for t in ctl.view()["topics"] for p in t["partitions"]]


def test_metadata_version_upgrade_reaches_kafka_brokers(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    """UpdateFeatures (metadata.version 17 -> 22) on the controller listener: Kafka's broker
    replays the FeatureLevelRecord, stays RUNNING, and its image agrees with ours."""
    from kraft_jbod.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
    from kraft_jbod.pytest_plugin import KafkaConnection

    ctl = controller_factory(metadata_version=17)
    start_java_broker(interop, ctl, tmp_path, 1, 2)
    create_topic(ctl, "t", 2, 1)

    async def upgrade() -> Any:
        conn = await KafkaConnection.open(ctl.server.addresses[0], client_id="admin")
        try:
            req = UpdateFeaturesRequest(
                feature_updates=[FeatureUpdateKey(feature="metadata.version", max_version_level=22, upgrade_type=1)]
            )
            return await conn.call(req, 1)
        finally:
            await conn.close()

    answer = ctl.run(upgrade())
    assert answer.error_code == 0
    wait_synced(interop, ctl, 1)
    image = interop("image", broker=1)["image"]
    assert image["features"]["metadata.version"] == 22
    assert interop("broker", broker=1)["state"] == "RUNNING"
    check_all_views(interop, ctl, 1)


def test_session_expiry_fences_and_the_next_heartbeat_unfences(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    """One heartbeat held past the session timeout (a fault rule): the controller fences the
    broker and moves its leaderships; Kafka's manager, RUNNING all along, keeps asking to be
    unfenced, and the next heartbeat unfences it (Kafka's BrokerHeartbeatManager: FENCED, caught
    up, WantFence false -> UNFENCED)."""
    ctl = controller_factory()
    dirs1 = start_java_broker(interop, ctl, tmp_path, 1, 2, rack="r1")
    dirs2 = start_java_broker(interop, ctl, tmp_path, 2, 2, rack="r2")
    create_topic(ctl, "s", 4, 2)
    assign_round_robin(interop, ctl, 1, dirs1)
    assign_round_robin(interop, ctl, 2, dirs2)
    assert ctl.cluster is not None
    faults = ctl.cluster.faults
    ctl.call(
        lambda: faults.add(
            {
                "id": "hold",
                "match": {"api": "BrokerHeartbeat", "broker_id": 1},
                "action": {"type": "delay", "ms": 4000},
                "trigger": {"type": "once"},
            }
        )
    )
    # Fenced by the session timer while the heartbeat is held...
    ctl.wait(lambda: next(b for b in ctl.view()["brokers"] if b["id"] == 1)["fenced"], timeout=15)
    assert all(p["leader"] != 1 for p in ctl.view()["topics"][0]["partitions"])
    # ...then unfenced by the next one, with Kafka's manager still RUNNING.
    ctl.wait(lambda: not next(b for b in ctl.view()["brokers"] if b["id"] == 1)["fenced"], timeout=15)
    assert interop("broker", broker=1)["state"] == "RUNNING"
    # Every heartbeat after the first unfencing asked to stay unfenced and was answered.
    beats = exchanges(interop, 1, "BrokerHeartbeat")
    first_unfenced = next(i for i, b in enumerate(beats) if not b["response"]["isFenced"])
    assert all(b["request"]["wantFence"] is False and b["response"]["errorCode"] == 0 for b in beats[first_unfenced:])
    changes = [c["data"] for c in records_of(ctl, "BrokerRegistrationChangeRecord") if c["data"]["brokerId"] == 1]
    assert [c.get("fenced", 0) for c in changes if c.get("fenced", 0)][-2:] == [1, -1]
    image = check_all_views(interop, ctl, 1)["image"]
    assert {b["id"]: b["rack"] for b in image["brokers"]} == {1: "r1", 2: "r2"}


def test_a_dir_fails_before_the_broker_is_unfenced(
    interop: InteropJvm, controller_factory: Factory, tmp_path: Path
) -> None:
    """A restarted Kafka broker reports a failed dir while still fenced, then asks to be
    unfenced: it is unfenced, and it leads nothing in the failed dir."""
    ctl = controller_factory()
    dirs1 = start_java_broker(interop, ctl, tmp_path, 1, 2)
    dirs2 = start_java_broker(interop, ctl, tmp_path, 2, 2)
    create_topic(ctl, "u", 6, 2)
    placed = assign_round_robin(interop, ctl, 1, dirs1)
    assign_round_robin(interop, ctl, 2, dirs2)
    assert interop("shutdown", broker=1, timeout_ms=15000)["controlled_shutdown_done"] is True
    epoch = interop("stop_broker", broker=1)["epoch"]
    start_java_broker(interop, ctl, tmp_path, 1, dirs=dirs1, unfence=False, previous_epoch=epoch)
    kept, failed = list(dirs1.values())
    interop("fail_dir", broker=1, dir=failed)
    ctl.wait(lambda: any(b["request"].get("offlineLogDirs") for b in exchanges(interop, 1, "BrokerHeartbeat")))
    interop("unfence", broker=1, timeout_ms=20000)
    beats = exchanges(interop, 1, "BrokerHeartbeat")
    # Kafka reports the dir at once (still fenced) and then in every heartbeat, so the one that
    # unfences the broker carries it too.
    first_offline = next(i for i, b in enumerate(beats) if b["request"].get("offlineLogDirs") == [failed])
    assert beats[first_offline]["request"]["wantFence"] is True
    unfencing = next(b for b in beats[first_offline:] if not b["response"]["isFenced"])
    assert unfencing["request"]["offlineLogDirs"] == [failed] and unfencing["request"]["wantFence"] is False
    assert all(b["response"]["errorCode"] == 0 for b in beats)
    wait_synced(interop, ctl, 1)
    image = interop("image", broker=1)["image"]
    b1 = next(b for b in image["brokers"] if b["id"] == 1)
    assert not b1["fenced"] and b1["directories"] == [kept]
    for p in image["topics"][0]["partitions"]:
        if placed[("u", p["partition"])] == failed:
            assert p["leader"] != 1 and 1 not in p["isr"]
    check_all_views(interop, ctl, 1)
