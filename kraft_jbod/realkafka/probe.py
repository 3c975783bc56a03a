"""Questions to a running Kafka node over the wire, with our codec and a blocking socket.

Used to tell when a real broker is up and unfenced (it lists itself in a Metadata answer
only once its controller unfenced it: a KRaft broker's metadata cache holds unfenced
brokers only), to read its log dirs (DescribeLogDirs) and partition leaders, whichever
controller runs the cluster: nothing here asks the mock's own state.

Every call has a deadline; a refused or dropped connection is a :class:`ProbeError`.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any, Final

from kraft_jbod.connection import NEED_DATA, ClientConnection, ConnectionClosed, ResponseReceived
from kraft_jbod.errors import KraftJbodError
from kraft_jbod.messages.describe_log_dirs_request import DescribeLogDirsRequest
from kraft_jbod.messages.metadata_request import MetadataRequest
from kraft_jbod.wire.message import Message

METADATA_VERSION: Final = 12
DESCRIBE_LOG_DIRS_VERSION: Final = 5


class ProbeError(KraftJbodError):
    """The node did not answer: connection refused or closed, or the deadline passed."""


def call(address: tuple[str, int], body: Message, version: int, *, timeout: float = 10.0) -> Any:
    """Send one request and return the decoded response body.

    Raises:
        ProbeError: no answer within ``timeout`` seconds, or the connection failed.
    """
    conn = ClientConnection(client_id="kraft-jbod-probe")
    try:
        with socket.create_connection(address, timeout=timeout) as sock:
            sock.sendall(conn.send_request(body, version))
            deadline = time.monotonic() + timeout
            while True:
                ev = conn.next_event()
                if isinstance(ev, ResponseReceived):
                    return ev.body
                if isinstance(ev, ConnectionClosed):
                    raise ProbeError(f"{address[0]}:{address[1]} closed the connection without answering")
                assert ev is NEED_DATA
                sock.settimeout(max(0.05, deadline - time.monotonic()))
                data = sock.recv(65536)
                if not data:
                    raise ProbeError(f"{address[0]}:{address[1]} closed the connection without answering")
                conn.receive_data(data)
    except OSError as exc:
        raise ProbeError(f"{address[0]}:{address[1]}: {exc}") from None


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    error_code: int


@dataclass(frozen=True)
class ClusterView:
    """What one broker's metadata cache says: unfenced brokers and the named topics."""

    brokers: dict[int, tuple[str, int]]
    controller_id: int
    partitions: dict[tuple[str, int], PartitionView]

    def leader_of(self, topic: str, partition: int) -> int:
        return self.partitions[(topic, partition)].leader


def metadata(address: tuple[str, int], topics: list[str] | None = None, *, timeout: float = 10.0) -> ClusterView:
    """A Metadata v12 answer from the broker at ``address`` (all topics when ``topics`` is None).

    Raises:
        ProbeError: as :func:`call`.
    """
    from kraft_jbod.messages.metadata_request import MetadataRequestTopic

    req = MetadataRequest(
        topics=None if topics is None else [MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )
    resp = call(address, req, METADATA_VERSION, timeout=timeout)
    brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
    parts: dict[tuple[str, int], PartitionView] = {}
    for t in resp.topics:
        for p in t.partitions:
            parts[(t.name, p.partition_index)] = PartitionView(
                t.name,
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                tuple(p.replica_nodes),
                tuple(p.isr_nodes),
                tuple(p.offline_replicas),
                p.error_code,
            )
    return ClusterView(brokers, resp.controller_id, parts)


@dataclass(frozen=True)
class LogDirView:
    path: str
    error_code: int
    is_cordoned: bool
    partitions: frozenset[tuple[str, int]]


def api_versions(address: tuple[str, int], *, timeout: float = 10.0) -> dict[int, tuple[int, int]]:
    """The node's ApiVersions (v3): api key -> (min, max).

    Raises:
        ProbeError: as :func:`call`.
    """
    from kraft_jbod.messages.api_versions_request import ApiVersionsRequest

    resp = call(
        address,
        ApiVersionsRequest(client_software_name="kraft-jbod", client_software_version="probe"),
        3,
        timeout=timeout,
    )
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def log_dirs(address: tuple[str, int], *, timeout: float = 10.0) -> dict[str, LogDirView]:
    """DescribeLogDirs of every dir and partition of the broker at ``address``, by path, at the
    newest version both sides know (v5 carries IsCordoned, KIP-1066).

    Raises:
        ProbeError: as :func:`call`.
    """
    key = DescribeLogDirsRequest.API_KEY
    assert key is not None  # a request class always has its key
    broker_max = api_versions(address, timeout=timeout).get(key, (0, 0))[1]
    version = min(broker_max, DESCRIBE_LOG_DIRS_VERSION)
    resp = call(address, DescribeLogDirsRequest(topics=None), version, timeout=timeout)
    out: dict[str, LogDirView] = {}
    for r in resp.results:
        held = frozenset((t.name, p.partition_index) for t in r.topics for p in t.partitions)
        out[r.log_dir] = LogDirView(r.log_dir, r.error_code, r.is_cordoned, held)
    return out
