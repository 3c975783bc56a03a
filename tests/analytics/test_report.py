"""The HTML report and summary: names for codes, numbers that agree, readable axes."""

from __future__ import annotations

import re
from typing import Any

from kraft_jbod.analytics import kip858 as K
from kraft_jbod.analytics import tables as T
from kraft_jbod.analytics.partials import COUNTERS
from kraft_jbod.analytics.report import _ticks, render_html, render_summary

T0 = 1_795_000_000_000_000_000


def _overall(**measures: float) -> T.OverallRow:
    counts: dict[str, Any] = dict.fromkeys(COUNTERS, 0)
    return T.OverallRow(**{**counts, **measures})


def _tables() -> T.Tables:
    return T.Tables(
        overall=[_overall(frames=100, bytes=9000, connections=3, decode_rate=1.0, reencode_rate=1.0, error_frames=1)],
        error_codes=[
            T.ErrorCodeRow(api_key=19, api_version=7, level="topic", error_code=36, count=2),
            T.ErrorCodeRow(api_key=63, api_version=1, level="top", error_code=77, count=1),
            T.ErrorCodeRow(api_key=63, api_version=1, level="top", error_code=0, count=40),
        ],
        latency_hist=[T.LatencyHistRow(api_key=63, bucket=b, count=10 - b) for b in range(4, 10)],
        timeline=[
            T.TimelineRow(
                bucket_ts=T0 + i * 100_000_000, api_key=63, frames=10, anomalous=0, errors=i % 2, width_ns=10**8
            )
            for i in range(6)
        ],
    )


def test_summary_counts_the_error_codes_the_chart_shows() -> None:
    summary = render_summary(_tables(), {})
    assert "error responses: 1 (any level, as the timeline counts them); non-zero error codes in them: 3" in summary
    assert "TOPIC_ALREADY_EXISTS (36) x2" in summary and "STALE_BROKER_EPOCH (77) x1" in summary


def test_html_names_error_codes_and_keeps_ticks_distinct() -> None:
    page = render_html(_tables(), {"inputs": ["demo.pcapng"]})
    assert "CreateTopics: TOPIC_ALREADY_EXISTS (36), topic" in page
    assert "<td>TOPIC_ALREADY_EXISTS (36)</td>" in page
    # The 0.5 s timeline gets offsets, not five copies of the same wall-clock second.
    labels = re.findall(r">(\+[0-9.]+ s)<", page)
    assert len(labels) == len(set(labels)) >= 3
    # The latency axis reads as durations on a log scale.
    assert "16 µs" in page and "256 µs" in page
    assert "white-space:pre-wrap" in page and "viewBox=" in page


def test_ticks_for_long_spans_are_clock_times() -> None:
    ticks = _ticks(T0, T0 + 3600 * 10**9, True)
    assert len({label for _, label in ticks}) == 5 and all(re.fullmatch(r"\d\d:\d\d:\d\d", t) for _, t in ticks)


def test_findings_name_directories_by_broker_and_place() -> None:
    d1, d2 = "AAAAAAAAAAEAAAAAAAABAA", "AAAAAAAAAAEAAAAAAAABAQ"
    events: list[K.Event] = [
        K.RegistrationEvent(ts=1, broker=1, log_dirs=[d1, d2], incarnation="I", epoch=10, error_code=0, conn="c"),
        K.HeartbeatEvent(
            ts=2,
            broker=1,
            epoch=10,
            offline_dirs=["AAAAAAAAAAAAAAAAAADerQ"],
            cordoned_dirs=None,
            want_fence=False,
            is_fenced=False,
            error_code=0,
            conn="c",
        ),
        K.RecordEvent(
            ts=3,
            offset=5,
            name="PartitionRecord",
            conn="f",
            data={
                "topicId": "AAAAAAAAAAAAAAAAAAAD6A",
                "partitionId": 0,
                "replicas": [1],
                "isr": [1],
                "leader": 1,
                "directories": [d2],
            },
        ),
        K.HeartbeatEvent(
            ts=4,
            broker=1,
            epoch=10,
            offline_dirs=[d2],
            cordoned_dirs=None,
            want_fence=False,
            is_fenced=False,
            error_code=0,
            conn="c",
        ),
    ]
    details = " ".join(f.detail for f in K.check(events))
    assert f"{d2} (broker 1 dir 1)" in details


def test_a_capture_whose_frames_fall_in_one_time_bucket_renders() -> None:
    # 2 of the 27 shared captures: every frame in one timeline bucket, so the time axis had
    # no width (x0 + 1 == x0 for nanosecond timestamps) and the chart divided by zero.
    tables = _tables()
    tables.timeline = [T.TimelineRow(bucket_ts=T0, api_key=63, frames=4, anomalous=1, errors=1, width_ns=10**6)]
    page = render_html(tables, {"inputs": ["one.pcapng"]})
    points = re.findall(r'points="([^"]*)"', page)
    assert points and all(0 <= float(xy.split(",")[0]) <= 760 for pts in points for xy in pts.split())
