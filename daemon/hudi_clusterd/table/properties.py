"""A table's ``hoodie.properties``: reading it, and laying out a new table around it."""

from __future__ import annotations

from datetime import UTC

from hudi_clusterd.domain.table_config import TIMELINE_HISTORY_PATH, TableConfig
from hudi_clusterd.errors import StorageError, TableError, TimelineError
from hudi_clusterd.formats.java_properties import format_properties, parse_properties
from hudi_clusterd.storage import Storage, open_storage
from hudi_clusterd.table.clock import Clock
from hudi_clusterd.table.timeline_store import META_FOLDER

PROPERTIES_FILE = ".hoodie/hoodie.properties"


def read_config(storage: Storage) -> TableConfig:
    """The table's properties (Java's Properties.store writes ISO-8859-1, other characters as \\uXXXX escapes)."""
    source = storage.full_path(PROPERTIES_FILE)
    return TableConfig(parse_properties(storage.read_bytes(PROPERTIES_FILE).decode("iso-8859-1"), source))


def read_existing_config(storage: Storage) -> TableConfig:
    """The properties of an existing table, which this daemon can read (``TableError`` naming the file
    otherwise)."""
    source = storage.full_path(PROPERTIES_FILE)
    if not storage.exists(PROPERTIES_FILE):
        if storage.exists(META_FOLDER):
            raise TableError(f"{source}: missing; {storage.base_uri} has a .hoodie folder but no table "
                             "properties (a half-created or damaged table)")
        raise TableError(f"{source}: missing; {storage.base_uri} is not a Hudi table")
    config = read_config(storage)
    config.check_readable(source)
    return config


def read_writable_config(storage: Storage) -> TableConfig:
    """The properties as they are now, refused (``TableError``) when clustering must not write the table."""
    config = read_config(storage)
    config.check_writable(storage.full_path(PROPERTIES_FILE), clustering=True)
    return config


def lay_out(storage: Storage, config: TableConfig, clock: Clock) -> None:
    """Lay out a new, empty table: ``.hoodie/`` with its sub-folders and ``hoodie.properties``."""
    config.check_writable(storage.full_path(PROPERTIES_FILE))  # a new table: no metadata table
    layout = config.timeline_layout
    archive = layout.archive_folder(config.get(TIMELINE_HISTORY_PATH))
    for folder in (".hoodie/.aux/.bootstrap/.partitions", ".hoodie/.aux/.bootstrap/.fileids",
                   ".hoodie/.schema", ".hoodie/.temp", layout.folder, archive):
        storage.makedirs(folder)
    now = clock.now(UTC)
    header = [f"Properties saved on {now.strftime('%Y-%m-%dT%H:%M:%S.%f')[:-3]}Z"]
    data = format_properties(config.raw.items(), header).encode("iso-8859-1")
    if not storage.write_bytes(PROPERTIES_FILE, data, overwrite=False):
        raise TableError(f"{storage.full_path(PROPERTIES_FILE)}: already exists; the table was created "
                         "concurrently by another writer")


def read_properties_text(storage: Storage) -> str:
    try:
        return storage.read_bytes(PROPERTIES_FILE).decode("iso-8859-1")
    except StorageError as e:
        raise TableError(f"{storage.full_path(PROPERTIES_FILE)}: {e}") from e


def timeline_folder(base_path: str) -> str:
    """The timeline folder of the table at ``base_path``, relative to it (``.hoodie`` when it cannot be read)."""
    storage = open_storage(base_path)
    try:
        return read_config(storage).timeline_layout.folder
    except (StorageError, TableError, TimelineError):
        return META_FOLDER
