"""Our mock controller under the fuzzer, as CI runs it (a short, derandomized profile).

The controller runs as its own process (``kraft-jbod controller``), so a hang or a crash
shows as one instead of stalling the test. Invariants, on every mutated frame: it answers
or closes, never crashes, never hangs, and its RSS stays bounded. Each finding the
fuzzer made in our controller is a regression test at the bottom.
"""

from __future__ import annotations

import asyncio
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod import codec, messages
from kraft_jbod.fuzz import mutators, runner, stateful, strategies
from kraft_jbod.fuzz.runner import Outcome, RunConfig, Runner
from kraft_jbod.fuzz.target import SpawnedTarget, controller_command, read_rss
from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraft_jbod.messages.create_topics_response import CreateTopicsResponse

OK = {Outcome.ANSWERED, Outcome.ERROR_CODE, Outcome.CLOSED}
RSS_GROWTH_LIMIT = 200 * 1024 * 1024


async def test_short_profile_and_stateful_sessions(tmp_path: Path) -> None:
    async with SpawnedTarget(controller_command(tmp_path), rss_interval=0.1) as target:
        host, port = target.host, int(target.port or 0)
        cfg = RunConfig(host, port, seed=20261121, count=3000, time_limit=45, connections=8, timeout=2.0)
        report = await Runner(cfg, watch=target).run()
        assert report.stopped_because == "count", report.summary()
        assert report.cases == 3000 == sum(report.outcomes.values())
        assert set(report.outcomes) <= {str(o) for o in OK}, report.summary()
        assert report.findings == []
        # the profile reaches all three classes: well-formed answers, refusals and closes
        assert all(report.outcomes[str(o)] > 100 for o in OK), report.outcomes
        assert 62 in report.served and 63 in report.served and 73 in report.served

        sf = await stateful.StatefulRunner(
            stateful.StatefulConfig(host, port, seed=7, sessions=60, concurrency=4, time_limit=30), watch=target
        ).run()
        assert sf.sessions == 60
        assert sf.violations == [], sf.summary()
        assert sf.findings == []
        assert sf.unfenced > 30  # hostile registrations are refused; the others reach unfenced
        assert sf.per_step["fail_dir:answered"] + sf.per_step["fail_dir:error_code"] > 30

        assert target.alive()
        assert target.rss_peak - target.rss_baseline < RSS_GROWTH_LIMIT


@pytest.fixture(scope="module")
def controller(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int, subprocess.Popen[str]]]:
    argv = controller_command(tmp_path_factory.mktemp("ctl"))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("listening on "), line
        host, _, port = line.split()[-1].rpartition(":")
        yield host, int(port), proc
    finally:
        proc.terminate()
        proc.wait(10)


SERVED_KEYS = [18, 19, 20, 60, 62, 63, 64, 73]


@settings(max_examples=250, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_every_mutated_frame_is_answered_or_closed(
    controller: tuple[str, int, subprocess.Popen[str]], data: st.DataObject
) -> None:
    host, port, proc = controller
    key = data.draw(st.sampled_from(SERVED_KEYS))
    cls = messages.request_class(key)
    version = data.draw(st.integers(*cls.VALID_VERSIONS))
    msg = data.draw(strategies.message(cls, version))
    op = data.draw(st.sampled_from(sorted(mutators.OPERATORS)))
    frame = mutators.build_frame(msg, version, data.draw(st.integers(0, 1 << 30)))
    mutant = mutators.mutate(frame, random.Random(data.draw(st.integers(0, 1 << 30))), only=op)
    result = asyncio.run(runner.replay(host, port, mutant.data, 2.0))
    assert result.outcome in OK, (op, mutant.data.hex(), result)
    assert proc.poll() is None


def test_controller_rss_after_the_property_run(controller: tuple[str, int, subprocess.Popen[str]]) -> None:
    _h, _p, proc = controller
    assert proc.poll() is None
    assert 0 < read_rss(proc.pid) < 400 * 1024 * 1024


# --------------------------------------------------------------------------- regressions


def test_regression_create_topics_with_2_31_partitions_is_refused(
    controller: tuple[str, int, subprocess.Popen[str]],
) -> None:
    """Found by the stateful fuzzer (int_boundary on NumPartitions): the controller planned
    2**31-1 partitions inline, blocking its event loop and eating memory. Kafka refuses a
    CreateTopics past 10,000 new partitions with POLICY_VIOLATION (KAFKA-17870)."""
    host, port, proc = controller
    req = CreateTopicsRequest(topics=[CreatableTopic(name="huge", num_partitions=(1 << 31) - 1, replication_factor=1)])
    frame = codec.encode_request(req, 7, 99, "regression")
    result = asyncio.run(runner.replay(host, port, frame, 5.0))
    assert result.outcome is Outcome.ERROR_CODE, result
    body = codec.decode_response(result.payloads[0], 19, 7).body
    assert isinstance(body, CreateTopicsResponse)
    assert [t.error_code for t in body.topics] == [44]
    assert proc.poll() is None


def test_regression_many_topics_adding_up_past_the_limit(
    controller: tuple[str, int, subprocess.Popen[str]],
) -> None:
    host, port, _proc = controller
    topics = [CreatableTopic(name=f"t{i}", num_partitions=5001, replication_factor=1) for i in range(2)]
    frame = codec.encode_request(CreateTopicsRequest(topics=topics), 7, 100, "regression")
    result = asyncio.run(runner.replay(host, port, frame, 5.0))
    body = codec.decode_response(result.payloads[0], 19, 7).body
    assert [t.error_code for t in body.topics] == [44, 44]


def test_cli_fuzz_spawn_controller(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "kraft_jbod.cli",
            "fuzz",
            "--spawn-controller",
            "--seed",
            "3",
            "--count",
            "150",
            "--time-limit",
            "30",
            "--findings",
            str(tmp_path / "f"),
            "--corpus",
            str(tmp_path / "c"),
            "--stateful-sessions",
            "5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    summary = json.loads(proc.stdout)
    assert summary["cases"] == 150 and summary["finding_count"] == 0
    assert summary["stateful"]["sessions"] == 5
    assert summary["corpus"]["added"] == len(list((tmp_path / "c").glob("*.json")))
