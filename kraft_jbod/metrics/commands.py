"""CLI of the integration-testing features: ``kraft-jbod status`` and ``kraft-jbod faults``.

Both talk to a running controller's admin endpoint (``Extensions(admin=...)``) over
plain HTTP with urllib; exit codes follow the CLI's (0 ok, 1 refused, 2 unreachable/bad usage).
Every call carries the channel's token (``Authorization: Bearer``), read from
``--token-file`` (the controller writes ``<metadata.log.dir>/admin.token``) or from the
``KRAFT_JBOD_ADMIN_TOKEN`` environment variable, never from the command line (``ps``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

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
    s.set_defaults(func=cmd_status)
    f = sub.add_parser("faults", help="list, add or remove fault rules on a running controller")
    f.add_argument("--admin", required=True, metavar="HOST:PORT")
    f.add_argument("--token-file", type=Path, help=_TOKEN_HELP)
    f.add_argument("action", choices=["list", "add", "remove", "clear", "history"])
    f.add_argument("arg", nargs="?", help="add: a rule as JSON; remove: a rule id")
    f.set_defaults(func=cmd_faults)


def _call(admin: str, token: str, method: str, path: str, body: object | None = None) -> tuple[int, Any]:
    """(status, JSON body). Raises OSError/ValueError: unreachable, or not this server's HTTP."""
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
    print(f"kraft-jbod: cannot reach the admin endpoint {admin}: {exc}", file=sys.stderr)
    return 2


def cmd_status(args: argparse.Namespace) -> int:
    from kraft_jbod.controller.client_api import render_text

    try:
        status, view = _call(args.admin, _token(args), "GET", "/status")
    except _NoToken as exc:
        print(f"kraft-jbod: {exc}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        return _unreachable(args.admin, exc)
    if status != 200:
        print(f"kraft-jbod: {view}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(view, indent=2) + "\n" if args.json else render_text(view))
    return 0


def cmd_faults(args: argparse.Namespace) -> int:
    try:
        token = _token(args)
    except _NoToken as exc:
        print(f"kraft-jbod: {exc}", file=sys.stderr)
        return 2
    try:
        if args.action == "list":
            status, out = _call(args.admin, token, "GET", "/faults")
        elif args.action == "history":
            status, out = _call(args.admin, token, "GET", "/faults/history")
        elif args.action == "clear":
            status, out = _call(args.admin, token, "DELETE", "/faults")
        elif args.action == "remove":
            if not args.arg:
                print("kraft-jbod: faults remove needs a rule id", file=sys.stderr)
                return 2
            status, out = _call(args.admin, token, "DELETE", f"/faults/{args.arg}")
        else:
            try:
                rule = json.loads(args.arg or "")
            except json.JSONDecodeError as exc:
                print(f"kraft-jbod: the rule is not JSON: {exc}", file=sys.stderr)
                return 2
            status, out = _call(args.admin, token, "POST", "/faults", rule)
    except (OSError, ValueError) as exc:
        return _unreachable(args.admin, exc)
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0 if status < 300 else 1
