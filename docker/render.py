#!/usr/bin/env python3
"""Render the compose stacks' files from one settings file (stdlib only).

Reads ``docker/settings.ini`` (a ``[controller]`` section shared by every cluster, one
``[cluster.NAME]`` section per cluster and one ``[broker.NAME]`` section per real Kafka
broker, each naming its cluster) and fills the ``string.Template`` files in
``docker/config/``. Each cluster gets its own compose project: ``compose-CLUSTER.yaml``
(project name ``kraft-jbod-CLUSTER``, so its volumes and network are its own),
``generated/CLUSTER/controller.properties`` and one ``generated/CLUSTER/BROKER.properties``
per broker. ``--check`` renders in memory and reports files that differ from what is on
disk, and generated files no setting produces any more (exit 1), so the checked-in files
cannot drift from the settings.

Invariants:

* Every value reaches every file from the one settings object: a cluster's id in its
  controller's command and in each of its brokers' format step, the controller's node id
  and port in each broker's ``controller.quorum.voters``, the cluster's metadata.version
  in its controller's command and its brokers' format step.
* Settings are validated before anything is written: cluster ids are Kafka uuids (22
  base64url characters, 16 bytes) and differ between clusters; node ids are distinct
  within a cluster and no broker is the controller; host ports are distinct across all
  clusters (both stacks can run at once) and in range; a cluster's metadata.version
  supports JBOD (3.7-IV2 or later) and every broker's Kafka release can join it (a 3.9
  broker refuses a log above 3.9-IV0); cordoned log dirs (KIP-1066) are some of the
  broker's own log dirs, on Kafka 4.3 or later at 4.3-IV0 or later.
* A template that names a value the renderer does not supply is an error, not an
  empty string (``Template.substitute``).

Runs on the user's machine without the package installed, hence no ``kraft_jbod``
imports here: the level tables below restate facts of Kafka's ``MetadataVersion``, and
tests/test_docker_files.py checks them against ``kraft_jbod.controller.features``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import configparser
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

HERE = Path(__file__).resolve().parent
DEFAULT_SETTINGS = HERE / "settings.ini"
TEMPLATES = HERE / "config"

# metadata.version names from 3.7-IV2 (the first with directory assignment) to Kafka
# 4.4's newest production level (4.3-IV0); values are Kafka's feature levels. Levels
# 31-33 (4.4-IV0..IV2) are left out: no released broker accepts them without
# unstable.feature.versions.enable.
JBOD_LEVELS: dict[str, int] = {
    "3.7-IV2": 17,
    "3.7-IV3": 18,
    "3.7-IV4": 19,
    "3.8-IV0": 20,
    "3.9-IV0": 21,
    "4.0-IV0": 22,
    "4.0-IV1": 23,
    "4.0-IV2": 24,
    "4.0-IV3": 25,
    "4.1-IV0": 26,
    "4.1-IV1": 27,
    "4.2-IV0": 28,
    "4.2-IV1": 29,
    "4.3-IV0": 30,
}
# Newest metadata.version each Kafka release line supports in production (its
# MetadataVersion.LATEST_PRODUCTION): a broker registers only if the cluster's finalized
# level is within what it supports, and refuses a metadata log above it. 4.4 keeps 4.3's
# production level; its own 4.4-IV* levels are still unstable there.
RELEASE_MAX_LEVEL: dict[str, int] = {
    "3.7": 19,
    "3.8": 20,
    "3.9": 21,
    "4.0": 25,
    "4.1": 27,
    "4.2": 29,
    "4.3": 30,
    "4.4": 30,
}
# KIP-1066: cordoned.log.dirs exists from Kafka 4.3, and a broker reports its cordoned
# dirs only at 4.3-IV0 or later.
CORDON_MIN_LEVEL = 30
CORDON_MIN_RELEASE = (4, 3)
# Kafka 4.x dropped metadata.version levels below 3.3-IV3; all JBOD levels are above it.

LOG_DIR_ROOT = "/var/lib/kafka"
PROJECT_PREFIX = "kraft-jbod-"

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,40}$")
_DIR = re.compile(r"^d[1-9]$")
_TAG = re.compile(r":(\d+)\.(\d+)[^:/]*$")
_CONTROLLER_KEYS = {"node_id", "port", "image"}
_CLUSTER_KEYS = {"cluster_id", "metadata_version", "controller_host_port"}
_BROKER_KEYS = {"cluster", "image", "node_id", "external_port", "log_dirs", "cordoned_log_dirs"}
# A marker every rendered file carries in its first lines; files under generated/ with it
# that no setting produces any more are stale.
MARKER = "docker/render.py"


class SettingsError(ValueError):
    """The settings file is missing, malformed or inconsistent; the message says where."""


@dataclass(frozen=True, slots=True)
class Broker:
    service: str
    cluster: str
    image: str
    node_id: int
    external_port: int
    dir_names: tuple[str, ...]  # "d1", "d2", ...: one volume each, under LOG_DIR_ROOT
    cordoned: tuple[str, ...]  # some of dir_names, or ("*",) for all of them

    @property
    def log_dirs(self) -> tuple[str, ...]:
        return tuple(f"{LOG_DIR_ROOT}/{d}" for d in self.dir_names)

    @property
    def cordoned_log_dirs(self) -> str:
        """The ``cordoned.log.dirs`` value; empty when nothing is cordoned."""
        if self.cordoned == ("*",):
            return "*"
        return ",".join(f"{LOG_DIR_ROOT}/{d}" for d in self.cordoned)


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    cluster_id: str
    metadata_version: str
    controller_host_port: int
    brokers: tuple[Broker, ...]

    @property
    def level(self) -> int:
        return JBOD_LEVELS[self.metadata_version]

    @property
    def project(self) -> str:
        """The compose project name: scopes the cluster's containers, network and volumes."""
        return PROJECT_PREFIX + self.name

    @property
    def compose_file(self) -> str:
        return f"compose-{self.name}.yaml"

    @property
    def generated(self) -> str:
        """Directory (relative to docker/) of the cluster's rendered properties files."""
        return f"generated/{self.name}"


@dataclass(frozen=True, slots=True)
class Settings:
    controller_id: int
    controller_port: int
    controller_image: str
    clusters: tuple[Cluster, ...]

    @property
    def voters(self) -> str:
        """The ``controller.quorum.voters`` value every broker gets."""
        return f"{self.controller_id}@controller:{self.controller_port}"

    @property
    def brokers(self) -> tuple[Broker, ...]:
        return tuple(b for c in self.clusters for b in c.brokers)

    def cluster(self, name: str) -> Cluster:
        """Raises KeyError for an unknown cluster name."""
        for c in self.clusters:
            if c.name == name:
                return c
        raise KeyError(name)


# --------------------------------------------------------------------------- settings


def _get(cp: configparser.ConfigParser, section: str, key: str) -> str:
    try:
        value = cp.get(section, key).strip()
    except (configparser.NoSectionError, configparser.NoOptionError):
        raise SettingsError(f"[{section}] {key} is missing") from None
    if not value:
        raise SettingsError(f"[{section}] {key} is empty")
    return value


def _int(cp: configparser.ConfigParser, section: str, key: str, lo: int, hi: int) -> int:
    text = _get(cp, section, key)
    if not re.fullmatch(r"[0-9]+", text):
        raise SettingsError(f"[{section}] {key} = {text!r} is not a non-negative integer")
    value = int(text)
    if not lo <= value <= hi:
        raise SettingsError(f"[{section}] {key} = {value} is outside {lo}..{hi}")
    return value


def _known_keys(cp: configparser.ConfigParser, section: str, allowed: set[str]) -> None:
    unknown = sorted(set(cp.options(section)) - allowed)
    if unknown:
        raise SettingsError(f"[{section}] has unknown keys {unknown}; known: {sorted(allowed)}")


def check_cluster_id(text: str, section: str = "cluster") -> str:
    """Raises SettingsError unless ``text`` is a Kafka uuid string (as kafka-storage wants)."""
    if len(text) != 22 or not re.fullmatch(r"[A-Za-z0-9_-]+", text):
        raise SettingsError(f"[{section}] cluster_id = {text!r} is not 22 base64url characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, binascii.Error):
        raise SettingsError(f"[{section}] cluster_id = {text!r} is not base64url") from None
    if len(raw) != 16 or base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != text:
        raise SettingsError(f"[{section}] cluster_id = {text!r} does not encode exactly 16 bytes")
    return text


def release_of_image(image: str) -> str | None:
    """``"3.9"`` for ``apache/kafka:3.9.1``; None when the tag is not a version."""
    m = _TAG.search(image)
    return f"{m[1]}.{m[2]}" if m else None


def _release_key(release: str) -> tuple[int, int]:
    major, minor = release.split(".")
    return int(major), int(minor)


def check_release_joins(image: str, metadata_version: str, where: str) -> None:
    """Raises SettingsError unless a broker on ``image`` can join a cluster at
    ``metadata_version``. An image whose tag is not a version is not checked."""
    release = release_of_image(image)
    if release is None:
        return
    if release not in RELEASE_MAX_LEVEL:
        oldest = min(RELEASE_MAX_LEVEL, key=_release_key)
        if _release_key(release) < _release_key(oldest):
            raise SettingsError(
                f"[{where}] image = {image}: Kafka {release} has no KRaft JBOD (needs {oldest} or later)"
            )
        raise SettingsError(
            f"[{where}] image = {image}: render.py does not know which metadata.versions Kafka {release} "
            "supports; add its newest production level to RELEASE_MAX_LEVEL"
        )
    newest = RELEASE_MAX_LEVEL[release]
    level = JBOD_LEVELS[metadata_version]
    if level > newest:
        names = {lvl: name for name, lvl in JBOD_LEVELS.items()}
        raise SettingsError(
            f"[{where}] image = {image}: a Kafka {release} broker cannot join a cluster at metadata.version "
            f"{metadata_version} (level {level}); Kafka {release} supports up to {names[newest]} (level {newest})"
        )


def _log_dirs(cp: configparser.ConfigParser, section: str) -> tuple[str, ...]:
    count = _int(cp, section, "log_dirs", 2, 9) if cp.has_option(section, "log_dirs") else 2
    return tuple(f"d{i}" for i in range(1, count + 1))


def _cordoned(cp: configparser.ConfigParser, section: str, dirs: tuple[str, ...]) -> tuple[str, ...]:
    if not cp.has_option(section, "cordoned_log_dirs"):
        return ()
    text = _get(cp, section, "cordoned_log_dirs")
    if text == "*":
        return ("*",)
    names = [n.strip() for n in text.split(",")]
    for n in names:
        if not _DIR.match(n) or n not in dirs:
            raise SettingsError(
                f"[{section}] cordoned_log_dirs = {text!r}: {n!r} is not one of its log dirs {', '.join(dirs)} (or '*')"
            )
    if len(set(names)) != len(names):
        raise SettingsError(f"[{section}] cordoned_log_dirs = {text!r} names a dir twice")
    return tuple(sorted(names, key=dirs.index))


def parse_settings(text: str, where: str = "settings") -> Settings:
    """Parse and validate settings text.

    Raises:
        SettingsError: malformed INI, a missing or unusable value, or an inconsistency
            between values (duplicate ids or ports, a metadata.version a broker lacks).
    """
    cp = configparser.ConfigParser(interpolation=None)
    try:
        cp.read_string(text, source=where)
    except configparser.Error as exc:
        raise SettingsError(f"{where}: {exc}") from None

    if cp.has_section("controller"):
        _known_keys(cp, "controller", _CONTROLLER_KEYS)
    controller_id = _int(cp, "controller", "node_id", 0, 2**31 - 1)
    controller_port = _int(cp, "controller", "port", 1, 65535)
    controller_image = _get(cp, "controller", "image")

    cluster_sections: dict[str, str] = {}
    broker_sections: list[tuple[str, str]] = []
    for section in cp.sections():
        if section == "controller":
            continue
        prefix, _, name = section.partition(".")
        if prefix == "cluster" and _NAME.match(name):
            cluster_sections[name] = section
        elif prefix == "broker" and _NAME.match(name) and name != "controller":
            broker_sections.append((name, section))
        else:
            raise SettingsError(
                f"[{section}]: sections are [controller], [cluster.NAME] and [broker.NAME] "
                "with NAME lower-case letters, digits and '-' (a broker may not be named controller)"
            )
    if not cluster_sections:
        raise SettingsError("no [cluster.NAME] section: render.py needs at least one cluster")

    brokers_of: dict[str, list[Broker]] = {name: [] for name in cluster_sections}
    for service, section in broker_sections:
        _known_keys(cp, section, _BROKER_KEYS)
        cluster = _get(cp, section, "cluster")
        if cluster not in brokers_of:
            raise SettingsError(f"[{section}] cluster = {cluster!r} has no [cluster.{cluster}] section")
        dirs = _log_dirs(cp, section)
        brokers_of[cluster].append(
            Broker(
                service=service,
                cluster=cluster,
                image=_get(cp, section, "image"),
                node_id=_int(cp, section, "node_id", 0, 2**31 - 1),
                external_port=_int(cp, section, "external_port", 1, 65535),
                dir_names=dirs,
                cordoned=_cordoned(cp, section, dirs),
            )
        )

    clusters: list[Cluster] = []
    for name, section in cluster_sections.items():
        _known_keys(cp, section, _CLUSTER_KEYS)
        cluster_id = check_cluster_id(_get(cp, section, "cluster_id"), section)
        mv = _get(cp, section, "metadata_version")
        if mv not in JBOD_LEVELS:
            raise SettingsError(f"[{section}] metadata_version = {mv!r}: JBOD needs one of {', '.join(JBOD_LEVELS)}")
        host_port = _int(cp, section, "controller_host_port", 0, 65535)
        brokers = brokers_of[name]
        if not brokers:
            raise SettingsError(f"[{section}] has no broker: give a [broker.NAME] section cluster = {name}")
        ids = [controller_id] + [b.node_id for b in brokers]
        if len(set(ids)) != len(ids):
            raise SettingsError(
                f"[{section}] node ids {ids} repeat: a broker may not share the controller's or another broker's id"
            )
        services = {b.service for b in brokers}
        for b in brokers:
            if f"{b.service}-storage" in services:
                raise SettingsError(f"broker name {b.service}-storage clashes with the format step of {b.service}")
            check_release_joins(b.image, mv, f"broker.{b.service}")
            if b.cordoned:
                release = release_of_image(b.image)
                if release is not None and _release_key(release) < CORDON_MIN_RELEASE:
                    raise SettingsError(
                        f"[broker.{b.service}] cordoned_log_dirs: Kafka {release} has no cordoned.log.dirs "
                        "(KIP-1066, Kafka 4.3 or later)"
                    )
                if JBOD_LEVELS[mv] < CORDON_MIN_LEVEL:
                    raise SettingsError(
                        f"[broker.{b.service}] cordoned_log_dirs: cluster {name} is at {mv}; cordoned log dirs "
                        f"need metadata.version 4.3-IV0 (level {CORDON_MIN_LEVEL}) or later"
                    )
        clusters.append(Cluster(name, cluster_id, mv, host_port, tuple(brokers)))

    cluster_ids = [c.cluster_id for c in clusters]
    if len(set(cluster_ids)) != len(cluster_ids):
        raise SettingsError(f"cluster ids {cluster_ids} repeat: every cluster needs its own")
    # Host ports across every cluster: the stacks may run side by side on one machine.
    ports = [p for c in clusters for p in [b.external_port for b in c.brokers] + [c.controller_host_port] if p]
    if len(set(ports)) != len(ports):
        raise SettingsError(f"host ports {ports} repeat (across all clusters)")
    return Settings(controller_id, controller_port, controller_image, tuple(clusters))


def load_settings(path: Path) -> Settings:
    """Raises SettingsError for an unreadable or invalid settings file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise SettingsError(f"{path} is not UTF-8: {exc.reason}") from None
    return parse_settings(text, str(path))


# --------------------------------------------------------------------------- rendering


def _fill(templates: Path, name: str, values: dict[str, str]) -> str:
    path = templates / name
    try:
        template = Template(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SettingsError(f"cannot read template {path}: {exc.strerror}") from None
    try:
        return template.substitute(values)
    except KeyError as exc:
        raise SettingsError(f"template {path} names ${{{exc.args[0]}}}, which is not a setting") from None
    except ValueError as exc:
        raise SettingsError(f"template {path}: {exc}") from None


def _cordon_lines(b: Broker) -> str:
    if not b.cordoned:
        return ""
    return (
        "# KIP-1066: cordoned dirs keep their replicas but get no new ones; the broker reports\n"
        "# their ids in BrokerHeartbeat v2 CordonedLogDirs once it has caught up.\n"
        f"cordoned.log.dirs={b.cordoned_log_dirs}\n"
    )


def render(settings: Settings, templates: Path = TEMPLATES) -> dict[str, str]:
    """Every generated file: relative path (under the output dir) -> text.

    Raises:
        SettingsError: a template is unreadable or names an unknown value.
    """
    files: dict[str, str] = {}
    for cluster in settings.clusters:
        common = {
            "cluster": cluster.name,
            "project": cluster.project,
            "generated": cluster.generated,
            "cluster_id": cluster.cluster_id,
            "metadata_version": cluster.metadata_version,
            "level": str(cluster.level),
            "controller_id": str(settings.controller_id),
            "controller_port": str(settings.controller_port),
            "controller_image": settings.controller_image,
        }
        files[f"{cluster.generated}/controller.properties"] = _fill(templates, "controller.properties.tmpl", common)
        broker_blocks: list[str] = []
        volume_lines: list[str] = []
        for b in cluster.brokers:
            mounts = "".join(f"      - {b.service}-{d}:{LOG_DIR_ROOT}/{d}\n" for d in b.dir_names)
            values = dict(
                common,
                service=b.service,
                image=b.image,
                node_id=str(b.node_id),
                external_port=str(b.external_port),
                log_dirs=",".join(b.log_dirs),
                dir_count=str(len(b.dir_names)),
                cordoned=_cordon_lines(b),
                volume_mounts=mounts,
            )
            files[f"{cluster.generated}/{b.service}.properties"] = _fill(templates, "server.properties.tmpl", values)
            broker_blocks.append(_fill(templates, "compose-broker.yaml.tmpl", values))
            volume_lines += [f"  {b.service}-{d}:\n" for d in b.dir_names]
        ports = ""
        if cluster.controller_host_port:
            ports = f'    ports:\n      - "127.0.0.1:{cluster.controller_host_port}:{settings.controller_port}"\n'
        files[cluster.compose_file] = _fill(
            templates,
            "compose.yaml.tmpl",
            dict(common, controller_ports=ports, brokers="".join(broker_blocks), volumes="".join(volume_lines)),
        )
    return files


def orphans(out: Path, files: dict[str, str]) -> list[str]:
    """Rendered files under ``out`` (compose*.yaml, generated/**) that ``files`` no longer
    contains: left over from a renamed cluster or broker. Only files carrying the marker."""
    found = list(out.glob("compose*.yaml")) + [p for p in (out / "generated").rglob("*") if p.is_file()]
    bad = []
    for path in found:
        rel = path.relative_to(out).as_posix()
        if rel in files:
            continue
        try:
            head = path.read_text(encoding="utf-8")[:400]
        except (OSError, UnicodeDecodeError):
            continue
        if MARKER in head:
            bad.append(rel)
    return sorted(bad)


def write(out: Path, files: dict[str, str]) -> list[Path]:
    """Write the rendered files under ``out`` and delete orphans; returns the paths written.

    Raises:
        OSError: a file cannot be written.
    """
    written = []
    for rel, text in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)  # never leave a half-written config behind
        written.append(path)
    for rel in orphans(out, files):
        (out / rel).unlink()
    return written


def stale(out: Path, files: dict[str, str]) -> list[str]:
    """Relative paths whose file under ``out`` is missing or differs from the rendering,
    then rendered files that no setting produces any more."""
    bad = []
    for rel, text in sorted(files.items()):
        try:
            current = (out / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current != text:
            bad.append(rel)
    return bad + orphans(out, files)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--settings", type=Path, default=DEFAULT_SETTINGS, help="settings file (default: %(default)s)")
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is stale")
    args = ap.parse_args(argv)
    try:
        files = render(load_settings(args.settings))
    except SettingsError as exc:
        print(f"render.py: {exc}", file=sys.stderr)
        return 2
    if args.check:
        bad = stale(args.out, files)
        for rel in bad:
            print(f"render.py: {args.out / rel} is stale; run docker/render.py", file=sys.stderr)
        return 1 if bad else 0
    try:
        for path in write(args.out, files):
            print(path)
    except OSError as exc:
        print(f"render.py: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
