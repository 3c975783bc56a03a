"""UnregisterController: Kafka 4.4's answers for a controller the mock has no registration of."""

from __future__ import annotations

import pytest

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.state import ControllerState
from kraft_jbod.errors import ProtocolError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.unregister_controller_request import UnregisterControllerRequest


def _state(level: int) -> ControllerState:
    state = ControllerState(cluster_id="c", node_id=1)
    for offset, (record, version) in enumerate(state.bootstrap_records(level)):
        state.apply(offset, record, version)
    return state


def test_below_4_4_iv2_the_api_is_unsupported() -> None:
    state = _state(fv.MV_4_3_IV0)
    out = state.handle(
        ApiKey.UNREGISTER_CONTROLLER, 0, UnregisterControllerRequest(controller_id=2), now_ms=0, next_offset=9
    )
    assert out.response.error_code == ErrorCode.UNSUPPORTED_VERSION  # type: ignore[attr-defined]
    assert out.records == []


def test_from_4_4_iv2_an_unknown_controller_is_not_registered() -> None:
    state = _state(fv.MV_4_4_IV2)
    out = state.handle(
        ApiKey.UNREGISTER_CONTROLLER, 0, UnregisterControllerRequest(controller_id=2), now_ms=0, next_offset=9
    )
    resp = out.response
    assert resp.error_code == ErrorCode.CONTROLLER_ID_NOT_REGISTERED  # type: ignore[attr-defined]
    assert resp.error_message == "Controller ID 2 is not currently registered."  # type: ignore[attr-defined]
    assert out.records == []


def test_it_is_served_at_version_0_only() -> None:
    state = _state(fv.MV_4_4_IV2)
    assert state.handled_api_versions()[ApiKey.UNREGISTER_CONTROLLER] == (0, 0)
    with pytest.raises(ProtocolError):
        state.handle(
            ApiKey.UNREGISTER_CONTROLLER, 1, UnregisterControllerRequest(controller_id=2), now_ms=0, next_offset=9
        )
