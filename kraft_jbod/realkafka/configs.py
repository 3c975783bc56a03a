"""Properties files for real Kafka brokers and for Kafka's own KRaft controller.

The settings are Kafka's own keys; the defaults here make a small cluster on loopback work
on a small machine and are all overridable:

* internal topics (offsets, transactions, share state) get a replication factor and
  ``min.insync.replicas`` that the cluster's broker count can satisfy (Kafka's default 3
  would leave a two-broker cluster without a consumer group coordinator);
* fewer threads and a 16 MB cleaner buffer, so a broker runs in a 256 MB heap;
* ``broker.heartbeat.interval.ms=1000`` (Kafka: 2000): a failed dir reaches the controller
  within a second;
* listeners on ``127.0.0.1`` port 0 unless a port is pinned (a restart keeps its port so
  clients' bootstrap lists stay right).

Properties are written in ``java.util.Properties`` syntax with keys sorted, values escaped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

CONTROLLER_LISTENER: Final = "CONTROLLER"
BROKER_LISTENER: Final = "PLAINTEXT"


def _escape(value: str) -> str:
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")
    return out[:1].replace(" ", "\\ ") + out[1:] if out else out


def write_properties(path: Path, props: Mapping[str, str]) -> None:
    """Write ``props`` (sorted, escaped) to ``path``, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# written by kraft-jbod real-cluster"]
    lines += [f"{key}={_escape(props[key])}" for key in sorted(props)]
    path.write_text("\n".join(lines) + "\n")


def voters_string(controller_id: int, host: str, port: int) -> str:
    return f"{controller_id}@{host}:{port}"


def broker_properties(
    *,
    node_id: int,
    controller_voters: str,
    log_dirs: Sequence[Path],
    metadata_dir: Path,
    broker_count: int,
    port: int = 0,
    host: str = "127.0.0.1",
    cordoned: Sequence[Path] = (),
    rack: str | None = None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A broker (``process.roles=broker``) of a cluster of ``broker_count`` brokers."""
    replication = str(min(broker_count, 3))
    min_isr = str(min(broker_count, 2))
    props = {
        "process.roles": "broker",
        "node.id": str(node_id),
        "controller.quorum.voters": controller_voters,
        "controller.listener.names": CONTROLLER_LISTENER,
        "listeners": f"{BROKER_LISTENER}://{host}:{port}",
        "inter.broker.listener.name": BROKER_LISTENER,
        "listener.security.protocol.map": f"{BROKER_LISTENER}:PLAINTEXT,{CONTROLLER_LISTENER}:PLAINTEXT",
        "log.dirs": ",".join(str(d) for d in log_dirs),
        "metadata.log.dir": str(metadata_dir),
        "broker.heartbeat.interval.ms": "1000",
        "offsets.topic.replication.factor": replication,
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": replication,
        "transaction.state.log.min.isr": min_isr,
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": replication,
        "share.coordinator.state.topic.min.isr": min_isr,
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "4",
        "log.cleaner.dedupe.buffer.size": "16777216",
        "log.cleaner.threads": "1",
    }
    if cordoned:
        props["cordoned.log.dirs"] = ",".join(str(d) for d in cordoned)
    if rack is not None:
        props["broker.rack"] = rack
    props.update(overrides or {})
    return props


def kafka_controller_properties(
    *,
    node_id: int,
    port: int,
    log_dir: Path,
    host: str = "127.0.0.1",
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Kafka's own KRaft controller (``process.roles=controller``), the single static voter."""
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.quorum.voters": voters_string(node_id, host, port),
        "controller.listener.names": CONTROLLER_LISTENER,
        "listeners": f"{CONTROLLER_LISTENER}://{host}:{port}",
        "listener.security.protocol.map": f"{CONTROLLER_LISTENER}:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.network.threads": "2",
        "num.io.threads": "4",
    }
    props.update(overrides or {})
    return props


def mock_controller_properties(
    *,
    node_id: int,
    metadata_dir: Path,
    port: int = 0,
    host: str = "127.0.0.1",
    overrides: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The mock controller (``kraft-jbod controller``), with the same keys Kafka reads."""
    props = {
        "process.roles": "controller",
        "node.id": str(node_id),
        "controller.listener.names": CONTROLLER_LISTENER,
        "listeners": f"{CONTROLLER_LISTENER}://{host}:{port}",
        "metadata.log.dir": str(metadata_dir),
    }
    props.update(overrides or {})
    return props
