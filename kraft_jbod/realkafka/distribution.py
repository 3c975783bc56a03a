"""Find a runnable Apache Kafka: a distribution's ``libs/`` or a source build's ``classpath``.

Two shapes are accepted, both pointed at by one folder (``--kafka DIR`` or
``KRAFT_JBOD_KAFKA_HOME``):

* an Apache Kafka binary distribution (``bin/``, ``libs/kafka_2.13-X.Y.Z.jar``): the class
  path is every jar in ``libs/``, the release is read from that jar's name;
* a folder built by the project's ``tools/kafka_broker.py`` (Kafka 4.4 from source): a
  ``classpath`` file and ``BUILD-INFO`` naming the version.

Only releases 3.7 and later run KRaft with several log directories (KIP-858), and the
tooling here is exercised with 3.9 to 4.4; older ones are refused with the reason.
Confluent's builds carry their own numbering (``8.4.0-0-ccs`` is Apache Kafka 4.4): the
release is mapped back so version checks speak Apache Kafka's numbers.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kraft_jbod.errors import ConfigError

ENV_HOME: Final = "KRAFT_JBOD_KAFKA_HOME"
OLDEST_RELEASE: Final = (3, 7)
_LIBS_JAR: Final = re.compile(r"^kafka_2\.1[23]-(\d+)\.(\d+)\.(\d+)[^/]*\.jar$")
_BUILD_VERSION: Final = re.compile(r"kafka version:\s*(\d+)\.(\d+)\.(\d+)(\S*)")
# Confluent Platform's major version is Apache Kafka's plus 4 from CP 8 / AK 4 on.
_CONFLUENT_OFFSET: Final = 4


@dataclass(frozen=True)
class KafkaDistribution:
    """A runnable Kafka: where it is, its Java class path and its Apache Kafka release."""

    home: Path
    classpath: str
    release: tuple[int, int]
    version: str
    kind: str  # "distribution" or "source build"

    @property
    def release_name(self) -> str:
        return f"{self.release[0]}.{self.release[1]}"

    def at_least(self, major: int, minor: int) -> bool:
        return self.release >= (major, minor)


def java_executable() -> str:
    """``$JAVA_HOME/bin/java`` or ``java`` on PATH.

    Raises:
        ConfigError: no Java found.
    """
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ConfigError("java not found: real Kafka needs a Java 17 runtime on PATH or in JAVA_HOME")
    return found


def open_distribution(home: Path) -> KafkaDistribution:
    """The Kafka in ``home`` (a distribution or a source build).

    Raises:
        ConfigError: ``home`` is neither, its files are incomplete, or the release is older
            than 3.7.
    """
    if not home.is_dir():
        raise ConfigError(f"{home}: not a folder (want a Kafka distribution with libs/, or a source build)")
    cp_file = home / "classpath"
    if cp_file.is_file():
        dist = _source_build(home, cp_file)
    elif (home / "libs").is_dir():
        dist = _binary_distribution(home)
    else:
        raise ConfigError(f"{home}: no libs/ folder and no classpath file: not a Kafka distribution or build")
    if dist.release < OLDEST_RELEASE:
        raise ConfigError(
            f"{home}: Kafka {dist.version} predates KRaft with several log dirs (KIP-858 needs 3.7 or later)"
        )
    return dist


def _binary_distribution(home: Path) -> KafkaDistribution:
    jars = sorted(p for p in (home / "libs").glob("*.jar"))
    for jar in jars:
        m = _LIBS_JAR.match(jar.name)
        if m and "-test" not in jar.name and "-javadoc" not in jar.name and "-sources" not in jar.name:
            major, minor, patch = (int(g) for g in m.groups())
            classpath = os.pathsep.join(str(j) for j in jars)
            return KafkaDistribution(home, classpath, (major, minor), f"{major}.{minor}.{patch}", "distribution")
    raise ConfigError(f"{home}/libs: no kafka_2.13-X.Y.Z.jar, cannot tell which Kafka this is")


def _source_build(home: Path, cp_file: Path) -> KafkaDistribution:
    entries = [e for e in cp_file.read_text().strip().split(os.pathsep) if e]
    missing = [e for e in entries if not Path(e).exists()]
    if not entries or missing:
        raise ConfigError(f"{cp_file}: class path entries missing: {', '.join(missing[:3]) or 'none listed'}")
    info = home / "BUILD-INFO"
    m = _BUILD_VERSION.search(info.read_text()) if info.is_file() else None
    if m is None:
        raise ConfigError(f"{info}: no 'kafka version:' line, cannot tell which Kafka this build is")
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3))
    version = f"{major}.{minor}.{patch}{m.group(4)}"
    if "ccs" in m.group(4) and major >= 8:
        major -= _CONFLUENT_OFFSET
    return KafkaDistribution(home, os.pathsep.join(entries), (major, minor), version, "source build")


def from_environment() -> KafkaDistribution | None:
    """The distribution ``KRAFT_JBOD_KAFKA_HOME`` names, or None when it is unset.

    Raises:
        ConfigError: it is set but names no usable Kafka.
    """
    value = os.environ.get(ENV_HOME, "").strip()
    return open_distribution(Path(value)) if value else None
