"""AlterPartition: the per-partition rules a leader's ISR / recovery-state change must pass.

A partition leader sends AlterPartition to shrink or expand its ISR and to report that
it finished recovering from an unclean election. The state machine
(:meth:`ControllerState._alter_partition`) resolves topics, checks the caller's broker
epoch and writes the PartitionChangeRecord; this module holds the decision itself, as a
pure function of plain values, so every rule is testable on its own.

The rules, in the order Apache Kafka's controller applies them
(ReplicationControlManager.validateAlterPartitionData, described in our words). The
first one that fails decides the partition's error code:

Rule 1: the partition must exist (UNKNOWN_TOPIC_OR_PARTITION).
Rule 2: a leader epoch or partition epoch *ahead* of ours means the caller saw a newer
controller: NOT_CONTROLLER, so it looks for the controller again and retries.
Rule 3: an older leader epoch is ErrorCode.FENCED_LEADER_EPOCH.
Rule 4: only the current leader may alter the partition; anyone else gets
INVALID_REQUEST (Kafka's code, not NOT_LEADER_OR_FOLLOWER).
Rule 5: an older partition epoch is ErrorCode.INVALID_UPDATE_VERSION (the leader's view is stale).
Rule 6: the new ISR must be distinct non-negative replica ids of this partition and must
contain the leader, else INVALID_REQUEST.
Rule 7: a leader still RECOVERING may have only itself in the ISR, and a RECOVERED
partition never goes back to RECOVERING (INVALID_REQUEST). Recovery-state values other
than 0 and 1 are INVALID_REQUEST too (Kafka throws on them; we answer instead).
Rule 8: every ISR member must be eligible: registered, not in controlled shutdown, not
fenced, with a matching broker epoch when the request carries one (v3), and, our JBOD
addition, with this partition's directory online on that broker. A failure is
ErrorCode.INELIGIBLE_REPLICA from v2, ErrorCode.OPERATION_NOT_ATTEMPTED before (older brokers do not know
the newer code).

Once the rules pass, the change itself (:func:`plan_change`) follows Kafka's
PartitionChangeBuilder for this case: the leader stays (it is in the ISR and eligible),
the ISR is written when it differs from the current one *as a list*, the leader epoch is
bumped on an ISR shrink only below metadata.version 3.6-IV0, and the recovery state is
written when it changes. No difference at all means no record and no epoch bump.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from kraft_jbod.messages.error_codes import ErrorCode

RECOVERED: Final = 0
RECOVERING: Final = 1
NO_RECOVERY_CHANGE: Final = -1  # PartitionChangeRecord's "unchanged"
NO_LEADER_CHANGE: Final = -2

MV_3_6_IV0: Final = 12  # from here an ISR shrink no longer bumps the leader epoch (KAFKA-15021)

# (broker id, broker epoch from the request or -1) -> why it may not be in the ISR, or None
Eligibility = Callable[[int, int], "str | None"]


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What the rules need to know about a partition (current, or as changed earlier in the request)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int


@dataclass(frozen=True, slots=True)
class Proposal:
    """One partition's entry of an AlterPartition request, version-normalised."""

    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[tuple[int, int], ...]  # (broker id, broker epoch or -1 before v3)
    leader_recovery_state: int


@dataclass(frozen=True, slots=True)
class Verdict:
    error_code: int
    reason: str


OK: Final = Verdict(ErrorCode.NONE, "")


def validate(
    requester: int, part: PartitionView | None, prop: Proposal, api_version: int, eligibility: Eligibility
) -> Verdict:
    """Apply Rules 1-8; the first failing rule's error code and a readable reason."""
    if part is None:
        return Verdict(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown partition")
    if prop.leader_epoch > part.leader_epoch:
        return Verdict(
            ErrorCode.NOT_CONTROLLER, f"leader epoch {prop.leader_epoch} is ahead of ours ({part.leader_epoch})"
        )
    if prop.partition_epoch > part.partition_epoch:
        return Verdict(
            ErrorCode.NOT_CONTROLLER,
            f"partition epoch {prop.partition_epoch} is ahead of ours ({part.partition_epoch})",
        )
    if prop.leader_epoch < part.leader_epoch:
        return Verdict(
            ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {prop.leader_epoch} is older than {part.leader_epoch}"
        )
    if requester != part.leader:
        return Verdict(ErrorCode.INVALID_REQUEST, f"broker {requester} is not the leader ({part.leader})")
    if prop.partition_epoch < part.partition_epoch:
        return Verdict(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"partition epoch {prop.partition_epoch} is older than {part.partition_epoch}",
        )
    isr = [b for b, _ in prop.new_isr]
    if len(set(isr)) != len(isr) or any(b not in part.replicas for b in isr):
        return Verdict(ErrorCode.INVALID_REQUEST, f"ISR {isr} is not a set of replicas of {list(part.replicas)}")
    if part.leader not in isr:
        return Verdict(ErrorCode.INVALID_REQUEST, f"ISR {isr} does not contain the leader {part.leader}")
    lrs = prop.leader_recovery_state
    if lrs not in (RECOVERED, RECOVERING):
        return Verdict(ErrorCode.INVALID_REQUEST, f"unknown leader recovery state {lrs}")
    if lrs == RECOVERING and len(isr) > 1:
        return Verdict(ErrorCode.INVALID_REQUEST, "a recovering leader must be alone in the ISR")
    if part.leader_recovery_state == RECOVERED and lrs == RECOVERING:
        return Verdict(ErrorCode.INVALID_REQUEST, "leader recovery state cannot go from RECOVERED to RECOVERING")
    problems = []
    for b, epoch in prop.new_isr:
        why = eligibility(b, epoch)
        if why is not None:
            problems.append(f"{b}: {why}")
    if problems:
        code = ErrorCode.INELIGIBLE_REPLICA if api_version >= 2 else ErrorCode.OPERATION_NOT_ATTEMPTED
        return Verdict(code, "ineligible replicas " + ", ".join(problems))
    return OK


@dataclass(frozen=True, slots=True)
class Change:
    """The PartitionChangeRecord fields to write (None / sentinels mean "unchanged")."""

    isr: tuple[int, ...] | None
    leader: int
    leader_recovery_state: int

    def apply_to(self, part: PartitionView) -> PartitionView:
        """The partition after this change is replayed (how the response reports it)."""
        return PartitionView(
            replicas=part.replicas,
            isr=part.isr if self.isr is None else self.isr,
            leader=part.leader if self.leader == NO_LEADER_CHANGE else self.leader,
            leader_epoch=part.leader_epoch + (0 if self.leader == NO_LEADER_CHANGE else 1),
            partition_epoch=part.partition_epoch + 1,
            leader_recovery_state=(
                part.leader_recovery_state
                if self.leader_recovery_state == NO_RECOVERY_CHANGE
                else self.leader_recovery_state
            ),
        )


def plan_change(part: PartitionView, new_isr: Sequence[int], lrs: int, metadata_version: int) -> Change | None:
    """The record a validated proposal needs, or None when it changes nothing."""
    target = tuple(new_isr)
    isr = None if target == part.isr else target
    leader = NO_LEADER_CHANGE
    if isr is not None and metadata_version < MV_3_6_IV0 and not set(part.isr) <= set(isr):
        # Brokers before 3.6 needed a leader epoch bump to notice a shrink: rewrite the
        # same leader, which replay turns into leader_epoch + 1.
        leader = part.leader
    recovery = NO_RECOVERY_CHANGE if lrs == part.leader_recovery_state else lrs
    if isr is None and leader == NO_LEADER_CHANGE and recovery == NO_RECOVERY_CHANGE:
        return None
    return Change(isr, leader, recovery)
