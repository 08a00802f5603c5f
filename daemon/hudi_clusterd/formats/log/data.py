"""The metadata table's data blocks by block type: each data block type read here has a record reader giving the
block's ``(record key, record bytes)`` pairs in key order; HFILE_DATA (the metadata table's) has one. A data
table's AVRO_DATA and PARQUET_DATA blocks are read into Arrow by ``arrow_blocks`` instead."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Protocol

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.log.block import BlockType, LogBlock
from hudi_clusterd.formats.log.hfile_block import hfile_block_records

DATA_BLOCK_TYPES = frozenset({BlockType.AVRO_DATA, BlockType.HFILE_DATA, BlockType.PARQUET_DATA,
                              BlockType.CDC_DATA})
"""The block types whose content is records (``HoodieDataBlock`` subclasses)."""


class RecordReader(Protocol):
    """Reads the records of one data block type; raises ``MetadataTableError`` naming ``source``."""

    def __call__(self, block: LogBlock, *, source: str = "") -> list[tuple[str, bytes]]: ...


DATA_BLOCK_READERS: Mapping[BlockType, RecordReader] = MappingProxyType({
    BlockType.HFILE_DATA: hfile_block_records,
})


def block_records(block: LogBlock, *, source: str = "") -> list[tuple[str, bytes]]:
    """The ``(record key, record bytes)`` pairs of a data block, read by its type's reader. Raises
    ``MetadataTableError`` naming ``source`` for a block that holds no records or a data block type without a
    reader."""
    block_type = BlockType(block.block_type)
    reader = DATA_BLOCK_READERS.get(block_type)
    if reader is None:
        what = "is not supported" if block_type in DATA_BLOCK_TYPES else "holds no records"
        raise MetadataTableError(f"{source or '<log block>'}: a {block_type.name} block {what}")
    return reader(block, source=source)
