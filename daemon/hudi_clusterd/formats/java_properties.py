r"""Java ``.properties`` codec, faithful to ``java.util.Properties.load`` and ``store``.

Hudi keeps ``hoodie.properties`` in this format and its jobs read ``--props`` files with it, so our reader
accepts everything Java writes and reads it back the way Java does:

* a *natural* line ends at ``\n``, ``\r`` or ``\r\n``; a *logical* line continues onto the next natural line
  when it ends with an odd number of backslashes, and the continuation's leading whitespace is dropped;
* whitespace is space, tab and form feed; blank lines are skipped; a natural line whose first
  non-whitespace character is ``#`` or ``!`` is a comment (comments never continue);
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace around one ``=``/``:``
  separator is skipped; the rest of the line, trailing whitespace included, is the value;
* ``\t \n \r \f`` and ``\uXXXX`` are escapes; a backslash before any other character stands for that
  character (``\:`` is ``:``, ``\\`` is a backslash). Java silently drops such a backslash even where it
  was meant literally (``2024\d+`` reads as ``2024d+``), so :func:`parse_properties_document` reports each
  of those as a warning;
* a later duplicate key replaces an earlier one.

The writer escapes like ``Properties.store(OutputStream, ...)``: ``\``, ``=``, ``:``, ``#``, ``!`` get a
backslash, every space in a key and a leading space in a value become ``\ ``, control characters use the
letter escapes, and other characters outside printable ASCII become ``\uXXXX`` (UTF-16 code units,
upper-case hex), so the output is plain ASCII. Unlike Java it writes no date comment, and it keeps the given
order.

Decoding bytes is the caller's choice: Java reads ``InputStream``s as ISO-8859-1, which is lossless for the
ASCII files ``store`` produces.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hudi_clusterd.errors import MetadataDecodeError

__all__ = [
    "ParsedProperties",
    "PropertyEntry",
    "format_properties",
    "parse_properties",
    "parse_properties_document",
]

_WHITESPACE = " \t\f"
_NATURAL_LINE = re.compile(r"\r\n|\r|\n")
_LETTER_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
# Characters whose escaping is part of the syntax; a backslash before anything else is dropped with a warning.
_MEANINGFUL_ESCAPES = frozenset("\\=:#! \t\f") | frozenset(_LETTER_ESCAPES) | {"u"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_STORE_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}


@dataclass(frozen=True, slots=True)
class PropertyEntry:
    """One ``key=value`` pair, with the 1-based line number its logical line starts on."""

    key: str
    value: str
    line: int


@dataclass(frozen=True, slots=True)
class ParsedProperties:
    """Every entry of a ``.properties`` text in file order, plus warnings about dropped backslashes."""

    entries: tuple[PropertyEntry, ...]
    warnings: tuple[str, ...]

    def as_dict(self) -> dict[str, str]:
        """Key to value; the last occurrence of a duplicate key wins, as in Java."""
        return {e.key: e.value for e in self.entries}

    def duplicate_keys(self) -> dict[str, tuple[int, ...]]:
        """Keys set more than once, with every line they were set on."""
        lines: dict[str, list[int]] = {}
        for e in self.entries:
            lines.setdefault(e.key, []).append(e.line)
        return {k: tuple(v) for k, v in lines.items() if len(v) > 1}


def parse_properties(text: str, source: str) -> dict[str, str]:
    """Parse ``.properties`` text into a dict.

    Raises :class:`MetadataDecodeError` naming ``source`` and the line number for a malformed ``\\uXXXX``
    escape or an unpaired UTF-16 surrogate (the only inputs Java rejects or cannot represent).
    """
    return parse_properties_document(text, source).as_dict()


def parse_properties_document(text: str, source: str) -> ParsedProperties:
    """Parse ``.properties`` text keeping order, line numbers, duplicates and warnings."""
    entries: list[PropertyEntry] = []
    warnings: list[str] = []
    for line_no, logical in _logical_lines(text):
        key_raw, value_raw = _split_key_value(logical)
        key = _unescape(key_raw, source, line_no, warnings)
        value = _unescape(value_raw, source, line_no, warnings)
        entries.append(PropertyEntry(key, value, line_no))
    return ParsedProperties(tuple(entries), tuple(warnings))


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    natural = _NATURAL_LINE.split(text)
    i = 0
    while i < len(natural):
        start = i
        line = natural[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        parts: list[str] = []
        while _ends_with_odd_backslashes(line):
            parts.append(line[:-1])
            if i >= len(natural):  # a continuation at end of input: Java drops the backslash
                line = ""
                break
            line = natural[i].lstrip(_WHITESPACE)
            i += 1
        parts.append(line)
        yield start + 1, "".join(parts)


def _ends_with_odd_backslashes(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    escaped = False
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    for idx, ch in enumerate(line):
        if not escaped and ch in "=:":
            key_end, value_start, has_separator = idx, idx + 1, True
            break
        if not escaped and ch in _WHITESPACE:
            key_end, value_start = idx, idx + 1
            break
        escaped = ch == "\\" and not escaped
    while value_start < len(line):
        ch = line[value_start]
        if ch not in _WHITESPACE:
            if has_separator or ch not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(raw: str, source: str, line_no: int, warnings: list[str]) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i = 0
    n = len(raw)
    while i < n:
        ch = raw[i]
        i += 1
        if ch != "\\":
            out.append(ch)
            continue
        if i >= n:  # only reachable for a dangling backslash at end of input, which Java drops
            break
        esc = raw[i]
        i += 1
        if esc == "u":
            digits = raw[i : i + 4]
            if len(digits) != 4 or not set(digits) <= _HEX_DIGITS:
                bad = "\\u" + digits
                raise MetadataDecodeError(f"{source}: line {line_no}: malformed \\uXXXX escape {bad!r}")
            out.append(chr(int(digits, 16)))
            i += 4
        elif esc in _LETTER_ESCAPES:
            out.append(_LETTER_ESCAPES[esc])
        else:
            if esc not in _MEANINGFUL_ESCAPES:
                warnings.append(
                    f"{source}: line {line_no}: '\\{esc}' reads as {esc!r}: a backslash escapes the next "
                    f"character in .properties files; write '\\\\{esc}' to keep the backslash"
                )
            out.append(esc)
    return _join_surrogates("".join(out), source, line_no)


def _join_surrogates(text: str, source: str, line_no: int) -> str:
    """Turn UTF-16 surrogate pairs written as two ``\\uXXXX`` escapes into one code point."""
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError as exc:
        raise MetadataDecodeError(f"{source}: line {line_no}: unpaired UTF-16 surrogate in \\uXXXX escapes") from exc


def format_properties(
    items: Mapping[str, str] | Iterable[tuple[str, str]],
    header_comments: Sequence[str] = (),
) -> str:
    """Write entries in order as ``.properties`` text, escaping as Java's ``Properties.store`` does.

    Each header comment becomes one or more ``#`` lines (line breaks inside a comment start a new ``#`` line).
    The result is ASCII and ends with a newline.
    """
    pairs = items.items() if isinstance(items, Mapping) else items
    lines: list[str] = []
    for comment in header_comments:
        lines.extend("#" + _escape_non_ascii(part) for part in _NATURAL_LINE.split(comment))
    for key, value in pairs:
        lines.append(_escape(key, is_key=True) + "=" + _escape(value, is_key=False))
    return "".join(line + "\n" for line in lines)


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for idx, ch in enumerate(text):
        if ch == " ":
            out.append("\\ " if is_key or idx == 0 else " ")
        elif ch in _STORE_ESCAPES:
            out.append(_STORE_ESCAPES[ch])
        elif ch in "=:#!":
            out.append("\\" + ch)
        elif " " < ch <= "~":
            out.append(ch)
        else:
            out.append(_unicode_escape(ch))
    return "".join(out)


def _escape_non_ascii(text: str) -> str:
    return "".join(ch if " " <= ch <= "~" or ch == "\t" else _unicode_escape(ch) for ch in text)


def _unicode_escape(ch: str) -> str:
    units = ch.encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{units[i] << 8 | units[i + 1]:04X}" for i in range(0, len(units), 2))
