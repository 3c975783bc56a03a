"""AllocateProducerIds through the state machine: blocks, epochs, exhaustion, replay."""

from __future__ import annotations

import pytest

from kraft_jbod.controller import producer_ids as pids
from kraft_jbod.controller.state import API_ALLOCATE_PRODUCER_IDS, ControllerState
from kraft_jbod.errors import ProtocolError, StorageError
from kraft_jbod.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraft_jbod.messages.producer_ids_record import ProducerIdsRecord
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from tests.controller.harness import CLUSTER_ID, Cluster, dir_id

STALE = 77


def allocate(c: Cluster, broker: int, epoch: int | None = None) -> tuple[int, int, int, int]:
    """(error, start, len, records written)."""
    real = c.epoch(broker) if epoch is None else epoch
    out = c.call(API_ALLOCATE_PRODUCER_IDS, 0, AllocateProducerIdsRequest(broker_id=broker, broker_epoch=real))
    r = out.response
    return r.error_code, r.producer_id_start, r.producer_id_len, len(out.records)  # type: ignore[attr-defined]


@pytest.fixture
def c() -> Cluster:
    cl = Cluster()
    cl.start_broker(1, [dir_id(1, 0)])
    cl.start_broker(2, [dir_id(2, 0)])
    return cl


def test_blocks_are_consecutive_thousands_from_zero(c: Cluster) -> None:
    assert c.state.next_producer_id is None
    got = [allocate(c, b) for b in (1, 2, 1)]
    assert got == [(0, 0, 1000, 1), (0, 1000, 1000, 1), (0, 2000, 1000, 1)]
    assert c.state.next_producer_id == 3000


def test_the_record_names_broker_epoch_and_next_id(c: Cluster) -> None:
    out = c.call(API_ALLOCATE_PRODUCER_IDS, 0, AllocateProducerIdsRequest(broker_id=2, broker_epoch=c.epoch(2)))
    assert out.records == [(ProducerIdsRecord(broker_id=2, broker_epoch=c.epoch(2), next_producer_id=1000), 0)]


@pytest.mark.parametrize(
    ("broker", "epoch_delta"),
    [(1, 1), (1, -1), (9, 0)],
    ids=["epoch-ahead", "epoch-behind", "unknown-broker"],
)
def test_stale_or_unknown_epoch_allocates_nothing(c: Cluster, broker: int, epoch_delta: int) -> None:
    allocate(c, 1)
    epoch = (c.epoch(broker) if broker in c.state.brokers else 5) + epoch_delta
    before = c.end_offset
    assert allocate(c, broker, epoch) == (STALE, 0, 0, 0)
    assert c.end_offset == before and c.state.next_producer_id == 1000


def test_fenced_broker_with_its_epoch_still_gets_a_block() -> None:
    # Kafka checks only the epoch, not fencing: a just-registered (fenced) broker may ask.
    c = Cluster()
    c.register(1, [dir_id(1, 0)])
    assert c.state.brokers[1].fenced
    assert allocate(c, 1) == (0, 0, 1000, 1)


def test_unregistered_broker_is_stale(c: Cluster) -> None:
    epoch = c.epoch(2)
    c.call(64, 0, UnregisterBrokerRequest(broker_id=2))
    assert allocate(c, 2, epoch) == (STALE, 0, 0, 0)


@pytest.mark.parametrize(
    ("next_id", "expected"),
    [
        (pids.MAX_PRODUCER_ID - 1000, (0, pids.MAX_PRODUCER_ID - 1000, 1000, 1)),
        (pids.MAX_PRODUCER_ID - 999, (pids.UNKNOWN_SERVER_ERROR, 0, 0, 0)),
        (pids.MAX_PRODUCER_ID, (pids.UNKNOWN_SERVER_ERROR, 0, 0, 0)),
    ],
    ids=["last-block", "one-short", "at-max"],
)
def test_exhaustion_near_int64_max(c: Cluster, next_id: int, expected: tuple[int, int, int, int]) -> None:
    c.commit([(ProducerIdsRecord(broker_id=1, broker_epoch=c.epoch(1), next_producer_id=next_id), 0)])
    assert allocate(c, 1) == expected


def test_allocation_survives_replay(c: Cluster) -> None:
    for _ in range(3):
        allocate(c, 1)
    live = c.state.durable_state()
    fresh = c.restart()
    assert fresh.durable_state() == live and fresh.next_producer_id == 3000
    assert allocate(c, 2) == (0, 3000, 1000, 1)


def test_replay_refuses_a_counter_that_does_not_advance() -> None:
    st = ControllerState(cluster_id=CLUSTER_ID, node_id=1)
    st.apply(0, ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=5000), 0)
    for bad in (5000, 4000):
        with pytest.raises(StorageError, match="does not advance"):
            st.apply(1, ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=bad), 0)
        assert st.next_producer_id == 5000
    st.apply(1, ProducerIdsRecord(broker_id=1, broker_epoch=0, next_producer_id=6000), 0)
    assert st.next_producer_id == 6000


def test_unsupported_version_and_wrong_body_are_protocol_errors(c: Cluster) -> None:
    req = AllocateProducerIdsRequest(broker_id=1, broker_epoch=c.epoch(1))
    with pytest.raises(ProtocolError):
        c.state.handle(API_ALLOCATE_PRODUCER_IDS, 1, req, now_ms=c.now, next_offset=c.end_offset)
    with pytest.raises(ProtocolError):
        c.state.handle(
            API_ALLOCATE_PRODUCER_IDS, 0, UnregisterBrokerRequest(broker_id=1), now_ms=c.now, next_offset=c.end_offset
        )
    assert c.state.handled_api_versions()[API_ALLOCATE_PRODUCER_IDS] == (0, 0)
