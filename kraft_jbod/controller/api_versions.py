"""The ApiVersions answer, built in one place for the controller and the client listeners.

A listener hands in what it serves; this module adds ApiVersions itself, applies the checks
Kafka makes of the request, and (on the controller listener) the feature ranges:

Rule 1 (KIP-511, v3+): ClientSoftwareName and ClientSoftwareVersion must be non-empty
and made of letters, digits, '-' and '.', starting and ending with a letter or digit,
else INVALID_REQUEST with nothing else.
Rule 2 (KIP-1242, v5+): ClusterId and NodeId come together or not at all
(INVALID_REQUEST); a client naming another cluster or node gets REBOOTSTRAP_REQUIRED.
Rule 3 (v3+): SupportedFeatures when the listener gives them; FinalizedFeatures (levels
above 0 only) and their epoch when a metadata.version is finalized.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kraft_jbod.messages.error_codes import ErrorCode

_SOFTWARE_RE: Final = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def api_keys(served: Mapping[int, tuple[int, int]], api_versions_range: tuple[int, int]) -> list[ApiVersion]:
    """ApiVersions first, then every served key in key order."""
    keys = [ApiVersion(ApiKey.API_VERSIONS, *api_versions_range)]
    keys += [ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(served.items()) if k != ApiKey.API_VERSIONS]
    return keys


def refusal(version: int, request: ApiVersionsRequest, *, cluster_id: str | None, node_id: int | None) -> int:
    """The error code Rules 1-2 answer with, or 0. ``cluster_id`` None skips Rule 2's match."""
    if version >= 3 and not (
        _SOFTWARE_RE.fullmatch(request.client_software_name or "")
        and _SOFTWARE_RE.fullmatch(request.client_software_version or "")
    ):
        return ErrorCode.INVALID_REQUEST
    if version >= 5:
        cid, nid = request.cluster_id, request.node_id
        if (cid is None) != (nid == -1):
            return ErrorCode.INVALID_REQUEST
        if cluster_id is not None and cid is not None and (cid != cluster_id or nid != node_id):
            return ErrorCode.REBOOTSTRAP_REQUIRED
    return ErrorCode.NONE


def build(
    version: int,
    request: ApiVersionsRequest,
    served: Mapping[int, tuple[int, int]],
    *,
    api_versions_range: tuple[int, int],
    cluster_id: str | None = None,
    node_id: int | None = None,
    supported_features: Mapping[str, tuple[int, int]] | None = None,
    finalized_features: Mapping[str, int] | None = None,
    finalized_epoch: int = -1,
) -> ApiVersionsResponse:
    """The whole answer (Rules 1-3)."""
    code = refusal(version, request, cluster_id=cluster_id, node_id=node_id)
    if code:
        return ApiVersionsResponse(error_code=code)
    resp = ApiVersionsResponse(error_code=0, api_keys=api_keys(served, api_versions_range))
    if version >= 3 and supported_features is not None:
        resp.supported_features = [
            SupportedFeatureKey(name, lo, hi) for name, (lo, hi) in sorted(supported_features.items())
        ]
    if version >= 3 and finalized_features is not None:
        resp.finalized_features = [
            FinalizedFeatureKey(name, lvl, lvl) for name, lvl in sorted(finalized_features.items()) if lvl > 0
        ]
        resp.finalized_features_epoch = finalized_epoch
    return resp
