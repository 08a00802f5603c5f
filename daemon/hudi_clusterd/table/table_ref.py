"""A small, immutable reference to a table: what a data engine needs of it (`hudi_clusterd.ops.ports`)."""

from __future__ import annotations

from dataclasses import dataclass

from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.storage import Storage


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table's name, where it is (its storage's base URI) and its properties."""

    name: str
    base_uri: str
    config: TableConfig

    def open_storage(self) -> Storage:
        """The table's storage, opened from its base URI."""
        return Storage(self.base_uri)
