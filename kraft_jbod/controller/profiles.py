"""Semantics profiles: Apache Kafka as implemented (``kafka``) or KIP-858 as worded (``kip``).

A profile is a frozen bundle of the few decisions where the two disagree; the state
machine reads it and never tests the profile name. Every field here has a row in
``docs/divergences.md``; adding a field means adding a row.

Invariants: the three reserved directory ids of a profile are distinct and all lie in
the reserved range (msb 0, signed lsb < 100), so no real directory can collide with them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.wire.primitives import is_reserved_directory_id

ProfileName = Literal["kafka", "kip"]


@dataclass(frozen=True, slots=True)
class Profile:
    """Where the ``kip`` profile departs from Kafka; see docs/divergences.md."""

    name: ProfileName
    # Reserved directory ids.  Kafka: MIGRATING=0, UNASSIGNED=1, LOST=2.  KIP text:
    # UNASSIGNED=0, LOST=1, MIGRATING=2.
    migrating: uuid.UUID
    unassigned: uuid.UUID
    lost: uuid.UUID
    # Error for a registration with no LogDirs at a JBOD metadata.version.
    empty_log_dirs_error: int
    # Error for an OfflineLogDirs entry the broker never registered (None: ignore it).
    unknown_offline_dir_error: int | None
    # Keep a multi-directory broker fenced while any of its replicas is UNASSIGNED.
    fence_while_unassigned: bool
    # A replica in a directory missing from a single-directory broker's list counts as
    # online (KIP "metadata caching" rule) instead of offline (Kafka DirectoryId.isOnline).
    single_dir_unknown_is_online: bool


KAFKA = Profile(
    name="kafka",
    migrating=uuid.UUID(int=0),
    unassigned=uuid.UUID(int=1),
    lost=uuid.UUID(int=2),
    empty_log_dirs_error=ErrorCode.INVALID_REGISTRATION,
    unknown_offline_dir_error=None,
    fence_while_unassigned=False,
    single_dir_unknown_is_online=False,
)

KIP = Profile(
    name="kip",
    migrating=uuid.UUID(int=2),
    unassigned=uuid.UUID(int=0),
    lost=uuid.UUID(int=1),
    empty_log_dirs_error=ErrorCode.INVALID_REQUEST,
    unknown_offline_dir_error=ErrorCode.LOG_DIR_NOT_FOUND,
    fence_while_unassigned=True,
    single_dir_unknown_is_online=True,
)

PROFILES: dict[str, Profile] = {"kafka": KAFKA, "kip": KIP}


def profile_named(name: str) -> Profile:
    """The profile called ``name``.

    Raises:
        ValueError: not ``kafka`` or ``kip``.
    """
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown semantics profile {name!r} (expected 'kafka' or 'kip')") from None


def is_reserved_directory(u: uuid.UUID) -> bool:
    """Kafka's reserved directory-id range (see ``wire.primitives.is_reserved_directory_id``)."""
    return is_reserved_directory_id(u)
