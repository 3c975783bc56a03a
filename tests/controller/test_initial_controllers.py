"""--initial-controllers / --no-initial-controllers: Kafka's formatter rules (initial_controllers.py)."""

from __future__ import annotations

import uuid

import pytest

from kraft_jbod.controller.initial_controllers import (
    InitialController,
    bootstrap_voters,
    check_dynamic_flags,
    metadata_directory_id,
    parse_initial_controllers,
    voter_set_of,
)
from kraft_jbod.errors import ConfigError
from kraft_jbod.wire.primitives import uuid_to_base64url

D1, D2, D3 = (uuid.UUID(int=i << 64 | i) for i in (1, 2, 3))


def test_parses_ids_hosts_ports_and_directories() -> None:
    text = f"3@c3:9095:{uuid_to_base64url(D3)}, 1@[::1]:9093:{uuid_to_base64url(D1)},,2@c2:9094:{uuid_to_base64url(D2)}"
    got = parse_initial_controllers(text)
    assert got == (
        InitialController(1, "::1", 9093, D1),
        InitialController(2, "c2", 9094, D2),
        InitialController(3, "c3", 9095, D3),
    )
    record = bootstrap_voters(got, "CONTROLLER")
    assert [(v.voter_id, v.endpoints[0].host, v.endpoints[0].port) for v in record.voters] == [
        (1, "::1", 9093),
        (2, "c2", 9094),
        (3, "c3", 9095),
    ]
    assert all(
        (v.k_raft_version_feature.min_supported_version, v.k_raft_version_feature.max_supported_version) == (0, 1)
        for v in record.voters
    )
    assert voter_set_of(record).ids == {1, 2, 3}
    assert metadata_directory_id(got, 2, uuid.UUID(int=9)) == D2
    assert metadata_directory_id(got, 4, uuid.UUID(int=9)) == uuid.UUID(int=9)  # a joiner: fresh id


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1c:9093:AAAAAAAAAAAAAAAAAAAAAA", "no @"),
        ("@c:9093:AAAAAAAAAAAAAAAAAAAAAA", "no node id"),
        ("x@c:9093:AAAAAAAAAAAAAAAAAAAAAA", "not a number"),
        ("-1@c:9093:AAAAAAAAAAAAAAAAAAAAAA", "negative"),
        ("1@", "no host"),
        ("1@[::1:9093:AAAAAAAAAAAAAAAAAAAAAA", "closing bracket"),
        ("1@c", "no colon after the host"),
        ("1@c:9093", "no colon after the port"),
        ("1@c:99999:AAAAAAAAAAAAAAAAAAAAAA", "out of range"),
        ("1@c:port:AAAAAAAAAAAAAAAAAAAAAA", "port is not a number"),
        ("1@c:9093:not-a-uuid", "base64url"),
        ("", "no controllers"),
        ("1@a:1:AAAAAAAAAAAAAAAAAAAAAA,1@b:2:AAAAAAAAAAAAAAAAAAAAAQ", "more than once"),
    ],
)
def test_refuses_bad_values_with_one_line(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as err:
        parse_initial_controllers(text)
    assert "\n" not in str(err.value)


def test_flag_combinations() -> None:
    assert check_dynamic_flags(
        static_voters=False, standalone=False, initial_controllers=True, no_initial_controllers=False
    )
    assert check_dynamic_flags(
        static_voters=False, standalone=False, initial_controllers=False, no_initial_controllers=True
    )
    assert not check_dynamic_flags(
        static_voters=True, standalone=False, initial_controllers=False, no_initial_controllers=False
    )
    with pytest.raises(ConfigError, match="exclude one another"):
        check_dynamic_flags(
            static_voters=False, standalone=True, initial_controllers=True, no_initial_controllers=False
        )
    with pytest.raises(ConfigError, match=r"remove controller\.quorum\.voters"):
        check_dynamic_flags(
            static_voters=True, standalone=False, initial_controllers=True, no_initial_controllers=False
        )
