"""The package's import structure (docs/architecture.md): the CLI sits on top of the library, and no
two modules need each other. Every import counts, those inside functions too: a lazy import
hides a circle from Python's import order, not from a reader."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((PACKAGE / "accel_sim").rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules `name` imports, anywhere in its file. `accel_sim._core` (the compiled
    engine) is a leaf, not the package."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()

    def owner(dotted: str) -> str | None:
        while dotted and dotted not in modules:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
                       if f"{base}.{a.name}" != "accel_sim._core"]
        for target in targets:
            module = owner(target)
            if module and module != name:
                found.add(module)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_only_the_cli_imports_the_cli():
    graph = _graph()
    offenders = {name: sorted(m for m in deps if m == "accel_sim.cli" or m.startswith("accel_sim.cli."))
                 for name, deps in graph.items() if not (name == "accel_sim.cli" or name.startswith("accel_sim.cli."))}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_no_import_circles():
    graph = _graph()
    # Tarjan's strongly connected components: any of more than one module is a circle.
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_walk_sees_a_circle_and_a_lazy_import(tmp_path, monkeypatch):
    # The checks above can fail: two modules that import each other, one of them inside a function.
    root = tmp_path / "accel_sim"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "a.py").write_text("from accel_sim import b\n")
    (root / "b.py").write_text("def f():\n    from accel_sim.a import g\n")
    (root / "cli").mkdir()
    (root / "cli" / "__init__.py").write_text("")
    (root / "c.py").write_text("from accel_sim.cli import x\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path)
    graph = _graph()
    assert graph["accel_sim.a"] == {"accel_sim.b"} and graph["accel_sim.b"] == {"accel_sim.a"}
    assert graph["accel_sim.c"] == {"accel_sim.cli"}
    import pytest

    with pytest.raises(AssertionError):
        test_no_import_circles()
    with pytest.raises(AssertionError):
        test_only_the_cli_imports_the_cli()
