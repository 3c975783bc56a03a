"""A log-in-a-list around ControllerState, doing what the server does per request.

Every record goes through the real metadata-record frame (encode, then decode) before
``apply`` sees it, and every response is encoded at the request's version, so a record
or response the wire cannot carry fails the test that produced it.
"""

from __future__ import annotations

import uuid
from typing import Any

from kraft_jbod import codec
from kraft_jbod.controller import features as fv
from kraft_jbod.controller.state import ControllerState, Outcome, RecordAndVersion
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.wire.message import Message

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def dir_id(broker: int, index: int) -> uuid.UUID:
    """A non-reserved, readable directory id."""
    return uuid.UUID(int=(0x1000 + broker) << 64 | (0x100 + index))


def incarnation(broker: int, n: int = 0) -> uuid.UUID:
    return uuid.UUID(int=(0x2000 + broker) << 64 | (0x10 + n))


class Cluster:
    def __init__(self, *, level: int = fv.DEFAULT_LEVEL, profile: Any = "kafka", **kwargs: Any) -> None:
        self.kwargs = dict(kwargs, profile=profile)
        self.state = ControllerState(cluster_id=CLUSTER_ID, node_id=3000, **self.kwargs)
        self.log: list[bytes] = []
        self.now = 1_000
        self.commit(ControllerState.bootstrap_records(level))

    @property
    def end_offset(self) -> int:
        return len(self.log)

    def commit(self, records: list[RecordAndVersion]) -> None:
        for rec, ver in records:
            raw = codec.encode_metadata_record(rec, ver)
            decoded, dver = codec.decode_metadata_record(raw)
            assert dver == ver
            offset = len(self.log)
            self.log.append(raw)
            self.state.apply(offset, decoded, dver)

    def call(self, api_key: int, version: int, request: Message) -> Outcome:
        # The request crosses the wire too, so fields absent at `version` are dropped.
        wire = request.encode(version)
        decoded = type(request).decode(wire, version)
        out = self.state.handle(api_key, version, decoded, now_ms=self.now, next_offset=self.end_offset)
        out.response.encode(version)
        self.commit(out.records)
        return out

    def tick(self) -> list[RecordAndVersion]:
        records = self.state.tick(now_ms=self.now, next_offset=self.end_offset)
        self.commit(records)
        return records

    def restart(self) -> ControllerState:
        """A fresh state rebuilt from the log bytes, which replaces the live one."""
        fresh = ControllerState(cluster_id=CLUSTER_ID, node_id=3000, **self.kwargs)
        for offset, raw in enumerate(self.log):
            rec, ver = codec.decode_metadata_record(raw)
            fresh.apply(offset, rec, ver)
        self.state = fresh
        return fresh

    # -- request builders

    def register(
        self,
        broker: int,
        dirs: list[uuid.UUID] | None = None,
        *,
        version: int = 4,
        inc: int = 0,
        cluster_id: str = CLUSTER_ID,
        mv_range: tuple[int, int] | None = (1, fv.NEWEST_LEVEL),
        extra_features: list[Feature] | None = None,
        zk: bool = False,
    ) -> Outcome:
        feats = [] if mv_range is None else [Feature(fv.METADATA_VERSION, mv_range[0], mv_range[1])]
        if extra_features is None:
            # What a 4.4 broker lists besides metadata.version (features with min 0 only from v4).
            extra_features = [Feature(n, 0, hi) for n, hi in fv.IMPLEMENTED_MAX.items()] if version >= 4 else []
        feats += extra_features
        req = BrokerRegistrationRequest(
            broker_id=broker,
            cluster_id=cluster_id,
            incarnation_id=incarnation(broker, inc),
            listeners=[Listener("PLAINTEXT", "localhost", 9092 + broker, 0)],
            features=feats,
            rack=None,
            is_migrating_zk_broker=zk,
            log_dirs=[dir_id(broker, 0)] if dirs is None else dirs,
        )
        return self.call(62, version, req)

    def epoch(self, broker: int) -> int:
        return self.state.brokers[broker].epoch

    def heartbeat(
        self,
        broker: int,
        *,
        want_fence: bool = False,
        want_shut_down: bool = False,
        offset: int | None = None,
        offline: list[uuid.UUID] | None = None,
        epoch: int | None = None,
        version: int = 1,
        cordoned: list[uuid.UUID] | None = None,
    ) -> Outcome:
        req = BrokerHeartbeatRequest(
            broker_id=broker,
            broker_epoch=self.epoch(broker) if epoch is None else epoch,
            current_metadata_offset=self.end_offset - 1 if offset is None else offset,
            want_fence=want_fence,
            want_shut_down=want_shut_down,
            offline_log_dirs=offline or [],
            cordoned_log_dirs=cordoned,
        )
        return self.call(63, version, req)

    def start_broker(self, broker: int, dirs: list[uuid.UUID] | None = None) -> None:
        out = self.register(broker, dirs)
        assert out.response.error_code == 0, out.response  # type: ignore[attr-defined]
        hb = self.heartbeat(broker)
        assert hb.response.is_fenced is False, hb.response  # type: ignore[attr-defined]

    def create_topic(self, name: str, partitions: int, rf: int, *, version: int = 7) -> Outcome:
        req = CreateTopicsRequest(topics=[CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf)])
        return self.call(19, version, req)

    def assign(self, broker: int, directory: uuid.UUID, parts: list[tuple[uuid.UUID, int]]) -> Outcome:
        by_topic: dict[uuid.UUID, list[int]] = {}
        for tid, pid in parts:
            by_topic.setdefault(tid, []).append(pid)
        req = AssignReplicasToDirsRequest(
            broker_id=broker,
            broker_epoch=self.epoch(broker),
            directories=[
                DirectoryData(
                    id=directory,
                    topics=[
                        TopicData(topic_id=t, partitions=[PartitionData(p) for p in ps]) for t, ps in by_topic.items()
                    ],
                )
            ],
        )
        return self.call(73, 0, req)
