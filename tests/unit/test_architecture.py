"""The package keeps the shape docs/architecture.md describes (the layers themselves are import-linter's contract in
pyproject.toml, run by .ci/run): modules stay small, only ``storage/`` knows what a storage is made of, only the
format code asks which table version or timeline layout it serves, and no module keeps mutable state of its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support import REPO_ROOT

PACKAGE = REPO_ROOT / "daemon" / "hudi_clusterd"
MAX_MODULE_LINES = 400

# Where the table version or timeline layout may be compared: the format code, and the selection of a table's formats
# from its hoodie.properties (TableConfig).
FORMAT_SELECTION = ("formats/", "domain/table_config.py", "domain/timeline_layout.py")
_VERSION_COMPARISON = re.compile(
    r"(?:\bversion|table_version|\.version|timeline_layout|layout_version)\s*(?:[<>]=?|[!=]=)\s*\d"
    r"|\d\s*(?:[<>]=?|[!=]=)\s*\S*(?:table_version|\.version\b|layout_version)"
    r"|records_completion_time")
_STORAGE_INTERNALS = re.compile(r"\bpyarrow\.fs\b|\bpafs\b|\bis_local\b|\.fs\.")
_MUTATORS = frozenset({"append", "add", "update", "setdefault", "pop", "popitem", "clear", "extend", "insert",
                       "remove", "discard"})


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _rel(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _code_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a module that are code: docstrings and comments left out."""
    text = path.read_text(encoding="utf-8")
    docstring_lines: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstring_lines.update(range(body[0].lineno, (body[0].end_lineno or body[0].lineno) + 1))
    return [(n, line.split("#", 1)[0]) for n, line in enumerate(text.splitlines(), 1) if n not in docstring_lines]


def test_no_module_is_over_400_lines() -> None:
    long = {_rel(p): n for p in _modules() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concern): {long}"


def test_only_storage_knows_pyarrow_filesystems_and_local_paths() -> None:
    bad = [f"{_rel(p)}:{n}: {line.strip()}" for p in _modules() if not _rel(p).startswith("storage/")
           for n, line in _code_lines(p) if _STORAGE_INTERNALS.search(line)]
    assert not bad, "a pyarrow file system, or whether a storage is local, is storage/'s business: " + "; ".join(bad)


def test_only_the_format_code_compares_table_versions_and_timeline_layouts() -> None:
    bad = [f"{_rel(p)}:{n}: {line.strip()}" for p in _modules() if not _rel(p).startswith(FORMAT_SELECTION)
           for n, line in _code_lines(p) if _VERSION_COMPARISON.search(line)]
    assert not bad, "ask the table's format objects instead of comparing versions or layouts: " + "; ".join(bad)


def _module_level_containers(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        mutable = isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
            and value.func.id in ("dict", "list", "set", "defaultdict", "OrderedDict", "WeakValueDictionary"))
        if mutable:
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def test_no_module_keeps_mutable_state_of_its_own() -> None:
    """A module-level dict, list or set is a constant table: nothing mutates it, and no function rebinds a global."""
    bad: list[str] = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        containers = _module_level_containers(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                bad.append(f"{_rel(path)}:{node.lineno}: global {', '.join(node.names)}")
            target = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS:
                target = node.func.value
            elif isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
                for t in (node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]):
                    if isinstance(t, ast.Subscript):
                        target = t.value
            if isinstance(target, ast.Name) and target.id in containers:
                bad.append(f"{_rel(path)}:{node.lineno}: mutates module-level {target.id}")
    assert not bad, "state belongs to an object its owner builds, not to a module: " + "; ".join(bad)
