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

Which operation each api needs is a fact of the api's route in the controller
(``Route.authorization`` in ``kraft_jbod/controller/routes.py``); this module only answers
whether a principal holds an operation on a resource.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.error_codes import ErrorCode

CLUSTER_NAME: Final = "kafka-cluster"
CLUSTER_AUTHORIZATION_FAILED: Final = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
TOPIC_AUTHORIZATION_FAILED: Final = ErrorCode.TOPIC_AUTHORIZATION_FAILED

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
