"""The Hudi domain imports nothing but the standard library and our errors: no I/O frameworks, no Spark."""

from __future__ import annotations

import ast
import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

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


# Modules outside the domain that it may import: our error types and the layout strategy enums (standard library
# only themselves, which the test checks too).
PURE_OUTSIDE_DOMAIN = ("hudi_clusterd.errors", "hudi_clusterd.domain.row_order")


def _imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """``(line, module)`` for every import statement of a module, at any depth (relative ones resolved)."""
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                out.append((node.lineno, f"{parent}.{node.module}" if node.module else parent))
            else:
                out.append((node.lineno, node.module or ""))
    return out


def _stdlib(module: str) -> bool:
    return module.split(".", 1)[0] in sys.stdlib_module_names


def _in_domain(module: str) -> bool:
    return module == "hudi_clusterd.domain" or module.startswith("hudi_clusterd.domain.")


def test_domain_modules_import_only_the_standard_library_and_the_domain() -> None:
    domain = Path(hudi_clusterd.domain.__file__).parent
    files = sorted(domain.glob("*.py"))
    assert len(files) > 1, f"no domain modules found in {domain}"
    bad = [f"{path.name}:{line} imports {module}"
           for path in files
           for line, module in _imported_modules(path, "hudi_clusterd.domain")
           if not (_stdlib(module) or _in_domain(module) or module in PURE_OUTSIDE_DOMAIN)]
    for name in PURE_OUTSIDE_DOMAIN:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        bad += [f"{name}:{line} imports {module}"
                for line, module in _imported_modules(Path(spec.origin), name.rpartition(".")[0])
                if not _stdlib(module)]
    assert not bad, "the domain imports outside the standard library and the domain: " + "; ".join(bad)
