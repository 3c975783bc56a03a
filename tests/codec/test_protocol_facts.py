"""The generated ApiKey and ErrorCode enums: complete, typed and strict on unknown numbers."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from kraft_jbod import messages
from kraft_jbod.errors import KraftJbodError, UnknownKeyError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.error_codes import ErrorCode

ROOT = Path(__file__).resolve().parents[2]


def test_every_request_schema_is_an_api_key() -> None:
    assert {int(k) for k in ApiKey} == set(messages.REQUESTS) == set(messages.RESPONSES)
    for key in ApiKey:
        assert key.request_class.API_KEY == key
        assert key.response_class.API_KEY == key
        assert key.request_class.SCHEMA_TYPE == "request"
        assert key.versions == key.request_class.VALID_VERSIONS
        assert key.request_class.NAME == key.title + "Request"


def test_api_key_names_are_kafkas() -> None:
    assert ApiKey.API_VERSIONS == 18 and ApiKey.BROKER_HEARTBEAT == 63
    assert ApiKey.ASSIGN_REPLICAS_TO_DIRS == 73 and ApiKey.OFFSET_FOR_LEADER_EPOCH == 23
    assert ApiKey.of(62) is ApiKey.BROKER_REGISTRATION
    assert ApiKey.BROKER_REGISTRATION.title == "BrokerRegistration"


@pytest.mark.parametrize("bad", [-1, 10_000, 32767])
def test_unknown_numbers_raise_from_the_error_tree(bad: int) -> None:
    with pytest.raises(UnknownKeyError) as info:
        ApiKey.of(bad)
    assert isinstance(info.value, KraftJbodError) and isinstance(info.value, LookupError)
    assert ApiKey.find(bad) is None
    with pytest.raises(UnknownKeyError):
        ErrorCode.of(bad + 20_000)
    assert ErrorCode.name_of(bad + 20_000) == f"UNKNOWN_ERROR_{bad + 20_000}"


def test_error_codes_follow_the_facts_file() -> None:
    rows = json.loads((ROOT / "schemas" / "errors.json").read_text())
    assert [int(e) for e in ErrorCode] == [r["code"] for r in rows]
    for r in rows:
        e = ErrorCode.of(r["code"])
        assert (e.name, e.retriable, e.default_message) == (r["name"], r["retriable"], r["message"])
    # contiguous from UNKNOWN_SERVER_ERROR (-1) upwards: Kafka never skips a code
    assert [int(e) for e in ErrorCode] == list(range(-1, len(rows) - 1))


def test_error_code_facts() -> None:
    assert ErrorCode.STALE_BROKER_EPOCH == 77 and not ErrorCode.STALE_BROKER_EPOCH.retriable
    assert ErrorCode.NOT_CONTROLLER.retriable and ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.retriable
    assert ErrorCode.NONE.default_message is None
    assert ErrorCode.name_of(35) == "UNSUPPORTED_VERSION"


def test_members_are_wire_ints() -> None:
    # stored straight into a message field, they encode as the plain number
    from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse

    body = BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH).encode(1)
    decoded = BrokerHeartbeatResponse.decode(body, 1)
    assert decoded.error_code == 77 and type(decoded.error_code) is int
    assert struct.pack(">h", ApiKey.FETCH) == b"\x00\x01"
