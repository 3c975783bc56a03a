"""Feature levels the controller knows: the metadata.version table and friends.

metadata.version is a single integer feature level; each level has a name such as
"3.7-IV2" and belongs to a release. This module is the one place that maps between the
three and decides which record versions a level implies, so the state machine never
compares magic numbers.

Invariants:

* levels in ``_TABLE`` are contiguous from 1 and strictly increasing;
* ``MV_3_7_IV2`` (17) is the first level with directory assignment (JBOD);
* ``DEFAULT_LEVEL`` is the newest production level, which supports JBOD and has no
  ELR, so every record version chosen here is one Apache Kafka HEAD writes at it.
"""

from __future__ import annotations

from typing import Final

from kraft_jbod.errors import ConfigError

METADATA_VERSION: Final = "metadata.version"
KRAFT_VERSION: Final = "kraft.version"

# (level, name, release, production-ready at HEAD).  Facts from MetadataVersion.
_TABLE: Final[tuple[tuple[int, str, str, bool], ...]] = (
    (1, "3.0-IV1", "3.0", True),
    (2, "3.1-IV0", "3.1", True),
    (3, "3.2-IV0", "3.2", True),
    (4, "3.3-IV0", "3.3", True),
    (5, "3.3-IV1", "3.3", True),
    (6, "3.3-IV2", "3.3", True),
    (7, "3.3-IV3", "3.3", True),
    (8, "3.4-IV0", "3.4", True),
    (9, "3.5-IV0", "3.5", True),
    (10, "3.5-IV1", "3.5", True),
    (11, "3.5-IV2", "3.5", True),
    (12, "3.6-IV0", "3.6", True),
    (13, "3.6-IV1", "3.6", True),
    (14, "3.6-IV2", "3.6", True),
    (15, "3.7-IV0", "3.7", True),
    (16, "3.7-IV1", "3.7", True),
    (17, "3.7-IV2", "3.7", True),
    (18, "3.7-IV3", "3.7", True),
    (19, "3.7-IV4", "3.7", True),
    (20, "3.8-IV0", "3.8", True),
    (21, "3.9-IV0", "3.9", True),
    (22, "4.0-IV0", "4.0", True),
    (23, "4.0-IV1", "4.0", False),
    (24, "4.0-IV2", "4.0", False),
    (25, "4.0-IV3", "4.0", False),
)

_BY_NAME: Final[dict[str, int]] = {name: level for level, name, _, _ in _TABLE}
_BY_LEVEL: Final[dict[int, tuple[str, str, bool]]] = {
    level: (name, release, prod) for level, name, release, prod in _TABLE
}

MV_3_0_IV1: Final = 1  # minimum KRaft level; also what an empty feature image means
MV_3_3_IV0: Final = 4  # minimum bootstrap level (metadata.version recorded in the log)
MV_3_3_IV1: Final = 5  # NoOpRecord
MV_3_3_IV2: Final = 6  # BrokerRegistrationChangeRecord replaces Fence/Unfence records
MV_3_3_IV3: Final = 7  # InControlledShutdown
MV_3_4_IV0: Final = 8  # ZkMigrationStateRecord, RegisterBrokerRecord v2
MV_3_6_IV1: Final = 13  # metadata transactions (Begin/EndTransactionRecord)
MV_3_7_IV2: Final = 17  # JBOD: directory assignment
MV_4_0_IV1: Final = 23  # ELR at HEAD (unstable): not implemented here

MINIMUM_LEVEL: Final = MV_3_0_IV1
MINIMUM_BOOTSTRAP_LEVEL: Final = MV_3_3_IV0
LATEST_PRODUCTION_LEVEL: Final = 22
DEFAULT_LEVEL: Final = LATEST_PRODUCTION_LEVEL
# We do not implement ELR, so levels from 4.0-IV1 upward (which imply PartitionRecord v2
# at HEAD) are refused rather than written with the wrong record versions.
MAX_SUPPORTED_LEVEL: Final = LATEST_PRODUCTION_LEVEL

SUPPORTED_FEATURES: Final[dict[str, tuple[int, int]]] = {
    METADATA_VERSION: (MINIMUM_LEVEL, MAX_SUPPORTED_LEVEL),
    # A single static voter: kraft.version 1 (KIP-853 voter records) is not produced.
    KRAFT_VERSION: (0, 0),
}


def level_of(name: str) -> int:
    """Feature level of a metadata.version name ("3.7-IV2" -> 17).

    Also accepts a bare release ("3.7"), meaning its newest level, and a decimal level.

    Raises:
        ConfigError: the name is not a known metadata.version.
    """
    text = name.strip()
    if text in _BY_NAME:
        return _BY_NAME[text]
    if text.isdigit() and int(text) in _BY_LEVEL:
        return int(text)
    newest = [lvl for lvl, _, rel, _ in _TABLE if rel == text]
    if newest:
        return max(newest)
    raise ConfigError(f"unknown metadata.version {name!r}")


def name_of(level: int) -> str:
    """Name of a metadata.version level (17 -> "3.7-IV2").

    Raises:
        ConfigError: the level is not in the table.
    """
    try:
        return _BY_LEVEL[level][0]
    except KeyError:
        raise ConfigError(f"unknown metadata.version level {level}") from None


def release_of(level: int) -> str:
    """Kafka release a level belongs to (17 -> "3.7").

    Raises:
        ConfigError: the level is not in the table.
    """
    try:
        return _BY_LEVEL[level][1]
    except KeyError:
        raise ConfigError(f"unknown metadata.version level {level}") from None


def is_production(level: int) -> bool:
    """True for levels Kafka HEAD marks production-ready."""
    entry = _BY_LEVEL.get(level)
    return entry is not None and entry[2]


def all_levels() -> list[tuple[int, str, str]]:
    """Every known (level, name, release), ascending."""
    return [(lvl, name, rel) for lvl, name, rel, _ in _TABLE]


def supports_jbod(level: int) -> bool:
    """Directory assignment (KIP-858) is enabled from 3.7-IV2."""
    return level >= MV_3_7_IV2


def register_broker_record_version(level: int) -> int:
    """RegisterBrokerRecord version the controller writes at this level."""
    if level >= MV_3_7_IV2:
        return 3
    if level >= MV_3_4_IV0:
        return 2
    if level >= MV_3_3_IV3:
        return 1
    return 0


def partition_record_version(level: int) -> int:
    """PartitionRecord version: v1 (Directories) from 3.7-IV2, v0 before; no ELR here."""
    return 1 if level >= MV_3_7_IV2 else 0


def partition_change_record_version(level: int) -> int:
    """PartitionChangeRecord version: v1 (Directories) from 3.7-IV2, v0 before."""
    return 1 if level >= MV_3_7_IV2 else 0


def uses_registration_change_record(level: int) -> bool:
    """From 3.3-IV2 fencing is a BrokerRegistrationChangeRecord, before it Fence/Unfence records."""
    return level >= MV_3_3_IV2
