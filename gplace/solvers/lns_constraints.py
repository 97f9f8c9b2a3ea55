"""The constraints of one LNS window's CP-SAT model
(:func:`gplace.solvers.lns_model.solve_window`): the freed ops' devices,
data edges and transfers on links, and the memory conditions.

Every builder takes the shared problem data (``static``, a
:class:`~gplace.solvers.lns_model.Static`), the incumbent around the window
(``ctx``, a :class:`~gplace.solvers.lns_model.Context`) and the model's
variables: ``on`` (``{node: {device: literal}}`` of the freed ops),
``devices`` (``{node: [devices]}`` of the span's ops), ``start`` and
``end`` (``{node: IntVar}`` of the span's executed ops).
"""

from __future__ import annotations

import numpy as np


def window_devices(static, ctx, freed, v) -> list:
  """Devices ``v`` may take: its own unless freed, else its allowed ones;
  a co-location class with a member outside the window keeps its device."""
  if not freed[v]:
    return [int(ctx.placement[v])]
  label = static.colocation[v]
  if label >= 0:
    members = np.flatnonzero(static.colocation == label)
    if not np.all((ctx.position[members] >= ctx.lo)
                  & (ctx.position[members] <= ctx.hi)) or not np.all(
                      np.isin(members, ctx.free)):
      return [int(ctx.placement[v])]
  return np.flatnonzero(static.allowed[v]).tolist()


def tie_colocated(model, static, span, on) -> None:
  """Freed members of one co-location class share a device."""
  first = {}
  for v in span.tolist():
    label = static.colocation[v]
    if label < 0 or v not in on:
      continue
    if label not in first:
      first[label] = v
      continue
    for d, literal in on[v].items():
      model.add(literal == on[first[label]][d])


def add_edges(model, static, ctx, v, on, devices, start, end, choose,
               objective) -> None:
  """``v``'s in-edges (if it runs) and its out-edges that leave the span."""
  lo, hi = ctx.lo, ctx.hi
  for u in static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]].tolist():
    if v not in start:
      break                          # inputs are resident whatever feeds them
    inside = ctx.position[u] >= lo
    base = (end[u] if inside and u in end else
            int(ctx.finish[u]) if static.executed[u] else 0)
    if inside and static.executed[u]:
      model.add(start[v] >= base)
    if u in on and v in on:          # both free: one link per device pair
      for d in on[v]:
        others = [s for s in on[u] if s != d]
        if not others:
          continue
        least = min(int(static.transfer[u, s, d]) for s in others)
        if least > 0:
          model.add(start[v] >= base + least).only_enforce_if(
              [on[v][d], on[u][d].negated()] if d in on[u] else [on[v][d]])
        for s in others:
          if static.transfer[u, s, d] > least:
            model.add(start[v] >= base + int(static.transfer[u, s, d])
                      ).only_enforce_if([on[u][s], on[v][d]])
    elif u in on:                    # u free, v fixed
      model.add(start[v] >= base + choose(
          u, static.transfer[u, :, devices[v][0]]))
    else:                            # u fixed
      src = devices[u][0] if u in devices else int(ctx.placement[u])
      model.add(start[v] >= base + choose(v, static.transfer[u, src]))
  succ = static.succ[static.succ_ptr[v]:static.succ_ptr[v + 1]]
  succ = succ[(ctx.position[succ] > hi) & static.executed[succ]]
  if succ.size:                      # per source device, the worst consumer
    reach = (static.transfer[v][:, ctx.placement[succ]]
             + ctx.tail[succ][None, :]).max(1)
    base = end[v] if v in end else 0
    model.add(objective >= base + choose(v, reach))


def add_memory(model, static, ctx, span, freed, on, devices) -> None:
  """The two necessary memory conditions of :mod:`gplace.solvers.model`,
  for the span's ops, the rest at their devices."""
  d_count = static.capacity_kib.size
  moving = [v for v in span.tolist() if v in on]
  if not moving:
    return
  fixed_nodes = ~freed
  live = np.bincount(ctx.placement[fixed_nodes & static.ends_live],
                     static.out_kib[fixed_nodes & static.ends_live],
                     d_count).astype(np.int64)
  resident = np.bincount(ctx.placement[fixed_nodes & static.is_input],
                         static.out_kib[fixed_nodes & static.is_input],
                         d_count).astype(np.int64)
  free_live = [v for v in moving if static.ends_live[v]]
  free_inputs = [v for v in moving if static.is_input[v]]
  for d in range(d_count):
    cap = int(static.capacity_kib[d])
    most = int(live[d]) + sum(int(static.out_kib[v]) for v in free_live)
    if most > cap:
      model.add(int(live[d]) + sum(int(static.out_kib[v]) * on[v][d]
                                   for v in free_live if d in on[v]) <= cap)
  for v in span[static.executed[span]].tolist():
    preds = static.pred[static.pred_ptr[v]:static.pred_ptr[v + 1]]
    params = preds[static.is_input[preds]]
    ops = preds[~static.is_input[preds]]
    fixed = int(static.out_kib[v]) + int(np.minimum(
        static.out_kib[ops], static.send_kib[ops]).sum())
    for d in (list(on[v]) if v in on else devices[v]):
      cap = int(static.capacity_kib[d])
      most = (int(resident[d]) + fixed + sum(int(static.out_kib[u])
                                             for u in free_inputs)
              + int(static.send_kib[params].sum()))
      if most <= cap:
        continue
      terms = [int(static.out_kib[u]) * on[u][d] for u in free_inputs
               if d in on[u] and static.out_kib[u]]
      remote = []
      for u in params.tolist():
        if u in on and d in on[u]:
          remote.append(int(static.send_kib[u]) * (1 - on[u][d]))
        elif (u in on) or ctx.placement[u] != d:
          remote.append(int(static.send_kib[u]))
      condition = model.add(int(resident[d]) + sum(terms) + fixed
                            + sum(remote) <= cap)
      if v in on:
        condition.only_enforce_if(on[v][d])


def add_links(model, static, ctx, span, on, devices, start, end, objective,
               horizon) -> dict:
  """Transfers out of the span's ops as optional intervals, one at a time
  per link (in any order); their consumers wait for them.

  Returns:
    ``{(u, d): (send_start, {s: used literal or True})}``.
  """
  sends, links = {}, {}
  d_count = static.duration.shape[1]
  hi, tail = ctx.hi, ctx.tail
  for u in span.tolist():
    succ = static.succ[static.succ_ptr[u]:static.succ_ptr[u + 1]]
    succ = succ[static.executed[succ]]
    if not succ.size:
      continue
    # Per consumer: its device when fixed (else None), and what waits for
    # the transfer (its start inside the span, else the objective less its
    # tail).
    fixed_on = [None if w in on else
                (devices[w][0] if w in devices else p)
                for w, p in zip(succ.tolist(),
                                ctx.placement[succ].tolist())]
    targets = [start[w] if q <= hi else objective - t
               for w, q, t in zip(succ.tolist(),
                                  ctx.position[succ].tolist(),
                                  tail[succ].tolist())]
    succ = succ.tolist()
    sources = list(on[u]) if u in on else devices[u]
    base = end[u] if u in end else 0
    transfer = static.transfer[u].tolist()
    for d in range(d_count):
      if all(s == d for s in sources):
        continue
      needs, always = [], False      # consumer literals on d
      for w, fixed in zip(succ, fixed_on):
        if fixed is None:
          if d in on[w]:
            needs.append(on[w][d])
        elif fixed == d:
          always = True
      if not needs and not always:
        continue
      begin = model.new_int_var(0, horizon, "")
      model.add(begin >= base)
      used = {}
      for s in sources:
        if s == d:
          continue
        if always:
          literal = on[u][s] if u in on else True
        else:
          literal = model.new_bool_var("")
          if u in on:
            model.add_implication(literal, on[u][s])
          model.add_bool_or([literal.negated()] + needs)
          for need in needs:
            model.add_bool_or([need.negated(), literal] + (
                [on[u][s].negated()] if u in on else []))
        used[s] = literal
        size = transfer[s][d]
        links.setdefault((s, d), []).append(
            model.new_fixed_size_interval_var(begin, size, "")
            if literal is True else
            model.new_optional_fixed_size_interval_var(begin, size, literal,
                                                       ""))
        for w, fixed, target in zip(succ, fixed_on, targets):
          guard = [] if u not in on else [on[u][s]]
          if fixed is None:
            if d not in on[w]:
              continue
            guard.append(on[w][d])
          elif fixed != d:
            continue
          constraint = model.add(target >= begin + size)
          if guard:
            constraint.only_enforce_if(guard)
      sends[(u, d)] = (begin, used)
  for intervals in links.values():
    if len(intervals) > 1:
      model.add_no_overlap(intervals)
  return sends
