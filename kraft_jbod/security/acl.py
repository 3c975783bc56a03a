"""Authorization as Kafka's StandardAuthorizer does it, over an ACL file.

File format (JSON)::

    {"super_users": ["User:admin"],
     "allow_everyone_if_no_acl_found": false,
     "acls": [{"principal": "User:broker", "operation": "CLUSTER_ACTION"},
              {"principal": "User:*", "operation": "DESCRIBE", "resource_type": "TOPIC",
               "resource_name": "orders-", "pattern_type": "PREFIXED"}]}

Defaults per ACL: ``resource_type`` CLUSTER, ``resource_name`` ``kafka-cluster``,
``pattern_type`` LITERAL, ``permission`` ALLOW, ``host`` ``*``.

Rules (Kafka's):

* Rule 1: super users may do everything.
* Rule 2: a matching DENY wins over any ALLOW.
* Rule 3: ALLOW of ALL allows every operation; ALLOW of READ, WRITE, DELETE or ALTER also
  allows DESCRIBE; ALLOW of ALTER_CONFIGS also allows DESCRIBE_CONFIGS.
* Rule 4: with no ACL at all on the resource, the answer is
  ``allow_everyone_if_no_acl_found`` (default false).
* A principal ``User:*`` and a host ``*`` match anyone; a LITERAL name ``*`` matches every
  resource of its type; PREFIXED matches names starting with the prefix.

:data:`REQUIRED` maps the controller's api keys to the cluster operation Kafka's
``ControllerApis`` demands; a request without it gets CLUSTER_AUTHORIZATION_FAILED (31).
:data:`PER_TOPIC` lists the apis authorized topic by topic, :data:`UNCHECKED` the few that
need no authorization (the handshake before a principal exists). Every api the controller
serves is in exactly one of the three (a test enumerates them); one in none is refused
with 31 (:func:`policy`), so a newly served api is closed until someone decides.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kraft_jbod.errors import ConfigError

CLUSTER_NAME: Final = "kafka-cluster"
CLUSTER_AUTHORIZATION_FAILED: Final = 31
TOPIC_AUTHORIZATION_FAILED: Final = 29

OPERATIONS: Final[frozenset[str]] = frozenset(
    {
        "ALL",
        "READ",
        "WRITE",
        "CREATE",
        "DELETE",
        "ALTER",
        "DESCRIBE",
        "CLUSTER_ACTION",
        "DESCRIBE_CONFIGS",
        "ALTER_CONFIGS",
        "IDEMPOTENT_WRITE",
        "CREATE_TOKENS",
        "DESCRIBE_TOKENS",
    }
)
RESOURCE_TYPES: Final[frozenset[str]] = frozenset(
    {"CLUSTER", "TOPIC", "GROUP", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}
)
_IMPLIES: Final[dict[str, frozenset[str]]] = {
    "DESCRIBE": frozenset({"READ", "WRITE", "DELETE", "ALTER"}),
    "DESCRIBE_CONFIGS": frozenset({"ALTER_CONFIGS"}),
}

_ACL_FIELDS: Final = ("principal", "operation", "resource_type", "resource_name", "pattern_type", "permission", "host")

# Api key -> cluster operation, as Apache Kafka's ControllerApis checks them.
REQUIRED: Final[dict[int, str]] = {
    1: "CLUSTER_ACTION",  # Fetch (raft)
    52: "CLUSTER_ACTION",  # Vote
    53: "CLUSTER_ACTION",  # BeginQuorumEpoch
    54: "CLUSTER_ACTION",  # EndQuorumEpoch
    55: "DESCRIBE",  # DescribeQuorum
    56: "CLUSTER_ACTION",  # AlterPartition
    58: "CLUSTER_ACTION",  # Envelope
    59: "CLUSTER_ACTION",  # FetchSnapshot
    60: "ALTER",  # DescribeCluster: ALTER on the controller, unlike on a broker
    62: "CLUSTER_ACTION",  # BrokerRegistration
    63: "CLUSTER_ACTION",  # BrokerHeartbeat
    64: "ALTER",  # UnregisterBroker
    67: "CLUSTER_ACTION",  # AllocateProducerIds
    70: "CLUSTER_ACTION",  # ControllerRegistration
    73: "CLUSTER_ACTION",  # AssignReplicasToDirs
    # Admin APIs (controller/apis/). Kafka checks the topic-scoped ones per topic
    # (CreatePartitions: ALTER, configs: ALTER_CONFIGS/DESCRIBE_CONFIGS on the resource);
    # here the cluster grant is required for all of them.
    29: "DESCRIBE",  # DescribeAcls
    30: "ALTER",  # CreateAcls
    31: "ALTER",  # DeleteAcls
    32: "DESCRIBE_CONFIGS",  # DescribeConfigs
    33: "ALTER_CONFIGS",  # AlterConfigs
    37: "ALTER",  # CreatePartitions
    43: "ALTER",  # ElectLeaders
    44: "ALTER_CONFIGS",  # IncrementalAlterConfigs
    45: "ALTER",  # AlterPartitionReassignments
    46: "DESCRIBE",  # ListPartitionReassignments
    57: "ALTER",  # UpdateFeatures
    # KIP-853 voter changes: ControllerApis asks ALTER for Add/Remove (an operator's act)
    # and CLUSTER_ACTION for Update (a voter announcing its own endpoints).
    80: "ALTER",  # AddRaftVoter
    81: "ALTER",  # RemoveRaftVoter
    82: "CLUSTER_ACTION",  # UpdateRaftVoter
}
# Api key -> the topic operation its topics are checked for (the cluster grant covers all).
# Metadata filters out the topics a principal may not DESCRIBE, as a broker does;
# CreateTopics/DeleteTopics answer TOPIC_AUTHORIZATION_FAILED (29).
PER_TOPIC: Final[dict[int, str]] = {
    3: "DESCRIBE",  # Metadata
    19: "CREATE",  # CreateTopics
    20: "DELETE",  # DeleteTopics
}
# Api keys Kafka answers before and without authorization, and why.
UNCHECKED: Final[dict[int, str]] = {
    17: "SaslHandshake: authentication itself, before a principal exists",
    18: "ApiVersions: a client needs it to speak at all, before authenticating",
    36: "SaslAuthenticate: authentication itself, before a principal exists",
}


def policy(api_key: int) -> tuple[str, str] | None:
    """How ``api_key`` is authorized: ("cluster", op), ("topic", op), ("none", why), or
    None when no table names it (then the controller refuses it with 31)."""
    if api_key in REQUIRED:
        return "cluster", REQUIRED[api_key]
    if api_key in PER_TOPIC:
        return "topic", PER_TOPIC[api_key]
    if api_key in UNCHECKED:
        return "none", UNCHECKED[api_key]
    return None


@dataclass(frozen=True, slots=True)
class Acl:
    principal: str
    operation: str
    resource_type: str = "CLUSTER"
    resource_name: str = CLUSTER_NAME
    pattern_type: str = "LITERAL"
    permission: str = "ALLOW"
    host: str = "*"

    def names(self, resource_type: str, name: str) -> bool:
        """Whether this ACL is about the resource at all (whoever it is for)."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == "PREFIXED":
            return name.startswith(self.resource_name)
        return self.resource_name in ("*", name)

    def covers(self, principal: str, host: str, resource_type: str, name: str) -> bool:
        if self.principal not in (principal, "User:*") or self.host not in ("*", host):
            return False
        return self.names(resource_type, name)

    @classmethod
    def from_json(cls, d: object, where: str) -> Acl:
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be an object")
        extra = set(d) - set(_ACL_FIELDS)
        if extra:
            raise ConfigError(f"{where}: unknown field(s) {', '.join(sorted(extra))}")
        values: dict[str, str] = {}
        for key in _ACL_FIELDS:
            if key in d:
                if not isinstance(d[key], str) or not d[key]:
                    raise ConfigError(f"{where}: {key} must be a non-empty string")
                values[key] = d[key]
        if "principal" not in values or ":" not in values["principal"]:
            raise ConfigError(f"{where}: principal must look like User:name")
        if "operation" not in values:
            raise ConfigError(f"{where}: operation is required")
        acl = cls(
            principal=values["principal"],
            operation=values["operation"].upper(),
            resource_type=values.get("resource_type", "CLUSTER").upper(),
            resource_name=values.get("resource_name", CLUSTER_NAME),
            pattern_type=values.get("pattern_type", "LITERAL").upper(),
            permission=values.get("permission", "ALLOW").upper(),
            host=values.get("host", "*"),
        )
        if acl.operation not in OPERATIONS:
            raise ConfigError(f"{where}: unknown operation {acl.operation}")
        if acl.resource_type not in RESOURCE_TYPES:
            raise ConfigError(f"{where}: unknown resource_type {acl.resource_type}")
        if acl.pattern_type not in ("LITERAL", "PREFIXED"):
            raise ConfigError(f"{where}: pattern_type must be LITERAL or PREFIXED")
        if acl.permission not in ("ALLOW", "DENY"):
            raise ConfigError(f"{where}: permission must be ALLOW or DENY")
        return acl


class Authorizer:
    """ACLs plus super users; :meth:`authorize` answers one question (Rules 1-4)."""

    def __init__(
        self,
        acls: list[Acl] | None = None,
        *,
        super_users: frozenset[str] = frozenset(),
        allow_everyone_if_no_acl_found: bool = False,
    ) -> None:
        self.acls = list(acls or [])
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    def authorize(
        self,
        principal: str,
        operation: str,
        resource_type: str = "CLUSTER",
        name: str = CLUSTER_NAME,
        host: str = "*",
    ) -> bool:
        if principal in self.super_users:
            return True
        relevant = [a for a in self.acls if a.covers(principal, host, resource_type, name)]
        if any(a.permission == "DENY" and a.operation in ("ALL", operation) for a in relevant):
            return False
        implied = _IMPLIES.get(operation, frozenset())
        if any(
            a.permission == "ALLOW" and (a.operation in ("ALL", operation) or a.operation in implied) for a in relevant
        ):
            return True
        if self.allow_everyone_if_no_acl_found:
            return not any(a.names(resource_type, name) for a in self.acls)
        return False

    def required_for(self, api_key: int) -> str | None:
        """The cluster operation an api needs on the controller, or None (checked elsewhere)."""
        return REQUIRED.get(api_key)

    @classmethod
    def from_json(cls, doc: object, source: str = "acl file") -> Authorizer:
        """Raises: ConfigError: the document does not follow the module's format."""
        if not isinstance(doc, dict):
            raise ConfigError(f"{source}: expected an object")
        extra = set(doc) - {"super_users", "allow_everyone_if_no_acl_found", "acls"}
        if extra:
            raise ConfigError(f"{source}: unknown field(s) {', '.join(sorted(extra))}")
        supers = doc.get("super_users", [])
        if not isinstance(supers, list) or not all(isinstance(s, str) for s in supers):
            raise ConfigError(f"{source}: super_users must be a list of principals")
        allow = doc.get("allow_everyone_if_no_acl_found", False)
        if not isinstance(allow, bool):
            raise ConfigError(f"{source}: allow_everyone_if_no_acl_found must be true or false")
        raw = doc.get("acls", [])
        if not isinstance(raw, list):
            raise ConfigError(f"{source}: acls must be a list")
        acls = [Acl.from_json(a, f"{source}: acls[{i}]") for i, a in enumerate(raw)]
        return cls(acls, super_users=frozenset(supers), allow_everyone_if_no_acl_found=allow)

    @classmethod
    def load(cls, path: Path) -> Authorizer:
        """Raises: ConfigError: unreadable, not JSON, or not the format."""
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read acl file {path}: {exc.strerror}") from None
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise ConfigError(f"acl file {path} is not JSON: {exc}") from None
        return cls.from_json(doc, str(path))
