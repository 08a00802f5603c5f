"""The encodings HFiles are made of, against what Java produces: ``HashMap`` order, ``GZIPOutputStream``
bytes, CRC-32C."""

from __future__ import annotations

import hashlib

from hudi_clusterd.formats.hfile import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    CREATE_TIME_KEY,
    KEY_VALUE_VERSION,
    LAST_KEY,
    MAX_MEMSTORE_TS_KEY,
    SCHEMA_KEY,
    crc32c,
    java_gzip,
    java_hashmap_order,
)

# ------------------------------------------------------------------------------------------ Java references


def test_java_hashmap_order_matches_java() -> None:
    # printed by OpenJDK 17: new HashMap<String, ?>() filled in the listed order, then keySet()
    assert java_hashmap_order([MAX_MEMSTORE_TS_KEY, SCHEMA_KEY, LAST_KEY, AVG_KEY_LEN, CREATE_TIME_KEY,
                               AVG_VALUE_LEN, KEY_VALUE_VERSION]) == [
        SCHEMA_KEY, LAST_KEY, AVG_VALUE_LEN, AVG_KEY_LEN, KEY_VALUE_VERSION, MAX_MEMSTORE_TS_KEY, CREATE_TIME_KEY]
    keys = [f"k{i:02d}" for i in range(20)] + ["zeta", "Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa", "é", "日本", "😀"]
    assert "|".join(java_hashmap_order(keys)) == (
        "Aa|BB|k11|k10|k13|k12|k15|k14|k17|k16|k19|k18|AaAa|BBBB|AaBB|BBAa|zeta|é|k00|日本|k02|k01|k04|k03|k06|"
        "k05|k08|k07|k09|😀")
    colliding = ["Aa", "BB", "AaAa", "BBBB", "AaBB", "BBAa", "AaAaAa", "BBBBBB", "AaAaBB", "AaBBAa", "BBAaAa",
                 "BBBBAa", "AaBBBB", "BBAaBB"]
    assert java_hashmap_order(colliding) == colliding
    assert java_hashmap_order(["b", "a", "b"]) == ["a", "b"]


def test_gzip_matches_java_gzip_output_stream() -> None:
    assert java_gzip(b"hello hello hello hudi metadata table").hex() == (
        "1f8b0800000000000000cb48cdc9c957c840264b53321572534b1253124b12154a1293725201d61a875325000000")
    payload = "".join(f"row-{i:07d}:{i * 7919 % 100003}|" for i in range(40000)).encode()
    out = bytearray(java_gzip(payload))
    out[9] = 0xFF  # OpenJDK 17 writes OS 255 where Java 8/11 (and the golden files) write 0
    assert (len(payload), len(out)) == (715557, 219203)
    assert hashlib.sha256(out).hexdigest() == "58600bce31a8fd3e9a9415b18938b3513f402e4fe9c783b199b4d5fa84896870"


def test_crc32c_known_answers() -> None:
    assert crc32c(b"") == 0
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(bytes(32)) == 0x8A9136AA


# ------------------------------------------------------------------------------------------------- writer
