"""Apache Hudi's log format: log file names (``names``), the framing of blocks in a log file (``block``), and
the block types the daemon writes and reads: HFILE_DATA (``hfile_block``), DELETE blocks (``delete``) and the
ROLLBACK command block (``command``); ``data`` reads the metadata table's data blocks by their type.

The metadata table writes HFILE_DATA blocks, an empty DELETE block in each new file group's first log file, and
(table version 6) ROLLBACK command blocks. A data table's log files are read by ``data_log`` (over ``scan``, which
turns damaged frames into CORRUPT blocks, and ``arrow_blocks``, which reads AVRO_DATA and PARQUET_DATA blocks
into Arrow), and a file slice is merged by ``merge`` under a ``merge_rule``. The names importers use are
re-exported here.
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
from hudi_clusterd.formats.log.data_log import (
    CorruptBlock,
    DataBlock,
    DecodedBlock,
    DeleteBlock,
    RollbackBlock,
    read_data_log,
)
from hudi_clusterd.formats.log.delete import (
    DELETE_BLOCK_VERSION,
    DeletedRecord,
    OrderingValue,
    delete_block_records,
    empty_delete_block,
)
from hudi_clusterd.formats.log.hfile_block import hfile_block_records, hfile_data_block
from hudi_clusterd.formats.log.merge import SliceMerge, applied_blocks, merge_file_slice
from hudi_clusterd.formats.log.merge_rule import MergeMode, MergeRule, Payload, Release
from hudi_clusterd.formats.log.names import LOG_BASE_VERSION, LOG_FILE_PATTERN, LogFileName
from hudi_clusterd.formats.log.scan import ScannedBlock, scan_log_file

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
    "CorruptBlock",
    "DataBlock",
    "DecodedBlock",
    "DeleteBlock",
    "DeletedRecord",
    "HeaderKey",
    "LogBlock",
    "LogFileName",
    "MergeMode",
    "MergeRule",
    "OrderingValue",
    "Payload",
    "Release",
    "RollbackBlock",
    "ScannedBlock",
    "SliceMerge",
    "applied_blocks",
    "block_records",
    "decode_log_file",
    "delete_block_records",
    "empty_delete_block",
    "encode_block",
    "hfile_block_records",
    "hfile_data_block",
    "merge_file_slice",
    "read_data_log",
    "rollback_block",
    "scan_log_file",
]
