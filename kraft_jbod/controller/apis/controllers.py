"""ControllerRegistration (70) and UnregisterController (94): the controllers' own registrations.

Every controller of a quorum registers with the active one (its id, incarnation, controller
listeners and the feature ranges it supports): a RegisterControllerRecord, from
metadata.version 3.7-IV0 (below it, UNSUPPORTED_VERSION). A later registration of the same
id replaces the earlier one. A metadata.version or feature upgrade is refused while a
registered controller does not support the new level (apis/features_api.py), which is how a
controller that left the quorum but stays registered blocks an upgrade; UnregisterController
(KIP-1312, from 4.4-IV2) removes such a registration with an UnregisterControllerRecord.
Answers, as Kafka 4.4's: below 4.4-IV2 UNSUPPORTED_VERSION; the active controller's own id
INVALID_REQUEST (it cannot unregister itself while active); an id not registered
CONTROLLER_ID_NOT_REGISTERED.
"""

from __future__ import annotations

from kraft_jbod.controller import features as fv
from kraft_jbod.controller.context import Call, ControllerContext, Outcome
from kraft_jbod.messages.controller_registration_request import ControllerRegistrationRequest
from kraft_jbod.messages.controller_registration_response import ControllerRegistrationResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.register_controller_record import (
    ControllerEndpoint,
    ControllerFeature,
    RegisterControllerRecord,
)
from kraft_jbod.messages.unregister_controller_record import UnregisterControllerRecord
from kraft_jbod.messages.unregister_controller_request import UnregisterControllerRequest
from kraft_jbod.messages.unregister_controller_response import UnregisterControllerResponse


def handle_controller_registration(ctx: ControllerContext, call: Call, req: ControllerRegistrationRequest) -> Outcome:
    if ctx.metadata_version < fv.MV_3_7_IV0:
        return Outcome(
            ControllerRegistrationResponse(
                error_code=ErrorCode.UNSUPPORTED_VERSION,
                error_message="The current MetadataVersion is too old to support controller registrations.",
            ),
            [],
        )
    record = RegisterControllerRecord(
        controller_id=req.controller_id,
        incarnation_id=req.incarnation_id,
        zk_migration_ready=False,
        end_points=[
            ControllerEndpoint(name=li.name, host=li.host, port=li.port, security_protocol=li.security_protocol)
            for li in req.listeners
        ],
        features=[
            ControllerFeature(
                name=f.name,
                min_supported_version=f.min_supported_version,
                max_supported_version=f.max_supported_version,
            )
            for f in req.features
        ],
    )
    return Outcome(ControllerRegistrationResponse(error_code=ErrorCode.NONE, error_message=None), [(record, 0)])


def handle_unregister_controller(ctx: ControllerContext, call: Call, req: UnregisterControllerRequest) -> Outcome:
    def refuse(code: int, message: str) -> Outcome:
        return Outcome(UnregisterControllerResponse(error_code=code, error_message=message), [])

    if ctx.metadata_version < fv.MV_4_4_IV2:
        return refuse(
            ErrorCode.UNSUPPORTED_VERSION,
            "The current MetadataVersion is too old to support controller unregistration.",
        )
    if req.controller_id == ctx.node_id:
        return refuse(ErrorCode.INVALID_REQUEST, "Controller cannot unregister itself while it is active.")
    if req.controller_id not in ctx.image.controllers:
        return refuse(
            ErrorCode.CONTROLLER_ID_NOT_REGISTERED, f"Controller ID {req.controller_id} is not currently registered."
        )
    record = UnregisterControllerRecord(controller_id=req.controller_id)
    return Outcome(UnregisterControllerResponse(error_code=ErrorCode.NONE, error_message=None), [(record, 0)])
