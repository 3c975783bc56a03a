"""The demo end to end: its printed facts hold in the controller's log."""

from __future__ import annotations

from pathlib import Path

import pytest

from kraft_jbod import cli
from kraft_jbod.capture.kafka import decode_capture
from kraft_jbod.capture.pcapfile import iter_packets
from kraft_jbod.demo.scenario import BROKERS, FAILED_BROKER, image_from_log, run
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord


def test_demo_timeline_matches_the_controller_log(tmp_path: Path) -> None:
    lines: list[str] = []
    result = run(tmp_path / "demo.pcapng", tmp_path / "work", lines.append)
    log = result.controller_log
    regs = [r for _, r, _ in log if isinstance(r, RegisterBrokerRecord)]
    assert sorted(r.broker_id for r in regs) == list(BROKERS)
    assert all(len(r.log_dirs) == 2 for r in regs)
    offline = [r for _, r, _ in log if isinstance(r, BrokerRegistrationChangeRecord) and r.log_dirs]
    assert [r.broker_id for r in offline] == [FAILED_BROKER]
    assert result.failed_dir not in offline[0].log_dirs
    truth = image_from_log(log)
    for p in truth.partitions.values():
        assert p.leader >= 0
        assert not (p.leader == FAILED_BROKER and p.dir_of(FAILED_BROKER) == result.failed_dir)
        assert (p.leader, p.isr) == result.after[(truth.topic_names[p.topic_id], p.partition_id)]
        if p.dir_of(FAILED_BROKER) == result.failed_dir:
            assert FAILED_BROKER not in p.isr
    joined = "\n".join(lines)
    for needle in (
        "registered",
        "RECOVERY -> RUNNING",
        "AssignReplicasToDirs",
        "dir-failed",
        "OfflineLogDirs",
        "matches the controller's log",
    ):
        assert needle in joined
    with open(tmp_path / "demo.pcapng", "rb") as f:
        assert sum(1 for _ in iter_packets(f)) > 50
    # The capture is the brokers' side of every exchange: it must decode completely.
    with open(tmp_path / "demo.pcapng", "rb") as f:
        frames = list(decode_capture(f))
    assert frames and all(fr.confidence in ("header", "paired") for fr in frames), {fr.confidence for fr in frames}
    keys = {fr.api_key for fr in frames if fr.kind == "request"}
    assert {18, 62, 63, 73, 1} <= keys
    assert all(fr.canonical for fr in frames)
    # It holds the whole metadata history, so every KIP-858 check has a verdict: nothing
    # "indeterminate", and no violation.
    from kraft_jbod.analytics import kip858

    collector = kip858.EventCollector()
    events = [ev for fr in frames for ev in collector.feed(fr)] + collector.finish()
    assert [(f.rule, f.verdict, f.detail) for f in kip858.check(events)] == []


def test_demo_command_runs(tmp_path: Path, capsys: object) -> None:
    assert cli.main(["demo", "--no-capture", "--keep", str(tmp_path / "w")]) == 0


def test_demo_runs_the_conformance_job_on_its_capture(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capture, stats = tmp_path / "demo.pcapng", tmp_path / "stats"
    assert cli.main(["demo", "--capture", str(capture), "--stats", str(stats), "--keep", str(tmp_path / "w")]) == 0
    out = capsys.readouterr().out
    assert "decoded 100.00 %" in out and "byte-exact re-encode 100.00 %" in out
    assert "KIP-858: 0 violation(s)" in out
    assert (stats / "report.html").is_file() and (stats / "conformance").is_dir()
