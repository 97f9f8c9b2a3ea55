"""From measurements to the simulator's inputs: fitting a :class:`Profile`.

:func:`fitted_profile` turns :func:`gplace.profile`'s measurements into a
calibrated :class:`~gplace.sim.topology.Topology` and ``costs [N, D]`` (op
times scaled by a fusion factor, links pipelined as the executor copies,
launch and copy-issue costs); :func:`refit` fits again on new runs.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

from gplace.errors import ExecutionError
from gplace.execution.calibration import calibrate_links
from gplace.execution.profile_file import Profile
from gplace.graphs.graph import Graph, NODE_OP
from gplace.sim.topology import Device, Topology


def refit(prof: Profile, calibration_s: np.ndarray,
          whole_program_s: np.ndarray,
          pipelined_links: bool | np.ndarray | None = None) -> Profile:
  """``prof`` calibrated again on new measurements of its own runs.

  The op times, dispatch overheads and bare copies stay; the fusion
  factors, link, launch and copy factors are fitted again, exactly as
  :func:`gplace.profile` fits them. Use it where the host's speed drifts:
  measure the calibration runs (:func:`calibration_runs`) in the same
  interleaved rounds as the placements to predict, so that the fit and what
  it predicts see the same machine (``experiments/fidelity.py --calibrate-in-rounds``).

  Args:
    prof: a profile with calibration runs (``gplace.profile`` with
      ``calibration_placements > 0`` on two or more devices).
    calibration_s: ``[C]`` seconds of ``prof.calibration_placements`` run
      in ``prof.calibration_orders`` (NaN: failed, left out).
    whole_program_s: ``[D]`` seconds of the whole program on each device
      alone (one cluster).
    pipelined_links: the ``Topology.pipelined_links`` to fit with (default:
      the executor's now, :func:`executor_pipelining`); measurements taken
      by an older executor want the links it had (``experiments/
      fidelity_refit.py`` passes them).

  Returns:
    A new :class:`Profile` with the new measurements.

  Raises:
    ExecutionError: ``prof`` has no calibration runs, or the measurements
      have the wrong shape.
  """
  if prof.calibration_placements is None:
    raise ExecutionError(
        "This profile has no calibration runs to fit again; profile with "
        "calibration_placements > 0 on two or more devices.")
  calibration_s = np.asarray(calibration_s, np.float64)
  whole_program_s = np.asarray(whole_program_s, np.float64)
  if calibration_s.shape != (len(prof.calibration_placements),) or (
      whole_program_s.shape != (prof.topology.n_devices,)):
    raise ExecutionError(
        f"refit wants [{len(prof.calibration_placements)}] calibration "
        f"seconds and [{prof.topology.n_devices}] whole-program seconds, "
        f"got shapes {calibration_s.shape} and {whole_program_s.shape}.")
  return fitted_profile(prof.graph, prof.topology, prof.op_time_s,
                        prof.dispatch_s, prof.transfer_latency_s,
                        prof.transfer_bandwidth, whole_program_s,
                        prof.calibration_placements,
                        prof.calibration_orders, calibration_s,
                        prof.profile_s, pipelined_links, meta=prof.meta,
                        joint=prof.meta.get("fit_grid") == "joint")


def calibration_runs(prof: Profile) -> list[tuple[np.ndarray, np.ndarray]]:
  """``(placement [N], order [N])`` of each run :func:`refit` takes:
  the whole program on each device alone (in node-id order), then each
  calibration placement in its order."""
  n = prof.graph.n_nodes
  singles = [(np.full(n, j, np.int32), np.arange(n))
             for j in range(prof.topology.n_devices)]
  if prof.calibration_placements is None:
    return singles
  return singles + list(zip(prof.calibration_placements,
                            prof.calibration_orders))


def compute_times(graph: Graph, op_time: np.ndarray,
                  dispatch: np.ndarray) -> np.ndarray:
  """``[N, D]`` op compute seconds: what remains of each op's time after
  the dispatch, with a floor of a tenth so no op is free; 0 for inputs and
  outputs."""
  is_op = graph.kind == NODE_OP
  return np.where(is_op[:, None],
                  np.maximum(op_time - dispatch[None, :], 0.1 * op_time),
                  0.0)


def fitted_profile(graph: Graph, base: Topology, op_time: np.ndarray,
                   dispatch: np.ndarray, latency: np.ndarray,
                   bandwidth: np.ndarray, whole: np.ndarray,
                   blocks: np.ndarray, schedules: np.ndarray,
                   measured: np.ndarray, profile_s: float,
                   pipelined_links: bool | np.ndarray | None = None,
                   meta: dict | None = None,
                   max_trials: int | None = None,
                   joint: bool = False) -> Profile:
  """The profile of these measurements: fusion factors from the whole
  program on each device (``whole [D]``; NaN, a failed run: 1x), then links,
  launches and copies fitted on the calibration runs (``blocks`` run in
  ``schedules``, ``measured [C]`` seconds); ``meta`` is kept as
  ``Profile.meta``; ``max_trials`` (None: the default) and ``joint`` go
  to :func:`calibrate_links`."""
  is_op = graph.kind == NODE_OP
  compute = compute_times(graph, op_time, dispatch)
  whole = np.where(np.isfinite(whole), whole, compute.sum(0))  # failed: 1x
  fusion = whole / np.maximum(compute.sum(0), 1e-12)
  costs = compute * fusion[None, :]
  d = len(dispatch)
  topology = measured_topology(base, dispatch, latency, bandwidth,
                                float(np.median(fusion)), pipelined_links)
  link_scale, link_scales = 1.0, np.ones((d, d))
  launch_scales, copy_scales = np.ones(d), np.zeros(d)
  if np.isfinite(measured).any():
    (topology, costs, link_scale, link_scales, launch_scales,
     copy_scales) = calibrate_links(
         graph, topology, costs, blocks, schedules, measured, joint=joint,
         **({} if max_trials is None else {"max_trials": max_trials}))
  return Profile(graph=graph, topology=topology, costs=costs,
                 op_time_s=np.where(is_op[:, None], op_time, 0.0),
                 dispatch_s=dispatch, fusion_factor=fusion,
                 whole_program_s=whole, transfer_latency_s=latency,
                 transfer_bandwidth=bandwidth, link_scale=link_scale,
                 link_scales=link_scales, launch_scales=launch_scales,
                 copy_scales=copy_scales,
                 calibration_placements=blocks if len(blocks) else None,
                 calibration_orders=schedules if len(blocks) else None,
                 calibration_s=measured if len(blocks) else None,
                 profile_s=profile_s, meta=dict(meta or {}))


def measured_topology(base: Topology, dispatch: np.ndarray,
                      latency: np.ndarray, bandwidth: np.ndarray,
                      time_scale: float,
                      pipelined_links: bool | np.ndarray | None = None
                      ) -> Topology:
  """``base`` (``local(devices)``) with measured dispatch overheads and
  links: a link costs the fitted copy latency, each cluster one dispatch of
  its device (``Device.cluster_launch_s``, before calibration scales it),
  and a copy no issue cost until calibration fits one. Links are
  pipelined as the executor's copies are (:func:`executor_pipelining`),
  unless ``pipelined_links`` says otherwise."""
  topo_devices = tuple(
      dataclasses.replace(dev, launch_overhead_s=float(dispatch[j]),
                          cluster_launch_s=float(dispatch[j]),
                          copy_issue_s=0.0)
      for j, dev in enumerate(base.devices))
  link_latency = np.array(latency, np.float64)
  np.fill_diagonal(link_latency, 0.0)
  return Topology(
      devices=topo_devices, link_bandwidth=bandwidth,
      link_latency=link_latency, compute_group=base.compute_group,
      name="local-calibrated", time_scale=time_scale, batched_inputs=True,
      pipelined_links=(executor_pipelining(topo_devices)
                       if pipelined_links is None else pipelined_links))


def executor_pipelining(devices: Sequence[Device],
                        overlapped_host_reads: bool = True) -> np.ndarray:
  """``[D, D]`` bool ``Topology.pipelined_links`` of the executor's copies
  between ``devices``.

  The executor issues a step's copies to one device in one
  ``jax.device_put``; into an accelerator (and between host devices) their
  latencies overlap. A value an accelerator computed reaches the CPU
  through the host: ``jax.device_put`` reads it back, one value after
  another, each its whole latency, unless they were started early: the
  executor starts those read-backs as soon as each value exists, all
  overlapping (:func:`gplace.execution.plan.defer_host_copies`), so every
  link is pipelined (``docs/design.md#running-a-placement``).

  Args:
    devices: the topology's devices (``Device.kind``).
    overlapped_host_reads: False for measurements of an older executor
      that did not start read-backs early (every link pipelined but those
      from an accelerator into a CPU).
  """
  into_cpu = np.array([dev.kind == "cpu" for dev in devices])
  if overlapped_host_reads:
    return np.ones((len(devices),) * 2, bool)
  from_accelerator = ~into_cpu
  return ~(from_accelerator[:, None] & into_cpu[None, :])


def refit_in_rounds(prof: Profile, rounds: np.ndarray, classes: Sequence[int],
                    pipelined_links: bool | np.ndarray | None = None
                    ) -> Profile:
  """``prof`` fitted again (:func:`refit`) on the fastest call of each of
  its calibration runs (:func:`calibration_runs`) over ``rounds [R, D + C]``
  seconds (NaN: failed).

  Devices that are timed alike (``classes [D]``,
  ``op_timing.timing_classes``: forced CPU devices) share the fastest of
  their single-device runs, as ``gplace.profile`` has them.
  ``pipelined_links``: as :func:`refit` takes it.
  """
  fastest = np.asarray(rounds, np.float64).min(axis=0)
  d = len(classes)
  classes = np.asarray(classes)
  whole = np.array([np.nanmin(fastest[:d][classes == classes[j]])
                    if np.isfinite(fastest[:d][classes == classes[j]]).any()
                    else np.nan for j in range(d)])
  return refit(prof, fastest[d:], whole, pipelined_links)
