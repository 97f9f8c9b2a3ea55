"""Fitting the simulator's link and host costs to measured placed runs.

:func:`calibration_blocks` draws the placements :func:`gplace.profile` runs;
:func:`calibrate_links` fits link, cluster-launch and copy-issue factors per
device kind so that ``gplace.simulate`` matches them. Host-side. Why:
``docs/design.md``, "Calibration".
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from gplace.graphs.graph import Graph
from gplace.sim import simulator
from gplace.sim.clusters import count_copies, launch_costs
from gplace.sim.topology import Topology

# Calibration grids of at most this many combinations are searched whole.
FULL_GRID_TRIALS = 2500
# Factors on the measured dispatch tried for each device kind's copy issue
# (Device.copy_issue_s): 0, and 1/32 to 8 in steps of sqrt(2).
_COPY_GRID = np.r_[0.0, np.geomspace(1 / 32, 8.0, 17)]
# The fit's prior, on fits of fewer than PRIOR_MAX_RUNS runs: each octave a
# link or launch factor lies from 1 (the bare measured copy or dispatch;
# launch 0 counts as 3 octaves) adds this much, averaged over the factors,
# to the absolute log errors it ranks by. With a few calibration runs (a
# profile within a budget fits 2-6) many factor pairs fit about equally
# (links and launches trade) and the grid's first was taken; the prior picks
# the one nearest the measured costs, so repeated profiles agree
# (experiments/local_check.py --profile-repeats). With more runs the data
# decide: a median error is flat in a factor that few runs feel, and even a
# small prior would override the runs that do.
PRIOR_PER_OCTAVE = 0.005
PRIOR_MAX_RUNS = 8


def block_placements(n_nodes: int, n_devices: int, count: int,
                     rng: np.random.Generator, max_blocks: int = 16,
                     min_blocks: int = 2) -> np.ndarray:
  """``[count, n_nodes]`` random placements with long same-device runs: node
  ids (a topological order) cut into ``min_blocks..max_blocks`` contiguous
  blocks (at most ``n_nodes``), each on a random device."""
  out = []
  for _ in range(count):
    top = min(max_blocks, n_nodes)
    n_blocks = int(rng.integers(min(min_blocks, top), top + 1))
    cuts = np.sort(rng.choice(np.arange(1, n_nodes), n_blocks - 1,
                              replace=False))
    devices = rng.integers(0, n_devices, n_blocks)
    out.append(np.repeat(devices, np.diff(np.r_[0, cuts, n_nodes])))
  # [count, n_nodes] also for count 0 (calibration_blocks stacks them).
  return np.asarray(out, np.int32).reshape(count, n_nodes)


def calibration_blocks(n_nodes: int, n_devices: int, count: int,
                       rng: np.random.Generator,
                       max_blocks: int = 64) -> np.ndarray:
  """``[count, n_nodes]`` calibration placements of three kinds, so that
  the fit can tell its factors apart:

  * a quarter cut once: a prefix of the node ids on one device, the rest
    on another, both orders of each pair in turn (values cross in one
    direction only: the link factor of each direction);
  * of the rest, half with few blocks (2-16, :func:`block_placements`:
    transfers matter) and half with many (17-64: launching clusters
    matters, as for placers that cut tiny graphs into up to ~100
    clusters); ``max_blocks`` lowers that 64 (a profile within a time
    budget: each cluster costs a compile).
  """
  cuts = count // 4
  few = (count - cuts) - (count - cuts) // 2
  out = [block_placements(n_nodes, n_devices, few, rng),
         block_placements(n_nodes, n_devices, count - cuts - few, rng,
                          max_blocks=max(max_blocks, 17), min_blocks=17)]
  pairs = [(a, b) for a in range(n_devices) for b in range(n_devices)
           if a != b]
  for i in range(cuts):
    a, b = pairs[i % len(pairs)] if pairs else (0, 0)
    cut = int(rng.integers(1, max(n_nodes, 2)))
    out.append(np.where(np.arange(n_nodes) < cut, a, b)[None])
  return np.concatenate(out).astype(np.int32)


def net_of_launch(costs: np.ndarray, topology: Topology) -> np.ndarray:
  """``costs`` with each device's column scaled so that the one cluster of
  a single-device placement plus its launch (``cluster_launch_s``) costs
  what the column summed to (the measured whole program); a column keeps at
  least a tenth of its sum."""
  total = costs.sum(0)
  net = np.maximum(total - launch_costs(topology), 0.1 * total)
  return costs * np.where(total > 0, net / np.where(total > 0, total, 1.0),
                          1.0)[None, :]


def rescaled(topology: Topology, links: float | np.ndarray = 1.0,
             launch: np.ndarray | None = None,
             copy_issue_s: np.ndarray | None = None, **changes) -> Topology:
  """``topology`` with link latencies and per-byte times times ``links``
  (a number or ``[D, D]``), each device's ``cluster_launch_s`` times
  ``launch[d]``, its ``copy_issue_s`` set to ``copy_issue_s[d]`` and the
  other fields in ``changes``, in one validation (the calibration builds
  thousands)."""
  if launch is not None or copy_issue_s is not None:
    launch = np.ones(topology.n_devices) if launch is None else launch
    copy_issue_s = ([dev.copy_issue_s for dev in topology.devices]
                    if copy_issue_s is None else copy_issue_s)
    changes["devices"] = tuple(
        dataclasses.replace(dev, cluster_launch_s=dev.cluster_launch_s * s,
                            copy_issue_s=float(c))
        for dev, s, c in zip(topology.devices, launch, copy_issue_s))
  return topology.replace(link_latency=topology.link_latency * links,
                          link_bandwidth=topology.link_bandwidth / links,
                          **changes)


def _link_grid(scales: np.ndarray, topology: Topology, kinds: list[str],
               link_class: tuple[str, str]) -> np.ndarray:
  """The factors the fit tries on the links of ``link_class`` (source kind,
  destination kind): all of ``scales``, or those of at least 1 where the
  topology pipelines some links but holds these. A held link there is one
  whose copies wait for each other (an accelerator's values into the CPU
  as an older executor copied them,
  :func:`gplace.execution.fitting.executor_pipelining`): each then costs
  at least a bare copy of a resting value, the latency measured."""
  mask = topology.pipelined_mask
  held = [not mask[i, j] for i, a in enumerate(kinds)
          for j, b in enumerate(kinds) if i != j and (a, b) == link_class]
  if topology.has_pipelined_links and any(held):
    return scales[scales >= 1.0 - 1e-12]
  return scales


# Link factors tried (1/16 to 16 in steps of 2**(1/4)) and launch factors
# (0, and 1/4 to 64 in steps of 2**(1/4)).
_SCALES = np.geomspace(1 / 16, 16.0, 33)
_LAUNCH_GRID = np.r_[0.0, np.geomspace(0.25, 64.0, 33)]


def _factor_classes(topology: Topology) -> tuple[list, list]:
  """The link classes (source kind, destination kind) and launch classes
  (``("launch", kind)``, where launches cost anything) the fit scales."""
  kinds = [dev.kind for dev in topology.devices]
  d = len(kinds)
  classes = sorted({(kinds[i], kinds[j]) for i in range(d)
                    for j in range(d) if i != j})
  launches = ([("launch", k) for k in sorted(set(kinds))]
              if np.any(launch_costs(topology) > 0) else [])
  return classes, launches


def fine_grid_trials(topology: Topology) -> int:
  """Trials in :func:`calibrate_links`' whole fine grid on ``topology``
  (searched whole when at most ``FULL_GRID_TRIALS``)."""
  classes, launches = _factor_classes(topology)
  batching = 2 if topology.batched_inputs else 1
  return (batching * len(_SCALES) ** len(classes)
          * len(_LAUNCH_GRID) ** len(launches))


def calibrate_links(graph: Graph, topology: Topology, costs: np.ndarray,
                     placements: np.ndarray, schedules: np.ndarray,
                     measured: np.ndarray,
                     max_trials: int = FULL_GRID_TRIALS,
                     joint: bool = False
                     ) -> tuple[Topology, np.ndarray, float, np.ndarray,
                                np.ndarray, np.ndarray]:
  """Scales link, cluster-launch and copy-issue costs so the simulator
  matches the executor on measured placements.

  A placed run pays more per cross-device value than a bare ``device_put``
  (the copy is issued from Python between executables, and XLA fuses less
  across the cut), and more per cluster than a bare dispatch (argument
  handling, copies that wait for a device). Factors on link latency and
  per-byte time, and on each device's ``cluster_launch_s``, chosen on log
  grids to minimize the median absolute log error of the simulated
  runtimes (ties broken by the mean), absorb them; on fewer than
  :data:`PRIOR_MAX_RUNS` runs a small prior (:data:`PRIOR_PER_OCTAVE`)
  prefers factors near 1 where fits are about equal, so that a few runs do
  not pick an arbitrary trade of links for launches.

  Where ``topology.batched_inputs`` (the executor's batched parameter
  copies), the fit also tries the plain model (every input transfer pays
  the latency) and keeps the better: on CPU + GPU a batched copy still
  costs tens of microseconds per array.

  Op costs shrink by one launch per device (:func:`net_of_launch`), so a
  single-device placement still costs the measured whole program; a
  launch is capped at half of that run (it is part of it: without the cap
  a fit can put a step's whole cost into launches that a one-cluster run
  contradicts).

  One link factor per (source kind, destination kind) and one launch
  factor per device kind, searched jointly: every combination where the
  grids hold at most ``FULL_GRID_TRIALS`` of them (one kind of device),
  else every combination on coarse grids (links 2x apart, launches 4x)
  followed by coordinate descent on the fine grids (a descent from one
  common factor can stop where launches absorb what GPU-to-CPU copies
  cost: ``docs/design.md``, "Calibration"). The directions
  differ on an accelerator: parameters go from host to device in one
  batched copy at the start of a call (cheaper than a copy each, which is
  what the simulator charges), while a value the device has just computed
  comes back through a synchronising copy (dearer than a bare one).
  Devices of one kind (forced CPU devices) keep one link factor. Where the
  topology pipelines some links but holds others (measurements of an older
  executor, which brought the values an accelerator computed to the CPU one
  after another), a held link's factor is at least 1 (:func:`_link_grid`):
  the calibration runs move few such values, and a fit left free can put
  that latency far below a bare copy.

  Each device kind also gets a host cost per value copied into it
  (``Device.copy_issue_s``, a factor on the measured dispatch from
  ``_COPY_GRID``, 0 included): the executor issues copies from the thread
  that launches clusters, so they add to a step while the links' time
  overlaps compute. It is additive, so every trial of links and launches
  tries every copy factor without simulating again.

  Args:
    graph, topology, costs: the problem as the simulator sees it.
    placements: ``[K, N]`` placements that were run.
    schedules: ``[K, N]`` the orders they ran in (simulated in that order).
    measured: ``[K]`` their measured seconds (inf/NaN: failed, ignored).
    max_trials: the largest fine grid searched whole (default
      ``FULL_GRID_TRIALS``); a larger one is searched coarse, then by
      descent (a profile within a time budget passes fewer).
    joint: fit one factor for every link, launch and copy (the copy factor
      nearest it on its grid) instead: what one or two calibration runs can
      tell (free factors fitted to two runs can trade launches for links
      and miss other placements by 2x).

  Returns:
    ``(topology with scaled links, launch and copy costs, the costs net of
    one launch, the common link factor, [D, D] per-link factors, [D]
    per-device launch factors, [D] per-device copy factors)``.
  """
  ok = np.flatnonzero(np.isfinite(measured))
  scales, launch_grid = _SCALES, _LAUNCH_GRID
  kinds = [dev.kind for dev in topology.devices]
  d = len(kinds)
  pairs = [(i, j) for i in range(d) for j in range(d) if i != j]
  classes, launches = _factor_classes(topology)
  measured_launch = launch_costs(topology)

  def factors_of(per_class: dict) -> tuple[np.ndarray, np.ndarray]:
    links = np.ones((d, d))
    for i, j in pairs:
      links[i, j] = per_class[(kinds[i], kinds[j])]
    launch = np.array([per_class.get(("launch", k), 1.0) for k in kinds])
    return links, launch

  # A launch is part of the single-device run (one cluster): at most half.
  most = np.where(measured_launch > 0, 0.5 * costs.sum(0) / np.where(
      measured_launch > 0, measured_launch, 1.0), np.inf)

  def scaled(per_class: dict) -> Topology:
    links, launch = factors_of(per_class)
    return rescaled(topology, links, np.minimum(launch, most),
                    copy_issue_s=np.zeros(d),  # added by error()
                    batched_inputs=per_class.get("batched",
                                                 topology.batched_inputs))

  # Copy issue: [M, kinds] factor combinations, and [K, kinds] the host
  # seconds each placement's copies into each kind cost at factor 1.
  kind_names = sorted(set(kinds))
  unit = np.array([dev.launch_overhead_s for dev in topology.devices])
  copies = count_copies(graph, placements[ok], d) * unit[None, :]
  per_kind = np.stack([copies[:, [kinds[j] == k for j in range(d)]].sum(1)
                       for k in kind_names], axis=1)
  copy_combos = np.array(list(itertools.product(
      _COPY_GRID if np.any(per_kind > 0) else [0.0],
      repeat=len(kind_names))))
  extra = copy_combos @ per_kind.T                          # [M, K]

  def prior(per_class: dict) -> float:
    """:data:`PRIOR_PER_OCTAVE` times the mean octaves from 1 of the link
    and launch factors."""
    factors = [per_class[c] for c in classes + launches if c in per_class]
    if not factors or len(ok) >= PRIOR_MAX_RUNS:
      return 0.0
    octaves = [abs(np.log2(f)) if f > 0 else 3.0 for f in factors]
    return PRIOR_PER_OCTAVE * float(np.mean(octaves))

  def error(per_class: dict) -> tuple[float, float, int]:
    """(median, mean) absolute log error at the best copy factors, each
    plus the :func:`prior`, and their row of ``copy_combos``: the median,
    robust to a burst of load, ranks; the mean breaks its ties (a median
    can be flat)."""
    trial = scaled(per_class)
    sim = np.asarray(simulator.simulate(
        graph, placements[ok], trial, costs=net_of_launch(costs, trial),
        order=schedules[ok]).runtime_s, np.float64)
    log_error = np.abs(np.log((sim[None, :] + extra) / measured[ok][None]))
    median, mean = np.median(log_error, axis=1), np.mean(log_error, axis=1)
    if joint:    # the copy factors nearest the common one
      common = np.log2(per_class[classes[0]] if classes else 1.0)
      distance = np.abs(np.log2(np.maximum(copy_combos, _COPY_GRID[1]))
                        - common).sum(1)
      row = int(np.argmin(distance))
    else:
      row = int(np.lexsort((mean, median))[0])
    penalty = prior(per_class)
    return float(median[row]) + penalty, float(mean[row]) + penalty, row

  # Jointly (either factor can absorb the other's cost on placements with
  # many clusters): the whole fine grid where it is small, else the whole
  # coarse grid, then descent on the fine one.
  batching = ([{"batched": b} for b in (False, True)]
              if topology.batched_inputs else [{}])
  fine = fine_grid_trials(topology) <= min(max_trials, FULL_GRID_TRIALS)
  link_grids = {c: _link_grid(scales, topology, kinds, c) for c in classes}
  launch_values = (launch_grid if fine
                   else np.r_[0.0, launch_grid[1::8]])
  trials = [{**dict(zip(classes, links)), **dict(zip(launches, lau)), **b}
            for b in batching
            for links in itertools.product(
                *[(link_grids[c] if fine else link_grids[c][::4]).tolist()
                  for c in classes])
            for lau in itertools.product(launch_values.tolist(),
                                         repeat=len(launches))]
  if joint:
    fine = True                            # nothing left to descend on
    trials = [{**{c: v for c in classes + launches}, **b}
              for b in batching for v in scales.tolist()]
  errors = [error(trial) for trial in trials]
  best = min(errors)
  per_class = trials[errors.index(best)]
  # The best single factor for every link (Profile.link_scale).
  common = min(((e, t[classes[0]]) for e, t in zip(errors, trials)
                if len({t[c] for c in classes}) == 1), default=(0, 1.0))[1]
  coordinates = [] if fine else (
      [(c, link_grids[c]) for c in classes]
      + [(c, launch_grid) for c in launches]
      + ([("batched", (False, True))] if topology.batched_inputs else []))
  improved, sweeps = bool(coordinates), 0
  while improved and sweeps < 8:  # coordinate descent, until a sweep is idle
    improved, sweeps = False, sweeps + 1
    for c, grid in coordinates:
      for value in grid:
        trial = {**per_class, c: value}
        e = error(trial)
        if e < best:
          best, per_class, improved = e, trial, True
  links, launch = factors_of(per_class)
  copy = copy_combos[best[2]][[kind_names.index(k) for k in kinds]]
  fitted = rescaled(scaled(per_class), copy_issue_s=copy * unit)
  return (fitted, net_of_launch(costs, fitted), common, links,
          np.minimum(launch, most), copy)
