"""Kafka error codes the controller answers with (facts from Kafka's Errors table).

Plain ints so responses can be built without lookups; ``error_name`` is for logs and
test ids only.
"""

from __future__ import annotations

from typing import Final

NONE: Final = 0
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
NOT_LEADER_OR_FOLLOWER: Final = 6
REQUEST_TIMED_OUT: Final = 7
BROKER_NOT_AVAILABLE: Final = 8
INVALID_TOPIC_EXCEPTION: Final = 17
CLUSTER_AUTHORIZATION_FAILED: Final = 31
UNSUPPORTED_VERSION: Final = 35
TOPIC_ALREADY_EXISTS: Final = 36
INVALID_PARTITIONS: Final = 37
INVALID_REPLICATION_FACTOR: Final = 38
INVALID_REPLICA_ASSIGNMENT: Final = 39
NOT_CONTROLLER: Final = 41
INVALID_REQUEST: Final = 42
OPERATION_NOT_ATTEMPTED: Final = 55
LOG_DIR_NOT_FOUND: Final = 57
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
STALE_BROKER_EPOCH: Final = 77
INVALID_UPDATE_VERSION: Final = 95
SNAPSHOT_NOT_FOUND: Final = 98
UNKNOWN_TOPIC_ID: Final = 100
DUPLICATE_BROKER_REGISTRATION: Final = 101
BROKER_ID_NOT_REGISTERED: Final = 102
INCONSISTENT_CLUSTER_ID: Final = 104
NEW_LEADER_ELECTED: Final = 106
INELIGIBLE_REPLICA: Final = 107
MISMATCHED_ENDPOINT_TYPE: Final = 114
UNSUPPORTED_ENDPOINT_TYPE: Final = 115
INVALID_REGISTRATION: Final = 119

_NAMES: Final[dict[int, str]] = {
    value: name
    for name, value in list(globals().items())
    if name.isupper() and isinstance(value, int) and not name.startswith("_")
}


def error_name(code: int) -> str:
    """Kafka's name for an error code this module knows, else ``"ERROR_<code>"``."""
    return _NAMES.get(code, f"ERROR_{code}")
