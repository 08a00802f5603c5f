"""``.hoodie_partition_metadata``: the marker file that makes a folder a partition of the table.

A Java properties file written once, when the first write creates the partition::

    #partition metadata
    #Sun Jul 07 00:13:01 CDT 2024
    commitTime=20240707001301554
    partitionDepth=1

Without the metadata table, Hudi discovers partitions by listing folders that hold this file, so every writer
must create it before (or together with) the first base file. It is never rewritten: the first writer wins.
Hudi may also use a base-format variant (``.hoodie_partition_metadata.parquet``); its presence counts too.
"""

from __future__ import annotations

from datetime import datetime

from hudi_clusterd.domain.file_group import join_partition
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.storage import Storage

PARTITION_METAFILE = ".hoodie_partition_metadata"
_BASE_FORMAT_VARIANTS = (".parquet", ".orc")
COMMIT_TIME_KEY = "commitTime"
PARTITION_DEPTH_KEY = "partitionDepth"


def partition_depth(partition_path: str) -> int:
    """Folders below the base path: 0 for a non-partitioned table, 2 for ``a=1/b=2``."""
    return len([p for p in partition_path.split("/") if p])


def format_partition_metadata(instant_time: str, depth: int, now: datetime | None = None) -> bytes:
    """The file's bytes, laid out as Java's ``Properties.store`` writes them (the date comment in
    ``java.util.Date.toString`` form)."""
    moment = now if now is not None else datetime.now().astimezone()
    stamp = moment.strftime("%a %b %d %H:%M:%S ") + (moment.strftime("%Z") or "UTC") + moment.strftime(" %Y")
    text = (f"#partition metadata\n#{stamp}\n{COMMIT_TIME_KEY}={instant_time}\n"
            f"{PARTITION_DEPTH_KEY}={depth}\n")
    return text.encode("utf-8")


def has_partition_metadata(storage: Storage, partition_path: str) -> bool:
    base = join_partition(partition_path, PARTITION_METAFILE)
    return storage.exists(base) or any(storage.exists(base + ext) for ext in _BASE_FORMAT_VARIANTS)


def ensure_partition_metadata(storage: Storage, partition_path: str, instant_time: str) -> bool:
    """Write the partition's metafile unless one exists; True when this call created it.

    Creation is create-if-absent and atomic (the file appears whole or not at all), so concurrent tasks of
    one or several writers race safely: exactly one of them writes it."""
    if has_partition_metadata(storage, partition_path):
        return False
    data = format_partition_metadata(instant_time, partition_depth(partition_path))
    return storage.write_bytes(join_partition(partition_path, PARTITION_METAFILE), data, overwrite=False)


def read_partition_metadata(storage: Storage, partition_path: str) -> dict[str, str] | None:
    """The properties of a partition's text metafile; None when it has none."""
    rel = join_partition(partition_path, PARTITION_METAFILE)
    if not storage.exists(rel):
        return None
    return dict(parse_properties(storage.read_bytes(rel).decode("utf-8"), storage.full_path(rel)))
