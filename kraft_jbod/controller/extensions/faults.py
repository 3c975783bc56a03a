"""Fault injection carried out on the request path (rules: :mod:`kraft_jbod.faults`).

The gate asks the :class:`~kraft_jbod.faults.FaultInjector` for a rule matching a
request's facts and :func:`carry_out` does what the rule says: drop the connection,
stall (never answer), delay, answer with an error, or change a heartbeat in place
(fence, an offline directory). :func:`error_response` builds a response carrying an
error code everywhere Kafka would put it; the ACL checks use it too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kraft_jbod import codec
from kraft_jbod.connection import RequestReceived
from kraft_jbod.controller import routes
from kraft_jbod.controller.seams import Peer
from kraft_jbod.errors import ConfigError
from kraft_jbod.faults import Action
from kraft_jbod.messages.api_keys import ApiKey
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.wire.message import Message

log = logging.getLogger(__name__)


def error_response(api_key: int, body: Any, code: int, message: str | None = None) -> Message:
    """A response to ``body`` that carries ``code`` everywhere Kafka would put it (the
    api's route builds it, see controller/routes.py).

    Raises:
        ConfigError: the api has no error code to carry it.
    """
    return routes.error_response(api_key, body, code, message)


def carry_out(
    action: Action,
    ev: RequestReceived,
    peer: Peer,
    proceed: Callable[[], None],
    later: Callable[[int, Callable[[], None]], None],
) -> bool:
    """Do what ``action`` says to ``ev``. True: the request goes on (maybe changed);
    False: done here (answered, closed, delayed or stalled)."""
    kind = action.type
    if kind == "drop":
        peer.close()
        return False
    if kind == "stall":
        return False  # never answered; the connection reads nothing more
    if kind == "delay":

        def resume() -> None:
            if not peer.closed:
                proceed()

        later(action.ms, resume)
        return False
    if kind in ("error", "refuse_registration", "stale_epoch"):
        code = ErrorCode.STALE_BROKER_EPOCH if kind == "stale_epoch" else action.error_code
        try:
            body = error_response(ev.api_key, ev.body, code)
        except ConfigError as exc:
            log.warning("fault on %s cannot be answered with an error (%s); closing", codec.api_name(ev.api_key), exc)
            peer.close()
            return False
        peer.respond(ev, body)
        return False
    if kind == "fence" and ev.api_key == ApiKey.BROKER_HEARTBEAT:
        ev.body.want_fence = True
        return True
    if kind == "offline_dir" and ev.api_key == ApiKey.BROKER_HEARTBEAT and action.directory is not None:
        if ev.api_version < 1:
            log.warning("offline_dir fault needs BrokerHeartbeat v1+, got v%d; passed unchanged", ev.api_version)
        elif action.directory not in ev.body.offline_log_dirs:
            ev.body.offline_log_dirs.append(action.directory)
        return True
    log.warning("fault action %s does not apply to %s; passed unchanged", kind, codec.api_name(ev.api_key))
    return True
