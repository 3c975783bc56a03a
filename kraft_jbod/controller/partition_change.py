"""The partition change builder: one PartitionChangeRecord from a partition and its targets.

Kafka's PartitionChangeBuilder, as small named steps. :func:`build_change` takes a
partition (a :class:`PartView`) and targets (ISR, replicas, adding, removing, election
kind, directories) and makes the one record that takes the partition there, or None when
nothing changes. The steps, in Kafka's order:

* Rule 1, :func:`complete_reassignment`: a reassignment completes when the target ISR
  holds every adding replica and at least one replica that is not being removed (and,
  when the replica count shrinks, every target replica): the removing replicas leave
  Replicas and the ISR.
* Rule 4 (read first), :func:`target_directories`: Directories follow the target
  replicas: a replica keeps its directory, a new one gets the controller's default
  directory for its broker. The election judges each replica by this directory.
* Rule 5 (KIP-966, only with ``elr_enabled``), :func:`target_elr` before the election:
  while the target ISR is below min ISR, the ELR is the old ISR and old ELR minus the
  target ISR and the unclean-shutdown replicas; at or above min ISR it is empty.
* Rule 2, :func:`elect_leader` (with :func:`try_election` and
  :func:`last_known_leader`): PREFERRED takes the first target replica if it is in the
  ISR and may lead, else keeps the leader, else the next eligible replica. ONLINE keeps a
  leader that may still lead, else the first eligible replica. With the ISR empty an ELR
  member is eligible; failing every eligible replica, the last known leader (a
  LastKnownElr of exactly one broker) is elected as an unclean election; UNCLEAN may
  pick any replica that may lead. :func:`record_election` writes the result: a leader
  from the ELR becomes the ISR alone and leaves the ELR; an unclean election makes the
  ISR that replica alone and the leader RECOVERING.
* :func:`record_elr_and_isr`: an unclean election empties the ELR, and so does ELR
  being off (a partition's leftover ELR is cleared by its next change); the ISR may
  become empty only with ELR on.
* Rule 3, :func:`bump_leader_epoch`: the leader epoch is bumped (Leader set to the
  current leader) when replicas leave the replica set, and below 3.6-IV0 when the ISR
  shrinks.
* :func:`record_last_known_elr`: LastKnownElr holds the leader a partition had when it
  first became leaderless and is emptied once it has a leader.
* :func:`record_replicas_and_directories`, :func:`record_reassignment`: the replica
  set, its directories (``target_dirs`` changes only the record's Directories, as
  Kafka's ``setDirectory``), the recovery state, Adding/RemovingReplicas.

This module sits below :mod:`~kraft_jbod.controller.draft` and the API handlers; it reads
nothing but its arguments and the metadata.version table.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from kraft_jbod.controller import features as fv
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord

NO_LEADER: Final = -1
NO_LEADER_CHANGE: Final = -2
RECOVERED: Final = 0
RECOVERING: Final = 1
PREFERRED, UNCLEAN, ONLINE = 0, 1, 2
MV_3_6_IV0: Final = 12
_NO_RECOVERY_CHANGE: Final = -1


class PartView(NamedTuple):
    """What the builder reads of a partition (a draft view or the image's). A named tuple:
    one is built per partition a change touches, and a tuple is the cheapest to build."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    dirs: tuple[uuid.UUID, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    leader_recovery_state: int = RECOVERED
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()


def java_hash_set_order(values: Sequence[int]) -> list[int]:
    """The iteration order of a java.util.HashSet<Integer> after adding ``values`` in order.

    Kafka's builder computes the ELR through such a set, and whether a record carries the
    ELR depends on list equality, so the order is part of the record. A HashSet iterates
    by bucket (the spread hash masked by the table size; the table starts at 16 and
    doubles past 3/4 full), and in insertion order within a bucket.
    """
    seen: dict[int, int] = {}
    for v in values:
        seen.setdefault(v, len(seen))
    capacity = 16
    while len(seen) > capacity * 3 // 4:
        capacity *= 2

    def bucket(v: int) -> int:
        h = v & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(seen, key=lambda v: (bucket(v), seen[v]))


def effective_min_isr(configs: Any, topic_name: str, replication_factor: int) -> int:
    """A topic's min.insync.replicas (its config, else the cluster default, else 1), capped at
    its replication factor, as Kafka's getTopicEffectiveMinIsr."""
    raw = configs.value(2, topic_name, "min.insync.replicas") or configs.value(4, "", "min.insync.replicas") or "1"
    try:
        value = int(raw)
    except ValueError:
        value = 1
    return min(value, replication_factor)


def min_isr_cap(partitions: Mapping[int, Any]) -> int:
    """The replication factor Kafka's getTopicEffectiveMinIsr caps min ISR with: the replica
    count of the topic's partition 0 (not of the partition being changed)."""
    return len(partitions[0].replicas)


def elr_enabled(image: Any) -> bool:
    """KIP-966 is on when eligible.leader.replicas.version >= 1 is finalized (at a level with
    the ELR record fields)."""
    return bool(image.features.get(fv.ELR_VERSION, 0) >= 1 and image.metadata_version >= fv.MV_4_0_IV1)


# ---------------------------------------------------------------------------- the steps


def complete_reassignment(
    replicas: Sequence[int], adding: Sequence[int], removing: Sequence[int], isr: Sequence[int]
) -> tuple[list[int], list[int]] | None:
    """(replicas, ISR) once a reassignment may complete (Rule 1), else None."""
    if not adding and not removing:
        return None
    new_isr, new_replicas = list(isr), list(replicas)
    if removing:
        new_isr = [b for b in isr if b not in removing]
        if not new_isr:
            return None
        new_replicas = [b for b in replicas if b not in removing]
        if not new_replicas:
            return None
    if not set(adding) <= set(new_isr):
        return None
    if len(adding) < len(removing) and not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def target_directories(
    p: PartView, replicas: Sequence[int], default_dir: Callable[[int], uuid.UUID]
) -> list[uuid.UUID]:
    """Rule 4: each target replica's directory (its own, or the default for a new one)."""
    if tuple(replicas) == p.replicas:
        return list(p.dirs)
    known = dict(zip(p.replicas, p.dirs, strict=True))
    return [known[b] if b in known else default_dir(b) for b in replicas]


def target_elr(
    old_isr: Sequence[int],
    old_elr: Sequence[int],
    isr: Sequence[int],
    min_isr: int,
    unclean_shutdown: Sequence[int] = (),
) -> list[int]:
    """Rule 5's ELR for a target ISR: empty at or above min ISR, else the old ELR and ISR
    (in a Java HashSet's order) minus the target ISR and the unclean-shutdown replicas."""
    if len(isr) >= min_isr:
        return []
    return [b for b in java_hash_set_order([*old_elr, *old_isr]) if b not in isr and b not in unclean_shutdown]


def try_election(pool: Sequence[int], valid: Callable[[int], bool]) -> int:
    """The first replica of ``pool`` that is a valid leader, else NO_LEADER."""
    for b in pool:
        if valid(b):
            return b
    return NO_LEADER


def last_known_leader(
    p: PartView, isr: Sequence[int], elr: Sequence[int], may_lead: Callable[[int], bool], elr_on: bool
) -> int:
    """KIP-966's last resort: with ISR and ELR empty, the one broker of LastKnownElr if it
    may lead (an unclean election), else NO_LEADER."""
    lke = p.last_known_elr
    if elr_on and not elr and not isr and len(lke) == 1 and may_lead(lke[0]):
        return lke[0]
    return NO_LEADER


class Election(NamedTuple):
    """The outcome of Rule 2: the leader (NO_LEADER for none) and whether it was unclean."""

    leader: int
    unclean: bool = False


def elect_leader(
    p: PartView,
    election: int,
    replicas: Sequence[int],
    isr: Sequence[int],
    elr: Sequence[int],
    may_lead: Callable[[int], bool],
    elr_on: bool,
) -> Election:
    """Rule 2: the leader the partition gets, judged against the target ISR and ELR.

    A replica is eligible when it is in the target ISR (or, with the ISR empty, in the
    ELR) and may lead from its directory."""
    eligible = isr if isr else elr

    def valid(b: int) -> bool:
        return b in eligible and may_lead(b)

    if election == PREFERRED and replicas and valid(replicas[0]):
        return Election(replicas[0])
    if p.leader >= 0 and valid(p.leader):
        return Election(p.leader)
    leader = try_election(replicas[1:] if election == PREFERRED else replicas, valid)
    if leader != NO_LEADER:
        return Election(leader)
    leader = last_known_leader(p, isr, elr, may_lead, elr_on)
    if leader != NO_LEADER:
        return Election(leader, unclean=True)
    if election == UNCLEAN:
        leader = try_election(replicas, may_lead)
        return Election(leader, unclean=leader != NO_LEADER)
    return Election(NO_LEADER)


def record_election(
    rec: PartitionChangeRecord, p: PartView, chosen: Election, isr: list[int], elr: list[int]
) -> tuple[list[int], list[int]]:
    """Writes a new leader into ``rec``; the target (ISR, ELR) after it (a leader from the
    ELR becomes the ISR alone; an unclean one sets the ISR and RECOVERING)."""
    leader = chosen.leader
    if leader == p.leader:
        return isr, elr
    if leader in elr:
        isr = [leader]
        elr = [b for b in elr if b != leader]
    rec.leader = leader
    if chosen.unclean:
        rec.isr = [leader]
        if p.leader_recovery_state != RECOVERING:
            rec.leader_recovery_state = RECOVERING
    return isr, elr


def record_elr_and_isr(rec: PartitionChangeRecord, p: PartView, isr: list[int], elr: list[int], elr_on: bool) -> None:
    """The ELR (emptied by an unclean election or with ELR off) and the ISR, where they change."""
    if rec.isr is not None or not elr_on:
        elr = []
    if elr != list(p.elr):
        rec.eligible_leader_replicas = elr
    if rec.isr is None and (isr or elr_on) and isr != list(p.isr):
        rec.isr = isr


def bump_leader_epoch(rec: PartitionChangeRecord, p: PartView, replicas: Sequence[int], metadata_version: int) -> None:
    """Rule 3: with no leader change, Leader is set to the current one (an epoch bump) when
    replicas leave the set, and below 3.6-IV0 when the ISR shrinks."""
    if rec.leader != NO_LEADER_CHANGE:
        return
    if tuple(replicas) != p.replicas and not set(p.replicas) <= set(replicas):
        rec.leader = p.leader
    elif metadata_version < MV_3_6_IV0 and rec.isr is not None and not set(p.isr) <= set(rec.isr):
        rec.leader = p.leader


def record_last_known_elr(rec: PartitionChangeRecord, p: PartView) -> None:
    """KIP-966: remember the leader when the partition first becomes leaderless; forget it
    once it has a leader."""
    if rec.leader == NO_LEADER and not p.last_known_elr:
        rec.last_known_elr = [p.leader]
    elif rec.leader >= 0 and p.last_known_elr:
        rec.last_known_elr = []


def record_replicas_and_directories(
    rec: PartitionChangeRecord,
    p: PartView,
    replicas: list[int],
    dirs: list[uuid.UUID],
    target_dirs: Mapping[int, uuid.UUID] | None,
    metadata_version: int,
) -> None:
    """Replicas and Directories where they change (Directories only at JBOD levels)."""
    if not replicas:
        return
    if target_dirs:
        dirs = [target_dirs.get(b, d) for b, d in zip(replicas, dirs, strict=True)]
    if fv.supports_jbod(metadata_version) and tuple(dirs) != p.dirs:
        rec.directories = dirs
    if replicas != list(p.replicas):
        rec.replicas = replicas


def record_reassignment(
    rec: PartitionChangeRecord, p: PartView, adding: list[int], removing: list[int], target_lrs: int | None
) -> None:
    """A requested recovery state (unless the election set one), Adding and RemovingReplicas."""
    if target_lrs is not None and rec.leader_recovery_state == _NO_RECOVERY_CHANGE:
        if target_lrs != p.leader_recovery_state:
            rec.leader_recovery_state = target_lrs
    if removing != list(p.removing):
        rec.removing_replicas = removing
    if adding != list(p.adding):
        rec.adding_replicas = adding


def is_no_op(rec: PartitionChangeRecord) -> bool:
    """True when the record would change nothing."""
    return (
        rec.isr is None
        and rec.leader == NO_LEADER_CHANGE
        and rec.replicas is None
        and rec.removing_replicas is None
        and rec.adding_replicas is None
        and rec.leader_recovery_state == _NO_RECOVERY_CHANGE
        and rec.directories is None
        and rec.eligible_leader_replicas is None
        and rec.last_known_elr is None
    )


# ---------------------------------------------------------------------------- the builder


def build_change(
    p: PartView,
    topic_id: uuid.UUID,
    partition_id: int,
    *,
    acceptable: Callable[[int, uuid.UUID], bool],
    default_dir: Callable[[int], uuid.UUID],
    metadata_version: int,
    target_isr: Sequence[int] | None = None,
    target_replicas: Sequence[int] | None = None,
    target_adding: Sequence[int] | None = None,
    target_removing: Sequence[int] | None = None,
    election: int = ONLINE,
    target_lrs: int | None = None,
    elr_enabled: bool = False,
    min_isr: int = 1,
    unclean_shutdown: Sequence[int] = (),
    target_dirs: Mapping[int, uuid.UUID] | None = None,
) -> PartitionChangeRecord | None:
    """The PartitionChangeRecord taking ``p`` to the targets (the steps above), or None.

    ``acceptable(broker, directory)`` says whether a broker may lead from that directory.
    ``min_isr`` is the topic's effective min.insync.replicas (capped at its replication
    factor by the caller, as Kafka's ``getTopicEffectiveMinIsr``). ``target_dirs`` (broker ->
    directory, AssignReplicasToDirs) changes only the record's Directories: as Kafka's
    ``setDirectory``, the election still judges each replica by the directory it had.
    """
    isr = list(p.isr if target_isr is None else target_isr)
    replicas = list(p.replicas if target_replicas is None else target_replicas)
    adding = list(p.adding if target_adding is None else target_adding)
    removing = list(p.removing if target_removing is None else target_removing)
    done = complete_reassignment(replicas, adding, removing, isr) if adding or removing else None
    if done is not None:
        replicas, isr = done
        adding, removing = [], []
    dirs = target_directories(p, replicas, default_dir)

    def may_lead(b: int) -> bool:
        # judged by the directory the replica has (replica lists are short: a scan is cheapest)
        return b in replicas and acceptable(b, dirs[replicas.index(b)])

    elr = target_elr(p.isr, p.elr, isr, min_isr, unclean_shutdown) if elr_enabled else list(p.elr)
    rec = PartitionChangeRecord(partition_id=partition_id, topic_id=topic_id)
    chosen = elect_leader(p, election, replicas, isr, elr, may_lead, elr_enabled)
    isr, elr = record_election(rec, p, chosen, isr, elr)
    record_elr_and_isr(rec, p, isr, elr, elr_enabled)
    bump_leader_epoch(rec, p, replicas, metadata_version)
    if elr_enabled:
        record_last_known_elr(rec, p)
    record_replicas_and_directories(rec, p, replicas, dirs, target_dirs, metadata_version)
    record_reassignment(rec, p, adding, removing, target_lrs)
    return None if is_no_op(rec) else rec
