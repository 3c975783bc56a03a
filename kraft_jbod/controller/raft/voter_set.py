"""The voter set of a dynamic quorum (kraft.version 1, KIP-853) as the raft node sees it.

Pure: no I/O. At kraft.version 1 a voter is named by its node id AND the directory id of
its metadata log (:class:`VoterKey`, Kafka's ``ReplicaKey``), so a controller whose disk was
wiped and reformatted comes back as a different replica, not as the voter it was.

Rules (Kafka 4.4's ``VoterSet``, ``VoterSetHistory`` and ``KRaftControlRecordStateMachine``):

Rule 1: the set in force is the one in the newest VotersRecord of the log, committed or
not: it takes effect when it is appended, and a truncation that removes it brings back the
one before it. With no VotersRecord in the log, the bootstrap set (``--initial-controllers``
or ``--standalone``) is in force (:class:`VoterSetHistory`).
Rule 2: a set never loses its last voter, and never holds one node id twice
(:meth:`VoterSet.add` / :meth:`VoterSet.remove` say None to such a change).
Rule 3: a key with no directory id (a static voter, or a request that left it out)
matches a voter by node id alone; two directory ids must be equal to match.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kraft_jbod.controller.raft.messages import Entry


@dataclass(frozen=True, slots=True, order=True)
class VoterKey:
    """One replica of the metadata log: node id and log directory id (None: unknown)."""

    node_id: int
    directory_id: uuid.UUID | None = None

    def matches(self, other: VoterKey) -> bool:
        """Rule 3: the same node id, and the same directory id where both are known."""
        if self.node_id != other.node_id:
            return False
        return self.directory_id is None or other.directory_id is None or self.directory_id == other.directory_id

    def __str__(self) -> str:
        return f"{self.node_id}" if self.directory_id is None else f"{self.node_id}:{self.directory_id}"


@dataclass(frozen=True, slots=True)
class VoterSet:
    """An immutable set of voters, at most one per node id (Rule 2)."""

    keys: frozenset[VoterKey]

    @classmethod
    def of(cls, keys: Iterable[VoterKey]) -> VoterSet:
        keys = tuple(keys)
        ids = [k.node_id for k in keys]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a voter set names node {sorted(i for i in ids if ids.count(i) > 1)[0]} twice")
        if not keys:
            raise ValueError("a voter set needs at least one voter")
        return cls(frozenset(keys))

    @classmethod
    def static(cls, ids: Iterable[int]) -> VoterSet:
        return cls.of(VoterKey(i) for i in ids)

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(k.node_id for k in self.keys)

    def key_of(self, node_id: int) -> VoterKey | None:
        return next((k for k in self.keys if k.node_id == node_id), None)

    def is_voter(self, key: VoterKey) -> bool:
        """Rule 3: ``key`` names one of the voters."""
        mine = self.key_of(key.node_id)
        return mine is not None and mine.matches(key)

    def add(self, key: VoterKey) -> VoterSet | None:
        """The set with ``key`` added; None when its node id is already a voter (Rule 2)."""
        if self.key_of(key.node_id) is not None:
            return None
        return VoterSet(self.keys | {key})

    def remove(self, key: VoterKey) -> VoterSet | None:
        """The set without ``key``; None when it is not a voter or is the last one (Rule 2)."""
        mine = self.key_of(key.node_id)
        if mine is None or not mine.matches(key) or len(self.keys) == 1:
            return None
        return VoterSet(self.keys - {mine})

    def __iter__(self) -> Iterator[VoterKey]:
        return iter(sorted(self.keys))

    def __len__(self) -> int:
        return len(self.keys)

    def __str__(self) -> str:
        return "{" + ", ".join(str(k) for k in self) + "}"


class VoterCodec(Protocol):
    """How voter sets travel in the log: the shell's VotersRecord control batch."""

    def voters_entry(self, offset: int, epoch: int, voters: VoterSet) -> Entry:
        """The control entry (one batch) recording ``voters`` at ``offset`` in ``epoch``."""
        ...

    def voters_in(self, entry: Entry) -> VoterSet | None:
        """The voter set ``entry`` records, or None when it records none."""
        ...


@dataclass(slots=True)
class VoterSetHistory:
    """Rule 1: the voter sets recorded in the log by offset, over a bootstrap set."""

    bootstrap: VoterSet
    entries: list[tuple[int, VoterSet]] = field(default_factory=list)  # (offset, set), ascending

    @property
    def latest(self) -> VoterSet:
        return self.entries[-1][1] if self.entries else self.bootstrap

    @property
    def latest_offset(self) -> int:
        """The offset of the newest VotersRecord; -1 for the bootstrap set."""
        return self.entries[-1][0] if self.entries else -1

    @property
    def recorded(self) -> bool:
        """A voter set is in the log (Kafka's leader writes the bootstrap set when not)."""
        return bool(self.entries)

    def committed(self, high_watermark: int) -> VoterSet:
        """The newest set below ``high_watermark``."""
        for offset, voters in reversed(self.entries):
            if offset < high_watermark:
                return voters
        return self.bootstrap

    def appended(self, offset: int, voters: VoterSet) -> None:
        if self.entries and offset <= self.entries[-1][0]:
            raise ValueError(f"voter set at {offset} is not past the last at {self.entries[-1][0]}")
        self.entries.append((offset, voters))

    def truncated(self, end_offset: int) -> None:
        """The log was cut to ``end_offset``: sets recorded at or past it are gone."""
        while self.entries and self.entries[-1][0] >= end_offset:
            self.entries.pop()
