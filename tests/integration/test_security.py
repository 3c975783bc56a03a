"""TLS listeners, SASL PLAIN/SCRAM (wrong password, wrong mechanism, unauthenticated request),
and CLUSTER_ACTION authorization (CLUSTER_AUTHORIZATION_FAILED, others' data untouched)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from kraft_jbod.clock import ManualClock
from kraft_jbod.controller.extensions import Extensions, ListenerSecurity
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraft_jbod.messages.describe_cluster_request import DescribeClusterRequest
from kraft_jbod.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kraft_jbod.messages.sasl_handshake_request import SaslHandshakeRequest
from kraft_jbod.pytest_plugin import KafkaConnection, KraftCluster, start_cluster, stop_cluster
from kraft_jbod.security import sasl
from kraft_jbod.security.acl import Authorizer
from kraft_jbod.security.credentials import CredentialStore
from kraft_jbod.security.tls import TlsSettings, client_context

USERS = {
    "users": {
        "broker": {"password": "broker-secret"},
        "intruder": {"password": "x"},
        "scrammy": {"password": "s3cret", "mechanisms": ["SCRAM-SHA-512"]},
    }
}
ACLS = {
    "acls": [
        {"principal": "User:broker", "operation": "CLUSTER_ACTION"},
        {"principal": "User:scrammy", "operation": "ALL"},
    ]
}


async def _sasl_cluster(tmp_path: Path) -> KraftCluster:
    ext = Extensions(
        clock=ManualClock(),
        credentials=CredentialStore.from_json(USERS),
        authorizer=Authorizer.from_json(ACLS),
        listeners={"CONTROLLER": ListenerSecurity(sasl=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"))},
    )
    return await start_cluster(tmp_path, clock=ext.clock, extensions=ext)  # type: ignore[arg-type]


async def _login_plain(conn: KafkaConnection, user: str, password: str) -> int:
    hs = await conn.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert hs.error_code == 0 and "PLAIN" in hs.mechanisms
    resp = await conn.call(SaslAuthenticateRequest(auth_bytes=sasl.plain_token(user, password)), 2)
    return int(resp.error_code)


async def test_sasl_plain_scram_and_acls(tmp_path: Path) -> None:
    cluster = await _sasl_cluster(tmp_path)
    addr = cluster.controller_address
    try:
        # ApiVersions advertises the SASL apis on a SASL listener.
        c = await KafkaConnection.open(addr)
        av = await c.call(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3)
        assert {17, 36} <= {k.api_key for k in av.api_keys}
        # Unauthenticated request on a SASL listener: closed, no answer.
        with pytest.raises(ConnectionError):
            await c.call(DescribeClusterRequest(), 0)
        await c.close()

        # Wrong mechanism: UNSUPPORTED_SASL_MECHANISM (33) with the enabled list, then closed.
        c = await KafkaConnection.open(addr)
        hs = await c.call(SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert hs.error_code == 33 and sorted(hs.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert await c.closed_by_peer()
        await c.close()

        # Wrong password: SASL_AUTHENTICATION_FAILED (58), then closed.
        c = await KafkaConnection.open(addr)
        assert await _login_plain(c, "broker", "wrong") == 58
        assert await c.closed_by_peer()
        await c.close()

        # A principal without CLUSTER_ACTION: 31, and the log does not move.
        c = await KafkaConnection.open(addr)
        assert await _login_plain(c, "intruder", "x") == 0
        end = cluster.server.log.end_offset
        hb = await c.call(BrokerHeartbeatRequest(broker_id=1, broker_epoch=1), 1)
        assert hb.error_code == 31
        assert cluster.server.log.end_offset == end
        # Re-authenticating on an authenticated connection: ILLEGAL_SASL_STATE (34).
        again = await c.call(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert again.error_code == 34
        await c.close()

        # SCRAM-SHA-512 with the right password, and a user who has ALL on the cluster.
        c = await KafkaConnection.open(addr)
        assert (await c.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)).error_code == 0
        client = sasl.ScramClient("SCRAM-SHA-512", "scrammy", "s3cret")
        first = await c.call(SaslAuthenticateRequest(auth_bytes=client.first()), 2)
        assert first.error_code == 0
        final = await c.call(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)), 2)
        assert final.error_code == 0 and client.verify(final.auth_bytes)
        dc = await c.call(DescribeClusterRequest(), 0)
        assert dc.error_code == 0 and dc.cluster_id == cluster.server.cluster_id
        await c.close()

        # SCRAM with the wrong password fails at the proof.
        c = await KafkaConnection.open(addr)
        assert (await c.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), 1)).error_code == 0
        bad = sasl.ScramClient("SCRAM-SHA-256", "broker", "nope")
        first = await c.call(SaslAuthenticateRequest(auth_bytes=bad.first()), 2)
        final = await c.call(SaslAuthenticateRequest(auth_bytes=bad.final(first.auth_bytes)), 2)
        assert final.error_code == 58
        await c.close()
        prom = cluster.ext.registry.prometheus()
        assert 'kraft_jbod_authorization_denied_total{api="BrokerHeartbeat",principal="User:intruder"} 1' in prom
    finally:
        await stop_cluster(cluster)


def test_scram_server_rejects_tampering() -> None:
    store = CredentialStore()
    store.add_user("u", "pw")
    server = sasl.ScramServer("SCRAM-SHA-256", store)
    client = sasl.ScramClient("SCRAM-SHA-256", "u", "pw")
    first = server.step(client.first())
    final = client.final(first).replace(b",r=", b",r=x", 1)
    with pytest.raises(sasl.SaslFailed, match="nonce"):
        server.step(final)
    plain = sasl.PlainServer(store)
    with pytest.raises(sasl.SaslFailed, match="authorization id"):
        plain.step(sasl.plain_token("u", "pw", authzid="admin"))


def test_acl_rules() -> None:
    authz = Authorizer.from_json(
        {
            "super_users": ["User:root"],
            "acls": [
                {
                    "principal": "User:*",
                    "operation": "READ",
                    "resource_type": "TOPIC",
                    "resource_name": "pub-",
                    "pattern_type": "PREFIXED",
                },
                {
                    "principal": "User:eve",
                    "operation": "ALL",
                    "resource_type": "TOPIC",
                    "resource_name": "*",
                    "permission": "DENY",
                },
                {"principal": "User:b", "operation": "CLUSTER_ACTION"},
            ],
        }
    )
    assert authz.authorize("User:root", "ALTER")
    assert authz.authorize("User:b", "CLUSTER_ACTION") and not authz.authorize("User:b", "ALTER")
    assert authz.authorize("User:x", "DESCRIBE", "TOPIC", "pub-1")  # READ implies DESCRIBE
    assert not authz.authorize("User:eve", "READ", "TOPIC", "pub-1")  # DENY wins
    assert not authz.authorize("User:x", "READ", "TOPIC", "private")


def _make_certs(tmp: Path) -> tuple[Path, Path, Path]:
    if shutil.which("openssl") is None:
        pytest.fail("the openssl CLI is needed to make test certificates (Debian package openssl)")
    ca_key, ca, key, csr, cert = (tmp / n for n in ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem"))
    run = lambda *a: subprocess.run(["openssl", *a], check=True, capture_output=True)  # noqa: E731
    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        str(ca_key),
        "-out",
        str(ca),
        "-days",
        "2",
        "-subj",
        "/CN=kraft-jbod-test-ca",
    )
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext = tmp / "san.cnf"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        str(csr),
        "-CA",
        str(ca),
        "-CAkey",
        str(ca_key),
        "-CAcreateserial",
        "-out",
        str(cert),
        "-days",
        "2",
        "-extfile",
        str(ext),
    )
    return ca, cert, key


async def test_tls_listener(tmp_path: Path) -> None:
    ca, cert, key = _make_certs(tmp_path)
    ext = Extensions(clock=ManualClock(), listeners={"CONTROLLER": ListenerSecurity(tls=TlsSettings(cert, key))})
    cluster = await start_cluster(tmp_path, clock=ext.clock, extensions=ext)  # type: ignore[arg-type]
    try:
        conn = await KafkaConnection.open(cluster.controller_address, ssl=client_context(ca))
        dc = await conn.call(DescribeClusterRequest(), 0)
        assert dc.cluster_id == cluster.server.cluster_id
        await conn.close()
        # A plaintext client on the TLS listener gets no Kafka answer.
        plain = await KafkaConnection.open(cluster.controller_address)
        with pytest.raises((ConnectionError, TimeoutError)):
            await plain.call(DescribeClusterRequest(), 0, timeout=3)
        await plain.close()
    finally:
        await stop_cluster(cluster)


async def _capture_sasl(tmp_path: Path, secrets: bool) -> bytes:
    from kraft_jbod.capture.tap import FrameTap
    from kraft_jbod.controller.server import ControllerServer
    from kraft_jbod.pytest_plugin import CLUSTER_ID, controller_config

    ext = Extensions(
        credentials=CredentialStore.from_json(USERS),
        listeners={"CONTROLLER": ListenerSecurity(sasl=("PLAIN", "SCRAM-SHA-512"))},
    )
    tmp_path.mkdir()
    pcap = tmp_path / "cap.pcapng"
    tap = FrameTap(pcapng=pcap, secrets=secrets)
    await tap.start()
    server = ControllerServer(controller_config(tmp_path), cluster_id=CLUSTER_ID, fsync=False, extensions=ext, tap=tap)
    await server.start()
    try:
        c = await KafkaConnection.open(server.addresses[0])
        assert await _login_plain(c, "broker", "broker-secret") == 0
        await c.close()
        c = await KafkaConnection.open(server.addresses[0])
        assert (await c.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), 1)).error_code == 0
        client = sasl.ScramClient("SCRAM-SHA-512", "scrammy", "s3cret")
        first = await c.call(SaslAuthenticateRequest(auth_bytes=client.first()), 2)
        final = await c.call(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)), 2)
        assert final.error_code == 0
        await c.close()
    finally:
        await server.close()
        await tap.aclose()
    assert pcap.stat().st_mode & 0o777 == 0o600
    return pcap.read_bytes()


async def test_captures_star_out_sasl_secrets_unless_asked(tmp_path: Path) -> None:
    from kraft_jbod.capture.kafka import decode_capture

    redacted = await _capture_sasl(tmp_path / "a", secrets=False)
    assert b"broker-secret" not in redacted
    assert b"\0broker\0" not in redacted  # the whole PLAIN token, user included, is starred
    assert b",s=" not in redacted and b",p=" not in redacted  # SCRAM salt (server-first) and proof
    # The frames still decode: every request and response of the conversation is there.
    with open(tmp_path / "a" / "cap.pcapng", "rb") as f:
        frames = list(decode_capture(f))
    auth = [f for f in frames if f.api_key == 36]
    assert len(auth) == 6 and all(f.body is not None for f in auth), auth
    kept = await _capture_sasl(tmp_path / "b", secrets=True)
    assert b"broker-secret" in kept and b",s=" in kept and b",p=" in kept


def test_redactor_follows_frames_split_anywhere() -> None:
    from kraft_jbod import codec
    from kraft_jbod.capture.tap import _SaslRedactor

    stream = (
        codec.encode_request(ApiVersionsRequest(), 0, 1, "c")
        + codec.encode_request(SaslHandshakeRequest(mechanism="PLAIN"), 1, 2, "c")
        + codec.encode_request(SaslAuthenticateRequest(auth_bytes=sasl.plain_token("u", "hunter2hunter2")), 2, 3, "c")
        + codec.encode_request(ApiVersionsRequest(), 0, 4, "c")
    )
    for step in (1, 3, 7, 64, len(stream)):
        r = _SaslRedactor()
        out = b"".join(r.client(stream[i : i + step]) for i in range(0, len(stream), step))
        assert len(out) == len(stream) and b"hunter2" not in out
        assert out.replace(b"*", b"") != stream
        # Everything but the secret is byte-identical.
        assert out[: stream.index(b"hunter2") - 3] == stream[: stream.index(b"hunter2") - 3]


async def test_admin_channel_is_locked(tmp_path: Path) -> None:
    import asyncio
    import json
    import urllib.error
    import urllib.request

    cluster = await start_cluster(tmp_path, clock=ManualClock())
    try:
        base = cluster.admin_url
        token_file = cluster.server.config.metadata_log_dir / "admin.token"
        assert token_file.stat().st_mode & 0o777 == 0o600
        assert token_file.read_text().strip() == cluster.ext.admin_token_value

        def call(method: str, path: str, body: bytes | None, headers: dict[str, str]) -> int:
            req = urllib.request.Request(base + path, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    return int(resp.status)
            except urllib.error.HTTPError as exc:
                return int(exc.code)

        rule = json.dumps({"match": {"api": "BrokerHeartbeat"}, "action": {"type": "drop"}}).encode()
        good = cluster.admin_headers
        # The cross-site-style attack: no token, text/plain body.
        assert await asyncio.to_thread(call, "POST", "/faults", rule, {"Content-Type": "text/plain"}) == 401
        assert await asyncio.to_thread(call, "GET", "/status", None, {}) == 401
        wrong = dict(good, Authorization="Bearer " + "x" * 43)
        assert await asyncio.to_thread(call, "GET", "/status", None, wrong) == 401
        # The right token but not JSON: 415.
        plain = dict(good, **{"Content-Type": "text/plain"})
        assert await asyncio.to_thread(call, "POST", "/faults", rule, plain) == 415
        # A Host that is not this channel (DNS rebinding): 421.
        rebound = dict(good, Host="evil.example:80")
        assert await asyncio.to_thread(call, "GET", "/status", None, rebound) == 421
        assert len(cluster.faults) == 0  # nothing above changed a rule
        assert await asyncio.to_thread(call, "POST", "/faults", rule, good) == 201
        assert len(cluster.faults) == 1
        # Deeply nested JSON is a clean 400, not a crash.
        deep = b"[" * 100_000 + b"]" * 100_000
        assert await asyncio.to_thread(call, "PUT", "/faults", deep, good) == 400
        assert len(cluster.faults) == 1
    finally:
        await stop_cluster(cluster)


def test_admin_channel_refuses_a_public_bind_unless_allowed() -> None:
    from kraft_jbod.errors import ConfigError

    with pytest.raises(ConfigError, match="not a loopback address"):
        Extensions.from_json({"admin": "0.0.0.0:0"})
    with pytest.raises(ConfigError, match="at least 16"):
        Extensions.from_json({"admin": "127.0.0.1:0", "admin_token": "short"})
    ext = Extensions.from_json({"admin": "0.0.0.0:0", "admin_allow_remote": True})
    assert ext.admin == ("0.0.0.0", 0)
