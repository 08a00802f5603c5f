"""The Hudi domain imports nothing but the standard library and our errors: no I/O frameworks, no Spark."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import hudi_clusterd.domain

FORBIDDEN = ("pyspark", "fastavro", "pyarrow", "watchdog", "prometheus_client", "structlog", "numpy", "pandas")


def test_domain_modules_import_without_frameworks() -> None:
    modules = [m.name for m in pkgutil.iter_modules(hudi_clusterd.domain.__path__, "hudi_clusterd.domain.")]
    assert modules, "no domain modules found"
    blocker = "; ".join(f"sys.modules[{name!r}] = None" for name in FORBIDDEN)
    imports = "; ".join(f"importlib.import_module({m!r})" for m in modules)
    code = f"import sys, importlib; {blocker}; {imports}"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_domain_modules_are_importable() -> None:
    for m in pkgutil.iter_modules(hudi_clusterd.domain.__path__, "hudi_clusterd.domain."):
        importlib.import_module(m.name)
