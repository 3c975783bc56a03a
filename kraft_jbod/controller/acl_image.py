"""ACLs as the metadata log says: the image part the replay of AccessControlEntryRecord and
RemoveAccessControlEntryRecord changes.

It sits beside :mod:`~kraft_jbod.controller.image` (which owns one) and below the ACL
APIs (:mod:`~kraft_jbod.controller.apis.acls`), which read it and propose the records.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kraft_jbod.messages.access_control_entry_record import AccessControlEntryRecord
from kraft_jbod.messages.remove_access_control_entry_record import RemoveAccessControlEntryRecord


@dataclass(frozen=True, slots=True)
class Acl:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


class AclImage:
    """ACLs as the log says: id -> ACL, and the set of ACLs for duplicate checks."""

    __slots__ = ("_by_id", "_ids")

    def __init__(self) -> None:
        self._by_id: dict[uuid.UUID, Acl] = {}
        self._ids: dict[Acl, uuid.UUID] = {}

    def apply_entry(self, rec: AccessControlEntryRecord) -> None:
        acl = Acl(
            rec.resource_type,
            rec.resource_name,
            rec.pattern_type,
            rec.principal,
            rec.host,
            rec.operation,
            rec.permission_type,
        )
        self._by_id[rec.id] = acl
        self._ids[acl] = rec.id

    def apply_remove(self, rec: RemoveAccessControlEntryRecord, offset: int) -> None:
        """Raises KeyError naming the offset when the id is unknown (the log is not ours)."""
        acl = self._by_id.pop(rec.id, None)
        if acl is None:
            raise KeyError(f"RemoveAccessControlEntryRecord at offset {offset}: no ACL with id {rec.id}")
        self._ids.pop(acl, None)

    def __contains__(self, acl: Acl) -> bool:
        return acl in self._ids

    def items(self) -> list[tuple[uuid.UUID, Acl]]:
        return sorted(self._by_id.items(), key=lambda kv: kv[0].int)

    def durable(self) -> dict[uuid.UUID, Acl]:
        return dict(self._by_id)
