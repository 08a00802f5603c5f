"""DELETE blocks of version 3 decode into record keys, partition paths and ordering values of every union branch;
versions 1 and 2, unknown branches and damaged bytes are refused in one line naming the file and offset."""

from __future__ import annotations

import datetime
import decimal
import struct

import pytest

from hudi_clusterd.errors import LogFileError
from hudi_clusterd.formats.log import (
    BlockType,
    DeletedRecord,
    HeaderKey,
    LogBlock,
    OrderingValue,
    delete_block_records,
    empty_delete_block,
)
from tests.harness.mor_logs import delete_block, delete_content, ordering_bytes, zigzag

SOURCE = "/t/.f1-0_20240101000000000.log.1_0-1-2"


def _block(content: bytes) -> LogBlock:
    return LogBlock(BlockType.DELETE, {HeaderKey.INSTANT_TIME: "20240101000000001"}, content)


def test_the_reference_example_decodes() -> None:
    # hudi-mor-reference §2.3: a SQL DELETE of TXN-002 in a non-partitioned table
    content = bytes.fromhex("00000003" "0000000f" "02" "02" "0e") + b"TXN-002" + bytes.fromhex("02 00 04 00 00")
    assert delete_block_records(_block(content), source=SOURCE) == [
        DeletedRecord("TXN-002", "", OrderingValue("int", 0))]
    assert OrderingValue("int", 0).is_default


def test_every_ordering_branch_decodes() -> None:
    unscaled = 123456789 * 10**10  # 1234.56789 at scale 15
    cases = [
        ("null", None, None),
        ("boolean", True, True),
        ("int", -7, -7),
        ("long", 2**40, 2**40),
        ("float", 1.5, 1.5),
        ("double", -2.25, -2.25),
        ("bytes", b"\x00\xff", b"\x00\xff"),
        ("string", "é", "é"),
        ("date", 19000, datetime.date(1970, 1, 1) + datetime.timedelta(days=19000)),
        ("decimal", unscaled.to_bytes(9, "big", signed=True), decimal.Decimal("1234.56789")),
        ("time_micros", 3_600_000_000, 3_600_000_000),
        ("timestamp_micros", 1_700_000_000_000_000, 1_700_000_000_000_000),
    ]
    block = delete_block("20240101000000001", [(f"k{i}", None, ordering_bytes(kind, raw))
                                               for i, (kind, raw, _value) in enumerate(cases)])
    records = delete_block_records(block, source=SOURCE)
    assert [(r.record_key, r.partition_path, r.ordering.kind) for r in records] == [
        (f"k{i}", None, kind) for i, (kind, _raw, _value) in enumerate(cases)]
    assert [r.ordering.value for r in records] == [value for _kind, _raw, value in cases]
    assert [r.ordering.is_default for r in records] == [True] + [False] * (len(cases) - 1)
    assert not OrderingValue("long", 0).is_default  # Hudi compares with Integer 0: a Long 0 is not the default


def test_an_array_ordering_value_decodes_with_its_local_dates() -> None:
    items = zigzag(3) + zigzag(3) + zigzag(5) + zigzag(12) + zigzag(2) + zigzag(0) + b"\x00"  # long 5, day 2, null
    value = b"\x18" + b"\x02" + items  # branch 12: ArrayWrapper, wrappedValues branch 1 (the array)
    [record] = delete_block_records(delete_block("1", [("k", "p", value)]), source=SOURCE)
    assert record.ordering == OrderingValue("array", (OrderingValue("long", 5),
                                                      OrderingValue("local_date", datetime.date(1970, 1, 3)),
                                                      OrderingValue("null", None)))


def test_array_blocks_with_byte_sizes_and_the_empty_block_decode() -> None:
    one = b"\x02\x02k" + b"\x00" + ordering_bytes("int", 1)
    body = zigzag(-1) + zigzag(len(one)) + one + zigzag(1) + one + b"\x00"  # a negative count carries a size
    records = delete_block_records(_block(struct.pack(">ii", 3, len(body)) + body), source=SOURCE)
    assert records == [DeletedRecord("k", None, OrderingValue("int", 1))] * 2
    assert delete_block_records(empty_delete_block("0"), source=SOURCE) == []


@pytest.mark.parametrize("version", [1, 2])
def test_java_and_kryo_versions_are_refused(version: int) -> None:
    with pytest.raises(LogFileError, match=rf"^{SOURCE}: DELETE block at byte 40 is of version {version} \(a Java "
                                           r"or Kryo serialization\); only version 3 \(Avro\) is read$"):
        delete_block_records(_block(delete_content([], version=version)), source=SOURCE, offset=40)


def test_an_unknown_ordering_branch_is_refused() -> None:
    block = delete_block("1", [("k", "p", zigzag(13) + zigzag(1))])
    with pytest.raises(LogFileError, match=rf"^{SOURCE}: DELETE block at byte 0: DELETE block record list has "
                                           r"ordering value union branch 13, which no Hudi release writes at "
                                           r"content byte \d+$"):
        delete_block_records(block, source=SOURCE)


@pytest.mark.parametrize("content", [
    b"\x00\x00\x00\x03",  # no length
    struct.pack(">ii", 3, 5) + b"\x00",  # length disagrees
    struct.pack(">ii", 3, 3) + b"\x02\x04\x00",  # key branch 2
    struct.pack(">ii", 3, 4) + b"\x02\x02\x0aab",  # key runs past the end
    struct.pack(">ii", 3, 2) + b"\x00\x00",  # stray bytes after the array
    struct.pack(">ii", 3, 1) + b"\x80",  # a varint cut short
])
def test_damaged_record_lists_are_refused_in_one_line(content: bytes) -> None:
    with pytest.raises(LogFileError) as caught:
        delete_block_records(_block(content), source=SOURCE, offset=7)
    assert str(caught.value).startswith(f"{SOURCE}: DELETE block at byte 7") and "\n" not in str(caught.value)
