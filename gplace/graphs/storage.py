"""Reading and writing graphs: the ``.npz`` format of :meth:`Graph.save` and
:meth:`Graph.load`, written atomically and read defensively (a corrupted
file is a :class:`~gplace.errors.GraphError` that names it).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from gplace.errors import GraphError, first_line
from gplace.graphs.schema import ARRAY_FIELDS, CONSTRAINT_FIELDS

# Version 2 adds the optional constraint arrays; a graph without them is
# written as version 1, which older gplace reads.
_FORMAT_VERSION = 2


def check_path(path: Any, caller: str) -> str:
  """``path`` as a str, or GraphError if it is not a file path."""
  if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
    raise GraphError(f"{caller} needs path to be a str or os.PathLike, got "
                     f"{type(path).__name__}; pass e.g. '/tmp/graph.npz'.")
  return os.fspath(path)


def save_graph(graph, path: str | os.PathLike) -> None:
  """Writes ``graph`` (a :class:`~gplace.Graph`) to ``path`` (a ``.npz``
  file) atomically.

  Raises:
    GraphError: ``path`` is not a path or ends in ``.json`` (JSON is
      :func:`gplace.sim.graph_files.save`'s), or the file cannot be
      written.
  """
  path = check_path(path, "Graph.save")
  if path.lower().endswith(".json"):
    # npz bytes under a .json name: every JSON reader would refuse them.
    raise GraphError(
        f"Graph.save writes the .npz format, but path {path!r} ends in "
        ".json; write JSON with gplace.sim.graph_files.save(path, graph), "
        "or give Graph.save a .npz path.")
  tmp = path + ".tmp.npz"
  arrays = {f: getattr(graph, f) for f in ARRAY_FIELDS}
  constraints = {f: getattr(graph, f) for f in CONSTRAINT_FIELDS
                 if getattr(graph, f) is not None}
  arrays.update(constraints)
  meta = json.dumps({"format": "gplace.Graph",
                     "version": _FORMAT_VERSION if constraints else 1,
                     "name": graph.name})
  try:
    np.savez_compressed(tmp, meta=np.asarray(meta), **arrays)
    os.replace(tmp, path)
  except OSError as err:
    if os.path.exists(tmp):
      os.remove(tmp)
    raise GraphError(
        f"Cannot write the graph to path {path!r} ({first_line(err)}); "
        "check that its directory exists and is writable.") from err


def load_graph(path: str | os.PathLike, cls: type):
  """Reads a graph written by :meth:`Graph.save` as a ``cls`` (``Graph``).

  Raises:
    GraphError: ``path`` is missing, unreadable, truncated or corrupted,
      or holds something other than a gplace graph; the message names the
      file and what was wrong.
  """
  path = check_path(path, "Graph.load")
  redo = ("write it again with graph.save(path), or capture the graph "
          "again with gplace.capture(fn, *args)")
  try:
    with np.load(path, allow_pickle=False) as data:
      if not isinstance(data, np.lib.npyio.NpzFile):
        raise GraphError(f"path {path!r} holds one array, not a gplace "
                         f"graph (an .npz file); {redo}.")
      meta = json.loads(str(data["meta"]))
      if not isinstance(meta, dict) or meta.get("format") != "gplace.Graph":
        raise GraphError(f"path {path!r} does not hold a gplace graph (its "
                         f"'meta' entry is not a gplace.Graph header); "
                         f"{redo}.")
      arrays = {f: data[f] for f in ARRAY_FIELDS}
      arrays.update({f: data[f] for f in CONSTRAINT_FIELDS
                     if f in data.files})
  except GraphError:
    raise
  except FileNotFoundError as err:
    raise GraphError(f"No graph file at path {path!r}; check the path, or "
                     "write one with graph.save(path).") from err
  except Exception as err:  # pylint: disable=broad-except
    # A truncated or corrupted file fails anywhere in zipfile, zlib, json
    # or numpy's reader, with any of a dozen exception types.
    if path.lower().endswith(".json"):
      redo = ("Graph.load reads .npz files; read a JSON graph file with "
              "gplace.sim.graph_files.load(path)")
    raise GraphError(
        f"Cannot read a gplace graph from path {path!r}: the file is "
        f"truncated, corrupted or not a graph ({first_line(err)}); "
        f"{redo}.") from err
  version, name = meta.get("version"), meta.get("name")
  if not isinstance(version, int) or version > _FORMAT_VERSION:
    raise GraphError(
        f"path {path!r} holds a graph of format version {version!r}; this "
        f"gplace reads version {_FORMAT_VERSION} and older. Upgrade "
        f"gplace, or {redo}.")
  if not isinstance(name, str):
    raise GraphError(f"path {path!r} holds a graph header without a name "
                     f"(got {name!r}); {redo}.")
  try:
    return cls(name=name, **arrays)
  except GraphError as err:
    raise GraphError(f"path {path!r} holds a malformed graph: {err}") from err
