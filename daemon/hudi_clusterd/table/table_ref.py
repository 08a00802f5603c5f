"""A small, immutable reference to a table: what a data engine needs of it (`hudi_clusterd.ops.ports`)."""

from __future__ import annotations

from dataclasses import dataclass

from hudi_clusterd.domain.table_config import TableConfig
from hudi_clusterd.storage import Storage, StorageSpec, open_storage


@dataclass(frozen=True, slots=True)
class TableRef:
    """A table's name, where it is (its storage's spec, picklable) and its properties."""

    name: str
    storage: StorageSpec
    config: TableConfig

    @property
    def base_uri(self) -> str:
        return self.storage.uri

    def open_storage(self) -> Storage:
        """The table's storage, opened from its spec (with the spec's options)."""
        return open_storage(self.storage)
