"""Java ``.properties`` codec: Java's load/store rules, round trips, and Hudi's real ``hoodie.properties``."""

from __future__ import annotations

import json
import zipfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hudi_clusterd.errors import MetadataDecodeError
from hudi_clusterd.formats.java_properties import (
    format_properties,
    parse_properties,
    parse_properties_document,
)
from tests.support import require_shared

# Text Java can hold in a String and Python can encode: no lone surrogates.
_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)


# --- parsing: separators and whitespace ---


@pytest.mark.parametrize(
    "line",
    ["Truth = Beauty", "  Truth:Beauty", "Truth                    :Beauty", "Truth\tBeauty", "Truth =Beauty"],
)
def test_parse_properties_separator_variants_give_same_pair(line: str) -> None:
    # Given one of the separator spellings Java accepts / When parsed / Then key and value are the same
    assert parse_properties(line, "t") == {"Truth": "Beauty"}


def test_parse_properties_key_without_value_gives_empty_value() -> None:
    assert parse_properties("cheeses\nempty=\n", "t") == {"cheeses": "", "empty": ""}


def test_parse_properties_second_separator_belongs_to_value() -> None:
    # Only one '=' or ':' is a separator; the next one starts the value.
    assert parse_properties("a = = b\nc::d\ne : =f", "t") == {"a": "= b", "c": ":d", "e": "=f"}


def test_parse_properties_trailing_whitespace_kept_in_value() -> None:
    assert parse_properties("k=v  \t", "t") == {"k": "v  \t"}


def test_parse_properties_comments_and_blank_lines_skipped() -> None:
    text = "# comment\n! also a comment\n   # indented comment\n\n \t\f\nk=v\n"
    assert parse_properties(text, "t") == {"k": "v"}


def test_parse_properties_comment_ending_in_backslash_does_not_continue() -> None:
    assert parse_properties("# comment \\\nk=v", "t") == {"k": "v"}


def test_parse_properties_hash_inside_value_is_literal() -> None:
    assert parse_properties("k=a#b!c", "t") == {"k": "a#b!c"}


# --- parsing: continuations and line endings ---


def test_parse_properties_continuation_joins_lines_without_leading_whitespace() -> None:
    text = "fruits   apple, banana, \\\n     pear, \\\n\t  kiwi\nnext=1"
    assert parse_properties(text, "t") == {"fruits": "apple, banana, pear, kiwi", "next": "1"}


def test_parse_properties_even_backslashes_do_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=y", "t") == {"a": "x\\", "b": "y"}


def test_parse_properties_continuation_line_starting_with_hash_is_value() -> None:
    assert parse_properties("a=x\\\n  #y", "t") == {"a": "x#y"}


def test_parse_properties_continuation_at_end_of_input_drops_backslash() -> None:
    assert parse_properties("a=x\\", "t") == {"a": "x"}


def test_parse_properties_continuation_into_blank_line_ends_value() -> None:
    assert parse_properties("a=x\\\n\nb=y", "t") == {"a": "x", "b": "y"}


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_parse_properties_any_line_ending_accepted(newline: str) -> None:
    text = newline.join(["a=1", "b=2 \\", "  3", "# c=4", "d=5"])
    assert parse_properties(text, "t") == {"a": "1", "b": "2 3", "d": "5"}


def test_parse_properties_document_records_start_line_of_each_entry() -> None:
    # Given a continued entry / Then each entry carries the line its logical line starts on
    doc = parse_properties_document("# c\na=1\nb=2\\\n 3\n\nc=4\n", "t")
    assert [(e.key, e.value, e.line) for e in doc.entries] == [("a", "1", 2), ("b", "23", 3), ("c", "4", 6)]


# --- parsing: escapes ---


def test_parse_properties_escaped_separators_and_spaces_in_key() -> None:
    assert parse_properties("a\\:b\\=c\\ d = v\\:w\\=x", "t") == {"a:b=c d": "v:w=x"}


def test_parse_properties_letter_and_unicode_escapes() -> None:
    text = "k=\\t\\n\\r\\f\\u00e9\\u00C9\\\\"
    assert parse_properties(text, "t") == {"k": "\t\n\r\féÉ\\"}


def test_parse_properties_surrogate_pair_escapes_become_one_code_point() -> None:
    assert parse_properties("k=\\uD83D\\uDE00", "t") == {"k": "\U0001f600"}


def test_parse_properties_escaped_leading_space_in_value_kept() -> None:
    assert parse_properties("k=\\  v", "t") == {"k": "  v"}


def test_parse_properties_document_unneeded_backslash_dropped_with_warning() -> None:
    # Given a regex written with a single backslash (Java reads "\d" as "d")
    doc = parse_properties_document("p=2024\\d+\nq=a\\:b", "conf.properties")
    # Then the value matches Java's reading and the lost backslash is reported with file and line
    assert doc.as_dict() == {"p": "2024d+", "q": "a:b"}
    assert len(doc.warnings) == 1
    assert "conf.properties: line 1" in doc.warnings[0]
    assert "\\d" in doc.warnings[0]


def test_parse_properties_duplicate_key_last_wins_and_is_reported() -> None:
    doc = parse_properties_document("a=1\nb=2\na=3\n", "t")
    assert doc.as_dict() == {"a": "3", "b": "2"}
    assert doc.duplicate_keys() == {"a": (1, 3)}


@pytest.mark.parametrize("bad", ["k=\\u12", "k=\\u12G4", "k=x\\u"])
def test_parse_properties_malformed_unicode_escape_raises_with_source_and_line(bad: str) -> None:
    with pytest.raises(MetadataDecodeError, match=r"my\.properties: line 2: malformed \\uXXXX"):
        parse_properties("ok=1\n" + bad, "my.properties")


def test_parse_properties_unpaired_surrogate_raises_with_source_and_line() -> None:
    with pytest.raises(MetadataDecodeError, match=r"s: line 1: unpaired UTF-16 surrogate"):
        parse_properties("k=\\uD83D", "s")


@given(st.text(max_size=200))
def test_parse_properties_arbitrary_text_parses_or_raises_decode_error(text: str) -> None:
    # Whatever the input, the only failure is our own decode error.
    try:
        parse_properties(text, "fuzz")
    except MetadataDecodeError as e:
        assert "fuzz: line " in str(e)


# --- formatting ---


def test_format_properties_escapes_like_java_store() -> None:
    out = format_properties([("a b:c=d#e!f", " v:=#! w\t\n\\é")])
    assert out == "a\\ b\\:c\\=d\\#e\\!f=\\ v\\:\\=\\#\\! w\\t\\n\\\\\\u00E9\n"


def test_format_properties_supplementary_character_written_as_surrogate_pair() -> None:
    assert format_properties({"k": "\U0001f600"}) == "k=\\uD83D\\uDE00\n"


def test_format_properties_header_comments_one_hash_line_each() -> None:
    out = format_properties({"k": "v"}, ["Properties saved", "two\nlines é"])
    assert out == "#Properties saved\n#two\n#lines \\u00E9\nk=v\n"


def test_format_properties_keeps_given_order() -> None:
    assert format_properties([("b", "1"), ("a", "2")]) == "b=1\na=2\n"


@given(st.dictionaries(_TEXT, _TEXT, max_size=8))
def test_format_properties_round_trip_returns_same_mapping(items: dict[str, str]) -> None:
    text = format_properties(items, ["header"])
    assert text.isascii()
    assert parse_properties(text, "rt") == items


@given(st.lists(st.tuples(_TEXT, _TEXT), max_size=8))
def test_format_properties_round_trip_keeps_entry_order(pairs: list[tuple[str, str]]) -> None:
    doc = parse_properties_document(format_properties(pairs), "rt")
    assert [(e.key, e.value) for e in doc.entries] == pairs
    assert doc.warnings == ()


# --- Hudi's own file ---


def _golden_properties(table: str) -> str:
    archive = require_shared("reference", "hudi-tables", "cow", f"{table}.zip")
    with zipfile.ZipFile(archive) as zf:
        return zf.read(f"{table}/.hoodie/hoodie.properties").decode("iso-8859-1")


def test_parse_properties_real_hoodie_properties_schema_is_json() -> None:
    # Given hoodie.properties written by Hudi 0.14 (Java Properties.store escapes ':' in the schema JSON)
    text = _golden_properties("v6_simplekeygen_nonhivestyle_overwritetable")
    # When parsed
    props = parse_properties(text, "hoodie.properties")
    # Then the escapes are undone and the create schema is valid JSON describing the table record
    assert props["hoodie.table.version"] == "6"
    assert props["hoodie.table.name"] == "v6_simplekeygen_nonhivestyle_overwritetable"
    schema = json.loads(props["hoodie.table.create.schema"])
    assert schema["type"] == "record"
    assert "byteField" in [f["name"] for f in schema["fields"]]


def test_format_properties_real_hoodie_properties_rewritten_byte_for_byte() -> None:
    # Given Hudi's file / When its entries are written back / Then every entry line equals Java's escaping
    text = _golden_properties("v6_simplekeygen_nonhivestyle_overwritetable")
    doc = parse_properties_document(text, "hoodie.properties")
    rewritten = format_properties([(e.key, e.value) for e in doc.entries])
    assert rewritten.splitlines() == [line for line in text.splitlines() if not line.startswith("#")]
