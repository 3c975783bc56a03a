"""The exchanges between voters as plain values, with no wire format.

Each maps one to one onto a KRaft request or response of the same name (Vote with its
PreVote flag of KIP-996, BeginQuorumEpoch, EndQuorumEpoch, Fetch): an I/O shell turns them
into the generated Kafka messages and back. Responses carry everything the receiver needs to
act on them without remembering the request (the offsets asked for, the epoch answered in),
so a late or duplicated response is judged by its content alone.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from enum import IntEnum


class Error(IntEnum):
    """The Kafka error codes the core answers with (same numbers as the wire)."""

    NONE = 0
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    INCONSISTENT_CLUSTER_ID = 104
    # Dynamic quorums (kraft.version 1): voter_set.py and node.py's voter changes.
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


@dataclass(frozen=True, slots=True)
class Entry:
    """One batch of the replicated log: its first offset, the leader epoch that wrote it, its
    record's bytes (one record, unless ``count`` says more)."""

    offset: int
    epoch: int
    payload: bytes
    control: bool = False  # the leader's start-of-epoch marker (a LeaderChange control batch)
    # A record batch written by another implementation (Kafka's controller) may hold several
    # records: the entry then spans ``count`` offsets and ``raw`` keeps the batch's bytes,
    # re-sent and stored exactly as received.
    count: int = 1
    raw: bytes | None = None

    @property
    def next_offset(self) -> int:
        return self.offset + self.count


@dataclass(frozen=True, slots=True)
class VoteRequest:
    candidate_id: int
    candidate_epoch: int  # a pre-vote names the prospective's current epoch, a vote the new one
    last_epoch: int
    last_offset: int  # the candidate's log end offset
    pre_vote: bool
    # kraft.version 1: the candidate's directory id, and the directory id of the voter asked
    # (a voter whose own differs answers INVALID_VOTER_KEY). None: not sent (static quorum).
    candidate_directory_id: uuid.UUID | None = None
    voter_directory_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class VoteResponse:
    voter_id: int
    epoch: int  # the responder's epoch after handling the request
    leader_id: int  # -1: unknown
    granted: bool
    pre_vote: bool
    error: Error = Error.NONE


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    epoch: int
    voter_directory_id: uuid.UUID | None = None  # kraft.version 1: the voter this is meant for


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    voter_id: int
    epoch: int
    leader_id: int
    error: Error = Error.NONE


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    leader_id: int
    epoch: int
    preferred_successors: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    voter_id: int
    epoch: int
    leader_id: int
    error: Error = Error.NONE


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: int  # -1 for an observer without an id
    epoch: int  # the fetcher's idea of the current leader epoch
    fetch_offset: int
    last_fetched_epoch: int
    replica_directory_id: uuid.UUID | None = None  # kraft.version 1: the fetcher's log directory


@dataclass(frozen=True, slots=True)
class FetchResponse:
    leader_id: int  # the responder's idea of the leader (-1: unknown)
    epoch: int  # the responder's epoch
    error: Error
    fetch_offset: int  # echoed from the request
    high_watermark: int = -1
    entries: tuple[Entry, ...] = ()
    # Set when the fetcher's log diverges: truncate to at most this (epoch, end offset).
    diverging_epoch: int = -1
    diverging_end_offset: int = -1
    # Set when the fetcher must load the leader's snapshot (end offset, epoch) first: its
    # fetch offset is below the leader's log start, or its log is empty (FetchSnapshot).
    snapshot_id: tuple[int, int] | None = None
    log_start_offset: int = 0


Message = (
    VoteRequest
    | VoteResponse
    | BeginQuorumEpochRequest
    | BeginQuorumEpochResponse
    | EndQuorumEpochRequest
    | EndQuorumEpochResponse
    | FetchRequest
    | FetchResponse
)


@dataclass(frozen=True, slots=True)
class Send:
    """An outbound message: to node ``destination``."""

    destination: int
    message: Message


@dataclass(slots=True)
class Outbox:
    """What one call into the core asks the shell to send, in order."""

    sends: list[Send] = field(default_factory=list)

    def add(self, destination: int, message: Message) -> None:
        self.sends.append(Send(destination, message))
