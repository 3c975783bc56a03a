"""Partition operations over the live image, shared by the topic and the admin APIs.

:func:`ops_of` binds the partition rules of :mod:`~kraft_jbod.controller.apis.partitions`
to a controller: Kafka's striped placer seeded by the request (so a replay lays out the
same), the draft's leader checks, and the default directory of a new replica.
:func:`reassignment_isr_change` is AlterPartition's way into a reassignment (an ISR
change may complete it). Kept apart from ``topics`` and ``admin`` so that neither needs
the other.
"""

from __future__ import annotations

import random
import uuid
from typing import cast

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.alter_partition import PartitionView
from kraft_jbod.controller.apis import partitions
from kraft_jbod.controller.context import ControllerContext, RecordAndVersion
from kraft_jbod.controller.draft import Draft
from kraft_jbod.controller.image import NO_LEADER, Partition, sorted_partitions
from kraft_jbod.controller.placement import PlacementError, StripedPlacer, UsableBroker
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord


def default_dir(ctx: ControllerContext, broker_id: int) -> uuid.UUID:
    """Kafka's ClusterControlManager.defaultDir (and the kip profile's variant)."""
    img, prof = ctx.image, ctx.profile
    if not fv.supports_jbod(img.metadata_version):
        return img.canonical(prof.migrating)
    reg = img.brokers.get(broker_id)
    if reg is None:
        return img.canonical(prof.unassigned)
    n = len(reg.online_dirs)
    if n == 0:
        return img.canonical(prof.migrating)
    if n == 1:
        return reg.online_dirs[0]
    return img.canonical(prof.unassigned)


def usable_brokers(ctx: ControllerContext) -> list[UsableBroker]:
    """Kafka's usable brokers: registered, not shutting down, not all directories cordoned.

    "Shutting down" is the controller's in-memory state (``cs_offset``), not the durable
    ``in_controlled_shutdown`` flag: a broker whose controlled shutdown ended in fencing keeps
    the flag in its registration but is usable again, as a fenced follower (Kafka's heartbeat
    manager forgets the shutdown once the broker is fenced). Found by a real broker: with one
    of two brokers stopped, Kafka's controller creates ``__consumer_offsets`` with a replica on
    the stopped broker, where we used to refuse INVALID_REPLICATION_FACTOR.
    """
    out: list[UsableBroker] = []
    for b, reg in sorted(ctx.image.brokers.items()):
        if reg.cs_offset >= 0 or not reg.has_uncordoned_dirs:
            continue
        out.append(UsableBroker(b, reg.rack, reg.fenced))
    return out


def ops_of(ctx: ControllerContext, salt: int = 0) -> partitions.Ops:
    """The partition operations over the image (read through an empty draft)."""
    draft = Draft(ctx)

    def view(p: Partition) -> partitions.PartView:
        return partitions.PartView(
            p.replicas, p.isr, p.leader, p.dirs, p.adding, p.removing, p.leader_recovery_state, p.elr, p.last_known_elr
        )

    def place(start: int, count: int, rf: int) -> list[list[int]] | tuple[int, str]:
        # Kafka's striped placer, seeded by the request so that a replay gives the same layout.
        rng = random.Random(f"{ctx.cluster_id}/partitions/{salt}/{start}")
        try:
            return StripedPlacer(usable_brokers(ctx), rng).place(count, rf)
        except PlacementError as exc:
            return ErrorCode.INVALID_REPLICATION_FACTOR, str(exc)

    return partitions.Ops(
        ctx,
        view=view,
        acceptable=lambda b, d: bool(draft.acceptable_leader(b, d)),
        active=lambda b: bool(draft.is_active(b)),
        default_dir=lambda b: default_dir(ctx, b),
        place=place,
    )


def reassignment_isr_change(
    ctx: ControllerContext, p: Partition, new_isr: list[int], lrs: int
) -> tuple[PartitionChangeRecord, PartitionView] | None:
    """An AlterPartition ISR change on a reassigning partition (may complete it), or None.

    Returns the PartitionChangeRecord and alter_partition's ``PartitionView`` after it.
    """
    # Ops.change passes ELR and the effective min ISR when ELR is on, as Kafka's
    # AlterPartition path builds its change with them.
    built = ops_of(ctx).change(p, target_isr=new_isr, target_lrs=lrs)
    if built is None:
        return None
    rec = cast(PartitionChangeRecord, built[0])
    changed = rec.leader != partitions.NO_LEADER_CHANGE
    view = PartitionView(
        tuple(p.replicas if rec.replicas is None else rec.replicas),
        tuple(p.isr if rec.isr is None else rec.isr),
        rec.leader if changed else p.leader,
        p.leader_epoch + 1 if changed else p.leader_epoch,
        p.partition_epoch + 1,
        p.leader_recovery_state if rec.leader_recovery_state == -1 else rec.leader_recovery_state,
    )
    return rec, view


# Kafka's cap on the elections of one periodic run (ReplicationControlManager's
# maxElectionsPerImbalance); the task runs again at once while it hits it.
MAX_ELECTIONS_PER_RUN = 1_000


def elect_unclean_leaderless(ctx: ControllerContext) -> tuple[list[RecordAndVersion], bool]:
    """Kafka's periodic electUnclean task (every unclean.leader.election.interval.ms): an
    UNCLEAN election for every leaderless partition whose topic allows one, as an
    ElectLeaders of that type would. The records, and whether the cap cut the run short."""
    ops = ops_of(ctx)
    draft = Draft(ctx)
    records: list[RecordAndVersion] = []
    for p in sorted_partitions(ctx.image.leaderless):
        if len(records) >= MAX_ELECTIONS_PER_RUN:
            return records, True
        if p.leader != NO_LEADER or draft.election(p) != partitions.UNCLEAN:
            continue
        partitions.elect_one(ops, ctx.image.topics[p.topic_id].name, p.partition_id, partitions.UNCLEAN, records)
    return records, False
