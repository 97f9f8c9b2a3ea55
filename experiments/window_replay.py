"""LNS windows recorded once, replayed under several CP-SAT settings.

    python experiments/window_replay.py \
        --graphs "gnmt2 small infer, 1cpu+2acc" \
        --graph_cache experiments/cache \
        --record_s 40 --skip_s 25 \
        --variants "default;no links:links=false;short:det=0.5" \
        --out experiments/results/lns_window/<run>

End-to-end LNS runs differ by the windows each happens to draw, so a
setting that solves windows 20% faster hides in their spread (on 1,103-op
gnmt2 at 60 s, one run's answer varies by about 0.6%). This script takes
the noise out: it runs ``gplace.solvers.lns`` once per graph for
``--record_s`` seconds (LNS's defaults, seed ``--seed``), records every
window solved after ``--skip_s`` seconds (where the search is past its
first, easy descent), and solves the same windows again under each
variant of ``--variants``. A window is solved to CP-SAT's deterministic
limit (the recorded one times ``det``; the wall limit is lifted), so a
replay is the same on any machine and only its wall seconds vary. It
measures the windows, not the search: a live LNS run adapts its window
size to CP-SAT's time, so a faster model can buy larger windows rather
than more of them (see ``lns_model.WINDOW_LINKS``); confirm a setting with
``experiments/optimality.py`` before making it a default.

Per variant: the windows, the seconds spent on them (model and solve), the
windows whose model claims a gain over the incumbent (objective below the
incumbent's), those ``gplace.simulate`` confirms (the candidate, in its own
order or the incumbent's, fits and runs strictly faster than the
incumbent, as LNS keeps them), what those save and that per second
(simulated). A variant is ``name:key=value,...``: ``det`` scales the
deterministic limit, ``links=true`` / ``false`` sets whether transfers
queue on links (``lns_model.solve_window``; default ``lns_model.
WINDOW_LINKS``), any other key is a CP-SAT parameter
(``SatParameters``; an enum by its name, e.g. ``search_branching=
HINT_SEARCH``) on top of ``lns_model.WINDOW_PARAMETERS``.
"""

import argparse
import contextlib
import math
import os
import sys
import time
from typing import NamedTuple, Optional

import numpy as np
from ortools.sat.python import cp_model, cp_model_helper

if __package__ in (None, ""):    # run as a script: the repository on the path
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
      __file__))))
# pylint: disable=g-import-not-at-top,wrong-import-position
from gplace import report, solvers
from gplace.errors import or_exit
from gplace.sim.cache import freeze
from gplace.sim.topology import cost_table
from gplace.solvers import lns_model, lns_windows
from gplace.workloads import benchmark
# pylint: enable=g-import-not-at-top,wrong-import-position

DEFAULT_VARIANTS = ("default;no links:links=false;dynamic:use_dynamic_"
                    "precedence_in_disjunctive=true,use_precedences_in_"
                    "disjunctive_constraint=false")
HEADER = [
    "| graph | ops | variant | windows | seconds | claimed | confirmed | "
    "saved µs | saved µs per s | vs first |",
    "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
#: The wall limit of a replayed window: far above its deterministic one.
REPLAY_WALL_S = 60.0


class Variant(NamedTuple):
  """``parameters`` on top of ``lns_model.WINDOW_PARAMETERS``; ``det``
  scales each window's deterministic limit; ``links``: as
  ``solve_window``'s (None: its default, ``WINDOW_LINKS``)."""
  name: str
  parameters: dict
  det: float = 1.0
  links: Optional[bool] = None


class Recorded(NamedTuple):
  """One window as LNS solved it: the shared data, the incumbent around
  the window, and ``solve_window``'s keyword arguments."""
  static: lns_model.Static
  ctx: lns_model.Context
  kwargs: dict


def _value(key: str, text: str, flag: str):
  """A variant's value: true/false, a number, or a CP-SAT enum name."""
  if text.lower() in ("true", "false"):
    return text.lower() == "true"
  try:
    return int(text)
  except ValueError:
    pass
  try:
    return float(text)
  except ValueError:
    pass
  if text.isupper() and hasattr(cp_model_helper.SatParameters, text):
    return getattr(cp_model_helper.SatParameters, text)
  raise SystemExit(f"{flag}: {key}={text!r} is not true/false, a number or "
                   "a CP-SAT enum name; pass e.g. "
                   "search_branching=HINT_SEARCH.")


def parse_variants(text: str, flag: str = "--variants") -> list[Variant]:
  """``name[:key=value,...]`` separated by ';' (see the module's doc)."""
  known = set(dir(cp_model.CpSolver().parameters))
  variants = []
  for part in [p.strip() for p in text.split(";") if p.strip()]:
    name, _, settings = part.partition(":")
    parameters, det, links = {}, 1.0, None
    for item in [s.strip() for s in settings.split(",") if s.strip()]:
      key, eq, value = item.partition("=")
      key = key.strip()
      if not eq or not key:
        raise SystemExit(f"{flag}: {item!r} in {part!r} is not key=value; "
                         "pass e.g. 'short:det=0.5'.")
      value = value.strip()
      if key == "links":
        if value.lower() not in ("true", "false"):
          raise SystemExit(f"{flag}: links must be true or false, got "
                           f"{value!r}.")
        links = value.lower() == "true"
      elif key == "det":
        try:
          det = float(value)
        except ValueError:
          det = math.nan
        if not det > 0 or not math.isfinite(det):
          raise SystemExit(f"{flag}: det must be a positive scale, got "
                           f"{value!r}; pass e.g. det=0.5.")
      elif key in known:
        parameters[key] = _value(key, value, flag)
      else:
        raise SystemExit(f"{flag}: {key!r} is not det, links or a CP-SAT "
                         "parameter (SatParameters); pass e.g. "
                         "use_dynamic_precedence_in_disjunctive=true.")
    variants.append(Variant(name.strip() or "default", parameters, det,
                            links))
  if not variants:
    raise SystemExit(f"{flag} names no variant; pass e.g. {flag} "
                     f"'{DEFAULT_VARIANTS}'.")
  return variants


def record(instance: benchmark.Instance, record_s: float, skip_s: float,
           seed: int, max_windows: int) -> list[Recorded]:
  """The windows LNS solves from ``skip_s`` to ``record_s`` seconds (its
  defaults otherwise), at most ``max_windows`` (the first)."""
  windows, began = [], time.perf_counter()
  solve = lns_windows.solve_window

  def recording(static, ctx, **kwargs):
    if (time.perf_counter() - began >= skip_s
        and len(windows) < max_windows):
      windows.append(Recorded(static, ctx, dict(kwargs)))
    return solve(static, ctx, **kwargs)

  lns_windows.solve_window = recording
  try:
    solvers.lns(instance.graph, instance.topology, costs=instance.costs,
                time_limit_s=record_s, seed=seed)
  finally:
    lns_windows.solve_window = solve
  return windows


@contextlib.contextmanager
def _parameters(extra: dict):
  kept = lns_model.WINDOW_PARAMETERS
  lns_model.WINDOW_PARAMETERS = {**kept, **extra}
  try:
    yield
  finally:
    lns_model.WINDOW_PARAMETERS = kept


class Replayed(NamedTuple):
  """One variant's totals over the recorded windows."""
  seconds: float
  claimed: int
  confirmed: int
  saved_s: float


def scorer(instance: benchmark.Instance):
  """``score(placement, order) -> lns_windows.Scored`` on ``instance``'s
  full, frozen cost table (as LNS scores its candidates)."""
  table = freeze(np.array(cost_table(instance.graph, instance.topology,
                                     instance.costs), np.float64))

  def score(placement, order):
    return lns_windows.score(instance.graph, instance.topology, table,
                             placement, order)

  return score


def replay(windows: list[Recorded], variant: Variant, score,
           incumbents: list) -> Replayed:
  """Solves every window under ``variant``; confirms with ``score``
  (:func:`scorer`) against each window's incumbent (``incumbents``, its
  ``Scored``)."""
  seconds, claimed, confirmed, saved = 0.0, 0, 0, 0.0
  with _parameters(variant.parameters):
    for window, before in zip(windows, incumbents):
      kwargs = dict(window.kwargs, limit_s=REPLAY_WALL_S,
                    links=variant.links)
      kwargs["deterministic_s"] *= variant.det
      began = time.perf_counter()
      solution = lns_model.solve_window(window.static, window.ctx, **kwargs)
      seconds += time.perf_counter() - began
      if solution.placement is None:
        continue
      claimed += bool(solution.objective_ticks < solution.hint_ticks)
      after = min((score(solution.placement, order)
                   for order in (solution.order, window.ctx.order)),
                  key=lambda s: s.key)
      if not after.oom and after.key < before.key:
        confirmed += 1
        saved += before.runtime_s - after.runtime_s
  return Replayed(seconds, claimed, confirmed, saved)


def rows_for(instance: benchmark.Instance, variants: list[Variant],
             record_s: float, skip_s: float, seed: int,
             max_windows: int) -> list[str]:
  """The table's rows for one graph, one per variant."""
  windows = record(instance, record_s, skip_s, seed, max_windows)
  score = scorer(instance)
  incumbents = [score(w.ctx.placement, w.ctx.order) for w in windows]
  rows, first = [], None
  for variant in variants:
    got = replay(windows, variant, score, incumbents)
    rate = 1e6 * got.saved_s / got.seconds if got.seconds > 0 else 0.0
    first = rate if first is None else first
    ratio = f"{rate / first:.2f}x" if first > 0 else "–"
    rows.append(f"| {instance.name} | {instance.graph.n_nodes} | "
                f"{variant.name} | {len(windows)} | {got.seconds:.1f} | "
                f"{got.claimed} | {got.confirmed} | "
                f"{1e6 * got.saved_s:.1f} | {rate:.2f} | {ratio} |")
  return rows


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--graphs", default="gnmt2 small infer, 1cpu+2acc",
                      help="benchmark graphs whose name contains one of "
                      "these '|'-separated strings")
  parser.add_argument("--classes", default="memory,homogeneous",
                      help="comma-separated benchmark classes to choose from")
  parser.add_argument("--variants", default=DEFAULT_VARIANTS,
                      help="';'-separated name:key=value,... (det: scale "
                      "of the deterministic limit; links: true/false; "
                      "else a CP-SAT parameter)")
  parser.add_argument("--record_s", type=float, default=40.0,
                      help="wall seconds of the LNS run that records")
  parser.add_argument("--skip_s", type=float, default=25.0,
                      help="record only windows solved after this many "
                      "seconds of it")
  parser.add_argument("--max_windows", type=int, default=500,
                      help="record at most this many windows per graph")
  parser.add_argument("--seed", type=int, default=0,
                      help="seed of the recording LNS run")
  parser.add_argument("--graph_cache", default=None,
                      help="folder of captured zoo graphs (.npz)")
  parser.add_argument("--out", default=None, help=report.OUT_HELP)
  args = parser.parse_args(argv)
  variants = parse_variants(args.variants)
  if (not args.record_s > 0 or not 0 <= args.skip_s < args.record_s
      or args.max_windows < 1):
    raise SystemExit("--record_s must be positive, --skip_s in [0, "
                     "--record_s) and --max_windows at least 1.")
  specs = or_exit(benchmark.select, args.graphs, args.classes,
                  args.graph_cache)
  study = report.Study.create(args.out, __file__, argv)
  lines = [f"### LNS windows replayed: recorded from {args.skip_s:g} to "
           f"{args.record_s:g} s of one run (seed {args.seed})", "",
           "Each variant solves the same windows to its deterministic "
           "limit. saved: what the confirmed windows save against their "
           "incumbent (simulated); per s: per second of model and solve "
           "(measured on this machine); vs first: that rate over the first "
           "variant's. Load average at the start: "
           f"{report.load_average()}.", ""] + HEADER
  print("\n".join(lines), flush=True)
  report.table_per_workload(
      specs, lambda spec: rows_for(spec.build(), variants, args.record_s,
                                   args.skip_s, args.seed, args.max_windows),
      lines, study)
  report.finish(lines, study)
  return 0


if __name__ == "__main__":
  sys.exit(main())
