"""Apache Hudi's log format: log file names (``names``), the framing of blocks in a log file (``block``), and
the block types the daemon writes and reads: HFILE_DATA (``hfile_block``), the empty DELETE block (``delete``)
and the ROLLBACK command block (``command``); ``data`` reads any data block by its type.

The metadata table writes HFILE_DATA blocks, an empty DELETE block in each new file group's first log file, and
(table version 6) ROLLBACK command blocks. The names importers use are re-exported here.
"""

from hudi_clusterd.formats.log.block import (
    LOG_FORMAT_VERSION,
    MAGIC,
    BlockType,
    HeaderKey,
    LogBlock,
    decode_log_file,
    encode_block,
)
from hudi_clusterd.formats.log.command import ROLLBACK_COMMAND, rollback_block
from hudi_clusterd.formats.log.data import DATA_BLOCK_READERS, DATA_BLOCK_TYPES, block_records
from hudi_clusterd.formats.log.delete import DELETE_BLOCK_VERSION, empty_delete_block
from hudi_clusterd.formats.log.hfile_block import hfile_block_records, hfile_data_block
from hudi_clusterd.formats.log.names import LOG_BASE_VERSION, LOG_FILE_PATTERN, LogFileName

__all__ = [
    "DATA_BLOCK_READERS",
    "DATA_BLOCK_TYPES",
    "DELETE_BLOCK_VERSION",
    "LOG_BASE_VERSION",
    "LOG_FILE_PATTERN",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "ROLLBACK_COMMAND",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "LogFileName",
    "block_records",
    "decode_log_file",
    "empty_delete_block",
    "encode_block",
    "hfile_block_records",
    "hfile_data_block",
    "rollback_block",
]
