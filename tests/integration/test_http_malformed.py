"""Malformed HTTP heads on the admin channel's server: a clean 400 (or the guard's 401 first),
never a 500 or a traceback, and the server keeps serving."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from kraft_jbod.controller.extensions.admin import AdminChannel
from kraft_jbod.metrics.http import HttpError, HttpServer, Request, Response

TOKEN = "t" * 32


def _guard(req: Request) -> None:
    if req.headers.get("authorization") != f"Bearer {TOKEN}":
        raise HttpError(401, "missing or wrong admin token")


async def _raw(server: HttpServer | AdminChannel, data: bytes) -> tuple[int, dict[str, str]]:
    assert server.address is not None
    host, port = server.address
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(data)
        await writer.drain()
        if b"\r\n\r\n" in data:
            # Leave the write side open: a short body must be answered, not waited for forever.
            writer.write_eof()
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    body = rest.partition(b"\r\n\r\n")[2]
    return int(status_line.split()[1]), json.loads(body or b"{}")


GOOD = f"Authorization: Bearer {TOKEN}\r\nHost: x\r\n"

# (head after the request line, expected status, a word the error names)
MALFORMED = [
    ("Content-Length: \u00b2\r\n", 400, "Content-Length"),
    ("Content-Length: \u0661\u0662\r\n", 400, "Content-Length"),  # Arabic-Indic digits: int() takes them
    ("Content-Length: -1\r\n", 400, "Content-Length"),
    ("Content-Length: +3\r\n", 400, "Content-Length"),
    ("Content-Length: 3, 3\r\n", 400, "Content-Length"),
    ("Content-Length: \r\n", 400, "Content-Length"),
    ("Content-Length: " + "9" * 5000 + "\r\n", 413, "larger"),  # int() refuses 4,300+ digits
    ("Content-Length: 1\r\nContent-Length: 2\r\n", 400, "twice"),
    ("Transfer-Encoding: chunked\r\n", 400, "Transfer-Encoding"),
    ("NoColon\r\n", 400, "malformed header"),
    ("Bad Name: x\r\n", 400, "malformed header"),
    ("Name : x\r\n", 400, "malformed header"),
    (" folded continuation\r\n", 400, "malformed header"),
    ("X-Thing: a\x00b\r\n", 400, "control character"),
    ("X-\u00e9: a\r\n", 400, "malformed header"),
]


@pytest.mark.parametrize(("extra", "status", "word"), MALFORMED)
async def test_malformed_head_is_a_clean_answer_after_the_token(
    extra: str, status: int, word: str, caplog: pytest.LogCaptureFixture
) -> None:
    served: list[Request] = []

    def handler(req: Request) -> Response:
        served.append(req)
        return Response.of_json({"ok": True})

    caplog.set_level(logging.DEBUG)
    async with HttpServer({("POST", "/x"): handler, ("GET", "/x"): handler}, guard=_guard) as server:
        # Without the token the guard answers first: nothing about the header is revealed.
        code, body = await _raw(server, f"POST /x HTTP/1.1\r\n{extra}\r\n".encode("latin-1", "replace"))
        assert (code, body) == (401, {"error": "missing or wrong admin token"})
        code, body = await _raw(server, f"POST /x HTTP/1.1\r\n{GOOD}{extra}\r\n".encode())
        assert code == status
        assert word in body["error"]
        # The server still serves, and the handler never saw the malformed request.
        code, _ = await _raw(server, f"GET /x HTTP/1.1\r\n{GOOD}\r\n".encode())
        assert code == 200
    assert len(served) == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


async def test_body_shorter_than_announced_is_a_400_and_bodies_still_arrive() -> None:
    seen: list[bytes] = []

    def handler(req: Request) -> Response:
        seen.append(req.body)
        return Response.of_json({"ok": True})

    async with HttpServer({("POST", "/x"): handler}, guard=_guard) as server:
        code, body = await _raw(server, f"POST /x HTTP/1.1\r\n{GOOD}Content-Length: 10\r\n\r\nabc".encode())
        assert code == 400 and "Content-Length says 10" in body["error"]
        code, _ = await _raw(server, f"POST /x HTTP/1.1\r\n{GOOD}Content-Length: 003\r\n\r\nabc".encode())
        assert code == 200
    assert seen == [b"abc"]


@pytest.mark.parametrize("line", ["GET\r\n", "GET  HTTP/1.1\r\n", "GET http://[x/ HTTP/1.1\r\n", "\r\n"])
async def test_malformed_request_line_or_target_is_a_400(line: str) -> None:
    async with HttpServer({("GET", "/x"): lambda r: Response.of_json({})}) as server:
        code, body = await _raw(server, f"{line}{GOOD}\r\n".encode())
        assert code == 400 and "malformed" in body["error"]


async def test_admin_channel_answers_a_superscript_content_length_after_its_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from kraft_jbod.clock import ManualClock
    from kraft_jbod.pytest_plugin import start_cluster, stop_cluster

    caplog.set_level(logging.DEBUG)
    cluster = await start_cluster(tmp_path, clock=ManualClock())
    try:
        server = cluster.ext.admin_channel
        assert server is not None and server.address is not None
        host = "Host: {}:{}\r\n".format(*server.address)
        rule = b'{"match": {"api": "BrokerHeartbeat"}, "action": {"type": "drop"}}'
        bad = "Content-Type: application/json\r\nContent-Length: \u00b2\r\n"
        code, _ = await _raw(server, f"POST /faults HTTP/1.1\r\n{host}{bad}\r\n".encode() + rule)
        assert code == 401
        auth = f"Authorization: {cluster.admin_headers['Authorization']}\r\n"
        code, body = await _raw(server, f"POST /faults HTTP/1.1\r\n{host}{auth}{bad}\r\n".encode() + rule)
        assert code == 400 and "Content-Length" in body["error"]
        assert len(cluster.faults) == 0
    finally:
        await stop_cluster(cluster)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
