"""The package's structure, drawn from its imports: every arrow points down, and nothing is circular.

Every ``import`` and ``from ... import`` of the package's own modules counts, at module level or
inside a function (a function-level import is still a dependency, only a hidden one). Each module
belongs to one layer; a layer may import only the layers listed as below it. The whole module
graph must be acyclic. A new module lands in a layer by its path (:func:`layer_of`), so a new
file cannot slip past the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "adaptive_po"

#: the layers, bottom first, and what each may import besides itself
ALLOWED: dict[str, frozenset[str]] = {
    # the data dials: the standard library only
    "dials": frozenset(),
    # the run-folder format (file names, columns, atomic writes, integrity): torch-free
    "contract": frozenset({"dials"}),
    # a pre-registered study as data: its plan file, the pilot's rule, the cut order (torch-free)
    "studies": frozenset({"dials", "contract"}),
    # objectives, distributions, update, networks, buffers, sampler, collector, the SB3 classes,
    # the population learner and the environment backends
    "library": frozenset({"dials"}),
    # configs, suites, grid, plan, executors, run folders, tuning, tracing
    "bench": frozenset({"dials", "contract", "studies", "library"}),
    # reads run folders through the contract only: no torch, no training code
    "analysis": frozenset({"dials", "contract", "studies"}),
    # the RL Zoo's entry point for our algorithms
    "zoo": frozenset({"dials", "library", "bench"}),
    # the command line: the top, it may use everything
    "cli": frozenset({"dials", "contract", "studies", "library", "bench", "analysis", "zoo"}),
}


def module_files() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "library"  # the package's own __init__: the public SB3-style names, imported lazily
    head = parts[1]
    if head in ("dials", "contract", "studies", "bench", "analysis", "zoo"):
        return head
    if head in ("cli", "__main__"):
        return "cli"
    return "library"


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file."""

    def resolve(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(resolve(alias.name) for alias in node.names if alias.name.split(".")[0] == "adaptive_po")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "adaptive_po":
                continue
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in modules else resolve(target))
    found.discard(module)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, targets in sorted(graph.items()):
        layer = layer_of(module)
        for target in sorted(targets):
            if target == "adaptive_po" and layer != "library":
                continue  # importing a subpackage runs the package's lazy __init__; not a dependency
            target_layer = layer_of(target)
            if target_layer != layer and target_layer not in ALLOWED[layer]:
                bad.append(f"{module} ({layer}) imports {target} ({target_layer})")
    return bad


def test_every_import_points_down():
    assert upward_imports(import_graph()) == []


def test_the_module_graph_has_no_cycle():
    assert cycles(import_graph()) == []


def test_the_checks_see_function_level_imports_and_cycles(tmp_path):
    """The checker itself: a function-level import counts, and a two-module circle is found."""
    modules = {"adaptive_po.a": tmp_path / "a.py", "adaptive_po.b": tmp_path / "b.py"}
    modules["adaptive_po.a"].write_text("def f():\n    from adaptive_po.b import g\n")
    modules["adaptive_po.b"].write_text("from adaptive_po import a\n")
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert graph == {"adaptive_po.a": {"adaptive_po.b"}, "adaptive_po.b": {"adaptive_po.a"}}
    assert cycles(graph) == [["adaptive_po.a", "adaptive_po.b"]]
    assert upward_imports({"adaptive_po.collector": {"adaptive_po.bench.config"}}) == [
        "adaptive_po.collector (library) imports adaptive_po.bench.config (bench)"
    ]


@pytest.mark.parametrize("module", ["adaptive_po.dials", "adaptive_po.contract", "adaptive_po.studies.plan"])
def test_the_bottom_imports_no_torch(module):
    path = module_files()[module]
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names.add((node.module or "").split(".")[0])
    assert not names & {"torch", "numpy", "pandas", "stable_baselines3", "gymnasium"}


def test_the_two_learners_are_peers():
    """The SB3 face and the population engine share what lies below them (adaptive_po.policy,
    update, objectives) and neither imports the other; the bench builds policies from the shared
    module too, not from the SB3 face's private helpers."""
    graph = import_graph()
    assert "adaptive_po.algorithms" not in graph["adaptive_po.population"]
    assert "adaptive_po.population" not in graph["adaptive_po.algorithms"]
    assert {"adaptive_po.policy", "adaptive_po.update"} <= graph["adaptive_po.population"] & graph["adaptive_po.algorithms"]
    assert "adaptive_po.algorithms" not in graph["adaptive_po.bench.config"]
