"""COMMAND log blocks: the ROLLBACK command block (no content) that makes readers skip another instant's
blocks; the metadata table writes them on table version 6."""

from __future__ import annotations

from hudi_clusterd.formats.log.block import BlockType, HeaderKey, LogBlock

ROLLBACK_COMMAND = "0"  # HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK's ordinal


def rollback_block(instant: str, target_instant: str) -> LogBlock:
    """The ROLLBACK command block that rolls back ``target_instant``'s blocks, written at ``instant``."""
    return LogBlock(BlockType.COMMAND, {HeaderKey.INSTANT_TIME: instant,
                                        HeaderKey.TARGET_INSTANT_TIME: target_instant,
                                        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_COMMAND}, b"")
