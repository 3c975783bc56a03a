"""UnregisterController (94): removing a controller's registration (KIP-1155 era, 4.4-IV2).

The mock is the quorum's only controller and keeps no controller registrations (it never
receives ControllerRegistration), so the answer is Kafka 4.4's for an id it does not know:
below metadata.version 4.4-IV2 UNSUPPORTED_VERSION, from it CONTROLLER_ID_NOT_REGISTERED.
Nothing is written.
"""

from __future__ import annotations

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.context import Call, ControllerContext, Outcome
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.unregister_controller_request import UnregisterControllerRequest
from kraft_jbod.messages.unregister_controller_response import UnregisterControllerResponse


def handle_unregister_controller(ctx: ControllerContext, call: Call, req: UnregisterControllerRequest) -> Outcome:
    if ctx.metadata_version < fv.MV_4_4_IV2:
        return Outcome(
            UnregisterControllerResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION,
                error_message="The current MetadataVersion is too old to support controller unregistration.",
            ),
            [],
        )
    return Outcome(
        UnregisterControllerResponse(
            error_code=ErrorCode.CONTROLLER_ID_NOT_REGISTERED,
            error_message=f"Controller ID {req.controller_id} is not currently registered.",
        ),
        [],
    )
