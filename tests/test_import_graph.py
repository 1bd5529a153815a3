"""The package's import graph: no circles, and imports point down the layers.

The graph is read from the source with :mod:`ast` (nothing is imported), so
a circle is caught even where Python's import order happens to hide it.

What counts as an edge ``a -> b`` (``a`` imports ``b``):

- every ``import`` and ``from ... import`` of a module of ``litfetch_df``,
  absolute or relative, at module level **and inside functions** (a lazy
  import still ties the two modules together; it only postpones the circle);
- ``from pkg import name`` points at ``pkg.name`` when that is a module, and
  at ``pkg`` otherwise;
- imports under ``if TYPE_CHECKING:`` are **not** edges: they never run, and
  annotations may name a type from any layer;
- importing ``pkg.mod`` is an edge to ``pkg.mod`` only, not to the
  ``__init__`` of each parent package that Python also runs: the top-level
  ``litfetch_df/__init__`` re-exports the whole surface, so counting it would
  put every module in one circle. A package's ``__init__`` is an edge when it
  is imported by name (``from . import frame``, ``from .frame import X``).

The layers are those of ``docs/architecture.md`` (and the design's table);
every module must be placed in one, so a new module cannot skip the map.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "litfetch_df"
PACKAGE_DIR = ROOT / PACKAGE
ARCHITECTURE = ROOT / "docs" / "architecture.md"

# Lowest first. A module may import its own layer and any layer it lists.
LAYERS: dict[str, tuple[str, ...]] = {
    "values": (),
    "http": ("values",),
    "session": ("http", "values"),
    "sources": ("http", "values"),
    "operations": ("sources", "session", "http", "values"),
    "frame": ("operations", "sources", "session", "http", "values"),
    "faces": ("frame", "operations", "sources", "session", "http", "values"),
    "surface": ("faces", "frame", "operations", "sources", "session", "http", "values"),
}

PLACED: dict[str, str] = {
    "litfetch_df": "surface",
    "litfetch_df._version": "values",
    "litfetch_df._xml": "values",
    "litfetch_df._frontmatter": "values",
    "litfetch_df._atomic": "values",
    "litfetch_df.ids": "values",
    "litfetch_df.files": "values",
    "litfetch_df.metadata": "values",
    "litfetch_df.publishers": "values",
    "litfetch_df.limits": "values",
    "litfetch_df.serde": "values",
    "litfetch_df.text": "values",
    "litfetch_df._clock": "http",
    "litfetch_df._http": "http",
    "litfetch_df._store": "http",
    "litfetch_df._memo": "http",
    "litfetch_df._transfer": "http",
    "litfetch_df._decode": "http",
    "litfetch_df._netguard": "http",
    "litfetch_df._limiter": "http",
    "litfetch_df._limiter_values": "http",
    "litfetch_df._limiter_slots": "http",
    "litfetch_df._rate_headers": "http",
    "litfetch_df._quota": "http",
    "litfetch_df.session": "session",
    "litfetch_df.cache": "session",
    "litfetch_df.demo_world": "session",
    "litfetch_df.sources": "sources",
    "litfetch_df.operations": "operations",
    "litfetch_df.resolvers": "operations",
    "litfetch_df._oneshot": "operations",
    "litfetch_df.frame": "frame",
    "litfetch_df.cli": "faces",
    "litfetch_df.cli_text": "faces",
    "litfetch_df.demo": "faces",
    "litfetch_df._results": "faces",
    "litfetch_df.dask": "faces",
}
"""Modules placed by name; everything under ``sources/``, ``operations/`` and
``frame/`` takes its package's layer."""

UPWARD_ALLOWED: frozenset[tuple[str, str]] = frozenset(
    {
        # Session's litfetch conveniences (fetch_body, list_files, ...) import the
        # operation they run inside the method; no operation imports the session.
        ("litfetch_df.session", "litfetch_df.operations.ladder"),
        ("litfetch_df.session", "litfetch_df.operations.fileset"),
        ("litfetch_df.session", "litfetch_df.operations.access"),
        ("litfetch_df.session", "litfetch_df.operations.relations"),
    }
)
"""The only imports that point up a layer; each must stay inside a function."""


@dataclass(frozen=True)
class Edge:
    """One import of a package module by another."""

    source: str
    target: str
    line: int
    lazy: bool  # inside a function body


def module_names() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Yield each import that runs, with whether it sits inside a function."""

    def walk(node: ast.AST, lazy: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, lazy
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    yield from walk(ast.Module(body=[other], type_ignores=[]), lazy)
            else:
                inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                yield from walk(child, inner)

    yield from walk(tree, False)


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def edges() -> list[Edge]:
    """Every runtime import between two modules of the package."""
    modules = module_names()
    found: list[Edge] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node, lazy in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = _base(module, is_package, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            for target in targets:
                if target in modules and target != module:
                    found.append(Edge(module, target, node.lineno, lazy))
    return found


def layer_of(module: str) -> str:
    """The layer a module belongs to (its own entry, else its package's)."""
    name = module
    while name:
        if name in PLACED:
            return PLACED[name]
        name = name.rpartition(".")[0]
    raise KeyError(module)


def groups(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return the strongly connected groups of two or more modules (Tarjan)."""
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
            group: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Return one circle through each strongly connected group of modules."""
    return [_one_circle(graph, set(group)) for group in groups(graph)]


def _one_circle(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A concrete path ``a -> ... -> a`` inside one strongly connected group."""
    start = min(group)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        node = frontier.pop(0)
        for nxt in sorted(graph.get(node, ())):
            if nxt == start:
                chain = [node]
                while chain[-1] != start:
                    chain.append(parents[chain[-1]])
                return [*reversed(chain), start]
            if nxt in group and nxt not in parents:
                parents[nxt] = node
                frontier.append(nxt)
    return sorted(group)


def graph_of(found: list[Edge]) -> dict[str, set[str]]:
    """The adjacency sets of a list of edges."""
    graph: dict[str, set[str]] = {}
    for edge in found:
        graph.setdefault(edge.source, set()).add(edge.target)
    return graph


# -- the checker checks -----------------------------------------------------------------------


def test_circles_finds_a_loop_and_passes_a_tree() -> None:
    loop = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(loop) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_relative_imports_resolve_to_modules() -> None:
    graph = graph_of(edges())
    # `from ._common import ...` inside sources/, `from . import frame` at the top.
    assert "litfetch_df.sources._common" in graph["litfetch_df.sources.crossref"]
    assert "litfetch_df.frame" in graph["litfetch_df"]
    # `from .operations import ladder` names the submodule, not the package.
    assert "litfetch_df.operations.ladder" in graph["litfetch_df.session"]


def test_type_checking_imports_are_not_edges() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .a import A\nelse:\n    from .b import B\n"
        "def f():\n    from .c import C\n"
    )
    seen = [(n.module, lazy) for n, lazy in _imports(tree) if isinstance(n, ast.ImportFrom)]
    assert seen == [("typing", False), ("b", False), ("c", True)]


# -- the package -------------------------------------------------------------------------------


def test_no_import_circle_in_the_package() -> None:
    graph = graph_of(edges())
    shown = [
        " -> ".join(_one_circle(graph, set(group))) + f"\n    (all of: {', '.join(group)})"
        for group in groups(graph)
    ]
    assert not shown, "import circles:\n" + "\n".join(shown)


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in module_names():
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert not unplaced, f"place these modules in a layer: {unplaced}"


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for edge in edges():
        have, want = layer_of(edge.source), layer_of(edge.target)
        if want == have or want in LAYERS[have]:
            continue
        if (edge.source, edge.target) in UPWARD_ALLOWED and edge.lazy:
            continue
        wrong.append(f"{edge.source}:{edge.line} ({have}) imports {edge.target} ({want})")
    assert not wrong, "imports pointing up:\n" + "\n".join(wrong)


def _third_party(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node, _lazy in _imports(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("library", ["pandas", "numpy", "pyarrow"])
def test_only_frame_and_faces_import_table_libraries(library: str) -> None:
    wrong = [
        module
        for module, path in module_names().items()
        if layer_of(module) not in ("frame", "faces", "surface") and library in _third_party(path)
    ]
    assert not wrong, f"{library} imported below the frame layer by {wrong}"


def test_values_know_no_http_client() -> None:
    wrong = [
        module
        for module, path in module_names().items()
        if layer_of(module) == "values" and "httpx" in _third_party(path)
    ]
    assert not wrong, f"values modules importing httpx: {wrong}"


def test_sources_never_reach_up_or_into_the_session() -> None:
    forbidden = ("session", "operations", "frame", "faces", "surface")
    wrong = [
        f"{e.source} imports {e.target}"
        for e in edges()
        if layer_of(e.source) == "sources" and layer_of(e.target) in forbidden
    ]
    assert not wrong, "\n".join(wrong)


def test_architecture_page_names_every_module() -> None:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    missing = []
    for path in module_names().values():
        shown = str(path.relative_to(ROOT / PACKAGE)).replace("\\", "/")
        if f"`{shown}`" not in text:
            missing.append(shown)
    assert not missing, f"docs/architecture.md does not describe: {missing}"


def test_no_frame_module_imports_another_modules_private_names() -> None:
    # A step module, the engine and the calls share only public names (issue 13): a
    # private name used across modules is a contract nobody wrote down.
    offenders: list[str] = []
    for path in sorted((ROOT / PACKAGE / "frame").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                for alias in node.names:
                    if alias.name.startswith("_"):
                        offenders.append(f"{path.relative_to(ROOT)}: {alias.name}")
    assert offenders == []


def test_no_frame_module_is_over_about_500_lines() -> None:
    sizes = {
        str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
        for p in (ROOT / PACKAGE / "frame").rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 520} == {}


def test_the_core_package_never_imports_dask() -> None:
    # Run in a fresh interpreter: this test process may have imported dask already.
    import subprocess
    import sys

    code = (
        "import sys, pandas as pd, litfetch_df\n"
        "from litfetch_df.demo import demo_session\n"
        "df = pd.DataFrame({'pmid': ['30000001']})\n"
        "df.lit.id_columns(); df.lit.summary()\n"
        "df.lit.resolve(session=demo_session(), progress=False)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed'))\n"
        "assert not loaded, loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
