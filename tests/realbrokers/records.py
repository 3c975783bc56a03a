"""The metadata records two controllers wrote, normalised so the same story compares equal.

Both controllers' logs are read with ``kraft-jbod log dump`` (our reader; the mock's log is
Kafka's format and Kafka's log is read the same way). What legitimately differs is taken
out, and nothing else:

* random ids: topic ids are replaced by topic names, directory ids by ``b<broker>/d<n>``
  (from each dir's ``meta.properties``), incarnation ids dropped;
* broker epochs (log offsets) and leader/partition epochs (they count changes whose number
  depends on timing) are dropped; the listener ports of the brokers are dropped;
* records that depend on who asked first or on wall time: NoOpRecord, control batches,
  Kafka's bootstrap transaction markers, RegisterControllerRecord (the mock writes none:
  docs/divergences.md), ProducerIdsRecord (a block is asked for by whichever broker a
  producer reaches first);
* order: the image is compared after replay, and the record kinds as counts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from kraft_jbod.realkafka.cluster import RealCluster
from kraft_jbod.storage.meta import read_meta_properties
from kraft_jbod.wire.primitives import uuid_to_base64url

IGNORED_KINDS = frozenset(
    {"NoOpRecord", "BeginTransactionRecord", "EndTransactionRecord", "RegisterControllerRecord", "ProducerIdsRecord"}
)


def dump_dir(metadata_dir: Path) -> list[dict[str, Any]]:
    """Every record and control batch of a node's metadata log dir, as ``kraft-jbod log dump`` prints them."""
    out = subprocess.run(
        [sys.executable, "-m", "kraft_jbod", "log", "dump", str(metadata_dir)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def dump(cluster: RealCluster) -> list[dict[str, Any]]:
    assert cluster.controller is not None
    return dump_dir(cluster.controller.data_dir)


def last_offset(metadata_dir: Path) -> int:
    """The last offset in a node's metadata log dir (its ``metadata.log.dir``), -1 when empty."""
    return max((r["offset"] for r in dump_dir(metadata_dir)), default=-1)


def dir_names(cluster: RealCluster) -> dict[str, str]:
    names: dict[str, str] = {}
    for broker in cluster.brokers.values():
        for i, d in enumerate(broker.log_dirs):
            meta = read_meta_properties(d) if d.is_dir() else None
            if meta is not None and meta.directory_id is not None:
                names[uuid_to_base64url(meta.directory_id)] = f"b{broker.node_id}/d{i + 1}"
    return names


def kinds(records: list[dict[str, Any]]) -> Counter[str]:
    return Counter(r["type"] for r in records if "type" in r and r["type"] not in IGNORED_KINDS)


def image(records: list[dict[str, Any]], dirs: dict[str, str]) -> dict[str, Any]:
    """Replay the records into a comparable picture of the cluster."""
    topic_names: dict[str, str] = {}
    features: dict[str, int] = {}
    configs: dict[tuple[int, str, str], str] = {}
    brokers: dict[int, dict[str, Any]] = {}
    parts: dict[tuple[str, int], dict[str, Any]] = {}

    def d(ids: list[str] | None) -> list[str] | None:
        return None if ids is None else [dirs.get(i, i) for i in ids]

    for r in records:
        kind, data = r.get("type"), r.get("data", {})
        if kind == "FeatureLevelRecord":
            features[data["name"]] = data["featureLevel"]
        elif kind == "ConfigRecord":
            key = (data["resourceType"], data["resourceName"], data["name"])
            if data.get("value") is None:
                configs.pop(key, None)
            else:
                configs[key] = data["value"]
        elif kind == "TopicRecord":
            topic_names[data["topicId"]] = data["name"]
        elif kind == "RemoveTopicRecord":
            name = topic_names.pop(data["topicId"], data["topicId"])
            for key in [k for k in parts if k[0] == name]:
                del parts[key]
        elif kind == "RegisterBrokerRecord":
            brokers[data["brokerId"]] = {
                "fenced": data.get("fenced", True),
                "controlled_shutdown": data.get("inControlledShutdown", False),
                "dirs": sorted(d(data.get("logDirs", [])) or []),
                "cordoned": sorted(d(data.get("cordonedLogDirs") or []) or []),
                "rack": data.get("rack"),
                "listeners": sorted(e["name"] for e in data.get("endPoints", [])),
                "features": sorted(
                    (f["name"], f["minSupportedVersion"], f["maxSupportedVersion"]) for f in data.get("features", [])
                ),
            }
        elif kind == "BrokerRegistrationChangeRecord":
            b = brokers.setdefault(data["brokerId"], {})
            if data.get("fenced", 0) != 0:
                b["fenced"] = data["fenced"] == 1
            if data.get("inControlledShutdown", 0) != 0:
                b["controlled_shutdown"] = data["inControlledShutdown"] == 1
            if data.get("logDirs") is not None:
                b["dirs"] = sorted(d(data["logDirs"]) or [])
            if data.get("cordonedLogDirs") is not None:
                b["cordoned"] = sorted(d(data["cordonedLogDirs"]) or [])
        elif kind == "UnregisterBrokerRecord":
            brokers.pop(data["brokerId"], None)
        elif kind == "PartitionRecord":
            name = topic_names.get(data["topicId"], data["topicId"])
            parts[(name, data["partitionId"])] = {
                "replicas": data["replicas"],
                "isr": sorted(data["isr"]),
                "leader": data["leader"],
                "dirs": d(data.get("directories")),
                "elr": sorted(data.get("eligibleLeaderReplicas") or []),
                "last_known_elr": sorted(data.get("lastKnownElr") or []),
                "recovery": data.get("leaderRecoveryState", 0),
            }
        elif kind == "PartitionChangeRecord":
            name = topic_names.get(data["topicId"], data["topicId"])
            p = parts[(name, data["partitionId"])]
            if data.get("leader", -2) != -2:
                p["leader"] = data["leader"]
            if data.get("isr") is not None:
                p["isr"] = sorted(data["isr"])
            if data.get("replicas") is not None:
                p["replicas"] = data["replicas"]
            if data.get("directories") is not None:
                p["dirs"] = d(data["directories"])
            if data.get("eligibleLeaderReplicas") is not None:
                p["elr"] = sorted(data["eligibleLeaderReplicas"])
            if data.get("lastKnownElr") is not None:
                p["last_known_elr"] = sorted(data["lastKnownElr"])
            if data.get("leaderRecoveryState", -1) != -1:
                p["recovery"] = data["leaderRecoveryState"]
    return {
        "features": features,
        "configs": {f"{t}/{n}/{k}": v for (t, n, k), v in sorted(configs.items())},
        "brokers": {str(k): v for k, v in sorted(brokers.items())},
        "partitions": {f"{t}-{p}": v for (t, p), v in sorted(parts.items())},
    }


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON-like values differ, one line per leaf."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            if key not in a:
                out.append(f"{path}/{key}: only in kafka: {b[key]!r}")
            elif key not in b:
                out.append(f"{path}/{key}: only in mock: {a[key]!r}")
            else:
                out += diff(a[key], b[key], f"{path}/{key}")
        return out
    return [] if a == b else [f"{path}: mock {a!r} != kafka {b!r}"]


def save(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("\n".join(json.dumps(r, sort_keys=True) for r in records) + "\n")
