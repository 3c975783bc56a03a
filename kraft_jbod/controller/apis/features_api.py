"""UpdateFeatures (api 57): finalized feature levels changed through FeatureLevelRecords.

Rules (Kafka's QuorumController.updateFeatures and FeatureControlManager):

* Rule 1: all or nothing. The first feature that fails refuses the whole request with
  INVALID_UPDATE_VERSION; the answer's top-level message names it, and no record is
  written. ``validate_only`` writes nothing either.
* Rule 2: per feature, in order: a known upgrade type (v0: ``AllowDowngrade`` means
  SAFE_DOWNGRADE); a level >= 0; a level this controller supports, then every registered
  broker ("Broker N only supports versions a-b" / "does not support this feature"), or by
  a registered controller; from 3.7-IV0 every voter of ``controller.quorum.voters`` must
  have registered ("controller N has not registered, ..."), as Kafka's check.
  no downgrade without a downgrade type, no upgrade with one.
* Rule 3: metadata.version may go down only across levels that did not change the
  metadata (Kafka's didMetadataChange table); kraft.version stays at the level the log
  was created with (0, or 1 with ``--standalone``): asking for another is refused.
  Other features (group.version, transaction.version, ...) get a FeatureLevelRecord
  within what this controller implements; features it does not know are refused by Rule 2.
* Rule 4: v0-1 answers carry one result per feature on success; v2 carries none.
"""

from __future__ import annotations

from typing import Final

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.context import ControllerContext
from kraft_jbod.controller.image import kafka_table_order
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.feature_level_record import FeatureLevelRecord
from kraft_jbod.messages.update_features_request import UpdateFeaturesRequest
from kraft_jbod.messages.update_features_response import UpdatableFeatureResult, UpdateFeaturesResponse
from kraft_jbod.wire.message import Message

RecordAndVersion = tuple[Message, int]

UNKNOWN_TYPE, UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 0, 1, 2, 3
# Levels whose MetadataVersion has didMetadataChange=false in Kafka 4.4 (levels below 7,
# which 4.4 no longer knows, count as changed).
_NO_METADATA_CHANGE: Final = frozenset({9, 10, 12, 16, 18, 19, 20, 21, 22, 24, 25, 26, 27, 28, 29, 31})
_MV_MINIMUM: Final = 7  # Kafka 4.4's MetadataVersion.MINIMUM_VERSION, 3.3-IV3


def _range_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _not_supported(level: int, what: str, rng: tuple[int, int]) -> str | None:
    lo, hi = rng
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {_range_text(lo, hi)}"


def metadata_changed(high: int, low: int) -> bool:
    """Kafka's MetadataVersion.checkIfMetadataChanged between two levels."""
    high, low = max(high, low), min(high, low)
    level = high
    while level in _NO_METADATA_CHANGE and level != low:
        level -= 1
    return level != low


def _update_one(
    st: ControllerContext, name: str, level: int, kind: int, records: list[RecordAndVersion], proposed: dict[str, int]
) -> str | None:
    """The reason ``name`` cannot go to ``level`` (Rules 2-3), else None (records appended)."""

    def invalid(msg: str) -> str:
        return f"Invalid update version {level} for feature {name}. {msg}"

    if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return invalid("The controller does not support the given upgrade type.")
    current = _current_level(st, name)
    if level < 0:
        return invalid("A feature version cannot be less than 0.")
    reason = _unsupported_reason(st, name, level) or _direction_reason(level, current, kind)
    if reason is not None:
        return invalid(reason)
    if name == fv.METADATA_VERSION:
        if level < current and metadata_changed(current, level):
            return f"Unsupported metadata.version downgrade from {current} to {level}. {_downgrade_refusal(kind)}"
        records.append((FeatureLevelRecord(name=name, feature_level=level), 0))
        return None
    if name == fv.KRAFT_VERSION:
        reason = _kraft_version_reason(level, current)
        return None if reason is None else invalid(reason)
    reason = _feature_dependency_reason(name, level, proposed)
    if reason is not None:
        return invalid(reason)
    records.append((FeatureLevelRecord(name=name, feature_level=level), 0))
    return None


def _current_level(st: ControllerContext, name: str) -> int:
    """The finalized level of ``name`` (0 when not finalized)."""
    if name == fv.METADATA_VERSION:
        return st.metadata_version
    if name == fv.KRAFT_VERSION:
        return st.kraft_version  # a control record, not in the image's features
    return st.finalized_features.get(name, 0)


def _unsupported_reason(st: ControllerContext, name: str, level: int) -> str | None:
    """Why ``level`` is outside what this controller or a registered broker supports."""
    local = fv.SUPPORTED_FEATURES.get(name, (0, 0))
    if name == fv.METADATA_VERSION:
        # Kafka's controller without unstable.metadata.versions.enable: its minimum to the
        # latest production level (found by the twin, docs/twin.md)
        local = (_MV_MINIMUM, fv.LATEST_PRODUCTION_LEVEL)
    reason = _not_supported(level, f"Local controller {st.node_id}", local)
    if reason is not None:
        return reason
    # Kafka names the first broker failing the check in the order of its registration table.
    for b in kafka_table_order(st.brokers, st.image.broker_slots):
        reg = st.brokers[b]
        rng = next(((lo, hi) for fname, lo, hi in reg.features if fname == name), (0, 0))
        reason = _not_supported(level, f"Broker {b}", rng)
        if reason is not None:
            return reason
    if st.metadata_version >= fv.MV_3_7_IV0:
        # Registered controllers too (a stale registration blocks the upgrade: KIP-1312).
        for c, info in sorted(st.image.controllers.items()):
            if c != st.node_id:
                reason = _not_supported(level, f"Controller {c}", info.features.get(name, (0, 0)))
                if reason is not None:
                    return reason
        # A voter of the static quorum that has not registered may not support it either.
        for c in st.quorum_node_ids:
            if c != st.node_id and c not in st.image.controllers:
                return f"controller {c} has not registered, and may not support this feature"
    return None


def _direction_reason(level: int, current: int, kind: int) -> str | None:
    """Why the upgrade type does not match the direction of the change."""
    if level < current and kind == UPGRADE:
        return (
            "Can't downgrade the version of this feature without setting the upgrade type to either "
            "safe or unsafe downgrade."
        )
    if level > current and kind != UPGRADE:
        return "Can't downgrade to a newer version."
    return None


def _downgrade_refusal(kind: int) -> str:
    """Kafka's reason for refusing a metadata.version downgrade that loses metadata."""
    if kind == UNSAFE_DOWNGRADE:
        return "Unsafe metadata downgrade is not supported in this version."
    return "Refusing to perform the requested downgrade because it might delete metadata information."


def _kraft_version_reason(level: int, current: int) -> str | None:
    """kraft.version stays as it is.

    Kafka upgrades a static quorum to 1 by writing KRaftVersionRecord + VotersRecord;
    this controller fixes kraft.version when its log is created (--standalone).
    """
    if level == current:
        return None
    if level < current:
        return "Can't downgrade the version of this feature."  # Kafka's answer too
    return f"This controller does not change kraft.version (it is {current}, fixed when the log was created)."


def _feature_dependency_reason(name: str, level: int, proposed: dict[str, int]) -> str | None:
    """Kafka's Feature.validateVersion, against the levels the whole request would leave."""
    if name not in fv.SUPPORTED_FEATURES:
        # Only level 0 of an unknown feature gets this far (its supported range is 0-0);
        # Kafka then fails to look the feature up (found by the twin, docs/twin.md). Kafka's
        # own test features (test.feature.version, ...) are unknown here too.
        return f"Feature {name} not found."
    # A level >= 1 needs metadata.version >= 3.3-IV3, then the feature level's own dependencies.
    if level >= 1 and proposed[fv.METADATA_VERSION] < _MV_MINIMUM:
        return f"{name} could not be set to {level} because it depends on metadata.version={_MV_MINIMUM} (3.3-IV3)"
    for needed, at_least in fv.DEPENDENCIES.get((name, level), {}).items():
        if proposed.get(needed, 0) < at_least:
            return f"{name} could not be set to {level} because it depends on {needed} level {at_least}"
    return None


def update_features(
    st: ControllerContext, api_version: int, req: UpdateFeaturesRequest
) -> tuple[UpdateFeaturesResponse, list[RecordAndVersion]]:
    """UpdateFeatures (Rules 1-4)."""
    records: list[RecordAndVersion] = []
    resp = UpdateFeaturesResponse(error_code=0, error_message=None)
    proposed = {**st.finalized_features, fv.METADATA_VERSION: st.metadata_version}
    proposed.update((u.feature, u.max_version_level) for u in req.feature_updates)
    for u in req.feature_updates:
        if api_version == 0:
            kind = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
        else:
            kind = u.upgrade_type
        reason = _update_one(st, u.feature, u.max_version_level, kind, records, proposed)
        if reason is not None:
            resp.error_code = ErrorCode.INVALID_UPDATE_VERSION
            resp.error_message = (
                "The update failed for all features since the following feature had an error: " + reason
            )
            return resp, []
    if api_version <= 1:
        # Kafka fills each result from ApiError.message(), which for success without a
        # message is the error's name: "NONE" (found by the twin, docs/twin.md).
        resp.results = [
            UpdatableFeatureResult(feature=u.feature, error_code=0, error_message="NONE") for u in req.feature_updates
        ]
    return resp, [] if req.validate_only else records
