"""The one key reader: the name, then the aliases, then the environment, then the default; every problem is one line
naming where the value came from, and a secret's value is never shown."""

from __future__ import annotations

from hudi_clusterd.domain.keys import Key, KeyReader, at_least
from hudi_clusterd.domain.values import java_int, optional_text

COUNT = Key("a.count", "3", at_least(java_int, 1), "How many.", aliases=("a.old.count", "a.older.count"),
            env=("A_COUNT", "COUNT"))
TOKEN = Key("a.token", None, lambda raw: java_int(raw) if raw else None, "A secret.", secret=True)


def test_the_name_then_the_aliases_in_order_then_the_environment_then_the_default() -> None:
    env = {"A_COUNT": " ", "COUNT": "7"}  # a blank variable is unset
    assert KeyReader({"a.count": "5", "a.old.count": "5", "a.older.count": "6"}, env).get(COUNT) == 5
    assert KeyReader({"a.older.count": "6", "a.old.count": "4"}, env).get(COUNT) == 4
    assert KeyReader({"a.older.count": "6"}, env).get(COUNT) == 6
    assert KeyReader({}, env).get(COUNT) == 7
    assert KeyReader({}).get(COUNT) == 3


def test_an_alias_beside_its_key_is_a_warning_or_a_problem() -> None:
    warn = KeyReader({"a.count": "5", "a.old.count": "6"})
    assert warn.get(COUNT) == 5 and not warn.problems
    assert warn.warnings == ["a.old.count: alias of a.count, which is also set and wins"]
    refuse = KeyReader({"a.count": "5", "a.old.count": "6"}, conflicts="refuse")
    refuse.get(COUNT)
    assert refuse.problems == ["a.old.count: alias of a.count, given twice with different values"]


def test_a_bad_value_is_one_problem_naming_its_source_and_the_default_stands_in() -> None:
    reader = KeyReader({"a.old.count": "0", "a.token": "s3cr3t"}, {"COUNT": "x"})
    assert reader.get(COUNT) == 3 and reader.parsed(COUNT) is None
    assert reader.get(TOKEN) is None
    assert reader.problems[0] == "a.old.count: must be >= 1, got 0"
    assert reader.problems[-1] == "a.token: invalid value (not shown)" and "s3cr3t" not in str(reader.problems)
    from_env = KeyReader({}, {"COUNT": "many"})
    assert from_env.parsed(COUNT) is None
    assert from_env.problems == ["a.count (from COUNT): must be an integer, got 'many'"]


def test_the_reference_row_names_aliases_and_variables() -> None:
    assert COUNT.reference() == ("a.count", "3", "How many. Aliases: a.old.count, a.older.count. When unset, read "
                                                 "from the environment: A_COUNT, then COUNT.")
    assert Key("b", None, optional_text, "B.", aliases=("c",)).reference() == ("b", None, "B. Alias: c.")
