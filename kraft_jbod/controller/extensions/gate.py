"""The gate: every request of one connection passes it before the handler.

Order (Rule 1: SASL, Rule 2: authorization, Rule 3: faults): a peer that has not
authenticated cannot trigger faults, and a fault never bypasses an ACL. The gate also
counts every response for the metrics and remembers the broker id a connection speaks
for (fault rules may match on it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from kraft_jbod import codec
from kraft_jbod.connection import RequestReceived
from kraft_jbod.controller.extensions import faults as faults_mod
from kraft_jbod.controller.extensions.metrics import ControllerMetrics
from kraft_jbod.controller.extensions.security import ConnectionSecurity, Security
from kraft_jbod.controller.seams import Peer, ServerView
from kraft_jbod.faults import FaultInjector, facts_of
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.api_versions_response import ApiVersionsResponse
from kraft_jbod.wire.message import Message


class Host(Protocol):
    """What a gate needs of the extensions that own it (``Extensions`` satisfies it; the
    gate does not import its package, which imports the gate)."""

    security: Security
    metrics: ControllerMetrics
    faults: FaultInjector
    server: ServerView | None

    def later(self, ms: int, fn: Callable[[], None]) -> None: ...


log = logging.getLogger(__name__)

# Registration, heartbeat, controlled shutdown, unregister: requests naming a broker id.
_BROKER_KEYS: Final = frozenset(
    {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.UNREGISTER_BROKER, ApiKey.ASSIGN_REPLICAS_TO_DIRS}
)


class Gate:
    """One connection's view: SASL state, principal, the broker behind it; admits requests."""

    def __init__(self, ext: Host, peer: Peer) -> None:
        self.ext = ext
        self.peer = peer
        self.listener = peer.listener.upper()
        self.security = ConnectionSecurity(ext.security, peer)
        self.broker_id: int | None = None

    @property
    def authenticated(self) -> bool:
        return self.security.authenticated

    @property
    def principal(self) -> str:
        return self.security.principal

    def supported(self, base: Mapping[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
        return self.security.supported(dict(base))

    def api_versions(self, body: ApiVersionsResponse) -> ApiVersionsResponse:
        return self.security.api_versions(body)

    def on_response(self, event: RequestReceived, body: Message) -> None:
        self.ext.metrics.count_response(self.listener, event.api_key, body)

    def admits_unseen(self, api_key: int) -> bool:
        """No SASL, no authorizer, no fault rule: :meth:`admit` would pass any request."""
        return self.security.sasl is None and self.ext.security.authorizer is None and not len(self.ext.faults)

    def answered_unseen(self, api_key: int, broker_id: int, body: Message) -> None:
        """A request the server answered on its short path: what :meth:`admit` and
        :meth:`on_response` would have noted (the broker behind the connection, the metrics)."""
        if api_key in _BROKER_KEYS:
            self.broker_id = broker_id
        self.ext.metrics.count_response(self.listener, api_key, body)

    def admit(self, ev: RequestReceived, proceed: Callable[[], None]) -> bool:
        """True: the caller handles ``ev`` as usual. False: done here (answered, closed,
        delayed, or stalled); ``proceed`` is called later for a delayed request."""
        key = ev.api_key
        served = {} if self.ext.server is None else self.ext.server.supported
        refusal = self.security.check(ev, served)
        if refusal is not None:
            if refusal.authentication:
                if refusal.close:
                    self.ext.metrics.auth_failures.inc(labels={"listener": self.listener})
                    log.warning("%s on %s: %s", self.peer.peer, self.listener, refusal.reason)
            else:
                self.ext.metrics.denied.inc(labels={"api": codec.api_name(key), "principal": self.principal})
                log.warning(
                    "denied %s v%d from %s (%s) on %s",
                    codec.api_name(key),
                    ev.api_version,
                    self.principal,
                    self.peer.peer,
                    self.listener,
                )
            if refusal.response is not None:
                self.peer.respond(ev, refusal.response)
            if refusal.close:
                self.peer.close()
            return False
        broker = getattr(ev.body, "broker_id", None)
        if isinstance(broker, int) and not isinstance(broker, bool) and key in _BROKER_KEYS:
            self.broker_id = broker
        if not len(self.ext.faults):
            # No rule can fire: skip extracting the facts (a walk of every partition named).
            return True
        state = None if self.ext.server is None else self.ext.server.state

        def topic_name(tid: Any) -> str | None:
            t = None if state is None else state.topics.get(tid)
            return None if t is None else str(t.name)

        facts = facts_of(
            key,
            ev.api_version,
            ev.body,
            listener=self.listener,
            connection_broker=self.broker_id,
            topic_name=topic_name,
        )
        rule = self.ext.faults.decide(facts)
        if rule is None:
            return True
        return faults_mod.carry_out(rule.action, ev, self.peer, proceed, self.ext.later)
