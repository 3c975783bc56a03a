"""The controller's story log: one INFO line per thing that happened, from the committed records."""

from __future__ import annotations

import json
import logging

import pytest

from kraft_jbod.metrics.logs import JsonFormatter
from kraft_jbod.pytest_plugin import KraftCluster
from kraft_jbod.wire.primitives import uuid_to_base64url


def _story(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "kraft_jbod.story"]


async def test_registration_fencing_dirs_topics_and_refusals_are_told(
    kraft_cluster: KraftCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kraft_jbod.story")
    b1 = await kraft_cluster.add_broker(1, dirs=2)
    await kraft_cluster.add_broker(2, dirs=2)
    created = await kraft_cluster.create_topic("orders", partitions=2, replication_factor=2)
    assert created.error_code == 0
    refused = await kraft_cluster.create_topic("orders", partitions=1, replication_factor=1)
    assert refused.error_code == 36
    await kraft_cluster.assign_all()
    await b1.fail_directory(1)
    await kraft_cluster.wait_for(lambda: any(getattr(r, "event", "") == "dir-offline" for r in _story(caplog)))

    by_event: dict[str, list[logging.LogRecord]] = {}
    for r in _story(caplog):
        by_event.setdefault(r.event, []).append(r)  # type: ignore[attr-defined]
    regs = by_event["registered"]
    assert sorted(r.broker for r in regs) == [1, 2]  # type: ignore[attr-defined]
    assert regs[0].dirs == [uuid_to_base64url(d) for d in kraft_cluster.brokers[regs[0].broker].dirs]  # type: ignore[attr-defined]
    assert f"epoch {regs[0].epoch}" in regs[0].getMessage()  # type: ignore[attr-defined]
    assert {r.broker for r in by_event["unfenced"]} == {1, 2}  # type: ignore[attr-defined]
    (topic,) = by_event["topic-created"]
    assert topic.getMessage() == "topic orders created: 2 partition(s), replication factor 2"
    assert any(
        "refused CreateTopics v7" in r.getMessage()
        and "TOPIC_ALREADY_EXISTS (36)" in r.getMessage()
        and "for orders" in r.getMessage()
        for r in by_event["refused"]
    )
    (offline,) = by_event["dir-offline"]
    assert offline.offline_dirs == [uuid_to_base64url(b1.dirs[1])]  # type: ignore[attr-defined]
    # JSON logs carry the same event and fields.
    doc = json.loads(JsonFormatter().format(offline))
    assert doc["event"] == "dir-offline" and doc["broker"] == 1 and doc["offline_dirs"] == offline.offline_dirs


async def test_session_expiry_is_told_with_its_reason(
    kraft_cluster: KraftCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kraft_jbod.story")
    await kraft_cluster.add_broker(1, dirs=1)
    await kraft_cluster.advance(kraft_cluster.server.config.session_timeout_ms + 1000)
    fenced = await kraft_cluster.wait_for(lambda: [r for r in _story(caplog) if getattr(r, "event", "") == "fenced"])
    assert fenced[0].broker == 1  # type: ignore[attr-defined]
    assert "session expired" in fenced[0].getMessage()
