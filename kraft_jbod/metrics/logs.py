"""Structured logs: one JSON object per line, for machines; the usual text for people.

Each line carries ``ts`` (ISO 8601 UTC, milliseconds), ``level``, ``logger``, ``msg`` (the
formatted message), the exception text under ``exc`` when there is one, and any
``extra={...}`` fields the caller passed (JSON-safe values as they are, others as ``repr``).
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from typing import Any, TextIO

_STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        out: dict[str, Any] = {
            "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in vars(record).items():
            if k not in _STANDARD and not k.startswith("_"):
                out[k] = v if isinstance(v, str | int | float | bool | type(None) | list | dict) else repr(v)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=repr)


def setup(level: str = "INFO", *, json_lines: bool = False, stream: TextIO | None = None) -> logging.Handler:
    """Route the root logger to ``stream`` (stderr) as JSON lines or text; returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    if json_lines:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper()))
    return handler
