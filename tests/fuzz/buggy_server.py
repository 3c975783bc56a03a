"""A deliberately buggy Kafka-ish server the fuzzer's own tests must catch.

Bugs, each of a class real servers have had:

* crash: a request whose api key is negative makes the process exit (code 70), as an
  unchecked table index would;
* hang: a request header whose ClientId length is larger than the bytes left makes the
  connection wait forever for bytes that never come (the KAFKA-14063 class);
* leak (only with ``--leak``): every Metadata request keeps 40 MB alive, up to 5 times.

Otherwise it serves ApiVersions 0-3, Metadata 0-12 and BrokerHeartbeat 0-1 with default
response bodies, and closes on anything it cannot decode. Prints ``listening on HOST:PORT``.
"""

from __future__ import annotations

import asyncio
import os
import struct
import sys

from kraft_jbod import codec, messages
from kraft_jbod.errors import DecodeError, EncodeError
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse

SERVED = {18: (0, 3), 3: (0, 12), 63: (0, 1)}
LEAK = "--leak" in sys.argv
_leaked: list[bytes] = []


def answer(payload: bytes) -> bytes | None:
    key, version, corr = struct.unpack_from(">hhi", payload, 0)
    if key < 0:
        os._exit(70)  # the crash bug
    if key == 18 and version > 3:
        body = ApiVersionsResponse(error_code=35, api_keys=[ApiVersion(18, 0, 3)])
        return codec.encode_response(body, 0, corr)
    rng = SERVED.get(key)
    if rng is None or not rng[0] <= version <= rng[1]:
        return None
    try:
        decoded = codec.decode_request(payload)
    except DecodeError:
        return None
    if key == 3 and LEAK and len(_leaked) < 5:
        _leaked.append(b"x" * (40 << 20))
    if key == 18:
        body = ApiVersionsResponse(
            error_code=0, api_keys=[ApiVersion(k, lo, hi) for k, (lo, hi) in sorted(SERVED.items())]
        )
    else:
        body = messages.response_class(key)()
    try:
        return codec.encode_response(body, decoded.api_version, corr)
    except EncodeError:
        return None


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            if size < 8 or size > 1 << 20:
                break
            payload = await reader.readexactly(size)
            if len(payload) >= 10:
                (client_len,) = struct.unpack_from(">h", payload, 8)
                if client_len > len(payload) - 10:
                    await asyncio.Event().wait()  # the hang bug: wait for the rest of the string
            out = answer(payload)
            if out is None:
                break
            writer.write(out)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    host, port = server.sockets[0].getsockname()[:2]
    print(f"listening on {host}:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
