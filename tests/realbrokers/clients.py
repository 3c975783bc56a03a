"""Real Kafka clients for the scenarios: produce with acks=all and idempotence, consume back.

Three clients, three code bases: confluent-kafka (librdkafka), kafka-python and aiokafka.
Each producer returns the values the broker acknowledged; each consumer returns every value
it read (a list: a value read twice counts twice). :func:`tally` turns both into the
numbers the scenarios assert: acknowledged, consumed, lost, duplicated.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

# librdkafka's own log lines go to pytest's log capture, not to the terminal.
RDKAFKA_LOG = logging.getLogger("rdkafka")


@dataclass(frozen=True)
class Tally:
    acknowledged: int
    consumed: int
    lost: int
    duplicated: int


def tally(acked: Iterable[bytes], consumed: Iterable[bytes]) -> Tally:
    acked_set = set(acked)
    counts = Counter(consumed)
    lost = len(acked_set - set(counts))
    duplicated = sum(n - 1 for n in counts.values() if n > 1)
    return Tally(len(acked_set), sum(counts.values()), lost, duplicated)


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}-{i:06d}".encode() for i in range(n)]


# ---------------------------------------------------------------- confluent-kafka (librdkafka)
def confluent_produce(bootstrap: str, topic: str, vals: list[bytes], *, timeout: float = 90.0) -> list[bytes]:
    from confluent_kafka import Producer

    acked: list[bytes] = []
    errors: list[str] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(str(err))

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": int(timeout * 1000),
            "linger.ms": 5,
            "logger": RDKAFKA_LOG,
        }
    )
    for i, v in enumerate(vals):
        p.produce(topic, value=v, key=str(i).encode(), on_delivery=on_delivery)
        p.poll(0)
    left = p.flush(timeout + 10)
    assert left == 0, f"{left} messages still queued after {timeout} s (errors: {errors[:3]})"
    assert not errors, f"delivery errors: {errors[:5]}"
    return acked


def confluent_consume(bootstrap: str, topic: str, expect: int, *, group: str, timeout: float = 90.0) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "logger": RDKAFKA_LOG,
        }
    )
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < expect and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, f"consumer error: {msg.error()}"
            got.append(msg.value())
        # a little longer: duplicates would arrive after the expected count
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        c.close()
    return got


# ---------------------------------------------------------------- kafka-python
def kafka_python_produce(bootstrap: str, topic: str, vals: list[bytes], *, timeout: float = 90.0) -> list[bytes]:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap.split(","), acks="all", enable_idempotence=True, linger_ms=5)
    try:
        futures = [(v, p.send(topic, value=v)) for v in vals]
        p.flush(timeout=timeout)
        acked = []
        for v, f in futures:
            f.get(timeout=timeout)
            acked.append(v)
        return acked
    finally:
        p.close(timeout=10)


def kafka_python_consume(bootstrap: str, topic: str, expect: int, *, group: str, timeout: float = 90.0) -> list[bytes]:
    from kafka import KafkaConsumer

    c = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + timeout
        # Subscribe once the client's metadata knows the topic: a group leader whose
        # metadata lacks it assigns nothing ("No partition metadata for topic") and, seen
        # on a loaded machine, the group then sat on that empty assignment until the end.
        while not c.partitions_for_topic(topic) and time.monotonic() < deadline:
            time.sleep(0.2)
        c.subscribe([topic])
        while len(got) < expect and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        for records in c.poll(timeout_ms=1000).values():
            got += [r.value for r in records]
    finally:
        c.close()
    return got


# ---------------------------------------------------------------- aiokafka
def aiokafka_produce(bootstrap: str, topic: str, vals: list[bytes], *, timeout: float = 90.0) -> list[bytes]:
    async def run() -> list[bytes]:
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
        await p.start()
        try:
            futures = [await p.send(topic, v) for v in vals]
            await asyncio.wait_for(asyncio.gather(*futures), timeout)
            return list(vals)
        finally:
            await p.stop()

    return asyncio.run(run())


def aiokafka_consume(bootstrap: str, topic: str, expect: int, *, group: str, timeout: float = 90.0) -> list[bytes]:
    async def run() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer

        c = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await c.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + timeout
            while len(got) < expect and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for records in batch.values():
                    got += [r.value for r in records if r.value is not None]
            batch = await c.getmany(timeout_ms=1000)
            for records in batch.values():
                got += [r.value for r in records if r.value is not None]
        finally:
            await c.stop()
        return got

    return asyncio.run(run())


CLIENTS = {
    "confluent-kafka": (confluent_produce, confluent_consume),
    "kafka-python": (kafka_python_produce, kafka_python_consume),
    "aiokafka": (aiokafka_produce, aiokafka_consume),
}
