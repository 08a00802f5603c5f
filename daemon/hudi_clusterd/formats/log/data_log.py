"""A data table's log file read into its blocks, as the merge applies them:

- AVRO_DATA and PARQUET_DATA blocks: ``DataBlock``, the records as an Arrow batch (``arrow_blocks``);
- DELETE blocks (version 3): ``DeleteBlock``, the deleted keys, partition paths and ordering values (``delete``);
- ROLLBACK command blocks: ``RollbackBlock``, naming the instant whose blocks readers drop;
- damaged frames: ``CorruptBlock`` (``scan``), which readers skip;
- CDC_DATA blocks: left out (snapshot readers never apply them).

Refused with a ``LogFileError`` naming the file and the block's offset: HFILE_DATA blocks (a data table with
parquet base files never writes them), a command other than ROLLBACK, and blocks whose header asks for what the
daemon does not merge: ``COMPACTED_BLOCK_TIMES`` (a log compaction's block) and ``IS_PARTIAL=true`` (a partial
update).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from hudi_clusterd.errors import LogFileError
from hudi_clusterd.formats.log.arrow_blocks import data_block_batch
from hudi_clusterd.formats.log.block import BlockType, HeaderKey
from hudi_clusterd.formats.log.command import ROLLBACK_COMMAND
from hudi_clusterd.formats.log.delete import DeletedRecord, delete_block_records
from hudi_clusterd.formats.log.scan import scan_log_file


@dataclass(frozen=True)
class DataBlock:
    """An AVRO_DATA or PARQUET_DATA block of ``instant``: its records."""

    source: str
    offset: int
    instant: str
    records: pa.RecordBatch


@dataclass(frozen=True)
class DeleteBlock:
    """A DELETE block of ``instant``: the deleted records."""

    source: str
    offset: int
    instant: str
    records: tuple[DeletedRecord, ...]


@dataclass(frozen=True)
class RollbackBlock:
    """A ROLLBACK command block: readers drop every block of ``target``."""

    source: str
    offset: int
    instant: str
    target: str


@dataclass(frozen=True)
class CorruptBlock:
    """Damaged bytes (``length`` of them, from the magic at ``offset``); readers skip them."""

    source: str
    offset: int
    length: int


DecodedBlock = DataBlock | DeleteBlock | RollbackBlock | CorruptBlock


def read_data_log(data: bytes, *, source: str, reader_schema: str | None = None) -> list[DecodedBlock]:
    """The blocks of one log file of a data table, in file order; data blocks' records resolved to
    ``reader_schema`` (Avro schema JSON with the meta fields; each block's own schema when None). Raises
    ``LogFileError`` naming ``source`` and the block's offset for what the module docstring lists as refused."""
    out: list[DecodedBlock] = []
    for scanned in scan_log_file(data, source=source):
        block, offset = scanned.block, scanned.offset
        where = f"{source}: {BlockType(block.block_type).name} block at byte {offset}"
        kind = block.block_type
        if kind is BlockType.CORRUPT:
            out.append(CorruptBlock(source, offset, len(block.content) + 6))
            continue
        if kind is BlockType.CDC_DATA:
            continue
        if HeaderKey.COMPACTED_BLOCK_TIMES in block.header:
            raise LogFileError(f"{where} is a log compaction's block (COMPACTED_BLOCK_TIMES), which is not merged")
        if block.header.get(HeaderKey.IS_PARTIAL, "false").lower() == "true":
            raise LogFileError(f"{where} holds partial updates (IS_PARTIAL), which are not merged")
        instant = block.header.get(HeaderKey.INSTANT_TIME, "")
        if kind is BlockType.COMMAND:
            command = block.header.get(HeaderKey.COMMAND_BLOCK_TYPE)
            target = block.header.get(HeaderKey.TARGET_INSTANT_TIME)
            if command != ROLLBACK_COMMAND or not target:
                raise LogFileError(f"{where} is command {command!r} with target {target!r}; only ROLLBACK "
                                   f"({ROLLBACK_COMMAND}) with a target is known")
            out.append(RollbackBlock(source, offset, instant, target))
            continue
        if not instant:
            raise LogFileError(f"{where} has no INSTANT_TIME header")
        if kind is BlockType.DELETE:
            records = tuple(delete_block_records(block, source=source, offset=offset))
            out.append(DeleteBlock(source, offset, instant, records))
        elif kind is BlockType.HFILE_DATA:
            raise LogFileError(f"{where}: HFILE data blocks are not read on a data table (set "
                               "hoodie.logfile.data.block.format to avro or parquet)")
        else:
            out.append(DataBlock(source, offset, instant,
                                 data_block_batch(block, where=where, reader_schema=reader_schema)))
    return out
