"""No import cycle among the project's own modules.

Every module under suite/, implementations/ and dashboard/ is parsed (not
imported), and each import statement, at the top or inside a function, is an
edge to the project module it names: ``from a.b import c`` goes to ``a.b.c``
when that is a module, else to ``a.b``.  A module that calls
``importlib.import_module`` also imports every project module named by a
string constant in it (the CLI's verb table).  A cycle is a strongly
connected set of two or more modules.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("suite", "implementations", "dashboard")


def project_modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    mods = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _resolve(name: str, mods: dict) -> str | None:
    """The longest prefix of dotted ``name`` that is a project module."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _imported(module: str, path: Path, mods: dict) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    dynamic = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            names.update(f"{base}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Attribute) and node.attr == "import_module":
            dynamic = True
    if dynamic:
        names.update(n.value for n in ast.walk(tree)
                     if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in mods)
    tops = {m.split(".")[0] for m in mods}
    found = {_resolve(n, mods) for n in names if n.split(".")[0] in tops}
    return {m for m in found if m is not None and m != module}


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    mods = project_modules(root, packages)
    return {m: _imported(m, p, mods) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected sets of two or more modules (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_project_has_no_import_cycle():
    graph = import_graph()
    assert "suite.compare" in graph and "suite.cli" in graph  # the walk found the modules
    assert cycles(graph) == []


def test_the_cli_depends_on_its_verbs_and_not_the_reverse():
    graph = import_graph()
    assert {"suite.runner", "suite.compare_cli", "dashboard.launch"} <= graph["suite.cli"]
    assert "suite.compare_render" not in graph["suite.compare"]


def test_a_cycle_through_a_function_level_or_relative_import_is_found(tmp_path):
    pkg = tmp_path / "suite"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from suite import b\n")
    (pkg / "b.py").write_text("def f():\n    from .c import g\n")
    (pkg / "c.py").write_text("import importlib\nNAMES = ('suite.a',)\n"
                              "def g():\n    importlib.import_module(NAMES[0])\n")
    (pkg / "d.py").write_text("import suite.a\n")
    graph = import_graph(tmp_path, ("suite",))
    assert graph["suite.b"] == {"suite.c"} and graph["suite.d"] == {"suite.a"}
    assert cycles(graph) == [["suite.a", "suite.b", "suite.c"]]
