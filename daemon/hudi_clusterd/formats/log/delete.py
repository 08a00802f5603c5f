"""DELETE log blocks. Content: ``int32`` delete block version, ``int32`` length and the deleted records.

Version 3 (what Hudi 0.15 and 1.x write) holds the Avro binary of ``HoodieDeleteRecordList``: an array of
``{recordKey: [null, string], partitionPath: [null, string], orderingVal: union}``, where the ordering value's
union is null or one of the wrapper records (``ORDERING_KINDS``, by branch index), each a record of one field
``value``; 1.2's branch 12, ``ArrayWrapper``, holds a list of such values (with ``LocalDateWrapper`` as branch 12
inside it) for several ordering fields. Versions 1 and 2 are Java and Kryo serializations and are refused.

The metadata table writes the empty version-3 block (no keys) first in each new file group's first log file.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from dataclasses import dataclass

from hudi_clusterd.errors import LogFileError
from hudi_clusterd.formats.log.block import BlockType, HeaderKey, LogBlock

DELETE_BLOCK_VERSION = 3
_EMPTY_DELETE_CONTENT = struct.pack(">ii", DELETE_BLOCK_VERSION, 1) + b"\x00"  # Avro: an empty array

ORDERING_KINDS = ("null", "boolean", "int", "long", "float", "double", "bytes", "string", "date", "decimal",
                  "time_micros", "timestamp_micros")
"""The ordering value's union branches 0-11 by index: null, then the wrapper of each Java class (``IntWrapper``
is an Integer, ``LongWrapper`` a Long, ...). Branch 12 is ``ArrayWrapper`` (kind ``array``)."""

_ARRAY_BRANCH = 12
_LOCAL_DATE_BRANCH = 12  # inside ArrayWrapper
_DECIMAL_SCALE = 15
_EPOCH = datetime.date(1970, 1, 1)


@dataclass(frozen=True)
class OrderingValue:
    """A deleted record's ordering value: its kind (``ORDERING_KINDS``, ``array`` or ``local_date``) and value
    (None, bool, int, float, bytes, str, a date, a Decimal, or a tuple of ``OrderingValue`` for ``array``)."""

    kind: str
    value: object

    @property
    def is_default(self) -> bool:
        """Hudi's DEFAULT_ORDERING_VALUE, ``Integer 0`` (or none at all): a delete by commit time."""
        return self.kind == "null" or (self.kind == "int" and self.value == 0)


@dataclass(frozen=True)
class DeletedRecord:
    """One record of a DELETE block."""

    record_key: str | None
    partition_path: str | None
    ordering: OrderingValue


def empty_delete_block(instant: str) -> LogBlock:
    """The DELETE block with no keys that starts each new MDT file group's first log file (80 bytes for a
    17-digit instant)."""
    return LogBlock(BlockType.DELETE, {HeaderKey.INSTANT_TIME: instant}, _EMPTY_DELETE_CONTENT)


class _Reader:
    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.pos = 0
        self.where = where

    def fail(self, what: str) -> LogFileError:
        return LogFileError(f"{self.where}: DELETE block record list {what} at content byte {self.pos}")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail("runs past its end")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def long(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise self.fail("has a bad varint")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (result >> 1) ^ -(result & 1)

    def string(self) -> str:
        try:
            return self.take(self.long()).decode()
        except UnicodeDecodeError:
            raise self.fail("holds a string that is not UTF-8") from None

    def optional_string(self) -> str | None:
        branch = self.long()
        if branch not in (0, 1):
            raise self.fail(f"has union branch {branch} for a [null, string]")
        return None if branch == 0 else self.string()

    def array(self) -> int:
        """The item count of an Avro array's next block (0 ends the array)."""
        count = self.long()
        if count < 0:
            self.long()  # the block's byte size
            count = -count
        return count

    def scalar(self, kind: str) -> object:
        if kind == "null":
            return None
        if kind == "boolean":
            raw = self.take(1)[0]
            if raw > 1:
                raise self.fail(f"has boolean byte {raw}")
            return raw == 1
        if kind in ("int", "long", "time_micros", "timestamp_micros"):
            return self.long()
        if kind == "date" or kind == "local_date":
            return _EPOCH + datetime.timedelta(days=self.long())
        if kind == "float":
            return float(struct.unpack("<f", self.take(4))[0])
        if kind == "double":
            return float(struct.unpack("<d", self.take(8))[0])
        if kind == "string":
            return self.string()
        payload = self.take(self.long())
        if kind == "bytes":
            return payload
        return decimal.Decimal(int.from_bytes(payload, "big", signed=True)).scaleb(-_DECIMAL_SCALE)

    def ordering(self) -> OrderingValue:
        branch = self.long()
        if 0 <= branch < len(ORDERING_KINDS):
            kind = ORDERING_KINDS[branch]
            return OrderingValue(kind, self.scalar(kind))
        if branch != _ARRAY_BRANCH:
            raise self.fail(f"has ordering value union branch {branch}, which no Hudi release writes")
        if self.long() == 0:
            return OrderingValue("array", None)
        values: list[OrderingValue] = []
        while count := self.array():
            for _ in range(count):
                inner = self.long()
                if inner == _LOCAL_DATE_BRANCH:
                    values.append(OrderingValue("local_date", self.scalar("local_date")))
                elif 0 <= inner < len(ORDERING_KINDS):
                    values.append(OrderingValue(ORDERING_KINDS[inner], self.scalar(ORDERING_KINDS[inner])))
                else:
                    raise self.fail(f"has array ordering value union branch {inner}")
        return OrderingValue("array", tuple(values))


def delete_block_records(block: LogBlock, *, source: str, offset: int = 0) -> list[DeletedRecord]:
    """The deleted records of a DELETE block of version 3, in order. Raises ``LogFileError`` naming ``source``
    and the block's ``offset`` for versions 1 and 2, an unknown version or union branch, or damaged bytes."""
    where = f"{source}: DELETE block at byte {offset}"
    if len(block.content) < 8:
        raise LogFileError(f"{where} has {len(block.content)} content bytes, too few for its version and length")
    version, length = struct.unpack_from(">ii", block.content, 0)
    if version != DELETE_BLOCK_VERSION:
        why = "a Java or Kryo serialization" if version in (1, 2) else "unknown"
        raise LogFileError(f"{where} is of version {version} ({why}); only version {DELETE_BLOCK_VERSION} "
                           "(Avro) is read")
    if length != len(block.content) - 8:
        raise LogFileError(f"{where} declares {length} record bytes but holds {len(block.content) - 8}")
    reader = _Reader(block.content[8:], where)
    out: list[DeletedRecord] = []
    while count := reader.array():
        for _ in range(count):
            key = reader.optional_string()
            partition = reader.optional_string()
            out.append(DeletedRecord(key, partition, reader.ordering()))
    if reader.pos != len(reader.data):
        raise reader.fail(f"has {len(reader.data) - reader.pos} stray bytes")
    return out
