"""The layout is the architecture: no import cycles between packages, the CLI on top.

import-linter (``lint-imports``, run by ``make test``) enforces the layers declared in
pyproject.toml; this test adds what a layers contract cannot say: that no two packages, at
any depth, import each other in a circle, and that modules inside a package do not either.
"""

from __future__ import annotations

import grimp
import pytest

GRAPH = grimp.build_graph("floodmark")


def packages() -> list[str]:
    names = sorted(m for m in GRAPH.modules if GRAPH.find_children(m))
    return [n for n in names if n.startswith("floodmark")]


def module_cycles(container: str, as_packages: bool) -> list[tuple[str, str]]:
    """Pairs of children of ``container`` that reach each other through imports."""
    children = sorted(GRAPH.find_children(container))
    cycles = []
    for i, a in enumerate(children):
        for b in children[i + 1:]:
            there = GRAPH.chain_exists(importer=a, imported=b, as_packages=as_packages)
            back = GRAPH.chain_exists(importer=b, imported=a, as_packages=as_packages)
            if there and back:
                cycles.append((a, b))
    return cycles


@pytest.mark.parametrize("container", packages())
def test_no_two_children_of_a_package_import_each_other(container: str) -> None:
    assert module_cycles(container, as_packages=True) == []


def test_nothing_imports_the_cli() -> None:
    importers = GRAPH.find_modules_that_directly_import("floodmark.cli")
    assert importers <= {"floodmark.__main__"}, importers


def test_the_judges_never_see_the_implementation() -> None:
    for judge in ("floodmark.checkers", "floodmark.reports", "floodmark.pipeline"):
        assert not GRAPH.chain_exists(importer=judge, imported="floodmark.reference", as_packages=True), judge
