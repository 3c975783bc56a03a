"""Restarts with a log dir gone, as a Kafka 4.4 broker handles them (docs/broker.md, "Restarts").

One broker with two log dirs holds topic ``w`` (4 partitions, replication factor 1, spread
over both dirs) and is stopped; then d1 is changed and the broker started again:

* d1 missing, or d1 empty and unformatted: the start stops with "no meta.properties in ...",
  as Kafka's does ("No `meta.properties` found ... have you run kafka-storage.sh");
* d1 replaced by a file: the broker starts with d1 offline and unregistered (its id cannot
  be read), creates none of d1's replicas elsewhere (Kafka skips creating a log while a dir
  is offline), sends no assignment for them and no OfflineLogDirs; they are offline;
* d1 empty and formatted (a new directory.id): the broker registers the new id, creates
  d1's replicas afresh (no dir is offline) and assigns them with AssignReplicasToDirs.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller.config import parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, broker_properties, controller_config, wait_for
from kraft_jbod.errors import StorageError
from kraft_jbod.messages.alter_replica_log_dirs_request import (
    AlterReplicaLogDir,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirTopic,
)
from kraft_jbod.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.storage import StorageLayout, format_storage
from tests.broker.test_e2e import _create


class Before:
    """The cluster after the first run: the controller, the stopped broker's config, and
    what was where."""

    def __init__(
        self, controller: ControllerServer, config: BrokerConfig, tid: uuid.UUID, old_d1: uuid.UUID, in_d1: set[int]
    ) -> None:
        self.controller, self.config, self.tid, self.old_d1, self.in_d1 = controller, config, tid, old_d1, in_d1

    @property
    def d1(self) -> Path:
        return self.config.layout.log_dirs[1]


async def _first_run(tmp_path: Path) -> Before:
    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False)
    await controller.start()
    port = controller.addresses[0][1]
    props = parse_properties(broker_properties(tmp_path, 1, port))
    format_storage(StorageLayout.from_properties(props), CLUSTER_ID)
    broker = FakeBroker(BrokerConfig.from_properties(props))
    await broker.start()
    try:
        await wait_for("broker RUNNING", lambda: broker.lifecycle.state is State.RUNNING, 20)
        await _create(port, "w", 4)
        await wait_for(
            "placement",
            lambda: (
                broker.queue.queued == 0
                and len(broker.image.partitions) == 4
                and all(p.directories[0].int > 100 for p in broker.image.partitions.values())
            ),
            20,
        )
        d1 = broker.dirs.by_path(broker.config.layout.log_dirs[1])
        assert d1 is not None
        tid = broker.image.topic_id("w")
        assert tid is not None
        in_d1 = {p.partition_id for p in broker.image.partitions.values() if p.directories[0] == d1.dir_id}
        assert in_d1 and len(in_d1) < 4  # placement spread the replicas over both dirs
        return Before(controller, broker.config, tid, d1.dir_id, in_d1)
    finally:
        await broker.close()


def _assignments(broker: FakeBroker) -> list[str]:
    return [e.text for e in broker.events if e.kind == "assigned"]


@pytest.mark.parametrize("case", ["missing", "empty and unformatted"])
async def test_a_missing_or_unformatted_dir_stops_the_start(tmp_path: Path, case: str) -> None:
    before = await _first_run(tmp_path)
    try:
        shutil.rmtree(before.d1)
        if case == "empty and unformatted":
            before.d1.mkdir()
        broker = FakeBroker(before.config)
        with pytest.raises(StorageError, match=f"no meta.properties in {before.d1}: format it first"):
            await broker.start()
        await broker.close()
        assert not before.d1.exists() or list(before.d1.iterdir()) == []  # nothing written there
    finally:
        await before.controller.close()


async def test_a_dir_replaced_by_a_file_is_offline_and_its_replicas_are_not_recreated(tmp_path: Path) -> None:
    before = await _first_run(tmp_path)
    shutil.rmtree(before.d1)
    before.d1.write_text("not a directory\n")
    sent: list[AssignReplicasToDirsRequest] = []
    broker = FakeBroker(before.config)
    await broker.start()
    original = broker._assign.call

    async def spy(key: int, build: object, timeout_ms: int | None = None) -> object:
        if isinstance(build, AssignReplicasToDirsRequest):
            sent.append(build)
        return await original(key, build, timeout_ms)

    broker._assign.call = spy  # type: ignore[method-assign]
    c = before.controller
    try:
        await wait_for("broker RUNNING", lambda: broker.lifecycle.state is State.RUNNING, 20)
        d0 = broker.dirs.by_path(before.config.layout.log_dirs[0])
        assert d0 is not None and list(broker.dirs.dirs) == [d0.dir_id]
        assert set(c.state.brokers[1].registered_dirs) == {d0.dir_id}  # d1 is not registered
        assert broker.lifecycle.reported == set()  # nor reported offline: its id is unknown
        for pid in before.in_d1:
            assert broker.dirs.location((before.tid, pid)) is None  # not recreated in d0
            p = c.state.partition(before.tid, pid)
            assert p.dirs[0] == before.old_d1 and p.leader == -1  # offline: no leader (RF 1)
        for pid in set(range(4)) - before.in_d1:
            assert c.state.partition(before.tid, pid).leader == 1
        assert all(a.directories == [] or all(d.id == d0.dir_id for d in a.directories) for a in sent)
        assert not [
            t
            for a in sent
            for d in a.directories
            for t in d.topics
            if any(p.partition_index in before.in_d1 for p in t.partitions)
        ]
        infos = {i.path: i for i in broker.log_dir_infos()}
        assert infos[str(before.d1.absolute())].online is False
        # AlterReplicaLogDirs: into the offline dir KAFKA_STORAGE_ERROR; a replica that was not
        # created REPLICA_NOT_AVAILABLE (Kafka: no local log, NotLeaderOrFollower).
        lost = min(before.in_d1)
        kept = min(set(range(4)) - before.in_d1)
        body = AlterReplicaLogDirsRequest(
            dirs=[
                AlterReplicaLogDir(path=str(before.d1.absolute()), topics=[AlterReplicaLogDirTopic("w", [kept])]),
                AlterReplicaLogDir(path=str(Path(d0.path).absolute()), topics=[AlterReplicaLogDirTopic("w", [lost])]),
            ]
        )
        answer = broker.alter_replica_log_dirs(body)
        codes = {p.partition_index: p.error_code for t in answer.results for p in t.partitions}
        assert codes == {kept: ErrorCode.KAFKA_STORAGE_ERROR, lost: ErrorCode.REPLICA_NOT_AVAILABLE}
    finally:
        await broker.close()
        await c.close()


async def test_a_formatted_empty_dir_gets_the_replicas_afresh_and_assigns_them(tmp_path: Path) -> None:
    before = await _first_run(tmp_path)
    shutil.rmtree(before.d1)
    format_storage(before.config.layout, CLUSTER_ID)  # kafka-storage format --ignore-formatted
    broker = FakeBroker(before.config)
    await broker.start()
    c = before.controller
    try:
        new = broker.dirs.by_path(before.d1)
        assert new is not None and new.dir_id != before.old_d1
        await wait_for("broker RUNNING again", lambda: broker.lifecycle.state is State.RUNNING, 20)
        online = {d.dir_id for d in broker.dirs.online}
        assert set(c.state.brokers[1].registered_dirs) == online
        await wait_for(
            "every replica assigned to an online dir and led",
            lambda: all(
                c.state.partition(before.tid, pid).dirs[0] in online and c.state.partition(before.tid, pid).leader == 1
                for pid in range(4)
            ),
            20,
        )
        for pid in before.in_d1:
            here = broker.dirs.location((before.tid, pid))
            # the folders still in d0 count: each re-created replica goes to the emptier d1
            assert here is new and (here.path / f"w-{pid}" / "partition.metadata").is_file()
            assert c.state.partition(before.tid, pid).dirs[0] == here.dir_id
        assert any("accepted" in text for text in _assignments(broker))
        assert before.old_d1 not in c.state.brokers[1].online_set
    finally:
        await broker.close()
        await c.close()
