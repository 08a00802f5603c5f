"""Exit codes: stable values, unique, every constant documented by describe()."""

from __future__ import annotations

from hudi_clusterd import exit_codes
from hudi_clusterd.exit_codes import describe


def test_exit_codes_have_their_documented_values() -> None:
    assert exit_codes.exit_codes() == {
        "EXIT_OK": 0,
        "EXIT_FAILURE": 1,
        "EXIT_USAGE": 2,
        "EXIT_CONFIG": 3,
        "EXIT_TABLE": 4,
        "EXIT_GRACE_EXPIRED": 5,
        "EXIT_SIGNAL_FORCED": 130,
    }


def test_exit_codes_are_unique() -> None:
    codes = list(exit_codes.exit_codes().values())
    assert len(codes) == len(set(codes))


def test_exit_codes_describe_lists_every_code_in_order() -> None:
    # When the README table is rendered
    rows = describe().splitlines()[2:]

    # Then there is one row per constant, in code order, each with a meaning
    assert [row.split("|")[2].strip(" `") for row in rows] == list(exit_codes.exit_codes())
    assert all(row.split("|")[3].strip() for row in rows)
    assert rows[-1].startswith("| 130 | `EXIT_SIGNAL_FORCED` |")
