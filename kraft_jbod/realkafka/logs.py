"""Read a Kafka node's log for WARN and ERROR lines, and tell the expected ones from the rest.

A real broker running against the mock must log nothing at WARN or ERROR that the mock
caused. Some such lines are part of Kafka's normal life (a broker starting before its
controller listens, a log dir a test failed on purpose); they are listed here by the text
Kafka prints and the reason, each one narrow: a pattern matches one message, not a
family. Everything else is a problem for the caller to show.

The log layout is the one :mod:`.process` configures: ``[date] LEVEL message (logger)``;
continuation lines (stack traces) belong to the line above.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

_ENTRY: Final = re.compile(r"^\[\d{4}-\d\d-\d\d [\d:,]+\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ", re.MULTILINE)


@dataclass(frozen=True)
class Benign:
    """A WARN/ERROR message that is expected in the situation ``when``, and why."""

    pattern: str
    when: str
    reason: str
    detail: str | None = None  # must also occur in the entry's continuation (its stack trace)

    def matches(self, entry: str) -> bool:
        first, _, rest = entry.partition("\n")
        if re.search(self.pattern, first) is None:
            return False
        return self.detail is None or re.search(self.detail, rest) is not None


# Expected in every run.
ALWAYS: Final[tuple[Benign, ...]] = (
    Benign(
        r"WARN \[QuorumController id=\d+\] Performing controller activation\. The metadata log appears to be empty\.",
        "Kafka's controller, first start",
        "Kafka's controller logs its bootstrap at WARN on every new cluster",
    ),
    Benign(
        r"WARN \[NodeToControllerChannelManager id=\d+ name=\w+\] Attempting to close NetworkClient that has "
        r"already been closed\.",
        "any node, shutdown",
        "Kafka closes its controller channel twice on the way down",
    ),
    Benign(
        r"WARN \[ReplicaFetcher replicaId=\d+, leaderId=\d+, fetcherId=\d+\] Received UNKNOWN_TOPIC_ID from the "
        r"leader for partition \S+\. This error may be returned transiently when the partition is being created",
        "topic creation",
        "a follower fetches before the leader has created the partition; Kafka's own text calls it transient "
        "(seen with Kafka's controller)",
    ),
    Benign(
        r"WARN Auto topic creation failed for __(consumer_offsets|transaction_state|share_group_state) with error "
        r"'TOPIC_ALREADY_EXISTS'",
        "first use of an internal topic",
        "two brokers ask the controller to create the same internal topic at once; the second is told it exists "
        "(seen with Kafka's controller)",
    ),
)

# Expected while a controller is down or restarting.
CONTROLLER_DOWN: Final[tuple[Benign, ...]] = (
    Benign(
        r"WARN \[\w+ ?(?:id|nodeId)=\d+[^\]]*\] Connection to node \d+ \([^)]*\) could not be established\. "
        r"Node may not be available\.",
        "controller restart",
        "the broker's client retries while the controller is down",
    ),
    Benign(
        r"WARN \[RaftManager id=\d+\] Connection to node \d+ \([^)]*\) could not be established\.",
        "controller restart",
        "the broker's raft client retries while the controller is down",
    ),
)

# Expected while brokers shut down together (every leader moves or goes away at once).
SHUTDOWN: Final[tuple[Benign, ...]] = (
    Benign(
        r"WARN \[ReplicaFetcher replicaId=\d+, leaderId=\d+, fetcherId=\d+\] Partition \S+ marked as failed",
        "shutdown",
        "the leader a fetcher followed is shutting down too",
    ),
    Benign(
        r"ERROR \[(Group|Share|Transaction)Coordinator id=\d+\] Failed to load metadata from \S+ with epoch \d+ "
        r"due to Stopped loading records from \S+ because the partition is not online or is no longer the leader",
        "shutdown",
        "a coordinator's load is cut short when its partition's leader moves during shutdown",
    ),
    Benign(
        r"ERROR \[(Group|Share|Transaction)Coordinator id=\d+\] Failed to load metadata from \S+ with epoch \d+ "
        r"due to Coordinator loader is closed\.",
        "shutdown",
        "a coordinator's load is cut short when the broker closes its loader on the way down",
    ),
    Benign(
        r"WARN \[ReplicaFetcher replicaId=\d+, leaderId=\d+, fetcherId=\d+\] Connection to node \d+ \([^)]*\) "
        r"could not be established\. Node may not be available\.",
        "shutdown",
        "the leader a fetcher followed has shut down first",
    ),
    Benign(
        r"WARN \[ReplicaFetcher replicaId=\d+, leaderId=\d+, fetcherId=\d+\] Error in response for fetch request ",
        "shutdown",
        "the leader a fetcher followed has shut down first",
        detail=r"java\.io\.IOException: Connection to \S+ "
        r"(\(id: \d+ .*\) failed\.|was disconnected before the response)",
    ),
)

DESCRIBE_OFFLINE_DIR: Final = Benign(
    r"WARN \[ReplicaManager broker=\d+\] Unable to describe replica dirs for ",
    "an offline log dir",
    "DescribeLogDirs meets the offline dir (the answer carries KAFKA_STORAGE_ERROR)",
)

# Expected when a test fails a log dir on purpose (each seen with Kafka's controller too).
DIR_FAILURE: Final[tuple[Benign, ...]] = (
    Benign(
        r"ERROR Error while writing to checkpoint file .* \(org\.apache\.kafka\.storage\.internals\.log\."
        r"LogDirFailureChannel\)",
        "a failed log dir",
        "the IOException that fails the dir",
    ),
    Benign(
        r"ERROR \[ReplicaManager broker=\d+\] Error while writing to highwatermark file in directory ",
        "a failed log dir",
        "the same IOException, seen by the replica manager",
    ),
    Benign(
        r"WARN Logs for partitions .* are offline and logs for future partitions .* are offline due to failure on "
        r"log directory ",
        "a failed log dir",
        "the broker takes the dir's partitions offline",
    ),
    Benign(r"WARN Stopping cleaning logs in dir ", "a failed log dir", "the cleaner leaves the dir"),
    Benign(r"WARN Stopping serving logs in dir ", "a failed log dir", "the log manager leaves the dir"),
    Benign(
        r"WARN \[ReplicaManager broker=\d+\] Stopping serving replicas in dir .* because the log directory has "
        r"failed\.",
        "a failed log dir",
        "the replica manager leaves the dir",
    ),
    Benign(
        r"WARN \[ReplicaManager broker=\d+\] Stopped serving replicas in dir ",
        "a failed log dir",
        "the replica manager left the dir",
    ),
    Benign(
        r"WARN \[ReplicaManager broker=\d+\] Broker \d+ stopped fetcher for partitions .* because they are in the "
        r"failed log directory ",
        "a failed log dir",
        "followers in the dir stop fetching",
    ),
    DESCRIBE_OFFLINE_DIR,
    Benign(
        r"WARN \[Broker id=\d+\] Unable to bring up new local leader \S+ with topic id \S+ because it resides in "
        r"an offline log directory\.",
        "a failed log dir",
        "a metadata update names the broker for a replica in its failed dir before the controller moved it; "
        "Kafka's controller causes the same lines",
    ),
    Benign(
        r"WARN \[ReplicaFetcher replicaId=\d+, leaderId=\d+, fetcherId=\d+\] Partition \S+ marked as failed",
        "a failed log dir",
        "a follower replica in the failed dir",
    ),
    Benign(
        r"ERROR \[ReplicaFetcher replicaId=\d+, leaderId=\d+, fetcherId=\d+\] Error while processing data for "
        r"partition \S+ at offset \d+",
        "a failed log dir",
        "a follower replica in the failed dir cannot append",
        detail=r"KafkaStorageException",
    ),
    Benign(
        r"ERROR \[ReplicaFetcher replicaId=\d+, leaderId=\d+, fetcherId=\d+\] Error for partition \S+ at offset "
        r"\d+ \(kafka\.server\.ReplicaFetcherThread\)",
        "a failed log dir",
        "the other broker's follower is answered KAFKA_STORAGE_ERROR by the leader whose dir failed",
        detail=r"KafkaStorageException",
    ),
    Benign(
        r"WARN Exception while execution the action \(kafka\.server\.BrokerServer\)",
        "a failed log dir, at shutdown",
        "the lock of the failed dir cannot be released",
        detail=r"FileLock\.(release|unlock|destroy)",
    ),
)


# Expected when a broker restarts with a dir it cannot use (a file, or a new disk not yet
# formatted); each seen with Kafka's controller too.
RESTART_WITHOUT_A_DIR: Final[tuple[Benign, ...]] = (
    DESCRIBE_OFFLINE_DIR,
    Benign(
        r"ERROR \[AssignmentsManager id=\d+\] handleResponse: \d+ assignments failed; global error: "
        r"Response-level error: STALE_BROKER_EPOCH\. Retrying\.",
        "a broker restarted",
        "a restarted broker sends its directory assignments with the broker epoch of its metadata "
        "image, still its previous registration's until it has replayed the new one; the controller "
        "refuses the stale epoch and the broker retries (seen with Kafka's own controller)",
    ),
    Benign(
        r"ERROR Error while reading meta\.properties file ",
        "restart with a dir that is a file",
        "the dir cannot be read at start",
    ),
    Benign(
        r"ERROR Failed to create or validate data directory ",
        "restart with a dir that is a file",
        "the log manager starts without the dir",
    ),
    Benign(
        r"WARN \[Partition \S+ broker=\d+\] Skipping creation of log because there are potentially offline log "
        r"directories and log may already exist there\.",
        "restart with a dir that is a file",
        "a replica assigned to the unusable dir is not re-created elsewhere",
    ),
    Benign(
        r"ERROR \[Broker id=\d+\] Unable to start fetching \S+ with topic ID \S+ due to "
        r"NotLeaderOrFollowerException",
        "restart with a dir that is a file",
        "the same replica cannot follow",
    ),
    Benign(
        r"ERROR Exiting Kafka due to fatal exception \(kafka\.Kafka\$\)",
        "restart with a new, unformatted disk",
        "Kafka 4.4 refuses a log dir without meta.properties until it is formatted",
        detail=r"No `meta\.properties` found in ",
    ),
)


def entries(text: str) -> list[str]:
    """The log's entries (first line each; stack traces folded into their entry)."""
    starts = [m.start() for m in _ENTRY.finditer(text)]
    out: list[str] = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        out.append(text[start:end].rstrip("\n"))
    return out


def warnings_and_errors(text: str) -> list[str]:
    out: list[str] = []
    for entry in entries(text):
        m = _ENTRY.match(entry)
        if m is not None and m.group(1) in ("WARN", "ERROR", "FATAL"):
            out.append(entry)
    return out


def problems(text: str, benign: Iterable[Benign] = ()) -> list[str]:
    """WARN/ERROR/FATAL entries of ``text`` that no entry of ``ALWAYS`` or ``benign`` explains."""
    allowed: Sequence[Benign] = (*ALWAYS, *benign)
    return [e for e in warnings_and_errors(text) if not any(b.matches(e) for b in allowed)]
