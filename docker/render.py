#!/usr/bin/env python3
"""Render the compose stack's files from one settings file (stdlib only).

Reads ``docker/settings.ini`` (a ``[cluster]`` section, a ``[controller]`` section and one
``[broker.NAME]`` section per real Kafka broker) and fills the ``string.Template`` files in
``docker/config/``: ``compose.yaml`` and ``generated/controller.properties`` plus one
``generated/NAME.properties`` per broker. ``--check`` renders in memory and reports files
that differ from what is on disk (exit 1), so the checked-in files cannot drift from
the settings.

Invariants:

* Every value reaches every file from the one settings object: the cluster id in the
  controller's command and in each broker's format step, the controller's node id and
  port in each broker's ``controller.quorum.voters``, the metadata.version in both.
* Settings are validated before anything is written: the cluster id is a Kafka uuid
  (22 base64url characters, 16 bytes), node ids are distinct and no broker is the
  controller, ports are distinct and in range, and metadata.version supports JBOD
  (3.7-IV2 or later) and is no newer than the oldest broker release understands.
* A template that names a value the renderer does not supply is an error, not an
  empty string (``Template.substitute``).

Runs on the user's machine without the package installed, hence no ``kraft_jbod``
imports here.
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

# metadata.version names from 3.7-IV2 (the first with directory assignment) to the newest
# production level the kraft-jbod controller writes; levels are Kafka's feature levels.
JBOD_LEVELS: dict[str, int] = {
    "3.7-IV2": 17,
    "3.7-IV3": 18,
    "3.7-IV4": 19,
    "3.8-IV0": 20,
    "3.9-IV0": 21,
    "4.0-IV0": 22,
}
# Newest production metadata.version of each Kafka release line (a broker refuses a
# log whose level it does not support). 4.x brokers support every level above.
RELEASE_MAX_LEVEL: dict[str, int] = {"3.7": 19, "3.8": 20, "3.9": 21}
# Kafka 4.x dropped metadata.version levels below 3.3-IV3; all JBOD levels are above it.

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,40}$")
_TAG = re.compile(r":(\d+)\.(\d+)[^:/]*$")


class SettingsError(ValueError):
    """The settings file is missing, malformed or inconsistent; the message says where."""


@dataclass(frozen=True, slots=True)
class Broker:
    service: str
    image: str
    node_id: int
    external_port: int


@dataclass(frozen=True, slots=True)
class Settings:
    cluster_id: str
    metadata_version: str
    controller_id: int
    controller_port: int
    controller_host_port: int
    controller_image: str
    brokers: tuple[Broker, ...]

    @property
    def voters(self) -> str:
        """The ``controller.quorum.voters`` value every broker gets."""
        return f"{self.controller_id}@controller:{self.controller_port}"


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


def check_cluster_id(text: str) -> str:
    """Raises SettingsError unless ``text`` is a Kafka uuid string (as kafka-storage wants)."""
    if len(text) != 22 or not re.fullmatch(r"[A-Za-z0-9_-]+", text):
        raise SettingsError(f"[cluster] cluster_id = {text!r} is not 22 base64url characters")
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, binascii.Error):
        raise SettingsError(f"[cluster] cluster_id = {text!r} is not base64url") from None
    if len(raw) != 16 or base64.urlsafe_b64encode(raw).rstrip(b"=").decode() != text:
        raise SettingsError(f"[cluster] cluster_id = {text!r} does not encode exactly 16 bytes")
    return text


def release_of_image(image: str) -> str | None:
    """``"3.9"`` for ``apache/kafka:3.9.1``; None when the tag is not a version."""
    m = _TAG.search(image)
    return f"{m[1]}.{m[2]}" if m else None


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

    cluster_id = check_cluster_id(_get(cp, "cluster", "cluster_id"))
    mv = _get(cp, "cluster", "metadata_version")
    if mv not in JBOD_LEVELS:
        raise SettingsError(
            f"[cluster] metadata_version = {mv!r}: JBOD needs one of {', '.join(JBOD_LEVELS)}"
        )
    controller_id = _int(cp, "controller", "node_id", 0, 2**31 - 1)
    controller_port = _int(cp, "controller", "port", 1, 65535)
    host_port = _int(cp, "controller", "host_port", 0, 65535)
    controller_image = _get(cp, "controller", "image")

    brokers: list[Broker] = []
    for section in cp.sections():
        if section in ("cluster", "controller"):
            continue
        prefix, _, service = section.partition(".")
        if prefix != "broker" or not _NAME.match(service) or service == "controller":
            raise SettingsError(
                f"[{section}]: sections are [cluster], [controller] and [broker.NAME] "
                "with NAME lower-case letters, digits and '-'"
            )
        brokers.append(
            Broker(
                service=service,
                image=_get(cp, section, "image"),
                node_id=_int(cp, section, "node_id", 0, 2**31 - 1),
                external_port=_int(cp, section, "external_port", 1, 65535),
            )
        )
    if not brokers:
        raise SettingsError("no [broker.NAME] section: the stack needs at least one broker")

    ids = [controller_id] + [b.node_id for b in brokers]
    if len(set(ids)) != len(ids):
        raise SettingsError(f"node ids {ids} repeat: a broker may not share the controller's or another broker's id")
    ports = [b.external_port for b in brokers] + ([host_port] if host_port else [])
    if len(set(ports)) != len(ports):
        raise SettingsError(f"host ports {ports} repeat")
    services = {b.service for b in brokers}
    for b in brokers:
        if f"{b.service}-storage" in services:
            raise SettingsError(f"broker name {b.service}-storage clashes with the format step of {b.service}")
        release = release_of_image(b.image)
        if release is not None and JBOD_LEVELS[mv] > RELEASE_MAX_LEVEL.get(release, 10**6):
            raise SettingsError(
                f"[cluster] metadata_version = {mv} is newer than {b.image} (Kafka {release}) supports"
            )
    return Settings(cluster_id, mv, controller_id, controller_port, host_port, controller_image, tuple(brokers))


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


def render(settings: Settings, templates: Path = TEMPLATES) -> dict[str, str]:
    """Every generated file: relative path (under the output dir) -> text.

    Raises:
        SettingsError: a template is unreadable or names an unknown value.
    """
    common = {
        "cluster_id": settings.cluster_id,
        "metadata_version": settings.metadata_version,
        "controller_id": str(settings.controller_id),
        "controller_port": str(settings.controller_port),
        "controller_image": settings.controller_image,
    }
    files: dict[str, str] = {"generated/controller.properties": _fill(templates, "controller.properties.tmpl", common)}
    broker_blocks: list[str] = []
    volume_lines: list[str] = []
    for b in settings.brokers:
        values = dict(common, service=b.service, image=b.image, node_id=str(b.node_id),
                      external_port=str(b.external_port))
        files[f"generated/{b.service}.properties"] = _fill(templates, "server.properties.tmpl", values)
        broker_blocks.append(_fill(templates, "compose-broker.yaml.tmpl", values))
        volume_lines += [f"  {b.service}-d1:\n", f"  {b.service}-d2:\n"]
    ports = ""
    if settings.controller_host_port:
        ports = f'    ports:\n      - "127.0.0.1:{settings.controller_host_port}:{settings.controller_port}"\n'
    files["compose.yaml"] = _fill(
        templates,
        "compose.yaml.tmpl",
        dict(common, controller_ports=ports, brokers="".join(broker_blocks), volumes="".join(volume_lines)),
    )
    return files


def write(out: Path, files: dict[str, str]) -> list[Path]:
    """Write the rendered files under ``out``; returns the paths written.

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
    return written


def stale(out: Path, files: dict[str, str]) -> list[str]:
    """Relative paths whose file under ``out`` is missing or differs from the rendering."""
    bad = []
    for rel, text in sorted(files.items()):
        try:
            current = (out / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current != text:
            bad.append(rel)
    return bad


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
