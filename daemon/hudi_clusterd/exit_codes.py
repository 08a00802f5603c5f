"""Process exit codes of ``hudi-clusterd``, one named constant each.

Scripts, systemd units and Kubernetes probes read these, so a value never changes meaning once released.
``describe()`` renders the table that the README documents.
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
"""The command finished its work, or the daemon stopped gracefully within its grace period."""

EXIT_FAILURE: Final = 1
"""A command failed; a one-line error naming the file, key, table or instant was printed."""

EXIT_USAGE: Final = 2
"""The command line is invalid (argparse's own exit code)."""

EXIT_CONFIG: Final = 3
"""The configuration file is missing or invalid at start-up; nothing was started."""

EXIT_TABLE: Final = 4
"""A table cannot be used (missing or unreadable ``hoodie.properties``, unsupported version or layout)."""

EXIT_GRACE_EXPIRED: Final = 5
"""A graceful stop ran past the grace period: running groups were cancelled and their instants are
rolled back on the next start."""

EXIT_SIGNAL_FORCED: Final = 130
"""A second SIGTERM/SIGINT arrived during a graceful stop: the process exited at once (128 + SIGINT)."""

# One-line meanings for describe(), in code order; test_exit_codes checks this covers every EXIT_* constant.
_MEANINGS: Final[dict[str, str]] = {
    "EXIT_OK": "success; or a graceful stop that finished within the grace period",
    "EXIT_FAILURE": "a command failed; a one-line error was printed",
    "EXIT_USAGE": "invalid command line (argparse)",
    "EXIT_CONFIG": "invalid or missing configuration at start-up",
    "EXIT_TABLE": "a table is unusable (hoodie.properties, version or layout)",
    "EXIT_GRACE_EXPIRED": "graceful stop ran past the grace period; running work was cancelled",
    "EXIT_SIGNAL_FORCED": "second SIGTERM/SIGINT: exited at once without waiting",
}


def exit_codes() -> dict[str, int]:
    """Every ``EXIT_*`` constant of this module by name, in ascending code order."""
    found = {name: value for name, value in globals().items() if name.startswith("EXIT_") and isinstance(value, int)}
    return dict(sorted(found.items(), key=lambda item: item[1]))


def describe() -> str:
    """A Markdown table of the exit codes (code, constant, meaning) for the README and ``--help`` epilogs."""
    lines = ["| code | constant | meaning |", "| ---: | --- | --- |"]
    lines.extend(f"| {code} | `{name}` | {_MEANINGS[name]} |" for name, code in exit_codes().items())
    return "\n".join(lines)


__all__ = [
    "EXIT_CONFIG",
    "EXIT_FAILURE",
    "EXIT_GRACE_EXPIRED",
    "EXIT_OK",
    "EXIT_SIGNAL_FORCED",
    "EXIT_TABLE",
    "EXIT_USAGE",
    "describe",
    "exit_codes",
]
