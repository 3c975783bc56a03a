"""Client listeners: Metadata and DescribeCluster answered from the controller's state.

A client listener runs on the server's own connection class and read loop
(``server.open_listener``); only the :class:`ClientApiSink` differs: it serves
:data:`kraft_jbod.controller.client_api.CLIENT_APIS` and answers inline, with topic
visibility filtered by the ACLs when an authorizer is configured.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from kraft_jbod import codec
from kraft_jbod.connection import RequestReceived
from kraft_jbod.controller import api_versions, client_api, routes
from kraft_jbod.controller.seams import ServerView
from kraft_jbod.errors import ProtocolError
from kraft_jbod.messages.api_versions_request import ApiVersionsRequest
from kraft_jbod.messages.api_versions_response import ApiVersionsResponse

if TYPE_CHECKING:
    from kraft_jbod.controller.service import Connection

log = logging.getLogger(__name__)

API_VERSIONS_RANGE: Final = routes.API_VERSIONS_RANGE


@dataclass(slots=True)
class ClientListener:
    name: str
    host: str = "127.0.0.1"
    port: int = 0
    advertised: str | None = None  # broker endpoint name listed in Metadata (None: first)


class ClientApiSink:
    """The requests of one client listener (see the module docstring)."""

    def __init__(self, server: ServerView, listener: ClientListener, may_describe: Callable[[Any], Any]) -> None:
        self.server = server
        self.listener = listener
        # principal -> a topic-name predicate (None: every topic visible)
        self._may_describe = may_describe

    def served(self) -> Mapping[int, tuple[int, int]]:
        return dict(client_api.CLIENT_APIS)

    def api_versions_response(self, version: int, request: ApiVersionsRequest) -> ApiVersionsResponse:
        # The controller listener's builder: the same KIP-511 checks, no feature ranges.
        return api_versions.build(version, request, client_api.CLIENT_APIS, api_versions_range=API_VERSIONS_RANGE)

    def dispatch(self, conn: Connection, ev: RequestReceived) -> None:
        state = self.server.state
        if state is None:
            conn.close()
            return
        if client_api.is_write(ev.api_key):
            self.server.submit(conn, ev)  # admin writes: the controller's one writer commits their records
            return
        kwargs: dict[str, Any] = {}
        if ev.api_key in (client_api.API_METADATA, client_api.API_DESCRIBE_CLUSTER):
            # The address the client reached is listed when no broker is alive (Metadata Rule 4).
            kwargs = {"listener_name": self.listener.advertised, "self_endpoint": conn.local}
            if ev.api_key == client_api.API_METADATA:
                kwargs["may_describe"] = self._may_describe(conn)
        try:
            body = client_api.answer(state, ev.api_key, ev.api_version, ev.body, **kwargs)
        except ProtocolError as exc:
            log.warning("closing client connection from %s: %s", conn.peer, exc)
            conn.close()
            return
        except Exception:
            log.exception("bug answering %s v%d from %s", codec.api_name(ev.api_key), ev.api_version, conn.peer)
            conn.close()
            return
        conn.respond(ev, body)
