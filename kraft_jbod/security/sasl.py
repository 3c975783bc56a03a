"""SASL on a Kafka listener as pure state machines: PLAIN and SCRAM-SHA-256/512.

Two layers, neither touches a socket:

* Mechanism servers (:class:`PlainServer`, :class:`ScramServer`) turn client tokens into
  server tokens and end in success (``principal`` set) or :class:`SaslFailed`.
* :class:`SaslAuthenticator` is the per-connection protocol, Kafka's
  ``SaslServerAuthenticator`` as a table ``(state, input) -> (effect, next state)``;
  a pair not in the table closes the connection.

Rules (Apache Kafka's behaviour):

* Rule 1: before authentication only ApiVersions, SaslHandshake and then SaslAuthenticate
  are allowed; any other request closes the connection without an answer.
* Rule 2: a handshake naming a mechanism not enabled on the listener is answered with
  UNSUPPORTED_SASL_MECHANISM (33) and the enabled list, then the connection is closed.
* Rule 3: a failed authentication is answered with SASL_AUTHENTICATION_FAILED (58) and a
  message, then the connection is closed.
* Rule 4: after success, SaslHandshake and SaslAuthenticate are answered with
  ILLEGAL_SASL_STATE (34); every other request passes, under ``principal``.
* Only SaslHandshake v1 is served: v0 means raw, unframed tokens afterwards, which modern
  clients (librdkafka, kafka-python, the Java client) never use with a v1-capable server.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Any, Final

from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kraft_jbod.messages.sasl_authenticate_response import SaslAuthenticateResponse
from kraft_jbod.messages.sasl_handshake_request import SaslHandshakeRequest
from kraft_jbod.messages.sasl_handshake_response import SaslHandshakeResponse
from kraft_jbod.security.credentials import PLAIN, SCRAM_HASHES, CredentialStore
from kraft_jbod.wire.message import Message

SASL_HANDSHAKE: Final = ApiKey.SASL_HANDSHAKE
SASL_AUTHENTICATE: Final = ApiKey.SASL_AUTHENTICATE
UNSUPPORTED_SASL_MECHANISM: Final = ErrorCode.UNSUPPORTED_SASL_MECHANISM
ILLEGAL_SASL_STATE: Final = ErrorCode.ILLEGAL_SASL_STATE
SASL_AUTHENTICATION_FAILED: Final = ErrorCode.SASL_AUTHENTICATION_FAILED
# What a SASL listener adds to the api keys it serves.
SASL_API_VERSIONS: Final[dict[int, tuple[int, int]]] = {SASL_HANDSHAKE: (1, 1), SASL_AUTHENTICATE: (0, 2)}
_MAX_TOKEN: Final = 64 * 1024
ANONYMOUS: Final = "User:ANONYMOUS"


class SaslFailed(Exception):
    """Authentication failed; ``str()`` is the message sent to the client."""


# --------------------------------------------------------------------------- mechanisms


class PlainServer:
    """RFC 4616: one token ``authzid NUL authcid NUL passwd``."""

    mechanism = PLAIN

    def __init__(self, store: CredentialStore) -> None:
        self._store = store
        self.principal: str | None = None
        self.complete = False

    def step(self, token: bytes) -> bytes:
        """Raises: SaslFailed."""
        if self.complete:
            raise SaslFailed("Authentication failed: PLAIN takes a single token")
        self.complete = True
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise SaslFailed("Authentication failed: username not specified")
        if not password:
            raise SaslFailed("Authentication failed: password not specified")
        if authzid and authzid != user:
            raise SaslFailed(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        if not self._store.check_plain(user, password):
            raise SaslFailed("Authentication failed: Invalid username or password")
        self.principal = f"User:{user}"
        return b""


def _scram_unescape(name: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ',' and ``=3D`` is '='; any other '=' is malformed."""
    out = []
    i = 0
    while i < len(name):
        if name[i] == "=":
            code = name[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise SaslFailed("Invalid SCRAM username encoding")
            i += 3
        else:
            out.append(name[i])
            i += 1
    return "".join(out)


def _attrs(message: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslFailed(f"Invalid SCRAM message attribute {part[:16]!r}")
        out.append((part[0], part[2:]))
    return out


class ScramServer:
    """RFC 5802 / 7677 server side, as Kafka runs it (no channel binding).

    States: ``"first"`` (waiting for client-first), ``"final"`` (server-first sent),
    ``"done"``. Extensions in client-first (``tokenauth`` and others) are refused.
    """

    def __init__(self, mechanism: str, store: CredentialStore, *, nonce: str | None = None) -> None:
        if mechanism not in SCRAM_HASHES:
            raise ValueError(f"{mechanism} is not a SCRAM mechanism")
        self.mechanism = mechanism
        self._algo = SCRAM_HASHES[mechanism]
        self._store = store
        self._server_nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self.state = "first"
        self.principal: str | None = None
        self.complete = False
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._user = ""

    def step(self, token: bytes) -> bytes:
        """Raises: SaslFailed."""
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SCRAM message: not UTF-8") from None
        if self.state == "first":
            return self._client_first(text).encode()
        if self.state == "final":
            return self._client_final(text).encode()
        raise SaslFailed("Unexpected SCRAM message after completion")

    def _client_first(self, text: str) -> str:
        # gs2-header: "n" or "y" (no channel binding), optional "a=authzid", then the bare message.
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            raise SaslFailed("Invalid SCRAM client-first message")
        authzid = parts[1]
        if authzid and not authzid.startswith("a="):
            raise SaslFailed("Invalid SCRAM authorization id")
        bare = parts[2]
        attrs = _attrs(bare)
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r":
            raise SaslFailed("Invalid SCRAM client-first message")
        if len(attrs) > 2:
            raise SaslFailed("Authentication failed: SCRAM extensions are not supported")
        user = _scram_unescape(attrs[0][1])
        if authzid and _scram_unescape(authzid[2:]) != user:
            raise SaslFailed("Authentication failed: authorization id differs from username")
        client_nonce = attrs[1][1]
        if not client_nonce:
            raise SaslFailed("Invalid SCRAM client nonce")
        cred = self._store.scram(user, self.mechanism)
        self.state = "final"
        self._user = user
        self._client_first_bare = bare
        self._nonce = client_nonce + self._server_nonce
        if cred is None:
            # Answer as if the user existed (a fake salt), and fail at the proof, so the
            # exchange does not reveal which user names exist.
            salt, iterations = hashlib.sha256(user.encode()).digest()[:16], 4096
        else:
            salt, iterations = cred.salt, cred.iterations
        self._server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        return self._server_first

    def _client_final(self, text: str) -> str:
        self.state = "done"
        self.complete = True
        attrs = _attrs(text)
        keys = [k for k, _ in attrs]
        if len(attrs) < 3 or keys[0] != "c" or keys[1] != "r" or keys[-1] != "p":
            raise SaslFailed("Invalid SCRAM client-final message")
        if attrs[1][1] != self._nonce:
            raise SaslFailed("Invalid SCRAM nonce")
        try:
            channel = base64.b64decode(attrs[0][1], validate=True).decode("ascii")
            proof = base64.b64decode(attrs[-1][1], validate=True)
        except (binascii.Error, UnicodeDecodeError):
            raise SaslFailed("Invalid SCRAM client-final message encoding") from None
        if not channel.startswith(("n,", "y,")):
            raise SaslFailed("Invalid SCRAM channel binding")
        cred = self._store.scram(self._user, self.mechanism)
        without_proof = text[: text.rindex(",p=")]
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        failure = SaslFailed(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            + self.mechanism
        )
        if cred is None:
            raise failure
        signature = hmac.new(cred.stored_key, auth_message, self._algo).digest()
        if len(proof) != len(signature):
            raise failure
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._algo, client_key).digest(), cred.stored_key):
            raise failure
        self.principal = f"User:{self._user}"
        server_signature = hmac.new(cred.server_key, auth_message, self._algo).digest()
        return f"v={base64.b64encode(server_signature).decode()}"


# --------------------------------------------------------------------------- the protocol


class SaslState(enum.Enum):
    HANDSHAKE = "waiting for SaslHandshake"
    AUTHENTICATE = "waiting for SaslAuthenticate"
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class SaslInput(enum.Enum):
    API_VERSIONS = "ApiVersions"
    HANDSHAKE = "SaslHandshake"
    AUTHENTICATE = "SaslAuthenticate"
    OTHER = "another request"


class SaslEffect(enum.Enum):
    PASS = "pass the request on"
    HANDSHAKE = "choose the mechanism"
    STEP = "run one mechanism step"
    ILLEGAL_STATE = "answer ILLEGAL_SASL_STATE"
    CLOSE = "close without answering"


S, In, E = SaslState, SaslInput, SaslEffect
TRANSITIONS: Final[dict[tuple[SaslState, SaslInput], tuple[SaslEffect, SaslState]]] = {
    (S.HANDSHAKE, In.API_VERSIONS): (E.PASS, S.HANDSHAKE),
    (S.HANDSHAKE, In.HANDSHAKE): (E.HANDSHAKE, S.AUTHENTICATE),
    (S.AUTHENTICATE, In.AUTHENTICATE): (E.STEP, S.AUTHENTICATE),
    (S.AUTHENTICATED, In.API_VERSIONS): (E.PASS, S.AUTHENTICATED),
    (S.AUTHENTICATED, In.OTHER): (E.PASS, S.AUTHENTICATED),
    (S.AUTHENTICATED, In.HANDSHAKE): (E.ILLEGAL_STATE, S.AUTHENTICATED),
    (S.AUTHENTICATED, In.AUTHENTICATE): (E.ILLEGAL_STATE, S.AUTHENTICATED),
}
del S, In, E


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the server does with one request.

    ``response`` set: answer with it (then close if ``close``); ``response`` None and
    ``close``: close without answering; neither: handle the request normally.
    """

    response: Message | None = None
    close: bool = False
    reason: str = ""

    @property
    def passes(self) -> bool:
        return self.response is None and not self.close


PASS: Final = Verdict()


def _input_of(api_key: int) -> SaslInput:
    if api_key == ApiKey.API_VERSIONS:
        return SaslInput.API_VERSIONS
    if api_key == SASL_HANDSHAKE:
        return SaslInput.HANDSHAKE
    if api_key == SASL_AUTHENTICATE:
        return SaslInput.AUTHENTICATE
    return SaslInput.OTHER


class SaslAuthenticator:
    """One connection's SASL state. Feed every request to :meth:`on_request`."""

    def __init__(self, mechanisms: tuple[str, ...], store: CredentialStore) -> None:
        self.mechanisms = tuple(mechanisms)
        self._store = store
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.failure: str | None = None
        self._server: PlainServer | ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.AUTHENTICATED

    def on_request(self, api_key: int, api_version: int, body: Any) -> Verdict:
        """The verdict for one request (Rules 1-4 of the module docstring)."""
        symbol = _input_of(api_key)
        entry = TRANSITIONS.get((self.state, symbol))
        if entry is None:
            self.failure = f"unexpected {symbol.value} request while {self.state.value}"
            self.state = SaslState.FAILED
            return Verdict(close=True, reason=self.failure)
        effect, next_state = entry
        if effect is SaslEffect.PASS:
            self.state = next_state
            return PASS
        if effect is SaslEffect.ILLEGAL_STATE:
            if api_key == SASL_HANDSHAKE:
                return Verdict(SaslHandshakeResponse(error_code=ILLEGAL_SASL_STATE, mechanisms=list(self.mechanisms)))
            return Verdict(
                SaslAuthenticateResponse(
                    error_code=ILLEGAL_SASL_STATE,
                    error_message="SaslAuthenticate request received after successful authentication",
                )
            )
        if effect is SaslEffect.HANDSHAKE:
            assert isinstance(body, SaslHandshakeRequest)
            return self._handshake(body, next_state)
        assert isinstance(body, SaslAuthenticateRequest)
        return self._step(body)

    def _handshake(self, body: SaslHandshakeRequest, next_state: SaslState) -> Verdict:
        mech = body.mechanism
        if mech not in self.mechanisms:
            self.state = SaslState.FAILED
            self.failure = f"unsupported SASL mechanism {mech!r}"
            resp = SaslHandshakeResponse(error_code=UNSUPPORTED_SASL_MECHANISM, mechanisms=list(self.mechanisms))
            return Verdict(resp, close=True, reason=self.failure)
        self.mechanism = mech
        self._server = PlainServer(self._store) if mech == PLAIN else ScramServer(mech, self._store)
        self.state = next_state
        return Verdict(SaslHandshakeResponse(error_code=0, mechanisms=list(self.mechanisms)))

    def _step(self, body: SaslAuthenticateRequest) -> Verdict:
        server = self._server
        assert server is not None
        token = bytes(body.auth_bytes)
        try:
            if len(token) > _MAX_TOKEN:
                raise SaslFailed("Authentication failed: token too large")
            challenge = server.step(token)
        except SaslFailed as exc:
            self.state = SaslState.FAILED
            self.failure = str(exc)
            resp = SaslAuthenticateResponse(error_code=SASL_AUTHENTICATION_FAILED, error_message=str(exc))
            return Verdict(resp, close=True, reason=str(exc))
        if server.complete:
            self.state = SaslState.AUTHENTICATED
            self.principal = server.principal
        return Verdict(SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=challenge))


# --------------------------------------------------------------------------- client side


class ScramClient:
    """The client half of SCRAM, for tests and the fake broker (RFC 5802)."""

    def __init__(self, mechanism: str, user: str, password: str, *, nonce: str | None = None) -> None:
        self._algo = SCRAM_HASHES[mechanism]
        self.mechanism = mechanism
        self._user = user.replace("=", "=3D").replace(",", "=2C")
        self._password = password
        self._nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self._first_bare = f"n={self._user},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """Raises: SaslFailed: the server's nonce or parameters are wrong."""
        text = server_first.decode()
        attrs = dict(_attrs(text))
        nonce = attrs.get("r", "")
        if not nonce.startswith(self._nonce):
            raise SaslFailed("server nonce does not extend ours")
        salt = base64.b64decode(attrs["s"])
        iterations = int(attrs["i"])
        salted = hashlib.pbkdf2_hmac(self._algo, self._password.encode(), salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._algo).digest()
        stored_key = hashlib.new(self._algo, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self._algo).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self._algo).digest()
        self._server_signature = hmac.new(server_key, auth_message, self._algo).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        text = server_final.decode()
        return text == f"v={base64.b64encode(self._server_signature).decode()}"


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\x00{user}\x00{password}".encode()
