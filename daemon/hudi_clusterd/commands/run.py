"""``hudi-clusterd run``: the long-running clustering daemon for one or more tables."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import structlog

from hudi_clusterd.exit_codes import EXIT_FAILURE, EXIT_GRACE_EXPIRED, EXIT_OK
from hudi_clusterd.runtime.logging import configure_logging
from hudi_clusterd.runtime.metrics import Metrics, MetricsServer
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.signals import ShutdownController, signals_blocked
from hudi_clusterd.runtime.watcher import ConfigWatcher
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
        from hudi_clusterd.errors import ConfigError

        raise ConfigError("no tables to serve: list them in the config file (clusterd.tables) or pass --base-path")
    from hudi_clusterd.engine.clustering.runner import build_engine
    from hudi_clusterd.runtime.service import Daemon

    metrics = Metrics()
    holder: SettingsHolder[Settings] = SettingsHolder(settings, on_result=metrics.config_reload)
    controller = ShutdownController()
    with signals_blocked():
        controller.install()
        engine = build_engine(settings)
        daemon = Daemon(holder, metrics, engine)
        server: MetricsServer | None = None
        if settings.metrics_address is not None:
            host, port = settings.metrics_address
            server = MetricsServer(host, port, metrics, daemon.healthy)
            server.start()
        if not args.once:
            daemon.start()
    log.info("daemon started", tables=[t.name for t in settings.tables], metrics=server.url if server else None,
             spark_master=settings.spark_master, once=args.once)

    config_watcher: ConfigWatcher | None = None
    code = EXIT_OK
    try:
        if args.once:
            if daemon.run_once():
                code = EXIT_FAILURE  # the failed tables were logged; the others were served
        else:
            if args.props:
                config_watcher = ConfigWatcher(str(Path(args.props)), controller.reload_requested.set)
                config_watcher.start()
            while not controller.stop_requested.wait(0.5):
                if controller.consume_reload_request() and holder.try_reload(lambda: _loader(args)):
                    configure_logging(holder.current.log_level, holder.current.log_format.value)
                    daemon.reconcile_tables()
                    daemon.wake_all()
            grace = holder.current.shutdown_grace_seconds
            log.info("stopping", grace_seconds=grace, running=len(daemon.running()))
            if not daemon.stop(grace):
                code = EXIT_GRACE_EXPIRED
            daemon.join(timeout=grace + 30)
    finally:
        if config_watcher is not None:
            config_watcher.stop()
        if server is not None:
            server.stop()
        engine.close()
        controller.restore()
    log.info("daemon stopped", exit_code=code)
    return code
