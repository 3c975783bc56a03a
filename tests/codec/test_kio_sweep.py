"""kio 0.6.5 as a third codec for every (api key, version) it knows.

kio is generated from Kafka's schemas by other people, with a Rust decoder. For every
request and response schema kio ships and every version it ships, hypothesis draws
messages of ours; kio must consume our bytes whole and write them back identically.
Drawn values avoid what kio cannot represent (unknown tagged fields, error codes
outside its enum, timestamps it cannot turn into datetimes), as
``test_python_oracles.py`` documents. A closing test asserts
that every version kio knows was checked.
"""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod import messages
from kraft_jbod.fuzz import strategies
from kraft_jbod.wire.message import Struct
from tests.codec.test_python_oracles import _kio_class
from tests.oracles.values import strip_unknown

CHECKED: set[tuple[str, int, int]] = set()


def _kio_versions() -> dict[tuple[str, int], list[int]]:
    from kio.schema.index import api_key_map

    spec = importlib.util.find_spec("kio.schema")
    assert spec is not None and spec.submodule_search_locations
    root = Path(next(iter(spec.submodule_search_locations)))
    out: dict[tuple[str, int], list[int]] = {}
    for key, name in api_key_map.items():
        for kind in ("request", "response"):
            vs = sorted(int(d.name[1:]) for d in (root / name).glob("v*") if (d / f"{kind}.py").is_file())
            if vs:
                out[(kind, int(key))] = vs
    return out


KIO = _kio_versions()


def _kio_domains(value: Any, codes: list[int], data: st.DataObject) -> None:
    """Keep values inside the domains kio types more narrowly than the wire.

    kio reads timestamp and ``*_ms`` fields as datetimes or timedeltas (-1, or a value
    Python's datetime arithmetic can hold; we keep them below 2**31) and error
    codes as its enum (codes Kafka defines). A value already inside the domain (such as
    the default 0 of a field absent at the version) is left alone.
    """
    if isinstance(value, list):
        for v in value:
            _kio_domains(v, codes, data)
    elif isinstance(value, Struct):
        for f in value._FIELDS:
            item = getattr(value, f.attr)
            if isinstance(item, int) and not isinstance(item, bool):
                if (f.attr.endswith("_ms") or "timestamp" in f.attr) and not -1 <= item < 1 << 31:
                    setattr(value, f.attr, -1 if item < 0 else item % (1 << 31))
                elif f.attr.endswith("error_code") and item not in codes:
                    setattr(value, f.attr, data.draw(st.sampled_from(codes)))
            else:
                _kio_domains(item, codes, data)


@pytest.mark.parametrize(("kind", "api_key"), sorted(KIO), ids=lambda x: str(x))
def test_kio_reads_and_rewrites_our_bytes(kind: str, api_key: int) -> None:
    from kio.serial import entity_reader, entity_writer

    cls: Any = messages.request_class(api_key) if kind == "request" else messages.response_class(api_key)
    assert cls is not None, f"kio knows api key {api_key}, we do not"
    versions = KIO[(kind, api_key)]
    assert cls.VALID_VERSIONS[0] <= versions[0] and versions[-1] <= cls.VALID_VERSIONS[1], (cls.NAME, versions)

    from kio.schema.errors import ErrorCode as KioErrorCode
    from kio.serial.errors import OutOfBoundValue

    codes = sorted(int(c.value) for c in KioErrorCode)

    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        for v in versions:
            msg = strip_unknown(data.draw(strategies.message(cls, v)))
            _kio_domains(msg, codes, data)
            raw = msg.encode(v)
            kcls = _kio_class(kind, api_key, v)
            try:
                parsed, size = entity_reader(kcls)(raw, 0)
            except OutOfBoundValue:
                # a value outside a domain kio types more narrowly than the wire (it
                # refuses e.g. negative timestamps); not a wire disagreement
                continue
            assert size == len(raw), f"kio consumed {size} of {len(raw)} bytes ({cls.NAME} v{v})"
            out = io.BytesIO()
            entity_writer(kcls)(out, parsed)
            assert out.getvalue() == raw, f"kio re-encodes {cls.NAME} v{v} differently"
            CHECKED.add((kind, api_key, v))

    check()


def test_every_version_kio_knows_was_checked() -> None:
    expected = {(kind, key, v) for (kind, key), vs in KIO.items() for v in vs}
    assert expected - CHECKED == set()
    print(
        f"\nkio 0.6.5: {len(CHECKED)} (kind, api key, version) checked over {len({k for _, k, _ in CHECKED})} api keys"
    )
