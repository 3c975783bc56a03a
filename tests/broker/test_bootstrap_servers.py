"""The fake broker with ``controller.quorum.bootstrap.servers`` instead of static voters.

As Kafka's observer: the first Fetch goes to a bootstrap server, the leader comes from the
answer, the voter set from the log's VotersRecord (kraft.version 1), and the registration
and heartbeat channels follow the leader's endpoint on the broker's controller listener.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kraft_jbod.broker.config import BrokerConfig
from kraft_jbod.broker.follower import MetadataFollower
from kraft_jbod.broker.lifecycle import State
from kraft_jbod.broker.server import FakeBroker
from kraft_jbod.controller import voters
from kraft_jbod.controller.config import parse_properties
from kraft_jbod.controller.server import ControllerServer
from kraft_jbod.demo.scenario import CLUSTER_ID, broker_properties, controller_config, wait_for
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.fetch_response import (
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
)
from kraft_jbod.messages.k_raft_version_record import KRaftVersionRecord
from kraft_jbod.messages.voters_record import VotersRecord
from kraft_jbod.storage import StorageLayout, format_storage
from kraft_jbod.wire.constants import METADATA_TOPIC_ID
from kraft_jbod.wire.records import (
    CONTROL_MASK,
    ControlRecordKey,
    ControlRecordType,
    Record,
    RecordBatch,
    write_control_record_key,
    write_record_batch,
)


def dynamic_properties(tmp_path: Path, port: int) -> str:
    static = broker_properties(tmp_path, 1, port)
    lines = [ln for ln in static.splitlines() if not ln.startswith("controller.quorum.voters=")]
    return "\n".join([*lines, f"controller.quorum.bootstrap.servers=127.0.0.1:{port}", ""])


def test_config_accepts_bootstrap_servers_instead_of_voters(tmp_path: Path) -> None:
    props = parse_properties(dynamic_properties(tmp_path, 9093))
    cfg = BrokerConfig.from_properties(props)
    assert cfg.voters == () and cfg.bootstrap_servers == (("127.0.0.1", 9093),)
    assert cfg.controller_listener == "CONTROLLER"
    neither = {k: v for k, v in props.items() if k != "controller.quorum.bootstrap.servers"}
    with pytest.raises(ConfigError, match=r"controller\.quorum\.voters .* or controller\.quorum\.bootstrap\.servers"):
        BrokerConfig.from_properties(neither)
    with pytest.raises(ConfigError, match="is not HOST:PORT"):
        BrokerConfig.from_properties({**props, "controller.quorum.bootstrap.servers": "host-without-port"})


async def test_bootstrap_servers_broker_runs_against_a_kraft_version_1_controller(tmp_path: Path) -> None:
    controller = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False, kraft_version=1)
    await controller.start()
    port = controller.addresses[0][1]
    props = parse_properties(dynamic_properties(tmp_path, port))
    format_storage(StorageLayout.from_properties(props), CLUSTER_ID)
    broker = FakeBroker(BrokerConfig.from_properties(props))
    try:
        await broker.start()
        await wait_for("broker RUNNING", lambda: broker.lifecycle.state is State.RUNNING, 20)
        f = broker.follower
        assert f.kraft_version == 1
        assert f.voters == controller.state.voters
        assert f.leader_address("CONTROLLER") == ("127.0.0.1", port)
        assert any(e.kind == "leader-endpoint" for e in broker.events)
        assert controller.state.brokers[1].fenced is False
    finally:
        await broker.close()
        await controller.close()


def _control_batch(base: int, epoch: int, records: list[tuple[ControlRecordType, object]]) -> bytes:
    recs = []
    for i, (ctype, msg) in enumerate(records):
        key = bytearray()
        write_control_record_key(key, ControlRecordKey(0, int(ctype)))
        recs.append(Record(offset_delta=i, key=bytes(key), value=msg.encode(0)))  # type: ignore[attr-defined]
    out = bytearray()
    write_record_batch(
        out,
        RecordBatch.of(recs, base_offset=base, base_timestamp=0, partition_leader_epoch=epoch, attributes=CONTROL_MASK),
    )
    return bytes(out)


def test_follower_learns_and_forgets_the_voter_set() -> None:
    local = voters.LocalVoter(3000, uuid.uuid4(), (("CONTROLLER", "c1", 9093),))
    vr = VotersRecord(version=0, voters=[local.voter()])
    data = _control_batch(
        0, 1, [(ControlRecordType.KRAFT_VERSION, KRaftVersionRecord(0, 1)), (ControlRecordType.KRAFT_VOTERS, vr)]
    )
    f = MetadataFollower(cluster_id=CLUSTER_ID, node_id=1)
    assert f.leader_address("CONTROLLER") is None
    resp = FetchResponse(
        responses=[
            FetchableTopicResponse(
                topic_id=METADATA_TOPIC_ID,
                partitions=[
                    PartitionData(
                        partition_index=0,
                        high_watermark=0,  # nothing published yet: a truncation is allowed
                        current_leader=LeaderIdAndEpoch(leader_id=3000, leader_epoch=1),
                        records=data,
                    )
                ],
            )
        ],
        node_endpoints=[NodeEndpoint(node_id=3000, host="bootstrap-answer", port=1)],
    )
    f.on_response(resp)
    assert (f.kraft_version, f.voters) == (1, vr)
    # The VotersRecord endpoint on the controller listener wins over NodeEndpoints.
    assert f.leader_address("CONTROLLER") == ("c1", 9093)
    assert f.leader_address("OTHER") == ("bootstrap-answer", 1)
    f._truncate(1)  # below the VotersRecord: forgotten, as Kafka's voter-set history is
    assert (f.kraft_version, f.voters) == (1, None)
    assert f.leader_address("CONTROLLER") == ("bootstrap-answer", 1)
