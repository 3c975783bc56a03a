"""Helpers shared by the differential tests: reshaping generated values for a peer."""

from __future__ import annotations

import dataclasses
from typing import Any

from kraft_jbod.wire.message import Struct


def strip_unknown(value: Any) -> Any:
    """A copy without unknown tagged fields anywhere (JSON and some peers cannot carry them)."""
    if isinstance(value, list):
        return [strip_unknown(v) for v in value]
    if isinstance(value, Struct):
        changes = {f.attr: strip_unknown(getattr(value, f.attr)) for f in value._FIELDS}
        return dataclasses.replace(value, unknown_tagged_fields=(), **changes)  # type: ignore[type-var]
    return value
