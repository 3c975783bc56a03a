"""A node's storage directories: ``meta.properties`` and ``kraft-jbod storage``.

:mod:`kraft_jbod.storage.meta` is the only code that writes ``meta.properties`` (the
controller's metadata dir, every broker log dir, the pytest plugin and the demo all go
through it); :mod:`kraft_jbod.storage.commands` is ``kraft-jbod storage format|info``.
"""

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
