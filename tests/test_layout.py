"""The tree's shape: layers point one way, no import circles, no module past 600 lines.

Read from the source with ``ast`` (nothing is imported), so a circle made by an import
inside a function counts as much as one at the top: moving the shared piece down is the
cure, hiding the import in a function is not.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: source folder -> import package (pyproject.toml's package-dir mapping)
FOLDERS = {"ambereval": "ambereval", "engine": "ambereval.engine",
           "snapshots": "ambereval.snapshots", "models": "ambereval.models",
           "cli": "ambereval.cli"}
#: which layer a module belongs to; a layer imports only layers below it
LAYERS = {"ambereval": 0, "ambereval.models": 1, "ambereval.snapshots": 1,
          "ambereval.engine": 2, "ambereval.cli": 3}
MAX_LINES = 600


def module_files() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        base = ROOT / folder
        paths = [base / "__init__.py", *base.glob("*.py")] if folder == "ambereval" else \
            list(base.rglob("*.py"))
        for path in paths:
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join([package, *parts])] = path
    return found


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Amber modules ``name`` imports anywhere in its file (type-checking blocks aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", 0) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:
                    out.add(target)
                elif base in modules:
                    out.add(base)
    out.discard(name)
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def layer_of(module: str) -> tuple[str, int]:
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return best, LAYERS[best]


def test_layers_point_one_way(graph: dict[str, set[str]]) -> None:
    wrong = []
    for module, targets in sorted(graph.items()):
        home, level = layer_of(module)
        for target in sorted(targets):
            there, target_level = layer_of(target)
            if target_level > level or (target_level == level and there != home):
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def find_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of two or more modules, sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(circles)


def test_no_import_circles(graph: dict[str, set[str]]) -> None:
    assert find_circles(graph) == []


def test_the_checker_sees_a_circle_made_inside_a_function(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("from ambereval.y import thing\n")
    (tmp_path / "y.py").write_text("def f():\n    from ambereval import x\n")
    (tmp_path / "z.py").write_text("from typing import TYPE_CHECKING\n"
                                   "if TYPE_CHECKING:\n    from ambereval import x\n")
    modules = {f"ambereval.{n}": tmp_path / f"{n}.py" for n in "xyz"}
    found = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert found == {"ambereval.x": {"ambereval.y"}, "ambereval.y": {"ambereval.x"},
                     "ambereval.z": set()}
    assert find_circles(found) == [["ambereval.x", "ambereval.y"]]


def test_no_module_past_the_limit() -> None:
    long = {str(path.relative_to(ROOT)): n for path in module_files().values()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
