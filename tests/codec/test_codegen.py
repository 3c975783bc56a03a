"""The schema compiler: the --check gate, other schema trees, and the whole dialect."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.fuzz import strategies
from tools.codegen.compile import compile_dirs, write_tree
from tools.codegen.spec import SchemaError, parse_schema

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT.parent / "shared" / "reference" / "kafka-schemas"


def test_checked_in_output_is_current() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tools.codegen", "--check"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout


def test_check_detects_a_hand_edit(tmp_path: Path) -> None:
    out = tmp_path / "pkg"
    files = compile_dirs([ROOT / "schemas" / "message"])
    write_tree(files, out)
    target = out / "broker_heartbeat_request.py"
    target.write_text(target.read_text() + "\n# edited\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tools.codegen",
            "--check",
            "--schemas",
            str(ROOT / "schemas" / "message"),
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert "stale broker_heartbeat_request.py" in proc.stderr


def _import_tree(tmp_path: Path, name: str, dirs: list[Path]) -> ModuleType:
    write_tree(compile_dirs(dirs), tmp_path / name)
    sys.path.insert(0, str(tmp_path))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def _roundtrip_all_versions(cls: Any, versions: range) -> None:
    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.data())
    def roundtrip(data: st.DataObject) -> None:
        for v in versions:
            msg = data.draw(strategies.message(cls, v))
            raw = msg.encode(v)
            back = cls.decode(raw, v)
            assert back == msg, f"{cls.NAME} v{v}"
            assert back.encode(v) == raw

    roundtrip()


@pytest.mark.parametrize("tree", ["", "v3.7.0"])
def test_compiles_and_roundtrips_reference_tree(tmp_path: Path, tree: str) -> None:
    base = REFERENCE / tree if tree else REFERENCE
    dirs = [base / "message", base / "metadata"]
    pkg_name = f"kafka_ref_{tree.replace('.', '_') or 'head'}"
    pkg = _import_tree(tmp_path, pkg_name, dirs)
    names = sorted(pkg.BY_NAME)
    assert len(names) >= 180
    checked = 0
    for name in names:
        cls = pkg.by_name(name)
        versions = range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
        _roundtrip_all_versions(cls, versions)
        checked += len(versions)
    assert checked > 600


# --------------------------------------------------------------------------- the dialect

DIALECT_SCHEMA = """
// A test schema exercising every part of the dialect.
{
  "apiKey": 9999, "type": "request", "name": "DialectRequest",
  "validVersions": "0-3", "flexibleVersions": "2+", "latestVersionUnstable": true,
  "deprecatedVersions": "0",
  "fields": [
    { "name": "B", "type": "bool", "versions": "0+", "default": "true" },
    { "name": "I8", "type": "int8", "versions": "0+", "default": "-3" },
    { "name": "I16", "type": "int16", "versions": "0+", "default": "0x7fff" },
    { "name": "U16", "type": "uint16", "versions": "0+", "default": "65535" },
    { "name": "I32", "type": "int32", "versions": "0+", "default": "-2147483648" },
    { "name": "U32", "type": "uint32", "versions": "1+", "default": "0xffffffff" },
    { "name": "I64", "type": "int64", "versions": "0+", "default": "-1" },
    { "name": "F64", "type": "float64", "versions": "0+", "default": "1.5" },
    { "name": "S", "type": "string", "versions": "0+", "nullableVersions": "1+", "default": "hello" },
    { "name": "Blob", "type": "bytes", "versions": "0+", "nullableVersions": "0+", "default": "null" },
    { "name": "Recs", "type": "records", "versions": "0+", "nullableVersions": "0+" },
    { "name": "Id", "type": "uuid", "versions": "0+" },
    { "name": "Ints", "type": "[]int32", "versions": "0+" },
    { "name": "Strs", "type": "[]string", "versions": "0+", "nullableVersions": "2+" },
    { "name": "Ids", "type": "[]uuid", "versions": "1+", "ignorable": true },
    { "name": "Items", "type": "[]Item", "versions": "0+", "fields": [
        { "name": "Key", "type": "string", "versions": "0+", "mapKey": true },
        { "name": "Val", "type": "int64", "versions": "1+" },
        { "name": "Extra", "type": "int32", "versions": "2+", "taggedVersions": "2+", "tag": 0 }
    ]},
    { "name": "Opt", "type": "Shared", "versions": "1+", "nullableVersions": "1+", "default": "null" },
    { "name": "Tagged", "type": "string", "versions": "2+", "taggedVersions": "2+", "tag": "0" },
    { "name": "TaggedIds", "type": "[]uuid", "versions": "3+", "taggedVersions": "3+", "tag": "1" },
    { "name": "TaggedStruct", "type": "Shared", "versions": "2+", "taggedVersions": "2+", "tag": 2 }
  ],
  "commonStructs": [
    { "name": "Shared", "versions": "0+", "fields": [
      { "name": "X", "type": "int16", "versions": "0+" }
    ]}
  ]
}
"""


@pytest.fixture(scope="module")
def dialect(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("dialect")
    schema_dir = tmp / "schemas"
    schema_dir.mkdir()
    (schema_dir / "DialectRequest.json").write_text(DIALECT_SCHEMA)
    pkg = _import_tree(tmp, "dialect_pkg", [schema_dir])
    return pkg.by_name("DialectRequest")


def test_dialect_defaults_and_metadata(dialect: Any) -> None:
    d = dialect()
    assert (d.b, d.i8, d.i16, d.u16, d.i32, d.u32, d.i64, d.f64) == (
        True,
        -3,
        0x7FFF,
        65535,
        -(2**31),
        2**32 - 1,
        -1,
        1.5,
    )
    assert d.s == "hello" and d.blob is None and d.recs is None and d.opt is None
    assert d.id == uuid.UUID(int=0) and d.items == [] and d.tagged == ""
    assert dialect.LATEST_VERSION_UNSTABLE is True
    assert dialect.DEPRECATED_VERSIONS == (0, 0)
    assert dialect.FLEXIBLE_MIN == 2 and dialect.API_KEY == 9999


def test_dialect_roundtrips_every_version(dialect: Any) -> None:
    @settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data: st.DataObject) -> None:
        v = data.draw(st.integers(0, 3))
        msg = data.draw(strategies.message(dialect, v))
        raw = msg.encode(v)
        assert dialect.decode(raw, v) == msg

    check()


def test_dialect_wire_layout_v0(dialect: Any) -> None:
    # v0 is classic: no u32 (absent, must stay default), int16 string length, int32 bytes length.
    msg = dialect(s="ab", ints=[1, 2], strs=["x"], items=[dialect._FIELDS[15].struct(key="k")])
    raw = msg.encode(0)
    expected = (
        "01"
        "fd"
        "7fff"
        "ffff"
        "80000000"
        "ffffffffffffffff"
        "3ff8000000000000"
        "0002"
        "6162"  # S
        "ffffffff"  # Blob null
        "ffffffff"  # Recs null
        + "00"
        * 16  # Id
        + "00000002"
        "00000001"
        "00000002"  # Ints
        "00000001"
        "0001"
        "78"  # Strs
        "00000001"
        "0001"
        "6b"  # Items[0].Key
    )
    assert raw.hex() == expected


def test_dialect_flexible_tagged_layout(dialect: Any) -> None:
    shared = dialect._FIELDS[16].struct
    msg = dialect(tagged="t", tagged_struct=shared(x=5), unknown_tagged_fields=((7, b"\x01"), (3, b"")))
    raw = msg.encode(2)
    # The tagged section sits at the very end: 4 fields in ascending tag order, unknown ones merged in.
    assert raw.endswith(bytes.fromhex("040002027402030005000300070101"))
    back = dialect.decode(raw, 2)
    assert back.unknown_tagged_fields == ((3, b""), (7, b"\x01"))
    assert back.tagged == "t" and back.tagged_struct == shared(x=5)


def test_known_tag_at_wrong_version_is_rejected(dialect: Any) -> None:
    raw = bytearray(dialect().encode(2))
    # Replace the empty tagged section with one holding tag 1 (TaggedIds, which exists only from v3).
    assert raw[-1] == 0
    raw[-1:] = bytes.fromhex("01010101")
    with pytest.raises(DecodeError, match="tag 1 is not valid for version 2"):
        dialect.decode(bytes(raw), 2)
    assert dialect.decode(bytes(raw[:-4] + bytes.fromhex("01010101")), 3).tagged_ids == []


def test_absent_field_writes(dialect: Any) -> None:
    # U32 (1+) is not ignorable: a non-default value cannot be written at v0.
    with pytest.raises(EncodeError, match="non-default U32"):
        dialect(u32=5).encode(0)
    # Ids (1+) is ignorable: silently dropped at v0.
    assert dialect(ids=[uuid.uuid4()]).encode(0) == dialect().encode(0)
    # Unknown tags cannot be written in a non-flexible version.
    with pytest.raises(EncodeError, match="non-flexible"):
        dialect(unknown_tagged_fields=((9, b""),)).encode(1)


def test_null_rules(dialect: Any) -> None:
    with pytest.raises(EncodeError, match="non-nullable"):
        dialect(s=None).encode(0)
    assert dialect.decode(dialect(s=None).encode(1), 1).s is None
    shared = dialect._FIELDS[16].struct
    assert dialect.decode(dialect(opt=shared(x=3)).encode(1), 1).opt == shared(x=3)
    assert dialect.decode(dialect(opt=None).encode(1), 1).opt is None


def test_encode_errors_name_the_field(dialect: Any) -> None:
    with pytest.raises(EncodeError, match="I16: 40000 out of range"):
        dialect(i16=40000).encode(0)
    with pytest.raises(EncodeError, match=r"Ints\[1\]"):
        dialect(ints=[1, "x"]).encode(0)


def test_schema_errors() -> None:
    with pytest.raises(SchemaError, match="cannot parse version range"):
        parse_schema('{"name": "X", "type": "data", "validVersions": "zero", "fields": []}')
    with pytest.raises(SchemaError, match="tag and taggedVersions"):
        parse_schema(
            '{"name": "X", "type": "data", "validVersions": "0", "flexibleVersions": "0+", '
            '"fields": [{"name": "A", "type": "int8", "versions": "0+", "tag": 0}]}'
        )
    with pytest.raises(SchemaError, match="unknown type"):
        parse_schema(
            '{"name": "X", "type": "data", "validVersions": "0", "fields": [{"name": "A", "type": "Nope", "versions": "0+"}]}'
        )
    with pytest.raises(SchemaError, match="uuid cannot be nullable"):
        parse_schema(
            '{"name": "X", "type": "data", "validVersions": "0", '
            '"fields": [{"name": "A", "type": "uuid", "versions": "0+", "nullableVersions": "0+"}]}'
        )


def test_extract_from_jar_and_tree(tmp_path: Path) -> None:
    from tests.oracles.java_oracle import find_jar_dir

    jar = find_jar_dir() / "kafka-clients.jar"
    out = tmp_path / "facts"
    proc = subprocess.run(
        [sys.executable, "-m", "tools.codegen.extract", str(jar), "--out", str(out), "--kafka-version", "3.9.1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    files = sorted((out / "message").glob("*.json"))
    assert len(files) >= 180
    hb = json.loads((out / "message" / "BrokerHeartbeatRequest.json").read_text())
    assert hb["validVersions"] == "0-1" and "about" not in json.dumps(hb)
    assert (out / "KAFKA_VERSION").read_text().strip() == "3.9.1"
    # The facts compile.
    assert "broker_heartbeat_request.py" in compile_dirs([out / "message"])
