"""Voter sets in the metadata log as Kafka writes them: a control batch with a VotersRecord.

The raft node (node.py) asks its :class:`~.voter_set.VoterCodec` for the entry that records
a new voter set, and asks it which entries record one. This codec makes and reads Kafka's
form: one control record batch holding a ``KRaftVersionRecord`` (kraft.version 1) and a
``VotersRecord`` (version 0) naming every voter's id, directory id, endpoints and supported
kraft.version range, the batch Kafka 4.4's leader writes when it records a voter set
(its log reader, ``KRaftControlRecordStateMachine``, takes the newest of each). An
UpdateRaftVoter changes one voter's endpoint and range (:meth:`VotersRecordCodec.update`)
before the leader appends the set again.

The endpoints are the shell's: the codec holds a map node id -> (listener, host, port) that
the shell fills from its configuration and from AddRaftVoter requests, and that it learns
from every VotersRecord it reads (a voter finds a newly added peer this way).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from kraft_jbod.controller.raft.messages import Entry
from kraft_jbod.controller.raft.voter_set import VoterKey, VoterSet
from kraft_jbod.errors import DecodeError
from kraft_jbod.messages.k_raft_version_record import KRaftVersionRecord
from kraft_jbod.messages.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kraft_jbod.wire.records import (
    CONTROL_MASK,
    ControlRecordKey,
    ControlRecordType,
    Record,
    RecordBatch,
    read_control_record_key,
    read_record_batch,
    write_control_record_key,
    write_record_batch,
)

_NO_DIRECTORY = uuid.UUID(int=0)
#: The kraft.version range a voter of ours supports, and what a VotersRecord names by default.
DEFAULT_SUPPORTED = (0, 1)


def _control(i: int, ctype: ControlRecordType, value: bytes) -> Record:
    key = bytearray()
    write_control_record_key(key, ControlRecordKey(0, int(ctype)))
    return Record(offset_delta=i, key=bytes(key), value=value)


class VotersRecordCodec:
    """The :class:`~.voter_set.VoterCodec` of a voter that writes Kafka's record batches."""

    def __init__(
        self,
        endpoints: dict[int, tuple[str, str, int]],
        *,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.endpoints = endpoints
        self.clock_ms = clock_ms
        # Each voter's supported kraft.version range as last recorded or updated (0-1 unless
        # an UpdateRaftVoter said otherwise).
        self.supported: dict[int, tuple[int, int]] = {}
        #: Each voter's entry in the newest VotersRecord read: (endpoint or None, range), what a
        #: voter compares with its own listener to know whether to send UpdateRaftVoter.
        self.recorded: dict[int, tuple[tuple[str, str, int] | None, tuple[int, int]]] = {}

    def update(self, node_id: int, endpoint: tuple[str, str, int], supported: tuple[int, int]) -> None:
        """UpdateRaftVoter on the leader: the next VotersRecord names these for ``node_id``."""
        self.endpoints[node_id] = endpoint
        self.supported[node_id] = supported

    def record(self, voters: VoterSet) -> VotersRecord:
        return VotersRecord(
            version=0,
            voters=[
                Voter(
                    voter_id=k.node_id,
                    voter_directory_id=k.directory_id or _NO_DIRECTORY,
                    endpoints=[Endpoint(name=n, host=h, port=p) for n, h, p in [self.endpoints[k.node_id]]]
                    if k.node_id in self.endpoints
                    else [],
                    k_raft_version_feature=KRaftVersionFeature(
                        min_supported_version=self.supported.get(k.node_id, DEFAULT_SUPPORTED)[0],
                        max_supported_version=self.supported.get(k.node_id, DEFAULT_SUPPORTED)[1],
                    ),
                )
                for k in voters
            ],
        )

    def voters_entry(self, offset: int, epoch: int, voters: VoterSet) -> Entry:
        records = [
            _control(0, ControlRecordType.KRAFT_VERSION, KRaftVersionRecord(version=0, k_raft_version=1).encode(0)),
            _control(1, ControlRecordType.KRAFT_VOTERS, self.record(voters).encode(0)),
        ]
        batch = RecordBatch.of(
            records,
            base_offset=offset,
            base_timestamp=self.clock_ms(),
            partition_leader_epoch=epoch,
            attributes=CONTROL_MASK,
        )
        raw = bytearray()
        write_record_batch(raw, batch)
        return Entry(offset, epoch, b"", control=True, count=len(records), raw=bytes(raw))

    def voters_in(self, entry: Entry) -> VoterSet | None:
        """The newest VotersRecord of ``entry``'s batch (None: it holds none, or one that does
        not decode: a peer's bad bytes never stop the voter)."""
        if not entry.control or entry.raw is None:
            return None
        try:
            batch, _ = read_record_batch(entry.raw, 0)
            found: VotersRecord | None = None
            for rec in batch.records:
                if rec.key is None or rec.value is None or len(rec.value) < 2:
                    continue
                key, _ = read_control_record_key(rec.key, 0)
                if key.type == ControlRecordType.KRAFT_VOTERS:
                    found = VotersRecord.decode(rec.value, int.from_bytes(rec.value[:2], "big", signed=True))
        except (DecodeError, ValueError, IndexError):
            return None
        if found is None or not found.voters:
            return None
        recorded: dict[int, tuple[tuple[str, str, int] | None, tuple[int, int]]] = {}
        for v in found.voters:
            endpoint = None
            if v.endpoints:
                e = v.endpoints[0]
                endpoint = self.endpoints[v.voter_id] = (e.name, e.host, e.port)
            feature = v.k_raft_version_feature
            supported = (feature.min_supported_version, feature.max_supported_version)
            self.supported[v.voter_id] = supported
            recorded[v.voter_id] = (endpoint, supported)
        self.recorded = recorded
        try:
            return VoterSet.of(
                VoterKey(v.voter_id, None if v.voter_directory_id == _NO_DIRECTORY else v.voter_directory_id)
                for v in found.voters
            )
        except ValueError:
            return None
