"""Parsers of configuration values: text in, a value out, or ``ValueError("must be ..., got ...")``."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TypeVar

_JAVA_INT_MAX = 2**31 - 1
_JAVA_LONG_MAX = 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")
_E = TypeVar("_E", bound=StrEnum)


def java_integer(raw: str, maximum: int) -> int:
    text = raw.strip()
    if not _INTEGER.fullmatch(text):
        raise ValueError(f"must be an integer, got {raw!r}")
    value = int(text)
    if not -maximum - 1 <= value <= maximum:
        raise ValueError(f"must fit a Java {'int' if maximum == _JAVA_INT_MAX else 'long'}, got {text}")
    return value


def java_int(raw: str) -> int:
    return java_integer(raw, _JAVA_INT_MAX)


def java_long(raw: str) -> int:
    return java_integer(raw, _JAVA_LONG_MAX)


def boolean(raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"must be true or false, got {raw!r}")
    return text == "true"


def fraction(raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ValueError(f"must be a number between 0 and 1 (exclusive), got {raw!r}") from None
    if not 0.0 < value < 1.0:
        raise ValueError(f"must be between 0 and 1 (exclusive), got {raw.strip()}")
    return value


def optional_text(raw: str) -> str | None:
    return raw.strip() or None


def csv(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def unique_csv(raw: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(csv(raw)))


def regex(raw: str) -> str | None:
    text = raw.strip()
    if not text:
        return None
    try:
        re.compile(text)
    except re.error as exc:
        raise ValueError(f"must be a valid regular expression ({exc}), got {raw!r}") from None
    return text


def class_name(raw: str) -> str:
    name = raw.strip()
    if not name:
        raise ValueError("must be a class name, got ''")
    return name


def any_text(raw: str) -> str:
    return raw


def enum_member(enum: type[_E], text: str, raw: str) -> _E:
    for member in enum:
        if member.value == text:
            return member
    raise ValueError(f"must be one of {', '.join(m.value for m in enum)}, got {raw!r}")
