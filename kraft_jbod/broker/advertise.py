"""Which endpoints the fake broker registers: what real clients are told to connect to.

A registration's Listeners are what the controller hands out in Metadata, so a real
client that bootstrapped anywhere makes its follow-up connections there. A fake broker
that serves clients itself (``kraft.jbod.serve.clients``, the default) advertises its own
bound listeners (``FakeBroker._advertise_own``). The rules below are for one that does not
(``kraft.jbod.serve.clients=false``): its own ``listeners`` are then the wrong thing to
advertise; the controller's client listener (the ``client_listeners`` extension) answers
Metadata, topics and configs for the brokers.

Rules, in order (pure: the server sends :func:`describe_request` and hands the answer,
or why there is none, to :func:`from_describe_configs` and :func:`choose`):

* Rule 1: ``advertised.listeners``, when set, wins.
* Rule 2: otherwise the broker asks its controller, over the Kafka protocol, for the
  static configs of the controller's own node (DescribeConfigs, BROKER resource named by
  the voter's id, keys ``listeners`` and ``controller.listener.names``; Kafka's controller
  lists its static configs there) and advertises every listener whose name is not a
  controller listener name. A listener bound on every interface (empty host, ``0.0.0.0``
  or ``::``) gets the host the broker reaches the controller at. Without
  ``controller.listener.names`` in the answer, the listener on the voter's port is the
  controller's.
* Rule 3: when the controller refuses, does not support DescribeConfigs or lists no
  client listener, the broker advertises its own ``listeners`` and says, once, that
  clients following Metadata to it will find nothing there and how to fix that.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kraft_jbod.broker.config import BrokerConfig, Voter
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.describe_configs_request import DescribeConfigsRequest, DescribeConfigsResource
from kraft_jbod.messages.describe_configs_response import DescribeConfigsResponse
from kraft_jbod.messages.error_codes import ErrorCode
from kraft_jbod.properties import Listener, parse_listeners

BROKER_RESOURCE: Final = 4  # ConfigResource.Type.BROKER
KEYS: Final = ("listeners", "controller.listener.names")
_WILDCARDS: Final = frozenset({"", "0.0.0.0", "::"})


@dataclass(frozen=True, slots=True)
class Learned:
    """What the controller's answer yields: client listeners, or why there are none."""

    listeners: tuple[Listener, ...] = ()
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Advertised:
    """The endpoints to register, where they came from, and a warning if clients
    following them will find nothing there."""

    listeners: tuple[Listener, ...]
    source: str
    warning: str | None = None


def describe_request(controller_id: int) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(
        resources=[
            DescribeConfigsResource(
                resource_type=BROKER_RESOURCE, resource_name=str(controller_id), configuration_keys=list(KEYS)
            )
        ]
    )


def _show(li: Listener) -> str:
    host = f"[{li.host}]" if ":" in li.host else li.host
    return f"{li.name}://{host}:{li.port}"


def show(listeners: tuple[Listener, ...]) -> str:
    """Kafka's ``NAME://HOST:PORT,...`` syntax, for log lines."""
    return ",".join(_show(li) for li in listeners)


def from_describe_configs(resp: DescribeConfigsResponse, voter: Voter) -> Learned:
    """The controller's client listeners from its DescribeConfigs answer (Rule 2)."""
    result = next(
        (r for r in resp.results if r.resource_type == BROKER_RESOURCE and r.resource_name == str(voter.node_id)),
        None,
    )
    if result is None:
        return Learned(problem=f"the controller's DescribeConfigs answer has no BROKER {voter.node_id} result")
    if result.error_code != 0:
        why = f": {result.error_message}" if result.error_message else ""
        return Learned(
            problem=f"the controller refused DescribeConfigs with {ErrorCode.name_of(result.error_code)}"
            f" ({result.error_code}){why}"
        )
    values = {c.name: c.value for c in result.configs}
    text = values.get("listeners")
    if not text:
        return Learned(problem="the controller lists no listeners for its node")
    try:
        listeners = parse_listeners(text, "the controller's listeners")
    except ConfigError as exc:
        return Learned(problem=str(exc))
    names_text = values.get("controller.listener.names")
    if names_text:
        controller_names = {n.strip().upper() for n in names_text.split(",") if n.strip()}
        clients = [li for li in listeners if li.name not in controller_names]
    else:
        clients = [li for li in listeners if li.port != voter.port]
    if not clients:
        return Learned(problem="the controller has no client listener")
    out = tuple(Listener(li.name, voter.host if li.host in _WILDCARDS else li.host, li.port) for li in clients)
    return Learned(listeners=out)


def choose(config: BrokerConfig, learned: Learned | None) -> Advertised:
    """Rules 1-3. ``learned`` is None when the broker did not ask (advertised.listeners set)."""
    if config.advertised_listeners:
        return Advertised(config.advertised_listeners, "advertised.listeners")
    voter = config.voters[0]
    if learned is not None and learned.listeners:
        return Advertised(learned.listeners, f"the client listeners of controller {voter.node_id}, by DescribeConfigs")
    own = tuple(Listener(li.name, li.host or "localhost", li.port) for li in config.listeners)
    why = "the broker did not ask its controller" if learned is None else learned.problem
    warning = (
        f"advertising its own listeners {show(own)}, where nothing serves clients ({why}): clients that "
        f"follow Metadata to broker {config.node_id} will find nothing there; set advertised.listeners, or "
        "give the controller a client listener (client_listeners in its --extensions file)"
    )
    return Advertised(own, "listeners", warning)


__all__ = ["Advertised", "Learned", "choose", "describe_request", "from_describe_configs", "show"]
