"""HFILE_DATA log blocks, the blocks the metadata table writes its records in: the content is an HFile of
record key -> Avro record with its key field blanked, file info ``schema`` = the SCHEMA header
(``HFileUtils.serializeRecordsToLogBlock``)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from hudi_clusterd.errors import MetadataTableError
from hudi_clusterd.formats.hfile import DEFAULT_BLOCK_SIZE, SCHEMA_KEY, HFileLayout, read_hfile, write_hfile
from hudi_clusterd.formats.log.block import BlockType, HeaderKey, LogBlock


def hfile_data_block(
    instant: str,
    schema: str,
    records: Sequence[tuple[str, bytes]],
    *,
    codec: str = "GZ",
    create_time_ms: int | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    layout: HFileLayout = HFileLayout.HBASE_COMPATIBLE,
) -> LogBlock:
    """An HFILE_DATA block of ``records`` (record key, Avro binary of the record with its key field already
    blanked), sorted here by the keys' UTF-8 bytes; headers INSTANT_TIME and SCHEMA. Raises
    ``MetadataTableError`` for no records or a repeated key (Hudi refuses both)."""
    if not records:
        raise MetadataTableError("an HFILE_DATA block needs at least one record")
    cells = sorted(((key.encode(), bytes(value)) for key, value in records), key=lambda cell: cell[0])
    for before, after in itertools.pairwise(cells):
        if before[0] == after[0]:
            raise MetadataTableError(f"record key {after[0].decode()!r} appears twice; an HFILE_DATA block "
                                     "holds one record per key")
    content = write_hfile(cells, {SCHEMA_KEY: schema.encode()}, codec=codec, block_size=block_size,
                          create_time_ms=create_time_ms, layout=layout)
    return LogBlock(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: instant, HeaderKey.SCHEMA: schema}, content)


def hfile_block_records(block: LogBlock, *, source: str = "") -> list[tuple[str, bytes]]:
    """The (record key, value) pairs of an HFILE_DATA block, in key order. Raises ``MetadataTableError``
    naming ``source`` for another block type or a damaged HFile."""
    if block.block_type != BlockType.HFILE_DATA:
        raise MetadataTableError(f"{source or '<log block>'}: a {BlockType(block.block_type).name} block holds no "
                                 "HFile records")
    contents = read_hfile(block.content, source=source)
    try:
        return [(row.decode(), value) for row, value in contents.cells]
    except UnicodeDecodeError as e:
        raise MetadataTableError(f"{source or '<log block>'}: an HFile record key is not UTF-8") from e
