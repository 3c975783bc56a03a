"""AllocateProducerIds (67): one block of producer ids per request (rules in controller/producer_ids.py)."""

from __future__ import annotations

from kraft_jbod.controller import producer_ids as pids
from kraft_jbod.controller.context import Call, ControllerContext, Outcome
from kraft_jbod.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraft_jbod.messages.allocate_producer_ids_response import AllocateProducerIdsResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.producer_ids_record import ProducerIdsRecord


def handle_allocate(ctx: ControllerContext, call: Call, req: AllocateProducerIdsRequest) -> Outcome:
    """One block of producer ids and the ProducerIdsRecord that makes it durable."""
    reg = ctx.image.brokers.get(req.broker_id)
    if reg is None or reg.epoch != req.broker_epoch:
        return Outcome(AllocateProducerIdsResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), [])
    block = pids.next_block(ctx.image.next_producer_id)
    if block is None:
        return Outcome(AllocateProducerIdsResponse(error_code=pids.UNKNOWN_SERVER_ERROR), [])
    first, length = block
    rec = ProducerIdsRecord(broker_id=req.broker_id, broker_epoch=req.broker_epoch, next_producer_id=first + length)
    resp = AllocateProducerIdsResponse(error_code=ErrorCode.NONE, producer_id_start=first, producer_id_len=length)
    return Outcome(resp, [(rec, 0)])
