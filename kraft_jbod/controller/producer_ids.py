"""AllocateProducerIds: handing out blocks of producer ids, durably, as Kafka's controller does.

Brokers running idempotent or transactional producers ask the controller for a *block*
of producer ids and hand them out locally; when a block runs low they ask again. The
controller keeps one number, the first id of the next block, and every allocation is a
``ProducerIdsRecord`` whose ``NextProducerId`` is the first id *after* the block just
handed out. Replaying the log therefore restores the counter without any other state.

How Apache Kafka behaves (ProducerIdControlManager, described in our words):

* The caller's (BrokerId, BrokerEpoch) must match a current registration, otherwise the
  whole request fails with STALE_BROKER_EPOCH. Fencing does not matter: a fenced broker
  with the right epoch still gets a block.
* Blocks are always 1000 ids long. An empty log starts at id 0, so the first block is
  [0, 1000) and its record says NextProducerId = 1000.
* When the next block would run past 2**63 - 1 the request fails with
  UNKNOWN_SERVER_ERROR and nothing is written.
* On replay a record must move the counter strictly forward once a first record has
  been seen; a record that does not is a corrupt log (we raise ``StorageError``).

Invariant: ``next_first`` never decreases, and no two allocations overlap.
"""

from __future__ import annotations

from typing import Final

from kraft_jbod.errors import StorageError

BLOCK_SIZE: Final = 1000
MAX_PRODUCER_ID: Final = (1 << 63) - 1
UNKNOWN_SERVER_ERROR: Final = -1


def next_block(next_first: int | None) -> tuple[int, int] | None:
    """(first id, length) of the block to hand out now, or None when ids are exhausted.

    ``next_first`` is None before any ProducerIdsRecord was applied.
    """
    first = 0 if next_first is None else next_first
    if first > MAX_PRODUCER_ID - BLOCK_SIZE:
        return None
    return first, BLOCK_SIZE


def replayed(next_first: int | None, record_next: int, offset: int) -> int:
    """The counter after applying a ProducerIdsRecord carrying ``record_next``.

    Raises:
        StorageError: the record does not move an established counter forward.
    """
    if next_first is not None and record_next <= next_first:
        raise StorageError(
            f"ProducerIdsRecord at offset {offset}: NextProducerId {record_next} does not "
            f"advance the current next producer id {next_first}"
        )
    return record_next
