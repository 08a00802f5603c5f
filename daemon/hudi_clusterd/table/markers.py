"""Write markers: one record per data file an instant creates, written *before* the file itself.

Layout (``.hoodie/.temp/<instant>/``):

- DIRECT markers, the kind we write: an empty file
  ``.hoodie/.temp/<instant>/<partitionPath>/<dataFileName>.marker.<IOType>``.
- TIMELINE_SERVER_BASED markers, the Hudi default: ``MARKERS.type`` (content ``TIMELINE_SERVER_BASED``) plus
  ``MARKERS0``..``MARKERSn``, each holding marker names (``<partitionPath>/<dataFileName>.marker.<IOType>``)
  one per line. We read them so that a rollback of an instant written by Hudi finds its files.

Markers are how a rollback (ours or Hudi's marker-based one) learns which files a failed write left behind, and
how a commit finds the files of failed task attempts. Everything here is a plain function over a ``Storage``, so
Spark tasks can call it on executors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from hudi_clusterd.domain.file_group import check_relative_path, join_partition
from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.storage import Storage
from hudi_clusterd.table.timeline_store import TEMP_FOLDER

MARKER_EXTENSION = ".marker"
_MARKERS_FILE_RE = re.compile(r"^MARKERS\d+$")


class IOType(str, Enum):
    """How a data file was produced: a new file group, a rewrite of a slice, or a log append."""

    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


@dataclass(frozen=True, slots=True)
class Marker:
    """One marker: the data file it stands for and how that file was written."""

    partition_path: str
    data_file_name: str
    io_type: IOType

    @property
    def name(self) -> str:
        """``<partitionPath>/<dataFileName>.marker.<IOType>``, relative to the instant's marker folder."""
        return join_partition(self.partition_path, f"{self.data_file_name}{MARKER_EXTENSION}.{self.io_type.value}")

    @property
    def data_file_path(self) -> str:
        """The data file's path relative to the table's base path."""
        return join_partition(self.partition_path, self.data_file_name)


def marker_dir(instant_time: str) -> str:
    """The marker folder of an instant, relative to the base path."""
    return f"{TEMP_FOLDER}/{instant_time}"


def parse_marker_name(name: str) -> Marker | None:
    """Parse ``<partitionPath>/<dataFileName>.marker.<IOType>``; None for anything else. The path is kept as named
    (a leading ``/`` too), for `list_markers` to check."""
    name = name.strip()
    head, sep, io = name.rpartition(f"{MARKER_EXTENSION}.")
    if not sep or not head:
        return None
    try:
        io_type = IOType(io)
    except ValueError:
        return None
    partition, _, data_file = head.rpartition("/")
    if not data_file:
        return None
    return Marker(partition, data_file, io_type)


def create_marker(storage: Storage, instant_time: str, partition_path: str, data_file_name: str,
                  io_type: IOType = IOType.CREATE) -> Marker:
    """Create a DIRECT marker (an empty file); call it before creating the data file. Idempotent."""
    marker = Marker(partition_path, data_file_name, io_type)
    storage.write_bytes(f"{marker_dir(instant_time)}/{marker.name}", b"", overwrite=False)
    return marker


def list_markers(storage: Storage, instant_time: str) -> list[Marker]:
    """Every marker of an instant, of either kind, sorted and without duplicates; empty when there are none.

    A marker naming a data file outside the table (`check_relative_path`) refuses the instant's markers
    (``MetadataDecodeError`` naming the marker file and the path), before any file they name is touched."""
    root = marker_dir(instant_time)
    found: set[Marker] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        for entry in storage.list_dir(folder):
            if entry.is_dir:
                stack.append(entry.path)
                continue
            rel = entry.path[len(root) + 1:]
            if folder == root and _MARKERS_FILE_RE.match(entry.name):
                text = storage.read_bytes(entry.path).decode("utf-8", "replace")
                named = [m for m in map(parse_marker_name, text.splitlines()) if m is not None]
            else:
                marker = parse_marker_name(rel)
                named = [] if marker is None else [marker]
            for m in named:
                try:
                    check_relative_path(m.data_file_path, "marker")
                except ValueError as e:
                    raise MetadataDecodeError(f"{storage.full_path(entry.path)}: {e}; the markers of instant "
                                              f"{instant_time} are refused") from None
            found.update(named)
    return sorted(found, key=lambda m: (m.partition_path, m.data_file_name, m.io_type.value))


def delete_markers(storage: Storage, instant_time: str) -> None:
    """Remove an instant's marker folder (after its commit or rollback). Missing folders are fine."""
    storage.delete_dir(marker_dir(instant_time))
