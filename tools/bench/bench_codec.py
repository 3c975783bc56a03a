"""Encode and decode throughput of kraft_jbod's generated codec against two peers.

The peers are kio 0.6.5 (decoder in Rust through pyo3, encoder in pure Python) and
kafka-python 3.0.12's JSON-schema engine. kafka-python bundles no KRaft schemas, so
this script feeds it Apache Kafka's own JSON schemas taken from ``kafka-clients.jar``
(inside the ``shigawire-apache-flink-libraries`` wheel), with string ``tag`` values
turned into ints as its engine requires.

Strategy:

* Each case is one plain description of a message; three builders turn it into the
  three libraries' objects. Before anything is timed the script checks that all
  three encoders produce the same bytes and that every decoder, fed those bytes,
  gives back an object its own encoder turns into the same bytes again. A mismatch
  stops the run: a fast codec that is wrong is worth nothing.
* Timing uses ``time.perf_counter`` around a loop of ``n`` calls, ``n`` calibrated
  per peer so one batch lasts about ``--batch-ms``. Every round times every peer,
  in an order rotated each round, so machine noise lands on all of them alike; the
  figure kept is the best (lowest) time per call over the rounds.
* The call timed is the public one-shot API of each library: ``Cls.decode`` /
  ``obj.encode`` here, ``entity_reader`` / ``entity_writer`` plus ``BytesIO`` for kio,
  ``Cls.decode`` / ``obj.encode`` for kafka-python.
* Decode batches are driven by a C-level loop (``deque(map(decode, inputs), maxlen=0)``,
  the decode callable of each library: ``map(Cls.decode, inputs, repeat(version))`` for
  ours), as Java's batch is a JIT-compiled loop; the driver's own cost per call (the same
  ``map`` over a no-op builtin) is measured and reported as ``loop_ns``, and is included
  in every peer's figure. ``--loop python`` times decode the old way instead: a Python
  ``for`` loop calling a one-argument closure per input. Encode batches are a Python
  loop over a zero-argument closure for every peer.
* Our compiled codec builds arrays of structs and of uuids on first access (see
  docs/codec.md); its decode is also timed with that off (``ours-eager``), which is
  what a caller that reads every element pays.

Results are ratios (ours / peer, >1 means ours is faster), printed as a table and,
with ``--json``, as one JSON document. Nothing here asserts a speed: the targets are
shown next to the ratios for the reader to judge.

Run: ``python -m tools.bench.bench_codec [--rounds 7] [--batch-ms 40] [--json]``.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import io
import json
import operator
import random
import re
import sys
import tempfile
import time
import uuid
import zipfile
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from pathlib import Path
from types import ModuleType
from typing import Any

from kraft_jbod.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_registration_request import BrokerRegistrationRequest, Feature, Listener
from kraft_jbod.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

PEERS = ("ours", "kio", "kafka-python")

# Targets from the codec issue, as ours/peer throughput ratios.
TARGETS: dict[tuple[str, str], float] = {
    ("decode", "kio"): 1.5,
    ("decode", "kafka-python"): 5.0,
    ("encode", "kio"): 6.0,
    ("encode", "kafka-python"): 3.0,
}

JAR_SCHEMAS = ("BrokerRegistrationRequest", "BrokerHeartbeatRequest", "AssignReplicasToDirsRequest", "MetadataResponse")


class BenchError(Exception):
    """The peers disagree, or a peer is missing: the run cannot produce honest figures."""


# --------------------------------------------------------------------------- message descriptions


def _uuids(rnd: random.Random, count: int) -> list[uuid.UUID]:
    # Kept away from the low reserved range: kio decodes the zero uuid as None.
    return [uuid.UUID(int=rnd.getrandbits(128) | (1 << 120)) for _ in range(count)]


@dataclass(frozen=True)
class Registration:
    broker_id: int
    cluster_id: str
    incarnation_id: uuid.UUID
    listeners: list[tuple[str, str, int, int]]
    features: list[tuple[str, int, int]]
    rack: str | None
    log_dirs: list[uuid.UUID]
    previous_broker_epoch: int


@dataclass(frozen=True)
class Heartbeat:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    offline_log_dirs: list[uuid.UUID]


@dataclass(frozen=True)
class Assign:
    broker_id: int
    broker_epoch: int
    # directory id -> [(topic id, [partition index])]
    directories: list[tuple[uuid.UUID, list[tuple[uuid.UUID, list[int]]]]]


@dataclass(frozen=True)
class Metadata:
    brokers: list[tuple[int, str, int, str | None]]
    cluster_id: str
    controller_id: int
    # (name, id, [(index, leader, epoch, replicas, isr)])
    topics: list[tuple[str, uuid.UUID, list[tuple[int, int, int, list[int], list[int]]]]]


def registration_spec(seed: int = 62) -> Registration:
    rnd = random.Random(seed)
    return Registration(
        broker_id=1 + seed % 1000,
        cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
        incarnation_id=_uuids(rnd, 1)[0],
        listeners=[("PLAINTEXT", "broker-1.kafka.internal", 9092, 0)],
        features=[("metadata.version", 1, 21), ("kraft.version", 0, 1)],
        rack="rack-a",
        log_dirs=_uuids(rnd, 3),
        previous_broker_epoch=41,
    )


def heartbeat_spec(seed: int = 63) -> Heartbeat:
    rnd = random.Random(seed)
    return Heartbeat(
        broker_id=1 + seed % 1000, broker_epoch=42, current_metadata_offset=1000 + seed, offline_log_dirs=_uuids(rnd, 2)
    )


def assign_spec(seed: int = 73, dirs: int = 3, topics: int = 15, partitions: int = 50) -> Assign:
    rnd = random.Random(seed)
    topic_ids = _uuids(rnd, dirs * topics)
    directories = []
    for d, dir_id in enumerate(_uuids(rnd, dirs)):
        entries = [(topic_ids[d * topics + t], list(range(partitions))) for t in range(topics)]
        directories.append((dir_id, entries))
    return Assign(broker_id=1, broker_epoch=42, directories=directories)


def metadata_spec(seed: int = 3, topics: int = 100, partitions: int = 12) -> Metadata:
    rnd = random.Random(seed)
    brokers: list[tuple[int, str, int, str | None]] = [
        (n, f"broker-{n}.kafka.internal", 9092, f"rack-{n}") for n in (1, 2, 3)
    ]
    topic_list = []
    for t, tid in enumerate(_uuids(rnd, topics)):
        parts = []
        for p in range(partitions):
            replicas = [1 + (p + k) % 3 for k in range(3)]
            parts.append((p, replicas[0], 7, replicas, list(replicas)))
        topic_list.append((f"topic-{t:03d}", tid, parts))
    return Metadata(brokers=brokers, cluster_id="MkU3OEVBNTcwNTJENDM2Qk", controller_id=1, topics=topic_list)


# --------------------------------------------------------------------------- ours


def ours_registration(s: Registration) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=s.broker_id,
        cluster_id=s.cluster_id,
        incarnation_id=s.incarnation_id,
        listeners=[Listener(name=n, host=h, port=p, security_protocol=sp) for n, h, p, sp in s.listeners],
        features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi) for n, lo, hi in s.features],
        rack=s.rack,
        log_dirs=list(s.log_dirs),
        previous_broker_epoch=s.previous_broker_epoch,
    )


def ours_heartbeat(s: Heartbeat) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(
        broker_id=s.broker_id,
        broker_epoch=s.broker_epoch,
        current_metadata_offset=s.current_metadata_offset,
        offline_log_dirs=list(s.offline_log_dirs),
    )


def ours_assign(s: Assign) -> AssignReplicasToDirsRequest:
    return AssignReplicasToDirsRequest(
        broker_id=s.broker_id,
        broker_epoch=s.broker_epoch,
        directories=[
            DirectoryData(
                id=d,
                topics=[
                    TopicData(topic_id=t, partitions=[PartitionData(partition_index=p) for p in ps]) for t, ps in ts
                ],
            )
            for d, ts in s.directories
        ],
    )


def ours_metadata(s: Metadata) -> MetadataResponse:
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=n, host=h, port=p, rack=r) for n, h, p, r in s.brokers],
        cluster_id=s.cluster_id,
        controller_id=s.controller_id,
        topics=[
            MetadataResponseTopic(
                error_code=0,
                name=name,
                topic_id=tid,
                is_internal=False,
                partitions=[
                    MetadataResponsePartition(
                        error_code=0,
                        partition_index=i,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=list(rep),
                        isr_nodes=list(isr),
                        offline_replicas=[],
                    )
                    for i, leader, epoch, rep, isr in parts
                ],
            )
            for name, tid, parts in s.topics
        ],
    )


# --------------------------------------------------------------------------- kio


def _kio(path: str) -> ModuleType:
    return importlib.import_module(f"kio.schema.{path}")


def kio_registration(s: Registration) -> Any:
    m = _kio("broker_registration.v3.request")
    return m.BrokerRegistrationRequest(
        broker_id=s.broker_id,
        cluster_id=s.cluster_id,
        incarnation_id=s.incarnation_id,
        listeners=tuple(m.Listener(name=n, host=h, port=p, security_protocol=sp) for n, h, p, sp in s.listeners),
        features=tuple(
            m.Feature(name=n, min_supported_version=lo, max_supported_version=hi) for n, lo, hi in s.features
        ),
        rack=s.rack,
        is_migrating_zk_broker=False,
        log_dirs=tuple(s.log_dirs),
        previous_broker_epoch=s.previous_broker_epoch,
    )


def kio_heartbeat(s: Heartbeat) -> Any:
    m = _kio("broker_heartbeat.v1.request")
    return m.BrokerHeartbeatRequest(
        broker_id=s.broker_id,
        broker_epoch=s.broker_epoch,
        current_metadata_offset=s.current_metadata_offset,
        want_fence=False,
        want_shut_down=False,
        offline_log_dirs=tuple(s.offline_log_dirs),
    )


def kio_assign(s: Assign) -> Any:
    m = _kio("assign_replicas_to_dirs.v0.request")
    return m.AssignReplicasToDirsRequest(
        broker_id=s.broker_id,
        broker_epoch=s.broker_epoch,
        directories=tuple(
            m.DirectoryData(
                id_=d,
                topics=tuple(
                    m.TopicData(topic_id=t, partitions=tuple(m.PartitionData(partition_index=p) for p in ps))
                    for t, ps in ts
                ),
            )
            for d, ts in s.directories
        ),
    )


def kio_metadata(s: Metadata) -> Any:
    import datetime

    m = _kio("metadata.v12.response")
    none = importlib.import_module("kio.schema.errors").ErrorCode.none
    return m.MetadataResponse(
        throttle_time=datetime.timedelta(0),
        brokers=tuple(m.MetadataResponseBroker(node_id=n, host=h, port=p, rack=r) for n, h, p, r in s.brokers),
        cluster_id=s.cluster_id,
        controller_id=s.controller_id,
        topics=tuple(
            m.MetadataResponseTopic(
                error_code=none,
                name=name,
                topic_id=tid,
                is_internal=False,
                partitions=tuple(
                    m.MetadataResponsePartition(
                        error_code=none,
                        partition_index=i,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=tuple(rep),
                        isr_nodes=tuple(isr),
                        offline_replicas=(),
                    )
                    for i, leader, epoch, rep, isr in parts
                ),
                topic_authorized_operations=-(2**31),
            )
            for name, tid, parts in s.topics
        ),
    )


# --------------------------------------------------------------------------- kafka-python


def find_kafka_clients_jar() -> Path:
    """Locate ``pyflink/lib/kafka-clients.jar`` on ``sys.path``.

    Raises:
        BenchError: the wheel that ships it is not installed.
    """
    for entry in sys.path:
        candidate = Path(entry) / "pyflink" / "lib" / "kafka-clients.jar"
        if candidate.is_file():
            return candidate
    raise BenchError(
        "kafka-clients.jar not found; install shigawire-apache-flink-libraries==2.0.0.post1 for the kafka-python peer"
    )


def _int_tags(fields: list[dict[str, Any]]) -> None:
    # Kafka's JSON sometimes spells a tag as a string ("0"); kafka-python needs ints.
    for f in fields:
        if isinstance(f.get("tag"), str):
            f["tag"] = int(f["tag"])
        _int_tags(f.get("fields", []))


def load_kafka_python_classes(jar: Path, workdir: Path) -> dict[str, Any]:
    """kafka-python ``ApiMessage`` classes built from the jar's JSON schemas.

    Raises:
        BenchError: a schema is missing from the jar.
    """
    api_message = importlib.import_module("kafka.protocol.api_message").ApiMessage
    package = "kraft_jbod_bench_jarschemas"
    pkg_dir = workdir / package
    pkg_dir.mkdir()
    (pkg_dir / "__init__.py").write_text("")
    with zipfile.ZipFile(jar) as z:
        for name in JAR_SCHEMAS:
            try:
                text = z.read(f"common/message/{name}.json").decode("utf-8")
            except KeyError:
                raise BenchError(f"{jar} has no common/message/{name}.json") from None
            doc = json.loads(re.sub(r"(?m)^\s*//.*\n?", "", text))
            _int_tags(doc["fields"])
            for common in doc.get("commonStructs", []):
                _int_tags(common["fields"])
            (pkg_dir / f"{name}.json").write_text(json.dumps(doc))
    sys.path.insert(0, str(workdir))
    try:
        module = importlib.import_module(package)
    finally:
        sys.path.remove(str(workdir))
    return {name: type(name, (api_message,), {}, load_json=module) for name in JAR_SCHEMAS}


def kp_registration(k: dict[str, Any], s: Registration) -> Any:
    c = k["BrokerRegistrationRequest"]
    return c(
        broker_id=s.broker_id,
        cluster_id=s.cluster_id,
        incarnation_id=s.incarnation_id,
        listeners=[c.Listener(name=n, host=h, port=p, security_protocol=sp) for n, h, p, sp in s.listeners],
        features=[c.Feature(name=n, min_supported_version=lo, max_supported_version=hi) for n, lo, hi in s.features],
        rack=s.rack,
        is_migrating_zk_broker=False,
        log_dirs=list(s.log_dirs),
        previous_broker_epoch=s.previous_broker_epoch,
    )


def kp_heartbeat(k: dict[str, Any], s: Heartbeat) -> Any:
    return k["BrokerHeartbeatRequest"](
        broker_id=s.broker_id,
        broker_epoch=s.broker_epoch,
        current_metadata_offset=s.current_metadata_offset,
        want_fence=False,
        want_shut_down=False,
        offline_log_dirs=list(s.offline_log_dirs),
    )


def kp_assign(k: dict[str, Any], s: Assign) -> Any:
    c = k["AssignReplicasToDirsRequest"]
    dd = c.DirectoryData
    return c(
        broker_id=s.broker_id,
        broker_epoch=s.broker_epoch,
        directories=[
            dd(
                id=d,
                topics=[
                    dd.TopicData(topic_id=t, partitions=[dd.TopicData.PartitionData(partition_index=p) for p in ps])
                    for t, ps in ts
                ],
            )
            for d, ts in s.directories
        ],
    )


def kp_metadata(k: dict[str, Any], s: Metadata) -> Any:
    c = k["MetadataResponse"]
    topic_cls = c.MetadataResponseTopic
    part_cls = topic_cls.MetadataResponsePartition
    return c(
        throttle_time_ms=0,
        brokers=[c.MetadataResponseBroker(node_id=n, host=h, port=p, rack=r) for n, h, p, r in s.brokers],
        cluster_id=s.cluster_id,
        controller_id=s.controller_id,
        topics=[
            topic_cls(
                error_code=0,
                name=name,
                topic_id=tid,
                is_internal=False,
                partitions=[
                    part_cls(
                        error_code=0,
                        partition_index=i,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=list(rep),
                        isr_nodes=list(isr),
                        offline_replicas=[],
                    )
                    for i, leader, epoch, rep, isr in parts
                ],
                topic_authorized_operations=-(2**31),
            )
            for name, tid, parts in s.topics
        ],
    )


# --------------------------------------------------------------------------- cases and peers


@dataclass
class PeerCodec:
    """One library's view of one case: a ready object and its one-shot calls."""

    encode: Callable[[], bytes]
    decode: Callable[[bytes], Any]
    reencode: Callable[[Any], bytes]
    # The same decode over many inputs in a C-level loop (map), results dropped.
    decode_all: Callable[[list[bytes]], None]


def _drain(it: Any) -> None:
    deque(it, maxlen=0)


@dataclass
class Case:
    name: str
    api_key: int
    kind: str
    version: int
    peers: dict[str, PeerCodec]
    variant: Callable[[int], bytes]  # seed -> a distinct encoding of the same shape
    wire: bytes = b""
    inputs: list[bytes] = field(default_factory=list)
    results: dict[str, dict[str, float]] = field(default_factory=dict)  # op -> peer -> seconds per call


def _ours(obj: Any, version: int) -> PeerCodec:
    cls = type(obj)
    return PeerCodec(
        encode=lambda: obj.encode(version),
        decode=lambda data: cls.decode(data, version),
        reencode=lambda value: value.encode(version),
        decode_all=lambda inputs: _drain(map(cls.decode, inputs, repeat(version))),
    )


def _kio_codec(obj: Any) -> PeerCodec:
    serial = importlib.import_module("kio.serial")
    reader = serial.entity_reader(type(obj))
    writer = serial.entity_writer(type(obj))

    def encode_value(value: Any) -> bytes:
        buf = io.BytesIO()
        writer(buf, value)
        return buf.getvalue()

    def decode(data: bytes) -> Any:
        value, size = reader(data, 0)
        if size != len(data):
            raise BenchError(f"kio consumed {size} of {len(data)} bytes")
        return value

    return PeerCodec(
        encode=lambda: encode_value(obj),
        decode=decode,
        reencode=encode_value,
        decode_all=lambda inputs: _drain(map(decode, inputs)),
    )


def _kp_codec(obj: Any, version: int) -> PeerCodec:
    cls = type(obj)

    def reencode(value: Any) -> bytes:
        value._header = None  # decode() leaves it unset; encode() reads it
        return bytes(value.encode(version=version))

    return PeerCodec(
        encode=lambda: obj.encode(version=version),
        decode=lambda data: cls.decode(data, version=version),
        reencode=reencode,
        decode_all=lambda inputs: _drain(map(partial(cls.decode, version=version), inputs)),
    )


def build_cases(kp: dict[str, Any], names: Sequence[str] | None = None) -> list[Case]:
    reg, hb, asg, md = registration_spec(), heartbeat_spec(), assign_spec(), metadata_spec()
    cases = [
        Case(
            "BrokerRegistrationRequest v3 (1 listener, 2 features, 3 dirs)",
            62,
            "request",
            3,
            {
                "ours": _ours(ours_registration(reg), 3),
                "kio": _kio_codec(kio_registration(reg)),
                "kafka-python": _kp_codec(kp_registration(kp, reg), 3),
            },
            lambda seed: ours_registration(registration_spec(1000 + seed)).encode(3),
        ),
        Case(
            "BrokerHeartbeatRequest v1 (2 offline dirs)",
            63,
            "request",
            1,
            {
                "ours": _ours(ours_heartbeat(hb), 1),
                "kio": _kio_codec(kio_heartbeat(hb)),
                "kafka-python": _kp_codec(kp_heartbeat(kp, hb), 1),
            },
            lambda seed: ours_heartbeat(heartbeat_spec(1000 + seed)).encode(1),
        ),
        Case(
            "AssignReplicasToDirsRequest v0 (3 dirs x 15 topics x 50 partitions)",
            73,
            "request",
            0,
            {
                "ours": _ours(ours_assign(asg), 0),
                "kio": _kio_codec(kio_assign(asg)),
                "kafka-python": _kp_codec(kp_assign(kp, asg), 0),
            },
            lambda seed: ours_assign(assign_spec(1000 + seed)).encode(0),
        ),
        Case(
            "MetadataResponse v12 (100 topics x 12 partitions, 3 replicas)",
            3,
            "response",
            12,
            {
                "ours": _ours(ours_metadata(md), 12),
                "kio": _kio_codec(kio_metadata(md)),
                "kafka-python": _kp_codec(kp_metadata(kp, md), 12),
            },
            lambda seed: ours_metadata(metadata_spec(1000 + seed)).encode(12),
        ),
    ]
    if names:
        cases = [c for c in cases if any(n.lower() in c.name.lower() for n in names)]
    return cases


def verify(case: Case) -> None:
    """All encoders agree byte for byte; every decoder round-trips the common bytes.

    Also: a distinct input decodes and round-trips in every peer (so the pool of distinct
    inputs measures the same work as the reference bytes).

    Raises:
        BenchError: naming the peer and the first differing offset.
    """
    encoded = {peer: bytes(codec.encode()) for peer, codec in case.peers.items()}
    reference = encoded["ours"]
    for peer, data in encoded.items():
        if data != reference:
            at = next(
                (i for i, (a, b) in enumerate(zip(data, reference, strict=False)) if a != b),
                min(len(data), len(reference)),
            )
            raise BenchError(
                f"{case.name}: {peer} encodes {len(data)} bytes, ours {len(reference)}; first difference at {at}"
            )
    other = case.variant(0)
    if other == reference or len(other) != len(reference):
        raise BenchError(f"{case.name}: a variant input should differ from the reference but keep its size")
    for peer, codec in case.peers.items():
        for data in (reference, other):
            again = bytes(codec.reencode(codec.decode(data)))
            if again != data:
                raise BenchError(f"{case.name}: {peer} does not round-trip the common bytes")
    case.wire = reference


# --------------------------------------------------------------------------- timing
#
# Fairness rules (issue 16): the garbage collector stays on during timed batches, as in
# a server; every decode in a batch gets a different byte string with different
# content (different ids and uuids), so no cache sees an input twice within a batch;
# the UUID caches are emptied before each batch; "ours" is measured with its UUID
# cache off (the compiled codec's default) and on ("ours+cache"), and with its arrays
# of structs and uuids built during the decode ("ours-eager") rather than on first
# access (the compiled codec's default): what a caller that reads every element pays.

DECODERS = ("ours", "ours+cache", "ours-eager", "kio", "kafka-python")
# CPU time of this process (the GC included, since it runs in-thread): on a shared
# machine, time spent descheduled would otherwise land on whichever peer was running.
CLOCK = time.process_time
MAX_POOL = 50_000


def _set_lazy_arrays(enabled: bool) -> None:
    from kraft_jbod import _accel

    _accel.set_lazy_arrays(enabled)


def _set_uuid_cache(enabled: bool) -> None:
    from kraft_jbod import _accel
    from kraft_jbod.wire import primitives

    primitives._UUID_CACHE.clear()
    primitives._UUID_CACHE_MAX = 65536 if enabled else 0  # 0: the Python cache empties itself on every insert
    _accel.set_uuid_cache(enabled)


def _batch_encode(fn: Callable[[], object], n: int) -> float:
    loop = range(n)
    start = CLOCK()
    for _ in loop:
        fn()
    return CLOCK() - start


def _batch_decode(fn: Callable[[bytes], object], pool: list[bytes], n: int) -> float:
    inputs = pool[:n]
    start = CLOCK()
    for data in inputs:
        fn(data)
    return CLOCK() - start


def _batch_decode_all(fn: Callable[[list[bytes]], None], pool: list[bytes], n: int) -> float:
    inputs = pool[:n]
    start = CLOCK()
    fn(inputs)
    return CLOCK() - start


# How decode batches are driven: "map" (a C-level loop, the default) or "python" (a
# Python for loop calling a closure per input). Set by main().
DECODE_LOOP = "map"


def loop_cost(pool: list[bytes], rounds: int) -> float:
    """Seconds per call of the decode driver itself: the same loop over a no-op builtin
    of the same arity (``operator.is_``), best of ``rounds``. Part of every decode figure."""
    best = float("inf")
    noop = operator.is_
    for _ in range(rounds):
        gc.collect()
        if DECODE_LOOP == "map":
            took = _batch_decode_all(lambda inputs: _drain(map(noop, inputs, repeat(0))), pool, len(pool))
        else:
            took = _batch_decode(lambda data: noop(data, 0), pool, len(pool))
        best = min(best, took / len(pool))
    return best


def _per_call(op: str, peer: str, case: Case, n: int) -> float:
    codec = case.peers["ours" if peer.startswith("ours") else peer]
    if op == "encode":
        return _batch_encode(codec.encode, n) / n
    # Caches emptied before every batch; on only for "ours+cache". The Python codec's
    # cache (its default is on) follows the same setting, so --backend python compares alike.
    _set_uuid_cache(peer == "ours+cache")
    _set_lazy_arrays(peer != "ours-eager")
    try:
        if DECODE_LOOP == "map":
            return _batch_decode_all(codec.decode_all, case.inputs, n) / n
        return _batch_decode(codec.decode, case.inputs, n) / n
    finally:
        _set_uuid_cache(False)
        _set_lazy_arrays(True)


def _grow_pool(case: Case, n: int) -> None:
    while len(case.inputs) < min(n, MAX_POOL):
        case.inputs.append(case.variant(len(case.inputs) + 1))


def measure(case: Case, rounds: int, batch_s: float) -> None:
    """Fill ``case.results`` with the best seconds per call of every peer and operation."""
    _grow_pool(case, 64)
    calls = [("encode", p) for p in PEERS] + [("decode", p) for p in DECODERS]
    sizes: dict[tuple[str, str], int] = {}
    for op, peer in calls:
        n = 1
        while True:
            if op == "decode":
                _grow_pool(case, n)
                n = min(n, len(case.inputs))
            took = _per_call(op, peer, case, n) * n
            if took >= batch_s / 10 or n >= MAX_POOL or n >= 1 << 24:
                break
            n *= 2
        n = max(1, int(n * batch_s / took)) if took > 0 else n
        if op == "decode":
            _grow_pool(case, n)
            n = min(n, len(case.inputs))
        sizes[(op, peer)] = n
    best: dict[tuple[str, str], float] = {}
    for r in range(rounds):
        order = calls[r % len(calls) :] + calls[: r % len(calls)]
        for op, peer in order:
            gc.collect()  # the same starting point for every batch; the collector stays on inside it
            per_call = _per_call(op, peer, case, sizes[(op, peer)])
            key = (op, peer)
            best[key] = min(best.get(key, per_call), per_call)
    for (op, peer), seconds in best.items():
        case.results.setdefault(op, {})[peer] = seconds


def measure_read_all(case: Case, rounds: int, batch_s: float) -> dict[str, float]:
    """Seconds per message of our decode followed by an encode of the value, which reads
    every element: with arrays built on first access ("lazy") and during the decode ("eager"),
    alternating per round, best of ``rounds``. What a caller that reads everything pays."""
    codec = case.peers["ours"]

    def both(data: bytes) -> object:
        return codec.reencode(codec.decode(data))

    _grow_pool(case, 64)
    n = 1
    while True:
        _grow_pool(case, n)
        n = min(n, len(case.inputs))
        took = _batch_decode(both, case.inputs, n)
        if took >= batch_s / 10 or n >= MAX_POOL:
            break
        n *= 2
    n = max(1, min(int(n * batch_s / took) if took > 0 else n, MAX_POOL))
    _grow_pool(case, n)
    n = min(n, len(case.inputs))
    best: dict[str, float] = {}
    try:
        for r in range(rounds):
            for mode in ("lazy", "eager") if r % 2 == 0 else ("eager", "lazy"):
                _set_lazy_arrays(mode == "lazy")
                gc.collect()
                per_call = _batch_decode(both, case.inputs, n) / n
                best[mode] = min(best.get(mode, per_call), per_call)
    finally:
        _set_lazy_arrays(True)
    return best


# --------------------------------------------------------------------------- Java (the ceiling)

JAVA_SOURCE = Path(__file__).resolve().parent / "java" / "CodecBench.java"


def measure_java(cases: Sequence[Case], rounds: int, batch_s: float, inputs: int) -> str | None:
    """Kafka's own codec (kafka-clients from the same wheel) on the same bytes; None if it ran.

    Returns the reason when Java could not be measured (no JDK), so the table says so.
    """
    import shutil
    import subprocess

    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        return "no JDK (javac/java) on PATH"
    jar_dir = find_kafka_clients_jar().parent
    cp = ":".join(str(jar_dir / j) for j in ("kafka-clients.jar", "slf4j-api.jar") if (jar_dir / j).exists())
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([javac, "-nowarn", "-cp", cp, "-d", tmp, str(JAVA_SOURCE)], check=True, capture_output=True)
        lines = []
        for i, case in enumerate(cases):
            lines.append(f"CASE {i} {case.api_key} {case.kind} {case.version} {rounds} {batch_s * 1000:g}")
            lines += [data.hex() for data in case.inputs[:inputs]] or [case.wire.hex()]
            lines.append("END")
        proc = subprocess.run(
            [java, "-cp", f"{tmp}:{cp}", "CodecBench"],
            input="\n".join(lines) + "\n",
            capture_output=True,
            text=True,
            check=False,
        )
    if proc.returncode != 0:
        return f"java failed: {proc.stderr.strip().splitlines()[-1:]}"
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "RESULT":
            cases[int(parts[1])].results.setdefault(parts[2], {})["java"] = float(parts[3])
    return None


# --------------------------------------------------------------------------- report


def report_rows(cases: Sequence[Case]) -> list[dict[str, Any]]:
    rows = []
    for case in cases:
        for op in ("decode", "encode"):
            secs = case.results[op]
            row: dict[str, Any] = {
                "case": case.name,
                "bytes": len(case.wire),
                "op": op,
                "distinct_inputs": len(case.inputs) if op == "decode" else 1,
                "msgs_per_s": {peer: 1.0 / t for peer, t in secs.items()},
            }
            for peer in PEERS[1:]:
                ratio = secs[peer] / secs["ours"]
                row[f"ours/{peer}"] = ratio
                row[f"target_ours/{peer}"] = TARGETS[(op, peer)]
                row[f"meets_ours/{peer}"] = ratio >= TARGETS[(op, peer)]
                if op == "decode":
                    cached = secs[peer] / secs["ours+cache"]
                    row[f"ours+cache/{peer}"] = cached
                    row[f"meets_ours+cache/{peer}"] = cached >= TARGETS[(op, peer)]
            if "java" in secs:
                row["ours/java"] = secs["java"] / secs["ours"]
                if "ours-eager" in secs:
                    row["ours-eager/java"] = secs["java"] / secs["ours-eager"]
            rows.append(row)
    return rows


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    head = (
        f"{'case':<44} {'op':<6} {'bytes':>6} {'ours/s':>10} {'kio/s':>9} {'kafka-py/s':>10} {'java/s':>10}"
        f" {'/kio':>8} {'/kafka-py':>9} {'/java':>6} {'+cache /kio':>12} {'/kafka-py':>9} {'eager /java':>11}"
    )
    lines = [head, "-" * len(head)]

    def mark(row: dict[str, Any], key: str) -> str:
        if key not in row:
            return "-"
        meets = row.get(key.replace("ours", "meets_ours", 1), True)
        return f"{row[key]:.2f}x{'' if meets else '<'}"

    for row in rows:
        rate = row["msgs_per_s"]
        java = f"{rate['java']:,.0f}" if "java" in rate else "-"
        lines.append(
            f"{row['case'][:44]:<44} {row['op']:<6} {row['bytes']:>6} {rate['ours']:>10,.0f} {rate['kio']:>9,.0f} "
            f"{rate['kafka-python']:>10,.0f} {java:>10} {mark(row, 'ours/kio'):>8} {mark(row, 'ours/kafka-python'):>9} "
            f"{mark(row, 'ours/java'):>6} {mark(row, 'ours+cache/kio'):>12} "
            f"{mark(row, 'ours+cache/kafka-python'):>9} {mark(row, 'ours-eager/java'):>11}"
        )
    targets = ", ".join(f"{op} >= {v:g}x {peer}" for (op, peer), v in TARGETS.items())
    lines.append(f"ratios are ours/peer throughput (>1 = ours faster); '<' marks a miss of the target ({targets})")
    lines.append("java = Apache Kafka's kafka-clients codec in a warmed-up JVM: the ceiling, no target")
    lines.append("eager = our decode with every array built during the decode (no lazy arrays)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per peer and operation (best is kept)")
    parser.add_argument("--batch-ms", type=float, default=40.0, help="target length of one timed batch")
    parser.add_argument("--case", action="append", help="only cases whose name contains this (repeatable)")
    parser.add_argument("--backend", choices=("auto", "c", "python"), default="auto", help="our codec backend")
    parser.add_argument("--no-java", action="store_true", help="skip the kafka-clients (Java) column")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    parser.add_argument(
        "--loop",
        choices=("map", "python"),
        default="map",
        help="drive decode batches by a C-level map (default) or a Python for loop over a closure",
    )
    parser.add_argument(
        "--read-all",
        action="store_true",
        help="only our decode + encode (reads every element), arrays built on first access vs at once",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.batch_ms <= 0:
        parser.error("--rounds must be >= 1 and --batch-ms > 0")
    global DECODE_LOOP
    DECODE_LOOP = args.loop
    from kraft_jbod import _accel, codec_backend

    if args.backend != "auto":
        _accel.use(args.backend)
    java_note: str | None = "skipped (--no-java)"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            kp = load_kafka_python_classes(find_kafka_clients_jar(), Path(tmp))
            cases = build_cases(kp, args.case)
            for case in cases:
                verify(case)
            if args.read_all:
                for case in cases:
                    best = measure_read_all(case, args.rounds, args.batch_ms / 1000)
                    print(
                        f"{case.name[:44]:<44} decode+encode: lazy {best['lazy'] * 1e6:9.2f} us, "
                        f"eager {best['eager'] * 1e6:9.2f} us, lazy/eager time {best['lazy'] / best['eager']:.2f}"
                    )
                return 0
            for case in cases:
                measure(case, args.rounds, args.batch_ms / 1000)
            if not args.no_java:
                java_note = measure_java(cases, args.rounds, args.batch_ms / 1000, inputs=2000)
            loop_ns = loop_cost(cases[0].inputs, args.rounds) * 1e9
    except BenchError as exc:
        print(f"bench_codec: {exc}", file=sys.stderr)
        return 1
    rows = report_rows(cases)
    path = codec_backend()
    if args.json:
        doc = {
            "python": sys.version.split()[0],
            "codec_backend": path,
            "rounds": args.rounds,
            "batch_ms": args.batch_ms,
            "gc": "enabled during batches",
            "decode_loop": DECODE_LOOP,
            "loop_ns": loop_ns,
            "peers": {"kio": _version("kio"), "kafka-python": _version("kafka-python")},
            "java": java_note or "kafka-clients from shigawire-apache-flink-libraries",
            "rows": rows,
        }
        print(json.dumps(doc, indent=2))
    else:
        print(f"our codec backend: {path} (kraft_jbod.codec_backend(); --backend python for the reference codec)")
        if java_note:
            print(f"java column: {java_note}")
        print(format_table(rows))
        print(f"decode loop: {DECODE_LOOP}; the loop alone costs {loop_ns:.1f} ns a call, in every decode figure")
    return 0


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    raise SystemExit(main())
