"""Fault injection (rules as data, triggers, actions, admin channel) and the manual clock."""

from __future__ import annotations

import asyncio
import functools
import json
import random
import urllib.request
from pathlib import Path

import pytest

from kraft_jbod.clock import ManualClock
from kraft_jbod.errors import ConfigError
from kraft_jbod.faults import FaultInjector, Rule, Trigger, facts_of
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.pytest_plugin import KraftCluster


def _hb_facts(broker: int) -> object:
    return facts_of(63, 1, BrokerHeartbeatRequest(broker_id=broker, broker_epoch=5))


def test_triggers_once_nth_times_always() -> None:
    inj = FaultInjector(
        [
            Rule.from_json(
                {
                    "id": "nth",
                    "match": {"api": "BrokerHeartbeat", "broker_id": 1},
                    "action": {"type": "error", "error_code": 7},
                    "trigger": {"type": "nth", "n": 3},
                },
                "x",
            ),
            Rule.from_json(
                {"id": "times", "match": {"broker_id": 2}, "action": "drop", "trigger": {"type": "times", "n": 2}}, "x"
            ),
        ]
    )
    fired1 = [inj.decide(_hb_facts(1)) for _ in range(5)]  # type: ignore[arg-type]
    assert [r.id if r else None for r in fired1] == [None, None, "nth", None, None]
    fired2 = [inj.decide(_hb_facts(2)) for _ in range(4)]  # type: ignore[arg-type]
    assert [r.id if r else None for r in fired2] == ["times", "times", None, None]
    assert inj.fired_counts() == {"nth": 1, "times": 2}
    assert [f.rule_id for f in inj.history] == ["nth", "times", "times"]
    assert inj.decide(_hb_facts(3)) is None  # type: ignore[arg-type]


def test_probability_is_seeded_and_reproducible() -> None:
    rule = {"id": "p", "action": "stall", "trigger": {"type": "probability", "p": 0.3}}
    runs = []
    for _ in range(2):
        inj = FaultInjector(seed=1234)
        inj.add(rule)
        runs.append([inj.decide(_hb_facts(1)) is not None for _ in range(200)])  # type: ignore[arg-type]
    assert runs[0] == runs[1]
    expected_rng = random.Random(1234)
    assert runs[0] == [expected_rng.random() < 0.3 for _ in range(200)]
    assert 20 < sum(runs[0]) < 100


@pytest.mark.parametrize(
    "bad",
    [
        {"action": {"type": "explode"}},
        {"action": {"type": "error"}},
        {"action": {"type": "delay", "ms": -1}},
        {"action": "drop", "trigger": {"type": "probability", "p": 1.5}},
        {"action": "drop", "match": {"api": "NoSuchApi"}},
        {"action": "offline_dir"},
        {"action": "drop", "surprise": 1},
    ],
)
def test_bad_rules_are_refused_and_nothing_is_added(bad: dict[str, object]) -> None:
    inj = FaultInjector([{"id": "keep", "action": "drop"}])
    with pytest.raises(ConfigError):
        inj.replace([{"id": "ok", "action": "stall"}, bad])
    assert [r.id for r in inj.rules()] == ["keep"]


def test_fault_file_round_trip(tmp_path: Path) -> None:
    doc = {
        "seed": 9,
        "rules": [
            {"id": "a", "match": {"api": 63, "broker_id": 2}, "action": {"type": "delay", "ms": 50}, "trigger": "once"}
        ],
    }
    path = tmp_path / "faults.json"
    path.write_text(json.dumps(doc))
    inj = FaultInjector.from_file(path)
    assert inj.seed == 9
    assert inj.rules()[0].to_json()["match"] == {"api": "BrokerHeartbeat", "broker_id": 2}
    assert inj.rules()[0].trigger == Trigger("once")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        FaultInjector.from_file(tmp_path / "bad.json")


async def test_error_and_stale_epoch_actions_leave_state_untouched(kraft_cluster: KraftCluster) -> None:
    b1 = await kraft_cluster.add_broker(1, unfence=False)
    kraft_cluster.add_fault(
        {
            "id": "err",
            "match": {"api": "BrokerHeartbeat", "broker_id": 1},
            "action": {"type": "error", "error_code": 7},
            "trigger": "once",
        }
    )
    kraft_cluster.add_fault({"id": "stale", "match": {"broker_id": 1}, "action": "stale_epoch", "trigger": "once"})
    offset = kraft_cluster.server.log.end_offset
    assert (await b1.heartbeat()).error_code == 7
    assert (await b1.heartbeat()).error_code == 77
    assert kraft_cluster.server.log.end_offset == offset  # no records for faulted requests
    assert kraft_cluster.view()["brokers"][0]["fenced"] is True
    resp = await b1.heartbeat()
    assert resp.error_code == 0 and resp.is_fenced is False
    prom = kraft_cluster.ext.registry.prometheus()
    assert 'kraft_jbod_fault_rules_fired_total{action="error",rule="err"} 1' in prom


async def test_refuse_registration_fence_and_offline_dir(kraft_cluster: KraftCluster) -> None:
    kraft_cluster.add_fault({"id": "no", "match": {"broker_id": 5}, "action": "refuse_registration", "trigger": "once"})
    with pytest.raises(Exception, match="error 119"):
        await kraft_cluster.add_broker(5)
    b5 = await kraft_cluster.add_broker(5)
    assert kraft_cluster.view()["brokers"][0]["state"] == "UNFENCED"
    kraft_cluster.add_fault({"id": "fence", "match": {"broker_id": 5}, "action": "fence", "trigger": "once"})
    assert (await b5.heartbeat()).is_fenced is True
    assert kraft_cluster.view()["brokers"][0]["state"] == "FENCED"
    await b5.heartbeat()
    directory = b5.dirs[1]
    kraft_cluster.add_fault(
        {
            "id": "disk",
            "match": {"broker_id": 5, "directory": str(directory)},
            "action": "offline_dir",
            "trigger": "once",
        }
    )
    await b5.heartbeat()
    dirs = kraft_cluster.view()["brokers"][0]["directories"]
    assert sum(not d["online"] for d in dirs) == 1


async def test_delay_runs_on_the_manual_clock_and_drop_closes(kraft_cluster: KraftCluster) -> None:
    b1 = await kraft_cluster.add_broker(1)
    kraft_cluster.add_fault(
        {"id": "slow", "match": {"broker_id": 1}, "action": {"type": "delay", "ms": 5000}, "trigger": "once"}
    )
    pending = asyncio.ensure_future(b1.heartbeat())
    await asyncio.sleep(0.05)
    assert not pending.done()  # real time passes, the controller clock does not
    kraft_cluster.clock.advance(5000)
    resp = await asyncio.wait_for(pending, 5)
    assert resp.error_code == 0
    kraft_cluster.add_fault({"id": "cut", "match": {"broker_id": 1}, "action": "drop", "trigger": "once"})
    with pytest.raises(ConnectionError):
        await b1.heartbeat()


async def test_session_timeout_fences_only_when_the_clock_is_advanced(kraft_cluster: KraftCluster) -> None:
    b1 = await kraft_cluster.add_broker(1)
    await kraft_cluster.add_broker(2)
    await kraft_cluster.create_topic("t", partitions=1, replication_factor=2)
    timeout = kraft_cluster.server.config.session_timeout_ms
    await kraft_cluster.advance(timeout // 2)
    await b1.heartbeat()  # broker 1 stays alive; broker 2 goes silent
    assert all(not b["fenced"] for b in kraft_cluster.view()["brokers"])
    await kraft_cluster.advance(timeout // 2 + 500)
    view = await kraft_cluster.wait_for(
        lambda: [b["fenced"] for b in kraft_cluster.view()["brokers"]] == [False, True] and kraft_cluster.view()
    )
    assert view["topics"][0]["partitions"][0]["isr"] == [1]


def test_manual_clock_wakes_sleepers_in_deadline_order() -> None:
    async def main() -> list[str]:
        clock = ManualClock(start_ms=100)
        order: list[str] = []

        async def sleeper(name: str, s: float) -> None:
            await clock.sleep(s)
            order.append(name)

        tasks = [asyncio.ensure_future(sleeper("late", 2.0)), asyncio.ensure_future(sleeper("early", 1.0))]
        await clock.settle()
        assert clock.sleepers == 2
        assert clock.advance(999) == 0
        assert clock.advance(1) == 1
        await clock.settle()
        assert order == ["early"]
        clock.advance(1000)
        await asyncio.gather(*tasks)
        with pytest.raises(ValueError):
            clock.advance(-1)
        assert clock.monotonic_ms() == 2100
        return order

    assert asyncio.run(main()) == ["early", "late"]


def _http(
    method: str, url: str, body: object | None = None, headers: dict[str, str] | None = None
) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


async def test_admin_channel_changes_rules_at_run_time(kraft_cluster: KraftCluster) -> None:
    b1 = await kraft_cluster.add_broker(1)
    base = kraft_cluster.admin_url
    call = functools.partial(_http, headers=kraft_cluster.admin_headers)
    status, got = await asyncio.to_thread(
        call,
        "POST",
        base + "/faults",
        {"id": "x", "match": {"broker_id": 1}, "action": {"type": "error", "error_code": 41}},
    )
    assert status == 201 and got["added"][0]["id"] == "x"  # type: ignore[index]
    assert (await b1.heartbeat()).error_code == 41
    status, got = await asyncio.to_thread(call, "POST", base + "/faults", {"action": {"type": "bogus"}})
    assert status == 400
    status, got = await asyncio.to_thread(call, "GET", base + "/faults/history")
    assert [h["rule"] for h in got] == ["x"]  # type: ignore[union-attr]
    status, _ = await asyncio.to_thread(call, "DELETE", base + "/faults/x")
    assert status == 200
    assert (await b1.heartbeat()).error_code == 0
    status, _ = await asyncio.to_thread(call, "DELETE", base + "/faults/x")
    assert status == 404
    status, got = await asyncio.to_thread(call, "POST", base + "/clock/advance", {"ms": 250})
    assert status == 200 and got["now_ms"] == kraft_cluster.clock.monotonic_ms()  # type: ignore[index]
    status, view = await asyncio.to_thread(call, "GET", base + "/status")
    assert status == 200 and [b["id"] for b in view["brokers"]] == [1]  # type: ignore[index]
