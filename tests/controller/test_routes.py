"""Every api the controller serves has one complete route, and the other tables follow it."""

from __future__ import annotations

import pytest

from kraft_jbod.controller import client_api, replication, routes, service
from kraft_jbod.controller.extensions import clients
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kraft_jbod.security import acl
from kraft_jbod.security.sasl import SASL_API_VERSIONS


def _served() -> dict[str, dict[int, tuple[int, int]]]:
    """What each listener lists in its ApiVersions answer, from the tables the server uses."""
    controller = dict(ControllerState(cluster_id="c", node_id=1).handled_api_versions())
    controller[ApiKey.FETCH] = replication.FETCH_VERSIONS
    controller[ApiKey.FETCH_SNAPSHOT] = replication.FETCH_SNAPSHOT_VERSIONS
    controller[ApiKey.API_VERSIONS] = service.API_VERSIONS_RANGE
    controller.update(SASL_API_VERSIONS)
    client = dict(client_api.CLIENT_APIS)
    client[ApiKey.API_VERSIONS] = clients.API_VERSIONS_RANGE
    client.update(SASL_API_VERSIONS)
    return {"controller": controller, "broker": client}


def _incomplete(key: int, listener: str, versions: tuple[int, int]) -> list[str]:
    """What the route of a served key lacks (empty: it is complete)."""
    route = routes.ROUTES.get(key)
    if route is None:
        return ["no route"]
    api = ApiKey(key)
    problems = []
    if route.request_type is not api.request_class:
        problems.append(f"request class {route.request_type.__name__}")
    if listener not in route.listeners:
        problems.append(f"served on the {listener} listener, the schema says {sorted(route.listeners)}")
    served_here = route.controller_listener if listener == "controller" else route.client is not routes.Client.NO
    if not served_here:
        problems.append(f"the route does not say the {listener} listener serves it")
    lo, hi = api.versions
    if not lo <= versions[0] <= versions[1] <= hi:
        problems.append(f"versions {versions} outside the schema's {api.versions}")
    auth = route.authorization
    if auth.kind in ("cluster", "topic") and auth.what not in acl.OPERATIONS:
        problems.append(f"unknown operation {auth.what}")
    if auth.kind == "none" and not auth.what:
        problems.append("unchecked without saying why")
    if not route.name:
        problems.append("no log name")
    try:
        answer = route.error_response(route.request_type(), 31, "refused")
    except Exception as exc:
        problems.append(f"no error answer ({exc})")
    else:
        if not isinstance(answer, api.response_class):
            problems.append(f"error answer is a {type(answer).__name__}")
        elif route.error_builder is None and getattr(answer, "error_code", None) != 31:
            problems.append("error answer without the code")
    return problems


def test_every_served_key_has_a_complete_route() -> None:
    gaps = {
        f"{ApiKey(key).name} on the {listener} listener": problems
        for listener, keys in _served().items()
        for key, versions in keys.items()
        if (problems := _incomplete(key, listener, versions))
    }
    assert gaps == {}


def test_a_route_that_lacks_a_fact_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The check itself fails on a gap: a served key whose route is gone or wrong.
    monkeypatch.delitem(routes.ROUTES, ApiKey.UPDATE_FEATURES)  # type: ignore[attr-defined]
    assert _incomplete(ApiKey.UPDATE_FEATURES, "controller", (0, 2)) == ["no route"]
    wrong = routes.Route(ApiKey.METADATA, MetadataRequest, routes.cluster("FLY"), controller_listener=True)
    monkeypatch.setitem(routes.ROUTES, ApiKey.METADATA, wrong)  # type: ignore[arg-type]
    problems = _incomplete(ApiKey.METADATA, "controller", (0, 12))
    assert any("schema says" in p for p in problems) and any("unknown operation" in p for p in problems)


def test_every_route_with_a_handler_is_what_the_state_machine_answers() -> None:
    handled = ControllerState(cluster_id="c", node_id=1).handled_api_versions()
    assert set(handled) == {k for k, r in routes.ROUTES.items() if r.handler is not None}
    for key, route in routes.ROUTES.items():
        assert route.key == key


def test_the_derived_tables_follow_the_routes() -> None:
    assert service.PRIORITY_KEYS == {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT}
    assert service.TOPIC_ARRAY_KEYS == {ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS}
    assert service.API_VERSIONS_RANGE == clients.API_VERSIONS_RANGE == (0, 5)
    assert client_api.WRITE_APIS == {
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.CREATE_ACLS: (1, 3),
        ApiKey.DELETE_ACLS: (1, 3),
        ApiKey.ALTER_CONFIGS: (0, 2),
        ApiKey.CREATE_PARTITIONS: (0, 3),
        ApiKey.ELECT_LEADERS: (0, 2),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
        ApiKey.UPDATE_FEATURES: (0, 2),
    }
    reads = set(client_api.CLIENT_APIS) - set(client_api.WRITE_APIS)
    assert reads == {
        ApiKey.METADATA,
        ApiKey.DESCRIBE_CLUSTER,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.DESCRIBE_ACLS,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
    }


def test_error_answers_carry_the_code_per_entry() -> None:
    body = MetadataRequest(topics=[MetadataRequestTopic(name="a"), MetadataRequestTopic(name="b")])
    answer = routes.error_response(ApiKey.METADATA, body, 29)
    topics = answer.topics  # type: ignore[attr-defined]
    assert [(t.name, t.error_code) for t in topics] == [("a", 29), ("b", 29)]
    answer = routes.error_response(ApiKey.BROKER_REGISTRATION, routes.ROUTES[62].request_type(), 31)
    assert answer.error_code == 31 and answer.broker_epoch == -1  # type: ignore[attr-defined]
