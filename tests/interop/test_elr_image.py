"""Kafka 4.4's metadata loader over the ELR sequences of issue 12, item 7.

The logs of ``tests/controller/test_elr_unfence_offline.py`` (one heartbeat unfencing a
broker and failing one of its directories, with ELR and last-known-ELR partitions) and of
``tests/controller/test_elr_reassignment.py`` (a reassignment completed by AlterPartition
below min ISR, which leaves the removed replica in the ELR as Kafka's builder does) load
into Kafka's image without a fault, and that image equals our status view of the log.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft_jbod.controller import client_api
from tests.controller import test_elr_reassignment as reassignment
from tests.controller import test_elr_unfence_offline as unfence_offline
from tests.interop.harness import InteropJvm
from tests.interop.test_image import RecordingCluster, load_and_compare


def test_unfence_plus_offline_with_elr(interop: InteropJvm, tmp_path: Path) -> None:
    c, records = unfence_offline._heartbeat(RecordingCluster)
    assert isinstance(c, RecordingCluster) and len(records) == 4
    loaded = load_and_compare(interop, c.write(tmp_path / "log"), client_api.cluster_view(c.state))
    assert loaded["records"] == c.end_offset


@pytest.mark.parametrize(("min_isr", "proposed"), [(row[0], row[1]) for row in reassignment.ROWS])
def test_reassignment_completed_with_elr(
    interop: InteropJvm, tmp_path: Path, min_isr: int, proposed: list[int]
) -> None:
    c, _records = reassignment.complete(min_isr, proposed, RecordingCluster)
    assert isinstance(c, RecordingCluster)
    view = client_api.cluster_view(c.state)
    loaded = load_and_compare(interop, c.write(tmp_path / "log"), view)
    assert loaded["records"] == c.end_offset


def test_topic_created_with_min_isr_and_its_clear_elr(interop: InteropJvm, tmp_path: Path) -> None:
    """A ClearElrRecord naming a topic created earlier in the same batch."""
    from tests.controller.test_limits import _create_with_min_isr

    c = RecordingCluster()
    c.start_broker(1)
    out = c.call(19, 7, _create_with_min_isr(3))
    assert [type(r).__name__ for r, _ in out.records][2] == "ClearElrRecord"
    loaded = load_and_compare(interop, c.write(tmp_path / "log"), client_api.cluster_view(c.state))
    assert loaded["records"] == c.end_offset
