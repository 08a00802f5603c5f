"""The constants of HFile version 3 that the block, index, trailer, reader and writer modules share, the
layouts the writer can produce, and the internal damage report of the readers."""

from __future__ import annotations

import struct
from enum import StrEnum

HEADER_SIZE = 33
TRAILER_SIZE = 4096
BYTES_PER_CHECKSUM = 16384
DEFAULT_BLOCK_SIZE = 1 << 20
MAJOR_VERSION = 3
COMPARATOR_CLASS_NAME = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"

DATA_MAGIC = b"DATABLK*"
ENCODED_DATA_MAGIC = b"DATABLKE"
LEAF_INDEX_MAGIC = b"IDXLEAF2"
BLOOM_CHUNK_MAGIC = b"BLMFBLK2"
META_MAGIC = b"METABLKc"
INTERMEDIATE_INDEX_MAGIC = b"IDXINTE2"
ROOT_INDEX_MAGIC = b"IDXROOT2"
FILE_INFO_MAGIC = b"FILEINF2"
GENERAL_BLOOM_META_MAGIC = b"BLMFMET2"
DELETE_FAMILY_BLOOM_META_MAGIC = b"DFBLMET2"
TRAILER_MAGIC = b'TRABLK"$'
BLOCK_MAGICS = frozenset({DATA_MAGIC, ENCODED_DATA_MAGIC, LEAF_INDEX_MAGIC, BLOOM_CHUNK_MAGIC, META_MAGIC,
                           INTERMEDIATE_INDEX_MAGIC, ROOT_INDEX_MAGIC, FILE_INFO_MAGIC, GENERAL_BLOOM_META_MAGIC,
                           DELETE_FAMILY_BLOOM_META_MAGIC})
PB_MAGIC = b"PBUF"

CHECKSUM_NULL = 0
CHECKSUM_CRC32 = 1
CHECKSUM_CRC32C = 2

# HBase's compression codec ids (Hudi's CompressionCodec ids are the same)
CODEC_IDS = {"GZ": 1, "NONE": 2}
CODEC_NAMES = {0: "LZO", 1: "GZ", 2: "NONE", 3: "SNAPPY", 4: "LZ4", 5: "BZ2", 6: "ZSTD"}

MAX_MEMSTORE_TS_KEY = "MAX_MEMSTORE_TS_KEY"
LAST_KEY = "hfile.LASTKEY"
AVG_KEY_LEN = "hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = "hfile.AVG_VALUE_LEN"
CREATE_TIME_KEY = "hfile.CREATE_TIME_TS"
KEY_VALUE_VERSION = "KEY_VALUE_VERSION"
SCHEMA_KEY = "schema"
# file-info entries the writer computes; a caller may not pass them
WRITER_FILE_INFO_KEYS = frozenset({MAX_MEMSTORE_TS_KEY, LAST_KEY, AVG_KEY_LEN, AVG_VALUE_LEN, CREATE_TIME_KEY,
                                   KEY_VALUE_VERSION})
MAX_TAGS_LEN = "hfile.MAX_TAGS_LEN"
DATA_BLOCK_ENCODING = "DATA_BLOCK_ENCODING"

LATEST_TIMESTAMP = (1 << 63) - 1
TYPE_PUT = 4
KEY_SUFFIX = b"\x00" + struct.pack(">qB", LATEST_TIMESTAMP, TYPE_PUT)  # family length, timestamp, type
CELL_OVERHEAD = 21  # per-cell bytes besides row and value: lengths 8, row length 2, suffix 10, MVCC 1


class HFileLayout(StrEnum):
    """Which bytes ``write_hfile`` produces where Hudi 1.2.0's writer and HBase's reader disagree."""

    HBASE_COMPATIBLE = "hbase-compatible"
    """Data index keys are full KeyValue keys and each data block names the previous one; read by HBase 2.4.9
    (Hudi 0.14/0.15) and by Hudi 1.x's native reader."""
    HUDI_1_2 = "hudi-1.2"
    """Hudi 1.2.0's bytes: data index keys are the row only, and every data block after the first gives its own
    offset as the previous block's."""


class Damage(Exception):
    """What is wrong with an HFile, and where (internal to the readers: ``read_hfile`` turns it into a
    ``MetadataTableError``)."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset
