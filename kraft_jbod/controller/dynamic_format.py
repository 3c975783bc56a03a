"""Formatting a controller's metadata dir for a dynamic quorum (kraft.version 1).

One writer for both ``kraft-jbod controller --initial-controllers`` / ``--no-initial-controllers``
and ``kraft-jbod storage format`` with the same flags: :func:`plan_dynamic_format` checks
everything (the rules of :mod:`kraft_jbod.controller.initial_controllers`) and writes nothing;
the :class:`DynamicFormat` it returns writes ``meta.properties`` (the directory id the list
gives this controller, or a fresh one) and then the bootstrap voter set
(:func:`kraft_jbod.controller.raft.seat.write_bootstrap_voters`). A controller later started
on that dir without the flags finds the voter set and runs at kraft.version 1.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kraft_jbod.errors import ConfigError, KraftJbodError
from kraft_jbod.messages.voters_record import VotersRecord


@dataclass(frozen=True, slots=True)
class DynamicFormat:
    """What a new metadata dir of a dynamic quorum is formatted with (checked, not yet written)."""

    cfg: Any  # the controller's ControllerConfig
    cluster_id: str
    directory_id: uuid.UUID
    voters: VotersRecord

    def write(self, *, fsync: bool = True) -> None:
        """meta.properties first (kept as it is when a format just wrote it with this id),
        then the voter set: a dir with a voter set always has its meta.properties."""
        from kraft_jbod.controller.raft.seat import write_bootstrap_voters
        from kraft_jbod.storage.meta import ensure_metadata_dir

        ensure_metadata_dir(
            self.cfg.metadata_log_dir, self.cfg.node_id, self.cluster_id, directory_id=self.directory_id
        )
        write_bootstrap_voters(self.cfg.metadata_log_dir, self.voters, fsync=fsync)


def plan_dynamic_format(
    cfg: Any, *, initial_controllers: str | None, no_initial_controllers: bool, cluster_id: str | None
) -> DynamicFormat | None:
    """Check ``--initial-controllers`` (its value, None when not given) or
    ``--no-initial-controllers`` against ``cfg`` and the metadata dir on disk. Returns what to
    write, or None when the dir is already formatted with a voter set (it keeps that one).

    Raises:
        ConfigError: both flags, a static ``controller.quorum.voters``, a malformed list, no
            cluster id, or a dir already formatted without a voter set. Nothing is written.
    """
    from kraft_jbod.controller import initial_controllers as ic
    from kraft_jbod.controller.raft.seat import read_bootstrap_voters
    from kraft_jbod.storage.meta import META_PROPERTIES, new_directory_id

    ic.check_dynamic_flags(
        static_voters=bool(cfg.quorum_voters),
        standalone=False,
        initial_controllers=initial_controllers is not None,
        no_initial_controllers=no_initial_controllers,
    )
    flag = "--initial-controllers" if initial_controllers is not None else "--no-initial-controllers"
    if no_initial_controllers and cfg.quorum_voters:
        raise ConfigError(
            "--no-initial-controllers makes a dynamic quorum: remove controller.quorum.voters and set "
            "controller.quorum.bootstrap.servers instead"
        )
    controllers = None if initial_controllers is None else ic.parse_initial_controllers(initial_controllers)
    try:
        formatted = (cfg.metadata_log_dir / META_PROPERTIES).exists()
        bootstrap = read_bootstrap_voters(cfg.metadata_log_dir) if formatted else None
    except KraftJbodError as exc:
        raise ConfigError(f"{flag}: {exc}") from None
    if formatted:
        if bootstrap is None:
            raise ConfigError(
                f"{flag}: {cfg.metadata_log_dir} is already formatted without a voter set; "
                "it keeps the quorum it was formatted with"
            )
        return None  # formatted before: the voter set on disk is in force
    if cluster_id is None:
        raise ConfigError(f"{flag} needs --cluster-id: every controller of the quorum must be formatted with the same")
    listener = cfg.controller_listener_names[0]
    record = VotersRecord(version=0, voters=[]) if controllers is None else ic.bootstrap_voters(controllers, listener)
    directory_id = ic.metadata_directory_id(controllers, cfg.node_id, new_directory_id())
    return DynamicFormat(cfg, cluster_id, directory_id, record)
