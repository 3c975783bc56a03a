"""The compiled codec (kraft_jbod/_accel) against the pure-Python reference.

For every generated class and version: random valid messages (nulls, tagged fields
set and unset, unknown tags) encode to identical bytes and decode to equal values on
both backends, and the C path really did the work (its counters move); mutated and
arbitrary bytes give the same value or the same DecodeError on both. Also: the
backend switch, the fallback when the extension is absent, and the C path's handling
of inputs it leaves to Python (int subclasses, bytearrays, wrong types).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import gc
import os
import pickle
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kraft_jbod
from kraft_jbod import _accel, messages
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.fuzz.strategies import random_message
from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.metadata_response import MetadataResponse, MetadataResponsePartition, MetadataResponseTopic

ROOT = Path(__file__).resolve().parents[2]
ALL = sorted(messages.BY_NAME)
needs_c = pytest.mark.skipif(
    not _accel.available(), reason="compiled codec not built (checked in CI by test_built_in_ci)"
)


def test_built_in_ci() -> None:
    # CI installs with a compiler: a silently failed build must not pass as a green C run.
    if os.environ.get("CI") == "true":
        assert _accel.available(), "kraft_jbod._accel._ccodec did not build"
    assert kraft_jbod.codec_backend() == _accel.backend()


@pytest.fixture
def both() -> Iterator[None]:
    before = _accel.backend()
    yield
    _accel.use(before)


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return ("ok", fn())
    except DecodeError as exc:
        return ("decode-error", str(exc))
    except EncodeError as exc:
        return ("encode-error", str(exc))


def _mutations(raw: bytes, rng: random.Random) -> Iterator[bytes]:
    yield raw[: rng.randrange(len(raw) + 1)]
    for _ in range(6):
        b = bytearray(raw)
        if b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        yield bytes(b)
    b = bytearray(raw)
    i = rng.randrange(len(b) + 1)
    b[i:i] = rng.randbytes(rng.randint(1, 4))
    yield bytes(b)
    if len(raw) >= 4:
        i = rng.randrange(len(raw) - 3)
        yield raw[:i] + b"\x7f\xff\xff\xff" + raw[i + 4 :]
    yield raw + b"\x00"
    yield rng.randbytes(rng.randint(0, 40))


@needs_c
@pytest.mark.parametrize("name", ALL)
def test_backends_agree(name: str, both: None) -> None:
    cls = messages.by_name(name)
    rng = random.Random(name)
    lo, hi = cls.VALID_VERSIONS
    before = _accel._c.counters()  # type: ignore[union-attr]
    valid = 0
    for version in range(lo, hi + 1):
        for _ in range(6):
            msg = random_message(cls, version, rng)
            _accel.use("python")
            py_bytes = msg.encode(version)
            py_value = cls.decode(py_bytes, version)
            _accel.use("c")
            c_bytes = msg.encode(version)
            out = bytearray(b"prefix")
            msg.write(out, version)
            assert c_bytes == py_bytes, (version, msg)
            assert bytes(out) == b"prefix" + py_bytes
            c_value = cls.decode(py_bytes, version)
            assert c_value == py_value == msg
            assert type(c_value) is cls
            framed = b"\x01\x02" + py_bytes + b"\x03"
            assert cls.read(framed, 2, version) == (py_value, 2 + len(py_bytes))
            assert cls.read(memoryview(framed), 2, version)[0] == py_value
            valid += 1
            for bad in _mutations(py_bytes, rng):
                _accel.use("python")
                expect = _outcome(lambda bad=bad, version=version: cls.decode(bad, version))
                _accel.use("c")
                assert _outcome(lambda bad=bad, version=version: cls.decode(bad, version)) == expect, (
                    version,
                    bad.hex(),
                )
    after = _accel._c.counters()  # type: ignore[union-attr]
    # Every valid message was served by C, in both directions (not handed to Python).
    assert after["encode_c"] - before["encode_c"] >= 2 * valid
    assert after["decode_c"] - before["decode_c"] >= 3 * valid


@needs_c
def test_unknown_tags_kept_and_merged(both: None) -> None:
    _accel.use("c")
    d = uuid.UUID(int=5)
    m = BrokerHeartbeatRequest(1, 2, 3, False, False, [d], unknown_tagged_fields=((7, b"x"), (5, b"")))
    raw = m.encode(1)
    # tags 0 (OfflineLogDirs), then the unknown 5 and 7, ascending
    assert raw.endswith(bytes.fromhex("03001102" + "00" * 15 + "050500070178"))
    back = BrokerHeartbeatRequest.decode(raw, 1)
    assert back.unknown_tagged_fields == ((5, b""), (7, b"x"))
    clash = BrokerHeartbeatRequest(offline_log_dirs=[d], unknown_tagged_fields=((0, b"x"),))
    with pytest.raises(EncodeError, match="collides with a known tag"):
        clash.encode(1)


@needs_c
def test_values_c_leaves_to_python(both: None) -> None:
    class Code(enum.IntEnum):
        NONE = 0
        UNKNOWN = -1

    part = MetadataResponsePartition(error_code=Code.UNKNOWN, partition_index=True, replica_nodes=(1, 2))
    topic = MetadataResponseTopic(name="t", topic_id=uuid.UUID(int=9), partitions=[part])
    msg = MetadataResponse(topics=[topic], cluster_id=None)
    _accel.use("python")
    expect = msg.encode(12)
    _accel.use("c")
    assert msg.encode(12) == expect
    bad = MetadataResponse(topics=[MetadataResponseTopic(name=b"not text")])  # type: ignore[arg-type]
    for backend in ("python", "c"):
        _accel.use(backend)
        with pytest.raises(EncodeError, match="expected str"):
            bad.encode(12)
        with pytest.raises(EncodeError, match="out of range"):
            BrokerHeartbeatRequest(broker_id=1 << 31).encode(1)
        with pytest.raises(DecodeError, match="can't read version 9"):
            BrokerHeartbeatRequest.decode(b"", 9)
    _accel.use("c")
    assert BrokerHeartbeatRequest.decode(bytearray(BrokerHeartbeatRequest().encode(0)), 0) == BrokerHeartbeatRequest()


@needs_c
def test_uuid_cache_switch(both: None) -> None:
    _accel.use("c")
    raw = BrokerHeartbeatRequest(offline_log_dirs=[uuid.UUID(int=77)] * 2).encode(1)
    a = BrokerHeartbeatRequest.decode(raw, 1).offline_log_dirs
    assert a[0] is not a[1]  # off by default
    _accel.set_uuid_cache(True)
    try:
        b = BrokerHeartbeatRequest.decode(raw, 1).offline_log_dirs
        assert b[0] is b[1] and b == a
    finally:
        _accel.set_uuid_cache(False)


def _assign(dirs: int = 2, topics: int = 3, partitions: int = 4) -> AssignReplicasToDirsRequest:
    return AssignReplicasToDirsRequest(
        broker_id=3,
        broker_epoch=7,
        directories=[
            DirectoryData(
                id=uuid.UUID(int=100 + d),
                topics=[
                    TopicData(
                        topic_id=uuid.UUID(int=1000 * d + t), partitions=[PartitionData(p) for p in range(partitions)]
                    )
                    for t in range(topics)
                ],
            )
            for d in range(dirs)
        ],
    )


def _metadata() -> MetadataResponse:
    return MetadataResponse(
        topics=[
            MetadataResponseTopic(
                name=f"t-{t}\u00e9",
                topic_id=uuid.UUID(int=t + 1),
                partitions=[MetadataResponsePartition(partition_index=p, replica_nodes=[1, 2]) for p in range(3)],
            )
            for t in range(4)
        ],
        cluster_id="c",
    )


def _lazy_counts() -> tuple[int, int]:
    n = _accel._c.counters()  # type: ignore[union-attr]
    return n["lazy_arrays"], n["lazy_arrays_built"]


@needs_c
def test_lazy_arrays_decode_on_first_access(both: None) -> None:
    # An array of structs is kept as its bytes until read; a read gives the real list,
    # built once, and the message behaves as if decoded eagerly.
    _accel.use("c")
    msg = _assign()
    raw = msg.encode(0)
    made, built = _lazy_counts()
    value = AssignReplicasToDirsRequest.decode(raw, 0)
    assert _lazy_counts() == (made + 1, built)  # one lazy array (directories), nothing built
    dirs = value.directories
    assert type(dirs) is list and len(dirs) == 2 and type(dirs[0]) is DirectoryData
    assert value.directories is dirs  # built once, then stored
    assert _lazy_counts() == (made + 1, built + 1)  # the first read built everything below it
    assert value == msg and repr(value) == repr(msg)
    assert dirs[1].topics[2].partitions == [PartitionData(p) for p in range(4)]
    # mutation works on the list like on any decoded value, and encodes
    dirs[0].topics.append(TopicData(topic_id=uuid.UUID(int=9), partitions=[PartitionData(40)]))
    value.directories[1].topics[0].partitions[0] = PartitionData(77)
    _accel.use("python")
    expect = value.encode(0)
    _accel.use("c")
    assert value.encode(0) == expect != raw
    assert AssignReplicasToDirsRequest.decode(expect, 0) == value


@needs_c
def test_lazy_arrays_switch(both: None) -> None:
    _accel.use("c")
    msg = _assign()
    raw = msg.encode(0)
    _accel.set_lazy_arrays(False)
    try:
        made, built = _lazy_counts()
        value = AssignReplicasToDirsRequest.decode(raw, 0)
        assert value == msg and _lazy_counts() == (made, built)
    finally:
        _accel.set_lazy_arrays(True)
    AssignReplicasToDirsRequest.decode(raw, 0)
    assert _lazy_counts()[0] == made + 1


@needs_c
def test_lazy_arrays_encode_copy_and_compare_unread(both: None) -> None:
    # Every way of looking at a value that was decoded but never read sees the lists.
    _accel.use("c")
    msg = _metadata()
    raw = msg.encode(12)
    cls = MetadataResponse
    assert cls.decode(raw, 12).encode(12) == raw
    out = bytearray(b"x")
    cls.decode(raw, 12).write(out, 12)
    assert bytes(out) == b"x" + raw
    assert cls.decode(raw, 12) == msg
    assert msg == cls.decode(raw, 12)
    assert repr(cls.decode(raw, 12)) == repr(msg)
    assert copy.copy(cls.decode(raw, 12)).topics == msg.topics
    assert copy.deepcopy(cls.decode(raw, 12)) == msg
    assert pickle.loads(pickle.dumps(cls.decode(raw, 12))) == msg
    assert dataclasses.asdict(cls.decode(raw, 12)) == dataclasses.asdict(msg)
    assert dataclasses.replace(cls.decode(raw, 12), cluster_id="d").topics == msg.topics
    assert cls.decode(raw, 12).to_json(12) == msg.to_json(12)
    match cls.decode(raw, 12):
        case MetadataResponse(topics=[first, *_]):
            assert first == msg.topics[0]
        case _:
            pytest.fail("no match")
    # the class attribute is still the slot's descriptor in every way callers use
    descr = cls.__dict__["topics"]
    assert descr.__name__ == "topics" and descr.__objclass__ is cls
    value = cls.decode(raw, 12)
    value.topics = []
    assert value.topics == []
    del value.topics
    with pytest.raises(AttributeError):
        _ = value.topics
    with pytest.raises(TypeError):
        descr.__get__(BrokerHeartbeatRequest(), BrokerHeartbeatRequest)


@needs_c
def test_lazy_arrays_keep_their_own_bytes(both: None) -> None:
    # Decoded from a buffer the caller may reuse: the value does not change with it.
    _accel.use("c")
    msg = _metadata()
    raw = msg.encode(12)
    buf = bytearray(raw)
    value = MetadataResponse.decode(buf, 12)
    framed = bytearray(b"ab" + raw)
    read, end = MetadataResponse.read(memoryview(framed), 2, 12)
    big = b"-" * 100_000 + raw
    from_big, _ = MetadataResponse.read(big, 100_000, 12)
    lazy = [r for r in gc.get_referents(from_big) if type(r).__name__ == "LazyArray"]
    assert lazy  # unread arrays, holding a copy of their bytes: `big` itself is not kept
    assert sys.getrefcount(big) == 2  # the name and getrefcount's argument
    buf[:] = bytes(len(buf))
    framed[:] = bytes(len(framed))
    assert from_big == msg
    assert end == 2 + len(raw)
    assert value == msg and read == msg
    assert value.encode(12) == raw


@needs_c
def test_lazy_arrays_refuse_bad_nested_bytes_at_decode(both: None) -> None:
    # The bytes inside an array nobody reads yet are checked when the message is decoded:
    # a bad topic name, a short partition array and a repeated tag are refused then, with
    # the reference codec's error.
    msg = _metadata()
    raw = msg.encode(12)
    name = "t-2\u00e9".encode()
    at = raw.index(name)
    bad_text = raw[:at] + b"t-2\xff\xfe" + raw[at + len(name) :]
    short = raw[:-40]
    assert len(bad_text) == len(raw)
    for bad in (bad_text, short):
        _accel.use("python")
        with pytest.raises(DecodeError) as expected:
            MetadataResponse.decode(bad, 12)
        _accel.use("c")
        with pytest.raises(DecodeError) as got:
            MetadataResponse.decode(bad, 12)
        assert str(got.value) == str(expected.value)


@needs_c
def test_class_decode_entry(both: None) -> None:
    # Message.decode / read on the compiled codec: one callable per class, made once,
    # bound to the class it is looked up on (a subclass, an instance's class).
    _accel.use("c")
    raw = BrokerHeartbeatRequest(broker_id=5, offline_log_dirs=[uuid.UUID(int=1)]).encode(1)
    assert BrokerHeartbeatRequest.decode is BrokerHeartbeatRequest.decode
    assert BrokerHeartbeatRequest().decode(raw, 1).broker_id == 5
    assert BrokerHeartbeatRequest.read(b"-" + raw, 1, 1)[1] == 1 + len(raw)

    class Sub(BrokerHeartbeatRequest):
        __slots__ = ()

    value = Sub.decode(raw, 1)
    assert type(value) is Sub and value.offline_log_dirs == [uuid.UUID(int=1)]
    with pytest.raises(DecodeError):
        BrokerHeartbeatRequest.decode(raw + b"x", 1)
    with pytest.raises(TypeError):
        BrokerHeartbeatRequest.decode(raw, 1, 2, 3, 4)
    _accel.use("python")
    from kraft_jbod.wire.message import Message

    assert isinstance(Message.__dict__["decode"], classmethod)
    assert BrokerHeartbeatRequest.decode(raw, 1).broker_id == 5


def test_switch_and_report(both: None) -> None:
    _accel.use("python")
    assert kraft_jbod.codec_backend() == "python"
    with pytest.raises(ValueError, match="unknown codec backend"):
        _accel.use("rust")
    if _accel.available():
        _accel.use("c")
        assert kraft_jbod.codec_backend() == "c"


SANITIZER_ENV = ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "PYTHONMALLOC")


def _run(code: str, env_extra: dict[str, str], tmp: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp or ROOT), **env_extra}
    # Under tools/accel_sanitize.py the extension needs the preloaded sanitizer runtime.
    env.update({k: v for k, v in os.environ.items() if k in SANITIZER_ENV})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env, cwd=tmp or ROOT
    )


def test_fallback_without_the_extension(tmp_path: Path) -> None:
    # A copy of the package with no compiled extension, as after an install on a
    # machine without a C compiler: everything imports and the Python codec runs.
    import shutil

    shutil.copytree(ROOT / "kraft_jbod", tmp_path / "kraft_jbod", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    code = (
        "import kraft_jbod, uuid\n"
        "from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest as B\n"
        "m = B(offline_log_dirs=[uuid.UUID(int=3)])\n"
        "assert B.decode(m.encode(1), 1) == m\n"
        "print(kraft_jbod.codec_backend())\n"
    )
    auto = _run(code, {}, tmp_path)
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout.strip() == "python"
    forced = _run(code, {"KRAFT_JBOD_CODEC": "c"}, tmp_path)
    assert forced.returncode != 0
    assert "compiled codec is not built" in forced.stderr
    cli = subprocess.run(
        [sys.executable, "-m", "kraft_jbod.cli", "--version"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)},
        cwd=tmp_path,
    )
    assert cli.returncode == 0, cli.stderr
    assert "codec: python" in cli.stdout


def test_an_extension_of_another_interface_is_not_used(tmp_path: Path) -> None:
    # An extension built from another _ccodec.c (here a stand-in module with an older
    # interface number): refused at import as a whole, the Python codec runs and
    # KRAFT_JBOD_CODEC=c names the mismatch.
    import shutil

    shutil.copytree(ROOT / "kraft_jbod", tmp_path / "kraft_jbod", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    (tmp_path / "kraft_jbod" / "_accel" / "_ccodec.py").write_text("ABI_VERSION = 1\n", encoding="utf-8")
    code = "import kraft_jbod.wire.message, kraft_jbod; print(kraft_jbod.codec_backend())"
    auto = _run(code, {}, tmp_path)
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout.strip() == "python"
    forced = _run(code, {"KRAFT_JBOD_CODEC": "c"}, tmp_path)
    assert forced.returncode != 0
    assert "built from another _ccodec.c (interface 1, this package needs" in forced.stderr


def test_env_selects_python() -> None:
    proc = _run("import kraft_jbod; print(kraft_jbod.codec_backend())", {"KRAFT_JBOD_CODEC": "python"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "python"
    bad = _run("import kraft_jbod.wire.message", {"KRAFT_JBOD_CODEC": "fast"})
    assert bad.returncode != 0 and "expected auto, c or python" in bad.stderr


@pytest.mark.skipif(not _accel.available(), reason="the compiled codec is not built")
def test_a_planner_that_clears_the_plan_cache_mid_call_costs_nothing(both: None) -> None:
    # The planner is Python and may empty the plan cache while the compiled codec waits on
    # it (configure and clear_plans do): the plan it returns must not be handed out from a
    # freed list. The sanitizer run (tools/accel_sanitize.py) catches a use after free here.
    import uuid as uuid_mod

    from kraft_jbod._accel import _ccodec as c
    from kraft_jbod._accel.plans import plan_for

    _accel.use("c")
    hb = BrokerHeartbeatRequest(broker_id=4, broker_epoch=9, current_metadata_offset=77)
    raw = {v: hb.encode(v) for v in (0, 1)}
    cleared: list[int] = []

    def clearing_planner(cls: type, version: int) -> Any:
        if not cleared:
            cleared.append(version)
            c.clear_plans()
            gc.collect()
        return plan_for(cls, version)

    py = _accel._python  # type: ignore[attr-defined]
    c.configure(uuid_mod.UUID, uuid_mod.SafeUUID.unknown, clearing_planner,
                py["decode"].__func__, py["read"].__func__, py["encode"], py["write"])  # fmt: skip
    try:
        c.clear_plans()
        for _ in range(3):
            for v, data in raw.items():
                assert BrokerHeartbeatRequest.decode(data, v) == hb
        assert cleared
    finally:
        _accel.use("python")
        _accel.use("c")
