"""The test tree keeps its shape: test modules import only helper modules (``tests.builders``, ``tests.support``,
``tests.harness.*``), never another test module; helpers live outside the test folders; and ``tests/unit/``
mirrors the package ``daemon/hudi_clusterd/``."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support import REPO_ROOT

TESTS = REPO_ROOT / "tests"
UNIT = TESTS / "unit"
PACKAGE = REPO_ROOT / "daemon" / "hudi_clusterd"
TEST_FOLDERS = ("unit", "contract", "integration", "interop")
# top-level unit tests of the repository's files rather than of a module: the docs, the deploy artifacts, and
# this test
REPOSITORY_CHECKS = {"test_docs.py", "test_deploy_artifacts.py", "test_tests_layout.py"}


def _python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO_ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of a file, at any depth; relative imports resolved; ``from m import n``
    gives both ``m`` and ``m.n`` (``n`` may be a module)."""
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            out.append((node.lineno, base))
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name != "*"]
    return out


def _is_test_module(module: str) -> bool:
    parts = module.split(".")
    return (parts[0] == "tests" and len(parts) > 1 and parts[1] in TEST_FOLDERS) or any(
        p.startswith("test_") or p == "conftest" for p in parts)


def test_no_test_module_imports_another_test_module() -> None:
    files = _python_files(TESTS)
    assert len(files) > 50, f"too few test files found under {TESTS}"
    bad = [f"{path.relative_to(REPO_ROOT)}:{line} imports {module}"
           for path in files for line, module in _imports(path) if _is_test_module(module)]
    assert not bad, "test modules import only helper modules (tests.builders, tests.support, tests.harness.*): " \
        + "; ".join(bad)


def test_test_folders_hold_only_tests_and_helpers_live_outside_them() -> None:
    bad = [str(p.relative_to(REPO_ROOT)) for folder in TEST_FOLDERS for p in _python_files(TESTS / folder)
           if not (p.name.startswith("test_") or p.name in ("__init__.py", "conftest.py"))]
    assert not bad, "helper modules belong in tests/builders.py, tests/support.py or tests/harness/: " + ", ".join(bad)


def test_unit_subfolders_mirror_the_packages() -> None:
    folders = sorted(p for p in UNIT.rglob("*") if p.is_dir() and p.name != "__pycache__")
    assert folders, f"no subfolders in {UNIT}"
    bad = [str(f.relative_to(REPO_ROOT)) for f in folders
           if not (PACKAGE / f.relative_to(UNIT) / "__init__.py").is_file()]
    assert not bad, f"every tests/unit subfolder names a package of {PACKAGE.relative_to(REPO_ROOT)}: " \
        + ", ".join(bad)


def test_top_level_unit_tests_are_of_top_level_modules() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    bad = [p.name for p in sorted(UNIT.glob("test_*.py")) if p.name not in REPOSITORY_CHECKS
           and not any(p.stem == f"test_{m}" or p.stem.startswith(f"test_{m}_") for m in modules)]
    assert not bad, f"a top-level tests/unit module tests a top-level module ({', '.join(sorted(modules))}); " \
        "move these into the subfolder of the package they test: " + ", ".join(bad)
