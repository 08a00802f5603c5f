"""The HFile file info block: ``PBUF``, a protobuf varint length, protobuf ``InfoProto {repeated BytesBytesPair
map_entry = 1}`` in ``java.util.HashMap`` iteration order.

The writer sets ``MAX_MEMSTORE_TS_KEY`` (``int64 0``), ``hfile.LASTKEY`` (``int16 len(row)`` and the last row),
``hfile.AVG_KEY_LEN`` and ``hfile.AVG_VALUE_LEN`` (``int32``, row and value bytes per cell),
``hfile.CREATE_TIME_TS`` (``int64`` ms) and ``KEY_VALUE_VERSION`` (``int32 1``: each cell carries an MVCC vlong);
the caller adds the rest (``schema`` in the MDT)."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from hudi_clusterd.formats.hfile.encoding import (
    java_hashmap_order,
    pb_bytes_field,
    pb_fields,
    pb_read_varint,
    pb_varint,
)
from hudi_clusterd.formats.hfile.format import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    CREATE_TIME_KEY,
    KEY_VALUE_VERSION,
    LAST_KEY,
    MAX_MEMSTORE_TS_KEY,
    PB_MAGIC,
    Damage,
)


def read_file_info(payload: bytes, offset: int) -> dict[str, bytes]:
    """The entries of a file info block's payload, in file order."""
    if payload[:4] != PB_MAGIC:
        raise Damage("file info lacks its PBUF magic", offset)
    try:
        length, pos = pb_read_varint(payload, 4, len(payload))
        if pos + length != len(payload):
            raise ValueError(f"file info protobuf of {length} bytes does not fill its block")
        info: dict[str, bytes] = {}
        for number, entry in pb_fields(payload, pos, pos + length):
            if number != 1 or not isinstance(entry, bytes):
                raise ValueError(f"unexpected InfoProto field {number}")
            pair = dict(pb_fields(entry, 0, len(entry)))
            first, second = pair.get(1), pair.get(2)
            if not isinstance(first, bytes) or not isinstance(second, bytes):
                raise ValueError("file info entry lacks its name or value")
            name = first.decode()
            if name in info:
                raise ValueError(f"file info key {name!r} repeats")
            info[name] = second
    except (ValueError, UnicodeDecodeError) as e:
        raise Damage(f"corrupt file info ({e})", offset) from e
    return info


def int_info(info: Mapping[str, bytes], key: str, width: int) -> int | None:
    """The big-endian signed integer of ``width`` bytes under ``key``; None when the entry is absent."""
    raw = info.get(key)
    if raw is None:
        return None
    if len(raw) != width:
        raise Damage(f"file info {key} holds {len(raw)} bytes, expected {width}")
    return int.from_bytes(raw, "big", signed=True)


def encode_file_info(extra: Mapping[str, bytes], rows: Sequence[tuple[bytes, bytes]], create_time_ms: int) -> bytes:
    """The payload of the file info block of an HFile of ``rows``: the computed entries and the caller's ``extra``
    ones, in the iteration order of the ``HashMap`` Hudi's writer fills."""
    n = len(rows)
    last_row = rows[-1][0] if rows else b""
    computed = {
        MAX_MEMSTORE_TS_KEY: struct.pack(">q", 0),
        LAST_KEY: struct.pack(">h", len(last_row)) + last_row if rows else b"",
        AVG_KEY_LEN: struct.pack(">i", sum(len(r) for r, _ in rows) // n if n else 0),
        CREATE_TIME_KEY: struct.pack(">q", create_time_ms),
        AVG_VALUE_LEN: struct.pack(">i", sum(len(v) for _, v in rows) // n if n else 0),
        KEY_VALUE_VERSION: struct.pack(">i", 1),
    }
    values = {**extra, **computed}
    insertion = [MAX_MEMSTORE_TS_KEY, *extra, LAST_KEY, AVG_KEY_LEN, CREATE_TIME_KEY, AVG_VALUE_LEN,
                 KEY_VALUE_VERSION]
    info = b"".join(pb_bytes_field(1, pb_bytes_field(1, key.encode()) + pb_bytes_field(2, bytes(values[key])))
                    for key in java_hashmap_order(insertion))
    return PB_MAGIC + pb_varint(len(info)) + info
