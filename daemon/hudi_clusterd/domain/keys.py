"""Configuration keys, declared once, and the one reader of them.

A :class:`Key` is everything the daemon knows about one key: its name, its aliases (read when the name is unset,
in order), the environment variables read after them (in order; a blank variable counts as unset), its default
in the spelling a properties file uses, the parser of its text and its reference text. Every table of keys (the
clustering policy's, the daemon's ``clusterd.*``, each lock provider's, the S3 client's options) is made of them,
and docs/configuration.md lists each key of each table with its default (:func:`reference_rows`).

:class:`KeyReader` reads keys from one mapping of properties and one environment. A parser takes text and returns
the value, or raises ``ValueError("must be ..., got ...")``; the reader records that as the problem
``<key>: must be ..., got ...`` (``<key> (from <VARIABLE>)`` for a value from the environment; a secret's value is
never shown) and goes on with the default, so that every problem of a mapping is reported at once. An unset key
without a default is read as ``""``: every key's parser accepts its default, or ``""`` when it has none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

__all__ = ["Key", "KeyReader", "at_least", "reference_rows"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Key(Generic[T]):
    """One configuration key (see the module docstring). ``field`` names the attribute of the settings object the
    key fills, where a table has one; ``minimum`` is the least value of an integer key checked by its consumer."""

    name: str
    default: str | None
    parse: Callable[[str], T]
    description: str
    field: str | None = None
    minimum: int | None = None
    aliases: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    secret: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        """The name and the aliases."""
        return (self.name, *self.aliases)

    def reference(self) -> tuple[str, str | None, str]:
        """``(name, default, text)`` of the key's row in docs/configuration.md (``None`` = no default); the text
        names the aliases and environment variables read in its place."""
        text = self.description
        if self.aliases:
            text += f" Alias{'es' if len(self.aliases) > 1 else ''}: {', '.join(self.aliases)}."
        if self.env:
            text += f" When unset, read from the environment: {', then '.join(self.env)}."
        return self.name, self.default, text


def reference_rows(keys: Iterable[Key[Any]]) -> list[tuple[str, str | None, str]]:
    """The reference rows of ``keys``, in order."""
    return [key.reference() for key in keys]


def at_least(parse: Callable[[str], int], minimum: int) -> Callable[[str], int]:
    """``parse``, refusing a value below ``minimum`` (``must be >= <minimum>, got <value>``)."""

    def checked(raw: str) -> int:
        value = parse(raw)
        if value < minimum:
            raise ValueError(f"must be >= {minimum}, got {value}")
        return value

    return checked


class KeyReader:
    """Reads keys from ``props`` and ``env`` (none when ``None``), collecting ``problems`` and ``warnings``.

    ``conflicts`` decides what a key set under its name and an alias with different values is: a warning that
    the name wins (``"warn"``, as Hudi reads its aliases) or a problem (``"refuse"``)."""

    def __init__(self, props: Mapping[str, str], env: Mapping[str, str] | None = None, *,
                 conflicts: Literal["warn", "refuse"] = "warn") -> None:
        self.props = props
        self.env: Mapping[str, str] = {} if env is None else env
        self.conflicts = conflicts
        self.problems: list[str] = []
        self.warnings: list[str] = []

    def lookup(self, key: Key[Any]) -> tuple[str, str] | None:
        """``(where, text)`` of the value set for ``key`` (``where`` names the key, the alias or the variable it
        came from), or ``None`` when nothing sets it."""
        found: tuple[str, str] | None = None
        for name in key.names:
            if name not in self.props:
                continue
            if found is None:
                found = (name, self.props[name])
            elif self.props[name].strip() != found[1].strip():
                if self.conflicts == "refuse":
                    self.problems.append(f"{name}: alias of {key.name}, given twice with different values")
                else:
                    self.warnings.append(f"{name}: alias of {key.name}, which is also set and wins")
        if found is not None:
            return found
        for variable in key.env:
            text = self.env.get(variable, "")
            if text.strip():
                return f"{key.name} (from {variable})", text
        return None

    def is_set(self, key: Key[Any]) -> bool:
        """Whether the properties or the environment set ``key``."""
        return self.lookup(key) is not None

    def get(self, key: Key[T]) -> T:
        """The value of ``key``: parsed from what sets it, else from its default; on a parse error, the problem is
        recorded and the default's value returned."""
        found = self.lookup(key)
        where, text = found if found is not None else (key.name, key.default or "")
        try:
            return key.parse(text)
        except ValueError as e:
            self.problems.append(f"{where}: invalid value (not shown)" if key.secret else f"{where}: {e}")
        return key.parse(key.default or "")

    def parsed(self, key: Key[T]) -> T | None:
        """The value of ``key`` as :meth:`get` reads it, or ``None`` when it was refused (the problem recorded)."""
        known = len(self.problems)
        value = self.get(key)
        return None if len(self.problems) > known else value

    def get_all(self, keys: Iterable[Key[Any]]) -> dict[str, Any]:
        """The value of every key by its ``field`` (its name when it has none)."""
        return {key.field or key.name: self.get(key) for key in keys}
