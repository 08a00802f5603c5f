"""Hudi's record-key bloom filter: bit-compatible with Apache Hudi's own, and written into our base files.

Two kinds of evidence that our filter is Hudi's, bit for bit, without a JVM:

- the footers of the golden tables, written by Apache Hudi: decoded, they contain every key of their file, and
  our filter built from the same keys encodes to the very same footer string;
- digests of footer strings that Apache Hudi 0.15.0 itself produced (``BloomFilterFactory.createBloomFilter``,
  ``add`` of each key, ``serializeToString``, and ``mightContain`` of the probe keys on the filter read back with
  ``BloomFilterFactory.fromString``; a throwaway Java harness over hudi-spark3.5-bundle_2.12-0.15.0.jar) for
  the key sets below. The golden files hold one to four keys; these sets cover the rest: growth to a second row,
  the round robin once the rows are full, keys of every length modulo 4 with non-ASCII tail bytes, duplicates,
  and SIMPLE filters.
"""

from __future__ import annotations

import base64
import hashlib
import random
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hudi_clusterd.errors import BloomFilterError, ClusterdError, ExecutionError
from hudi_clusterd.formats.avro_schema import arrow_to_avro_json
from hudi_clusterd.formats.bloom import (
    BLOOM_FILTER_FOOTER,
    BLOOM_TYPE_CODE_FOOTER,
    BloomFilterType,
    HudiBloomFilter,
    bit_size,
    hash_count,
)
from hudi_clusterd.formats.bloom_hash import key_positions
from hudi_clusterd.formats.java_properties import parse_properties
from hudi_clusterd.table.base_file_writer import BaseFileTaskWriter, BaseFileWriteSpec, TaskIds

# --- golden tables written by Apache Hudi --------------------------------------------------------------------


def _golden_files(root: Path) -> list[tuple[Path, bool]]:
    """Every base file of every golden v6 table, with whether its table populates meta fields."""
    out: list[tuple[Path, bool]] = []
    for table in sorted(p for p in root.iterdir() if p.is_dir()):
        props = parse_properties((table / ".hoodie" / "hoodie.properties").read_text(), str(table))
        populated = props.get("hoodie.populate.meta.fields", "true") == "true"
        out.extend((f, populated) for f in sorted(table.rglob("*.parquet")) if ".hoodie" not in f.parts)
    return out


def _rebuilt_like(theirs: HudiBloomFilter, keys: list[str]) -> HudiBloomFilter:
    """Our filter from ``keys``, with the geometry Hudi's decoded filter shows (its settings, whatever they were)."""
    ours = HudiBloomFilter(theirs.type_code, theirs.vector_size, theirs.num_hashes, theirs.keys_per_row,
                           max_entries=100_000, rows=[np.zeros(theirs.vector_size, dtype=np.bool_)])
    ours.add(keys)
    return ours


def test_golden_footers_decode_hold_their_keys_and_reencode_byte_for_byte(golden_tables: Path) -> None:
    matched = 0
    files = _golden_files(golden_tables)
    for path, populated in files:
        meta = pq.read_metadata(path).metadata or {}
        theirs = HudiBloomFilter.from_footers(meta)
        if not populated:
            # Hudi writes no filter without meta fields (and neither do we)
            assert theirs is None, path
            continue
        assert theirs is not None, path
        assert meta[BLOOM_TYPE_CODE_FOOTER.encode()] == b"DYNAMIC_V0"
        keys = pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist()
        # Hudi's filter contains every key of its file, as we read it
        assert all(theirs.might_contain(k) for k in keys), path
        assert theirs.might_contain_many(keys).all()
        # it was sized by Hudi's defaults, exactly as we size a filter from them
        default = HudiBloomFilter.create()
        assert (theirs.vector_size, theirs.num_hashes, theirs.keys_per_row) == (
            default.vector_size, default.num_hashes, default.keys_per_row)
        # and our filter of the same keys, in file order, is the same footer string, byte for byte
        footer = meta[BLOOM_FILTER_FOOTER.encode()].decode()
        assert _rebuilt_like(theirs, keys).to_footer() == footer, path
        default.add(keys)
        assert default.footers() == {BLOOM_FILTER_FOOTER: footer, BLOOM_TYPE_CODE_FOOTER: "DYNAMIC_V0"}
        assert theirs.to_footer() == footer  # and decoding loses nothing
        matched += 1
    assert matched >= 20 and matched == sum(populated for _, populated in files)


# --- footers produced by Apache Hudi 0.15.0 itself -----------------------------------------------------------


def _seq(n: int) -> list[str]:
    return [f"key-{i:08d}" for i in range(n)]


def _mixed(n: int) -> list[str]:
    """Keys of many lengths, with multi-byte UTF-8 (bytes >= 0x80) in the 1 to 3 tail bytes Murmur sign-extends."""
    return [("é" * (i % 7)) + str(i * 7919 % 100003) + "ü€𝄞ÿ"[: i % 5] + "x" * (i % 3) for i in range(n)]


PROBES = [f"absent-{i}-ñ" * (1 + i % 3) for i in range(20_000)]

# name: (type, num_entries, fpp, max_entries, keys, sha256 of Hudi's footer string, its length,
#        sha256 of Hudi's mightContain answers on PROBES as a '0'/'1' string, or None)
HUDI_FOOTERS: dict[str, tuple[str, int, float, int, Callable[[], list[str]], str, int, str | None]] = {
    "60000 keys, one full row": (
        "DYNAMIC_V0", 60_000, 1e-9, 100_000, lambda: _seq(60_000),
        "8aff6b25955090f6fc48cee86a74e85a96ce843ec3c51d33c0060f2e55d63700", 431_380, None),
    "60001 keys, a second row": (
        "DYNAMIC_V0", 60_000, 1e-9, 100_000, lambda: _seq(60_001),
        "1889c40b8d30430ed24c6fc8745e2886bd4f8ef2170d471dcf04cbe9cc611776", 862_724, None),
    "120000 keys, both rows full": (
        "DYNAMIC_V0", 60_000, 1e-9, 100_000, lambda: _seq(120_000),
        "bd8c4fc4a349816169b1cbc66f680d6c82648632a8b66724436cd3881381ab9b", 862_724, None),
    "250000 keys, round robin": (
        "DYNAMIC_V0", 60_000, 1e-9, 100_000, lambda: _seq(250_000),
        "201837354f7f2e0564d8759d15dc5a4d92e52bee205ea027097f2f95d8d9a2d8", 862_724,
        "fed6113b1d5a4caad955ffd3c8ad7ff35a0307e9b81f9ebfdac7c343f986033d"),
    "mixed keys, 4 rows, duplicates": (
        "DYNAMIC_V0", 500, 0.001, 1700, lambda: _mixed(5000) + _mixed(300),
        "4d97a60d268cb01c2c11ef3fe91797df33d2deef8ee5e656a76073b9f388e526", 4900,
        "9a59bb7921d0aa0f909664f1dfd6954da07cec117accef61f3b42b3aa07acd5c"),
    "mixed keys, SIMPLE": (
        "SIMPLE", 1000, 0.01, 0, lambda: _mixed(3000),
        "c5da6f263aafb9c1cbf96d21008ff2a6526e8722678158cbd51a7b40b201db74", 1616,
        "507adfff276fb317b390370dfc17bf86451b36e340e9bded8bd3e7f6d598e0ba"),
    "max entries below one row": (
        "DYNAMIC_V0", 10, 0.1, 5, lambda: _mixed(100),
        "9ebcd1624ac54e21e7268d35b4e7320a733710b5a39b5d9c7e81551c3276bd10", 60, None),
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("case", list(HUDI_FOOTERS))
def test_footers_match_those_apache_hudi_wrote_for_the_same_keys(case: str) -> None:
    kind, entries, fpp, max_entries, make_keys, digest, length, probe_digest = HUDI_FOOTERS[case]
    keys = make_keys()
    ours = HudiBloomFilter.create(kind, entries, fpp, max_entries)
    half = len(keys) // 3  # added in two calls: the state carries over between adds
    ours.add(keys[:half])
    ours.add(pa.array(keys[half:]))
    footer = ours.to_footer()
    assert (len(footer), _sha(footer)) == (length, digest)
    decoded = HudiBloomFilter.from_footers(ours.footers())
    assert decoded is not None and decoded.type_code == BloomFilterType(kind)
    assert decoded.might_contain_many(keys).all()
    if probe_digest is not None:  # false positives included, decoded filters answer as Hudi's did
        answers = "".join("1" if hit else "0" for hit in decoded.might_contain_many(PROBES))
        assert _sha(answers) == probe_digest


def test_sizing_follows_hudis_formulas() -> None:
    assert (bit_size(60_000, 1e-9), hash_count(bit_size(60_000, 1e-9), 60_000)) == (2_587_966, 30)
    f = HudiBloomFilter.create()
    assert (f.type_code, f.vector_size, f.num_hashes, f.keys_per_row, f.max_entries) == (
        BloomFilterType.DYNAMIC_V0, 2_587_966, 30, 60_000, 100_000)
    raw = base64.b64decode(f.to_footer())
    # version -1, 30 hashes, Murmur, 2587966 bits; 60000 keys per row, none yet, one row; the row, all zero
    assert raw[:25] == struct.pack(">iibiiii", -1, 30, 1, 2_587_966, 60_000, 0, 1)
    assert raw[25:38] == struct.pack(">iibi", -1, 30, 1, 2_587_966) and not any(raw[38:])
    assert len(raw) == 38 + (2_587_966 + 7) // 8


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=30))
def test_bulk_hashing_sets_the_bits_of_the_reference_murmur(keys: list[bytes]) -> None:
    f = HudiBloomFilter.create(BloomFilterType.SIMPLE, num_entries=50, fpp=0.01)
    f.add(keys)
    expected = sorted({p for k in keys for p in key_positions(k, f.num_hashes, f.vector_size)})
    assert np.flatnonzero(f.rows[0]).tolist() == expected


# --- round trip, false positives -----------------------------------------------------------------------------


def _random_keys(rng: random.Random, n: int) -> list[str]:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_:,éüß€日本𝄞"
    return [f"{i}:" + "".join(rng.choices(alphabet, k=rng.randint(0, 40))) for i in range(n)]


def test_round_trip_of_many_random_keys() -> None:
    rng = random.Random(7)
    keys = _random_keys(rng, 150_000)  # past two rows of 60000: the round robin too
    f = HudiBloomFilter.create()
    for start in range(0, len(keys), 40_000):
        f.add(keys[start:start + 40_000])
    footer = f.to_footer()
    back = HudiBloomFilter.from_footer(footer, "DYNAMIC_V0")
    assert back.to_footer() == footer
    assert len(back.rows) == 2 and back.row_keys == 150_000 - 60_000
    assert back.might_contain_many(keys).all()
    others = [f"other-{k}" for k in keys[:20_000]]
    assert np.array_equal(back.might_contain_many(others), f.might_contain_many(others))
    assert back.might_contain(keys[123]) and back.might_contain(keys[123].encode())


def test_false_positive_rate_is_near_the_configured_fpp() -> None:
    # deterministic keys, so the counts below never change from run to run; the bounds hold them with a margin
    # of more than 5 standard deviations of a binomial with the configured rate
    keys = [f"rec-{i:07d}" for i in range(10_000)]
    probes = [f"probe-{i:07d}" for i in range(100_000)]
    for kind in BloomFilterType:
        f = HudiBloomFilter.create(kind, num_entries=10_000, fpp=0.01)
        f.add(keys)
        rate = float(f.might_contain_many(probes).mean())
        assert 0.0085 < rate < 0.0115, (kind, rate)  # 0.01 +- 5 sigma (sigma = 0.0003)
    # Hudi's defaults at their design load: 1e-9, so no false positive in 100000 probes
    f = HudiBloomFilter.create()
    f.add([f"rec-{i:07d}" for i in range(60_000)])
    assert int(f.might_contain_many(probes).sum()) == 0


# --- refusals and decode errors ------------------------------------------------------------------------------


def test_null_and_empty_keys_are_refused() -> None:
    f = HudiBloomFilter.create()
    with pytest.raises(BloomFilterError, match="#1 is empty"):
        f.add(["a", "", "b"])
    with pytest.raises(BloomFilterError, match="1 of 2 record keys are null"):
        f.add(pa.array(["a", None]))
    with pytest.raises(BloomFilterError, match="empty"):
        f.might_contain("")


def test_bad_settings_are_refused() -> None:
    with pytest.raises(BloomFilterError, match="false-positive rate"):
        HudiBloomFilter.create(fpp=0.0)
    with pytest.raises(BloomFilterError, match="entries must be positive"):
        HudiBloomFilter.create(num_entries=0)
    with pytest.raises(BloomFilterError, match="'DYNAMIC_V1' is unknown"):
        HudiBloomFilter.create("DYNAMIC_V1")
    assert HudiBloomFilter.create("dynamic_v0").type_code is BloomFilterType.DYNAMIC_V0  # as Hudi, any case


def _footer(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(("value", "type_code", "message"), [
    ("not base64!", "DYNAMIC_V0", "not valid Base64"),
    (_footer(b"\xff\xff\xff\xff\x00"), "DYNAMIC_V0", "truncated: 5 bytes end in the header of the filter"),
    (_footer(struct.pack(">iibi", 3, 30, 1, 64)), "SIMPLE", "format version 3"),
    (_footer(struct.pack(">iibi", -1, 30, 0, 64)), "SIMPLE", "hash type 0"),
    (_footer(struct.pack(">iibi", -1, 30, 1, 64) + b"\x00" * 7), "SIMPLE", "filter needs 8 bytes of bits"),
    (_footer(struct.pack(">iibi", -1, 3, 1, 64)), "DYNAMIC_V0", "truncated: 13 bytes end in the row counts"),
    (_footer(struct.pack(">iibiiii", -1, 3, 1, 64, 10, 0, 1) + struct.pack(">iibi", -1, 4, 1, 64) + bytes(8)),
     "DYNAMIC_V0", "row 0 has 4 hashes of 64 bits, the filter 3 of 64"),
    (_footer(struct.pack(">iibiiii", -1, 3, 1, 64, 10, 0, 2) + struct.pack(">iibi", -1, 3, 1, 64) + bytes(8)),
     "DYNAMIC_V0", "truncated: 46 bytes end in the header of the row 1"),
    (_footer(struct.pack(">iibi", -1, 3, 1, 64) + bytes(8)), "BLOOMY", "'BLOOMY' is unknown"),
], ids=["base64", "short-header", "version", "hash-type", "short-bits", "short-counts", "row-geometry", "short-row",
        "type-code"])
def test_undecodable_footers_say_what_is_wrong(value: str, type_code: str, message: str) -> None:
    with pytest.raises(BloomFilterError, match=message) as err:
        HudiBloomFilter.from_footer(value, type_code)
    assert isinstance(err.value, ClusterdError)


def test_footers_without_type_code_are_simple_and_old_key_is_read() -> None:
    f = HudiBloomFilter.create("SIMPLE", 100, 0.01)
    f.add(["k1", "k2"])
    assert set(f.footers()) == {BLOOM_FILTER_FOOTER}  # Hudi writes the type code for DYNAMIC kinds only
    back = HudiBloomFilter.from_footers({"com.uber.hoodie.bloomfilter": f.to_footer()})
    assert back is not None and back.type_code is BloomFilterType.SIMPLE and back.might_contain("k2")
    assert HudiBloomFilter.from_footers({"other": "x"}) is None


# --- base files written by our writer ------------------------------------------------------------------------

T = "20240101000000001"
DATA = pa.schema([("id", pa.int64()), ("part", pa.string())])


def _spec(base: Path, **kw: object) -> BaseFileWriteSpec:
    return BaseFileWriteSpec(storage=str(base), instant_time=T, data_schema=DATA,
                             avro_schema_json=arrow_to_avro_json(DATA, "t", with_meta_fields=True), **kw)  # type: ignore[arg-type]


def _rows(keys: list[str | None], part: str) -> pa.RecordBatch:
    return pa.record_batch({"_hoodie_record_key": pa.array(keys, pa.string()),
                            "_hoodie_partition_path": [part] * len(keys),
                            "id": pa.array(range(len(keys)), pa.int64()), "part": [part] * len(keys)})


def _file_keys(path: Path) -> list[str]:
    return [k for k in pq.read_table(path, columns=["_hoodie_record_key"]).column(0).to_pylist() if k is not None]


def test_written_base_files_carry_hudis_filter_of_their_keys(tmp_path: Path) -> None:
    # Given rows of two partitions over several batches, keys not in order
    batches = [_rows([f"k{i * 37 % 1000}" for i in range(s, s + 100)], "a") for s in range(0, 400, 100)]
    batches.append(_rows(["z2", "z1", "z3"], "b"))
    files = list(BaseFileTaskWriter(_spec(tmp_path), TaskIds(0, 1, 2)).write(batches))
    assert [f.num_rows for f in files] == [400, 3]
    for f in files:
        meta = pq.read_metadata(tmp_path / f.path).metadata
        # Then each file carries both footers
        assert meta[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0"
        filt = HudiBloomFilter.from_footers(meta)
        assert filt is not None
        # whose filter holds every key of the file, and is the filter built directly from its keys in row order
        keys = _file_keys(tmp_path / f.path)
        assert filt.might_contain_many(keys).all()
        direct = HudiBloomFilter.create()
        direct.add(keys)
        assert meta[b"org.apache.hudi.bloomfilter"].decode() == direct.to_footer()
        assert meta[b"hoodie_min_record_key"].decode() == min(keys)


def test_writer_builds_multi_row_filters_across_batches_with_the_spec_settings(tmp_path: Path) -> None:
    # Given settings that open rows after 100 keys, up to 3 rows, and 1000 keys in batches of 70 (one null)
    spec = _spec(tmp_path, bloom_num_entries=100, bloom_fpp=0.01, bloom_dynamic_max_entries=250)
    keys: list[str | None] = [f"key{i}" for i in range(1000)]
    keys[500] = None
    batches = [_rows(keys[s:s + 70], "p") for s in range(0, 1000, 70)]
    [f] = BaseFileTaskWriter(spec, TaskIds(0, 1, 2)).write(batches)
    meta = pq.read_metadata(tmp_path / f.path).metadata
    filt = HudiBloomFilter.from_footers(meta)
    # Then the filter has 3 rows and is the one built at once from the file's 999 keys (nulls left out)
    assert filt is not None and len(filt.rows) == 3 and filt.keys_per_row == 100
    direct = HudiBloomFilter.create("DYNAMIC_V0", 100, 0.01, 250)
    direct.add(_file_keys(tmp_path / f.path))
    assert filt.to_footer() == direct.to_footer()


def test_writer_simple_filter_disabled_filter_and_no_meta_fields(tmp_path: Path) -> None:
    [simple] = BaseFileTaskWriter(_spec(tmp_path / "s", bloom_filter_type="SIMPLE"), TaskIds(0, 1, 2)).write(
        [_rows(["a", "b"], "p")])
    meta = pq.read_metadata(tmp_path / "s" / simple.path).metadata
    assert b"hoodie_bloom_filter_type_code" not in meta  # as Hudi: no type code for SIMPLE
    filt = HudiBloomFilter.from_footers(meta)
    assert filt is not None and filt.type_code is BloomFilterType.SIMPLE and filt.might_contain("b")
    for name, kw in [("off", {"bloom_filter_enabled": False}), ("nometa", {"populate_meta_fields": False})]:
        [f] = BaseFileTaskWriter(_spec(tmp_path / name, **kw), TaskIds(0, 1, 2)).write([_rows(["a"], "p")])
        meta = pq.read_metadata(tmp_path / name / f.path).metadata
        assert b"org.apache.hudi.bloomfilter" not in meta and b"hoodie_bloom_filter_type_code" not in meta


def test_writer_empty_record_key_fails_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ExecutionError, match=r"file p/.*\.parquet: record key #1 is empty"):
        list(BaseFileTaskWriter(_spec(tmp_path), TaskIds(0, 1, 2)).write([_rows(["a", ""], "p")]))
    with pytest.raises(ExecutionError, match="false-positive rate"):
        list(BaseFileTaskWriter(_spec(tmp_path / "bad", bloom_fpp=2.0), TaskIds(0, 1, 2)).write([_rows(["a"], "p")]))
