"""``--initial-controllers`` and ``--no-initial-controllers``: formatting a dynamic quorum.

Pure: parses and checks what the operator gave, as Kafka 4.4's storage tool does
(``DynamicVoter`` / ``DynamicVoters`` / ``Formatter``), and says what a new metadata log
starts from. Every refusal is a :class:`~kraft_jbod.errors.ConfigError` with one line, raised
before anything is written.

Rules:

Rule 1: the value is a comma-separated list of ``ID@HOST:PORT:DIRECTORY`` (an IPv6 host in
brackets, the directory id in Kafka's base64url form); empty items are skipped, the list
must name at least one controller, and each node id once. Node ids are not negative, ports
are 0-65535.
Rule 2: ``--standalone``, ``--initial-controllers`` and ``--no-initial-controllers`` exclude
one another; ``--standalone`` or ``--initial-controllers`` with a static
``controller.quorum.voters`` is refused (use ``controller.quorum.bootstrap.servers``).
Rule 3: any of the three makes a dynamic quorum, kraft.version 1; ``--feature
kraft.version=0`` with one of them is refused, a non-zero level without one too.
Rule 4: a controller named in the list takes the directory id the list gives it for its
metadata log (its ``meta.properties``); one not named (or formatted with
``--no-initial-controllers``) gets a fresh random id and joins later by AddRaftVoter.
Rule 5: the bootstrap voter set has one endpoint per voter, on the first controller listener
name, and the kraft.version range 0-1 for every voter, as Kafka's formatter writes it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kraft_jbod.controller.raft.voter_set import VoterKey, VoterSet
from kraft_jbod.errors import ConfigError
from kraft_jbod.messages.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from kraft_jbod.wire.primitives import uuid_from_base64url


@dataclass(frozen=True, slots=True)
class InitialController:
    node_id: int
    host: str
    port: int
    directory_id: uuid.UUID


def _one(text: str) -> InitialController:
    raw = text.strip()

    def bad(why: str) -> ConfigError:
        return ConfigError(f"--initial-controllers: {raw!r}: {why} (expected ID@HOST:PORT:DIRECTORY_ID)")

    node, at, rest = raw.partition("@")
    if not at:
        raise bad("no @")
    if not node:
        raise bad("no node id before @")
    try:
        node_id = int(node)
    except ValueError:
        raise bad("the node id is not a number") from None
    if node_id < 0:
        raise bad("the node id is negative")
    if not rest:
        raise bad("no host after the node id")
    if rest.startswith("["):
        host, bracket, rest = rest[1:].partition("]")
        if not bracket:
            raise bad("an IPv6 host with no closing bracket")
    else:
        host, colon, tail = rest.partition(":")
        if not colon:
            raise bad("no colon after the host")
        rest = ":" + tail
    if not rest.startswith(":"):
        raise bad("the port must follow a colon")
    port_text, colon, directory = rest[1:].partition(":")
    if not colon:
        raise bad("no colon after the port")
    try:
        port = int(port_text)
    except ValueError:
        raise bad("the port is not a number") from None
    if not 0 <= port <= 65535:
        raise bad(f"port {port} is out of range")
    try:
        directory_id = uuid_from_base64url(directory)
    except (ValueError, TypeError):
        raise bad("the directory id is not a base64url UUID") from None
    return InitialController(node_id, host, port, directory_id)


def parse_initial_controllers(text: str) -> tuple[InitialController, ...]:
    """Rule 1. Raises :class:`ConfigError` naming the item at fault."""
    controllers: dict[int, InitialController] = {}
    for item in text.strip().split(","):
        if not item:
            continue
        controller = _one(item)
        if controller.node_id in controllers:
            raise ConfigError(f"--initial-controllers: node id {controller.node_id} is given more than once")
        controllers[controller.node_id] = controller
    if not controllers:
        raise ConfigError("--initial-controllers: no controllers given")
    return tuple(controllers[i] for i in sorted(controllers))


def check_dynamic_flags(
    *, static_voters: bool, standalone: bool, initial_controllers: bool, no_initial_controllers: bool
) -> bool:
    """Rule 2; True when the flags ask for a dynamic quorum (Rule 3)."""
    given = [
        flag
        for flag, on in (
            ("--standalone", standalone),
            ("--initial-controllers", initial_controllers),
            ("--no-initial-controllers", no_initial_controllers),
        )
        if on
    ]
    if len(given) > 1:
        raise ConfigError(f"{' and '.join(given)} exclude one another: give one")
    if static_voters and (standalone or initial_controllers):
        raise ConfigError(
            f"{given[0]} makes a dynamic quorum: remove controller.quorum.voters and set "
            "controller.quorum.bootstrap.servers instead"
        )
    return bool(given)


def metadata_directory_id(
    controllers: tuple[InitialController, ...] | None, node_id: int, fresh: uuid.UUID
) -> uuid.UUID:
    """Rule 4: the directory id of this node's metadata log."""
    for c in controllers or ():
        if c.node_id == node_id:
            return c.directory_id
    return fresh


def bootstrap_voters(controllers: tuple[InitialController, ...], listener: str) -> VotersRecord:
    """Rule 5: the VotersRecord (version 0) a log formatted with ``controllers`` starts from."""
    return VotersRecord(
        version=0,
        voters=[
            Voter(
                voter_id=c.node_id,
                voter_directory_id=c.directory_id,
                endpoints=[Endpoint(name=listener, host=c.host, port=c.port)],
                k_raft_version_feature=KRaftVersionFeature(min_supported_version=0, max_supported_version=1),
            )
            for c in controllers
        ],
    )


def voter_set_of(record: VotersRecord) -> VoterSet:
    """The raft node's view of a VotersRecord: the voters' keys."""
    return VoterSet.of(VoterKey(v.voter_id, v.voter_directory_id) for v in record.voters)
