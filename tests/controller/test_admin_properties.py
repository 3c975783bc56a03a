"""Replay equals live, with the admin APIs in the mix.

The random runs of test_state_properties (register, heartbeat, fence, fail dirs, create,
delete, AlterPartition, restart) interleaved with CreatePartitions, config changes, ACLs,
elections, reassignments (started, completed by AlterPartition, cancelled) and
metadata.version changes, some of them inside an Envelope. After every step the
invariants hold; at every restart and at the end a state rebuilt from the log bytes
equals the live one (configs, ACLs and reassignment fields included).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kraft_jbod.controller import envelope as env
from kraft_jbod.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kraft_jbod.messages.create_acls_request import AclCreation, CreateAclsRequest
from kraft_jbod.messages.create_partitions_request import CreatePartitionsRequest, CreatePartitionsTopic
from kraft_jbod.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kraft_jbod.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from kraft_jbod.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraft_jbod.messages.update_features_request import FeatureUpdateKey, UpdateFeaturesRequest
from kraft_jbod.wire.message import Message
from tests.controller.harness import Cluster
from tests.controller.test_state_properties import OPS, SETUPS, _setup, _step

TOPICS = st.integers(0, 3)
ADMIN_OPS = st.one_of(
    st.tuples(st.just("partitions"), TOPICS, st.integers(1, 6)),
    st.tuples(
        st.just("config"),
        st.sampled_from(["topic", "broker", "cluster"]),
        TOPICS,
        st.sampled_from(["retention.ms", "cleanup.policy", "unclean.leader.election.enable"]),
        st.integers(0, 3),
        st.booleans(),
    ),
    st.tuples(st.just("acl"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("elect"), TOPICS, st.integers(0, 3), st.integers(0, 1)),
    st.tuples(
        st.just("reassign"),
        TOPICS,
        st.integers(0, 3),
        st.lists(st.integers(1, 4), max_size=3, unique=True),
        st.booleans(),
    ),
    st.tuples(st.just("mv"), st.integers(17, 22), st.integers(1, 2)),
)


def _maybe_enveloped(c: Cluster, api_key: int, version: int, body: Message, wrap: bool) -> None:
    if wrap:
        c.call(58, 0, env.envelope_of(body, version))
    else:
        c.call(api_key, version, body)


def _admin_step(c: Cluster, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "partitions":
        _, t, count = op
        c.call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsTopic(f"t{t}", count, None)], timeout_ms=1))
    elif kind == "config":
        _, where, t, key, value, wrap = op
        rtype, name = {"topic": (2, f"t{t}"), "broker": (4, str(t)), "cluster": (4, "")}[where]
        operation, text = (1, None) if value == 0 else (0, {1: "100", 2: "true", 3: "compact"}[value])
        res = AlterConfigsResource(rtype, name, [AlterableConfig(key, operation, text)])
        _maybe_enveloped(c, 44, 1, IncrementalAlterConfigsRequest(resources=[res]), wrap)
    elif kind == "acl":
        _, n, delete = op
        if delete:
            f = DeleteAclsFilter(1, None, 1, f"User:u{n}", None, 1, 1)
            c.call(31, 3, DeleteAclsRequest(filters=[f]))
        else:
            c.call(30, 3, CreateAclsRequest(creations=[AclCreation(2, f"t{n}", 3, f"User:u{n}", "*", 3, 3)]))
    elif kind == "elect":
        _, t, pid, election = op
        req = ElectLeadersRequest(election_type=election, topic_partitions=[TopicPartitions(f"t{t}", [pid])])
        c.call(43, 2, req)
    elif kind == "reassign":
        _, t, pid, replicas, cancel = op
        target = None if cancel or not replicas else replicas
        req = AlterPartitionReassignmentsRequest(
            topics=[ReassignableTopic(f"t{t}", [ReassignablePartition(pid, target)])]
        )
        _maybe_enveloped(c, 45, 0, req, cancel)
    elif kind == "mv":
        _, level, upgrade_type = op
        c.call(
            57,
            1,
            UpdateFeaturesRequest(
                feature_updates=[FeatureUpdateKey("metadata.version", level, upgrade_type=upgrade_type)]
            ),
        )


def _run(c: Cluster, ops: list[tuple[Any, ...]], setup: list[int]) -> None:
    _setup(c, setup)
    for op in ops:
        if op[0] in ("partitions", "config", "acl", "elect", "reassign", "mv"):
            _admin_step(c, op)
        else:
            _step(c, op)
        problems = c.state.check_invariants()
        assert problems == [], (op, problems)
    live = c.state.durable_state()
    assert c.restart().durable_state() == live
    assert c.state.check_invariants() == []


@settings(max_examples=max(settings().max_examples, 150))
@given(st.lists(st.one_of(ADMIN_OPS, OPS), max_size=40), SETUPS)
def test_admin_apis_in_random_runs_replay_equal_live(ops: list[tuple[Any, ...]], setup: list[int]) -> None:
    _run(Cluster(), ops, setup)


def test_a_scripted_admin_run_reaches_every_record_kind() -> None:
    c = Cluster()
    ops: list[tuple[Any, ...]] = [
        ("partitions", 0, 6),
        ("config", "topic", 0, "retention.ms", 1, True),
        ("config", "cluster", 0, "retention.ms", 1, False),
        ("acl", 1, False),
        ("acl", 2, False),
        ("acl", 1, True),
        ("reassign", 0, 0, [3, 1], False),
        ("reassign", 0, 1, [2, 3], False),
        ("reassign", 0, 1, [], True),
        ("elect", 0, 0, 0),
        ("mv", 20, 2),
        ("mv", 22, 1),
        ("restart",),
    ]
    _run(c, ops, [2, 2, 2])
    durable = c.state.durable_state()
    assert durable["configs"] and durable["acls"]
    assert any(p.adding or p.removing for p in c.state.partitions())
