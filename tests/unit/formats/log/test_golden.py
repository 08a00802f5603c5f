"""Golden log files of Apache Hudi's metadata tables: every one decodes and re-encodes to its bytes, and the
blocks and names we build are the ones Hudi builds."""

from __future__ import annotations

from pathlib import Path

import pytest

from hudi_clusterd.formats.hfile import SCHEMA_KEY, HFileLayout, read_hfile
from hudi_clusterd.formats.log import (
    BlockType,
    HeaderKey,
    LogFileName,
    decode_log_file,
    empty_delete_block,
    encode_block,
    hfile_block_records,
    hfile_data_block,
)
from tests.support import raw_log_blocks

INIT_TOKEN = "0-0-0"


@pytest.fixture(scope="module")
def golden_logs(golden_tables: Path) -> list[Path]:
    """Every log file of the golden tables' metadata tables."""
    logs = sorted(p for mdt in golden_tables.glob("*/.hoodie/metadata") for p in mdt.rglob(".*.log.*")
                  if ".hoodie/metadata/.hoodie" not in str(p))
    assert len(logs) > 300, "too few golden MDT log files found"
    return logs


# ------------------------------------------------------------------------------------------------- golden


def test_every_golden_log_file_decodes_and_reencodes_to_its_bytes(golden_logs: list[Path]) -> None:
    counts: dict[BlockType, int] = {}
    for path in golden_logs:
        data = path.read_bytes()
        blocks = decode_log_file(data, source=str(path))
        raw = raw_log_blocks(data)
        assert len(blocks) == len(raw) >= 1, path
        for block, (_offset, length, reverse) in zip(blocks, raw, strict=True):
            encoded = encode_block(block)
            assert len(encoded) == length + 14 and reverse == length + 6
            counts[block.block_type] = counts.get(block.block_type, 0) + 1
            assert block.footer == {}
            assert HeaderKey.INSTANT_TIME in block.header
        assert b"".join(encode_block(b) for b in blocks) == data, path
    assert set(counts) == {BlockType.DELETE, BlockType.HFILE_DATA}
    assert counts[BlockType.HFILE_DATA] > 100


def test_golden_init_files_are_our_empty_delete_block(golden_logs: list[Path]) -> None:
    inits = [p for p in golden_logs if p.stat().st_size == 80]
    assert len(inits) > 50
    for path in golden_logs:
        name = LogFileName.parse(path.name)
        assert name is not None, path
        assert (path in inits) == (name.write_token == INIT_TOKEN), path
        if path in inits:
            assert path.read_bytes() == encode_block(empty_delete_block(name.base_instant)), path
            assert len(encode_block(empty_delete_block(name.base_instant))) == 80


def test_golden_hfile_blocks_are_rebuilt_byte_for_byte(golden_logs: list[Path]) -> None:
    rebuilt = 0
    for path in golden_logs:
        for i, block in enumerate(decode_log_file(path.read_bytes(), source=str(path))):
            if block.block_type != BlockType.HFILE_DATA:
                continue
            source = f"{path}#{i}"
            records = hfile_block_records(block, source=source)
            contents = read_hfile(block.content, source=source)
            schema = block.header[HeaderKey.SCHEMA]
            assert contents.file_info[SCHEMA_KEY] == schema.encode(), source
            assert set(block.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
            name = LogFileName.parse(path.name)
            assert name is not None and block.header[HeaderKey.INSTANT_TIME] == name.base_instant
            ours = hfile_data_block(name.base_instant, schema, records[::-1], create_time_ms=contents.create_time_ms,
                                    layout=HFileLayout.HUDI_1_2)
            assert ours.content == block.content, source
            assert dict(ours.header) == dict(block.header)
            assert ours.block_type == block.block_type and ours.footer == {}
            assert read_hfile(hfile_data_block(name.base_instant, schema, records).content).cells == contents.cells
            rebuilt += 1
    assert rebuilt > 100


def test_golden_log_file_names_round_trip(golden_logs: list[Path]) -> None:
    for path in golden_logs:
        name = LogFileName.parse(path.name)
        assert name is not None and str(name) == path.name
        assert name.version == 1 and path.name.startswith(f".{name.file_id}_{name.base_instant}.log.1_")
