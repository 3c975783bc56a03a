"""Which of Kafka's WARN/ERROR/FATAL log lines fail an interop test.

Rule: every WARN, ERROR or FATAL line Kafka's code logs fails the test, except the lines
listed in :data:`BENIGN`, each given by its level, its logger and its exact message text
(``{path}`` stands for one file path, the only part that varies), with the reason it says
nothing about our controller. The list is short on purpose: a line is added only with a
reason a reviewer can check in Kafka's source, never because a test was flaky.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

LogLine = tuple[str, str, str, str]  # level, logger, thread, message (harness.LOG_LINE)

PROBLEM_LEVELS = ("WARN", "ERROR", "FATAL")


@dataclass(frozen=True)
class Benign:
    """One log line Kafka prints in normal operation; ``text`` is exact but for ``{path}``."""

    level: str
    logger: str
    text: str
    reason: str
    _pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = [re.escape(p) for p in self.text.split("{path}")]
        object.__setattr__(self, "_pattern", re.compile(r"(\S+)".join(parts)))

    def matches(self, line: LogLine) -> bool:
        level, logger, _thread, message = line
        return level == self.level and logger == self.logger and self._pattern.fullmatch(message) is not None


BENIGN: tuple[Benign, ...] = (
    Benign(
        "WARN",
        "org.apache.kafka.common.utils.Utils",
        "Failed atomic move of {path} to {path}.deleted retrying with a non-atomic move",
        "Utils.atomicMoveWithFallback (clients, Kafka 4.4): a segment file being renamed to "
        "*.deleted for asynchronous deletion could not be moved atomically (seen once on a "
        "loaded 2-core machine) and is moved non-atomically instead; if that fails too Kafka "
        "throws and logs an ERROR, which still fails the test. The file is about to be "
        "deleted, so the atomicity of its rename changes nothing Kafka reads.",
    ),
)


def problems(lines: Iterable[LogLine], *, logger_prefix: str = "") -> list[LogLine]:
    """The WARN/ERROR/FATAL lines (of loggers starting with ``logger_prefix``) not in BENIGN."""
    return [
        ln
        for ln in lines
        if ln[0] in PROBLEM_LEVELS and ln[1].startswith(logger_prefix) and not any(b.matches(ln) for b in BENIGN)
    ]
