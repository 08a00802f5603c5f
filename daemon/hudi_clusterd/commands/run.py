"""``hudi-clusterd run``: the long-running clustering daemon for one or more tables."""

from __future__ import annotations

import argparse
from typing import Any

import structlog

from hudi_clusterd.errors import ConfigError
from hudi_clusterd.runtime.logging import configure_logging
from hudi_clusterd.runtime.signals import ShutdownController, signals_blocked
from hudi_clusterd.settings import Settings, load_settings

log = structlog.get_logger(__name__)


def _address(text: str) -> str:
    _host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def register(subparsers: Any) -> None:
    p: argparse.ArgumentParser = subparsers.add_parser(
        "run", help="run the clustering daemon",
        description="Watch each table's timeline, schedule clustering when enough commits accumulate, execute "
                    "plans on Spark, and serve Prometheus metrics. SIGHUP or an edit of the config file reloads "
                    "it; the first SIGTERM/SIGINT stops gracefully, a second exits at once.",
    )
    p.add_argument("--props", help="the daemon's config file (.properties: hoodie.* policy and clusterd.* keys)")
    p.add_argument("--base-path", action="append", default=[], metavar="DIR",
                   help="a table to serve (repeatable; added to the tables of the config file)")
    p.add_argument("--metrics-address", type=_address, metavar="HOST:PORT",
                   help="where /metrics and /healthz listen (default 127.0.0.1:9464; overrides the config)")
    p.add_argument("--once", action="store_true", help="run one tick per table and exit (for cron or testing)")
    p.set_defaults(func=run)


def _loader(args: argparse.Namespace) -> Settings:
    overrides = {"clusterd.metrics.address": args.metrics_address} if args.metrics_address else None
    settings, warnings = load_settings(args.props, extra_base_paths=args.base_path, overrides=overrides)
    for w in warnings:
        log.warning("config warning", detail=w)
    return settings


def run(args: argparse.Namespace) -> int:
    settings = _loader(args)
    configure_logging(settings.log_level, settings.log_format.value)
    if not settings.tables:
        raise ConfigError("no tables to serve: list them in the config file (clusterd.tables) or pass --base-path")
    from hudi_clusterd.runtime.app import App

    controller = ShutdownController()
    with signals_blocked():
        controller.install()
        app = App(settings, loader=lambda: _loader(args), config_path=args.props)
        if not args.once:
            app.start()
    try:
        code = app.run_once() if args.once else app.serve(controller)
    finally:
        app.close()
        controller.restore()
    log.info("daemon stopped", exit_code=code)
    return code
