"""The runner against a deliberately buggy server: it must find the crash and the hang,
minimize both, save them, replay them, and see a memory leak through RSS sampling."""

from __future__ import annotations

import asyncio
import json
import struct
import sys
from pathlib import Path

import pytest

from kraft_jbod import codec
from kraft_jbod.errors import ConfigError
from kraft_jbod.fuzz import corpus, minimize, mutators, runner
from kraft_jbod.fuzz.runner import Outcome, RunConfig, Runner
from kraft_jbod.fuzz.target import SpawnedTarget
from kraft_jbod.messages.metadata_request import MetadataRequest

BUGGY = [sys.executable, str(Path(__file__).with_name("buggy_server.py"))]
# A case counts as a hang after this long. Well above the buggy server's answer time on a
# loaded 2-core machine, so a slow answer is not minimized as if it were the hang.
HANG_AFTER = 1.0


async def test_finds_minimizes_saves_and_replays_the_crash_and_the_hang(tmp_path: Path) -> None:
    async with SpawnedTarget(BUGGY, max_restarts=30) as target:
        cfg = RunConfig(
            target.host, int(target.port or 0), seed=11, count=300, time_limit=50, connections=4, timeout=HANG_AFTER
        )
        corp = corpus.Corpus(tmp_path / "corpus")
        report = await Runner(cfg, watch=target, corpus=[], on_case=corp.consider).run()
        assert report.cases == sum(report.outcomes.values())
        assert report.cases == 300 or report.stopped_because == "time limit"
        kinds = {f.outcome for f in report.findings}
        assert Outcome.GONE in kinds, report.summary()
        assert Outcome.TIMEOUT in kinds, report.summary()
        assert report.restarts >= 1
        assert corp.added > 0 and len(list((tmp_path / "corpus").glob("*.json"))) == corp.added

        async def restart() -> tuple[str, int] | None:
            await target.stop()
            target.port = None
            return await target.start()

        host, port = target.host, int(target.port or 0)
        crash = next(f for f in report.findings if f.outcome is Outcome.GONE)
        small = await minimize.minimize_finding(
            crash, host, port, timeout=HANG_AFTER, watch=target, restart=restart, budget=200
        )
        assert small is not None
        split = mutators.split_frames(small)
        assert split.tail == "clean" and len(split.frames) == 1
        payload = split.frames[0]
        assert len(payload) == 8  # nothing but the fixed header part is needed
        assert struct.unpack_from(">h", payload)[0] < 0  # the negative api key
        crash.minimized = small

        host, port = target.host, int(target.port or 0)
        hang = next(f for f in report.findings if f.outcome is Outcome.TIMEOUT)
        small = await minimize.minimize_finding(
            hang, host, port, timeout=HANG_AFTER, watch=target, restart=restart, budget=200
        )
        assert small is not None
        payload = mutators.split_frames(small).frames[0]
        assert len(payload) == 10  # header fields plus the ClientId length
        assert struct.unpack_from(">h", payload, 8)[0] > 0  # a length with nothing behind it
        hang.minimized = small

        host, port = target.host, int(target.port or 0)
        for finding in (crash, hang):
            path = corpus.save_finding(tmp_path / "findings", finding, f"{host}:{port}")
            rec = json.loads(path.read_text())
            assert bytes.fromhex(rec["hex"]) == finding.case.data
            assert rec["minimized_hex"] == finding.minimized.hex() if finding.minimized else False
            assert rec["seed"] == 11 and rec["index"] == finding.case.index
            assert rec["frames"] and "size_prefix" in rec["frames"][0]
        # The hang replays from the file (a fresh connection, the minimized bytes).
        data = corpus.load_finding_bytes(tmp_path / "findings" / f"timeout-s11-i{hang.case.index}.json")
        assert (await runner.replay(host, port, data, HANG_AFTER, target)).outcome is Outcome.TIMEOUT
        # ... and regenerates from its seed and index alone.
        assert runner.CaseFactory(11, report.served).case(hang.case.index).data == hang.case.data


async def test_a_clean_case_is_answered_by_the_buggy_server() -> None:
    async with SpawnedTarget(BUGGY) as target:
        host, port = target.host, int(target.port or 0)
        served = await runner.fetch_api_versions(host, port, 2.0)
        assert served == {3: (0, 12), 18: (0, 3), 63: (0, 1)}
        result = await runner.replay(host, port, runner.api_versions_frame(3, 5), 2.0, target)
        assert result.outcome is Outcome.ANSWERED
        # KIP-511: ApiVersions above the server's range is answered at v0 with error 35.
        result = await runner.replay(host, port, runner.api_versions_frame(4, 6), 2.0, target)
        assert result.outcome is Outcome.ERROR_CODE and result.error_code == 35


async def test_memory_growth_of_a_spawned_target_is_seen_and_stopped(tmp_path: Path) -> None:
    async with SpawnedTarget([*BUGGY, "--leak"], rss_interval=0.05) as target:
        target.rss_limit = target.rss_baseline + 100 * 1024 * 1024
        host, port = target.host, int(target.port or 0)
        outcomes = []
        for i in range(5):  # each Metadata keeps 40 MB: the third one crosses the limit
            frame = codec.encode_request(MetadataRequest(), 12, i, "t")
            outcomes.append((await runner.replay(host, port, frame, 2.0, target)).outcome)
            for _ in range(40):  # give the 50 ms sampler a bounded chance to see it
                if target.rss_exceeded or not target.alive():
                    break
                await asyncio.sleep(0.05)
            if target.rss_exceeded:
                break
        assert outcomes[:2] == [Outcome.ANSWERED, Outcome.ANSWERED]
        assert target.rss_exceeded and target.rss_kills == 1
        assert target.rss_peak > target.rss_limit
        assert await target.wait_exit(5.0) is not None  # killed, not left to eat the machine
        assert "RSS" in target.exit_detail()


def test_remote_targets_need_the_flag() -> None:
    with pytest.raises(ConfigError, match="allow-remote"):
        runner.check_loopback("192.0.2.1", allow_remote=False)
    runner.check_loopback("192.0.2.1", allow_remote=True)
    runner.check_loopback("127.0.0.1", allow_remote=False)
    runner.check_loopback("localhost", allow_remote=False)
    with pytest.raises(ConfigError):
        Runner(RunConfig("192.0.2.1", 9092))
    assert runner.parse_target("[::1]:9092") == ("::1", 9092)
    for bad in ("nohost", "h:0", "h:x", ":9"):
        with pytest.raises(ConfigError):
            runner.parse_target(bad)


def test_corpus_reloads_and_skips_foreign_files(tmp_path: Path) -> None:
    c = corpus.Corpus(tmp_path)
    case = runner.Case(1, 2, b"\x00\x00\x00\x08" + bytes(8), ["truncate"], "generated", 3, 1)
    res = runner.Result(Outcome.CLOSED)
    assert c.consider(case, res) is True
    assert c.consider(case, res) is False  # same behaviour signature
    (tmp_path / "junk.json").write_text("{not json")
    again = corpus.Corpus(tmp_path)
    assert again.entries == [case.data] and again.skipped == 1
    assert again.consider(case, res) is False  # signatures survive the reload
