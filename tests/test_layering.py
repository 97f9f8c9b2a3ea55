"""gplace's layers only point down, and no modules import each other in a
circle (issue 44).

Every module under ``gplace/`` is read with ``ast`` (nothing is imported)
and put in a layer of :data:`LAYERS`, lowest first. A module may import
modules of its own layer and of lower ones, never of a higher one.

What counts as an import of module ``T`` by module ``M``:

* every ``import gplace.x``, ``from gplace.x import y`` and relative import
  (``from . import y``, ``from .x import y``), wherever it is written: at
  module level, inside a function or method, under ``if TYPE_CHECKING:``,
  inside ``try:``;
* ``from P import y`` imports ``P.y`` when that is a module of gplace (a
  submodule), else ``P`` (a name defined in ``P``);
* importing ``gplace.a.b`` runs ``gplace/a/__init__.py`` first, so an
  import of a module of another package also imports every package above
  it (``gplace.a``): these implicit edges count for cycles. The root
  ``gplace/__init__.py`` is left out of them (every import runs it; it is
  the top layer and imports everything below).

Not seen: ``importlib.import_module`` (``gplace.__getattr__`` loads the lazy
subpackages that way, from the top layer).

The checks: no upward import (file:line, from-layer -> to-layer); no cycle
(a strongly connected component of the import graph with more than one
module, or a module importing itself); no function-local import of a gplace
module (imports of heavy optional third-party packages, numba or matplotlib,
may be function-local; gplace modules may not).
"""

from __future__ import annotations

import ast
import pathlib
from typing import NamedTuple

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "gplace"

#: ``(layer name, module prefixes)``, lowest first. A module is in the
#: layer of the longest prefix that is itself or a package above it;
#: ``"gplace"`` alone is ``gplace/__init__.py``.
LAYERS = (
    ("utilities", ("gplace.errors", "gplace._compiled", "gplace.report",
                   "gplace.processes")),
    ("graph IR", ("gplace.graphs",)),
    ("cost model", ("gplace.sim",)),
    # Above the cost model: a workload may be a graph file, which carries
    # a topology (gplace.sim.graph_files).
    ("workloads", ("gplace.workloads",)),
    ("execution", ("gplace.execution",)),
    ("plotting", ("gplace.plotting",)),
    ("baselines", ("gplace.baselines",)),
    ("search", ("gplace.search",)),
    ("solvers", ("gplace.solvers",)),
    ("placer registry", ("gplace.placers",)),
    ("policies", ("gplace.policies",)),
    ("rl", ("gplace.rl",)),
    ("autoplace", ("gplace.autoplace",)),
    ("package", ("gplace",)),
    ("test helpers", ("gplace._testing",)),
)

class Import(NamedTuple):
  """One imported module, as written in a file."""
  importer: str      # module name, e.g. "gplace.sim.planned"
  target: str        # module name, e.g. "gplace.sim.topology"
  path: str          # file, relative to the repository root
  line: int
  local: bool        # inside a function (or lambda)
  implicit: bool     # a package whose __init__ the import runs first


def _module_name(path: pathlib.Path) -> str:
  parts = list(path.relative_to(ROOT).with_suffix("").parts)
  if parts[-1] == "__init__":
    parts.pop()
  return ".".join(parts)


def _sources() -> dict[str, pathlib.Path]:
  return {_module_name(p): p
          for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


MODULES = _sources()


def _is_package(module: str) -> bool:
  return MODULES[module].name == "__init__.py"


def _absolute(module: str, level: int, name: str | None) -> str:
  """The absolute module a relative import in ``module`` names."""
  parts = module.split(".")
  if not _is_package(module):
    parts.pop()
  if level > 1:
    parts = parts[:len(parts) - (level - 1)]
  return ".".join(parts + ([name] if name else []))


def _in_gplace(name: str) -> bool:
  return name == PACKAGE or name.startswith(PACKAGE + ".")


def _parents(target: str, importer: str) -> list[str]:
  """Packages whose __init__ importing ``target`` runs, outside the
  importer's own packages and the root."""
  parts = target.split(".")
  parents = [".".join(parts[:i]) for i in range(2, len(parts))]
  return [p for p in parents
          if not (importer == p or importer.startswith(p + "."))]


class _Visitor(ast.NodeVisitor):
  """Collects the gplace imports of one module."""

  def __init__(self, module: str, path: str):
    self.module, self.path = module, path
    self.depth = 0  # functions around the current node
    self.found: list[Import] = []

  def _add(self, node: ast.AST, target: str) -> None:
    local = self.depth > 0
    self.found.append(Import(self.module, target, self.path, node.lineno,
                             local, False))
    for parent in _parents(target, self.module):
      self.found.append(Import(self.module, parent, self.path, node.lineno,
                               local, True))

  def _function(self, node: ast.AST) -> None:
    self.depth += 1
    self.generic_visit(node)
    self.depth -= 1

  visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

  def visit_Import(self, node: ast.Import) -> None:
    for alias in node.names:
      if _in_gplace(alias.name) and alias.name in MODULES:
        self._add(node, alias.name)

  def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
    base = (_absolute(self.module, node.level, node.module) if node.level
            else node.module or "")
    if not _in_gplace(base):
      return
    for alias in node.names:
      submodule = f"{base}.{alias.name}"
      self._add(node, submodule if submodule in MODULES else base)


def _scan() -> list[Import]:
  found = []
  for module, path in MODULES.items():
    visitor = _Visitor(module, str(path.relative_to(ROOT)))
    visitor.visit(ast.parse(path.read_text(), str(path)))
    found += [i for i in visitor.found if i.target != PACKAGE]
  return list(dict.fromkeys(found))  # one per statement and target


IMPORTS = _scan()


def _layer(module: str) -> int | None:
  best, best_length = None, -1
  for index, (_, prefixes) in enumerate(LAYERS):
    for prefix in prefixes:
      matches = (module == prefix if prefix == PACKAGE else
                 module == prefix or module.startswith(prefix + "."))
      if matches and len(prefix) > best_length:
        best, best_length = index, len(prefix)
  return best


def _where(i: Import) -> str:
  return f"{i.path}:{i.line}"


def _upward() -> list[Import]:
  return [i for i in IMPORTS
          if not i.implicit and _layer(i.target) > _layer(i.importer)]


def _local() -> list[Import]:
  return [i for i in IMPORTS if i.local and not i.implicit]


def _cycles() -> list[set[str]]:
  """Strongly connected components (Tarjan) with more than one module, or
  a module that imports itself."""
  edges: dict[str, set[str]] = {m: set() for m in MODULES}
  for i in IMPORTS:
    edges[i.importer].add(i.target)
  index, low, on_stack, stack, found = {}, {}, set(), [], []
  counter = [0]

  def connect(v):
    index[v] = low[v] = counter[0]
    counter[0] += 1
    stack.append(v)
    on_stack.add(v)
    for w in sorted(edges[v]):
      if w not in index:
        connect(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = set()
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.add(w)
        if w == v:
          break
      if len(component) > 1 or v in edges[v]:
        found.append(component)

  for v in sorted(edges):
    if v not in index:
      connect(v)
  return found


def _layer_name(module: str) -> str:
  return LAYERS[_layer(module)][0]


def test_every_module_is_in_a_layer():
  missing = [m for m in MODULES if _layer(m) is None]
  assert not missing, (
      f"modules in no layer of tests/test_layering.py LAYERS: {missing}; add "
      "their package where it belongs")


def test_the_scan_sees_imports_of_every_form():
  # A few known imports, one of each form, so that a broken scan cannot
  # pass the checks by finding nothing.
  pairs = {(i.importer, i.target) for i in IMPORTS}
  assert ("gplace.sim.simulator", "gplace.sim.topology") in pairs
  assert ("gplace.sim.simulator", "gplace.graphs") in pairs      # implicit
  assert len(MODULES) > 100 and len(IMPORTS) > 500


def test_no_module_imports_a_higher_layer():
  found = list(_upward())
  assert not found, "upward imports (a layer imports one above it):\n" + (
      "\n".join(f"  {_where(i)}: {i.importer} ({_layer_name(i.importer)}) "
                f"-> {i.target} ({_layer_name(i.target)})"
                for i in found))


def test_no_import_cycles():
  found = list(_cycles())
  lines = []
  for component in found:
    lines.append("  cycle: " + ", ".join(sorted(component)))
    lines += [f"    {_where(i)}: {i.importer} -> {i.target}"
              + (" (its package __init__)" if i.implicit else "")
              for i in IMPORTS
              if i.importer in component and i.target in component]
  assert not found, "import cycles:\n" + "\n".join(lines)


def test_no_function_local_gplace_imports():
  found = list(_local())
  assert not found, (
      "function-local imports of gplace modules (import them at the top of "
      "the module; a cycle that forces one is a layering bug):\n"
      + "\n".join(f"  {_where(i)}: {i.importer} -> {i.target}"
                  for i in found))
