"""A node's storage directories: ``meta.properties`` and ``kraft-jbod storage``.

:mod:`kraft_jbod.storage.meta` is the only code that writes ``meta.properties`` (the
controller's metadata dir, every broker log dir, the pytest plugin and the demo all go
through it); :mod:`kraft_jbod.storage.commands` is ``kraft-jbod storage format|info``.

The names below are :mod:`kraft_jbod.storage.meta`'s, loaded on first access: every
``kraft-jbod`` run imports ``storage.commands`` (so this package) to build its parser, and
``meta`` brings the properties parser and uuid handling none of the other commands need.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kraft_jbod.storage.meta import (
        DEFAULT_LOG_DIR,
        META_PROPERTIES,
        BrokerDirs,
        DirResult,
        MetaProperties,
        StorageLayout,
        ensure_directory_ids,
        ensure_metadata_dir,
        format_storage,
        load_broker_dirs,
        new_directory_id,
        parse_meta_properties,
        read_meta_properties,
        render_meta_properties,
        storage_info,
        write_meta_properties,
    )

__all__ = [
    "DEFAULT_LOG_DIR",
    "META_PROPERTIES",
    "BrokerDirs",
    "DirResult",
    "MetaProperties",
    "StorageLayout",
    "ensure_directory_ids",
    "ensure_metadata_dir",
    "format_storage",
    "load_broker_dirs",
    "new_directory_id",
    "parse_meta_properties",
    "read_meta_properties",
    "render_meta_properties",
    "storage_info",
    "write_meta_properties",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kraft_jbod.storage import meta

        return getattr(meta, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
