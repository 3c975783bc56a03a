"""The draft overlay: records proposed by one request, and what they would change.

Rule (records in order): the records of one request are generated against a draft, so a
later record of the same batch sees what the earlier ones did. Fencing a broker and then
failing one of its directories in the same heartbeat never elects a leader into the
failed directory, because the election reads the draft's view, not the image.

The draft also holds the rules shared by several API families: removing a broker from
ISRs and leadership, clean elections, fencing and unfencing, taking directories offline.
Each writes PartitionChangeRecords (or registration changes) into ``records`` and notes
the new view of what it touched; the image itself is never written here.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from kraft_jbod.controller import features as fv
from kraft_jbod.controller import partition_change as pc
from kraft_jbod.controller.context import ControllerContext, RecordAndVersion
from kraft_jbod.controller.image import NO_LEADER, NO_LEADER_CHANGE, BrokerInfo, Partition, sorted_partitions
from kraft_jbod.controller.image import dir_online as image_dir_online
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.fence_broker_record import FenceBrokerRecord
from kraft_jbod.messages.partition_change_record import PartitionChangeRecord
from kraft_jbod.messages.unfence_broker_record import UnfenceBrokerRecord

PartView = tuple[tuple[int, ...], int, tuple[uuid.UUID, ...]]  # (isr, leader, dirs)


class Draft:
    """Overlay of the changes proposed so far in one handle()/tick() call."""

    __slots__ = (
        "_change_version",
        "_elr_on",
        "_jbod",
        "_keeps_epoch",
        "_leader_ok",
        "_min_isr",
        "_min_isr_last",
        "_unclean",
        "active",
        "ctx",
        "elrs",
        "image",
        "online",
        "parts",
        "records",
    )

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.image = ctx.image
        self.records: list[RecordAndVersion] = []
        self.parts: dict[Partition, PartView] = {}
        self.active: dict[int, bool] = {}
        self.online: dict[int, frozenset[uuid.UUID]] = {}
        self.elrs: dict[Partition, tuple[tuple[int, ...], tuple[int, ...]]] = {}  # (ELR, last known ELR)
        # The image does not change while a draft lives: what is read of it per partition
        # (the ELR feature, a topic's min ISR) is read once.
        self._elr_on: bool | None = None
        self._min_isr: dict[uuid.UUID, int] = {}
        self._unclean: dict[uuid.UUID, bool] = {}
        # The last topic asked about, by identity: a request walks partitions topic by topic
        # and a partition holds its topic's id object, so this skips hashing a UUID.
        self._min_isr_last: tuple[uuid.UUID | None, int] = (None, 0)
        self._change_version = fv.partition_change_record_version(self.image.metadata_version)
        self._jbod = fv.supports_jbod(self.image.metadata_version)
        self._keeps_epoch = self.image.metadata_version >= fv.MV_3_6_IV0  # an ISR shrink keeps the leader epoch
        # acceptable_leader's answers, per broker and directory; valid while ``active`` and
        # ``online`` stay as they are, so they are written only through set_active and
        # set_online, which forget them.
        self._leader_ok: dict[int, dict[uuid.UUID, bool]] = {}

    # ------------------------------------------------------------------ views

    def view(self, p: Partition) -> PartView:
        got = self.parts.get(p)
        return got if got is not None else (p.isr, p.leader, p.dirs)

    def is_active(self, broker_id: int) -> bool:
        got = self.active.get(broker_id)
        if got is not None:
            return got
        reg = self.image.brokers.get(broker_id)
        return reg is not None and reg.active

    def online_set(self, broker_id: int) -> frozenset[uuid.UUID] | None:
        got = self.online.get(broker_id)
        if got is not None:
            return got
        reg = self.image.brokers.get(broker_id)
        return None if reg is None else reg.online_set

    def set_active(self, broker_id: int, active: bool) -> None:
        self.active[broker_id] = active
        self._leader_ok.clear()

    def set_online(self, broker_id: int, online: frozenset[uuid.UUID]) -> None:
        self.online[broker_id] = online
        self._leader_ok.clear()

    def dir_online(self, broker_id: int, directory: uuid.UUID) -> bool:
        """Kafka's DirectoryId.isOnline against the draft's view of the broker's online dirs."""
        return image_dir_online(self.ctx.profile, self.online_set(broker_id), directory)

    def acceptable_leader(self, broker_id: int, directory: uuid.UUID) -> bool:
        # Asked once or more per replica when a directory fails or replicas are assigned in
        # bulk, about a few brokers and directories: remembered.
        memo = self._leader_ok.get(broker_id)
        if memo is None:
            memo = self._leader_ok[broker_id] = {}
        got = memo.get(directory)
        if got is None:
            got = memo[directory] = self.is_active(broker_id) and self.dir_online(broker_id, directory)
        return got

    # ------------------------------------------------------------------ partition changes

    def elect(self, p: Partition, isr: tuple[int, ...], dirs: tuple[uuid.UUID, ...], exclude: int) -> int:
        """First replica (preferred order) in the ISR that may lead; clean elections only."""
        for b, directory in zip(p.replicas, dirs, strict=True):
            if b != exclude and b in isr and self.acceptable_leader(b, directory):
                return b
        return NO_LEADER

    def change(
        self,
        p: Partition,
        *,
        isr: tuple[int, ...] | None = None,
        leader: int = NO_LEADER_CHANGE,
        dirs: tuple[uuid.UUID, ...] | None = None,
    ) -> None:
        old_isr, old_leader, old_dirs = self.view(p)
        rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id)
        if isr is not None:
            rec.isr = list(isr)
        if leader != NO_LEADER_CHANGE:
            rec.leader = leader
        if dirs is not None:
            rec.directories = list(dirs)
        self.records.append((rec, self._change_version))
        self.parts[p] = (
            old_isr if isr is None else isr,
            old_leader if leader == NO_LEADER_CHANGE else leader,
            old_dirs if dirs is None else dirs,
        )

    def elr_enabled(self) -> bool:
        if self._elr_on is None:
            self._elr_on = pc.elr_enabled(self.image)
        return self._elr_on

    def min_isr(self, p: Partition) -> int:
        """The effective min ISR of ``p``'s topic, as Kafka's getTopicEffectiveMinIsr: capped
        by the replica count of the topic's partition 0, whichever partition is asked about
        (they differ while a reassignment changes a replica count, docs/twin.md #24)."""
        topic_id = p.topic_id
        last, got = self._min_isr_last
        if last is not topic_id:
            cached = self._min_isr.get(topic_id)
            if cached is None:
                topic = self.image.topics[topic_id]
                cached = self._min_isr[topic_id] = pc.effective_min_isr(
                    self.image.configs, topic.name, pc.min_isr_cap(topic.partitions)
                )
            got = cached
            self._min_isr_last = (topic_id, got)
        return got

    def election(self, p: Partition) -> int:
        """The election of Kafka's generateLeaderAndIsrUpdates for ``p``: UNCLEAN where the
        topic's unclean.leader.election.enable (or the cluster's default) is true, so a
        partition whose ISR has no acceptable leader left takes any live replica (its ISR
        reset to that replica, leader recovery RECOVERING)."""
        got = self._unclean.get(p.topic_id)
        if got is None:
            name = self.image.topics[p.topic_id].name
            got = self._unclean[p.topic_id] = self.image.configs.topic_flag(name, "unclean.leader.election.enable")
        return pc.UNCLEAN if got else pc.ONLINE

    def _remove_with_elr(
        self, p: Partition, broker_id: int, isr: tuple[int, ...], leader: int, dirs: tuple[uuid.UUID, ...]
    ) -> None:
        # Kafka's generateLeaderAndIsrUpdates with ELR on: the builder may empty the ISR,
        # moves the members that left cleanly into the ELR and remembers the last leader.
        got_elr = self.elrs.get(p)
        elr, lke = (p.elr, p.last_known_elr) if got_elr is None else got_elr
        target_isr = [b for b in isr if b != broker_id]
        if self._only_isr_shrinks(p, broker_id, target_isr, leader, dirs, elr):
            # The builder's answer without its steps (a follower leaving a large enough ISR),
            # noted without _note: runs once per replica of a failed directory.
            shrink = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id, isr=target_isr)
            self.records.append((shrink, self._change_version))
            self.parts[p] = (tuple(target_isr), leader, dirs)
            self.elrs[p] = (elr, lke)
            return
        if leader == broker_id and broker_id in isr and not p.adding and not p.removing and not elr:
            successor = self._clean_successor(p, broker_id, target_isr, dirs)
            if successor != NO_LEADER:
                # The builder's answer without its steps (the leader leaving an ISR that stays
                # at min ISR, a clean successor in it): the target ISR and the first replica
                # of it that may lead; a last known ELR is forgotten once there is a leader.
                handover = PartitionChangeRecord(
                    partition_id=p.partition_id, topic_id=p.topic_id, isr=target_isr, leader=successor
                )
                if lke:
                    handover.last_known_elr = []
                self.records.append((handover, self._change_version))
                self.parts[p] = (tuple(target_isr), successor, dirs)
                self.elrs[p] = (elr, () if lke else lke)
                return
        view = pc.PartView(p.replicas, isr, leader, dirs, p.adding, p.removing, p.leader_recovery_state, elr, lke)
        rec = pc.build_change(
            view,
            p.topic_id,
            p.partition_id,
            acceptable=lambda b, d: b != broker_id and self.acceptable_leader(b, d),
            default_dir=lambda b: dirs[p.replicas.index(b)],
            metadata_version=self.image.metadata_version,
            target_isr=target_isr,
            elr_enabled=True,
            min_isr=self.min_isr(p),
            election=self.election(p),
        )
        self._note(p, rec, isr, leader, dirs, elr, lke)

    def _leave_dir(self, parts: list[Partition], broker_id: int) -> None:
        """``leave_offline_dir`` for each of ``parts`` (ELR on, each partition met once): the
        two common cases of ``_leave_untouched`` (a follower leaving an ISR that stays at
        min ISR, the leader staying; the leader leaving with a clean successor) written out
        in the loop, with whether a broker may lead from a directory asked once per call;
        the other partitions take ``_leave_untouched`` or the general path."""
        drafted, elrs, records = self.parts, self.elrs, self.records
        version = self._change_version
        keeps_epoch = self._keeps_epoch
        min_isr = self.min_isr
        # Keyed by the directory object's id, not the UUID (hashing one runs Python code):
        # the partitions hold their directory objects for the whole call.
        leader_ok: dict[tuple[int, int], bool] = {}
        for p in parts:
            if p in drafted or p in elrs:
                self.leave_offline_dir(p, broker_id)
                continue
            isr, leader, replicas = p.isr, p.leader, p.replicas
            if (
                keeps_epoch
                and broker_id in isr
                and leader != broker_id
                and leader in isr
                and leader in replicas
                and not p.elr
                and not p.adding
                and not p.removing
                and len(isr) - 1 >= min_isr(p)
            ):
                dirs = p.dirs
                leader_dir = dirs[replicas.index(leader)]
                key = (leader, id(leader_dir))
                ok = leader_ok.get(key)
                if ok is None:
                    ok = leader_ok[key] = self.acceptable_leader(leader, leader_dir)
                target_isr = list(isr)
                target_isr.remove(broker_id)
                if ok and broker_id not in target_isr:  # (a log may repeat a broker in an ISR)
                    shrink = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id, isr=target_isr)
                    records.append((shrink, version))
                    drafted[p] = (tuple(target_isr), leader, dirs)
                    elrs[p] = ((), p.last_known_elr)
                    continue
            elif (
                leader == broker_id
                and broker_id in isr
                and not p.elr
                and not p.adding
                and not p.removing
                and len(isr) - 1 >= min_isr(p)
            ):
                # The leader leaves: the first replica of the target ISR that may lead
                # (``_clean_successor``), if any.
                dirs = p.dirs
                target_isr = list(isr)
                target_isr.remove(broker_id)
                successor = NO_LEADER
                if target_isr and broker_id not in target_isr:
                    for b, directory in zip(replicas, dirs, strict=True):
                        if b == broker_id or b not in target_isr:
                            continue
                        key = (b, id(directory))
                        ok = leader_ok.get(key)
                        if ok is None:
                            ok = leader_ok[key] = self.acceptable_leader(b, directory)
                        if ok:
                            successor = b
                            break
                if successor != NO_LEADER:
                    handover = PartitionChangeRecord(
                        partition_id=p.partition_id, topic_id=p.topic_id, isr=target_isr, leader=successor
                    )
                    if p.last_known_elr:
                        handover.last_known_elr = []
                    records.append((handover, version))
                    drafted[p] = (tuple(target_isr), successor, dirs)
                    elrs[p] = ((), ())
                    continue
            if not self._leave_untouched(p, broker_id):
                self.leave_offline_dir(p, broker_id)

    def _leave_untouched(self, p: Partition, broker_id: int) -> bool:
        """``leave_offline_dir``'s two most common cases with ELR on, in one piece, for a
        partition this draft has not touched: a follower leaving an ISR that stays at min
        ISR (``_only_isr_shrinks``) and the leader leaving with a clean successor
        (``_clean_successor``), both without ELR or reassignment. Runs once per replica of
        a failed directory (tens of thousands). True when the record is written, False to
        take the general path."""
        isr = p.isr
        if broker_id not in isr or p.elr or p.adding or p.removing:
            return False
        leader = p.leader
        target_isr = [b for b in isr if b != broker_id]
        replicas, dirs = p.replicas, p.dirs
        if leader != broker_id:
            if leader not in target_isr or leader not in replicas or not self._keeps_epoch:
                return False
            if len(target_isr) < self.min_isr(p):
                return False
            leader_dir = dirs[replicas.index(leader)]
            memo = self._leader_ok.get(leader)
            ok = None if memo is None else memo.get(leader_dir)
            if ok is None:
                ok = self.acceptable_leader(leader, leader_dir)
            if not ok:
                return False
            shrink = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id, isr=target_isr)
            self.records.append((shrink, self._change_version))
            self.parts[p] = (tuple(target_isr), leader, dirs)
            self.elrs[p] = ((), p.last_known_elr)
            return True
        successor = self._clean_successor(p, broker_id, target_isr, dirs)
        if successor == NO_LEADER:
            return False
        lke = p.last_known_elr
        handover = PartitionChangeRecord(
            partition_id=p.partition_id, topic_id=p.topic_id, isr=target_isr, leader=successor
        )
        if lke:
            handover.last_known_elr = []
        self.records.append((handover, self._change_version))
        self.parts[p] = (tuple(target_isr), successor, dirs)
        self.elrs[p] = ((), ())
        return True

    def _clean_successor(self, p: Partition, broker_id: int, target_isr: list[int], dirs: tuple[uuid.UUID, ...]) -> int:
        """The leader the ELR change builder elects when leader ``broker_id`` leaves and the
        target ISR stays at min ISR (so no ELR): the first replica, in replica order, in the
        target ISR that may lead from its directory; NO_LEADER when the target ISR is below
        min ISR or none may lead (the builder then looks further)."""
        if not target_isr or len(target_isr) < self.min_isr(p):
            return NO_LEADER
        for b, directory in zip(p.replicas, dirs, strict=True):
            if b != broker_id and b in target_isr and self.acceptable_leader(b, directory):
                return b
        return NO_LEADER

    def _only_isr_shrinks(
        self,
        p: Partition,
        broker_id: int,
        target_isr: list[int],
        leader: int,
        dirs: tuple[uuid.UUID, ...],
        elr: tuple[int, ...],
    ) -> bool:
        """Whether the ELR change builder, taking follower ``broker_id`` out of the ISR, would
        change the ISR only: no reassignment under way, the leader staying (in the target
        ISR, acceptable from its directory), the target ISR still at min ISR (so no ELR) and
        no ELR now, and a metadata.version where an ISR shrink keeps the leader epoch."""
        if p.adding or p.removing or elr or leader == broker_id or leader not in target_isr:
            return False
        if leader not in p.replicas or len(target_isr) < self.min_isr(p) or not self._keeps_epoch:
            return False
        return self.acceptable_leader(leader, dirs[p.replicas.index(leader)])

    def _elect_with_builder(self, p: Partition, elr_on: bool) -> None:
        isr, leader, dirs = self.view(p)
        elr, lke = self.elrs.get(p, (p.elr, p.last_known_elr))
        view = pc.PartView(p.replicas, isr, leader, dirs, p.adding, p.removing, p.leader_recovery_state, elr, lke)
        rec = pc.build_change(
            view,
            p.topic_id,
            p.partition_id,
            acceptable=self.acceptable_leader,
            default_dir=lambda b: dirs[p.replicas.index(b)],
            metadata_version=self.image.metadata_version,
            elr_enabled=elr_on,
            min_isr=self.min_isr(p),
            election=self.election(p),
        )
        self._note(p, rec, isr, leader, dirs, elr, lke)

    def _note(
        self,
        p: Partition,
        rec: PartitionChangeRecord | None,
        isr: tuple[int, ...],
        leader: int,
        dirs: tuple[uuid.UUID, ...],
        elr: tuple[int, ...],
        lke: tuple[int, ...],
    ) -> None:
        if rec is None:
            return
        self.records.append((rec, self._change_version))
        self.parts[p] = (
            isr if rec.isr is None else tuple(rec.isr),
            leader if rec.leader == NO_LEADER_CHANGE else rec.leader,
            dirs,
        )
        self.elrs[p] = (
            elr if rec.eligible_leader_replicas is None else tuple(rec.eligible_leader_replicas),
            lke if rec.last_known_elr is None else tuple(rec.last_known_elr),
        )

    def unclean_shutdown(self, broker_id: int) -> None:
        """KIP-966: a broker that re-registers without a clean shutdown (its previous broker
        epoch is not the registered one) leaves every ISR and ELR and may not lead, as
        Kafka's handleBrokerShutdown with ELR on: ISR partitions first, then ELR ones."""
        self.set_active(broker_id, False)
        parts = sorted_partitions(self.image.broker_partitions(broker_id))
        in_isr = [p for p in parts if broker_id in self.view(p)[0]]
        in_elr = [p for p in parts if broker_id in self.elrs.get(p, (p.elr, ()))[0] and p not in in_isr]
        for p in in_isr + in_elr:
            isr, leader, dirs = self.view(p)
            elr, lke = self.elrs.get(p, (p.elr, p.last_known_elr))
            view = pc.PartView(p.replicas, isr, leader, dirs, p.adding, p.removing, p.leader_recovery_state, elr, lke)
            rec = pc.build_change(
                view,
                p.topic_id,
                p.partition_id,
                acceptable=lambda b, d: b != broker_id and self.acceptable_leader(b, d),
                default_dir=dict(zip(p.replicas, dirs, strict=True)).__getitem__,
                metadata_version=self.image.metadata_version,
                target_isr=[b for b in isr if b != broker_id],
                elr_enabled=True,
                min_isr=self.min_isr(p),
                unclean_shutdown=[broker_id],
                election=self.election(p),
            )
            self._note(p, rec, isr, leader, dirs, elr, lke)

    def assign_dir(self, p: Partition, broker_id: int, directory: uuid.UUID, offline: bool) -> None:
        """AssignReplicasToDirs of one replica, as Kafka's handleAssignReplicasToDirs: a change
        builder with the new directory and an election in which every replica, this one too,
        is judged by the directory it had (so a leaderless partition may get a leader, and one
        whose leader sat in an offline directory loses it); then, when the new directory is
        offline, the replica leaves the ISR and leadership, computed again from the state
        before the request (Kafka replays neither record before building the other).

        Runs once per replica of a request naming thousands, so the common case (only the
        directory changes) is written out here rather than through ``view`` and ``_note``."""
        parts, elrs = self.parts, self.elrs
        got, got_elr = parts.get(p), elrs.get(p)
        if got is None and got_elr is None and not offline and self._assign_untouched(p, broker_id, directory):
            return
        isr, leader, dirs = (p.isr, p.leader, p.dirs) if got is None else got
        elr, lke = (p.elr, p.last_known_elr) if got_elr is None else got_elr
        elr_on = self.elr_enabled()
        replicas = p.replicas
        at = replicas.index(broker_id)
        had = dirs[at]
        # Directories are canonical objects (one per id), so "is" is the usual equality.
        same = had is directory or had == directory
        new_dirs = dirs if same else (*dirs[:at], directory, *dirs[at + 1 :])
        rec: PartitionChangeRecord | None
        if self._only_directories_change(p, isr, leader, dirs, elr, elr_on):
            # The builder's answer without its steps (the common case, ~2x cheaper).
            if not same:
                rec = PartitionChangeRecord(
                    partition_id=p.partition_id, topic_id=p.topic_id, directories=list(new_dirs)
                )
                self.records.append((rec, self._change_version))
                parts[p] = (isr, leader, new_dirs)
                elrs[p] = (elr, lke)
        else:
            view = pc.PartView(replicas, isr, leader, dirs, p.adding, p.removing, p.leader_recovery_state, elr, lke)
            rec = pc.build_change(
                view,
                p.topic_id,
                p.partition_id,
                acceptable=self.acceptable_leader,
                default_dir=lambda b: dirs[replicas.index(b)],
                metadata_version=self.image.metadata_version,
                elr_enabled=elr_on,
                min_isr=self.min_isr(p) if elr_on else 1,
                target_dirs={broker_id: directory},
            )
            self._note(p, rec, isr, leader, new_dirs, elr, lke)
        if not offline:
            return
        before = (got, got_elr)
        after = (parts.get(p), elrs.get(p))
        self._restore(p, before)
        n = len(self.records)
        self.leave_offline_dir(p, broker_id)
        self._restore(p, after)
        for second, _ in self.records[n:]:
            # the end state: the second record replayed over the first
            assert isinstance(second, PartitionChangeRecord)
            isr2, leader2, dirs2 = self.view(p)
            elr2, lke2 = self.elrs.get(p, (p.elr, p.last_known_elr))
            self.parts[p] = (
                isr2 if second.isr is None else tuple(second.isr),
                leader2 if second.leader == NO_LEADER_CHANGE else second.leader,
                dirs2,
            )
            self.elrs[p] = (
                elr2 if second.eligible_leader_replicas is None else tuple(second.eligible_leader_replicas),
                lke2 if second.last_known_elr is None else tuple(second.last_known_elr),
            )

    def assign_dirs(self, parts: Sequence[Partition], broker_id: int, directory: uuid.UUID, offline: bool) -> None:
        """``assign_dir`` of ``broker_id``'s replica of each of ``parts`` (partitions of one
        topic, in request order) to ``directory``. The request's thousands of replicas come
        topic by topic, so what ``_assign_untouched`` asks per replica (the feature, the
        topic's min ISR, whether a leader may lead from its directory) is read once here,
        and the common case is written out in the loop."""
        if offline or not self._jbod or not parts:
            for p in parts:
                self.assign_dir(p, broker_id, directory, offline)
            return
        drafted, elrs, records = self.parts, self.elrs, self.records
        version = self._change_version
        elr_on = self.elr_enabled()
        min_isr = self.min_isr(parts[0]) if elr_on else 0
        # Keyed by the directory object's id, not the UUID (hashing one runs Python code):
        # the partitions hold their directory objects for the whole call.
        leader_ok: dict[tuple[int, int], bool] = {}
        for p in parts:
            leader, isr = p.leader, p.isr
            if (
                p in drafted
                or p in elrs
                or p.elr
                or p.adding
                or p.removing
                or leader < 0
                or leader not in isr
                or len(isr) < min_isr
                or p.topic_id is not parts[0].topic_id
            ):
                self.assign_dir(p, broker_id, directory, offline)
                continue
            replicas, dirs = p.replicas, p.dirs
            if leader not in replicas:
                self.assign_dir(p, broker_id, directory, offline)
                continue
            leader_dir = dirs[replicas.index(leader)]
            key = (leader, id(leader_dir))
            ok = leader_ok.get(key)
            if ok is None:
                ok = leader_ok[key] = self.acceptable_leader(leader, leader_dir)
            if not ok:
                self.assign_dir(p, broker_id, directory, offline)
                continue
            at = replicas.index(broker_id)
            had = dirs[at]
            # Directories are canonical objects (one per id), so "is" is the usual equality.
            if had is directory or had == directory:
                continue
            new_dirs = (*dirs[:at], directory, *dirs[at + 1 :])
            rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id, directories=list(new_dirs))
            records.append((rec, version))
            drafted[p] = (isr, leader, new_dirs)
            elrs[p] = (p.elr, p.last_known_elr)

    def _assign_untouched(self, p: Partition, broker_id: int, directory: uuid.UUID) -> bool:
        """``assign_dir``'s most common case in one piece: a partition this draft has not
        touched, an online directory, and the change builder would change nothing but
        Directories (``_only_directories_change``'s conditions, read straight off the
        partition). True when done (the record written, or none needed), False to take the
        general path."""
        leader, isr, elr = p.leader, p.isr, p.elr
        if elr or p.adding or p.removing or leader < 0 or leader not in isr or not self._jbod:
            return False
        replicas, dirs = p.replicas, p.dirs
        if leader not in replicas:
            return False
        leader_dir = dirs[replicas.index(leader)]
        memo = self._leader_ok.get(leader)
        ok = None if memo is None else memo.get(leader_dir)
        if ok is None:
            ok = self.acceptable_leader(leader, leader_dir)
        if not ok:
            return False
        elr_on = self._elr_on
        if elr_on is None:
            elr_on = self.elr_enabled()
        if elr_on and len(isr) < self.min_isr(p):
            return False  # the ELR may change: the general path decides
        at = replicas.index(broker_id)
        had = dirs[at]
        # Directories are canonical objects (one per id), so "is" is the usual equality.
        if had is directory or had == directory:
            return True
        new_dirs = (*dirs[:at], directory, *dirs[at + 1 :])
        rec = PartitionChangeRecord(partition_id=p.partition_id, topic_id=p.topic_id, directories=list(new_dirs))
        self.records.append((rec, self._change_version))
        self.parts[p] = (isr, leader, new_dirs)
        self.elrs[p] = (elr, p.last_known_elr)
        return True

    def _partitions_in_dir(self, directory: uuid.UUID) -> set[Partition]:
        """Every partition with a replica in ``directory``, any broker's (Kafka's
        directoriesToPartitions)."""
        found: set[Partition] = set()
        for per in self.image.index.values():
            got = per.get(directory)
            if got:
                found |= got
        return found

    def leave_offline_dir(self, p: Partition, broker_id: int) -> None:
        """``broker_id``'s replica of ``p`` sits in an offline directory: Kafka's
        generateLeaderAndIsrUpdates with the broker to remove, for a directory reported
        offline (handleDirectoriesOffline) or an assignment to one. Unlike fencing, which
        visits only the partitions whose ISR holds the broker, both run the change builder
        for every partition in the directory: where the broker neither leads nor sits in the
        ISR the builder can still elect a leaderless partition (so an assignment's own
        election may be written a second time, docs/twin.md #21)."""
        isr, leader, _ = self.view(p)
        if broker_id in isr or leader == broker_id:
            self.remove_from_isr(p, broker_id)
            return
        self._isr_step_with_builder(p, broker_id)

    def _only_directories_change(
        self,
        p: Partition,
        isr: tuple[int, ...],
        leader: int,
        dirs: tuple[uuid.UUID, ...],
        elr: tuple[int, ...],
        elr_on: bool,
    ) -> bool:
        """Whether the change builder, given only a new directory, would change nothing but
        Directories: no reassignment under way, the leader in the ISR and acceptable from the
        directory it has (the election keeps it), the ELR already what the unchanged ISR
        gives (or empty with ELR off), and a metadata.version that records directories."""
        if p.adding or p.removing or leader < 0 or leader not in isr or leader not in p.replicas:
            return False
        if not self._jbod or not self.acceptable_leader(leader, dirs[p.replicas.index(leader)]):
            return False
        if not elr_on:
            return not elr
        min_isr = self.min_isr(p)
        if len(isr) >= min_isr:  # target_elr's first case, without the call
            return not elr
        return pc.target_elr(isr, elr, isr, min_isr) == list(elr)

    def _restore(
        self,
        p: Partition,
        saved: tuple[PartView | None, tuple[tuple[int, ...], tuple[int, ...]] | None],
    ) -> None:
        view, elrs = saved
        if view is None:
            self.parts.pop(p, None)
        else:
            self.parts[p] = view
        if elrs is None:
            self.elrs.pop(p, None)
        else:
            self.elrs[p] = elrs

    def remove_from_isr(self, p: Partition, broker_id: int) -> None:
        """Take ``broker_id`` out of the ISR and leadership; the last ISR member stays (leader -1)
        unless ELR is on, where the ISR may become empty (KIP-966)."""
        got = self.parts.get(p)
        isr, leader, dirs = (p.isr, p.leader, p.dirs) if got is None else got
        if broker_id not in isr and leader != broker_id:
            return
        if self.elr_enabled():
            self._remove_with_elr(p, broker_id, isr, leader, dirs)
            return
        if self.election(p) == pc.UNCLEAN:
            self._isr_step_with_builder(p, broker_id)
            return
        new_isr = tuple(b for b in isr if b != broker_id) or isr
        keep = leader not in (NO_LEADER, broker_id)
        if keep and self.acceptable_leader(leader, dirs[p.replicas.index(leader)]):
            new_leader = leader
        else:
            new_leader = self.elect(p, new_isr, dirs, exclude=broker_id)
        if new_isr == isr and new_leader == leader:
            return
        leader_field = NO_LEADER_CHANGE if new_leader == leader else new_leader
        if leader_field == NO_LEADER_CHANGE and self.image.metadata_version < 12 and new_leader != NO_LEADER:
            leader_field = new_leader  # before 3.6-IV0 an ISR shrink bumps the leader epoch
        self.change(p, isr=None if new_isr == isr else new_isr, leader=leader_field)

    def _isr_step_with_builder(self, p: Partition, broker_id: int) -> None:
        """Kafka's generateLeaderAndIsrUpdates step for one partition through the change
        builder: ``broker_id`` leaves the ISR and may not lead, the topic's election type,
        ELR as the feature says. Without ELR and with unclean elections allowed, the builder
        keeps the last ISR member when no replica is left (leader -1), or elects any live
        replica outside the ISR and resets the ISR to it."""
        isr, leader, dirs = self.view(p)
        elr, lke = self.elrs.get(p, (p.elr, p.last_known_elr))
        elr_on = self.elr_enabled()
        view = pc.PartView(p.replicas, isr, leader, dirs, p.adding, p.removing, p.leader_recovery_state, elr, lke)
        rec = pc.build_change(
            view,
            p.topic_id,
            p.partition_id,
            acceptable=lambda b, d: b != broker_id and self.acceptable_leader(b, d),
            default_dir=lambda b: dirs[p.replicas.index(b)],
            metadata_version=self.image.metadata_version,
            target_isr=[b for b in isr if b != broker_id],
            elr_enabled=elr_on,
            min_isr=self.min_isr(p) if elr_on else 1,
            election=self.election(p),
        )
        self._note(p, rec, isr, leader, dirs, elr, lke)

    # ------------------------------------------------------------------ broker changes

    def fence(self, reg: BrokerInfo, *, with_record: bool = True) -> None:
        self.set_active(reg.broker_id, False)
        for p in sorted_partitions(self.image.broker_partitions(reg.broker_id)):
            self.remove_from_isr(p, reg.broker_id)
        if not with_record:
            return
        if fv.uses_registration_change_record(self.image.metadata_version):
            change = BrokerRegistrationChangeRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch, fenced=1)
            self.records.append((change, 0))
        else:
            self.records.append((FenceBrokerRecord(id=reg.broker_id, epoch=reg.epoch), 0))

    def unfence(self, reg: BrokerInfo) -> None:
        if fv.uses_registration_change_record(self.image.metadata_version):
            change = BrokerRegistrationChangeRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch, fenced=-1)
            self.records.append((change, 0))
        else:
            self.records.append((UnfenceBrokerRecord(id=reg.broker_id, epoch=reg.epoch), 0))
        # Kafka's unfencing election takes the broker as an acceptable leader outright (its
        # brokerToAdd), even one whose registration still says "in controlled shutdown" from
        # a shutdown that ended in fencing (the flag is never cleared; later elections do
        # look at it).
        self.set_active(reg.broker_id, True)
        # As Kafka's handleBrokerUnfenced: the change builder runs over EVERY leaderless
        # partition of the cluster, not only the broker's own, so a partition whose other
        # replica became electable without an election (its directory reassigned to an
        # online one, say) gets a leader now too. With ELR the ISR may be empty: the
        # builder elects from the ELR or the last known leader.
        elr_on = self.elr_enabled()
        for p in sorted_partitions(self.image.leaderless):
            if self.view(p)[1] == NO_LEADER:
                self._elect_with_builder(p, elr_on)

    def dirs_offline(self, reg: BrokerInfo, newly_offline: list[uuid.UUID]) -> None:
        """PartitionChangeRecords for the partitions in the dirs, then one BRCR v2.

        As Kafka's handleDirectoriesOffline: per newly offline directory (in the
        registration's order), the ISR step with this broker to remove over every partition
        that has a replica in that directory, whichever broker's: Kafka indexes partitions
        by directory id alone, and brokers may register the same id. Each step is built from
        the state before the heartbeat, so a partition met again under a second directory
        gets the same record again (docs/twin.md #22). O(replicas in the dirs + brokers)."""
        online = self.online_set(reg.broker_id) or frozenset()
        gone = frozenset(newly_offline)
        self.set_online(reg.broker_id, online - gone)
        made: dict[Partition, list[RecordAndVersion]] = {}
        fast = self.elr_enabled()
        broker_id = reg.broker_id
        parts, elrs = self.parts, self.elrs
        if len(newly_offline) == 1 and fast:
            # One directory (the usual report) cannot meet a partition twice: nothing to remember.
            self._leave_dir(sorted_partitions(self._partitions_in_dir(newly_offline[0])), broker_id)
            newly_offline = []
        for directory in newly_offline:
            for p in sorted_partitions(self._partitions_in_dir(directory)):
                again = made.get(p)
                if again is not None:
                    self.records.extend(again)
                    continue
                n = len(self.records)
                if not (fast and p not in parts and p not in elrs and self._leave_untouched(p, broker_id)):
                    self.leave_offline_dir(p, broker_id)
                made[p] = self.records[n:]
        remaining = [x for x in reg.online_dirs if x not in gone]
        self.records.append(
            (BrokerRegistrationChangeRecord(broker_id=reg.broker_id, broker_epoch=reg.epoch, log_dirs=remaining), 2)
        )
