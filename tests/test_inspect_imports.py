"""The inspector's modules import each other without a circle (read from the source with ast).

Every import counts, at module level or inside a function (the old circles were lazy imports).
An import of ``a.b.c`` is an edge to the module ``a.b.c``; ``from a.b import c`` is an edge to
``a.b.c`` when that file exists, else to ``a.b`` (the name comes from the package's
``__init__``).  Packages are nodes of their own (``inspector.cluster`` is its ``__init__.py``).
"""
import ast
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
PACKAGE = "inspector"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SCRIPTS).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict:
    return {_module_name(p): p for p in sorted((SCRIPTS / PACKAGE).rglob("*.py"))}


def _imports(name: str, path: Path, known: dict) -> set:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        out.update(t for t in targets if t in known and t != name)
    return out


def _graph() -> dict:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def _cycles(graph: dict) -> list:
    """Every strongly connected component with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
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
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_circle():
    # The check must be able to fail: the two circles this package once had.
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_edges_are_read_from_the_source():
    graph = _graph()
    assert "inspector.cluster.diff" in graph["inspector.cluster.render"]      # from .diff import
    assert "inspector.cluster" in graph["inspector.cli"]                      # lazy, in a function
    assert "inspector.report" in graph["inspector.cluster.run"]               # from inspector.report
    assert "inspector.child.protocol" in graph["inspector.child.default_tasks"]


def test_no_import_cycle_among_inspector_modules():
    assert _cycles(_graph()) == []


@pytest.mark.parametrize("caller, callee", [("inspector.cluster", "inspector.cli")])
def test_cluster_mode_never_calls_back_into_the_command_line(caller, callee):
    graph = _graph()
    reach, todo = set(), [m for m in graph if m == caller or m.startswith(caller + ".")]
    while todo:
        m = todo.pop()
        if m not in reach:
            reach.add(m)
            todo.extend(graph[m])
    assert callee not in reach


def test_cluster_mode_is_a_package_and_no_flat_cluster_module_is_left():
    names = _modules()
    assert names["inspector.cluster"].name == "__init__.py"
    assert not [n for n in names if n.startswith("inspector.cluster_")]
