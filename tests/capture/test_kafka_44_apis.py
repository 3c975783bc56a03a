"""The capture decoder names Kafka 4.4's APIs, versions and error codes, and the old ones.

A conversation mixing a 0.10-era Produce v2, a 4.4 broker's BrokerHeartbeat v2 (cordoned
log dirs, KIP-1066) answered with an error, and an api key only 4.4 defines
(UnregisterController, 94) decodes with the generated tables: each frame carries its api
name, the release range that defines its version and, on error, Kafka's error name.
"""

from __future__ import annotations

import uuid

from kraft_jbod.capture.output import frame_to_json
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.produce_request import ProduceRequest
from tests.capture.kafka_helpers import Writer, capture, conversation, decode, req, resp

DIR = uuid.UUID("9a1e0b6c-1c1f-4c55-9f0b-2d2f6c1b2a10")


def _build(w: Writer) -> None:
    c = conversation(w)
    c.client_send(req(ProduceRequest(acks=1, timeout_ms=500), 2, 1, "old-client"))
    hb = BrokerHeartbeatRequest(broker_id=1, broker_epoch=7, current_metadata_offset=3, cordoned_log_dirs=[DIR])
    c.client_send(req(hb, 2, 2, "broker-1"))
    c.server_send(resp(BrokerHeartbeatResponse(error_code=ErrorCode.STALE_BROKER_EPOCH), 2, 2))
    newest = ApiKey.UNREGISTER_CONTROLLER
    c.client_send(req(newest.request_class(), newest.versions[0], 3, "admin"))
    c.close()


def test_new_and_old_versions_are_named() -> None:
    frames = [frame_to_json(f) for f in decode(capture(_build))]
    by_corr = {(x["kind"], x["correlationId"]): x for x in frames}
    produce = by_corr[("request", 1)]
    assert (produce["apiName"], produce["apiVersion"]) == ("Produce", 2)
    assert produce["versionDefinedIn"] == "defined in Kafka 0.10.0-3.9; removed in 4.0"
    hb = by_corr[("request", 2)]
    assert (hb["apiName"], hb["apiVersion"]) == ("BrokerHeartbeat", 2)
    assert hb["body"]["cordonedLogDirs"]
    answer = by_corr[("response", 2)]
    assert answer["errorName"] == "STALE_BROKER_EPOCH"
    unreg = by_corr[("request", 3)]
    assert unreg["apiName"] == "UnregisterController" and unreg["apiKey"] == 94
    assert "4.4" in unreg["versionDefinedIn"]
