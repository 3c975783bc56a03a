"""CLI commands of the storage area: ``kraft-jbod storage format|info``.

``format`` writes ``meta.properties`` (with ``directory.id``) in every ``log.dirs`` entry
and ``metadata.log.dir``, as ``kafka-storage format`` does, and prints one line per
directory; with ``--initial-controllers`` / ``--no-initial-controllers`` a controller's
metadata dir also gets the bootstrap voter set of a dynamic quorum (kraft.version 1), written
by :mod:`kraft_jbod.controller.dynamic_format` as ``kraft-jbod controller`` writes it, and a
line naming the voters. ``info`` prints one JSON line per directory and exits 1 when any is not
formatted or unreadable. Errors (other cluster, duplicate ids, unreadable config) are
one line and exit 2, through ``kraft_jbod.cli.main``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kraft_jbod import console


def register(sub: Any) -> None:
    st = sub.add_parser("storage", help="format or inspect meta.properties like kafka-storage")
    st_sub = st.add_subparsers(dest="storage_command", required=True)
    f = st_sub.add_parser("format", help="write meta.properties (with directory.id) in every log dir")
    f.add_argument("-c", "--config", required=True, type=Path, help="the node's properties file")
    f.add_argument("-t", "--cluster-id", required=True, help="base64url cluster id (22 characters)")
    f.add_argument(
        "-I",
        "--initial-controllers",
        metavar="ID@HOST:PORT:DIRECTORY_ID,...",
        help="a controller's metadata dir starts a dynamic quorum (kraft.version 1) with these voters; "
        "this node takes the directory id the list gives it",
    )
    f.add_argument(
        "-N",
        "--no-initial-controllers",
        action="store_true",
        help="a controller's metadata dir starts with no voter set: the controller follows the quorum "
        "found through controller.quorum.bootstrap.servers until it is added (AddRaftVoter)",
    )
    f.set_defaults(func=cmd_storage_format)
    i = st_sub.add_parser("info", help="show the meta.properties of every log dir")
    i.add_argument("-c", "--config", required=True, type=Path, help="the node's properties file")
    i.set_defaults(func=cmd_storage_info)


def cmd_storage_format(args: argparse.Namespace) -> int:
    from kraft_jbod.storage.meta import StorageLayout, format_storage
    from kraft_jbod.wire.primitives import uuid_to_base64url

    layout = StorageLayout.load(args.config)
    plan = None
    if args.initial_controllers is not None or args.no_initial_controllers:
        # A dynamic quorum's metadata dir: the controller command's own checks and writer.
        from kraft_jbod.controller import config as controller_config
        from kraft_jbod.controller.dynamic_format import plan_dynamic_format

        plan = plan_dynamic_format(
            controller_config.load(args.config),
            initial_controllers=args.initial_controllers,
            no_initial_controllers=args.no_initial_controllers,
            cluster_id=args.cluster_id,
        )
    results = format_storage(layout, args.cluster_id, metadata_directory_id=None if plan is None else plan.directory_id)
    if plan is not None:
        plan.write()
    for r in results:
        assert r.meta.directory_id is not None
        console.line(f"{r.path}: {r.action} (directory.id={uuid_to_base64url(r.meta.directory_id)})")
    if plan is not None:
        ids = ", ".join(str(v.voter_id) for v in plan.voters.voters) or "none (joins by AddRaftVoter)"
        console.line(f"{plan.cfg.metadata_log_dir}: voter set {ids} (kraft.version 1)")
    return console.EXIT_OK


def cmd_storage_info(args: argparse.Namespace) -> int:
    from kraft_jbod.storage.meta import StorageLayout, storage_info

    rows = storage_info(StorageLayout.load(args.config))
    for row in rows:
        console.line(json.dumps(row, sort_keys=True))
    return console.EXIT_FAILED if any("error" in r or not r.get("formatted") for r in rows) else console.EXIT_OK
