"""Security of the controller's listeners: TLS contexts, SASL per connection, ACL checks.

* TLS: one ``ssl.SSLContext`` per listener that has TLS settings (``security.tls``).
* SASL PLAIN/SCRAM (``security.sasl``): a :class:`ConnectionSecurity` per connection
  holds the authenticator; until it has passed, only authentication requests pass, and
  the connection's frames are held to Kafka's pre-authentication size
  (``sasl.server.max.receive.size``, 512 KiB).
* Authorization: the controller APIs need the cluster operation their route names
  (``Route.authorization``, controller/routes.py), else CLUSTER_AUTHORIZATION_FAILED (31);
  CreateTopics/DeleteTopics need CREATE/DELETE on the cluster or on every topic named,
  else TOPIC_AUTHORIZATION_FAILED (29). A denied request never reaches the state, so an
  unauthorised caller learns nothing from the handler's errors (the cluster id an
  INCONSISTENT_CLUSTER_ID message quotes, which topics exist). An api without a route
  is refused with 31 (closed when its response has no error code): serving a new api
  cannot open a hole.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kraft_jbod.connection import RequestReceived
from kraft_jbod.controller import envelope as env
from kraft_jbod.controller import routes
from kraft_jbod.controller.extensions.faults import error_response
from kraft_jbod.controller.seams import Peer
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraft_jbod.security import sasl as sasl_mod
from kraft_jbod.security.acl import CLUSTER_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, Authorizer
from kraft_jbod.security.credentials import MECHANISMS, CredentialStore
from kraft_jbod.security.tls import TlsSettings, principal_from_peercert, server_context
from kraft_jbod.wire.message import Message

log = logging.getLogger(__name__)

ANONYMOUS: Final = "User:ANONYMOUS"
# Kafka's sasl.server.max.receive.size default: the largest frame before authentication.
PRE_AUTH_MAX_FRAME: Final = 524_288


@dataclass(slots=True)
class ListenerSecurity:
    """Security of one listener: TLS settings (None: plaintext) and SASL mechanisms (empty: none)."""

    tls: TlsSettings | None = None
    sasl: tuple[str, ...] = ()

    @property
    def protocol(self) -> str:
        return ("SASL_" if self.sasl else "") + ("SSL" if self.tls else "PLAINTEXT")


class Security:
    """The security settings of one server: listeners, credentials, ACLs."""

    def __init__(
        self,
        listeners: dict[str, ListenerSecurity] | None,
        credentials: CredentialStore | None,
        authorizer: Authorizer | None,
    ) -> None:
        self.listeners = {k.upper(): v for k, v in (listeners or {}).items()}
        self.credentials = credentials or CredentialStore()
        self.authorizer = authorizer
        for name, sec in self.listeners.items():
            for m in sec.sasl:
                if m not in MECHANISMS:
                    raise ConfigError(f"listener {name}: unknown SASL mechanism {m!r}")
        self._ssl: dict[str, ssl.SSLContext] = {
            name: server_context(sec.tls) for name, sec in self.listeners.items() if sec.tls is not None
        }

    def ssl_context(self, listener_name: str) -> ssl.SSLContext | None:
        return self._ssl.get(listener_name.upper())

    def of(self, listener_name: str) -> ListenerSecurity:
        return self.listeners.get(listener_name.upper(), ListenerSecurity())


@dataclass(slots=True)
class Refusal:
    """A request stopped by security: answer with ``response`` (None: close without one)."""

    response: Message | None
    close: bool
    reason: str
    authentication: bool  # True: SASL refused it; False: the ACLs did


class ConnectionSecurity:
    """One connection's SASL state and principal; checks each request in Rule order."""

    def __init__(self, security: Security, peer: Peer) -> None:
        self.security = security
        self.peer = peer
        sec = security.of(peer.listener)
        self.sasl = sasl_mod.SaslAuthenticator(sec.sasl, security.credentials) if sec.sasl else None
        self._tls_principal: str | None = None

    @property
    def authenticated(self) -> bool:
        return self.sasl is None or self.sasl.principal is not None

    @property
    def principal(self) -> str:
        if self.sasl is not None:
            return self.sasl.principal or ANONYMOUS
        if self._tls_principal is None:
            self._tls_principal = principal_from_peercert(self.peer.peercert())
        return self._tls_principal

    def supported(self, base: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        """The api keys the connection accepts: the server's plus SASL's on a SASL listener."""
        if self.sasl is not None:
            base.update(sasl_mod.SASL_API_VERSIONS)
        return base

    def api_versions(self, body: ApiVersionsResponse) -> ApiVersionsResponse:
        if self.sasl is not None and body.error_code == 0:
            have = {k.api_key for k in body.api_keys}
            extra = [ApiVersion(k, lo, hi) for k, (lo, hi) in sasl_mod.SASL_API_VERSIONS.items() if k not in have]
            body.api_keys = sorted([*body.api_keys, *extra], key=lambda a: a.api_key)
        return body

    def check(self, ev: RequestReceived, served: Mapping[int, tuple[int, int]]) -> Refusal | None:
        """Rule 1 (SASL) then Rule 2 (authorization); None: the request may go on."""
        if self.sasl is not None:
            verdict = self.sasl.on_request(ev.api_key, ev.api_version, ev.body)
            if not verdict.passes:
                return Refusal(verdict.response, verdict.close or verdict.response is None, verdict.reason, True)
        authz = self.security.authorizer
        if authz is not None:
            try:
                denied = self._denied(authz, ev, served)
            except ConfigError:
                # An api without an entry whose response has no error code: refuse by closing.
                return Refusal(None, True, "denied", False)
            if denied is not None:
                return Refusal(denied, False, "denied", False)
        return None

    def _denied(self, authz: Authorizer, ev: RequestReceived, served: Mapping[int, tuple[int, int]]) -> Message | None:
        host = self.peer.peer.rsplit(":", 1)[0]
        denied = self._denied_for(authz, ev.api_key, ev.body, self.principal, host)
        if denied is not None or ev.api_key != ApiKey.ENVELOPE:
            return denied
        # A forwarded request is authorized as its client: the principal and address the
        # broker put in the envelope (Kafka's ControllerApis); a refusal travels inside.
        fwd = env.unwrap(ev.body, served)
        if not isinstance(fwd, env.Forwarded):
            return None  # the state machine answers the envelope's own error
        inner = self._denied_for(authz, fwd.api_key, fwd.body, str(fwd.principal), fwd.client_address)
        return None if inner is None else env.wrap(fwd, inner)

    def _denied_for(self, authz: Authorizer, key: int, body: Any, principal: str, host: str) -> Message | None:
        how = routes.authorization(key)
        if how is None:
            # Fail closed: the error_response raises ConfigError when it cannot answer.
            return error_response(key, body, CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
        if how.kind == "cluster":
            op = how.what
            if authz.authorize(principal, op, host=host):
                return None
            return error_response(
                key, body, CLUSTER_AUTHORIZATION_FAILED, f"Principal {principal} lacks {op} on the cluster"
            )
        if key in (ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS):
            op = how.what
            if authz.authorize(principal, op, host=host):
                return None
            names = (
                [t.name for t in body.topics]
                if key == ApiKey.CREATE_TOPICS
                else (list(body.topic_names) + [t.name for t in body.topics])
            )
            if all(n is not None and authz.authorize(principal, op, "TOPIC", n, host=host) for n in names):
                return None
            return error_response(key, body, TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")
        return None
