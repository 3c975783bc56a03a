"""Any well-formed admin request, however odd its values, gets an answer (or, where Kafka
cannot parse it, a ProtocolError that closes the connection); never a crash, never a
response that does not encode, never a record the image rejects.

Requests are drawn from the schema (``kraft_jbod.fuzz.strategies``), with names drawn
from a small set so that they hit the topic and brokers that exist.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from kraft_jbod import codec
from kraft_jbod.controller import envelope as env
from kraft_jbod.controller.apis import admin
from kraft_jbod.controller.routes import ROUTES
from kraft_jbod.errors import ProtocolError
from kraft_jbod.fuzz.strategies import random_message
from tests.controller.harness import Cluster, dir_id

# The admin APIs (apis/admin.py) and the versions their routes serve.
HANDLED = {
    key: route.valid_versions
    for key, route in ROUTES.items()
    if route.handler is not None and route.handler.__module__ == admin.__name__
}

_NAMES = [
    "t0",
    "t1",
    "",
    "1",
    "3000",
    "kafka-cluster",
    "*",
    "User:a",
    "retention.ms",
    "cleanup.policy",
    "__cluster_metadata",
    "metadata.version",
]


def _steer(value: object, rng: random.Random, depth: int = 0) -> object:
    """Replace strings by names that exist, and ints by small ones, most of the time."""
    if depth > 6:
        return value
    if isinstance(value, str) and rng.random() < 0.9:
        return rng.choice(_NAMES)
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and rng.random() < 0.95:
        return rng.choice([1, 2, 2, 3, 3, 3, 4, 4, 0, -1, 17, 22])
    if isinstance(value, list):
        return [_steer(v, rng, depth + 1) for v in value[:4]]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name != "unknown_tagged_fields":
                setattr(value, f.name, _steer(getattr(value, f.name), rng, depth + 1))
    return value


@pytest.mark.parametrize("api_key", sorted(HANDLED))
def test_random_admin_requests_never_crash(api_key: int) -> None:
    rng = random.Random(api_key)
    c = Cluster()
    for b in (1, 2, 3):
        c.start_broker(b, [dir_id(b, 0), dir_id(b, 1)])
    c.create_topic("t0", 3, 2)
    lo, hi = HANDLED[api_key]
    cls = codec.request_class(api_key)
    answered = 0
    for i in range(200):
        version = rng.randint(lo, hi)
        body = _steer(random_message(cls, version, rng), rng)
        if api_key == env.API_ENVELOPE and i % 2 == 0:
            inner_key = rng.choice([k for k in sorted(HANDLED) if k in env.FORWARDABLE])
            inner_cls = codec.request_class(inner_key)
            inner_version = rng.randint(*HANDLED[inner_key])
            inner = _steer(random_message(inner_cls, inner_version, rng), rng)
            try:
                body = env.envelope_of(inner, inner_version)  # type: ignore[arg-type]
            except Exception:  # an inner body the wire cannot carry: skip it
                continue
        try:
            wire = body.encode(version)  # type: ignore[attr-defined]
        except Exception:
            continue  # a value the schema does not allow at this version
        decoded = cls.decode(wire, version)
        try:
            out = c.state.handle(api_key, version, decoded, now_ms=c.now, next_offset=c.end_offset)
        except ProtocolError:
            continue
        out.response.encode(version)
        c.commit(out.records)  # apply must accept every proposed record
        answered += 1
        assert c.state.check_invariants() == [], (api_key, version, decoded)
    assert answered > 30
    live = c.state.durable_state()
    assert c.restart().durable_state() == live
