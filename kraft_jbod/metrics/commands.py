"""CLI of the integration-testing features: ``kraft-jbod status`` and ``kraft-jbod faults``.

Both talk to a running controller's admin endpoint (``Extensions(admin=...)``) over
plain HTTP with urllib; exit codes follow the CLI's (0 ok, 1 refused, 2 unreachable/bad usage).
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.error
import urllib.request
from typing import Any


def register(sub: Any) -> None:
    s = sub.add_parser("status", help="print the cluster view (brokers, directories, partitions) of a controller")
    s.add_argument("--admin", required=True, metavar="HOST:PORT", help="the controller's admin endpoint")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.set_defaults(func=cmd_status)
    f = sub.add_parser("faults", help="list, add or remove fault rules on a running controller")
    f.add_argument("--admin", required=True, metavar="HOST:PORT")
    f.add_argument("action", choices=["list", "add", "remove", "clear", "history"])
    f.add_argument("arg", nargs="?", help="add: a rule as JSON; remove: a rule id")
    f.set_defaults(func=cmd_faults)


def _call(admin: str, method: str, path: str, body: object | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://{admin}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"null")
        except json.JSONDecodeError:
            return exc.code, None


def _unreachable(admin: str, exc: Exception) -> int:
    print(f"kraft-jbod: cannot reach the admin endpoint {admin}: {exc}", file=sys.stderr)
    return 2


def cmd_status(args: argparse.Namespace) -> int:
    from kraft_jbod.controller.client_api import render_text

    try:
        status, view = _call(args.admin, "GET", "/status")
    except (OSError, ValueError) as exc:
        return _unreachable(args.admin, exc)
    if status != 200:
        print(f"kraft-jbod: {view}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(view, indent=2) + "\n" if args.json else render_text(view))
    return 0


def cmd_faults(args: argparse.Namespace) -> int:
    try:
        if args.action == "list":
            status, out = _call(args.admin, "GET", "/faults")
        elif args.action == "history":
            status, out = _call(args.admin, "GET", "/faults/history")
        elif args.action == "clear":
            status, out = _call(args.admin, "DELETE", "/faults")
        elif args.action == "remove":
            if not args.arg:
                print("kraft-jbod: faults remove needs a rule id", file=sys.stderr)
                return 2
            status, out = _call(args.admin, "DELETE", f"/faults/{args.arg}")
        else:
            try:
                rule = json.loads(args.arg or "")
            except json.JSONDecodeError as exc:
                print(f"kraft-jbod: the rule is not JSON: {exc}", file=sys.stderr)
                return 2
            status, out = _call(args.admin, "POST", "/faults", rule)
    except (OSError, ValueError) as exc:
        return _unreachable(args.admin, exc)
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0 if status < 300 else 1
