"""Command-line entry point: ``hudi-clusterd <command> ...`` (also ``python -m hudi_clusterd``).

Each sub-command lives in its own module under ``hudi_clusterd.commands`` and exposes ``register(subparsers)``.
Errors of the daemon's own hierarchy are printed as one line (``error: ...``), never as a traceback (``--debug``
shows it as well), with the exit code of ``hudi_clusterd.exit_codes``: 3 for configuration errors, 4 for an
unusable table, 1 for any other failure.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

import structlog

from hudi_clusterd import __version__
from hudi_clusterd.errors import ClusterdError, ConfigError, TableError
from hudi_clusterd.exit_codes import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_SIGNAL_FORCED, EXIT_TABLE
from hudi_clusterd.runtime.logging import configure_logging
from hudi_clusterd.runtime.memory import map_large_blocks

# Sub-command modules, in the order ``--help`` lists them (``execute`` registers ``execute`` and ``cluster``).
COMMANDS = (
    "status",
    "ingest",
    "schedule",
    "plans",
    "execute",
    "rollback",
    "layout",
    "run",
    "demo",
)



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hudi-clusterd",
        description="Asynchronous clustering for Apache Hudi copy-on-write tables (table versions 6, 8 and 9), "
                    "on Spark.",
    )
    parser.add_argument("--version", action="version", version=f"hudi-clusterd {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    parser.add_argument("--log-level", default="WARNING",
                        help="log level of the one-shot commands' logs on stderr (default: %(default)s; the "
                             "daemon's level comes from its config)")
    parser.add_argument("--log-format", choices=("auto", "json", "console"), default="auto",
                        help="log lines as JSON or for a console (default: JSON unless stderr is a terminal)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"hudi_clusterd.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_FAILURE
    configure_logging(args.log_level, args.log_format)
    map_large_blocks()
    base_path = getattr(args, "base_path", None)
    context = {"table": base_path} if isinstance(base_path, str) else {}  # one-shot commands serve one table
    try:
        with structlog.contextvars.bound_contextvars(**context):
            code: int = args.func(args)
        return code
    except ClusterdError as e:
        if args.debug:
            raise
        print(f"error: {e}", file=sys.stderr)
        if isinstance(e, ConfigError):
            return EXIT_CONFIG
        return EXIT_TABLE if isinstance(e, TableError) else EXIT_FAILURE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_SIGNAL_FORCED
    except BrokenPipeError:
        # the reader went away (e.g. ``| head``); stop writing quietly
        devnull = open(os.devnull, "w")  # noqa: SIM115 - stays open until exit
        os.dup2(devnull.fileno(), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
