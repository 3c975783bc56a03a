"""CLI commands of the controller area: ``kraft-jbod controller`` and ``kraft-jbod log dump``.

``register(sub)`` adds the subparsers; each ``func`` returns an exit code (0 ok, 1 the
input was read but something in it failed, 2 bad usage or unreadable input), and
``kraft_jbod.cli.main`` turns a ``KraftJbodError`` into a message and exit code 2.

``log recover DIR`` reports whether the log is clean, ends in a torn tail, or is damaged
(exit 1), reads every ``.checkpoint`` snapshot whole and checks the newest against the log
as a start would (a damaged, truncated or missing snapshot, or one from another history,
is exit 1); ``--truncate-at OFFSET`` cuts the log back to OFFSET after copying the cut
bytes; ``--set-aside FILE`` moves a snapshot into a ``recovery-*`` directory.

``controller`` prints exactly one line ``listening on NAME HOST:PORT`` per bound address
(IPv6 hosts in brackets) once every one accepts: controller listeners first, then client
listeners, then ``ADMIN`` and ``METRICS`` (one HTTP endpoint serves both), and flushes
stdout, so a script can read the port of ``:0`` listeners. A wildcard host binds IPv4 and
IPv6 on one port: two lines. A fixed port already in use is reported before anything is
created on disk. Logs go to stderr; output goes through :mod:`kraft_jbod.console` only.
SIGINT/SIGTERM stop it gracefully: connections closed, the in-flight append finished, the
log fsync'd.

asyncio and the server are imported only when a command runs, so ``kraft-jbod --help``
stays light.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraft_jbod import console
from kraft_jbod.errors import ConfigError, DecodeError, KraftJbodError

if TYPE_CHECKING:  # the command line imports the controller lazily (tests/test_startup_imports.py)
    from kraft_jbod.controller.log import Scan
    from kraft_jbod.controller.snapshot import SnapshotFile, StartPlan


def register(sub: Any) -> None:
    c = sub.add_parser("controller", help="run the mock KRaft controller (KIP-858 JBOD semantics)")
    c.add_argument("--config", required=True, type=Path, help="Kafka-style properties file")
    c.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a property (repeatable)"
    )
    c.add_argument("--cluster-id", help="cluster id for a new metadata dir (base64url uuid); checked on restart")
    c.add_argument(
        "--metadata-version",
        help="metadata.version for a new log, as a name (3.7-IV2) or level (17); default: newest with JBOD",
    )
    c.add_argument(
        "--standalone",
        action="store_true",
        help="a new log starts a dynamic quorum (kraft.version 1) with this controller as its one voter, "
        "as kafka-storage format --standalone; brokers may then use controller.quorum.bootstrap.servers",
    )
    c.add_argument(
        "--initial-controllers",
        metavar="ID@HOST:PORT:DIRECTORY_ID,...",
        help="a new log starts a quorum of several controllers at kraft.version 1 with these voters "
        "(as kafka-storage format --initial-controllers); needs --cluster-id",
    )
    c.add_argument(
        "--no-initial-controllers",
        action="store_true",
        help="a new log starts with no voter set: this controller follows the quorum found through "
        "controller.quorum.bootstrap.servers as an observer until it is added (AddRaftVoter)",
    )
    c.add_argument(
        "--feature",
        action="append",
        default=[],
        metavar="kraft.version=N",
        help="finalized level of a feature for a new log; only kraft.version (0, or 1 with --standalone)",
    )
    c.add_argument("--no-fsync", action="store_true", help="skip fsync (benchmarks only: not crash-safe)")
    c.add_argument(
        "--extensions",
        type=Path,
        help="JSON settings for faults, TLS/SASL/ACLs, metrics, client listener and admin channel "
        "(docs/integration-testing.md)",
    )
    c.add_argument("--capture", type=Path, help="write every frame exchanged to this pcapng (Wireshark opens it)")
    c.add_argument(
        "--mirror", metavar="HOST:PORT", help="mirror every frame over UDP to `kraft-jbod capture listen HOST:PORT`"
    )
    c.add_argument(
        "--capture-secrets",
        action="store_true",
        help="keep SASL passwords/proofs in --capture/--mirror output (default: starred out)",
    )
    c.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    c.add_argument("--log-json", action="store_true", help="logs as JSON lines on stderr (same events, as fields)")
    c.set_defaults(func=cmd_controller)

    lg = sub.add_parser("log", help="inspect a metadata log")
    lg_sub = lg.add_subparsers(dest="log_command", required=True)
    d = lg_sub.add_parser("dump", help="print every record of a metadata log as JSON lines")
    d.add_argument(
        "dir",
        type=Path,
        help="metadata.log.dir or its __cluster_metadata-0 directory, or a snapshot's .checkpoint file",
    )
    d.add_argument("--no-control", action="store_true", help="leave out control batches")
    d.set_defaults(func=cmd_log_dump)
    r = lg_sub.add_parser(
        "recover", help="check a metadata log; with --truncate-at, cut it back there (a backup of the cut is kept)"
    )
    r.add_argument("dir", type=Path, help="metadata.log.dir or its __cluster_metadata-0 directory")
    act = r.add_mutually_exclusive_group()
    act.add_argument("--truncate-at", type=int, metavar="OFFSET", help="keep offsets below OFFSET, drop the rest")
    act.add_argument(
        "--set-aside",
        metavar="SNAPSHOT",
        help="move the snapshot file SNAPSHOT (a name in DIR) into DIR/recovery-<time>-snapshot/, so starts skip it",
    )
    r.set_defaults(func=cmd_log_recover)


def _setup_logging(level: str, json_lines: bool = False) -> None:
    from kraft_jbod.metrics import logs

    logs.setup(level, json_lines=json_lines, stream=sys.stderr)


def check_ports_free(addresses: list[tuple[str, str | None, int]]) -> None:
    """Bind and release every fixed port before the server touches the disk.

    A port in use then fails the command with one line and no half-made metadata dir.
    (The server still handles the race where another process takes the port meanwhile.)

    Raises:
        ConfigError: ``NAME host:port`` cannot be bound, with the reason.
    """
    import socket

    for name, host, port in addresses:
        if port == 0:
            continue
        try:
            infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except OSError as exc:
            raise ConfigError(f"{name} listener {host}:{port}: {exc.strerror or exc}") from None
        family, kind, proto, _, sockaddr = infos[0]
        with socket.socket(family, kind, proto) as s:
            # asyncio binds with SO_REUSEADDR too: a port in TIME_WAIT is free for both.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(sockaddr)
            except OSError as exc:
                where = console.host_port(host or "0.0.0.0", port)
                raise ConfigError(f"{name} listener {where}: {exc.strerror or exc}") from None


def cmd_controller(args: argparse.Namespace) -> int:
    import asyncio
    import socket

    from kraft_jbod.controller import config as cfgmod
    from kraft_jbod.controller import features

    _setup_logging(args.log_level, args.log_json)
    cfg = cfgmod.load(args.config, args.override)
    level = None if args.metadata_version is None else features.level_of(args.metadata_version)
    if level is not None and not features.MINIMUM_BOOTSTRAP_LEVEL <= level <= features.MAX_SUPPORTED_LEVEL:
        raise ConfigError(
            f"--metadata-version {args.metadata_version}: level {level} is outside "
            f"{features.MINIMUM_BOOTSTRAP_LEVEL}..{features.MAX_SUPPORTED_LEVEL}"
        )
    from kraft_jbod.controller.initial_controllers import check_dynamic_flags

    initial_given = args.initial_controllers is not None
    dynamic = check_dynamic_flags(
        static_voters=bool(cfg.quorum_voters),
        standalone=args.standalone,
        initial_controllers=initial_given,
        no_initial_controllers=args.no_initial_controllers,
    )
    several = initial_given or args.no_initial_controllers
    if not dynamic:
        # Formatted before with a voter set (by these flags or `kraft-jbod storage format`):
        # the log is a dynamic quorum's, kraft.version 1, without the flags.
        from kraft_jbod.controller.raft.seat import read_bootstrap_voters

        several = read_bootstrap_voters(cfg.metadata_log_dir) is not None
    if args.no_initial_controllers and cfg.quorum_voters:
        raise ConfigError(
            "--no-initial-controllers makes a dynamic quorum: remove controller.quorum.voters and set "
            "controller.quorum.bootstrap.servers instead"
        )
    kraft_version = _kraft_version(cfg, args.standalone or several, args.feature, several=several)
    # Checked in full before anything is written (Rule 2 of initial_controllers.py).
    format_new_log = _dynamic_format(cfg, args) if dynamic and several else None
    mirror = None
    if args.mirror:
        host, sep, port = args.mirror.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ConfigError(f"--mirror {args.mirror!r}: expected HOST:PORT")
        mirror = (host.strip("[]"), int(port))
        if mirror[1] > 65535:
            raise ConfigError(f"--mirror {args.mirror!r}: port {mirror[1]} is out of range")
        try:
            # Resolved now, before the log directory is touched: the tap would otherwise
            # fail inside the running server with a traceback.
            socket.getaddrinfo(mirror[0], mirror[1], type=socket.SOCK_DGRAM)
        except (OSError, UnicodeError) as exc:
            raise ConfigError(f"--mirror {args.mirror!r}: cannot resolve {mirror[0]}: {exc}") from None
    if mirror is not None:
        console.require("controller --mirror (the UDP frame tap)", "asyncio_dgram")
    extensions = None
    if args.extensions is not None:
        from kraft_jbod.controller.extensions import Extensions

        extensions = Extensions.load(args.extensions)
        if extensions.statsd is not None:
            console.require("statsd metrics", "asyncio_dgram")
    fixed: list[tuple[str, str | None, int]] = [(li.name, li.bind_host, li.port) for li in cfg.controller_listeners]
    if extensions is not None:
        fixed += [(cl.name, cl.host, cl.port) for cl in extensions.client_listeners]
        if extensions.admin is not None:
            fixed.append(("ADMIN", extensions.admin[0], extensions.admin[1]))
    check_ports_free(fixed)
    if format_new_log is not None:
        format_new_log()
    _tune_collector()
    return asyncio.run(
        _run_controller(
            cfg,
            args.cluster_id,
            level,
            not args.no_fsync,
            args.capture,
            mirror,
            extensions,
            args.capture_secrets,
            kraft_version,
        )
    )


# CPython's cyclic collector by default runs a young collection every 700 allocations and
# walks the whole heap every 100 of those (when the old generation grew by a quarter).
# The controller allocates in bursts (a directory failure builds a record per replica; a
# CreateTopics of 10,000 partitions, tens of thousands of objects) that reference
# counting frees on its own: the collector found nothing there and took 30-35 % of those
# phases (tools/bench/bench_vs_kafka.py). Fewer, larger young collections; the image is
# frozen out of the old generation's walks once it is large (server._freeze_heap).
_GC_THRESHOLDS = (10_000, 50, 50)


def _tune_collector() -> None:
    import gc

    gc.set_threshold(*_GC_THRESHOLDS)


async def _run_controller(
    cfg: Any,
    cluster_id: str | None,
    level: int | None,
    fsync: bool,
    capture: Path | None = None,
    mirror: tuple[str, int] | None = None,
    extensions: Any = None,
    capture_secrets: bool = False,
    kraft_version: int = 0,
) -> int:
    tap: Any = None
    if capture is not None or mirror is not None:
        from kraft_jbod.capture.tap import FrameTap

        if capture is not None and capture.is_dir():
            raise ConfigError(f"--capture {capture}: is a directory; name a file")
        try:
            tap = FrameTap(pcapng=capture, udp=mirror, secrets=capture_secrets)
        except OSError as exc:
            raise ConfigError(f"--capture {capture}: cannot create it: {exc.strerror}") from None
        await tap.start()
    try:
        return await _serve(cfg, cluster_id, level, fsync, tap, extensions, kraft_version)
    finally:
        if tap is not None:
            await tap.aclose()


async def _serve(
    cfg: Any, cluster_id: str | None, level: int | None, fsync: bool, tap: Any, extensions: Any, kraft_version: int = 0
) -> int:
    import asyncio
    import logging
    import signal

    from kraft_jbod.controller.server import ControllerServer

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = ControllerServer(
        cfg,
        cluster_id=cluster_id,
        metadata_version=level,
        kraft_version=kraft_version,
        fsync=fsync,
        tap=tap,
        extensions=extensions,
        quorum=_quorum_seat(cfg, fsync),
    )
    async with server:
        for name, host, port in server.bound:
            console.listening(name, host, port)
        if extensions is not None and extensions.admin_address is not None:
            host, port = extensions.admin_address
            console.listening("ADMIN", host, port)
            console.listening("METRICS", host, port)
        logging.getLogger(__name__).info(
            "controller %d of cluster %s serving %s", cfg.node_id, server.cluster_id, server.addresses
        )
        stopped = asyncio.create_task(server.wait_stopped())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({stopped, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        stopped.cancel()
    logging.getLogger(__name__).info("controller stopped; metadata log flushed")
    return 1 if server.fatal is not None else 0


def _dynamic_format(cfg: Any, args: argparse.Namespace) -> Any:
    """``--initial-controllers`` / ``--no-initial-controllers``: check everything now and
    return what formats the new metadata dir (controller/dynamic_format.py, shared with
    ``kraft-jbod storage format``); None when the dir is already formatted with a voter set.

    Raises:
        ConfigError: a malformed list, no ``--cluster-id``, or a dir formatted otherwise.
    """
    from kraft_jbod.controller.dynamic_format import plan_dynamic_format

    plan = plan_dynamic_format(
        cfg,
        initial_controllers=args.initial_controllers,
        no_initial_controllers=args.no_initial_controllers,
        cluster_id=args.cluster_id,
    )
    if plan is None:
        return None

    def format_new_log() -> None:
        plan.write(fsync=not args.no_fsync)

    return format_new_log


def _quorum_seat(cfg: Any, fsync: bool) -> Any:
    """Several static voters, or a log formatted with ``--initial-controllers`` /
    ``--no-initial-controllers``: this controller's seat (controller/raft/seat.py); one voter
    (the default, and ``--standalone``) runs alone as before."""
    from kraft_jbod.controller.raft.seat import read_bootstrap_voters

    bootstrap = read_bootstrap_voters(cfg.metadata_log_dir)
    if bootstrap is not None:
        return _dynamic_seat(cfg, fsync, bootstrap)
    if len(cfg.quorum_voters) < 2:
        return None
    from kraft_jbod.controller.raft.seat import QuorumSeat

    return QuorumSeat(cfg.node_id, cfg.quorum_voters, fsync=fsync)


def _dynamic_seat(cfg: Any, fsync: bool, bootstrap: Any) -> Any:
    """kraft.version 1: the voters the log was formatted with (their endpoints on our
    controller listener), this controller's own listener, and the bootstrap servers under
    ids -2, -3, ... (as Kafka's raft client names them) for an observer to find the leader."""
    from kraft_jbod.controller import initial_controllers as ic
    from kraft_jbod.controller.raft.seat import QuorumSeat
    from kraft_jbod.controller.raft.voter_set import VoterSet
    from kraft_jbod.storage.meta import read_meta_properties

    meta = read_meta_properties(cfg.metadata_log_dir)
    if meta is None or meta.directory_id is None:
        raise ConfigError(f"{cfg.metadata_log_dir}: a voter set was formatted but meta.properties has no directory.id")
    listener = cfg.controller_listener_names[0]
    addresses: dict[int, tuple[str, int]] = {}
    for v in bootstrap.voters:
        mine = [e for e in v.endpoints if e.name == listener] or list(v.endpoints)
        if mine:
            addresses[v.voter_id] = (mine[0].host, mine[0].port)
    own = cfg.controller_listeners[0]
    addresses[cfg.node_id] = (own.host or "127.0.0.1", own.port)
    known = set(addresses.values())
    fake_id = -2
    for server in cfg.bootstrap_servers:
        if server not in known:
            addresses[fake_id] = server
            fake_id -= 1
    return QuorumSeat(
        cfg.node_id,
        addresses,
        fsync=fsync,
        directory_id=meta.directory_id,
        # None of them (--no-initial-controllers): an empty set, the node's observer start.
        initial_voters=ic.voter_set_of(bootstrap) if bootstrap.voters else VoterSet(frozenset()),
        auto_join=cfg.quorum_auto_join,
    )


def _kraft_version(cfg: Any, standalone: bool, feature_args: list[str], *, several: bool = False) -> int:
    """kraft.version for a new log from ``--standalone`` and ``--feature`` (controller/voters.py).

    Raises:
        ConfigError: a malformed or unsupported ``--feature``, a combination Kafka's formatter
            refuses, or bootstrap servers without voters and without ``--standalone`` for a new log.
    """
    from kraft_jbod.controller import features, voters

    requested: int | None = None
    for item in feature_args:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not value.strip().isdigit():
            raise ConfigError(f"--feature {item!r}: expected NAME=LEVEL")
        if name == features.METADATA_VERSION:
            raise ConfigError("--feature metadata.version: use --metadata-version instead")
        if name != features.KRAFT_VERSION:
            raise ConfigError(f"--feature {name}: only kraft.version is chosen this way (others take their defaults)")
        requested = int(value)
    if several and requested == 0:
        raise ConfigError(
            "--feature kraft.version=0 contradicts a dynamic quorum (--initial-controllers / "
            "--no-initial-controllers, or a metadata dir formatted with a voter set), which needs kraft.version 1"
        )
    chosen = voters.choose_kraft_version(
        static_voters=bool(cfg.quorum_voters), standalone=standalone, requested=requested
    )
    new_log = not any(cfg.metadata_partition_dir.glob("*.log")) and not any(
        cfg.metadata_partition_dir.glob("*.checkpoint")
    )
    if new_log and cfg.bootstrap_servers and not cfg.quorum_voters and not standalone and not several:
        raise ConfigError(
            "controller.quorum.bootstrap.servers is set and controller.quorum.voters is not: a new log needs "
            "--standalone (a dynamic quorum, kraft.version 1), or set controller.quorum.voters for a static one"
        )
    return chosen


def cmd_log_recover(args: argparse.Namespace) -> int:
    """Without an action: 0 clean or torn tail only, 1 anything else. With one: 0 done, 2 refused."""
    from kraft_jbod.controller import snapshot as snap
    from kraft_jbod.controller.log import resolve_log_dir, truncate_at

    directory = resolve_log_dir(args.dir)
    if not directory.is_dir():
        raise ConfigError(f"{args.dir} is not a directory")
    if args.set_aside is not None:
        moved = snap.set_aside(directory, args.set_aside)
        console.line(f"moved {args.set_aside} to {moved}; a start no longer loads it")
        return _recover_report(directory, args.dir)
    if args.truncate_at is None:
        return _recover_report(directory, args.dir)
    if args.truncate_at < 0:
        raise ConfigError(f"--truncate-at {args.truncate_at}: an offset is >= 0")
    done = truncate_at(directory, args.truncate_at)
    console.line(
        f"cut the log at offset {done.offset}: {done.bytes_cut} bytes and {done.segments_removed} later "
        f"segment(s) removed; backup in {done.backup}"
    )
    return 0


def _recover_report(directory: Path, given: Path) -> int:
    """The segments, every snapshot, and the newest snapshot against the log: 0 when a start
    would go ahead without losing anything (a torn tail is cut by it), 1 otherwise."""
    from kraft_jbod.controller import snapshot as snap
    from kraft_jbod.controller.log import batch_max_timestamp, scan_segments

    scan = scan_segments(directory)
    files = snap.check_files(directory)
    p = scan.problem
    start = scan.segments[0].base_offset if scan.segments else 0
    lines = [_segments_line(scan, given, start)]
    ok = p is None or p.torn
    for f in files:
        sid = f.snapshot_id
        if f.problem is None:
            lines.append(f"snapshot {f.path.name}: whole (offsets below {sid.end_offset}, epoch {sid.epoch})")
        else:
            ok = False
            lines.append(
                f"snapshot {f.path.name}: damaged: {f.problem}\n"
                f"to move it aside (kept, not loaded): kraft-jbod log recover {given} --set-aside {f.path.name}"
            )
    for part in snap.leftovers(directory):
        lines.append(f"{part.name}: the temp file of an interrupted snapshot; never loaded (safe to delete)")
    if p is None or p.torn:
        try:
            plan = snap.plan_start(
                directory,
                start_offset=start,
                end_offset=scan.end_offset,
                batches=scan.batches,
                batch_timestamp=lambda b: batch_max_timestamp(scan.segments[b.segment].path, b.position),
                first_segment=scan.segments[0].path if scan.segments else None,
            )
        except snap.SnapshotConflict as exc:
            ok = False
            if exc.path not in {f.path for f in files if f.problem is not None}:  # else reported above
                lines.append(f"{exc.path.name}: {exc.reason}")
                lines.extend(_conflict_advice(exc, given, start))
        else:
            lines.extend(_start_plan_lines(plan, files, scan.end_offset))
    if ok and p is None:
        lines[0] = f"clean: {len(scan.batches)} batches, log start offset {start}, end offset {scan.end_offset}"
    elif not ok:
        lines.insert(0, "not clean: a start would refuse this log (details below)")
    console.line("\n".join(lines))
    return 0 if ok else 1


def _segments_line(scan: Scan, given: Path, start: int) -> str:
    """The segments' state: whole, a torn tail a start cuts, or damage to cut by hand."""
    p = scan.problem
    if p is None:
        return f"segments: {len(scan.batches)} batches, log start offset {start}, end offset {scan.end_offset}"
    name = scan.segments[p.segment].path.name
    if p.torn:
        return (
            f"torn tail at offset {p.offset} ({name}, byte {p.position}): {p.reason}; "
            "the controller truncates it when it starts"
        )
    return (
        f"damaged at offset {p.offset} ({name}, byte {p.position}): {p.reason}\n"
        f"to keep offsets below {p.offset} and lose the rest: "
        f"kraft-jbod log recover {given} --truncate-at {p.offset}"
    )


def _start_plan_lines(plan: StartPlan, files: list[SnapshotFile], end_offset: int) -> list[str]:
    """What a start would do with this log and its snapshots."""
    damaged = {f.snapshot_id for f in files if f.problem is not None}
    if plan.snapshot in damaged:
        assert plan.snapshot is not None
        return [f"a start stops: the snapshot it loads, {plan.snapshot.file_name}, is damaged (above)"]
    if plan.start_log_at is not None:
        assert plan.snapshot is not None
        return [
            f"the log holds no batch: a start begins it at offset {plan.start_log_at}, "
            f"after loading {plan.snapshot.file_name}"
        ]
    if plan.snapshot is not None:
        return [
            f"a start loads {plan.snapshot.file_name} and replays the log from offset "
            f"{plan.snapshot.end_offset} to its end offset {end_offset}"
        ]
    return []


def _conflict_advice(exc: Any, given: Path, start: int) -> list[str]:
    """What an operator can do about a snapshot that disagrees with the log."""
    from kraft_jbod.controller import snapshot as snap

    sid = snap.parse_name(exc.path.name)
    if sid is None:  # no snapshot at all covers the log start
        return [
            f"the offsets below {start} are in no file here: restore the {snap.SUFFIX} file from a backup "
            "(nothing in this directory can rebuild them), or move the directory away to start a new cluster"
        ]
    return [
        f"to keep the log and move the snapshot aside (kept, not loaded): "
        f"kraft-jbod log recover {given} --set-aside {exc.path.name}",
        f"to keep the snapshot and drop the log (a backup of it is kept): "
        f"kraft-jbod log recover {given} --truncate-at {start}",
    ]


def cmd_log_dump(args: argparse.Namespace) -> int:
    from kraft_jbod.controller.log import MetadataLog, decode_control_record, resolve_log_dir
    from kraft_jbod.wire.records import ControlRecordType

    _setup_logging("WARNING")
    if args.dir.suffix == ".checkpoint" and args.dir.is_file():
        return _dump_snapshot(args.dir, args.no_control)
    directory = resolve_log_dir(args.dir)
    metadata_log = MetadataLog.open(directory, read_only=True)
    out = console.stdout()
    failed = 0
    try:
        for info, batch in metadata_log.iter_batches():
            if info.is_control and args.no_control:
                continue
            for rec in batch.records:
                row: dict[str, Any] = {
                    "offset": info.base_offset + rec.offset_delta,
                    "epoch": info.epoch,
                    "timestamp": batch.base_timestamp + rec.timestamp_delta,
                }
                try:
                    if info.is_control:
                        ctype, msg = decode_control_record(rec)
                        try:
                            row["control"] = ControlRecordType(ctype).name
                        except ValueError:
                            row["control"] = f"UNKNOWN({ctype})"
                        if isinstance(msg, bytes):
                            row["hex"] = msg.hex()
                        else:
                            row["data"] = msg.to_json(int(getattr(msg, "version", 0)))
                    else:
                        from kraft_jbod import codec

                        record, version = codec.decode_metadata_record(rec.value or b"")
                        row["type"] = type(record).__name__
                        row["version"] = version
                        row["data"] = record.to_json(version)
                except DecodeError as exc:
                    failed += 1
                    row["error"] = str(exc)
                out.write(json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n")
    except KraftJbodError:
        out.flush()
        raise
    finally:
        metadata_log.close()
    return 1 if failed else 0


def _dump_snapshot(path: Path, no_control: bool) -> int:
    """JSON lines of a snapshot's records (offsets within the snapshot), after checking it whole."""
    from kraft_jbod import codec
    from kraft_jbod.controller import snapshot
    from kraft_jbod.controller.log import decode_control_record
    from kraft_jbod.wire.records import CONTROL_MASK, ControlRecordType, read_record_batch

    snapshot.read_snapshot(path)  # StorageError naming the file and byte for anything not whole
    data = path.read_bytes()
    out = console.stdout()
    pos = 0
    while pos < len(data):
        batch, pos = read_record_batch(data, pos)
        control = bool(batch.attributes & CONTROL_MASK)
        if control and no_control:
            continue
        for rec in batch.records:
            row: dict[str, Any] = {
                "snapshot": path.name,
                "offset": batch.base_offset + rec.offset_delta,
                "epoch": batch.partition_leader_epoch,
                "timestamp": batch.base_timestamp + rec.timestamp_delta,
            }
            if control:
                ctype, msg = decode_control_record(rec)
                row["control"] = ControlRecordType(ctype).name
                row["data"] = msg.to_json(int(getattr(msg, "version", 0)))
            else:
                record, version = codec.decode_metadata_record(rec.value or b"")
                row["type"] = type(record).__name__
                row["version"] = version
                row["data"] = record.to_json(version)
            out.write(json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n")
    return 0
