"""Feature levels the controller knows: the metadata.version table and the other features.

metadata.version is a single integer feature level; each level has a name such as
"3.7-IV2" and belongs to a release. This module is the one place that maps between the
three, decides which record versions a level implies and which other features a new
cluster gets at a level, so the state machine never compares magic numbers. The facts
are Kafka 4.4's ``MetadataVersion`` and its feature classes (GroupVersion,
TransactionVersion, EligibleLeaderReplicasVersion, ShareVersion, StreamsVersion,
KRaftVersion): levels 7 (3.3-IV3) to 33 (4.4-IV2), production up to 30 (4.3-IV0).

Invariants:

* levels in ``_TABLE`` are contiguous from 1 and strictly increasing;
* ``MV_3_7_IV2`` (17) is the first level with directory assignment (JBOD), ``MV_4_0_IV1``
  (23) the first with ELR records, ``MV_4_3_IV0`` (30) the first with cordoned log dirs;
* ``MAX_SUPPORTED_LEVEL`` never exceeds what the generated record classes can write: a
  level whose RegisterBrokerRecord or BrokerRegistrationChangeRecord version the codec
  lacks is refused rather than written with the wrong versions.
"""

from __future__ import annotations

from typing import Final

from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.broker_registration_change_record import BrokerRegistrationChangeRecord
from kraft_jbod.messages.broker_registration_request import Feature as BrokerRegistrationFeature
from kraft_jbod.messages.register_broker_record import RegisterBrokerRecord

METADATA_VERSION: Final = "metadata.version"
KRAFT_VERSION: Final = "kraft.version"
GROUP_VERSION: Final = "group.version"
TRANSACTION_VERSION: Final = "transaction.version"
ELR_VERSION: Final = "eligible.leader.replicas.version"
SHARE_VERSION: Final = "share.version"
STREAMS_VERSION: Final = "streams.version"

# (level, name, release, production in Kafka 4.4).  Facts from MetadataVersion; levels
# 1-6 are the older KRaft levels 4.x no longer accepts (we still read and write them).
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
    (23, "4.0-IV1", "4.0", True),
    (24, "4.0-IV2", "4.0", True),
    (25, "4.0-IV3", "4.0", True),
    (26, "4.1-IV0", "4.1", True),
    (27, "4.1-IV1", "4.1", True),
    (28, "4.2-IV0", "4.2", True),
    (29, "4.2-IV1", "4.2", True),
    (30, "4.3-IV0", "4.3", True),
    (31, "4.4-IV0", "4.4", False),
    (32, "4.4-IV1", "4.4", False),
    (33, "4.4-IV2", "4.4", False),
)

_BY_NAME: Final[dict[str, int]] = {name: level for level, name, _, _ in _TABLE}
_BY_LEVEL: Final[dict[int, tuple[str, str, bool]]] = {
    level: (name, release, prod) for level, name, release, prod in _TABLE
}

MV_3_0_IV1: Final = 1  # minimum KRaft level; also what an empty feature image means
MV_3_3_IV0: Final = 4  # minimum bootstrap level here (metadata.version recorded in the log)
MV_3_3_IV1: Final = 5  # NoOpRecord
MV_3_3_IV2: Final = 6  # BrokerRegistrationChangeRecord replaces Fence/Unfence records
MV_3_3_IV3: Final = 7  # InControlledShutdown; Kafka 4.4's minimum
MV_3_4_IV0: Final = 8  # RegisterBrokerRecord v2
MV_3_6_IV0: Final = 12  # an ISR shrink no longer bumps the leader epoch (KAFKA-15021)
MV_3_6_IV1: Final = 13  # metadata transactions (Begin/EndTransactionRecord)
MV_3_7_IV0: Final = 15  # controller registrations (ControllerRegistration, RegisterControllerRecord)
MV_3_7_IV2: Final = 17  # JBOD: directory assignment
MV_3_9_IV0: Final = 21  # kraft.version 1 becomes the default
MV_4_0_IV0: Final = 22  # group.version 1
MV_4_0_IV1: Final = 23  # ELR records: PartitionRecord / PartitionChangeRecord v2
MV_4_0_IV2: Final = 24  # transaction.version 2
MV_4_1_IV0: Final = 26  # eligible.leader.replicas.version 1 by default
MV_4_2_IV0: Final = 28  # share.version 1
MV_4_2_IV1: Final = 29  # streams.version 1
MV_4_3_IV0: Final = 30  # cordoned log dirs: RegisterBrokerRecord v4, BrokerRegistrationChangeRecord v3
MV_4_4_IV0: Final = 31  # share.version 2
MV_4_4_IV2: Final = 33  # controller unregistration (UnregisterController)

MINIMUM_LEVEL: Final = MV_3_0_IV1
MINIMUM_BOOTSTRAP_LEVEL: Final = MV_3_3_IV0
LATEST_PRODUCTION_LEVEL: Final = MV_4_3_IV0  # Kafka 4.4's MetadataVersion.LATEST_PRODUCTION
NEWEST_LEVEL: Final = MV_4_4_IV2


def _codec_max_level() -> int:
    """The newest level whose broker-registration record versions the generated codec has."""
    if RegisterBrokerRecord.VALID_VERSIONS[1] >= 4 and BrokerRegistrationChangeRecord.VALID_VERSIONS[1] >= 3:
        return NEWEST_LEVEL
    return MV_4_3_IV0 - 1


MAX_SUPPORTED_LEVEL: Final = _codec_max_level()
# The newest production level we can write: 4.3-IV0 once the 4.4 schemas are compiled in.
DEFAULT_LEVEL: Final = min(LATEST_PRODUCTION_LEVEL, MAX_SUPPORTED_LEVEL)

# Feature -> ((level, first metadata.version that gets it by default), ...), ascending:
# what Kafka 4.4's formatter finalizes for a new cluster at a metadata.version.
_FEATURE_DEFAULTS: Final[dict[str, tuple[tuple[int, int], ...]]] = {
    GROUP_VERSION: ((1, MV_4_0_IV0),),
    TRANSACTION_VERSION: ((1, MV_4_0_IV2), (2, MV_4_0_IV2)),
    ELR_VERSION: ((1, MV_4_1_IV0),),
    SHARE_VERSION: ((1, MV_4_2_IV0), (2, MV_4_4_IV0)),
    STREAMS_VERSION: ((1, MV_4_2_IV1),),
}

# Kafka 4.4's FeatureVersion.dependencies(): a feature at a level needs other features at
# least at these levels (checked against the levels an UpdateFeatures would leave).
DEPENDENCIES: Final[dict[tuple[str, int], dict[str, int]]] = {
    (ELR_VERSION, 1): {METADATA_VERSION: MV_4_0_IV1},
}

# Features whose levels we implement. ELR (KIP-966) is maintained by the change builder,
# fencing, unfencing, unclean re-registration and AlterPartition, so a new cluster gets
# eligible.leader.replicas.version 1 from 4.1-IV0, as Kafka 4.4's formatter gives it.
IMPLEMENTED_MAX: Final[dict[str, int]] = {
    GROUP_VERSION: 1,
    TRANSACTION_VERSION: 2,
    ELR_VERSION: 1,
    SHARE_VERSION: 2,
    STREAMS_VERSION: 1,
}

SUPPORTED_FEATURES: Final[dict[str, tuple[int, int]]] = {
    METADATA_VERSION: (MINIMUM_LEVEL, MAX_SUPPORTED_LEVEL),
    # kraft.version 1 (KIP-853): KRaftVersionRecord and VotersRecord for a dynamic quorum
    # of this one voter (controller/voters.py); 0 for a static controller.quorum.voters.
    KRAFT_VERSION: (0, 1),
    **{name: (0, hi) for name, hi in IMPLEMENTED_MAX.items()},
}


def default_feature_levels(level: int) -> dict[str, int]:
    """Features other than metadata.version a new cluster gets at ``level`` (Kafka's
    ``Feature.defaultLevel``, capped at what we implement), by name; zeros included."""
    out: dict[str, int] = {}
    for name, steps in _FEATURE_DEFAULTS.items():
        chosen = 0
        for feature_level, from_mv in steps:
            if level >= from_mv:
                chosen = feature_level
        out[name] = min(chosen, IMPLEMENTED_MAX[name])
    return out


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
    """RegisterBrokerRecord version the controller writes at this level (Kafka 4.4's rule;
    levels below 3.3-IV3, which 4.4 dropped, keep 3.3's v0)."""
    if level >= MV_4_3_IV0:
        return 4
    if level >= MV_3_7_IV2:
        return 3
    if level >= MV_3_4_IV0:
        return 2
    if level >= MV_3_3_IV3:
        return 1
    return 0


def partition_record_version(level: int) -> int:
    """PartitionRecord version: v2 (ELR fields) from 4.0-IV1, v1 (Directories) from 3.7-IV2, else v0."""
    if level >= MV_4_0_IV1:
        return 2
    return 1 if level >= MV_3_7_IV2 else 0


def partition_change_record_version(level: int) -> int:
    """PartitionChangeRecord version: as :func:`partition_record_version`."""
    return partition_record_version(level)


def supports_cordoned_dirs(level: int) -> bool:
    """KIP-1066 cordoned log directories, from 4.3-IV0."""
    return level >= MV_4_3_IV0


def registration_change_record_version(level: int, *, dirs: bool = False, cordoned: bool = False) -> int:
    """BrokerRegistrationChangeRecord version: 3 for CordonedLogDirs, 2 for LogDirs, else 1 or 0."""
    if cordoned:
        return 3
    if dirs:
        return 2
    return 0


def uses_registration_change_record(level: int) -> bool:
    """From 3.3-IV2 fencing is a BrokerRegistrationChangeRecord, before it Fence/Unfence records."""
    return level >= MV_3_3_IV2


def registration_features(api_version: int = 4) -> list[BrokerRegistrationFeature]:
    """The Features a broker built from this code lists in BrokerRegistration: every feature
    we implement with its whole range. Below v4 features whose minimum is 0 are left out,
    as Kafka's BrokerRegistrationRequest.Builder does (KAFKA-17492)."""
    feats = [BrokerRegistrationFeature(METADATA_VERSION, MINIMUM_LEVEL, MAX_SUPPORTED_LEVEL)]
    feats += [
        BrokerRegistrationFeature(name, lo, hi)
        for name, (lo, hi) in sorted(SUPPORTED_FEATURES.items())
        if name != METADATA_VERSION
    ]
    if api_version < 4:
        feats = [f for f in feats if f.min_supported_version != 0]
    return feats
