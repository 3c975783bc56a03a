"""Fuzzer generation cost: cases built per second vs plain request encoding, as ratios.

``.venv/bin/python -m tools.bench.bench_fuzz [--rounds N]``

Three loops over the same seeded messages (BrokerRegistration v4, BrokerHeartbeat v1,
AssignReplicasToDirs v0, CreateTopics v7):

* encode: ``codec.encode_request`` of a prepared body (the floor);
* frame: ``mutators.build_frame`` (encode + the traced walk that finds the sites);
* case: ``CaseFactory.case(i)`` (draw a message, frame it, mutate it).

It prints rates and the ratios frame/encode and case/encode; nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from kraft_jbod import codec
from kraft_jbod.fuzz import mutators, runner, strategies

CASES = [(62, 4), (63, 1), (73, 0), (19, 7)]


def _rate(fn: object, n: int) -> float:
    assert callable(fn)
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-n", type=int, default=3000)
    args = ap.parse_args()
    bodies: list[tuple[Any, int]] = []
    for key, version in CASES:
        cls = codec.request_class(key)
        for i in range(50):
            bodies.append((strategies.random_message(cls, version, random.Random(i)), version))

    def _v(i: int) -> int:
        return bodies[i % 200][1]

    factory = runner.CaseFactory(1, {k: (v, v) for k, v in CASES})
    best = {"encode": 0.0, "frame": 0.0, "case": 0.0}
    for _ in range(args.rounds):
        enc = _rate(lambda i: codec.encode_request(bodies[i % 200][0], _v(i), i), args.n)
        best["encode"] = max(best["encode"], enc)
        best["frame"] = max(best["frame"], _rate(lambda i: mutators.build_frame(bodies[i % 200][0], _v(i), i), args.n))
        best["case"] = max(best["case"], _rate(factory.case, args.n))
    for name, rate in best.items():
        print(f"{name:7s} {rate:10.0f} /s")
    print(f"frame/encode ratio {best['frame'] / best['encode']:.3f}")
    print(f"case/encode ratio  {best['case'] / best['encode']:.3f}")


if __name__ == "__main__":
    main()
