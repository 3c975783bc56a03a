"""The observer side of KRaft metadata replication, sans-I/O: Fetch requests out, records in.

A broker fetches ``__cluster_metadata`` partition 0 from the raft leader as an observer.
:class:`MetadataFollower` builds each Fetch and digests each response; the shell only
moves bytes. It keeps the fetched log in memory (offset, record, version) with the epoch
cache built from each batch's PartitionLeaderEpoch, and hands records to the image only
once they are below the high watermark, as Kafka's metadata loader does.

Rules:

Rule 1: a response with an epoch below ours is ignored; FENCED_LEADER_EPOCH (or any
partition answer naming a newer leader epoch) moves us to that leader and epoch; other
errors mean back off and retry.
Rule 2: batches must start at or before our log end and continue it without gaps,
carry magic 2 and a valid CRC-32C, and never lower the epoch; a batch that breaks any of
this is a :class:`~kraft_jbod.errors.DecodeError` and nothing of that response is kept.
Rule 3: DivergingEpoch truncates our log to its end offset (and drops the epochs after
it); truncating below what was already published is fatal, as in Kafka.
Rule 4: HW = min(log end, leader HW); records below it are published, in order, once.
Rule 5: the quorum is learnt as Kafka's observer learns it: the leader's id and epoch from
each answer, its endpoints from the answer's NodeEndpoints (Fetch v17), and at
kraft.version 1 the voter set from the log's KRaftVersionRecord and VotersRecord control
records (the last one fetched wins; a truncation below it forgets it).
Rule 6: a partition answer naming a SnapshotId (our fetch offset is below the leader's log
start) starts a snapshot download (:mod:`~kraft_jbod.broker.snapshots`): until it is
whole the next request is a FetchSnapshot (:meth:`build_snapshot_request`), not a Fetch.
A whole snapshot replaces the log as Kafka's ``truncateToLatestSnapshot`` does: nothing
fetched is kept, the log ends at the snapshot's end offset, the last fetched epoch is the
snapshot's epoch, the high watermark and the published offset move to its end, and the
quorum records come from the snapshot. Kafka refuses a snapshot that is not ahead of its
log (a newer epoch, or the same epoch and a larger end offset); so do we.
Published records are not kept: they are in the image, and truncating below them is fatal.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from kraft_jbod import codec
from kraft_jbod.broker.snapshots import DEFAULT_SLICE_BYTES, LoadedSnapshot, SnapshotDownload, parse_snapshot
from kraft_jbod.errors import DecodeError, KraftJbodError
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ReplicaState
from kraft_jbod.messages.fetch_response import FetchResponse
from kraft_jbod.messages.fetch_snapshot_request import FetchSnapshotRequest, TopicSnapshot
from kraft_jbod.messages.fetch_snapshot_request import PartitionSnapshot as SnapshotPartition
from kraft_jbod.messages.fetch_snapshot_request import SnapshotId as RequestSnapshotId
from kraft_jbod.messages.fetch_snapshot_response import FetchSnapshotResponse, LeaderIdAndEpoch
from kraft_jbod.messages.fetch_snapshot_response import PartitionSnapshot as SnapshotPartitionResponse
from kraft_jbod.messages.k_raft_version_record import KRaftVersionRecord
from kraft_jbod.messages.voters_record import VotersRecord
from kraft_jbod.wire.constants import METADATA_TOPIC, METADATA_TOPIC_ID
from kraft_jbod.wire.records import ControlRecordType, RecordBatch, iter_records, read_control_record_key

MAX_WAIT_MS: Final = 500
MAX_BYTES: Final = 8 * 1024 * 1024


class FollowerFatal(KraftJbodError):
    """The leader asked for something a follower must never do (truncate below its HW)."""


@dataclass
class FetchResult:
    """What one response did: records newly published, and whether to back off."""

    published: list[tuple[int, Any, int]] = field(default_factory=list)
    error_code: int = 0
    new_leader: bool = False
    truncated_to: int | None = None
    batches: int = 0
    # Rule 6: a Fetch answer that started a download, and a download that completed.
    snapshot_requested: tuple[int, int] | None = None
    snapshot: LoadedSnapshot | None = None
    whole: SnapshotDownload | None = None  # a finished download, not yet decoded


class MetadataFollower:
    def __init__(
        self,
        *,
        cluster_id: str,
        node_id: int,
        directory_id: uuid.UUID | None = None,
        snapshot_slice_bytes: int = DEFAULT_SLICE_BYTES,
    ) -> None:
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.directory_id = directory_id
        self.leader_id = -1
        self.epoch = 0
        self.records: list[tuple[int, Any, int]] = []  # data records, by offset
        self.end_offset = 0
        self.epochs: list[tuple[int, int]] = []  # (epoch, first offset)
        self.high_watermark = -1
        self._serving_epoch = -1  # the epoch whose leader answered with a known high watermark
        self.published_offset = -1  # last offset handed out
        self.control_records = 0
        self.batches_decoded = 0
        self._next_publish = 0  # index into records of the first unpublished one
        # Rule 5: (offset, kraft.version) and (offset, VotersRecord) fetched, newest last.
        self.kraft_versions: list[tuple[int, int]] = []
        self.voter_sets: list[tuple[int, VotersRecord]] = []
        self.leader_endpoints: list[tuple[str, int]] = []  # from NodeEndpoints, for leader_id
        # Rule 6: the download under way, the snapshot our log starts from, and counters.
        self.snapshot_slice_bytes = snapshot_slice_bytes
        self.download: SnapshotDownload | None = None
        self.log_start: tuple[int, int] | None = None  # (end offset, epoch) of the loaded snapshot
        self.snapshots_loaded = 0
        self.snapshot_restarts = 0

    @property
    def kraft_version(self) -> int:
        return self.kraft_versions[-1][1] if self.kraft_versions else 0

    @property
    def voters(self) -> VotersRecord | None:
        return self.voter_sets[-1][1] if self.voter_sets else None

    def leader_address(self, listener: str | None) -> tuple[str, int] | None:
        """Where the leader is: its VotersRecord endpoint on ``listener`` (any listener when
        None), else the NodeEndpoints of the last answer; None while unknown."""
        if self.leader_id < 0:
            return None
        voters = self.voters
        if voters is not None:
            for v in voters.voters:
                if v.voter_id == self.leader_id:
                    for e in v.endpoints:
                        if listener is None or e.name == listener:
                            return e.host, e.port
        return self.leader_endpoints[0] if self.leader_endpoints else None

    @property
    def last_fetched_epoch(self) -> int:
        if self.epochs:
            return self.epochs[-1][0]
        return self.log_start[1] if self.log_start is not None else 0

    def build_request(self, version: int) -> FetchRequest:
        """The Fetch a KRaft observer sends (protocol-notes §8.2), at ``version`` (>= 13)."""
        part = FetchPartition(
            partition=0,
            current_leader_epoch=self.epoch,
            fetch_offset=self.end_offset,
            last_fetched_epoch=self.last_fetched_epoch,
            log_start_offset=-1,
            partition_max_bytes=0,
        )
        if version >= 17 and self.directory_id is not None:
            part.replica_directory_id = self.directory_id
        req = FetchRequest(
            cluster_id=self.cluster_id,
            max_wait_ms=MAX_WAIT_MS,
            min_bytes=0,
            max_bytes=MAX_BYTES,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[FetchTopic(topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=[part])],
            rack_id="",
        )
        if version >= 15:
            req.replica_state = ReplicaState(replica_id=self.node_id, replica_epoch=-1)
        else:
            req.replica_id = self.node_id
        return req

    def leader_serving(self) -> bool:
        """True once the current leader has answered a fetch with a known high watermark: a
        raft leader tells none (-1) until its epoch's first batch is committed, and Kafka's
        controller activates only then (it answers NOT_CONTROLLER, logging an error, before).
        Independent of how far behind this follower is."""
        return self._serving_epoch == self.epoch

    def on_response(self, resp: FetchResponse) -> FetchResult:
        """Digest one response (module Rules 1-4).

        Raises:
            DecodeError: the records break Rule 2 (nothing of them is kept).
            FollowerFatal: a truncation below the published offset.
        """
        out = FetchResult(error_code=resp.error_code)
        if resp.error_code != 0:
            return out
        if len(resp.responses) != 1 or len(resp.responses[0].partitions) != 1:
            raise DecodeError("Fetch response without exactly one metadata partition")
        p = resp.responses[0].partitions[0]
        leader = p.current_leader
        if leader.leader_epoch > self.epoch and leader.leader_id >= 0:
            self.epoch, self.leader_id = leader.leader_epoch, leader.leader_id
            out.new_leader = True
        elif 0 <= leader.leader_epoch < self.epoch:
            return out  # Rule 1: stale answer
        elif leader.leader_id >= 0:
            self.leader_id = leader.leader_id
        ends = [(n.host, n.port) for n in (resp.node_endpoints or ()) if n.node_id == self.leader_id]
        if ends:
            self.leader_endpoints = ends
        out.error_code = p.error_code
        if p.error_code != 0:
            return out
        if p.diverging_epoch.epoch >= 0 or p.diverging_epoch.end_offset >= 0:
            self._truncate(max(0, p.diverging_epoch.end_offset))
            out.truncated_to = self.end_offset
            return out
        sid = p.snapshot_id
        if sid.end_offset >= 0 or sid.epoch >= 0:
            if sid.end_offset < 0 or sid.epoch < 0:
                raise DecodeError(f"Fetch answered an invalid SnapshotId ({sid.end_offset}, {sid.epoch})")
            self.download = SnapshotDownload(sid.end_offset, sid.epoch)
            out.snapshot_requested = (sid.end_offset, sid.epoch)
            return out
        if p.records:
            out.batches = self._append(p.records)
        if p.high_watermark >= 0:
            self.high_watermark = min(self.end_offset, p.high_watermark)
            self._serving_epoch = self.epoch
        out.published = self._publish()
        return out

    def build_snapshot_request(self, version: int) -> FetchSnapshotRequest:
        """The FetchSnapshot for the next slice of the download under way (Rule 6)."""
        d = self.download
        assert d is not None, "no snapshot download under way"
        part = SnapshotPartition(
            partition=0,
            current_leader_epoch=self.epoch,
            snapshot_id=RequestSnapshotId(end_offset=d.end_offset, epoch=d.epoch),
            position=d.position,
        )
        if version >= 1 and self.directory_id is not None:
            part.replica_directory_id = self.directory_id
        return FetchSnapshotRequest(
            cluster_id=self.cluster_id,
            replica_id=self.node_id,
            max_bytes=self.snapshot_slice_bytes,
            topics=[TopicSnapshot(name=METADATA_TOPIC, partitions=[part])],
        )

    def on_snapshot_response(self, resp: FetchSnapshotResponse, *, parse: bool = True) -> FetchResult:
        """Digest one FetchSnapshot answer (Rule 6, :mod:`~kraft_jbod.broker.snapshots`).

        With ``parse`` a whole snapshot is decoded and installed here (``snapshot`` in the
        result); without, the whole download is handed back (``whole``) for the caller to
        decode elsewhere (a worker thread) and :meth:`install`.

        Raises:
            DecodeError: the answer or the finished snapshot is malformed; the download is
                dropped and the next request is a Fetch again.
        """
        out = FetchResult(error_code=resp.error_code)
        if resp.error_code != 0 or self.download is None:
            return out
        p = self._snapshot_partition(resp)
        if not self._follow_snapshot_leader(p.current_leader, out):
            return out
        ends = [(n.host, n.port) for n in (resp.node_endpoints or ()) if n.node_id == self.leader_id]
        if ends:
            self.leader_endpoints = ends
        out.error_code = p.error_code
        if p.error_code == ErrorCode.SNAPSHOT_NOT_FOUND or p.snapshot_id.end_offset < 0 or p.snapshot_id.epoch < 0:
            self.download = None  # deleted meanwhile: a Fetch learns the newer one
            self.snapshot_restarts += 1
            out.error_code = 0
            return out
        if p.error_code != 0:
            return out
        d = self.download
        try:
            done = d.on_slice(p)
        except DecodeError:
            self.download = None
            raise
        if done:
            self.download = None
            self._finish_download(d, out, parse=parse)
        return out

    def _snapshot_partition(self, resp: FetchSnapshotResponse) -> SnapshotPartitionResponse:
        """The one metadata partition of a FetchSnapshot answer; anything else drops the
        download and raises DecodeError."""
        if (
            len(resp.topics) != 1
            or resp.topics[0].name != METADATA_TOPIC
            or len(resp.topics[0].partitions) != 1
            or resp.topics[0].partitions[0].index != 0
        ):
            self.download = None
            raise DecodeError("FetchSnapshot response without exactly one metadata partition")
        return resp.topics[0].partitions[0]

    def _follow_snapshot_leader(self, leader: LeaderIdAndEpoch, out: FetchResult) -> bool:
        """Take the leader a FetchSnapshot answer names; False when the answer goes no
        further: a new epoch (the download starts over) or a stale one (Rule 1)."""
        if leader.leader_epoch > self.epoch and leader.leader_id >= 0:
            # A new epoch is a new follower state in Kafka: the download starts over.
            self.epoch, self.leader_id = leader.leader_epoch, leader.leader_id
            out.new_leader = True
            self.download = None
            return False
        if 0 <= leader.leader_epoch < self.epoch:
            return False  # Rule 1: stale answer
        if leader.leader_id >= 0:
            self.leader_id = leader.leader_id
        return True

    def _finish_download(self, d: SnapshotDownload, out: FetchResult, *, parse: bool) -> None:
        """A whole snapshot arrived: check it is ahead of our log, then install it (with
        ``parse``) or hand it back in ``out.whole``."""
        ahead = d.epoch > self.last_fetched_epoch or (
            d.epoch == self.last_fetched_epoch and d.end_offset > self.end_offset
        )
        if not ahead:
            raise DecodeError(
                f"snapshot ({d.end_offset}, {d.epoch}) is not ahead of our log "
                f"(end offset {self.end_offset}, last fetched epoch {self.last_fetched_epoch})"
            )
        if not parse:
            out.whole = d
            return
        out.snapshot = self.install(parse_snapshot(d.data, d.end_offset, d.epoch))

    def install(self, snap: LoadedSnapshot) -> LoadedSnapshot:
        """Replace the log by the snapshot (Kafka's truncateToLatestSnapshot, Rule 6)."""
        last = snap.end_offset - 1
        self.records = []
        self._next_publish = 0
        self.epochs = []
        self.log_start = (snap.end_offset, snap.epoch)
        self.end_offset = snap.end_offset
        self.kraft_versions = [(last, snap.kraft_version)] if snap.kraft_version is not None else []
        self.voter_sets = [(last, snap.voters)] if snap.voters is not None else []
        self.high_watermark = snap.end_offset
        self.published_offset = last
        self.snapshots_loaded += 1
        return snap

    def _append(self, data: bytes) -> int:
        new: list[tuple[int, Any, int]] = []
        epochs = list(self.epochs)
        end = self.end_offset
        count = 0
        control = 0
        kraft: list[tuple[int, int]] = []
        voter_sets: list[tuple[int, VotersRecord]] = []
        for entry in iter_records(data):
            if not isinstance(entry, RecordBatch):
                # a partial batch at the end of a size-limited read is normal; legacy is not
                if type(entry).__name__ == "TruncatedBatch":
                    break
                raise DecodeError("legacy (magic 0/1) message in the metadata log")
            batch = entry
            if batch.last_offset < end:
                continue  # already held
            if batch.base_offset > end:
                raise DecodeError(f"batch at offset {batch.base_offset} leaves a gap after {end}")
            epoch = batch.partition_leader_epoch
            if epochs and epoch < epochs[-1][0]:
                raise DecodeError(f"batch epoch {epoch} below epoch {epochs[-1][0]}")
            if epoch > self.epoch:
                raise DecodeError(f"batch epoch {epoch} above the leader epoch {self.epoch}")
            for rec in batch.records:
                offset = batch.base_offset + rec.offset_delta
                if offset < end:
                    continue
                if offset != end:
                    raise DecodeError(f"record offset {offset} where {end} was expected")
                if not epochs or epochs[-1][0] != epoch:
                    epochs.append((epoch, offset))
                if batch.is_control:
                    control += 1
                    self._control(offset, rec.key, rec.value or b"", kraft, voter_sets)
                else:
                    record, version = codec.decode_metadata_record(rec.value or b"")
                    new.append((offset, record, version))
                end += 1
            count += 1
        self.records.extend(new)
        self.kraft_versions.extend(kraft)
        self.voter_sets.extend(voter_sets)
        self.epochs = epochs
        self.end_offset = end
        self.control_records += control
        self.batches_decoded += count
        return count

    @staticmethod
    def _control(
        offset: int,
        key: bytes | None,
        value: bytes,
        kraft: list[tuple[int, int]],
        voter_sets: list[tuple[int, VotersRecord]],
    ) -> None:
        """Rule 5: keep KRaftVersionRecord and VotersRecord (other control types are skipped).

        Raises:
            DecodeError: a key or one of these two records does not decode.
        """
        if key is None:
            raise DecodeError(f"control record at offset {offset} without a key")
        ctype = read_control_record_key(key, 0)[0].type
        if ctype not in (ControlRecordType.KRAFT_VERSION, ControlRecordType.KRAFT_VOTERS):
            return
        if len(value) < 2:
            raise DecodeError(f"control record at offset {offset} is too short")
        version = int.from_bytes(value[:2], "big", signed=True)
        if ctype == ControlRecordType.KRAFT_VERSION:
            kraft.append((offset, KRaftVersionRecord.decode(value, version).k_raft_version))
        else:
            voter_sets.append((offset, VotersRecord.decode(value, version)))

    def _truncate(self, offset: int) -> None:
        if offset <= self.published_offset:
            raise FollowerFatal(
                f"leader asked to truncate to {offset}, below the published offset {self.published_offset}"
            )
        self.records = [r for r in self.records if r[0] < offset]
        self._next_publish = min(self._next_publish, len(self.records))
        self.epochs = [e for e in self.epochs if e[1] < offset]
        self.kraft_versions = [k for k in self.kraft_versions if k[0] < offset]
        self.voter_sets = [v for v in self.voter_sets if v[0] < offset]
        self.end_offset = min(self.end_offset, offset)

    def _publish(self) -> list[tuple[int, Any, int]]:
        out: list[tuple[int, Any, int]] = []
        i = self._next_publish
        while i < len(self.records) and self.records[i][0] < self.high_watermark:
            out.append(self.records[i])
            i += 1
        # Published records live on in the image; the log keeps only what is not yet published.
        del self.records[:i]
        self._next_publish = 0
        if self.high_watermark > 0:
            self.published_offset = max(self.published_offset, self.high_watermark - 1)
        return out
