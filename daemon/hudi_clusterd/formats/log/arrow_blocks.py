"""A data table's data blocks read into Arrow record batches.

- AVRO_DATA (``HoodieAvroDataBlock``): ``int32`` block version, ``int32`` record count (version 1 and later),
  then per record ``int32`` length and the record in Avro binary, written with the block's SCHEMA header; each
  record is resolved from that writer schema to the reader schema given (fastavro). The records carry the meta
  fields; their ``_hoodie_file_name`` holds only the file id.
- PARQUET_DATA (``HoodieParquetDataBlock``): the content is a whole parquet file, read with pyarrow.

``conform_batch`` shapes a batch to a schema: columns by name in the schema's order, types cast, a nullable
column the batch lacks filled with nulls (a column added to the table after the block was written).
"""

from __future__ import annotations

import io
import json
import struct
from functools import lru_cache
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hudi_clusterd.errors import ClusterdError, LogFileError
from hudi_clusterd.formats.avro_schema import avro_to_arrow
from hudi_clusterd.formats.log.block import BlockType, HeaderKey, LogBlock

AVRO_CHUNK_RECORDS = 16_384
"""Records of an AVRO_DATA block decoded into Python objects before they become Arrow: a block of a million records
never lives whole as Python dicts (about 1 KB each), only as Arrow."""


@lru_cache(maxsize=32)
def _parsed(schema_json: str) -> Any:
    return fastavro.parse_schema(json.loads(schema_json))


@lru_cache(maxsize=32)
def arrow_schema_of(avro_schema_json: str) -> pa.Schema:
    """The Arrow schema (meta fields kept) of an Avro record schema."""
    return avro_to_arrow(avro_schema_json, drop_meta_fields=False)


def conform_batch(batch: pa.RecordBatch | pa.Table, schema: pa.Schema, *, where: str) -> pa.RecordBatch:
    """``batch`` with the columns of ``schema``, in its order and types. Raises ``LogFileError`` naming
    ``where`` for a non-nullable column the batch lacks or a column that cannot be cast."""
    table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
    columns = []
    for f in schema:
        if f.name not in table.column_names:
            if not f.nullable:
                raise LogFileError(f"{where}: has no column {f.name!r}, which the reader schema requires")
            columns.append(pa.nulls(table.num_rows, f.type))
            continue
        column = table.column(f.name)
        try:
            columns.append(column if column.type == f.type else column.cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise LogFileError(f"{where}: column {f.name!r} of type {column.type} cannot be read as {f.type} "
                               f"({e})") from None
    out = pa.Table.from_arrays(columns, schema=schema).combine_chunks()
    batches = out.to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=schema)


def avro_block_batch(block: LogBlock, *, where: str, reader_schema: str | None = None) -> pa.RecordBatch:
    """The records of an AVRO_DATA block as a batch in ``reader_schema`` (Avro JSON; the block's own SCHEMA when
    None). Raises ``LogFileError`` naming ``where`` for a block without SCHEMA or with damaged records."""
    writer_json = block.header.get(HeaderKey.SCHEMA)
    if not writer_json:
        raise LogFileError(f"{where}: AVRO_DATA block has no SCHEMA header")
    content = block.content
    try:
        writer = _parsed(writer_json)
        reader = _parsed(reader_schema) if reader_schema else writer
        schema = arrow_schema_of(reader_schema or writer_json)
    except (ValueError, ClusterdError, fastavro.schema.SchemaParseException) as e:
        raise LogFileError(f"{where}: Avro schema cannot be read ({e})") from None
    if len(content) < 8:
        raise LogFileError(f"{where}: AVRO_DATA content of {len(content)} bytes has no version and count")
    version, count = struct.unpack_from(">ii", content, 0)
    if version < 1 or count < 0:
        raise LogFileError(f"{where}: AVRO_DATA block version {version} with {count} records is not read")
    pos = 8
    rows: list[Any] = []
    batches: list[pa.RecordBatch] = []
    for i in range(count):
        if len(rows) == AVRO_CHUNK_RECORDS:
            batches.append(_records_batch(rows, schema, where))
            rows = []
        if pos + 4 > len(content):
            raise LogFileError(f"{where}: AVRO_DATA record {i} of {count} runs past the block")
        length = struct.unpack_from(">i", content, pos)[0]
        if length < 0 or pos + 4 + length > len(content):
            raise LogFileError(f"{where}: AVRO_DATA record {i} of {length} bytes runs past the block")
        buffer = io.BytesIO(content[pos + 4:pos + 4 + length])
        try:
            rows.append(fastavro.schemaless_reader(buffer, writer, reader))
        except Exception as e:  # fastavro raises many types for bad bytes or schemas that do not resolve
            raise LogFileError(f"{where}: AVRO_DATA record {i} cannot be read with the reader schema "
                               f"({type(e).__name__}: {e})") from None
        pos += 4 + length
    if pos != len(content):
        raise LogFileError(f"{where}: AVRO_DATA block has {len(content) - pos} stray bytes after its records")
    batches.append(_records_batch(rows, schema, where))
    return batches[0] if len(batches) == 1 else pa.concat_batches(batches)


def _records_batch(rows: list[Any], schema: pa.Schema, where: str) -> pa.RecordBatch:
    try:
        return pa.RecordBatch.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise LogFileError(f"{where}: AVRO_DATA records do not fit the reader schema ({e})") from None


def parquet_block_batch(block: LogBlock, *, where: str, reader_schema: str | None = None) -> pa.RecordBatch:
    """The rows of a PARQUET_DATA block, shaped to ``reader_schema`` when given. Raises ``LogFileError``
    naming ``where`` for content that is not a parquet file."""
    try:
        table = pq.read_table(pa.BufferReader(block.content))
    except (pa.ArrowInvalid, OSError) as e:
        raise LogFileError(f"{where}: PARQUET_DATA content is not a parquet file ({e})") from None
    if reader_schema is None:
        return conform_batch(table, table.schema, where=where)
    return conform_batch(table, arrow_schema_of(reader_schema), where=where)


def data_block_batch(block: LogBlock, *, where: str, reader_schema: str | None = None) -> pa.RecordBatch:
    """The records of an AVRO_DATA or PARQUET_DATA block. Raises ``LogFileError`` for any other block type."""
    if block.block_type is BlockType.AVRO_DATA:
        return avro_block_batch(block, where=where, reader_schema=reader_schema)
    if block.block_type is BlockType.PARQUET_DATA:
        return parquet_block_batch(block, where=where, reader_schema=reader_schema)
    raise LogFileError(f"{where}: a {BlockType(block.block_type).name} block is not a data block of a data table")
