"""The KRaft voter set (KIP-853) of a single-voter controller: kraft.version and VotersRecord.

Pure: no I/O. The server feeds in what it read from the log and the snapshot, and this
module says which control records a new leader epoch starts with.

How Kafka 4.4 does it, and what we do the same way:

* kraft.version is chosen when the storage is formatted: a dynamic quorum (``--standalone``
  or ``--initial-controllers``, ``controller.quorum.voters`` empty) gets 1, a static
  ``controller.quorum.voters`` gets 0; ``--feature kraft.version=N`` may only confirm that
  choice (:func:`choose_kraft_version`). It is never a FeatureLevelRecord: it lives in
  KRaftVersionRecord control records, and in the snapshot header batch.
* At kraft.version 1 the leader starts its epoch with ONE control batch holding the
  LeaderChangeMessage, a KRaftVersionRecord and a VotersRecord, when the log holds no
  voter set yet or the leader's own entry changed (listeners or supported kraft.version
  range): Kafka's ``LeaderState.appendStartOfEpochControlRecords``. Otherwise the batch
  holds the LeaderChangeMessage alone (:func:`start_of_epoch_records`).
* The voter set in force is the last VotersRecord of the log, or of the newest snapshot
  when the log after it holds none (:class:`QuorumState`, fed in offset order).

Invariant: a VotersRecord is never written at kraft.version 0.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.k_raft_version_record import KRaftVersionRecord
from kraft_jbod.messages.leader_change_message import LeaderChangeMessage
from kraft_jbod.messages.leader_change_message import Voter as LeaderChangeVoter
from kraft_jbod.messages.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kraft_jbod.wire.message import Message
from kraft_jbod.wire.records import ControlRecordType

# The kraft.version range this controller implements (Kafka 4.4's KRaftVersion: 0 and 1).
SUPPORTED_KRAFT_VERSIONS: Final = (0, 1)
NO_DIRECTORY: Final = uuid.UUID(int=0)

ControlRecord = tuple[ControlRecordType, Message, int]


def choose_kraft_version(*, static_voters: bool, standalone: bool, requested: int | None) -> int:
    """kraft.version of a new log, by Kafka 4.4's formatter rules.

    ``static_voters``: ``controller.quorum.voters`` is set; ``standalone``: the operator asked
    for a dynamic quorum with this controller as its one voter; ``requested``: a
    ``--feature kraft.version=N``, if given.

    Raises:
        ConfigError: a combination Kafka's formatter refuses, or a level outside 0-1.
    """
    if standalone and static_voters:
        raise ConfigError(
            "--standalone makes a dynamic quorum (kraft.version 1); remove controller.quorum.voters "
            "from the configuration (brokers then find the controller by controller.quorum.bootstrap.servers)"
        )
    if requested is not None:
        lo, hi = SUPPORTED_KRAFT_VERSIONS
        if not lo <= requested <= hi:
            raise ConfigError(f"--feature kraft.version={requested}: this controller supports {lo}-{hi}")
        if requested == 0 and standalone:
            raise ConfigError(
                "--feature kraft.version=0 contradicts --standalone (a dynamic quorum needs kraft.version 1); "
                "drop one of them"
            )
        if requested >= 1 and not standalone:
            raise ConfigError(
                f"--feature kraft.version={requested} needs a dynamic quorum: add --standalone "
                "and leave controller.quorum.voters unset"
            )
        return requested
    return 1 if standalone else 0


@dataclass(frozen=True, slots=True)
class LocalVoter:
    """This controller as a voter: what its VotersRecord entry says."""

    node_id: int
    directory_id: uuid.UUID
    endpoints: tuple[tuple[str, str, int], ...]  # (listener name, host, port), listener order
    supported: tuple[int, int] = SUPPORTED_KRAFT_VERSIONS

    def voter(self) -> Voter:
        return Voter(
            voter_id=self.node_id,
            voter_directory_id=self.directory_id,
            endpoints=[Endpoint(name=n, host=h, port=p) for n, h, p in self.endpoints],
            k_raft_version_feature=KRaftVersionFeature(
                min_supported_version=self.supported[0], max_supported_version=self.supported[1]
            ),
        )


def endpoints_of(rec: VotersRecord, node_id: int) -> tuple[tuple[str, str, int], ...]:
    """The listener endpoints ``rec`` gives voter ``node_id`` (empty when it is not a voter)."""
    for v in rec.voters:
        if v.voter_id == node_id:
            return tuple((e.name, e.host, e.port) for e in v.endpoints)
    return ()


@dataclass(slots=True)
class QuorumState:
    """kraft.version and the voter set in force, fed control records in offset order."""

    kraft_version: int = 0
    voters: VotersRecord | None = None
    # A voter set is recorded (in the log or a snapshot): Kafka's offsetOfVotersAtEpochStart != -1.
    recorded: bool = False
    seen: list[int] = field(default_factory=list)  # control types fed, for tests and logs

    def from_snapshot(self, kraft_version: int, voters: Message | None) -> None:
        self.kraft_version = kraft_version
        self.voters = voters if isinstance(voters, VotersRecord) else None
        self.recorded = self.voters is not None

    def feed(self, ctype: int, msg: object) -> None:
        """One control record of the log (other control types are ignored)."""
        self.seen.append(ctype)
        if ctype == ControlRecordType.KRAFT_VERSION and isinstance(msg, KRaftVersionRecord):
            self.kraft_version = msg.k_raft_version
        elif ctype == ControlRecordType.KRAFT_VOTERS and isinstance(msg, VotersRecord):
            self.voters = msg
            self.recorded = True


def _needs_update(current: VotersRecord | None, local: LocalVoter) -> bool:
    """Kafka's voterNodeNeedsUpdate: our entry's listeners or supported range differ."""
    if current is None:
        return True
    for v in current.voters:
        if v.voter_id == local.node_id and v.voter_directory_id == local.directory_id:
            mine = local.voter()
            return v.endpoints != mine.endpoints or (
                v.k_raft_version_feature.min_supported_version,
                v.k_raft_version_feature.max_supported_version,
            ) != (mine.k_raft_version_feature.min_supported_version, mine.k_raft_version_feature.max_supported_version)
    # Not a voter of the set in the log: a single-voter mock cannot lead such a quorum.
    raise ConfigError(
        f"the metadata log's voter set {[(v.voter_id, str(v.voter_directory_id)) for v in current.voters]} "
        f"does not contain this controller (node {local.node_id}, directory {local.directory_id})"
    )


def start_of_epoch_records(state: QuorumState, local: LocalVoter) -> tuple[list[ControlRecord], VotersRecord | None]:
    """The control batch a new leader epoch starts with, and the voter set after it.

    Raises:
        ConfigError: at kraft.version 1, a voter set in the log without this controller.
    """
    me = [LeaderChangeVoter(voter_id=local.node_id)]
    records: list[ControlRecord] = [
        (
            ControlRecordType.LEADER_CHANGE,
            LeaderChangeMessage(version=0, leader_id=local.node_id, voters=me, granting_voters=list(me)),
            0,
        )
    ]
    if state.kraft_version < 1:
        return records, None
    if state.recorded and not _needs_update(state.voters, local):
        return records, state.voters
    updated = VotersRecord(version=0, voters=[local.voter()])
    records.append(
        (ControlRecordType.KRAFT_VERSION, KRaftVersionRecord(version=0, k_raft_version=state.kraft_version), 0)
    )
    records.append((ControlRecordType.KRAFT_VOTERS, updated, 0))
    return records, updated


def listener_endpoints(
    names: Sequence[str], bound: Sequence[tuple[str, str, int]], configured_hosts: Mapping[str, str]
) -> tuple[tuple[str, str, int], ...]:
    """One (name, host, port) per controller listener name, in ``names`` order: the configured
    host, or for a wildcard listener the machine's name (Kafka advertises the canonical host
    name there); the port actually bound."""
    out = []
    for name in names:
        ports = [(h, p) for n, h, p in bound if n == name]
        if not ports:
            continue
        host = configured_hosts.get(name) or ""
        if host in ("", "0.0.0.0", "::"):
            host = socket.getfqdn()
        out.append((name, host, ports[0][1]))
    return tuple(out)
