"""``kraft-jbod real-cluster``: the mock controller (or Kafka's) and N real Kafka brokers.

Prints one ``listening on NAME HOST:PORT`` line per node once every broker is unfenced
(``CONTROLLER``, ``ADMIN`` and ``CLIENT`` for the mock's extras, ``BROKER-<id>``), then
``bootstrap.servers=...``, and runs until Ctrl-C, SIGTERM or ``--run-for`` seconds. On the
way down brokers stop before the controller and no process is left behind.

Which Kafka: ``--kafka DIR`` (a distribution with ``libs/``, or a source build with a
``classpath`` file), else ``KRAFT_JBOD_KAFKA_HOME``, else the project's own build of Kafka
4.4 in the user cache (``make test`` or ``python -m tools.kafka_broker build`` makes it).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from types import FrameType
from typing import Any

from kraft_jbod import console
from kraft_jbod.errors import ConfigError, KraftJbodError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "real-cluster",
        help="run the mock controller (or Kafka's own) with real Kafka brokers, several log dirs each",
    )
    p.add_argument("--kafka", type=Path, help="Kafka distribution (3.9-4.4, with libs/) or source build folder")
    p.add_argument("--brokers", type=int, default=2, help="number of real brokers (default 2)")
    p.add_argument("--log-dirs", type=int, default=2, help="log dirs per broker (default 2)")
    p.add_argument(
        "--controller",
        choices=["mock", "kafka"],
        default="mock",
        help="the mock (default) or Kafka's own KRaft controller from the same Kafka",
    )
    p.add_argument("--metadata-version", default="4.3-IV0", help="metadata.version of the new cluster")
    p.add_argument("--workdir", type=Path, help="where data and logs go (default: a temporary folder, removed)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder at exit")
    p.add_argument("--heap-mb", type=int, default=256, help="heap of each Kafka JVM (default 256)")
    p.add_argument(
        "--broker-override", action="append", default=[], metavar="KEY=VALUE", help="a broker property (repeatable)"
    )
    p.add_argument(
        "--controller-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a controller property (repeatable)",
    )
    p.add_argument(
        "--cordon",
        action="append",
        default=[],
        metavar="BROKER:DIR",
        help="start broker BROKER with its DIR-th log dir (from 1) cordoned (KIP-1066; 4.3-IV0 and later)",
    )
    p.add_argument("--run-for", type=float, metavar="SECONDS", help="stop by itself after this long")
    p.add_argument("--json", action="store_true", help="also print the cluster's description as one JSON line")
    p.set_defaults(func=cmd_real_cluster)


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    from kraft_jbod.properties import parse_override

    out: dict[str, str] = {}
    for item in items:
        try:
            key, value = parse_override(item)
        except KraftJbodError as exc:
            raise ConfigError(f"{flag} {item!r}: {exc}") from None
        out[key] = value
    return out


def _cordons(items: list[str]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for item in items:
        broker, sep, index = item.partition(":")
        if not sep or not broker.strip().isdigit() or not index.strip().isdigit() or int(index) < 1:
            raise ConfigError(f"--cordon {item!r}: want BROKER:DIR, e.g. 1:2 for broker 1's second dir")
        out.setdefault(int(broker), []).append(int(index) - 1)
    return out


def find_kafka(explicit: Path | None) -> Path:
    """``--kafka``, else ``KRAFT_JBOD_KAFKA_HOME``, else the newest complete build in the user cache.

    Raises:
        ConfigError: none of them.
    """
    if explicit is not None:
        return explicit
    env = os.environ.get("KRAFT_JBOD_KAFKA_HOME", "").strip()
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kraft-jbod"
    builds = sorted(
        (p for p in base.glob("kafka-broker-*") if (p / "BUILT").is_file()), key=lambda p: p.stat().st_mtime
    )
    if builds:
        return builds[-1]
    raise ConfigError(
        "no Kafka: give --kafka DIR (an Apache Kafka 3.9-4.4 distribution, or a source build), set "
        "KRAFT_JBOD_KAFKA_HOME, or build Kafka 4.4 from the project's shared package with "
        "`python -m tools.kafka_broker build` (docs/real-brokers.md)"
    )


class _Stop(Exception):
    """SIGTERM arrived: leave the wait and take the cluster down."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Stop()


def cmd_real_cluster(args: argparse.Namespace) -> int:
    # Here, not at the top: every kraft-jbod run imports this module to register it.
    import shutil
    import signal
    import tempfile

    from kraft_jbod.realkafka.cluster import ClusterSpec, RealCluster
    from kraft_jbod.realkafka.distribution import open_distribution
    from kraft_jbod.realkafka.process import KafkaProcessError

    try:
        dist = open_distribution(find_kafka(args.kafka))
        spec = ClusterSpec(
            brokers=args.brokers,
            log_dirs=args.log_dirs,
            controller=args.controller,
            metadata_version=args.metadata_version,
            heap_mb=args.heap_mb,
            broker_overrides=_pairs(args.broker_override, "--broker-override"),
            controller_overrides=_pairs(args.controller_override, "--controller-override"),
            cordoned=_cordons(args.cordon),
        )
        spec.check()
        if args.run_for is not None and args.run_for < 0:
            raise ConfigError(f"--run-for {args.run_for}: want a number of seconds >= 0")
        if args.brokers < 1:
            raise ConfigError("--brokers: want at least 1")
    except ConfigError as exc:
        return console.fail(str(exc))
    if args.workdir is not None:
        if args.workdir.exists() and (not args.workdir.is_dir() or any(args.workdir.iterdir())):
            return console.fail(f"--workdir {args.workdir}: not an empty folder (a cluster starts from nothing)")
        workdir, temporary = args.workdir, False
    else:
        workdir, temporary = Path(tempfile.mkdtemp(prefix="kraft-jbod-real-")), not args.keep

    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    cluster = RealCluster(dist, workdir, spec)
    console.note(
        f"starting the {spec.controller} controller and {spec.brokers} Kafka {dist.release_name} ({dist.version}) "
        f"brokers in {workdir}"
    )
    try:
        started = time.monotonic()
        cluster.start()
        _announce(cluster, args.json)
        console.note(f"up in {time.monotonic() - started:.1f} s; Ctrl-C stops brokers, then the controller")
        deadline = None if args.run_for is None else time.monotonic() + args.run_for
        while deadline is None or time.monotonic() < deadline:
            time.sleep(0.2)
            dead = [b.node_id for b in cluster.brokers.values() if not b.process.running()]
            if dead or (cluster.controller is not None and not cluster.controller.process.running()):
                raise KafkaProcessError(
                    f"a node exited on its own (brokers {dead or 'none'}); logs are in {workdir}"
                    + ("" if not temporary else " (kept)")
                )
        return console.EXIT_OK
    except (KeyboardInterrupt, _Stop):
        return console.EXIT_OK
    except (KraftJbodError, OSError) as exc:
        temporary = False  # keep the logs of a failed start
        console.error(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        console.note(str(exc))
        return console.EXIT_FAILED
    finally:
        console.note("stopping brokers, then the controller")
        cluster.close()
        signal.signal(signal.SIGTERM, previous)
        if temporary:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            console.note(f"data and logs kept in {workdir}")


def _announce(cluster: Any, as_json: bool) -> None:
    c = cluster.controller
    console.listening("CONTROLLER", c.host, c.port)
    if c.admin_address is not None:
        console.listening("ADMIN", *c.admin_address)
    if c.client is not None:
        console.listening("CLIENT", *c.client)
    for broker in cluster.brokers.values():
        console.listening(f"BROKER-{broker.node_id}", broker.host, broker.port)
    console.line(f"bootstrap.servers={cluster.bootstrap_servers}")
    if as_json:
        console.line(json.dumps(cluster.describe(), sort_keys=True))
