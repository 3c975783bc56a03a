"""The iteration order of Kafka's table of broker registrations, which names the broker in
UpdateFeatures' "Broker N does not support this feature" (docs/twin.md)."""

from __future__ import annotations

from kraft_jbod.controller.image import kafka_table_order
from kraft_jbod.messages.unregister_broker_request import UnregisterBrokerRequest
from tests.controller.harness import Cluster

# (put +1 / remove -1, key) and the key order Kafka 4.4's own TimelineHashMap iterated
# after each step (org.apache.kafka.timeline.TimelineHashMap driven from the broker
# build: a one-off run, its output copied here).
STEPS = [
    ((1, 301), "301"),
    ((1, 302), "301 302"),
    ((1, 303), "301 303 302"),
    ((1, 304), "301 303 302 304"),
    ((-1, 302), "301 303 304"),
    ((1, 302), "301 303 302 304"),
    ((1, 11), "301 303 302 11 304"),
    ((1, 12), "301 303 12 302 11 304"),
    ((1, 13), "13 301 303 12 302 11 304"),
    ((-1, 11), "13 301 303 12 302 304"),
    ((-1, 12), "13 301 303 302 304"),
    ((-1, 13), "301 303 302 304"),
    ((1, 301), "301 303 302 304"),  # a replacement keeps its place
]


def test_the_order_follows_kafkas_hash_table_through_growth_and_removals() -> None:
    keys: dict[int, None] = {}
    slots = 2
    for (op, key), expected in STEPS:
        if op > 0:
            if (len(keys) + 1) * 0.75 > slots:
                slots *= 2
            keys[key] = None
        else:
            del keys[key]
        assert " ".join(map(str, kafka_table_order(keys, slots))) == expected


def test_registrations_grow_the_slot_count_as_kafkas_table_does() -> None:
    c = Cluster()
    grown = []
    for b in range(1, 8):
        c.register(b)
        grown.append(c.state.image.broker_slots)
    # 2 -> 4 at the third put, 4 -> 8 at the sixth (Kafka's table: past 3/4 full)
    assert grown == [2, 2, 4, 4, 4, 8, 8]
    for b in range(1, 8):
        c.call(64, 0, UnregisterBrokerRequest(broker_id=b))
    assert c.state.brokers == {} and c.state.image.broker_slots == 8  # it never shrinks
    assert c.restart().image.broker_slots == 8  # the replay grows it the same way
