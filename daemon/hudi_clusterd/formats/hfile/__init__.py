"""HFile (format version 3) as Apache Hudi's metadata table writes it: the base files of MDT partitions and the
content of HFILE_DATA log blocks. All integers are big-endian.

The package follows the file's parts: ``block`` (block header, compressed payload, checksums, data block cells),
``index`` (root index blocks), ``file_info``, ``trailer``, with ``encoding`` (protobuf and Hadoop varints, Java's
gzip and ``HashMap`` order, CRC-32C) and ``format`` (shared constants) below them; ``reader`` and ``writer`` put
them together. The names importers use are re-exported here.
"""

from hudi_clusterd.formats.hfile.block import HFileBlock
from hudi_clusterd.formats.hfile.encoding import crc32c, java_gzip, java_hashmap_order
from hudi_clusterd.formats.hfile.format import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    BLOOM_CHUNK_MAGIC,
    BYTES_PER_CHECKSUM,
    CHECKSUM_CRC32,
    CHECKSUM_CRC32C,
    CHECKSUM_NULL,
    CODEC_IDS,
    COMPARATOR_CLASS_NAME,
    CREATE_TIME_KEY,
    DATA_MAGIC,
    DEFAULT_BLOCK_SIZE,
    DELETE_FAMILY_BLOOM_META_MAGIC,
    ENCODED_DATA_MAGIC,
    FILE_INFO_MAGIC,
    GENERAL_BLOOM_META_MAGIC,
    HEADER_SIZE,
    INTERMEDIATE_INDEX_MAGIC,
    KEY_VALUE_VERSION,
    LAST_KEY,
    LEAF_INDEX_MAGIC,
    MAJOR_VERSION,
    MAX_MEMSTORE_TS_KEY,
    META_MAGIC,
    ROOT_INDEX_MAGIC,
    SCHEMA_KEY,
    TRAILER_MAGIC,
    TRAILER_SIZE,
    WRITER_FILE_INFO_KEYS,
    HFileLayout,
)
from hudi_clusterd.formats.hfile.index import IndexEntry
from hudi_clusterd.formats.hfile.reader import HFileContents, read_blocks, read_hfile
from hudi_clusterd.formats.hfile.trailer import HFileTrailer
from hudi_clusterd.formats.hfile.writer import write_hfile

__all__ = [
    "AVG_KEY_LEN",
    "AVG_VALUE_LEN",
    "BLOOM_CHUNK_MAGIC",
    "BYTES_PER_CHECKSUM",
    "CHECKSUM_CRC32",
    "CHECKSUM_CRC32C",
    "CHECKSUM_NULL",
    "CODEC_IDS",
    "COMPARATOR_CLASS_NAME",
    "CREATE_TIME_KEY",
    "DATA_MAGIC",
    "DEFAULT_BLOCK_SIZE",
    "DELETE_FAMILY_BLOOM_META_MAGIC",
    "ENCODED_DATA_MAGIC",
    "FILE_INFO_MAGIC",
    "GENERAL_BLOOM_META_MAGIC",
    "HEADER_SIZE",
    "INTERMEDIATE_INDEX_MAGIC",
    "KEY_VALUE_VERSION",
    "LAST_KEY",
    "LEAF_INDEX_MAGIC",
    "MAJOR_VERSION",
    "MAX_MEMSTORE_TS_KEY",
    "META_MAGIC",
    "ROOT_INDEX_MAGIC",
    "SCHEMA_KEY",
    "TRAILER_MAGIC",
    "TRAILER_SIZE",
    "WRITER_FILE_INFO_KEYS",
    "HFileBlock",
    "HFileContents",
    "HFileLayout",
    "HFileTrailer",
    "IndexEntry",
    "crc32c",
    "java_gzip",
    "java_hashmap_order",
    "read_blocks",
    "read_hfile",
    "write_hfile",
]
