"""The shape of the code, pinned: no import cycle between modules, no module too long to read.

Every import counts (inside functions and under TYPE_CHECKING too), because each one is a dependency a
reader has to hold in mind. The layering rules between packages are import-linter contracts in
pyproject.toml, checked by `lint-imports` in CI.
"""

from __future__ import annotations

from pathlib import Path

import grimp

PACKAGES = ("hermes_engine", "adapters", "storage", "hermes_gateway")
ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 500


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others():
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False)
    assert _cycles(graph) == []


def test_no_module_is_over_500_lines():
    long = {str(path.relative_to(ROOT)): n for package in PACKAGES for path in (ROOT / package).rglob("*.py")
            if "migrations" not in path.parts and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
