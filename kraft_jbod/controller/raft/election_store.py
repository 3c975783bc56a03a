"""The ``quorum-state`` file: the election a voter must remember across a restart.

A voter that granted its vote in an epoch must not grant another one in the same epoch after
a crash, and a candidate must not reuse an epoch: so the epoch, the vote and the known leader
are written (and fsync'd) before any message that depends on them leaves the node.

The file is JSON in Kafka's layout (QuorumStateData at data_version 1: ``leaderId``,
``leaderEpoch``, ``votedId``, ``votedDirectoryId``, plus ``data_version``), so a metadata
directory written by one implementation can be read by the other. It is replaced
atomically (write a sibling, fsync, rename, fsync the directory).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

from kraft_jbod.errors import StorageError
from kraft_jbod.wire.primitives import uuid_from_base64url, uuid_to_base64url

FILE_NAME: Final = "quorum-state"
DATA_VERSION: Final = 1
NO_DIRECTORY: Final = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class Election:
    """epoch, leader (-1 unknown) and vote (-1 none) of one voter."""

    epoch: int = 0
    leader_id: int = -1
    voted_id: int = -1
    voted_directory_id: uuid.UUID = NO_DIRECTORY


class ElectionStore(Protocol):
    def read(self) -> Election: ...

    def write(self, election: Election) -> None: ...


class MemoryElectionStore:
    """An :class:`ElectionStore` that survives a node object, for simulations."""

    def __init__(self) -> None:
        self.election = Election()
        self.writes = 0

    def read(self) -> Election:
        return self.election

    def write(self, election: Election) -> None:
        self.election = election
        self.writes += 1


def encode(election: Election) -> str:
    return json.dumps(
        {
            "leaderId": election.leader_id,
            "leaderEpoch": election.epoch,
            "votedId": election.voted_id,
            "votedDirectoryId": uuid_to_base64url(election.voted_directory_id),
            "data_version": DATA_VERSION,
        },
        separators=(",", ":"),
    )


def decode(text: str, *, source: str = FILE_NAME) -> Election:
    """Parse the file's text (data_version 0 or 1).

    Raises:
        StorageError: not JSON, an unknown data_version, or a field of the wrong type.
    """
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise StorageError(f"{source}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise StorageError(f"{source}: expected a JSON object")
    version = doc.get("data_version", 0)
    if version not in (0, 1):
        raise StorageError(f"{source}: data_version {version!r} (this controller reads 0 and 1)")

    def number(key: str) -> int:
        value = doc.get(key, -1)
        if not isinstance(value, int) or isinstance(value, bool):
            raise StorageError(f"{source}: {key} must be an integer, not {value!r}")
        return value

    directory = NO_DIRECTORY
    raw = doc.get("votedDirectoryId")
    if version >= 1 and raw is not None:
        if not isinstance(raw, str):
            raise StorageError(f"{source}: votedDirectoryId must be a string")
        try:
            directory = uuid_from_base64url(raw)
        except ValueError as exc:
            raise StorageError(f"{source}: votedDirectoryId {raw!r}: {exc}") from None
    epoch = number("leaderEpoch")
    return Election(
        epoch=max(epoch, 0), leader_id=number("leaderId"), voted_id=number("votedId"), voted_directory_id=directory
    )


class FileElectionStore:
    """The ``quorum-state`` file in a metadata directory."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME

    def read(self) -> Election:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return Election()
        except (OSError, UnicodeDecodeError) as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from None
        return decode(text, source=str(self.path))

    def write(self, election: Election) -> None:
        tmp = self.path.with_name(FILE_NAME + ".tmp")
        data = encode(election).encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
