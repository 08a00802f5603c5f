"""The HFile trailer: magic ``TRABLK"$``, a varint length, protobuf ``TrailerProto``, zero padding, and the
version in the last 4 bytes (minor version byte, then the major version in 3 bytes: 3)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from hudi_clusterd.formats.hfile.encoding import (
    pb_bytes_field,
    pb_fields,
    pb_int_field,
    pb_read_varint,
    pb_varint,
    signed64,
)
from hudi_clusterd.formats.hfile.format import (
    CODEC_IDS,
    CODEC_NAMES,
    COMPARATOR_CLASS_NAME,
    MAJOR_VERSION,
    TRAILER_MAGIC,
    TRAILER_SIZE,
    Damage,
)

# TrailerProto field numbers
_T_FILE_INFO_OFFSET = 1
_T_LOAD_ON_OPEN_OFFSET = 2
_T_UNCOMPRESSED_DATA_INDEX_SIZE = 3
_T_TOTAL_UNCOMPRESSED_BYTES = 4
_T_DATA_INDEX_COUNT = 5
_T_META_INDEX_COUNT = 6
_T_ENTRY_COUNT = 7
_T_NUM_DATA_INDEX_LEVELS = 8
_T_FIRST_DATA_BLOCK_OFFSET = 9
_T_LAST_DATA_BLOCK_OFFSET = 10
_T_COMPARATOR_CLASS_NAME = 11
_T_COMPRESSION_CODEC = 12
_T_ENCRYPTION_KEY = 13


@dataclass(frozen=True)
class HFileTrailer:
    """The trailer's fields; protobuf fields absent from the file read as 0, "" or None."""

    file_info_offset: int
    load_on_open_offset: int
    uncompressed_data_index_size: int
    total_uncompressed_bytes: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator_class_name: str
    compression_codec: int
    encryption_key: bytes | None
    major_version: int
    minor_version: int
    fields: tuple[int, ...]
    """protobuf field numbers present, in file order"""

    @property
    def codec_name(self) -> str:
        return CODEC_NAMES.get(self.compression_codec, str(self.compression_codec))


def read_trailer(data: bytes) -> HFileTrailer:
    """The trailer of the HFile ``data`` (its last 4096 bytes); version 3 only."""
    base = len(data) - TRAILER_SIZE
    if data[base:base + 8] != TRAILER_MAGIC:
        raise Damage(f"bad trailer magic {bytes(data[base:base + 8])!r}", base)
    version = struct.unpack_from(">I", data, len(data) - 4)[0]
    major, minor = version & 0xFFFFFF, version >> 24
    if major != MAJOR_VERSION:
        raise Damage(f"HFile major version {major} is not supported (only {MAJOR_VERSION})", len(data) - 4)
    limit = len(data) - 4
    try:
        length, pos = pb_read_varint(data, base + 8, limit)
        if length > limit - pos:
            raise ValueError("trailer protobuf runs past the trailer")
        fields = pb_fields(data, pos, pos + length)
    except ValueError as e:
        raise Damage(f"corrupt trailer ({e})", base) from e
    values: dict[int, int | bytes] = {}
    for number, value in fields:
        values[number] = value

    def num(n: int, default: int = 0) -> int:
        v = values.get(n, default)
        if not isinstance(v, int):
            raise Damage(f"trailer field {n} has the wrong wire type", base)
        return signed64(v)

    comparator = values.get(_T_COMPARATOR_CLASS_NAME, b"")
    encryption = values.get(_T_ENCRYPTION_KEY)
    if not isinstance(comparator, bytes) or not (encryption is None or isinstance(encryption, bytes)):
        raise Damage("trailer string field has the wrong wire type", base)
    try:
        comparator_name = comparator.decode()
    except UnicodeDecodeError as e:
        raise Damage("trailer comparator class name is not UTF-8", base) from e
    return HFileTrailer(
        file_info_offset=num(_T_FILE_INFO_OFFSET),
        load_on_open_offset=num(_T_LOAD_ON_OPEN_OFFSET),
        uncompressed_data_index_size=num(_T_UNCOMPRESSED_DATA_INDEX_SIZE),
        total_uncompressed_bytes=num(_T_TOTAL_UNCOMPRESSED_BYTES),
        data_index_count=num(_T_DATA_INDEX_COUNT),
        meta_index_count=num(_T_META_INDEX_COUNT),
        entry_count=num(_T_ENTRY_COUNT),
        num_data_index_levels=num(_T_NUM_DATA_INDEX_LEVELS),
        first_data_block_offset=num(_T_FIRST_DATA_BLOCK_OFFSET),
        last_data_block_offset=num(_T_LAST_DATA_BLOCK_OFFSET),
        comparator_class_name=comparator_name,
        compression_codec=num(_T_COMPRESSION_CODEC, CODEC_IDS["NONE"]),
        encryption_key=encryption,
        major_version=major,
        minor_version=minor,
        fields=tuple(number for number, _ in fields),
    )


def encode_trailer(*, file_info_offset: int, load_on_open_offset: int, uncompressed_data_index_size: int,
                   data_index_count: int, meta_index_count: int, entry_count: int, first_data_block_offset: int,
                   last_data_block_offset: int, codec_id: int) -> bytes:
    """The 4096 trailer bytes with the fields Hudi's writer sets, in its order (a single-level data index, Hudi's
    comparator class)."""
    fields = b"".join((
        pb_int_field(_T_FILE_INFO_OFFSET, file_info_offset),
        pb_int_field(_T_LOAD_ON_OPEN_OFFSET, load_on_open_offset),
        pb_int_field(_T_UNCOMPRESSED_DATA_INDEX_SIZE, uncompressed_data_index_size),
        pb_int_field(_T_DATA_INDEX_COUNT, data_index_count),
        pb_int_field(_T_META_INDEX_COUNT, meta_index_count),
        pb_int_field(_T_ENTRY_COUNT, entry_count),
        pb_int_field(_T_NUM_DATA_INDEX_LEVELS, 1),
        pb_int_field(_T_FIRST_DATA_BLOCK_OFFSET, first_data_block_offset),
        pb_int_field(_T_LAST_DATA_BLOCK_OFFSET, last_data_block_offset),
        pb_bytes_field(_T_COMPARATOR_CLASS_NAME, COMPARATOR_CLASS_NAME.encode()),
        pb_int_field(_T_COMPRESSION_CODEC, codec_id),
    ))
    head = TRAILER_MAGIC + pb_varint(len(fields)) + fields
    return head + bytes(TRAILER_SIZE - 1 - len(head)) + bytes((MAJOR_VERSION,))
