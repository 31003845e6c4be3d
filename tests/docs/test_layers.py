"""The house keeps its layer order: an import graph of the whole package, checked against the
order docs/design.md writes ("The layer order"), with no cycle between files and few private
imports (issue 42).

Every module of ``amqp_dissect`` (``dissector/``, ``pipelines/``, ``cli/``, the ``spark`` alias: the
folders pyproject.toml maps) is parsed with ``ast``; every ``import`` and ``from ... import`` in
it counts, those inside functions and ``TYPE_CHECKING`` blocks too (an import on first use is an
import all the same).  ``from pkg import name`` is an edge to the module ``pkg.name`` when that is
a module, else to ``pkg``.  A private import is ``from m import _name`` or ``m._name`` (``m`` a
module imported under that name) from another module of the package.
"""

from __future__ import annotations

import ast
import os
import re
import tomllib
from typing import NamedTuple

import pytest

from test_docs import ROOT

# the docs against the code's registries and sources: no hot module runs (CI's pure pass leaves them out)
pytestmark = pytest.mark.no_twin

PACKAGE = "amqp_dissect"
PRIVATE_IMPORTS_MAX = 10  # issue 42: "at most 10 private imports across modules, each explained"


class Import(NamedTuple):
    """One import of a module of the package by another (or the same) module."""
    importer: str  # dotted module name
    target: str  # dotted module name
    line: int
    private: str  # the private name imported ("" when none)


def package_modules(root: str = ROOT) -> dict:
    """Dotted module name -> source path, for the folders pyproject.toml maps into the package."""
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    modules = {}
    for package, folder in dirs.items():
        base = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = os.path.relpath(dirpath, base)
            # a sub-folder mapped to a package of its own (pipelines/ inside the package's folder, ...)
            if rel != "." and any(os.path.samefile(dirpath, os.path.join(root, d)) for d in dirs.values()):
                dirnames[:] = []
                continue
            parts = [] if rel == "." else rel.split(os.sep)
            for name in filenames:
                if name.endswith(".py"):
                    stem = name[:-3]
                    dotted = ".".join([package] + parts + ([] if stem == "__init__" else [stem]))
                    modules[dotted] = os.path.join(dirpath, name)
    return modules


def _owner(name: str, modules: dict) -> str:
    """The module of the package that a dotted name lives in (the longest module prefix)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _absolute(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def module_imports(importer: str, path: str, modules: dict) -> list:
    """The imports of one module of the package (imports of other packages are left out)."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    is_package = path.endswith("__init__.py")
    found: list = []
    bound: dict = {}  # local name -> module it names (for m._name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    found.append(Import(importer, _owner(alias.name, modules), node.lineno, ""))
                    if alias.asname:
                        bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(importer, is_package, node)
            if source.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in modules:
                    found.append(Import(importer, sub, node.lineno, ""))
                    bound[alias.asname or alias.name] = sub
                else:
                    target = _owner(source, modules)
                    private = alias.name if _private(alias.name) and target != importer else ""
                    found.append(Import(importer, target, node.lineno, private))
    for node in ast.walk(tree):  # m._name, m a module of the package bound above
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in bound:
                target = ".".join([bound[value.id]] + chain[::-1])
                if target in modules and target != importer:
                    found.append(Import(importer, target, node.lineno, node.attr))
    return found


def import_graph(root: str = ROOT) -> tuple:
    """(modules, every import of the package by its modules)."""
    modules = package_modules(root)
    imports = [imp for name, path in sorted(modules.items()) for imp in module_imports(name, path, modules)]
    return modules, imports


def cycles(modules: dict, imports: list) -> list:
    """The strongly connected groups of more than one file (Tarjan, iterative), each sorted."""
    graph = {m: sorted({i.target for i in imports if i.importer == m and i.target != m}) for m in modules}
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    found = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def layer_order(design_text: str) -> dict:
    """Top-level name under the package ("" for the package's own ``__init__``) -> layer number,
    from the numbered list under "The layer order" in docs/design.md."""
    section = design_text.split("**The layer order.**", 1)[1]
    layers: dict = {}
    for line in section.splitlines():
        m = re.match(r"^(\d+)\. (.*)$", line)
        if m:
            for name in re.findall(r"`([\w.]+)`", re.sub(r"\([^)]*\)", "", m.group(2))):
                layers["" if name == PACKAGE else name] = int(m.group(1))
        elif layers and line.strip() == "":
            break
    return layers


def _top(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def layer_violations(imports: list, layers: dict) -> list:
    """The imports from a layer to a later one (or of a module no layer names)."""
    bad = []
    for imp in imports:
        a, b = _top(imp.importer), _top(imp.target)
        if a not in layers or b not in layers:
            bad.append(f"{imp.importer} -> {imp.target} (line {imp.line}): not in the layer order")
        elif layers[b] > layers[a]:
            bad.append(f"{imp.importer} (layer {layers[a]}, {a or PACKAGE}) imports {imp.target} "
                       f"(layer {layers[b]}, {b}) at line {imp.line}")
    return bad


def private_imports(imports: list) -> list:
    return [i for i in imports if i.private]


def _explained(path: str, line: int) -> bool:
    """Does the import at ``line`` (its statement's lines, or the line above) carry a comment?"""
    lines = open(path, encoding="utf-8").read().splitlines()
    tree = ast.parse("\n".join(lines))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno == line:
            span = lines[max(0, node.lineno - 2): node.end_lineno]
            return any("#" in text for text in span)
    return "#" in lines[line - 1] or "#" in lines[line - 2]


@pytest.fixture(scope="module")
def graph():
    return import_graph()


@pytest.fixture(scope="module")
def layers():
    with open(os.path.join(ROOT, "docs", "design.md"), encoding="utf-8") as f:
        return layer_order(f.read())


def test_the_doc_names_every_room_once(graph, layers):
    modules, _ = graph
    tops = {_top(m) for m in modules}
    assert tops - set(layers) == set(), "rooms of the package the layer order of docs/design.md does not name"
    assert set(layers) - tops == set(), "names in the layer order that are no room of the package"
    assert len(layers) == len(tops)


def test_no_import_against_the_layer_order(graph, layers):
    _, imports = graph
    assert layer_violations(imports, layers) == []


def test_no_import_cycle_between_files(graph):
    assert cycles(*graph) == []


def test_few_private_imports_each_explained(graph):
    modules, imports = graph
    private = private_imports(imports)
    shown = [f"{i.importer}:{i.line} {i.private} from {i.target}" for i in private]
    assert len(private) <= PRIVATE_IMPORTS_MAX, shown
    unexplained = [s for s, i in zip(shown, private) if not _explained(modules[i.importer], i.line)]
    assert unexplained == []


# -- the checks find what they are for (made-up packages in tmp_path) ---------------------------

def _package(tmp_path, files: dict) -> str:
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.package-dir]\namqp_dissect = "dissector"\n')
    for rel, text in files.items():
        path = tmp_path / "dissector" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return str(tmp_path)


def test_the_checks_find_a_cycle_an_upward_import_and_a_private_one(tmp_path):
    root = _package(tmp_path, {
        "__init__.py": "",
        "capture/__init__.py": "",
        "capture/a.py": "def f():\n    from ..amqp import b  # (inside a function: counted)\n",
        "amqp/__init__.py": "",
        "amqp/b.py": "from amqp_dissect.capture.a import f\nfrom .c import _hidden\n",
        "amqp/c.py": "import amqp_dissect.amqp.b as bee\n_hidden = 1\nx = bee._private\n",
    })
    modules, imports = import_graph(root)
    assert cycles(modules, imports) == [["amqp_dissect.amqp.b", "amqp_dissect.amqp.c"],
                                        ["amqp_dissect.amqp.b", "amqp_dissect.capture.a"]] or \
        cycles(modules, imports) == [["amqp_dissect.amqp.b", "amqp_dissect.amqp.c", "amqp_dissect.capture.a"]]
    layers = layer_order("**The layer order.**\n\n1. `amqp_dissect`\n2. `capture`\n3. `amqp`\n\nafter\n4. `x`\n")
    assert layers == {"": 1, "capture": 2, "amqp": 3}
    assert layer_violations(imports, layers) == [
        "amqp_dissect.capture.a (layer 2, capture) imports amqp_dissect.amqp.b (layer 3, amqp) at line 2"]
    assert [(i.importer, i.private) for i in private_imports(imports)] == [
        ("amqp_dissect.amqp.b", "_hidden"), ("amqp_dissect.amqp.c", "_private")]
    assert not _explained(modules["amqp_dissect.amqp.b"], 2)
    assert _explained(modules["amqp_dissect.capture.a"], 2)


def module_getattrs(modules: dict) -> list:
    """The modules with a module-level ``__getattr__`` (PEP 562): the imports it makes on first use
    are hidden from the graph above."""
    found = []
    for name, path in sorted(modules.items()):
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
        if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body):
            found.append(name)
    return found


def test_only_the_facade_loads_names_on_first_use(graph):
    # the package's __init__ reaches the pipelines' analyze() on first use (docs/design.md, "The one
    # façade"); amqp_dissect.pipelines.spark loads its own sub-modules on first use (so that naming it
    # imports no pyspark); another module re-exporting through __getattr__ would hide its imports
    modules, _ = graph
    assert module_getattrs(modules) == [PACKAGE, f"{PACKAGE}.pipelines.spark"]
