"""The feature ranges a real broker of each Kafka release registers, for ``kraft.jbod.broker.release``.

A Kafka broker lists in BrokerRegistration (and in ApiVersions' SupportedFeatures) what
its ``BrokerFeatures.defaultSupportedFeatures`` gives: metadata.version from the
release's minimum level to its latest production level, and every other production
feature from its lowest level to its latest production level, left out when that is 0.
The controller refuses a broker whose ranges do not hold a finalized level, so the range
decides which clusters a fake broker can join, exactly as it decides for a real one.

Where the facts come from:

* 4.4 from Kafka 4.4's sources (``MetadataVersion``, ``Feature`` and the feature classes);
  a test runs Kafka's own ``BrokerFeatures.defaultSupportedFeatures`` from the oracle jar
  and compares. One deliberate difference: the source snapshot we build from sets
  ``LATEST_PRODUCTION`` to 4.3-IV0 (level 30), while Kafka 4.4.0 as released made 4.4-IV2
  (level 33) its latest production level (apache/kafka PR #23235). The fake broker
  imitates the released broker, so "4.4" registers metadata.version 7-33; "4.4-IV0-src"
  is the source snapshot's 7-30, for tests that compare with the oracle jar.
* Older releases are derived from the same 4.4 sources by one rule: a release's newest
  metadata.version is the last level the 4.4 table names for it, and a feature level is
  production in the release whose newest metadata.version is at or past that level's
  ``bootstrapMetadataVersion`` (the level at which Kafka's formatter turns it on). The
  minimum metadata.version is 3.0-IV1 (1) before 4.0 and 3.3-IV3 (7) from 4.0 on. This
  is an approximation of releases we have no sources for, and says so in the docs.

Invariant: every range lies within what our controller implements
(``controller.features.SUPPORTED_FEATURES``); a test checks it.
"""

from __future__ import annotations

from typing import Final

from kraft_jbod.controller import features as fv
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.broker_registration_request import Feature

DEFAULT_RELEASE: Final = "4.4"
SOURCE_SNAPSHOT: Final = "4.4-IV0-src"

# Each feature's levels above 0 with the metadata.version at which Kafka 4.4's formatter
# turns them on (the feature classes' bootstrapMetadataVersion).
_BOOTSTRAP: Final[dict[str, tuple[tuple[int, int], ...]]] = {
    fv.KRAFT_VERSION: ((1, fv.MV_3_9_IV0),),
    fv.GROUP_VERSION: ((1, fv.MV_4_0_IV0),),
    fv.TRANSACTION_VERSION: ((1, fv.MV_4_0_IV2), (2, fv.MV_4_0_IV2)),
    fv.ELR_VERSION: ((1, fv.MV_4_1_IV0),),
    fv.SHARE_VERSION: ((1, fv.MV_4_2_IV0), (2, fv.MV_4_4_IV0)),
    fv.STREAMS_VERSION: ((1, fv.MV_4_2_IV1),),
}

# release -> (lowest metadata.version, latest production metadata.version)
_MV: Final[dict[str, tuple[int, int]]] = {
    "3.7": (fv.MV_3_0_IV1, 19),
    "3.8": (fv.MV_3_0_IV1, 20),
    "3.9": (fv.MV_3_0_IV1, 21),
    "4.0": (fv.MV_3_3_IV3, 25),
    "4.1": (fv.MV_3_3_IV3, 27),
    "4.2": (fv.MV_3_3_IV3, 29),
    "4.3": (fv.MV_3_3_IV3, 30),
    "4.4": (fv.MV_3_3_IV3, 33),  # 4.4.0 as released (PR #23235)
    SOURCE_SNAPSHOT: (fv.MV_3_3_IV3, fv.LATEST_PRODUCTION_LEVEL),
}

RELEASES: Final[tuple[str, ...]] = tuple(_MV)


def supported_features(release: str) -> dict[str, tuple[int, int]]:
    """Feature name -> (min, max) a broker of ``release`` supports, metadata.version first.

    Raises:
        ConfigError: an unknown release.
    """
    try:
        lo, hi = _MV[release]
    except KeyError:
        raise ConfigError(
            f"kraft.jbod.broker.release: unknown release {release!r} (known: {', '.join(RELEASES)})"
        ) from None
    out = {fv.METADATA_VERSION: (lo, hi)}
    # The 4.4 feature levels of the source snapshot are those of 4.4.0: only metadata.version moved.
    feature_mv = _MV["4.4"][1] if release == SOURCE_SNAPSHOT else hi
    for name, steps in _BOOTSTRAP.items():
        top = max((level for level, mv in steps if mv <= feature_mv), default=0)
        if top > 0:
            out[name] = (0, top)
    return out


def registration_features(release: str, api_version: int) -> list[Feature]:
    """BrokerRegistration's Features for ``release``; below v4 a feature whose minimum is 0
    is left out, as Kafka's request builder does (KAFKA-17492).

    Raises:
        ConfigError: an unknown release.
    """
    feats = [Feature(name, lo, hi) for name, (lo, hi) in supported_features(release).items()]
    if api_version < 4:
        feats = [f for f in feats if f.min_supported_version != 0]
    return feats
