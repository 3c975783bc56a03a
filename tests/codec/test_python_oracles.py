"""Second opinions from independent Python codecs.

* kio 0.6.5 (generated from Kafka's schemas, Rust decoder) for the KIP-858 messages:
  BrokerRegistration (62), BrokerHeartbeat (63) and AssignReplicasToDirs (73),
  requests and responses, every version both sides have. Our bytes must be consumed
  whole by kio and re-encoded by kio to the same bytes.
* kafka-python 3.0.12's JSON-schema engine, loaded with Apache Kafka's reference
  metadata schemas, for every metadata record type and version (Java has no oracle
  for those here): our bytes decode and re-encode byte-exactly there too.
"""

from __future__ import annotations

import importlib
import io
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod import messages
from kraft_jbod.fuzz import strategies
from kraft_jbod.wire.message import Struct
from tests.oracles.values import strip_unknown
from tools.codegen.spec import strip_comments

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "kafka-schemas"
CHECKED: dict[str, set[tuple[str, int]]] = {"kio": set(), "kafka-python": set()}


# --------------------------------------------------------------------------- kio


def _kio_class(kind: str, api_key: int, version: int) -> Any:
    from kio.index import load_request_schema, load_response_schema

    return (load_request_schema if kind == "request" else load_response_schema)(api_key, version)


def _known_error_codes(value: Any, data: st.DataObject) -> None:
    from kio.schema.errors import ErrorCode

    codes = sorted(int(c.value) for c in ErrorCode)
    if isinstance(value, list):
        for v in value:
            _known_error_codes(v, data)
    elif isinstance(value, Struct):
        for f in value._FIELDS:
            if f.attr == "error_code":
                setattr(value, f.attr, data.draw(st.sampled_from(codes)))
            else:
                _known_error_codes(getattr(value, f.attr), data)


KIO_CASES = [(kind, key) for key in (62, 63, 73) for kind in ("request", "response")]


@pytest.mark.parametrize(("kind", "api_key"), KIO_CASES)
def test_kio_agrees_on_kip858_messages(kind: str, api_key: int) -> None:
    from kio.serial import entity_reader, entity_writer

    cls = messages.request_class(api_key) if kind == "request" else messages.response_class(api_key)
    versions = range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        for v in versions:
            # kio drops out on unknown tagged fields (see the test below), so none here.
            msg = strip_unknown(data.draw(strategies.message(cls, v)))
            # kio types error codes as its ErrorCode enum: only codes Kafka defines parse.
            _known_error_codes(msg, data)
            raw = msg.encode(v)
            kcls = _kio_class(kind, api_key, v)
            parsed, size = entity_reader(kcls)(raw, 0)
            assert size == len(raw), f"kio consumed {size} of {len(raw)} bytes ({cls.NAME} v{v})"
            out = io.BytesIO()
            entity_writer(kcls)(out, parsed)
            assert out.getvalue() == raw, f"kio re-encodes {cls.NAME} v{v} differently"
            CHECKED["kio"].add((cls.NAME, v))

    check()


def test_kio_rejects_unknown_tagged_fields_which_we_preserve() -> None:
    """A peer disagreement worth knowing: kio 0.6.5 cannot read an unknown tag at all."""
    from kio.serial import entity_reader

    cls = messages.request_class(63)
    raw = cls(broker_id=1, unknown_tagged_fields=((5, b"\x01"),)).encode(1)
    with pytest.raises(KeyError, match="Unknown tagged field tag: 5"):
        entity_reader(_kio_class("request", 63, 1))(raw, 0)
    assert cls.decode(raw, 1).unknown_tagged_fields == ((5, b"\x01"),)


def test_kio_built_heartbeat_decodes_here() -> None:
    import uuid

    from kio.schema.broker_heartbeat.v1.request import BrokerHeartbeatRequest as KioHeartbeat
    from kio.schema.types import BrokerId
    from kio.serial import entity_writer
    from kio.static.primitive import i64

    dirs = (uuid.UUID(int=7), uuid.UUID(int=(1 << 128) - 1))
    req = KioHeartbeat(
        broker_id=BrokerId(4),
        broker_epoch=i64(9),
        current_metadata_offset=i64(77),
        want_fence=True,
        want_shut_down=False,
        offline_log_dirs=dirs,
    )
    out = io.BytesIO()
    entity_writer(KioHeartbeat)(out, req)
    ours = messages.request_class(63).decode(out.getvalue(), 1)
    assert (ours.broker_id, ours.broker_epoch, ours.current_metadata_offset) == (4, 9, 77)
    assert ours.want_fence is True and ours.offline_log_dirs == list(dirs)


# --------------------------------------------------------------------------- kafka-python


@pytest.fixture(scope="module")
def kafka_python_records(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """kafka-python data classes for every reference metadata record schema."""
    from kafka.protocol.api_data import ApiData

    pkg_root = tmp_path_factory.mktemp("kp")
    pkg = pkg_root / "kp_metadata_schemas"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")

    def fix(fields: list[dict[str, Any]]) -> None:
        for f in fields:
            if isinstance(f.get("tag"), str):
                f["tag"] = int(f["tag"])  # kafka-python needs integer tags
            fix(f.get("fields", []))

    names = []
    # 4.4 holds every metadata record and version (KIP-896 removed none of them).
    for path in sorted((REFERENCE / "4.4" / "metadata").glob("*.json")):
        d = json.loads(strip_comments(path.read_text()))
        d["type"] = "data"
        fix(d["fields"])
        for cs in d.get("commonStructs", []):
            fix(cs["fields"])
        (pkg / f"{d['name']}.json").write_text(json.dumps(d))
        names.append(d["name"])
    sys.path.insert(0, str(pkg_root))
    try:
        module = importlib.import_module("kp_metadata_schemas")
        classes: dict[str, Any] = {}
        for n in names:
            try:
                classes[n] = types.new_class(n, (ApiData,), {"load_json": module})
            except TypeError:
                # kafka-python 3.0.12 cannot build a struct with no fields at all
                # (EndTransactionRecord); those records are checked by hand below.
                classes[n] = None
        return classes
    finally:
        sys.path.remove(str(pkg_root))


RECORD_NAMES = sorted(entry[1] for entry in messages.METADATA_RECORDS.values())


@pytest.mark.parametrize("name", RECORD_NAMES)
def test_kafka_python_agrees_on_metadata_records(name: str, kafka_python_records: dict[str, Any]) -> None:
    cls = messages.by_name(name)
    kp = kafka_python_records[name]
    versions = range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
    if kp is None:
        assert not cls._FIELDS, f"kafka-python failed to load {name}, which has fields"
        for v in versions:
            assert cls().encode(v) == (b"\x00" if cls.is_flexible(v) else b"")
            CHECKED["kafka-python"].add((name, v))
        return

    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        for v in versions:
            msg = strip_unknown(data.draw(strategies.message(cls, v)))
            raw = msg.encode(v)
            theirs = kp.decode(raw, version=v, header=False)
            again = theirs.encode(version=v, header=False)
            # kafka-python writes tagged fields in schema order, not ascending tag order
            # (see the test below), so its bytes may differ only in that order.
            assert cls.decode(again, v) == msg, f"kafka-python decodes {name} v{v} to something else"
            if again != raw:
                assert _tag_order_differs(cls, v), f"kafka-python re-encodes {name} v{v} differently"
            CHECKED["kafka-python"].add((name, v))

    check()


def _tag_order_differs(cls: Any, version: int) -> bool:
    """Whether some struct of ``cls`` declares tagged fields out of ascending tag order."""

    def walk(struct: Any) -> bool:
        tags = [f.tag for f in struct._FIELDS if f.is_tagged(version)]
        if tags != sorted(tags):
            return True
        return any(f.struct is not None and walk(f.struct) for f in struct._FIELDS)

    return walk(cls)


def test_kafka_python_writes_tags_in_schema_order(kafka_python_records: dict[str, Any]) -> None:
    """Finding: PartitionChangeRecord declares Directories (tag 8) before tags 6 and 7.

    Kafka writes the section in ascending tag order (as we do); kafka-python 3.0.12
    writes it in declaration order. Both decode either order.
    """
    cls = messages.by_name("PartitionChangeRecord")
    msg = cls(directories=[], last_known_elr=[1])
    ours = msg.encode(2)
    assert ours.hex().endswith("0207050200000001080101")
    theirs = kafka_python_records["PartitionChangeRecord"].decode(ours, version=2, header=False)
    their_bytes = theirs.encode(version=2, header=False)
    assert their_bytes.hex().endswith("0208010107050200000001")
    assert cls.decode(their_bytes, 2) == msg
    assert _tag_order_differs(cls, 2)


def test_oracles_covered_everything() -> None:
    kip = {
        (messages.by_name(n).NAME, v)
        for n in (
            "BrokerRegistrationRequest",
            "BrokerRegistrationResponse",
            "BrokerHeartbeatRequest",
            "BrokerHeartbeatResponse",
            "AssignReplicasToDirsRequest",
            "AssignReplicasToDirsResponse",
        )
        for v in range(messages.by_name(n).VALID_VERSIONS[0], messages.by_name(n).VALID_VERSIONS[1] + 1)
    }
    assert kip <= CHECKED["kio"]
    records = {
        (n, v)
        for n in RECORD_NAMES
        for v in range(messages.by_name(n).VALID_VERSIONS[0], messages.by_name(n).VALID_VERSIONS[1] + 1)
    }
    assert records <= CHECKED["kafka-python"]
    assert ("RegisterBrokerRecord", 3) in records and ("PartitionChangeRecord", 2) in records
