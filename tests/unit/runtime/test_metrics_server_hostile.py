"""The metrics endpoint listens on loopback unless told otherwise."""

from __future__ import annotations

import socket

import pytest

from hudi_clusterd.runtime.metrics import Metrics
from hudi_clusterd.runtime.metrics_server import MetricsServer
from hudi_clusterd.settings import settings_from_properties


def test_metrics_default_address_is_loopback() -> None:
    # Given settings that name no metrics address, the host the daemon binds is the settings' default
    settings_, _ = settings_from_properties({"clusterd.tables": "t", "clusterd.table.t.base.path": "/x/t"})
    assert settings_.metrics_address is not None and settings_.metrics_address[0] == "127.0.0.1"
    with MetricsServer(settings_.metrics_address[0], 0, Metrics(), health=lambda: True) as server:
        assert server.url.startswith("http://127.0.0.1:")
        other = _non_loopback_address()
        if other is not None:  # not reachable on another interface of this host
            with pytest.raises(OSError), socket.create_connection((other, server.port), timeout=2):
                pass


def _non_loopback_address() -> str | None:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # UDP connect sends nothing; it only picks the outgoing interface
            addr = str(s.getsockname()[0])
    except OSError:
        return None
    return None if addr.startswith("127.") else addr
