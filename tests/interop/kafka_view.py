"""Compare Kafka's MetadataImage (as ``KraftInterop.java`` prints it) with our views.

Our views: ``client_api.cluster_view`` (what ``kraft-jbod status --json`` prints) and the
client listener's Metadata answer. Kafka's: the image a broker's ``MetadataLoader`` builds and
what Kafka's own ``KRaftMetadataCache`` answers to Metadata from it.

Kafka names the reserved directory ids by ``DirectoryId``: MIGRATING = Uuid(0,0),
UNASSIGNED = Uuid(0,1), LOST = Uuid(0,2). Our view prints labels from the active profile,
so under ``kip`` (which swaps them) the same bytes get another label: ``kafka_dir_label``
names bytes the Kafka way, which is what the tests compare.
"""

from __future__ import annotations

from typing import Any, Final

# Kafka's Uuid.toString() of Uuid(0, n).
KAFKA_RESERVED: Final = {
    "AAAAAAAAAAAAAAAAAAAAAA": "MIGRATING",
    "AAAAAAAAAAAAAAAAAAAAAQ": "UNASSIGNED",
    "AAAAAAAAAAAAAAAAAAAAAg": "LOST",
}
PROFILE_RESERVED: Final = {
    "kafka": {
        "MIGRATING": "AAAAAAAAAAAAAAAAAAAAAA",
        "UNASSIGNED": "AAAAAAAAAAAAAAAAAAAAAQ",
        "LOST": "AAAAAAAAAAAAAAAAAAAAAg",
    },
    "kip": {
        "UNASSIGNED": "AAAAAAAAAAAAAAAAAAAAAA",
        "LOST": "AAAAAAAAAAAAAAAAAAAAAQ",
        "MIGRATING": "AAAAAAAAAAAAAAAAAAAAAg",
    },
}


def kafka_dir_label(d: str) -> str:
    return KAFKA_RESERVED.get(d, d)


def view_dir_bytes(label: str, profile: str) -> str:
    """Our view's directory label back to the uuid string it stands for."""
    return PROFILE_RESERVED[profile].get(label, label)


def brokers_from_view(view: dict[str, Any]) -> list[dict[str, Any]]:
    out = [
        {
            "id": b["id"],
            "epoch": b["epoch"],
            "fenced": b["fenced"],
            "in_controlled_shutdown": b["in_controlled_shutdown"],
            "rack": b["rack"],
            # Kafka's registration lists the directories still online (sorted by Uuid).
            "directories": sorted(d["id"] for d in b["directories"] if d["online"]),
        }
        for b in view["brokers"]
    ]
    for row, b in zip(out, view["brokers"], strict=True):
        # Cordoned dirs (KIP-1066) are compared once our view reports them.
        if "cordoned_directories" in b:
            row["cordoned_directories"] = sorted(b["cordoned_directories"] or [])
    return out


def brokers_from_image(image: dict[str, Any], view: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out = [
        {
            "id": b["id"],
            "epoch": b["epoch"],
            "fenced": b["fenced"],
            "in_controlled_shutdown": b["in_controlled_shutdown"],
            "rack": b["rack"],
            "directories": sorted(b["directories"]),
        }
        for b in image["brokers"]
    ]
    if view is not None and any("cordoned_directories" in b for b in view["brokers"]):
        for row, b in zip(out, image["brokers"], strict=True):
            row["cordoned_directories"] = sorted(b["cordoned_directories"] or [])
    return out


def partitions_from_view(view: dict[str, Any], profile: str = "kafka") -> dict[tuple[str, int], dict[str, Any]]:
    out = {}
    for t in view["topics"]:
        for p in t["partitions"]:
            out[(t["name"], p["partition"])] = {
                "topic_id": t["id"],
                "leader": p["leader"],
                "leader_epoch": p["leader_epoch"],
                "replicas": p["replicas"],
                "isr": p["isr"],
                "elr": p.get("elr", []),
                "last_known_elr": p.get("last_known_elr", []),
                "directories": [view_dir_bytes(d, profile) for d in p["directories"]],
            }
    return out


def partitions_from_image(image: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    out = {}
    for t in image["topics"]:
        for p in t["partitions"]:
            out[(t["name"], p["partition"])] = {
                "topic_id": t["id"],
                "leader": p["leader"],
                "leader_epoch": p["leader_epoch"],
                "replicas": p["replicas"],
                "isr": p["isr"],
                "elr": p["elr"],
                "last_known_elr": p["last_known_elr"],
                "directories": p["directories"],
            }
    return out


def assert_image_matches_view(image: dict[str, Any], view: dict[str, Any], profile: str = "kafka") -> None:
    """Kafka's image and our status view describe the same cluster."""
    assert image["features"].get("metadata.version") == view["metadata_version"], (
        image["features"],
        view["metadata_version"],
    )
    kafka_brokers, our_brokers = brokers_from_image(image, view), brokers_from_view(view)
    assert kafka_brokers == our_brokers, ("kafka", kafka_brokers, "ours", our_brokers)
    kafka_parts = partitions_from_image(image)
    our_parts = partitions_from_view(view, profile)
    assert sorted(kafka_parts) == sorted(our_parts)
    for key, ours in our_parts.items():
        assert kafka_parts[key] == ours, key


def metadata_from_kafka_cache(metadata: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Kafka's KRaftMetadataCache Metadata topics (JsonConverter form) keyed by partition."""
    out = {}
    for t in metadata:
        for p in t["partitions"]:
            out[(t["name"], p["partitionIndex"])] = {
                "error_code": p["errorCode"],
                "leader": p["leaderId"],
                "leader_epoch": p["leaderEpoch"],
                "replicas": p["replicaNodes"],
                "isr": p["isrNodes"],
                "offline": p["offlineReplicas"],
            }
    return out


def metadata_from_listener(response: Any) -> dict[tuple[str, int], dict[str, Any]]:
    """Our client listener's MetadataResponse keyed the same way."""
    out = {}
    for t in response.topics:
        for p in t.partitions:
            out[(t.name, p.partition_index)] = {
                "error_code": p.error_code,
                "leader": p.leader_id,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replica_nodes),
                "isr": list(p.isr_nodes),
                "offline": list(p.offline_replicas),
            }
    return out
