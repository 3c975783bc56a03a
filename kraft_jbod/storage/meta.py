"""``meta.properties``: read, write, format and inspect a node's storage directories.

A KRaft node keeps one ``meta.properties`` at the root of every ``log.dirs`` entry and of
``metadata.log.dir``. Kafka writes it with ``java.util.Properties.store(writer, "")``: a
``#`` line, a ``#<date>`` line, then ``key=value`` lines; version 1 holds ``node.id``,
``version``, ``cluster.id`` and (KIP-858) ``directory.id``, the base64url id of that
directory. We write exactly that shape, in the key order Kafka's files show, so Kafka
reads our files and we read Kafka's (any key order, comments, escapes, unknown keys kept).

Invariants:

* A written file is complete or absent: it goes to a temporary name, is fsync'd, renamed
  over the old one and the directory is fsync'd.
* ``directory.id`` is never a reserved id (msb 0, signed lsb < 100) and never a string
  starting with ``-``; two directories of one node never share an id; an id already on
  disk is kept.
* Nothing is written for a node whose directories disagree (other cluster or node id,
  duplicate ids): the whole format is refused with a :class:`StorageError` first.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from kraft_jbod.errors import ConfigError, StorageError
from kraft_jbod.properties import load_properties, parse_properties
from kraft_jbod.wire.primitives import is_reserved_directory_id, uuid_from_base64url, uuid_to_base64url

META_PROPERTIES: Final = "meta.properties"
DEFAULT_LOG_DIR: Final = "/tmp/kafka-logs"
_KNOWN_KEYS: Final = ("node.id", "version", "cluster.id", "directory.id")


@dataclass(slots=True, frozen=True)
class MetaProperties:
    """The contents of one ``meta.properties`` (``extra`` keeps keys we do not interpret)."""

    version: int
    cluster_id: str | None
    node_id: int | None
    directory_id: uuid.UUID | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


def new_directory_id() -> uuid.UUID:
    """A random directory id Kafka would accept: not reserved, string not starting with '-'."""
    while True:
        u = uuid.uuid4()
        if not is_reserved_directory_id(u) and not uuid_to_base64url(u).startswith("-"):
            return u


def parse_meta_properties(text: str, where: str = "meta.properties") -> MetaProperties:
    """Parse the text of a ``meta.properties`` file.

    Raises:
        StorageError: a missing or malformed version, node.id, cluster.id or directory.id.
    """
    try:
        props = parse_properties(text)
    except ConfigError as exc:
        raise StorageError(f"{where}: {exc}") from None
    version_text = props.get("version")
    if version_text not in ("0", "1"):
        raise StorageError(f"{where}: version must be 0 or 1, not {version_text!r}")
    version = int(version_text)
    node_id: int | None = None
    key = "node.id" if version == 1 else "broker.id"
    if key in props:
        try:
            node_id = int(props[key])
        except ValueError:
            raise StorageError(f"{where}: {key}={props[key]!r} is not an integer") from None
        if node_id < 0:
            raise StorageError(f"{where}: {key}={node_id} is negative")
    elif version == 1:
        raise StorageError(f"{where}: version 1 needs node.id")
    cluster_id = props.get("cluster.id")
    if version == 1 and not cluster_id:
        raise StorageError(f"{where}: version 1 needs cluster.id")
    dir_id: uuid.UUID | None = None
    if "directory.id" in props:
        try:
            dir_id = uuid_from_base64url(props["directory.id"])
        except ValueError as exc:
            raise StorageError(f"{where}: directory.id {props['directory.id']!r} is not a Kafka uuid: {exc}") from None
        if is_reserved_directory_id(dir_id):
            raise StorageError(f"{where}: directory.id {props['directory.id']} is a reserved id")
    extra = {k: v for k, v in props.items() if k not in _KNOWN_KEYS and k != "broker.id"}
    return MetaProperties(version, cluster_id, node_id, dir_id, extra)


def _escape(text: str, *, is_key: bool) -> str:
    # Properties.store escapes these so load reads the same string back.
    out = []
    for i, c in enumerate(text):
        if c == "\\":
            out.append("\\\\")
        elif c in "=:#!":
            out.append("\\" + c)
        elif c == " " and (is_key or i == 0):
            out.append("\\ ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif ord(c) < 0x20 or ord(c) > 0x7E:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return "".join(out)


def render_meta_properties(meta: MetaProperties, now: float | None = None) -> str:
    """The file text, as ``Properties.store(writer, "")`` lays it out."""
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(time.time() if now is None else now))
    lines = ["#", f"#{stamp}"]
    items: list[tuple[str, str]] = []
    if meta.node_id is not None:
        items.append(("node.id" if meta.version == 1 else "broker.id", str(meta.node_id)))
    items.append(("version", str(meta.version)))
    if meta.cluster_id is not None:
        items.append(("cluster.id", meta.cluster_id))
    if meta.directory_id is not None:
        items.append(("directory.id", uuid_to_base64url(meta.directory_id)))
    items.extend(sorted(meta.extra.items()))
    lines += [f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}" for k, v in items]
    return "\n".join(lines) + "\n"


def read_meta_properties(directory: Path) -> MetaProperties | None:
    """The ``meta.properties`` of ``directory``, or None when the file does not exist.

    Raises:
        StorageError: the file exists but cannot be read or parsed.
    """
    path = directory / META_PROPERTIES
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"cannot read {path}: {exc}") from None
    return parse_meta_properties(text, str(path))


def write_meta_properties(directory: Path, meta: MetaProperties, now: float | None = None) -> None:
    """Write ``meta.properties`` atomically (temp file, fsync, rename, fsync the directory).

    Raises:
        StorageError: the directory cannot be created or written.
    """
    path = directory / META_PROPERTIES
    tmp = directory / (META_PROPERTIES + ".tmp")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(render_meta_properties(meta, now))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from None


# --------------------------------------------------------------------------- a node's layout


@dataclass(slots=True, frozen=True)
class StorageLayout:
    """Where a node keeps data: ``log.dirs`` and ``metadata.log.dir`` (Kafka's defaults)."""

    node_id: int
    log_dirs: tuple[Path, ...]
    metadata_log_dir: Path

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> StorageLayout:
        """Read node.id, log.dirs (or log.dir) and metadata.log.dir.

        Raises:
            ConfigError: node.id missing or not an integer, or no log directory at all.
        """
        text = props.get("node.id", "").strip()
        if not text:
            raise ConfigError("node.id is required in KRaft mode")
        try:
            node_id = int(text)
        except ValueError:
            raise ConfigError(f"node.id: {text!r} is not an integer") from None
        raw = props.get("log.dirs") or props.get("log.dir") or DEFAULT_LOG_DIR
        dirs = tuple(Path(d.strip()) for d in raw.split(",") if d.strip())
        if not dirs:
            raise ConfigError(f"log.dirs: {raw!r} names no directory")
        if len(set(dirs)) != len(dirs):
            raise ConfigError(f"log.dirs: {raw!r} names a directory twice")
        meta_text = (props.get("metadata.log.dir") or "").strip()
        return cls(node_id, dirs, Path(meta_text) if meta_text else dirs[0])

    @classmethod
    def load(cls, path: Path) -> StorageLayout:
        """Raises ConfigError for an unreadable file or unusable values."""
        return cls.from_properties(load_properties(path))

    @property
    def all_dirs(self) -> list[Path]:
        """log.dirs then metadata.log.dir when it is a separate directory."""
        out = list(self.log_dirs)
        if self.metadata_log_dir not in out:
            out.append(self.metadata_log_dir)
        return out


@dataclass(slots=True, frozen=True)
class DirResult:
    """What format/ensure did to one directory."""

    path: Path
    meta: MetaProperties
    action: str  # "formatted", "kept", "added directory.id"


def _check_distinct(dirs: Sequence[Path]) -> None:
    """Two configured directories must not be one directory (a symlink, ``..``, a repeat)."""
    seen: dict[str, Path] = {}
    for d in dirs:
        real = os.path.realpath(d)
        other = seen.get(real)
        if other is not None:
            raise StorageError(f"{d} and {other} are the same directory ({real}); list each log dir once")
        seen[real] = d


def _check_consistent(
    found: Sequence[tuple[Path, MetaProperties | None]], cluster_id: str | None, node_id: int
) -> None:
    seen: dict[uuid.UUID, Path] = {}
    for path, meta in found:
        if meta is None:
            continue
        if meta.version != 1:
            raise StorageError(f"{path}: meta.properties version {meta.version} is not a KRaft (version 1) file")
        if cluster_id is not None and meta.cluster_id != cluster_id:
            raise StorageError(f"{path} belongs to cluster {meta.cluster_id}, not {cluster_id}")
        if meta.node_id != node_id:
            raise StorageError(f"{path} belongs to node {meta.node_id}, not node.id={node_id}")
        if meta.directory_id is not None:
            other = seen.get(meta.directory_id)
            if other is not None:
                raise StorageError(
                    f"{path} and {other} have the same directory.id {uuid_to_base64url(meta.directory_id)}"
                )
            seen[meta.directory_id] = path


def _complete(
    layout: StorageLayout,
    cluster_id: str,
    found: list[tuple[Path, MetaProperties | None]],
    now: float | None,
    metadata_directory_id: uuid.UUID | None = None,
) -> list[DirResult]:
    taken = {m.directory_id for _, m in found if m is not None and m.directory_id is not None}
    results: list[DirResult] = []
    for path, meta in found:
        if meta is not None and meta.directory_id is not None:
            results.append(DirResult(path, meta, "kept"))
            continue
        if meta is None and path == layout.metadata_log_dir and metadata_directory_id is not None:
            taken.add(metadata_directory_id)
            meta = MetaProperties(1, cluster_id, layout.node_id, metadata_directory_id)
            write_meta_properties(path, meta, now)
            results.append(DirResult(path, meta, "formatted"))
            continue
        new_id = new_directory_id()
        while new_id in taken:
            new_id = new_directory_id()
        taken.add(new_id)
        if meta is None:
            meta = MetaProperties(1, cluster_id, layout.node_id, new_id)
            action = "formatted"
        else:
            meta = replace(meta, directory_id=new_id)
            action = "added directory.id"
        write_meta_properties(path, meta, now)
        results.append(DirResult(path, meta, action))
    return results


def format_storage(
    layout: StorageLayout,
    cluster_id: str,
    *,
    now: float | None = None,
    metadata_directory_id: uuid.UUID | None = None,
) -> list[DirResult]:
    """``kafka-storage format``: meta.properties in every directory, existing ids kept.

    ``metadata_directory_id``: the id an unformatted ``metadata.log.dir`` gets (the one
    ``--initial-controllers`` names for this controller); default a fresh one.

    Raises:
        StorageError: a directory holds another cluster or node id, two directories share
            an id (``metadata_directory_id`` included), or a file cannot be read or written.
            Nothing is written in the first two cases.
    """
    try:
        uuid_from_base64url(cluster_id)
    except ValueError as exc:
        raise StorageError(f"cluster id {cluster_id!r} is not a Kafka uuid: {exc}") from None
    _check_distinct(layout.all_dirs)
    found = [(d, read_meta_properties(d)) for d in layout.all_dirs]
    _check_consistent(found, cluster_id, layout.node_id)
    if metadata_directory_id is not None:
        for path, meta in found:
            if path != layout.metadata_log_dir and meta is not None and meta.directory_id == metadata_directory_id:
                raise StorageError(
                    f"{path} already has directory.id {uuid_to_base64url(metadata_directory_id)}, the one "
                    f"given for the metadata directory {layout.metadata_log_dir}"
                )
    return _complete(layout, cluster_id, found, now, metadata_directory_id)


def ensure_directory_ids(layout: StorageLayout, *, now: float | None = None) -> list[DirResult]:
    """Broker startup (KIP-858): load every directory id, generating missing ones.

    A log directory without meta.properties is formatted with the cluster id the other
    directories agree on, as Kafka does for a newly added log dir.

    Raises:
        StorageError: no directory is formatted, the directories disagree, or two share an id.
    """
    _check_distinct(layout.all_dirs)
    found = [(d, read_meta_properties(d)) for d in layout.all_dirs]
    clusters = {m.cluster_id for _, m in found if m is not None}
    if not clusters:
        raise StorageError(
            f"no meta.properties in {', '.join(map(str, layout.all_dirs))}: run `kraft-jbod storage format` first"
        )
    if len(clusters) > 1:
        raise StorageError(f"the directories belong to different clusters: {sorted(c or '?' for c in clusters)}")
    cluster_id = clusters.pop()
    assert cluster_id is not None  # version 1 files always carry one
    _check_consistent(found, cluster_id, layout.node_id)
    return _complete(layout, cluster_id, found, now)


@dataclass(frozen=True, slots=True)
class BrokerDirs:
    """What a broker's start-up found: the readable directories (ids loaded or added) and
    the unreadable ones, which stay offline (their ids are unknown)."""

    cluster_id: str
    results: list[DirResult]
    failed: list[tuple[Path, str]]


def load_broker_dirs(layout: StorageLayout, *, now: float | None = None) -> BrokerDirs:
    """A Kafka 4.4 broker's start-up (``KafkaRaftServer.initializeLogDirs`` and
    ``MetaPropertiesEnsemble``): read every directory's meta.properties.

    * missing (no file, or no directory at all): an *empty* directory, which stops the start
      ("No meta.properties found ... have you run kafka-storage.sh to format the
      directory?"): Kafka never formats a log dir by itself;
    * unreadable (a file where the directory should be, no permission, a damaged file): a
      *failed* directory, offline from the start, unless it is ``metadata.log.dir``;
    * readable: checked (one cluster, this node, no id twice) and, lacking a
      ``directory.id``, given one and rewritten.

    Raises:
        StorageError: no readable meta.properties at all, the metadata directory unreadable,
            an empty directory, or the readable ones disagree.
    """
    _check_distinct(layout.all_dirs)
    found: list[tuple[Path, MetaProperties | None]] = []
    empty: list[Path] = []
    failed: list[tuple[Path, str]] = []
    for d in layout.all_dirs:
        try:
            meta = read_meta_properties(d)
        except StorageError as exc:
            failed.append((d, str(exc)))
            continue
        if meta is None:
            empty.append(d)
        else:
            found.append((d, meta))
    if not found:
        raise StorageError(f"no readable meta.properties in {', '.join(map(str, layout.all_dirs))}")
    clusters = {m.cluster_id for _, m in found if m is not None}
    if len(clusters) > 1:
        raise StorageError(f"the directories belong to different clusters: {sorted(c or '?' for c in clusters)}")
    cluster_id = clusters.pop()
    if not cluster_id:
        raise StorageError(f"cluster.id was not specified in {found[0][0] / META_PROPERTIES}")
    _check_consistent(found, cluster_id, layout.node_id)
    if any(d == layout.metadata_log_dir for d, _ in failed):
        raise StorageError(
            f"I/O error in the metadata log directory {layout.metadata_log_dir}, cannot continue: "
            + next(why for d, why in failed if d == layout.metadata_log_dir)
        )
    if empty:
        raise StorageError(
            f"no meta.properties in {empty[0]}: format it first (`kraft-jbod storage format`, which keeps "
            "the other directories' ids, as `kafka-storage.sh format --ignore-formatted` does)"
        )
    return BrokerDirs(cluster_id, _complete(layout, cluster_id, found, now), failed)


def ensure_metadata_dir(
    directory: Path,
    node_id: int,
    cluster_id: str | None,
    *,
    now: float | None = None,
    directory_id: uuid.UUID | None = None,
) -> str:
    """A controller's ``metadata.log.dir``: read its meta.properties, or format it.

    ``cluster_id`` is the one asked for; None means "keep the one on disk, or pick a
    random one" (Kafka's ``Uuid.randomUuid``: never a string starting with '-'). An
    existing file must hold the same node id and the requested cluster id. Returns the
    cluster id in force. ``directory_id``: the one a new file gets (the id
    ``--initial-controllers`` gives this controller; default: a fresh one).

    Raises:
        StorageError: the file is unreadable or belongs to another node or cluster.
    """
    meta = read_meta_properties(directory)
    if meta is None:
        if cluster_id is None:
            cluster_id = uuid_to_base64url(new_directory_id())
        try:
            uuid_from_base64url(cluster_id)
        except ValueError as exc:
            raise StorageError(f"cluster id {cluster_id!r} is not a Kafka uuid: {exc}") from None
        new_id = directory_id if directory_id is not None else new_directory_id()
        write_meta_properties(directory, MetaProperties(1, cluster_id, node_id, new_id), now)
        return cluster_id
    path = directory / META_PROPERTIES
    if not meta.cluster_id:
        raise StorageError(f"{path} has no cluster.id")
    if meta.node_id is not None and meta.node_id != node_id:
        raise StorageError(f"{path} belongs to node {meta.node_id}, not node.id={node_id}")
    if cluster_id is not None and cluster_id != meta.cluster_id:
        raise StorageError(f"{path} holds cluster.id {meta.cluster_id}, not the requested {cluster_id}")
    return meta.cluster_id


def storage_info(layout: StorageLayout) -> list[dict[str, object]]:
    """One row per directory: path, whether formatted, the keys found, or the error
    (including a directory listed twice, or a directory.id another directory has too)."""
    rows: list[dict[str, object]] = []
    real_seen: dict[str, Path] = {}
    ids_seen: dict[uuid.UUID, Path] = {}
    for d in layout.all_dirs:
        row: dict[str, object] = {"path": str(d), "metadata": d == layout.metadata_log_dir}
        real = os.path.realpath(d)
        if real in real_seen:
            row["error"] = f"the same directory as {real_seen[real]} ({real})"
            rows.append(row)
            continue
        real_seen[real] = d
        try:
            meta = read_meta_properties(d)
        except StorageError as exc:
            row["error"] = str(exc)
            rows.append(row)
            continue
        if meta is None:
            row["formatted"] = False
        else:
            row.update(
                formatted=True,
                version=meta.version,
                cluster_id=meta.cluster_id,
                node_id=meta.node_id,
                directory_id=None if meta.directory_id is None else uuid_to_base64url(meta.directory_id),
            )
            if meta.directory_id is not None:
                other = ids_seen.setdefault(meta.directory_id, d)
                if other != d:
                    row["error"] = f"directory.id {uuid_to_base64url(meta.directory_id)} is also in {other}"
        rows.append(row)
    return rows
