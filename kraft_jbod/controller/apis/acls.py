"""ACLs in the metadata log: CreateAcls, DeleteAcls, DescribeAcls and their records.

The controller acts as Kafka's StandardAuthorizer-backed controller: each ACL is an
AccessControlEntryRecord with an id, and deleting one writes a
RemoveAccessControlEntryRecord with that id. :class:`~kraft_jbod.controller.acl_image.AclImage` is what the log says.

Rules (Kafka's AclControlManager and the request classes):

* Rule 1 (CreateAcls): each creation is validated alone: resource type not UNKNOWN/ANY,
  pattern LITERAL or PREFIXED, operation not UNKNOWN/ANY, permission ALLOW or DENY, a
  non-empty resource name, a principal with a colon, a non-empty host, the CLUSTER
  resource named ``kafka-cluster``; else INVALID_REQUEST for that creation. An ACL that
  already exists, or appears twice in the request, succeeds without a record. Version 0
  accepts only LITERAL patterns (else the whole request is refused).
* Rule 2 (DeleteAcls): each filter deletes every ACL it matches (Kafka's
  AclBindingFilter.matches: ANY and MATCH patterns, null name/principal/host match all);
  an ACL matched by two filters is deleted once; a filter with an UNKNOWN part is
  INVALID_REQUEST.
* Rule 3: ACL ids are deterministic (uuid5 of the cluster, the log offset and the ACL),
  so replay needs no randomness.
"""

from __future__ import annotations

import uuid
from typing import Final

from kraft_jbod.controller.acl_image import Acl
from kraft_jbod.controller.context import ControllerContext
from kraft_jbod.controller.limits import DELETE_ACLS_TOO_MANY, EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP
from kraft_jbod.errors import ProtocolError
from kraft_jbod.messages.access_control_entry_record import AccessControlEntryRecord
from kraft_jbod.messages.create_acls_request import CreateAclsRequest
from kraft_jbod.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from kraft_jbod.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kraft_jbod.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kraft_jbod.messages.describe_acls_request import DescribeAclsRequest
from kraft_jbod.messages.describe_acls_response import AclDescription, DescribeAclsResource, DescribeAclsResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.remove_access_control_entry_record import RemoveAccessControlEntryRecord
from kraft_jbod.wire.message import Message

RecordAndVersion = tuple[Message, int]

# ResourceType, PatternType, AclOperation, AclPermissionType codes (facts of the protocol).
R_UNKNOWN, R_ANY, R_TOPIC, R_GROUP, R_CLUSTER, R_TXN, R_TOKEN, R_USER = 0, 1, 2, 3, 4, 5, 6, 7
P_UNKNOWN, P_ANY, P_MATCH, P_LITERAL, P_PREFIXED = 0, 1, 2, 3, 4
OP_UNKNOWN, OP_ANY = 0, 1
OP_MAX: Final = 15  # TWO_PHASE_COMMIT
PERM_UNKNOWN, PERM_ANY, PERM_DENY, PERM_ALLOW = 0, 1, 2, 3
CLUSTER_NAME: Final = "kafka-cluster"
WILDCARD: Final = "*"
_ACL_ID_NAMESPACE: Final = uuid.UUID("1f0b6c8e-4d2a-4b7e-8c1d-3a5e7f9b2c40")


_R_NAMES: Final = ("UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER")
_P_NAMES: Final = ("UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED")
_PERM_NAMES: Final = ("UNKNOWN", "ANY", "DENY", "ALLOW")


def _name(names: tuple[str, ...], code: int) -> str:
    return names[code] if 0 <= code < len(names) else "UNKNOWN"


def _apis_error(acl: Acl) -> str | None:
    """Kafka's AclApis checks (CLUSTER name, empty name): such a creation never reaches the
    controller, so it keeps this error even when the controller call fails."""
    if acl.resource_type == R_CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not acl.resource_name:
        return "Invalid empty resource name"
    return None


def _creation_error(acl: Acl) -> str | None:
    """Kafka's AclApis checks, then AclControlManager.validateNewAcl."""
    early = _apis_error(acl)
    if early is not None:
        return early
    if not R_TOPIC <= acl.resource_type <= R_USER:
        return f"Invalid resourceType {_name(_R_NAMES, acl.resource_type)}"
    if acl.pattern_type not in (P_LITERAL, P_PREFIXED):
        return f"Invalid patternType {_name(_P_NAMES, acl.pattern_type)}"
    if not OP_ANY < acl.operation <= OP_MAX:
        return f"Invalid operation {'ANY' if acl.operation == OP_ANY else 'UNKNOWN'}"
    if acl.permission_type not in (PERM_DENY, PERM_ALLOW):
        return f"Invalid permissionType {_name(_PERM_NAMES, acl.permission_type)}"
    if ":" not in acl.principal:
        return (
            f"Could not parse principal from `{acl.principal}` (no colon is present separating the "
            "principal type from the principal name)"
        )
    if not acl.host:
        return "Host pattern cannot be null or empty"
    return None


def _acl_id(st: ControllerContext, next_offset: int, acl: Acl, taken: set[uuid.UUID]) -> uuid.UUID:
    salt = 0
    while True:
        u = uuid.uuid5(_ACL_ID_NAMESPACE, f"{st.cluster_id}/{next_offset}/{acl}/{salt}")
        salt += 1
        if u not in taken and u.int != 0:
            return u


def create_acls(
    st: ControllerContext, api_version: int, req: CreateAclsRequest, next_offset: int
) -> tuple[CreateAclsResponse, list[RecordAndVersion]]:
    """CreateAcls (Rules 1 and 3).

    Raises:
        ProtocolError: a creation with an UNKNOWN (0) code, or a v0 request with a
            non-LITERAL pattern: Kafka fails to parse such a request at all.
    """
    if api_version == 0 and any(c.resource_pattern_type != P_LITERAL for c in req.creations):
        raise ProtocolError("CreateAcls v0 only supports literal resource pattern types")
    if any(0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type) for c in req.creations):
        raise ProtocolError("CreateAcls creations contain UNKNOWN elements")
    results: list[AclCreationResult] = []
    records: list[RecordAndVersion] = []
    wanted: set[Acl] = set()
    taken = {i for i, _ in st.acls.items()}
    acls = [
        Acl(
            c.resource_type,
            c.resource_name,
            c.resource_pattern_type,
            c.principal,
            c.host,
            c.operation,
            c.permission_type,
        )
        for c in req.creations
    ]
    for acl in acls:
        err = _creation_error(acl)
        if err is not None:
            results.append(AclCreationResult(ErrorCode.INVALID_REQUEST, err))
            continue
        if acl not in st.acls and acl not in wanted:
            wanted.add(acl)
            acl_id = _acl_id(st, next_offset + len(records), acl, taken)
            taken.add(acl_id)
            records.append(
                (
                    AccessControlEntryRecord(
                        id=acl_id,
                        resource_type=acl.resource_type,
                        resource_name=acl.resource_name,
                        pattern_type=acl.pattern_type,
                        principal=acl.principal,
                        host=acl.host,
                        operation=acl.operation,
                        permission_type=acl.permission_type,
                    ),
                    0,
                )
            )
        results.append(AclCreationResult(0, None))
    if len(records) > MAX_RECORDS_PER_USER_OP:
        # Kafka's bounded record list throws: the controller call fails and every
        # creation sent to it, valid or not, carries the error.
        refused = [
            r if _apis_error(acl) is not None else AclCreationResult(ErrorCode.POLICY_VIOLATION, EXCESSIVE_BATCH)
            for r, acl in zip(results, acls, strict=True)
        ]
        return CreateAclsResponse(results=refused), []
    return CreateAclsResponse(results=results), records


def filter_unknown(resource_type: int, pattern_type: int, operation: int, permission: int) -> bool:
    return (
        resource_type == R_UNKNOWN
        or not R_ANY <= resource_type <= R_USER
        or pattern_type == P_UNKNOWN
        or not P_ANY <= pattern_type <= P_PREFIXED
        or operation == OP_UNKNOWN
        or not OP_ANY <= operation <= OP_MAX
        or permission == PERM_UNKNOWN
        or not PERM_ANY <= permission <= PERM_ALLOW
    )


def matches(
    acl: Acl,
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission: int,
) -> bool:
    """Kafka's AclBindingFilter.matches."""
    if resource_type != R_ANY and resource_type != acl.resource_type:
        return False
    if pattern_type not in (P_ANY, P_MATCH) and pattern_type != acl.pattern_type:
        return False
    if name is not None:
        if pattern_type in (P_ANY, acl.pattern_type):
            if name != acl.resource_name:
                return False
        elif acl.pattern_type == P_LITERAL:
            if name != acl.resource_name and acl.resource_name != WILDCARD:
                return False
        elif not name.startswith(acl.resource_name):
            return False
    if principal is not None and principal != acl.principal:
        return False
    if host is not None and host != acl.host:
        return False
    if operation != OP_ANY and operation != acl.operation:
        return False
    return permission == PERM_ANY or permission == acl.permission_type


def _matching(st: ControllerContext, f: DeleteAclsFilter | DescribeAclsRequest) -> list[tuple[uuid.UUID, Acl]]:
    return [
        (i, acl)
        for i, acl in st.acls.items()
        if matches(
            acl,
            f.resource_type_filter,
            f.resource_name_filter,
            f.pattern_type_filter,
            f.principal_filter,
            f.host_filter,
            f.operation,
            f.permission_type,
        )
    ]


def delete_acls(
    st: ControllerContext, api_version: int, req: DeleteAclsRequest
) -> tuple[DeleteAclsResponse, list[RecordAndVersion]]:
    """DeleteAcls (Rule 2).

    Raises:
        ProtocolError: a filter with an UNKNOWN (0) code, or a v0 filter whose pattern is
            not LITERAL: Kafka fails to parse such a request at all.
    """
    if api_version == 0 and any(f.pattern_type_filter != P_LITERAL for f in req.filters):
        raise ProtocolError("DeleteAcls v0 only supports literal resource pattern types")
    if any(0 in (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type) for f in req.filters):
        raise ProtocolError("DeleteAcls filters contain UNKNOWN elements")
    out: list[DeleteAclsFilterResult] = []
    removed: set[uuid.UUID] = set()
    records: list[RecordAndVersion] = []
    for f in req.filters:
        if filter_unknown(f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type):
            out.append(DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, "Unknown patternFilter."))
            continue
        result = DeleteAclsFilterResult(0, None)
        for acl_id, acl in _matching(st, f):
            result.matching_acls.append(
                DeleteAclsMatchingAcl(
                    error_code=0,
                    error_message=None,
                    resource_type=acl.resource_type,
                    resource_name=acl.resource_name,
                    pattern_type=acl.pattern_type,
                    principal=acl.principal,
                    host=acl.host,
                    operation=acl.operation,
                    permission_type=acl.permission_type,
                )
            )
            # Kafka checks the bound on every match, before it knows whether the ACL is
            # already being removed, and fails the whole request (no partial answer).
            if len(removed) >= MAX_RECORDS_PER_USER_OP:
                refused = [DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, DELETE_ACLS_TOO_MANY) for _ in req.filters]
                return DeleteAclsResponse(filter_results=refused), []
            if acl_id not in removed:
                removed.add(acl_id)
                records.append((RemoveAccessControlEntryRecord(id=acl_id), 0))
        out.append(result)
    return DeleteAclsResponse(filter_results=out), records


def describe_acls(st: ControllerContext, api_version: int, req: DescribeAclsRequest) -> DescribeAclsResponse:
    """DescribeAcls: the ACLs one filter matches, grouped by resource pattern.

    Raises:
        ProtocolError: the filter has an UNKNOWN (0) code (Kafka fails to parse it).
    """
    if 0 in (req.resource_type_filter, req.pattern_type_filter, req.operation, req.permission_type):
        raise ProtocolError("DescribeAcls filter contains UNKNOWN elements")
    if filter_unknown(req.resource_type_filter, req.pattern_type_filter, req.operation, req.permission_type):
        return DescribeAclsResponse(
            error_code=ErrorCode.INVALID_REQUEST, error_message="The filter contains UNKNOWN elements"
        )
    grouped: dict[tuple[int, str, int], list[AclDescription]] = {}
    for _i, acl in _matching(st, req):
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        grouped.setdefault(key, []).append(AclDescription(acl.principal, acl.host, acl.operation, acl.permission_type))
    resources = [
        DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in sorted(grouped.items())
    ]
    return DescribeAclsResponse(error_code=0, error_message=None, resources=resources)
