"""A small Kafka-speaking test server built on kraft_jbod.codec: ApiVersions (with the
KIP-511 fallback) and Metadata, enough for real clients to bootstrap. It records every
request and response payload it exchanged, and can feed a FrameTap."""

from __future__ import annotations

import asyncio
import struct
import uuid
from dataclasses import dataclass, field

from kraft_jbod import codec
from kraft_jbod.capture.tap import FrameTap, TapConnection
from kraft_jbod.errors import DecodeError
from kraft_jbod.messages import api_versions_response as avr
from kraft_jbod.messages import metadata_response as mr

SUPPORTED = {18: (0, 3), 3: (0, 12)}
TOPIC_ID = uuid.UUID(int=0x5EED)


def api_versions(error: int = 0) -> avr.ApiVersionsResponse:
    ranges = SUPPORTED if error == 0 else {18: SUPPORTED[18]}
    return avr.ApiVersionsResponse(
        error_code=error,
        api_keys=[avr.ApiVersion(api_key=k, min_version=a, max_version=b) for k, (a, b) in sorted(ranges.items())],
    )


def metadata(port: int) -> mr.MetadataResponse:
    return mr.MetadataResponse(
        brokers=[mr.MetadataResponseBroker(node_id=1, host="127.0.0.1", port=port, rack=None)],
        cluster_id="mini-cluster",
        controller_id=1,
        topics=[
            mr.MetadataResponseTopic(
                name="demo",
                topic_id=TOPIC_ID,
                partitions=[
                    mr.MetadataResponsePartition(
                        partition_index=0, leader_id=1, leader_epoch=0, replica_nodes=[1], isr_nodes=[1]
                    )
                ],
            )
        ],
    )


@dataclass
class MiniServer:
    tap: FrameTap | None = None
    requests: list[bytes] = field(default_factory=list)
    responses: list[bytes] = field(default_factory=list)
    port: int = 0
    _server: asyncio.base_events.Server | None = None

    async def __aenter__(self) -> MiniServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _answer(self, payload: bytes) -> bytes | None:
        key, ver, corr = codec.peek_request(payload)
        if key == 18 and ver > SUPPORTED[18][1]:
            return codec.encode_response(api_versions(35), 0, corr)
        if key not in SUPPORTED:
            return None
        codec.decode_request(payload)  # refuse what does not decode
        if key == 18:
            return codec.encode_response(api_versions(), ver, corr)
        return codec.encode_response(metadata(self.port), ver, corr)

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        tapped: TapConnection | None = None
        if self.tap is not None:
            tapped = self.tap.open(w.get_extra_info("peername")[:2], w.get_extra_info("sockname")[:2])
        try:
            for _ in range(10_000):
                head = await r.readexactly(4)
                size = struct.unpack(">i", head)[0]
                if not 8 <= size <= 1 << 20:
                    break
                payload = await r.readexactly(size)
                if tapped is not None:
                    tapped.received(head + payload)
                self.requests.append(payload)
                try:
                    out = self._answer(payload)
                except DecodeError:
                    out = None
                if out is None:
                    break
                self.responses.append(out[4:])
                if tapped is not None:
                    tapped.sent(out)
                w.write(out)
                await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if tapped is not None:
                tapped.close()
            w.close()
