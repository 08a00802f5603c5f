"""The composition root: one daemon process built from its settings, run until stopped.

`App` owns everything the daemon is made of: the engine (a group runner on a SparkSession), the table workers,
the Prometheus endpoint, the observers that turn events into metrics and logs, the config-file watcher and the
reload loop. ``hudi-clusterd run`` and ``hudi-clusterd demo`` only build one and call it.

Stop order (`App.stop` then `App.close`):

1. stop scheduling and starting plans;
2. let running plans finish within the grace period (``clusterd.shutdown.grace.seconds``);
3. then cancel their engine jobs; each worker rolls its cancelled instant back (or the next start does);
4. wait for the workers, which stops their timeline watchers;
5. stop the config watcher and the metrics endpoint;
6. close the engine (the SparkSession, when the daemon owns it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import structlog

from hudi_clusterd.exit_codes import EXIT_FAILURE, EXIT_GRACE_EXPIRED, EXIT_OK
from hudi_clusterd.ops.events import Broadcast, Observer
from hudi_clusterd.ops.ports import GroupRunner
from hudi_clusterd.runtime.logging import EventLog, configure_logging
from hudi_clusterd.runtime.metrics import Metrics, MetricsObserver
from hudi_clusterd.runtime.metrics_server import MetricsServer
from hudi_clusterd.runtime.reload import SettingsHolder
from hudi_clusterd.runtime.service import Daemon
from hudi_clusterd.runtime.signals import ShutdownController
from hudi_clusterd.runtime.watcher import ConfigWatcher
from hudi_clusterd.settings import Settings
from hudi_clusterd.settings_keys import ObjectStoreReader

log = structlog.get_logger(__name__)

JOIN_MARGIN_S = 30.0
"""How long, beyond the grace period, workers get to roll back cancelled instants before the process exits."""


def spark_runner(settings: Settings) -> GroupRunner:
    """The default engine: groups as Spark jobs on the session ``clusterd.spark.*`` describes."""
    from hudi_clusterd.engine.clustering.runner import build_runner

    return build_runner(settings.spark_master, settings.spark_conf_dict,
                        s3a_reader=settings.object_store_reader is ObjectStoreReader.S3A)


class App:
    """One daemon: build it, ``start()``, then ``serve()`` (or ``run_once()``), ``stop()`` and ``close()``."""

    def __init__(self, settings: Settings, *, runner: GroupRunner | None = None,
                 loader: Callable[[], Settings] | None = None, config_path: str | None = None,
                 observers: Iterable[Observer] = ()) -> None:
        self.metrics = Metrics()
        self.holder: SettingsHolder[Settings] = SettingsHolder(settings, on_result=self.metrics.config_reload)
        self.loader = loader
        self.config_path = config_path
        self.runner = runner if runner is not None else spark_runner(settings)
        metrics_observer = MetricsObserver(self.metrics)
        observer = Broadcast([metrics_observer, EventLog(), *observers])
        self.daemon = Daemon(self.holder, self.runner, observer, forget_table=metrics_observer.forget_table)
        self.server: MetricsServer | None = None
        self._config_watcher: ConfigWatcher | None = None
        self._closed = False

    @property
    def settings(self) -> Settings:
        return self.holder.current

    def start_metrics(self) -> None:
        """Serve ``/metrics`` and ``/healthz`` where the settings say (nothing when ``off``)."""
        address = self.settings.metrics_address
        if address is not None and self.server is None:
            self.server = MetricsServer(address[0], address[1], self.metrics, self.daemon.healthy)
            self.server.start()

    def start(self) -> None:
        """Start the metrics endpoint and one worker per table."""
        self.start_metrics()
        self.daemon.start()
        log.info("daemon started", tables=[t.name for t in self.settings.tables],
                 metrics=self.server.url if self.server else None, spark_master=self.settings.spark_master)

    def run_once(self) -> int:
        """One tick per table in this thread; ``EXIT_FAILURE`` when any table's tick failed (the others are
        still served)."""
        self.start_metrics()
        return EXIT_FAILURE if self.daemon.run_once() else EXIT_OK

    def reload(self) -> bool:
        """Load the settings again; swap them in when valid (logging follows), and add or remove tables."""
        if self.loader is None or not self.holder.try_reload(self.loader):
            return False
        configure_logging(self.settings.log_level, self.settings.log_format.value)
        self.daemon.reconcile_tables()
        self.daemon.wake_all()
        return True

    def serve(self, controller: ShutdownController) -> int:
        """Serve until ``controller`` asks to stop, reloading on a config-file change or SIGHUP; then stop
        gracefully and return the exit code."""
        if self.config_path is not None:
            self._config_watcher = ConfigWatcher(str(Path(self.config_path)), controller.reload_requested.set)
            self._config_watcher.start()
        while not controller.stop_requested.wait(0.5):
            if controller.consume_reload_request():
                self.reload()
        return self.stop()

    def stop(self) -> int:
        """Steps 1-4 of the stop order; ``EXIT_GRACE_EXPIRED`` when running work had to be cancelled."""
        grace = self.settings.shutdown_grace_seconds
        log.info("stopping", grace_seconds=grace, running=len(self.daemon.running()))
        finished = self.daemon.stop(grace)
        self.daemon.join(timeout=grace + JOIN_MARGIN_S)
        return EXIT_OK if finished else EXIT_GRACE_EXPIRED

    def close(self) -> None:
        """Steps 5-6 of the stop order; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._config_watcher is not None:
                self._config_watcher.stop()
            if self.server is not None:
                self.server.stop()
        finally:
            self.runner.close()
