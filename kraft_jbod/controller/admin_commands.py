"""CLI of a running controller: ``kraft-jbod status``, ``faults`` and ``topics``.

* ``status`` and ``faults`` talk to the controller's admin endpoint
  (``Extensions(admin=...)``) over plain HTTP with urllib;
* ``topics create|delete`` send CreateTopics / DeleteTopics to a controller listener,
  as Kafka's brokers forward them (the controller's own API; no admin endpoint needed);
  ``topics list`` reads the admin endpoint's cluster view.

Every admin-endpoint call carries the channel's token (``Authorization: Bearer``), read
from ``--token-file`` (the controller writes ``<metadata.log.dir>/admin.token``) or from
the ``KRAFT_JBOD_ADMIN_TOKEN`` environment variable, never from the command line (``ps``).

Exit codes follow the CLI's: 0 ok, 1 the controller refused (each refusal printed with
Kafka's error name), 2 unreachable or bad usage. Output goes through
:mod:`kraft_jbod.console` only.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from kraft_jbod import console
from kraft_jbod.errors import ConfigError, KraftJbodError

__all__ = ["cmd_faults", "cmd_status", "cmd_topics", "controller_call", "register"]

_TOKEN_HELP = "file holding the admin token (default: $KRAFT_JBOD_ADMIN_TOKEN)"
TOKEN_ENV = "KRAFT_JBOD_ADMIN_TOKEN"


class _NoToken(Exception):
    pass


def _token(args: argparse.Namespace) -> str:
    if args.token_file is not None:
        try:
            text = str(args.token_file.read_text(encoding="ascii")).strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise _NoToken(f"cannot read the admin token from {args.token_file}: {exc}") from None
        if not text:
            raise _NoToken(f"{args.token_file} is empty")
        return text
    env = os.environ.get(TOKEN_ENV, "").strip()
    if env:
        return env
    raise _NoToken(f"the admin channel needs its token: --token-file FILE or ${TOKEN_ENV}")


def register(sub: Any) -> None:
    s = sub.add_parser("status", help="print the cluster view (brokers, directories, partitions) of a controller")
    s.add_argument("--admin", required=True, metavar="HOST:PORT", help="the controller's admin endpoint")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.add_argument("--token-file", type=Path, help=_TOKEN_HELP)
    s.add_argument(
        "--broker-ctl",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a fake broker's control endpoint (repeatable): show its directory paths beside their ids",
    )
    s.set_defaults(func=cmd_status)
    f = sub.add_parser("faults", help="list, add or remove fault rules on a running controller")
    f.add_argument("--admin", required=True, metavar="HOST:PORT", help="the controller's admin endpoint")
    f.add_argument("--token-file", type=Path, help=_TOKEN_HELP)
    f.add_argument("action", choices=["list", "add", "remove", "clear", "history"])
    f.add_argument("arg", nargs="?", help="add: a rule as JSON; remove: a rule id")
    f.set_defaults(func=cmd_faults)

    t = sub.add_parser("topics", help="create, delete or list topics on a running controller")
    t_sub = t.add_subparsers(dest="topics_command", required=True)
    c = t_sub.add_parser(
        "create",
        help="CreateTopics through a controller listener",
        description="Placement follows the controller's rules (rack-aware round robin over unfenced brokers); "
        "with no broker registered the controller answers INVALID_REPLICATION_FACTOR, as Kafka does.",
    )
    c.add_argument("names", nargs="+", metavar="TOPIC")
    c.add_argument("--controller", required=True, metavar="HOST:PORT", help="a controller listener")
    c.add_argument("--partitions", type=int, default=-1, help="default: the controller's num.partitions")
    c.add_argument(
        "--replication-factor", type=int, default=-1, help="default: the controller's default.replication.factor"
    )
    c.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config (repeatable)")
    c.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    c.set_defaults(func=cmd_topics)
    d = t_sub.add_parser("delete", help="DeleteTopics through a controller listener")
    d.add_argument("names", nargs="+", metavar="TOPIC")
    d.add_argument("--controller", required=True, metavar="HOST:PORT", help="a controller listener")
    d.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    d.set_defaults(func=cmd_topics)
    ls = t_sub.add_parser("list", help="topics and partition counts from the admin endpoint")
    ls.add_argument("--admin", required=True, metavar="HOST:PORT", help="the controller's admin endpoint")
    ls.add_argument("--json", action="store_true", help="one JSON line per topic")
    ls.add_argument("--token-file", type=Path, help=_TOKEN_HELP)
    ls.set_defaults(func=cmd_topics)


# --------------------------------------------------------------------------- admin endpoint (HTTP)


def _call(admin: str, token: str, method: str, path: str, body: object | None = None) -> tuple[int, Any]:
    """(status, JSON body). Raises OSError/ValueError: unreachable, or not this server's HTTP."""
    # Here, not at the top: http.client pulls in ssl, and every `kraft-jbod` run imports
    # this module to register its commands.
    import http.client
    import urllib.error
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(f"http://{admin}{path}", data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    except http.client.HTTPException as exc:
        raise ValueError(f"not an HTTP server: {exc!r}") from None
    try:
        return status, json.loads(raw or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
        raise ValueError(f"HTTP {status} with a body that is not the admin channel's JSON") from None


def _unreachable(admin: str, exc: Exception) -> int:
    reason = getattr(exc, "reason", None) or exc
    return console.fail(f"cannot reach the admin endpoint {admin}: {reason}")


def cmd_status(args: argparse.Namespace) -> int:
    from kraft_jbod.controller.client_api import render_text

    try:
        status, view = _call(args.admin, _token(args), "GET", "/status")
    except _NoToken as exc:
        return console.fail(str(exc))
    except (OSError, ValueError) as exc:
        return _unreachable(args.admin, exc)
    if status != 200:
        console.error(str(view))
        return console.EXIT_FAILED
    paths: dict[int, dict[str, str]] | None = None
    if args.broker_ctl:
        paths = {}
        for address in args.broker_ctl:
            try:
                broker_id, dirs = _broker_dirs(address)
            except (OSError, ValueError) as exc:
                return console.fail(f"status: cannot read broker-ctl {address}: {exc}")
            paths[broker_id] = dirs
            for b in view["brokers"]:
                if b["id"] == broker_id:
                    for d in b["directories"]:
                        d["path"] = dirs.get(d["id"])
    console.write(json.dumps(view, indent=2) + "\n" if args.json else render_text(view, paths))
    return console.EXIT_OK


def _broker_dirs(address: str) -> tuple[int, dict[str, str]]:
    """(broker id, directory id -> path) from a fake broker's control endpoint ``status``.

    Raises: OSError (unreachable), ValueError (not a broker's control endpoint).
    """
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("expected HOST:PORT")
    data = b""
    with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=10) as conn:
        conn.sendall(b"status\n")
        while not data.endswith(b"\n") and len(data) < (1 << 20):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    try:
        answer = json.loads(data)
        result = answer["result"]
        return int(result["broker_id"]), {str(v["id"]): str(path) for path, v in result["dirs"].items()}
    except (ValueError, KeyError, TypeError):
        raise ValueError("its answer is not a fake broker's status") from None


def cmd_faults(args: argparse.Namespace) -> int:
    try:
        token = _token(args)
    except _NoToken as exc:
        return console.fail(str(exc))
    try:
        if args.action == "list":
            status, out = _call(args.admin, token, "GET", "/faults")
        elif args.action == "history":
            status, out = _call(args.admin, token, "GET", "/faults/history")
        elif args.action == "clear":
            status, out = _call(args.admin, token, "DELETE", "/faults")
        elif args.action == "remove":
            if not args.arg:
                return console.fail("faults remove needs a rule id")
            status, out = _call(args.admin, token, "DELETE", f"/faults/{args.arg}")
        else:
            try:
                rule = json.loads(args.arg or "")
            except json.JSONDecodeError as exc:
                return console.fail(f"the rule is not JSON: {exc}")
            status, out = _call(args.admin, token, "POST", "/faults", rule)
    except (OSError, ValueError) as exc:
        return _unreachable(args.admin, exc)
    console.json_line(out, indent=2)
    return console.EXIT_OK if status < 300 else console.EXIT_FAILED


# --------------------------------------------------------------------------- controller API (Kafka protocol)


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]") or "127.0.0.1", int(port)


def controller_call(address: str, body: Any, timeout: float = 10.0) -> Any:
    """Send one request to a Kafka listener and return the response body.

    Negotiates the version with ApiVersions first (the highest both sides speak).

    Raises:
        ConfigError: the address is malformed, cannot be reached, or the server does
            not serve this request.
    """
    import socket

    from kraft_jbod.connection import ClientConnection, ConnectionClosed, ResponseReceived
    from kraft_jbod.messages.api_versions_request import ApiVersionsRequest

    host, port = _address(address)
    conn = ClientConnection(client_id="kraft-jbod-cli")
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise ConfigError(f"cannot reach the controller at {address}: {exc.strerror or exc}") from None
    with sock:

        def roundtrip(req: Any, version: int) -> Any:
            sock.sendall(conn.send_request(req, version))
            while True:
                ev = conn.next_event()
                if isinstance(ev, ResponseReceived):
                    return ev.body
                if isinstance(ev, ConnectionClosed):
                    raise ConfigError(f"{address} closed the connection")
                try:
                    chunk = sock.recv(65536)
                except OSError as exc:
                    raise ConfigError(f"{address}: {exc.strerror or exc}") from None
                conn.receive_data(chunk)

        versions = roundtrip(ApiVersionsRequest(client_software_name="kraft-jbod", client_software_version="cli"), 3)
        served = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        ours = type(body).VALID_VERSIONS
        theirs = served.get(body.API_KEY)
        if theirs is None or theirs[1] < ours[0] or theirs[0] > ours[1]:
            raise ConfigError(f"{address} does not serve {type(body).NAME} (is it a controller listener?)")
        return roundtrip(body, min(ours[1], theirs[1]))


def _error_text(code: int, message: str | None) -> str:
    from kraft_jbod.messages.error_codes import ErrorCode

    return f"{ErrorCode.name_of(code)} ({code})" + (f": {message}" if message else "")


def cmd_topics(args: argparse.Namespace) -> int:
    if args.topics_command == "list":
        return _topics_list(args)
    try:
        if args.topics_command == "create":
            resp = controller_call(args.controller, _create_request(args), args.timeout)
        else:
            from kraft_jbod.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState

            req = DeleteTopicsRequest(
                topics=[DeleteTopicState(name=n) for n in args.names],
                topic_names=list(args.names),
                timeout_ms=int(args.timeout * 1000),
            )
            resp = controller_call(args.controller, req, args.timeout)
    except KraftJbodError as exc:
        return console.fail(f"topics {args.topics_command}: {exc}")
    refused = 0
    results = resp.topics if args.topics_command == "create" else resp.responses
    verb = "created" if args.topics_command == "create" else "deleted"
    for t in results:
        if t.error_code:
            refused += 1
            console.line(f"{t.name}: refused, {_error_text(t.error_code, t.error_message)}")
        elif args.topics_command == "create":
            console.line(f"{t.name}: {verb} ({t.num_partitions} partitions, replication factor {t.replication_factor})")
        else:
            console.line(f"{t.name}: {verb}")
    return console.EXIT_FAILED if refused else console.EXIT_OK


def _create_request(args: argparse.Namespace) -> Any:
    from kraft_jbod.messages.create_topics_request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest

    configs = []
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--config expects KEY=VALUE, got {item!r}")
        configs.append(CreatableTopicConfig(name=key, value=value))
    return CreateTopicsRequest(
        topics=[
            CreatableTopic(
                name=n, num_partitions=args.partitions, replication_factor=args.replication_factor, configs=configs
            )
            for n in args.names
        ],
        timeout_ms=int(args.timeout * 1000),
    )


def _topics_list(args: argparse.Namespace) -> int:
    try:
        status, view = _call(args.admin, _token(args), "GET", "/status")
    except _NoToken as exc:
        return console.fail(str(exc))
    except (OSError, ValueError) as exc:
        return _unreachable(args.admin, exc)
    if status != 200 or not isinstance(view, dict):
        console.error(str(view))
        return console.EXIT_FAILED
    for t in view.get("topics", []):
        parts = t.get("partitions", [])
        rf = max((len(p.get("replicas", [])) for p in parts), default=0)
        if args.json:
            console.json_line({"name": t["name"], "id": t["id"], "partitions": len(parts), "replication_factor": rf})
        else:
            console.line(f"{t['name']}  id {t['id']}  partitions {len(parts)}  replication factor {rf}")
    return console.EXIT_OK
