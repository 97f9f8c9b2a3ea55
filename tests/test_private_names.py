"""No gplace module uses a private name of another gplace module (issue 44).

Every module under ``gplace/`` is read with ``ast`` (nothing is imported).
A name is private when it starts with an underscore and is not a dunder
(``__version__`` is public). Two uses are refused:

* ``from gplace.x import _y`` (or a relative ``from .x import _y``), unless
  ``gplace.x._y`` is itself a module of gplace (a package-private module,
  such as ``gplace._compiled``, is imported whole);
* ``m._y`` where ``m`` is a gplace module bound by an import (``from
  gplace.sim import native`` then ``native._y``; ``import gplace.sim.native
  as native_lib`` then ``native_lib._y``; ``import gplace`` then
  ``gplace.sim.native._y``).

A module may use its own private names; tests may use the private names of
the module they test (this file checks only ``gplace/``).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "gplace"


def _module_name(path: pathlib.Path) -> str:
  parts = list(path.relative_to(ROOT).with_suffix("").parts)
  if parts[-1] == "__init__":
    parts.pop()
  return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _is_private(name: str) -> bool:
  return name.startswith("_") and not (name.startswith("__")
                                       and name.endswith("__"))


def _in_gplace(name: str) -> bool:
  return name == PACKAGE or name.startswith(PACKAGE + ".")


def _absolute(module: str, is_package: bool, level: int,
              name: str | None) -> str:
  """The absolute module a relative import in ``module`` names."""
  parts = module.split(".")
  if not is_package:
    parts.pop()
  if level > 1:
    parts = parts[:len(parts) - (level - 1)]
  return ".".join(parts + ([name] if name else []))


def private_uses(source: str, module: str, modules,
                 is_package: bool = False) -> list[str]:
  """``"line N: ..."`` for each use in ``source`` (the text of ``module``)
  of a private name of another module of ``modules`` (module names)."""
  tree = ast.parse(source)
  bound: dict[str, str] = {}  # local name -> the gplace module it is
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      for alias in node.names:
        if _in_gplace(alias.name):
          if alias.asname:
            bound[alias.asname] = alias.name
          else:
            bound[PACKAGE] = PACKAGE
    elif isinstance(node, ast.ImportFrom):
      base = (_absolute(module, is_package, node.level, node.module)
              if node.level else node.module or "")
      if not _in_gplace(base):
        continue
      for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
          bound[alias.asname or alias.name] = submodule
        elif _is_private(alias.name) and base != module:
          found.append((node.lineno, f"from {base} import {alias.name}"))

  def module_of(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
      return bound.get(expr.id)
    if isinstance(expr, ast.Attribute):
      outer = module_of(expr.value)
      if outer is not None and f"{outer}.{expr.attr}" in modules:
        return f"{outer}.{expr.attr}"
    return None

  for node in ast.walk(tree):
    if isinstance(node, ast.Attribute) and _is_private(node.attr):
      target = module_of(node.value)
      if target is not None and target != module:
        found.append((node.lineno, f"{target}.{node.attr}"))
  return [f"line {line}: {text}" for line, text in sorted(found)]


def test_no_module_uses_another_modules_private_names():
  found = []
  for module, path in MODULES.items():
    found += [f"{path.relative_to(ROOT)}: {use}" for use in private_uses(
        path.read_text(), module, MODULES, path.name == "__init__.py")]
  assert not found, (
      "private names used across gplace modules (make the name public, "
      "with a docstring, or keep its use inside its module):\n"
      + "\n".join(found))


def test_the_check_finds_each_kind_of_use():
  modules = {"gplace", "gplace.sim", "gplace.sim.native", "gplace.sim.kernel",
             "gplace._compiled"}
  source = """
import gplace
import gplace.sim.native as native_lib
from gplace.sim import native
from gplace.sim.native import _jit, public
from gplace import _compiled
from . import _private_name
from .native import _pop

native._HAS_NUMBA
native_lib._push(1)
gplace.sim.native._jit
native.__doc__
_compiled.anything
native.public._inner
"""
  uses = private_uses(source, "gplace.sim.kernel", modules)
  assert uses == [
      "line 5: from gplace.sim.native import _jit",
      "line 7: from gplace.sim import _private_name",
      "line 8: from gplace.sim.native import _pop",
      "line 10: gplace.sim.native._HAS_NUMBA",
      "line 11: gplace.sim.native._push",
      "line 12: gplace.sim.native._jit",
  ], uses
  # A module's own private names are its own business.
  assert not private_uses("from gplace.sim.native import _jit\n",
                          "gplace.sim.native", modules)
