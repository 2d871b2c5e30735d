"""The package layout reads top-down: no module-level import circle in ``framework`` or
``groupers`` (only ``if TYPE_CHECKING:`` imports may point up), and ``groupers`` never
imports ``framework``."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("framework", "groupers")

TYPE_LEVEL_UP: set[tuple[str, str]] = set()
"""Type-only imports (importer, imported module or package holding it) allowed to close a
circle: none. (`TaskContext.config` is a `JobConfig` without one since the config imports
user code through `framework.importing`, below the task API; the expansion book sits
above the decision it records.)"""

Graph = dict[str, set[str]]


def modules(root: Path, packages: Iterable[str] = PACKAGES) -> dict[str, Path]:
    """Every module under ``packages`` by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for top in packages:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports(body: list[ast.stmt], *, type_level: bool = False,
            in_functions: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements run when the module is imported (those in ``if TYPE_CHECKING:``
    with ``type_level``, those in function bodies with ``in_functions``)."""
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            yield stmt
        elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if in_functions:
                yield from imports(stmt.body, type_level=type_level, in_functions=True)
        elif isinstance(stmt, ast.If) and _type_checking(stmt.test):
            if type_level:
                yield from imports(stmt.body, type_level=True, in_functions=in_functions)
            yield from imports(stmt.orelse, type_level=type_level, in_functions=in_functions)
        else:
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                nested = getattr(stmt, name, None)
                if isinstance(nested, list):
                    blocks = [b for b in nested if isinstance(b, ast.stmt)]
                    blocks += [s for h in nested
                               if isinstance(h, ast.ExceptHandler | ast.match_case)
                               for s in h.body]
                    yield from imports(blocks, type_level=type_level,
                                       in_functions=in_functions)


def _targets(name: str, is_package: bool, stmt: ast.Import | ast.ImportFrom,
             known: dict[str, Path]) -> set[str]:
    """The known modules ``stmt`` in module ``name`` runs: the module it names and the
    packages above it (except the packages holding ``name``, already importing)."""
    if isinstance(stmt, ast.Import):
        named = [alias.name for alias in stmt.names]
    else:
        prefix = stmt.module or ""
        if stmt.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[:len(base) - stmt.level + 1]
            prefix = ".".join(base + ([stmt.module] if stmt.module else []))
        named = [f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in known else prefix
                 for alias in stmt.names]
    found: set[str] = set()
    for target in named:
        while target and target not in known:
            target = target.rpartition(".")[0]
        parts = target.split(".") if target else []
        for end in range(1, len(parts) + 1):
            package = ".".join(parts[:end])
            if package in known and name != package and not name.startswith(f"{package}."):
                found.add(package)
    return found


def import_graph(known: dict[str, Path], *, type_level: bool = False,
                 in_functions: bool = False) -> Graph:
    graph: Graph = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = graph.setdefault(name, set())
        for stmt in imports(tree.body, type_level=type_level, in_functions=in_functions):
            edges |= _targets(name, path.name == "__init__.py", stmt, known)
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _describe(found: list[list[str]], graph: Graph) -> str:
    lines = []
    for component in found:
        members = set(component)
        edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]
        lines.append("; ".join(edges))
    return "\n".join(lines)


def test_no_module_level_import_circle() -> None:
    graph = import_graph(modules(ROOT))
    found = circles(graph)
    assert not found, (
        "module-level import circles (move the upward import under `if TYPE_CHECKING:` "
        "or move the shared piece down a layer):\n" + _describe(found, graph))


def test_type_only_imports_close_no_other_circle() -> None:
    graph = import_graph(modules(ROOT), type_level=True)
    for source, allowed in TYPE_LEVEL_UP:
        graph[source] = {target for target in graph[source]
                         if target != allowed and not target.startswith(f"{allowed}.")}
    found = circles(graph)
    assert not found, (
        "import circles through `if TYPE_CHECKING:` imports (type the dependency with a "
        "Protocol in the lower module):\n" + _describe(found, graph))


def test_function_level_imports_close_no_circle() -> None:
    graph = import_graph(modules(ROOT), in_functions=True)
    found = circles(graph)
    assert not found, (
        "import circles through imports inside functions (a deferred import is still a "
        "circle; move the shared piece down a layer):\n" + _describe(found, graph))


def test_groupers_never_import_framework() -> None:
    known = modules(ROOT)
    offenders = [
        f"{path.relative_to(ROOT)}:{stmt.lineno}"
        for name, path in known.items() if name.split(".")[0] == "groupers"
        for stmt in imports(ast.parse(path.read_text()).body, type_level=True,
                            in_functions=True)
        if any(target.split(".")[0] == "framework"
               for target in ([a.name for a in stmt.names] if isinstance(stmt, ast.Import)
                              else [stmt.module or ""]) if not getattr(stmt, "level", 0))
    ]
    assert not offenders, f"groupers imports framework at {offenders}"


def test_the_wheel_lists_every_package_and_no_top_level_examples() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {top: Path(folder) for top, folder in setuptools["package-dir"].items()}
    folders.update({top: Path(top) for top in PACKAGES})
    listed = set(setuptools["packages"])
    on_disk = {
        ".".join((top, *init.parent.relative_to(ROOT / folder).parts))
        for top, folder in folders.items() for init in (ROOT / folder).rglob("__init__.py")
    }
    assert listed == on_disk, (
        f"pyproject.toml [tool.setuptools] packages: add {sorted(on_disk - listed)}, "
        f"drop {sorted(listed - on_disk)}")
    assert folders["sampan_examples"] == Path("examples")
    assert not any(name.split(".")[0] == "examples" for name in listed)
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "entry-points"]["sampan.examples"]
    assert entry_points == {name: f"sampan_examples.{name}"
                            for name in sorted(p.parent.name
                                               for p in (ROOT / "examples").glob("*/drill.py"))}


def readme_layers() -> list[list[str]]:
    """The README's Layout section: framework's packages and root modules, one layer a
    line, bottom-up (``config/`` as ``framework.config``)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```")[1]
    layers = []
    for line in block.splitlines():
        if re.match(r"  \S", line):
            names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
            layers.append([f"framework.{name.strip().removesuffix('/').removesuffix('.py')}"
                           for name in names.split(",")])
    return layers


def _unit(module: str) -> str:
    """The package or root module of framework that ``module`` belongs to."""
    return ".".join(module.split(".")[:2])


def test_readme_layout_lists_every_package_and_root_module_in_import_order() -> None:
    known = modules(ROOT, ("framework",))
    layers = readme_layers()
    listed = [name for layer in layers for name in layer]
    units = {_unit(name) for name in known} - {"framework"}
    assert sorted(listed) == sorted(units), (
        f"README.md Layout: add {sorted(units - set(listed))}, drop "
        f"{sorted(set(listed) - units)}, each once")
    layer_of = {name: depth for depth, layer in enumerate(layers) for name in layer}
    graph = import_graph(known)
    upward = sorted({
        f"{_unit(source)} -> {_unit(target)} ({source} imports {target})"
        for source, targets in graph.items() for target in targets
        if _unit(source) in layer_of and _unit(target) in layer_of
        and layer_of[_unit(target)] > layer_of[_unit(source)]})
    assert not upward, "module-level imports pointing up the README's layers:\n" + "\n".join(
        upward)


def _tree(root: Path, files: dict[str, str]) -> dict[str, Path]:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return modules(root, ("pkg",))


def test_checker_finds_a_circle_through_a_package_init(tmp_path: Path) -> None:
    known = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low.py": "from pkg.sub.high import x\n",
        "pkg/sub/__init__.py": "from pkg.sub.mid import y\n",
        "pkg/sub/mid.py": "from .. import low\n",
        "pkg/sub/high.py": "x = 1\n",
    })
    assert circles(import_graph(known)) == [["pkg.low", "pkg.sub", "pkg.sub.mid"]]


def test_checker_ignores_type_only_and_function_imports(tmp_path: Path) -> None:
    known = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg import b\n",
        "pkg/b.py": ("from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from pkg import a\n"
                     "def f():\n    from pkg.a import z\n"),
    })
    assert circles(import_graph(known)) == []
    assert circles(import_graph(known, type_level=True)) == [["pkg.a", "pkg.b"]]
    assert circles(import_graph(known, in_functions=True)) == [["pkg.a", "pkg.b"]]
