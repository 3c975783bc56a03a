"""One KRaft voter as a pure state machine: elections, replication and the high watermark.

A :class:`RaftNode` does no I/O and reads no clock: every call gets the time (``now_ms``) and
returns an :class:`~.messages.Outbox` of messages for the shell to send. Randomness (the
election timeouts) comes from an injected ``random.Random``, so a seed replays a run.

Roles, as Kafka 4.4's raft client has them (KIP-595, with KIP-996 pre-votes):

* **unattached**: no known leader in this epoch (maybe a vote given). When the election
  timer fires it becomes *prospective*.
* **prospective**: asks every voter for a pre-vote (epoch unchanged, nothing persisted).
  A majority makes it a *candidate*; a lost or timed-out pre-vote sends it back to follow
  the leader it knew, or to unattached. A voter that still hears from its leader refuses
  pre-votes, so a node cut off from the others cannot raise the epoch and disturb them.
* **candidate**: epoch + 1, votes for itself (persisted first), asks for votes. A majority
  makes it *leader*; a timeout sends it back to prospective.
* **leader**: appends a control entry starting its epoch, sends BeginQuorumEpoch to the
  others until they fetch, serves Fetch, and moves the high watermark to the offset a
  majority of voters hold, once that covers the epoch's first entry. A leader that has not
  heard from a majority for 1.5 fetch timeouts (check-quorum) resigns.
* **follower**: fetches from the leader; truncates when the leader says its tail diverges;
  its high watermark is the leader's, capped by its own log end. No answer from the leader
  for a fetch timeout makes it prospective.
* **resigned**: a leader stepping down (shutdown, check-quorum, or a leadership move)
  sends EndQuorumEpoch naming preferred successors; the first of them starts its election
  at once, the others after a back-off.

Voters: a fixed set of node ids (kraft.version 0), or, when the shell gives a
:class:`~.voter_set.VoterCodec` (kraft.version 1), the newest voter set recorded in the log
over the bootstrap set (voter_set.py): every role above reads the set in force at the time,
a node outside it is an *observer* (it never stands for election and finds the leader by
fetching from the voters or the bootstrap peers), and the leader changes the set with
:meth:`RaftNode.add_voter` / :meth:`RaftNode.remove_voter` (Rules V1-V9 below), and records
a voter's new endpoint with :meth:`RaftNode.update_voter` (UpdateRaftVoter, Rules U1-U5).

Invariants (checked by tests/controller/test_raft_node.py and the simulation):

Rule 1: the epoch and the vote are persisted before a vote is granted or requested, so a
restarted voter never votes twice in one epoch, and a restarted leader resigns its epoch.
Rule 2: a voter grants its (real) vote only to a candidate whose log is at least as up to
date (last epoch, then end offset) as its own: an elected leader holds every committed entry.
Rule 3: the high watermark never goes back on a leader, and never counts an entry of an
older epoch as committed by itself (Raft's "commit only from the current term"); a new
leader answers fetches with an unknown high watermark (-1) until its own is past its
epoch's first entry, so no follower sees its high watermark go back (Kafka's voter would
stop on it).
Rule 4: a message naming an older epoch changes nothing but gets an answer carrying the
current epoch and leader, so the sender catches up.
"""

from __future__ import annotations

import enum
import random
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from kraft_jbod.controller.raft.election_store import Election, ElectionStore
from kraft_jbod.controller.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    Error,
    FetchRequest,
    FetchResponse,
    Message,
    Outbox,
    VoteRequest,
    VoteResponse,
)
from kraft_jbod.controller.raft.progress import FetchProgress
from kraft_jbod.controller.raft.replica_log import ReplicaLog
from kraft_jbod.controller.raft.voter_set import VoterCodec, VoterKey, VoterSet, VoterSetHistory

LEADER_CHANGE_PAYLOAD = b""
#: The kraft.version of a dynamic quorum (voter sets in the log).
DYNAMIC_KRAFT_VERSION = 1


class Role(enum.Enum):
    UNATTACHED = "unattached"
    PROSPECTIVE = "prospective"
    CANDIDATE = "candidate"
    LEADER = "leader"
    FOLLOWER = "follower"
    RESIGNED = "resigned"


@dataclass(frozen=True, slots=True)
class Timing:
    """Kafka's controller.quorum.* timeouts (defaults as Kafka's), plus the shell's pacing."""

    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    # How long an idle follower waits between fetches (Kafka long-polls instead).
    fetch_interval_ms: int = 50
    # Resend a request (fetch, vote, begin/end epoch) not answered within this long.
    retry_ms: int = 200
    max_fetch_entries: int = 500
    # Kafka's controller.quorum.request.timeout.ms: how long a voter change may wait for
    # its VotersRecord to commit (or for the new voter's ApiVersions answer).
    request_timeout_ms: int = 2000


class RaftNode:
    """One voter. Drive it with :meth:`tick` and :meth:`receive`; read its state freely."""

    def __init__(
        self,
        node_id: int,
        voters: Iterable[int] | VoterSet,
        log: ReplicaLog,
        store: ElectionStore,
        *,
        rng: random.Random,
        now_ms: int,
        timing: Timing = Timing(),
        start_of_epoch: Callable[[int, frozenset[int], frozenset[int]], bytes] | None = None,
        directory_id: uuid.UUID | None = None,
        voter_codec: VoterCodec | None = None,
        bootstrap_peers: Sequence[int] = (),
    ) -> None:
        self.node_id = node_id
        # The payload of the control entry a new leader starts its epoch with, from
        # (leader, voters, voters that granted): the shell's LeaderChangeMessage.
        self.start_of_epoch = start_of_epoch
        # kraft.version 1 (a dynamic quorum) when the shell says how voter sets are recorded:
        # the voter set is then the newest VotersRecord of the log (voter_set.py, Rule 1).
        self.voter_codec = voter_codec
        self.directory_id = directory_id
        self.key = VoterKey(node_id, directory_id)
        bootstrap = voters if isinstance(voters, VoterSet) else VoterSet.static(voters)
        self._history = VoterSetHistory(bootstrap)
        # Where an observer asks who leads when it knows no voter (controller.quorum.bootstrap.servers).
        self.bootstrap_peers = tuple(bootstrap_peers)
        if voter_codec is None and node_id not in bootstrap.ids:
            raise ValueError(f"node {node_id} is not one of the voters {sorted(bootstrap.ids)}")
        self._voter_change: _VoterChange | None = None
        self._voter_change_seq = 0
        self._resign_requested = False
        self._update_voter_at = 0  # follower: when update_voter_due next says True
        # Leader: every replica that fetches, by key: (last fetch, last caught up, leader log
        # end at the last fetch), as Kafka's ReplicaState, for AddRaftVoter's catch-up check.
        self._observers: dict[VoterKey, tuple[int, int, int]] = {}
        #: Voter changes answered (change id, error, message), oldest first; the shell drains it.
        self.voter_change_results: list[tuple[int, Error, str]] = []
        self._peer_turn = 0
        if voter_codec is not None:
            self._voters_scan(log)
        self.log = log
        self.store = store
        self.rng = rng
        self.timing = timing
        self.high_watermark = 0
        self.role = Role.UNATTACHED
        self._deadline = 0
        self._granted: set[int] = set()
        self._rejected: set[int] = set()
        self._asked_at: dict[int, int] = {}
        # Leader: each voter's log end as last fetched, when it last fetched, epoch start.
        self._match: dict[int, int] = {}
        self._last_fetch: dict[int, int] = {}
        self._epoch_start = 0
        self._successors: tuple[int, ...] = ()
        # Leader: each other voter's fetch progress in this epoch (DescribeQuorum).
        self.progress: dict[int, FetchProgress] = {}
        # Follower: the leader's snapshot (end offset, epoch) to load before fetching on,
        # and the epoch whose leader named it (the shell fetches it with FetchSnapshot).
        self._snapshot_wanted: tuple[int, int] | None = None
        self._snapshot_wanted_epoch = -1
        self.snapshots_loaded = 0
        # Follower: an outstanding fetch (sent at), the next fetch time, heard from the leader.
        self._fetch_sent = -1
        self._next_fetch = 0
        self._has_fetched = False
        self._last_leader = -1  # the leader a prospective falls back to
        # Counters the shell and the tests read.
        self.elections_won = 0
        self.truncated_below_hw = 0
        election = store.read()
        self.epoch = max(election.epoch, log.last_epoch)
        self.leader_id = election.leader_id if election.epoch == self.epoch else -1
        self.voted_id = election.voted_id if election.epoch == self.epoch else -1
        if self.leader_id == node_id:
            # Rule 1: a restarted leader cannot lead its old epoch again (its state is gone).
            self.role = Role.RESIGNED
            self._deadline = now_ms + self._election_timeout()
        elif self.leader_id >= 0:
            self._become_follower(self.epoch, self.leader_id, now_ms, persist=False)
        else:
            self._deadline = now_ms + self._election_timeout()
        if len(self.voters) == 1 and self.role is not Role.LEADER and self.is_voter:
            self._deadline = now_ms

    # ------------------------------------------------------------------ reading the state

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def voters(self) -> frozenset[int]:
        """The node ids of the voter set in force (at kraft.version 1: the newest recorded)."""
        return self._history.latest.ids

    @property
    def voter_set(self) -> VoterSet:
        return self._history.latest

    @property
    def voter_history(self) -> VoterSetHistory:
        return self._history

    @property
    def is_voter(self) -> bool:
        """This node is in the voter set in force (otherwise an observer: it never elects)."""
        return self._history.latest.is_voter(self.key)

    @property
    def dynamic(self) -> bool:
        return self.voter_codec is not None

    def describe(self) -> str:
        return (
            f"node {self.node_id} {self.role.value} epoch {self.epoch} leader {self.leader_id} "
            f"voted {self.voted_id} end {self.log.end_offset} hw {self.high_watermark}"
        )

    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    # ------------------------------------------------------------------ commands

    def propose(self, payloads: Sequence[bytes], now_ms: int) -> int:
        """Append ``payloads`` as the leader; the offset of the first. Raises when not leader."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.node_id, self.leader_id, self.epoch)
        first = self.log.end_offset
        entries = [Entry(first + i, self.epoch, p) for i, p in enumerate(payloads)]
        self.log.append(entries)
        self._voters_appended(entries)
        self._match[self.node_id] = self.log.end_offset
        self._advance_high_watermark()
        return first

    def propose_entries(self, build: Callable[[int, int], Sequence[Entry]]) -> int:
        """Append what ``build(log end, epoch)`` makes (whole batches, e.g. a controller's
        record batches already encoded at that offset and epoch) as the leader; the offset of
        the first. Raises :class:`NotLeaderError` when not leader."""
        if self.role is not Role.LEADER:
            raise NotLeaderError(self.node_id, self.leader_id, self.epoch)
        first = self.log.end_offset
        built = build(first, self.epoch)
        self.log.append(built)
        self._voters_appended(built)
        self._match[self.node_id] = self.log.end_offset
        self._advance_high_watermark()
        return first

    @property
    def epoch_start(self) -> int:
        """The offset of the control entry that started this leader's epoch (leader only)."""
        return self._epoch_start

    def resign(self, now_ms: int, successors: Sequence[int] = ()) -> Outbox:
        """Step down as leader (graceful shutdown, or move leadership to ``successors[0]``)."""
        out = Outbox()
        if self.role is not Role.LEADER:
            return out
        self._abandon_voter_change()
        self._resign_requested = False
        if not successors:
            others = [v for v in self.voters if v != self.node_id]
            successors = sorted(others, key=lambda v: -self._match.get(v, -1))
        self._successors = tuple(successors)
        self.role = Role.RESIGNED
        self._deadline = now_ms + self._election_timeout()
        self._asked_at.clear()
        self._send_end_epoch(out, now_ms)
        return out

    # ------------------------------------------------------------------ time

    def tick(self, now_ms: int) -> Outbox:
        out = Outbox()
        role = self.role
        if role is Role.LEADER:
            self._leader_tick(out, now_ms)
        elif role is Role.FOLLOWER:
            if now_ms >= self._deadline:
                self._become_prospective(out, now_ms)
            else:
                self._maybe_fetch(out, now_ms)
        elif role is Role.UNATTACHED:
            if now_ms >= self._deadline:
                self._become_prospective(out, now_ms)
            elif not self.is_voter:
                self._observer_discover(out, now_ms)
        elif role is Role.PROSPECTIVE:
            if now_ms >= self._deadline:
                self._fall_back(out, now_ms)
            else:
                self._ask(out, now_ms, pre_vote=True)
        elif role is Role.CANDIDATE:
            if now_ms >= self._deadline:
                self._become_prospective(out, now_ms)
            else:
                self._ask(out, now_ms, pre_vote=False)
        elif role is Role.RESIGNED:
            if now_ms >= self._deadline:
                self._become_prospective(out, now_ms)
            else:
                self._send_end_epoch(out, now_ms)
        return out

    def next_deadline(self, now_ms: int) -> int:
        """The latest time the shell may wait before calling :meth:`tick` again."""
        soonest = self._deadline
        if self.role is Role.FOLLOWER or (self.role is Role.UNATTACHED and not self.is_voter):
            soonest = min(soonest, max(self._next_fetch, now_ms))
        elif self.role is not Role.UNATTACHED:
            soonest = min(soonest, now_ms + self.timing.retry_ms)
        return max(soonest, now_ms)

    # ------------------------------------------------------------------ messages

    def receive(self, source: int, message: Message, now_ms: int) -> Outbox:
        """Handle one message from node ``source``; never raises for a peer's values."""
        out = Outbox()
        if isinstance(message, FetchRequest):
            out.add(source, self._on_fetch(message, now_ms))
        elif isinstance(message, FetchResponse):
            self._on_fetch_response(source, message, out, now_ms)
        elif isinstance(message, VoteRequest):
            out.add(source, self._on_vote(message, now_ms))
        elif isinstance(message, VoteResponse):
            self._on_vote_response(source, message, out, now_ms)
        elif isinstance(message, BeginQuorumEpochRequest):
            out.add(source, self._on_begin(message, out, now_ms))
        elif isinstance(message, BeginQuorumEpochResponse):
            self._on_epoch_answer(source, message.epoch, message.leader_id, out, now_ms)
            if self.role is Role.LEADER and message.epoch == self.epoch:
                self._asked_at[source] = now_ms + 10 * self.timing.fetch_timeout_ms  # acknowledged
        elif isinstance(message, EndQuorumEpochRequest):
            out.add(source, self._on_end(message, now_ms))
        elif isinstance(message, EndQuorumEpochResponse):
            self._on_epoch_answer(source, message.epoch, message.leader_id, out, now_ms)
            if self.role is Role.RESIGNED and message.epoch == self.epoch:
                self._asked_at[source] = now_ms + 10 * self.timing.fetch_timeout_ms
        return out

    # -- votes

    def _on_vote(self, req: VoteRequest, now_ms: int) -> VoteResponse:
        illegal = req.last_epoch > req.candidate_epoch if req.pre_vote else req.last_epoch >= req.candidate_epoch
        # A static voter refuses a candidate outside its fixed set; at kraft.version 1 the
        # candidate may be a voter this node has not replicated yet (Kafka does not check).
        stranger = not self.dynamic and req.candidate_id not in self.voters
        if req.last_offset < 0 or req.last_epoch < 0 or illegal or stranger:
            return VoteResponse(self.node_id, self.epoch, self.leader_id, False, req.pre_vote, Error.INVALID_REQUEST)
        if req.candidate_epoch < self.epoch:
            return VoteResponse(self.node_id, self.epoch, self.leader_id, False, req.pre_vote)
        if req.candidate_epoch > self.epoch:
            self._become_unattached(req.candidate_epoch, now_ms)
        if not self._meant_for_me(req.voter_directory_id):
            return VoteResponse(self.node_id, self.epoch, self.leader_id, False, req.pre_vote, Error.INVALID_VOTER_KEY)
        up_to_date = (req.last_epoch, req.last_offset) >= (self.log.last_epoch, self.log.end_offset)
        granted = self._can_grant(req.candidate_id, up_to_date, req.pre_vote)
        if granted and not req.pre_vote and self.role in (Role.UNATTACHED, Role.PROSPECTIVE) and self.voted_id < 0:
            # Rule 1: the vote is on disk before the answer leaves.
            self.voted_id = req.candidate_id
            self.role = Role.UNATTACHED
            self._persist()
            self._deadline = now_ms + self._election_timeout()
        return VoteResponse(self.node_id, self.epoch, self.leader_id, granted, req.pre_vote)

    def _can_grant(self, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
        role = self.role
        if role in (Role.UNATTACHED, Role.PROSPECTIVE):
            if pre_vote:
                return up_to_date
            if self.voted_id >= 0:
                return self.voted_id == candidate
            if self.leader_id >= 0:
                return False
            return up_to_date
        if role is Role.FOLLOWER:
            return pre_vote and not self._has_fetched and up_to_date
        if role in (Role.CANDIDATE, Role.RESIGNED):
            return pre_vote and up_to_date
        return False

    def _on_vote_response(self, source: int, resp: VoteResponse, out: Outbox, now_ms: int) -> None:
        if self._on_epoch_answer(source, resp.epoch, resp.leader_id, out, now_ms):
            return
        if resp.epoch != self.epoch or resp.error is not Error.NONE:
            return
        wanted = Role.PROSPECTIVE if resp.pre_vote else Role.CANDIDATE
        if self.role is not wanted:
            return
        (self._granted if resp.granted else self._rejected).add(source)
        if len(self._granted) >= self.majority():
            if resp.pre_vote:
                self._become_candidate(out, now_ms)
            else:
                self._become_leader(out, now_ms)
        elif len(self._rejected) > len(self.voters) - self.majority():
            if resp.pre_vote:
                self._fall_back(out, now_ms)
            else:
                # Lost: wait a random back-off, then try again from prospective.
                self._deadline = now_ms + self.rng.randrange(1, self.timing.election_backoff_max_ms + 1)

    def _ask(self, out: Outbox, now_ms: int, *, pre_vote: bool) -> None:
        req = VoteRequest(
            self.node_id,
            self.epoch,
            self.log.last_epoch,
            self.log.end_offset,
            pre_vote,
            candidate_directory_id=self.directory_id,
        )
        for v in sorted(self.voters):
            if v == self.node_id or v in self._granted or v in self._rejected:
                continue
            if now_ms - self._asked_at.get(v, -(10**12)) >= self.timing.retry_ms:
                self._asked_at[v] = now_ms
                out.add(v, replace(req, voter_directory_id=self._directory_of(v)))

    # -- epochs

    def _on_epoch_answer(self, source: int, epoch: int, leader_id: int, out: Outbox, now_ms: int) -> bool:
        """Rule 4 from the other side: an answer with a newer epoch moves us there. True if it did."""
        if epoch > self.epoch:
            if leader_id >= 0 and leader_id != self.node_id:
                self._become_follower(epoch, leader_id, now_ms)
                self._maybe_fetch(out, now_ms)
            else:
                self._become_unattached(epoch, now_ms)
            return True
        if (
            epoch == self.epoch
            and leader_id >= 0
            and leader_id != self.node_id
            and self.leader_id < 0
            and self.role in (Role.UNATTACHED, Role.PROSPECTIVE)
        ):
            self._become_follower(epoch, leader_id, now_ms)
            self._maybe_fetch(out, now_ms)
            return True
        return False

    def _on_begin(self, req: BeginQuorumEpochRequest, out: Outbox, now_ms: int) -> BeginQuorumEpochResponse:
        if req.epoch < self.epoch:
            return BeginQuorumEpochResponse(self.node_id, self.epoch, self.leader_id, Error.FENCED_LEADER_EPOCH)
        if req.epoch == self.epoch and self.leader_id >= 0 and self.leader_id != req.leader_id:
            return BeginQuorumEpochResponse(self.node_id, self.epoch, self.leader_id, Error.INVALID_REQUEST)
        if not self._meant_for_me(req.voter_directory_id):
            return BeginQuorumEpochResponse(self.node_id, self.epoch, self.leader_id, Error.INVALID_VOTER_KEY)
        if not (self.role is Role.FOLLOWER and self.epoch == req.epoch):
            self._become_follower(req.epoch, req.leader_id, now_ms)
            self._maybe_fetch(out, now_ms)
        return BeginQuorumEpochResponse(self.node_id, self.epoch, self.leader_id)

    def _on_end(self, req: EndQuorumEpochRequest, now_ms: int) -> EndQuorumEpochResponse:
        if req.epoch < self.epoch:
            return EndQuorumEpochResponse(self.node_id, self.epoch, self.leader_id, Error.FENCED_LEADER_EPOCH)
        if req.epoch > self.epoch:
            self._become_unattached(req.epoch, now_ms)
        if self.role is Role.FOLLOWER and self.leader_id == req.leader_id:
            # The leader is going: start the election soon, the preferred successor first.
            self._deadline = now_ms + self._successor_backoff(req.preferred_successors)
        return EndQuorumEpochResponse(self.node_id, self.epoch, self.leader_id)

    def _successor_backoff(self, successors: Sequence[int]) -> int:
        """How long to wait before standing, by place among the resigning leader's successors.

        Kafka's strict exponential rule, not a random draw: the first successor stands at
        once, the k-th (k >= 1) of n after ``max >> (n - 1) << (k - 1)`` ms, and a voter not
        named waits the whole ``election_backoff_max_ms``, so the successor the leader chose
        (a leadership move names only one) has that whole window to win.
        """
        backoff_max = self.timing.election_backoff_max_ms
        if self.node_id not in successors:
            return backoff_max
        position = list(successors).index(self.node_id)
        if position == 0:
            return 0
        return min(backoff_max, (backoff_max >> (len(successors) - 1)) << (position - 1))

    def _send_end_epoch(self, out: Outbox, now_ms: int) -> None:
        req = EndQuorumEpochRequest(self.node_id, self.epoch, self._successors)
        for v in sorted(self.voters - {self.node_id}):
            if now_ms - self._asked_at.get(v, -(10**12)) >= self.timing.retry_ms:
                self._asked_at[v] = now_ms
                out.add(v, req)

    # -- fetch, leader side

    def _on_fetch(self, req: FetchRequest, now_ms: int) -> FetchResponse:
        def answer(error: Error, **fields: int) -> FetchResponse:
            return FetchResponse(self.leader_id, self.epoch, error, req.fetch_offset, **fields)  # type: ignore[arg-type]

        if req.fetch_offset < 0 or req.last_fetched_epoch < 0 or req.last_fetched_epoch > req.epoch:
            return answer(Error.INVALID_REQUEST)
        if req.epoch < self.epoch:
            return answer(Error.FENCED_LEADER_EPOCH)
        if req.epoch > self.epoch:
            return answer(Error.UNKNOWN_LEADER_EPOCH)
        if self.role is not Role.LEADER:
            return answer(Error.NOT_LEADER_OR_FOLLOWER)
        snapshot = self._snapshot_for(req)
        if snapshot is not None:
            return FetchResponse(
                self.node_id,
                self.epoch,
                Error.NONE,
                req.fetch_offset,
                high_watermark=self._served_high_watermark(),
                snapshot_id=snapshot,
                log_start_offset=self.log.start_offset,
            )
        if req.fetch_offset > 0:
            epoch, end = self.log.epoch_end(req.last_fetched_epoch)
            if epoch != req.last_fetched_epoch or end < req.fetch_offset:
                return FetchResponse(
                    self.node_id,
                    self.epoch,
                    Error.NONE,
                    req.fetch_offset,
                    high_watermark=self._served_high_watermark(),
                    diverging_epoch=epoch,
                    diverging_end_offset=end,
                    log_start_offset=self.log.start_offset,
                )
        fetcher = VoterKey(req.replica_id, req.replica_directory_id)
        if self.dynamic and req.replica_id >= 0 and req.replica_id != self.node_id:
            # Every fetcher's catch-up state, voters' too: a voter just removed keeps its
            # state as an observer (Kafka moves it over), so it can be added back at once.
            self._observer_fetched(fetcher, req.fetch_offset, now_ms)
        if self._history.latest.is_voter(fetcher) and req.replica_id != self.node_id:
            self._match[req.replica_id] = req.fetch_offset
            self._last_fetch[req.replica_id] = now_ms
            self._advance_high_watermark()
            self._note_progress(req.replica_id, req.fetch_offset, now_ms)
        entries = tuple(self.log.read(req.fetch_offset, self.timing.max_fetch_entries))
        return FetchResponse(
            self.node_id,
            self.epoch,
            Error.NONE,
            req.fetch_offset,
            high_watermark=self._served_high_watermark(),
            entries=entries,
            log_start_offset=self.log.start_offset,
        )

    def _snapshot_for(self, req: FetchRequest) -> tuple[int, int] | None:
        """The snapshot a fetcher must load before fetching on, as Kafka's leader decides:
        an empty fetcher when a snapshot exists, a fetch below the log start, at the log
        start in another epoch than the oldest snapshot's, or with a last epoch older than
        the oldest snapshot's. None: fetch from the log."""
        snapshots = self.log.snapshots
        if not snapshots:
            return None
        latest, oldest = snapshots[-1], snapshots[0]
        if req.fetch_offset == 0 and latest[0] > 0:
            return latest
        start = self.log.start_offset
        if (
            req.fetch_offset < start
            or (req.fetch_offset == start and req.last_fetched_epoch != oldest[1])
            or req.last_fetched_epoch < oldest[1]
        ):
            return latest
        return None

    def snapshot_served(self, replica_id: int, now_ms: int) -> None:
        """A voter fetched a slice of our snapshot: it follows us (check-quorum counts it,
        as Kafka's leader does), though its log end is unchanged."""
        if self.role is Role.LEADER and replica_id in self.voters and replica_id != self.node_id:
            self._last_fetch[replica_id] = now_ms

    @property
    def leader_high_watermark(self) -> int:
        """The high watermark a leader reports (fetches, DescribeQuorum): -1 until established."""
        return self._served_high_watermark()

    def _note_progress(self, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A voter's accepted fetch, for DescribeQuorum (:mod:`.progress`)."""
        progress = self.progress.get(replica_id)
        if progress is None:
            progress = self.progress[replica_id] = FetchProgress()
        progress.fetched(fetch_offset, self.log.end_offset, now_ms)

    def _served_high_watermark(self) -> int:
        """The high watermark a leader tells fetchers: -1 (unknown) until it is established
        in this epoch (past the epoch's first entry). The value kept from following the
        previous leader may be below what a voter already holds, and a follower must never
        see its high watermark go back (Kafka's voter stops with a fatal fault if it does)."""
        return self.high_watermark if self.high_watermark > self._epoch_start else -1

    def _advance_high_watermark(self) -> None:
        offsets = sorted((self._match.get(v, 0) for v in self.voters), reverse=True)
        majority_offset = offsets[self.majority() - 1]
        # Rule 3: only once the majority holds this epoch's first entry, never backwards.
        if majority_offset > self._epoch_start and majority_offset > self.high_watermark:
            self.high_watermark = majority_offset
            if self._voter_change is not None:
                self._voter_change_committed()

    def _leader_tick(self, out: Outbox, now_ms: int) -> None:
        if self._resign_requested:
            # Removed from the voter set, and that is committed: hand the quorum over.
            self._become_leader_resigned(out, now_ms)
            return
        self._expire_voter_change(now_ms)
        begin = BeginQuorumEpochRequest(self.node_id, self.epoch)
        for v in sorted(self.voters - {self.node_id}):
            if v not in self._last_fetch and now_ms - self._asked_at.get(v, -(10**12)) >= self.timing.retry_ms:
                self._asked_at[v] = now_ms
                out.add(v, replace(begin, voter_directory_id=self._directory_of(v)))
        if now_ms >= self._deadline:
            window = self.timing.fetch_timeout_ms * 3 // 2
            voters = self.voters
            heard = (self.node_id in voters) + sum(
                1 for v, t in self._last_fetch.items() if v in voters and now_ms - t < window
            )
            if heard >= self.majority():
                self._deadline = now_ms + window // 3
            else:
                # Check-quorum: cut off from a majority, stop accepting writes.
                self._become_leader_resigned(out, now_ms)

    def _become_leader_resigned(self, out: Outbox, now_ms: int) -> None:
        out.sends.extend(self.resign(now_ms).sends)

    # -- fetch, follower side

    def _maybe_fetch(self, out: Outbox, now_ms: int) -> None:
        if self.role is not Role.FOLLOWER or self.leader_id < 0 or self.snapshot_wanted is not None:
            return
        in_flight = self._fetch_sent >= 0 and now_ms - self._fetch_sent < self.timing.retry_ms
        if in_flight or now_ms < self._next_fetch:
            return
        self._fetch_sent = now_ms
        out.add(
            self.leader_id,
            FetchRequest(self.node_id, self.epoch, self.log.end_offset, self.log.last_epoch, self.directory_id),
        )

    def _on_fetch_response(self, source: int, resp: FetchResponse, out: Outbox, now_ms: int) -> None:
        if self._on_epoch_answer(source, resp.epoch, resp.leader_id, out, now_ms):
            return
        if self.role is not Role.FOLLOWER or source != self.leader_id or resp.epoch != self.epoch:
            return
        self._fetch_sent = -1
        if resp.error is not Error.NONE:
            self._next_fetch = now_ms + self.timing.fetch_interval_ms
            return
        self._has_fetched = True
        self._deadline = now_ms + self.timing.fetch_timeout_ms
        if resp.snapshot_id is not None:
            self._want_snapshot(resp.snapshot_id)
            return
        if resp.diverging_epoch >= 0 or resp.diverging_end_offset >= 0:
            # Keep what both logs hold: up to where the leader's epoch ends, and where the
            # same (or the nearest lower) epoch ends in ours; a next fetch narrows further.
            _, my_end = self.log.epoch_end(resp.diverging_epoch)
            cut = min(resp.diverging_end_offset, my_end)
            if cut < self.high_watermark:
                self.truncated_below_hw += 1
            self.log.truncate_to(cut)
            self._history.truncated(cut)
            self._next_fetch = now_ms
        elif resp.fetch_offset == self.log.end_offset:
            fresh = [e for e in resp.entries if e.offset >= self.log.end_offset]
            if fresh:
                self.log.append(fresh)
                self._voters_appended(fresh)
            self._next_fetch = now_ms if resp.entries else now_ms + self.timing.fetch_interval_ms
            # The leader accepted (fetch offset, last epoch), so our whole log is a prefix of
            # its: only now may its high watermark be ours (capped by what we hold).
            self.high_watermark = max(self.high_watermark, min(resp.high_watermark, self.log.end_offset))
        else:
            self._next_fetch = now_ms
        self._maybe_fetch(out, now_ms)

    # -- snapshots, follower side (the shell fetches the bytes with FetchSnapshot)

    def _want_snapshot(self, snapshot_id: tuple[int, int]) -> None:
        end, epoch = snapshot_id
        if end <= 0 or epoch < 0 or epoch > self.epoch:
            return  # nonsense from a peer: fetch again, the next answer may be better
        self._snapshot_wanted, self._snapshot_wanted_epoch = (end, epoch), self.epoch

    @property
    def snapshot_wanted(self) -> tuple[int, int] | None:
        """The leader's snapshot (end offset, epoch) this follower must load before it
        fetches on; None when there is none, or the epoch that named it has passed."""
        if self._snapshot_wanted is None:
            return None
        if self.role is not Role.FOLLOWER or self.epoch != self._snapshot_wanted_epoch:
            self._snapshot_wanted = None
            return None
        return self._snapshot_wanted

    def snapshot_progress(self, now_ms: int) -> None:
        """A FetchSnapshot answer came from the leader: it is alive (as a fetch answer)."""
        if self.role is Role.FOLLOWER:
            self._has_fetched = True
            self._deadline = now_ms + self.timing.fetch_timeout_ms

    def snapshot_abandoned(self, now_ms: int) -> None:
        """The download failed (an error, bad bytes): fetch again, the leader names anew."""
        self._snapshot_wanted = None
        self._next_fetch = now_ms + self.timing.fetch_interval_ms
        self._fetch_sent = -1

    def snapshot_loaded(self, end_offset: int, epoch: int, now_ms: int) -> None:
        """The shell holds the snapshot ``(end_offset, epoch)`` whole: the log starts afresh
        at its end when it is past ours (Kafka's truncate-to-latest-snapshot), its content
        counts as committed, and fetching goes on from there."""
        self.log.add_snapshot(end_offset, epoch)
        if epoch > self.log.last_epoch or (epoch == self.log.last_epoch and end_offset > self.log.end_offset):
            self.log.reset_to(end_offset, epoch)
        # A snapshot holds committed records only.
        self.high_watermark = max(self.high_watermark, end_offset)
        self.snapshots_loaded += 1
        self._snapshot_wanted = None
        self._fetch_sent = -1
        self._next_fetch = now_ms

    # ------------------------------------------------------------------ transitions

    def _election_timeout(self) -> int:
        t = self.timing.election_timeout_ms
        return t + self.rng.randrange(t)

    def _persist(self) -> None:
        self.store.write(Election(epoch=self.epoch, leader_id=self.leader_id, voted_id=self.voted_id))

    def _reset_round(self) -> None:
        self._granted = {self.node_id}
        self._rejected = set()
        self._asked_at = {}

    def _become_unattached(self, epoch: int, now_ms: int) -> None:
        self._abandon_voter_change()
        if self.leader_id >= 0:
            self._last_leader = self.leader_id
        changed = epoch != self.epoch
        self.epoch = epoch
        self.role = Role.UNATTACHED
        if changed:
            self.leader_id = -1
            self.voted_id = -1
            self._last_leader = -1
        self._persist()
        self._deadline = now_ms + self._election_timeout()

    def _become_follower(self, epoch: int, leader_id: int, now_ms: int, *, persist: bool = True) -> None:
        self._abandon_voter_change()
        if epoch != self.epoch:
            self.voted_id = -1
        self.epoch = epoch
        self.leader_id = leader_id
        self._last_leader = leader_id
        self.role = Role.FOLLOWER
        self._has_fetched = False
        self._fetch_sent = -1
        self._next_fetch = now_ms
        self._deadline = now_ms + self.timing.fetch_timeout_ms
        # A few fetches first, then the update-voter period (Kafka's FollowerState).
        self._update_voter_at = now_ms + self.timing.fetch_timeout_ms
        if persist:
            self._persist()

    def _become_prospective(self, out: Outbox, now_ms: int) -> None:
        if not self.is_voter:
            # An observer never stands for election: it looks for the leader instead.
            if self.leader_id >= 0 and self.leader_id != self.node_id:
                self._last_leader = self.leader_id
            self.role = Role.UNATTACHED
            self._deadline = now_ms + self._election_timeout()
            self._next_fetch = now_ms
            self._observer_discover(out, now_ms)
            return
        if self.leader_id >= 0 and self.leader_id != self.node_id:
            self._last_leader = self.leader_id
        elif self.leader_id == self.node_id:
            self._last_leader = -1
        self.role = Role.PROSPECTIVE
        self._reset_round()
        self._deadline = now_ms + self._election_timeout()
        if len(self._granted) >= self.majority():
            self._become_candidate(out, now_ms)
        else:
            self._ask(out, now_ms, pre_vote=True)

    def _fall_back(self, out: Outbox, now_ms: int) -> None:
        """A pre-vote lost or timed out: follow the leader we knew, or wait unattached."""
        if self._last_leader >= 0 and self._last_leader != self.node_id and self.leader_id == self._last_leader:
            self._become_follower(self.epoch, self._last_leader, now_ms, persist=False)
            self._maybe_fetch(out, now_ms)
        else:
            self.role = Role.UNATTACHED
            self._deadline = now_ms + self._election_timeout()

    def _become_candidate(self, out: Outbox, now_ms: int) -> None:
        self.epoch += 1
        self.leader_id = -1
        self.voted_id = self.node_id
        self.role = Role.CANDIDATE
        self._persist()  # Rule 1
        self._reset_round()
        self._deadline = now_ms + self._election_timeout()
        if len(self._granted) >= self.majority():
            self._become_leader(out, now_ms)
        else:
            self._ask(out, now_ms, pre_vote=False)

    def _become_leader(self, out: Outbox, now_ms: int) -> None:
        self.role = Role.LEADER
        self.leader_id = self.node_id
        self._persist()
        self.elections_won += 1
        self._epoch_start = self.log.end_offset
        payload = (
            self.start_of_epoch(self.node_id, self.voters, frozenset(self._granted))
            if self.start_of_epoch is not None
            else LEADER_CHANGE_PAYLOAD
        )
        self.log.append([Entry(self._epoch_start, self.epoch, payload, control=True)])
        if self.voter_codec is not None and not self._history.recorded:
            # The first leader of a dynamic quorum records the bootstrap voter set in the log
            # (Kafka writes it in the batch of its epoch's LeaderChangeMessage).
            self._append_voters(self._history.bootstrap)
        self._match = {self.node_id: self.log.end_offset}
        self._last_fetch = {}
        self.progress = {v: FetchProgress() for v in self.voters if v != self.node_id}
        self._observers = {}
        self._resign_requested = False
        self._asked_at = {}
        self._successors = ()
        self._deadline = now_ms + self.timing.fetch_timeout_ms * 3 // 2
        self._advance_high_watermark()
        self._leader_tick(out, now_ms)

    # ------------------------------------------------------------------ voter changes (kraft.version 1)
    #
    # AddRaftVoter / RemoveRaftVoter on the leader, following Kafka 4.4's AddVoterHandler
    # and RemoveVoterHandler. The checks, in Kafka's order:
    #
    # Rule V1: not the leader: NOT_LEADER_OR_FOLLOWER. Add without a directory id, or without
    # an endpoint on the quorum's listener (the shell says), Remove without a directory id:
    # INVALID_REQUEST.
    # Rule V2: another change not yet answered (and not timed out): REQUEST_TIMED_OUT.
    # Rule V3: the leader's high watermark not yet in its own epoch: REQUEST_TIMED_OUT.
    # Rule V4: kraft.version 0 (a static quorum): UNSUPPORTED_VERSION.
    # Rule V5: the newest voter set not yet committed: REQUEST_TIMED_OUT.
    # Rule V6: Add of a node id already voting: DUPLICATE_VOTER. Remove of a key that is not
    # a voter, or of the last voter: VOTER_NOT_FOUND.
    # Rule V7 (Add): the shell asks the new voter for its ApiVersions; no answer or an error:
    # REQUEST_TIMED_OUT; a kraft.version range without 1: INVALID_REQUEST; the new voter not
    # an observer that fetched with that directory id and reached the leader's log end:
    # REQUEST_TIMED_OUT.
    # Rule V8: the new set is appended as a VotersRecord and is in force at once; the answer
    # (NONE) waits until the high watermark passes it (Add with ack_when_committed false:
    # answered at once, but no other change starts before it commits). Not committed within
    # request_timeout_ms: REQUEST_TIMED_OUT; the leader loses its epoch first:
    # NOT_LEADER_OR_FOLLOWER.
    # Rule V9: a leader whose removal commits resigns (EndQuorumEpoch) and goes on as an observer.

    def add_voter(
        self, key: VoterKey, now_ms: int, *, has_listener: bool = True, ack_when_committed: bool = True
    ) -> VoterChangeReply:
        """Start adding ``key``. When the reply is pending the shell sends ApiVersions to the
        new voter and passes the answer to :meth:`add_voter_versions`."""
        refusal = self._voter_change_refusal(now_ms, adding=key, has_listener=has_listener)
        if refusal is not None:
            return self._reply_now(*refusal)
        self._voter_change_seq += 1
        self._voter_change = _VoterChange(
            self._voter_change_seq,
            key,
            adding=True,
            deadline=now_ms + self.timing.request_timeout_ms,
            ack_when_committed=ack_when_committed,
        )
        return VoterChangeReply(self._voter_change_seq, None, "")

    def add_voter_versions(self, change_id: int, supported: tuple[int, int] | None, now_ms: int) -> None:
        """The new voter's ApiVersions answer (its kraft.version range; None: an error or no
        answer) for change ``change_id``: Rule V7, then V8."""
        change = self._voter_change
        if change is None or change.change_id != change_id or not change.adding or change.offset >= 0:
            return  # answered already (timed out, or the leader lost its epoch)
        if supported is None:
            self._finish_voter_change(Error.REQUEST_TIMED_OUT, "the new voter did not answer ApiVersions")
            return
        if not supported[0] <= 1 <= supported[1]:
            self._finish_voter_change(
                Error.INVALID_REQUEST,
                f"voter {change.key}: kraft.version range {supported[0]}-{supported[1]} does not include 1",
            )
            return
        if not self._caught_up(change.key, now_ms):
            self._finish_voter_change(Error.REQUEST_TIMED_OUT, f"voter {change.key} is lagging behind")
            return
        voters = self._history.latest.add(change.key)
        assert voters is not None  # Rule V6 checked it, and only this change may alter the set
        change.offset = self._append_voters(voters)
        if not change.ack_when_committed:
            self.voter_change_results.append((change.change_id, Error.NONE, ""))
            change.answered = True

    def remove_voter(self, key: VoterKey, now_ms: int) -> VoterChangeReply:
        """Remove ``key``: appends the new voter set at once unless refused (Rules V1-V6)."""
        refusal = self._voter_change_refusal(now_ms, removing=key)
        if refusal is not None:
            return self._reply_now(*refusal)
        voters = self._history.latest.remove(key)
        if voters is None:
            return self._reply_now(
                Error.VOTER_NOT_FOUND, f"cannot remove voter {key} from the set of voters {self._history.latest}"
            )
        self._voter_change_seq += 1
        change = _VoterChange(
            self._voter_change_seq, key, adding=False, deadline=now_ms + self.timing.request_timeout_ms
        )
        self._voter_change = change
        change.offset = self._append_voters(voters)
        return VoterChangeReply(change.change_id, None, "")

    # UpdateRaftVoter (82) on the leader of a dynamic quorum, following Kafka 4.4's
    # UpdateVoterHandler; the shell checked the cluster id, the epoch, the directory id, an
    # endpoint on the quorum's listener and a sane version range first (voter_updates.py),
    # and answers kraft.version 0 itself. Then, in Kafka's order:
    #
    # Rule U1: not the leader: NOT_LEADER_OR_FOLLOWER. Another Add/Remove not answered yet
    # (Rule V2), or the high watermark not yet in the leader's epoch (Rule V3):
    # REQUEST_TIMED_OUT.
    # Rule U2: the newest voter set not yet committed: REQUEST_TIMED_OUT (one change at a time).
    # Rule U3: a supported kraft.version range without 1, or no endpoint on the quorum's
    # listener: INVALID_REQUEST.
    # Rule U4: the key (node id and directory id) not a voter: VOTER_NOT_FOUND.
    # Rule U5: the same voter set is appended again as a VotersRecord naming the voter's new
    # endpoints and range (``record`` tells the shell's codec just before), and the answer is
    # NONE at once: Kafka's leader does not wait for that record's commit (Rule U2 holds the
    # next change back until it commits).

    def update_voter(
        self,
        key: VoterKey,
        supported: tuple[int, int],
        now_ms: int,
        *,
        has_listener: bool = True,
        record: Callable[[], None] | None = None,
    ) -> VoterChangeReply:
        """Record voter ``key``'s new endpoints and kraft.version range (Rules U1-U5)."""
        if self.role is not Role.LEADER:
            return self._reply_now(Error.NOT_LEADER_OR_FOLLOWER, "")  # Rule U1
        self._expire_voter_change(now_ms)
        if self._voter_change is not None:
            return self._reply_now(Error.REQUEST_TIMED_OUT, "another voter change is not finished yet")
        if self._served_high_watermark() < 0:
            return self._reply_now(Error.REQUEST_TIMED_OUT, "the leader has not committed an entry of its epoch yet")
        if not self.dynamic:
            return self._reply_now(Error.UNSUPPORTED_VERSION, "updating a voter in the log needs kraft.version 1")
        if not self._history.recorded or self._history.latest_offset >= self.high_watermark:
            return self._reply_now(  # Rule U2
                Error.REQUEST_TIMED_OUT,
                f"the voter set at offset {self._history.latest_offset} is not committed yet "
                f"(high watermark {self.high_watermark})",
            )
        if not supported[0] <= DYNAMIC_KRAFT_VERSION <= supported[1]:
            return self._reply_now(  # Rule U3
                Error.INVALID_REQUEST,
                f"voter {key}: kraft.version range {supported[0]}-{supported[1]} does not include "
                f"{DYNAMIC_KRAFT_VERSION}",
            )
        if not has_listener:
            return self._reply_now(Error.INVALID_REQUEST, "the voter has no endpoint on the quorum's listener")
        voters = self._history.latest
        if key.directory_id is None or not voters.is_voter(key):
            return self._reply_now(Error.VOTER_NOT_FOUND, f"{key} is not in the voter set {voters}")  # Rule U4
        if record is not None:
            record()
        self._append_voters(voters)  # Rule U5
        return self._reply_now(Error.NONE, "")

    def update_voter_due(self, now_ms: int) -> bool:
        """Kafka's update-voter period on a follower voter of a dynamic quorum: True once a
        fetch timeout has passed since it began following (or since the last True), the time
        for the shell to compare its own endpoints with its entry in :attr:`voter_set` and
        send UpdateRaftVoter to the leader when they differ."""
        if self.role is not Role.FOLLOWER or not self.dynamic or not self.is_voter:
            return False
        if now_ms < self._update_voter_at:
            return False
        self._update_voter_at = now_ms + self.timing.fetch_timeout_ms
        return True

    @property
    def voter_change_pending(self) -> bool:
        return self._voter_change is not None

    def _voter_change_refusal(
        self,
        now_ms: int,
        *,
        adding: VoterKey | None = None,
        removing: VoterKey | None = None,
        has_listener: bool = True,
    ) -> tuple[Error, str] | None:
        if self.role is not Role.LEADER:
            return Error.NOT_LEADER_OR_FOLLOWER, ""  # Rule V1
        if adding is not None:
            if adding.directory_id is None or adding.directory_id.int == 0:
                return Error.INVALID_REQUEST, "the new voter has no directory id"
            if not has_listener:
                return Error.INVALID_REQUEST, "the new voter has no endpoint on the quorum's listener"
        if removing is not None and removing.directory_id is None:
            return Error.INVALID_REQUEST, "the voter to remove has no directory id"
        kind = "adding" if adding is not None else "removing"
        self._expire_voter_change(now_ms)
        if self._voter_change is not None:
            return Error.REQUEST_TIMED_OUT, "another voter change is not finished yet"  # Rule V2
        if self._served_high_watermark() < 0:
            return Error.REQUEST_TIMED_OUT, "the leader has not committed an entry of its epoch yet"  # Rule V3
        if not self.dynamic:
            return Error.UNSUPPORTED_VERSION, f"{kind} a voter needs kraft.version 1 (this quorum is static)"  # V4
        if self._history.latest_offset >= self.high_watermark:
            return Error.REQUEST_TIMED_OUT, (
                f"the voter set at offset {self._history.latest_offset} is not committed yet "
                f"(high watermark {self.high_watermark})"
            )  # Rule V5
        if adding is not None and adding.node_id in self.voters:
            return Error.DUPLICATE_VOTER, f"node {adding.node_id} is already in the voter set {self._history.latest}"
        return None

    def _reply_now(self, error: Error, message: str) -> VoterChangeReply:
        self._voter_change_seq += 1
        self.voter_change_results.append((self._voter_change_seq, error, message))
        return VoterChangeReply(self._voter_change_seq, error, message)

    def _finish_voter_change(self, error: Error, message: str) -> None:
        change, self._voter_change = self._voter_change, None
        if change is not None and not change.answered:
            self.voter_change_results.append((change.change_id, error, message))

    def _voter_change_committed(self) -> None:
        change = self._voter_change
        if change is None or change.offset < 0 or self.high_watermark <= change.offset:
            return
        self._finish_voter_change(Error.NONE, "")
        if not change.adding and not self._history.latest.is_voter(self.key):
            self._resign_requested = True  # Rule V9, done on the next tick

    def _expire_voter_change(self, now_ms: int) -> None:
        change = self._voter_change
        if change is not None and now_ms >= change.deadline:
            self._finish_voter_change(Error.REQUEST_TIMED_OUT, "the voter change did not commit in time")

    def _abandon_voter_change(self) -> None:
        if self._voter_change is not None:
            self._finish_voter_change(Error.NOT_LEADER_OR_FOLLOWER, "the leader lost its epoch")

    def _append_voters(self, voters: VoterSet) -> int:
        assert self.voter_codec is not None
        offset = self.log.end_offset
        entry = self.voter_codec.voters_entry(offset, self.epoch, voters)
        self.log.append([entry])
        self._history.appended(offset, voters)
        self._match[self.node_id] = self.log.end_offset
        self._advance_high_watermark()
        return offset

    # -- the voter set in the log, and observers

    def _voters_scan(self, log: ReplicaLog) -> None:
        """Rebuild the voter set history from a log opened at start (a restart)."""
        offset = 0
        while offset < log.end_offset:
            batch = log.read(offset, 1000)
            if not batch:
                break
            self._voters_appended(batch)
            offset = batch[-1].next_offset

    def _voters_appended(self, entries: Iterable[Entry]) -> None:
        codec = self.voter_codec
        if codec is None:
            return
        for e in entries:
            if e.control:
                voters = codec.voters_in(e)
                if voters is not None:
                    self._history.appended(e.offset, voters)

    def _directory_of(self, node_id: int) -> uuid.UUID | None:
        key = self._history.latest.key_of(node_id)
        return None if key is None else key.directory_id

    def _meant_for_me(self, directory_id: uuid.UUID | None) -> bool:
        """Kafka's voter key check on Vote and BeginQuorumEpoch (INVALID_VOTER_KEY otherwise)."""
        return directory_id is None or self.directory_id is None or directory_id == self.directory_id

    def _observer_discover(self, out: Outbox, now_ms: int) -> None:
        """An observer with no leader asks the voters it knows (or the bootstrap servers), one
        at a time: any of them answers with the epoch and the leader."""
        if now_ms < self._next_fetch:
            return
        peers = sorted((self.voters | set(self.bootstrap_peers)) - {self.node_id})
        if not peers:
            return
        peer = peers[self._peer_turn % len(peers)]
        self._peer_turn += 1
        self._next_fetch = now_ms + self.timing.retry_ms
        out.add(
            peer,
            FetchRequest(self.node_id, self.epoch, self.log.end_offset, self.log.last_epoch, self.directory_id),
        )

    def _observer_fetched(self, key: VoterKey, fetch_offset: int, now_ms: int) -> None:
        """Kafka's ReplicaState.updateFollowerState for an observer: caught up when a fetch
        reaches the leader's log end, or the log end the leader had at its previous fetch."""
        last_fetch, caught_up, last_end = self._observers.get(key, (-1, -1, -1))
        end = self.log.end_offset
        if fetch_offset >= end:
            caught_up = max(caught_up, now_ms)
        elif last_end > 0 and fetch_offset >= last_end:
            caught_up = max(caught_up, last_fetch)
        self._observers[key] = (max(last_fetch, now_ms), caught_up, end)

    def _caught_up(self, key: VoterKey, now_ms: int) -> bool:
        last_fetch, caught_up, _ = self._observers.get(key, (-1, -1, -1))
        return caught_up >= 0 and last_fetch >= 0 and last_fetch > now_ms - _CAUGHT_UP_WINDOW_MS


#: An observer that fetched within this long and once reached the leader's log end may be
#: added as a voter (Kafka's LeaderState.isReplicaCaughtUp: one hour).
_CAUGHT_UP_WINDOW_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class VoterChangeReply:
    """What :meth:`RaftNode.add_voter` / :meth:`RaftNode.remove_voter` say at once:
    ``error`` None means pending (the answer comes in ``voter_change_results``)."""

    change_id: int
    error: Error | None
    message: str

    @property
    def pending(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class _VoterChange:
    change_id: int
    key: VoterKey
    adding: bool
    deadline: int
    ack_when_committed: bool = True
    offset: int = -1  # the VotersRecord's offset once appended
    answered: bool = False


class NotLeaderError(Exception):
    """A write offered to a voter that does not lead; names who does, if known."""

    def __init__(self, node_id: int, leader_id: int, epoch: int) -> None:
        super().__init__(f"node {node_id} is not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch
