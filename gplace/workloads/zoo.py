"""Capturing the whole zoo with abstract arguments: :func:`capture_workload`,
:func:`zoo_table` (graph sizes) and :func:`export` (``.npz`` files).
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Iterable

from gplace.graphs.capture import capture
from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.workloads.registry import get, names as all_names


TABLE_HEADER = ("| workload | size | step | nodes | edges | FLOPs | input MiB "
                "| capture s |\n|---|---|---|---:|---:|---:|---:|---:|")


@dataclasses.dataclass(frozen=True)
class ZooRow:
  """Sizes of one captured workload."""
  name: str
  size: str
  step: str
  nodes: int
  edges: int
  flops: float
  input_bytes: int  # parameters, optimizer state and batch
  capture_s: float


def capture_workload(name: str, size: str = "tiny",
                     step: str = "train") -> tuple[Graph, float]:
  """Captures one workload from abstract arguments.

  Returns:
    ``(graph, seconds)``: the graph, named ``<name>_<size>_<step>``, and the
    wall-clock seconds that building and capturing took.
  """
  start = time.perf_counter()
  fn, args = get(name, size, step, abstract=True)
  graph = capture(fn, *args, name=f"{name}_{size}_{step}")
  return graph, time.perf_counter() - start


def zoo_rows(size: str = "tiny", step: str = "train",
             names: Iterable[str] | None = None, out_dir: str | None = None,
             progress=None) -> list[ZooRow]:
  """Captures workloads (all by default) and returns one row each.

  Args:
    size, step: as in ``gplace.workloads.get``.
    names: workload names; default all.
    out_dir: if given, each graph is saved there as
      ``<name>_<size>_<step>.npz``.
    progress: optional callable receiving each :class:`ZooRow` as it is made.
  """
  rows = []
  for name in (names or all_names()):
    graph, seconds = capture_workload(name, size, step)
    if out_dir is not None:
      os.makedirs(out_dir, exist_ok=True)
      graph.save(os.path.join(out_dir, f"{graph.name}.npz"))
    input_bytes = int(graph.out_bytes[graph.kind == NODE_INPUT].sum())
    row = ZooRow(name, size, step, graph.n_nodes, graph.n_edges,
                 float(graph.flops.sum()), input_bytes, seconds)
    rows.append(row)
    if progress is not None:
      progress(row)
  return rows


def format_table(rows: Iterable[ZooRow]) -> str:
  """Markdown table of rows: name, size, step, nodes, edges, FLOPs, input
  MiB (parameters, optimizer state, batch) and capture seconds."""
  lines = [TABLE_HEADER]
  for r in rows:
    lines.append(f"| {r.name} | {r.size} | {r.step} | {r.nodes:,} | "
                 f"{r.edges:,} | {r.flops:.3g} | {r.input_bytes / 2**20:,.1f} "
                 f"| {r.capture_s:.1f} |")
  return "\n".join(lines)


def zoo_table(size: str = "tiny", step: str = "train",
              names: Iterable[str] | None = None) -> str:
  """The README's zoo table: captures the workloads and formats them."""
  return format_table(zoo_rows(size, step, names))


def export(out_dir: str, size: str = "tiny", step: str = "train",
           names: Iterable[str] | None = None, progress=None) -> list[ZooRow]:
  """Captures workloads and saves each as ``out_dir/<name>_<size>_<step>.npz``."""
  return zoo_rows(size, step, names, out_dir=out_dir, progress=progress)
