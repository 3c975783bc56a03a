"""Every api the controller serves has an authorization entry, and an unauthorised caller
is refused before any handler runs: nothing written, nothing revealed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kraft_jbod import codec
from kraft_jbod.clock import ManualClock
from kraft_jbod.controller import routes
from kraft_jbod.controller.extensions import Extensions
from kraft_jbod.messages.add_raft_voter_request import AddRaftVoterRequest
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.remove_raft_voter_request import RemoveRaftVoterRequest
from kraft_jbod.messages.update_raft_voter_request import UpdateRaftVoterRequest
from kraft_jbod.pytest_plugin import KafkaConnection, start_cluster, stop_cluster
from kraft_jbod.security import acl
from kraft_jbod.security.acl import Authorizer
from kraft_jbod.wire.message import Message

ACLS = {
    "acls": [
        # The plaintext listeners' principal: a broker, allowed what brokers do.
        {"principal": "User:ANONYMOUS", "operation": "CLUSTER_ACTION"},
        {"principal": "User:operator", "operation": "ALTER"},
    ]
}


def _served_keys() -> dict[int, tuple[int, int]]:
    """Every api any listener of the controller answers, from the tables the server builds
    its ApiVersions from (the live test below checks them against the wire)."""
    from kraft_jbod.controller import client_api, replication
    from kraft_jbod.controller.state import ControllerState
    from kraft_jbod.security.sasl import SASL_API_VERSIONS

    keys = dict(ControllerState(cluster_id="c", node_id=1).handled_api_versions())
    keys.update(client_api.CLIENT_APIS)
    keys[ApiKey.FETCH] = replication.FETCH_VERSIONS
    keys[ApiKey.FETCH_SNAPSHOT] = replication.FETCH_SNAPSHOT_VERSIONS
    keys.update(SASL_API_VERSIONS)
    keys[ApiKey.API_VERSIONS] = (0, 5)
    return keys


def test_every_served_api_key_has_an_authorization_entry() -> None:
    served = _served_keys()
    missing = [key.name for key in ApiKey if key in served and routes.authorization(key) is None]
    assert missing == [], f"served without an authorization entry: {missing}"
    for key in ApiKey:
        how = routes.authorization(key)
        if how is None:
            continue
        if how.kind in ("cluster", "topic"):
            assert how.what in acl.OPERATIONS, key.name
        else:
            assert how.kind == "none" and how.what, f"{key.name}: an unchecked api says why"


def test_an_api_without_an_entry_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from kraft_jbod.controller.extensions.security import ConnectionSecurity, Security

    monkeypatch.delitem(routes.ROUTES, ApiKey.DESCRIBE_QUORUM)  # type: ignore[attr-defined]
    assert routes.authorization(ApiKey.DESCRIBE_QUORUM) is None
    sec = ConnectionSecurity.__new__(ConnectionSecurity)
    sec.security = Security(None, None, Authorizer.from_json({"super_users": ["User:root"]}))
    body = codec.request_class(ApiKey.DESCRIBE_QUORUM)()
    # Even a super user: nobody decided how the api is authorized.
    refused = sec._denied_for(sec.security.authorizer, ApiKey.DESCRIBE_QUORUM, body, "User:root", "h")  # type: ignore[arg-type]
    assert refused is not None and refused.error_code == 31  # type: ignore[attr-defined]


def test_voter_changes_need_kafkas_operations() -> None:
    # Kafka's ControllerApis: ALTER for Add/Remove, CLUSTER_ACTION for Update.
    assert routes.authorization(ApiKey.ADD_RAFT_VOTER) == routes.cluster("ALTER")
    assert routes.authorization(ApiKey.REMOVE_RAFT_VOTER) == routes.cluster("ALTER")
    assert routes.authorization(ApiKey.UPDATE_RAFT_VOTER) == routes.cluster("CLUSTER_ACTION")


def _error_codes(msg: Any) -> list[int]:
    """Every error code in a response, nested ones included."""
    out: list[int] = []
    if isinstance(msg, Message):
        for name in msg.__slots__:
            value = getattr(msg, name, None)
            if name == "error_code" and isinstance(value, int):
                out.append(value)
            else:
                out += _error_codes(value)
    elif isinstance(msg, list):
        for item in msg:
            out += _error_codes(item)
    return out


async def test_an_unauthorised_caller_is_refused_every_served_api(tmp_path: Path) -> None:
    """A principal without any grant (the CLIENT listener's ANONYMOUS has none on a
    cluster whose ACL file names only other principals) sends every api that listener
    serves, and the controller listener's ANONYMOUS (CLUSTER_ACTION only) every api it
    serves that needs more: each is refused by the ACLs, nothing is written."""
    strict = {"acls": [{"principal": "User:operator", "operation": "ALTER"}]}
    ext = Extensions(clock=ManualClock(), authorizer=Authorizer.from_json(strict))
    cluster = await start_cluster(tmp_path, clock=ext.clock, extensions=ext)  # type: ignore[arg-type]
    try:
        served_on_wire: dict[int, tuple[int, int]] = {}
        end = cluster.server.log.end_offset
        for address in (cluster.controller_address, cluster.client_address):
            conn = await KafkaConnection.open(address)
            av = await conn.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
            listed = {k.api_key: (k.min_version, k.max_version) for k in av.api_keys}
            served_on_wire.update(listed)
            for key, (_lo, hi) in sorted(listed.items()):
                how = routes.authorization(key)
                assert how is not None, f"{codec.api_name(key)} is served without an authorization entry"
                if how.kind == "none":
                    continue
                before = _denied(cluster, key)
                resp = await conn.call(_request(key), hi)
                if key == ApiKey.METADATA:
                    assert resp.topics == []  # filtered: no topic is visible, none named
                    continue
                assert _denied(cluster, key) == before + 1, f"{codec.api_name(key)} was not refused"
                codes = _error_codes(resp)
                assert not codes or set(codes) <= {31, 29}, (codec.api_name(key), codes)
                if hasattr(resp, "error_message") and resp.error_message:
                    assert cluster.server.cluster_id not in resp.error_message
            await conn.close()
        # Every key on the wire is one the table test above covers.
        assert set(served_on_wire) <= set(_served_keys())
        assert cluster.server.log.end_offset == end
    finally:
        await stop_cluster(cluster)


def _request(key: int) -> Message:
    """A request of ``key`` the ACLs have something to judge: the per-topic apis name a
    topic (an empty list has nothing to refuse, in Kafka as here)."""
    from kraft_jbod.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState

    if key == ApiKey.CREATE_TOPICS:
        return CreateTopicsRequest(topics=[CreatableTopic("t", 1, 1)], timeout_ms=1000)
    if key == ApiKey.DELETE_TOPICS:
        return DeleteTopicsRequest(topics=[DeleteTopicState(name="t")], topic_names=["t"], timeout_ms=1000)
    msg: Message = codec.request_class(key)()
    return msg


def _denied(cluster: Any, key: int) -> int:
    name = codec.api_name(key)
    total = 0
    for line in cluster.ext.registry.prometheus().splitlines():
        if line.startswith("kraft_jbod_authorization_denied_total{") and f'api="{name}"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


async def test_voter_changes_are_authorized_before_the_cluster_id_is_checked(tmp_path: Path) -> None:
    import uuid

    from kraft_jbod.messages.add_raft_voter_request import Listener

    other = "AAAAAAAAAAAAAAAAAAAAAA"
    add = AddRaftVoterRequest(
        cluster_id=other, voter_id=9, voter_directory_id=uuid.uuid4(), listeners=[Listener("CONTROLLER", "h", 1)]
    )
    remove = RemoveRaftVoterRequest(cluster_id=other, voter_id=9, voter_directory_id=uuid.uuid4())
    update = UpdateRaftVoterRequest(cluster_id=other, voter_id=1)
    ext = Extensions(clock=ManualClock(), authorizer=Authorizer.from_json(ACLS))
    cluster = await start_cluster(tmp_path, clock=ext.clock, extensions=ext)  # type: ignore[arg-type]
    real = cluster.server.cluster_id
    security = cluster.ext.security

    async def ask(req: Message, version: int) -> Any:
        conn = await KafkaConnection.open(cluster.controller_address)
        try:
            return await conn.call(req, version)
        finally:
            await conn.close()

    try:
        # The plaintext principal has CLUSTER_ACTION, not ALTER: Add and Remove are refused
        # before the handler, so the real cluster id never reaches it.
        for req in (add, remove):
            resp = await ask(req, 0)
            assert resp.error_code == 31
            assert real not in (resp.error_message or "")
        # Update needs CLUSTER_ACTION, which it has: the handler's answer, without a message.
        assert (await ask(update, 0)).error_code == 104
        # No grant at all: Update is refused too.
        security.authorizer = Authorizer.from_json({"acls": []})
        assert (await ask(update, 0)).error_code == 31
        # An operator with ALTER reaches the handler and gets Kafka's own message.
        security.authorizer = Authorizer.from_json({"acls": [{"principal": "User:ANONYMOUS", "operation": "ALTER"}]})
        resp = await ask(add, 0)
        assert resp.error_code == 104 and other in resp.error_message
    finally:
        await stop_cluster(cluster)
