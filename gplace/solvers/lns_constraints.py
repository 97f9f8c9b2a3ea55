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


def live_kib(static, placement: np.ndarray,
             position: np.ndarray) -> np.ndarray:
  """``[D, N]`` int64 KiB live on each device at each position, in the
  simulator's memory model (``gplace.sim.dispatch.peak_by_position``): a
  node's own copy from its position to its last consumer on its device
  (inputs throughout, outputs to the end), a received copy from the
  producer's position to its last consumer there."""
  n, d = placement.size, static.capacity_kib.size
  src, dst = static.succ_src, static.succ
  last = np.full(n * d, -1, np.int64)
  np.maximum.at(last, src * d + placement[dst], position[dst])
  last = last.reshape(n, d)
  nodes = np.arange(n)
  own_first = np.where(static.is_input, 0, position)
  own_last = np.where(static.ends_live, n - 1,
                      np.maximum(position, last[nodes, placement]))
  remote = last >= 0
  remote[nodes, placement] = False
  r, c = np.nonzero(remote)
  width = n + 1
  index = np.concatenate([placement * width + own_first,
                          placement * width + own_last + 1,
                          c * width + position[r],
                          c * width + last[r, c] + 1])
  delta = np.concatenate([static.out_kib, -static.out_kib,
                          static.send_kib[r], -static.send_kib[r]])
  live = np.bincount(index, delta.astype(np.float64), d * width)
  return np.rint(live.reshape(d, width).cumsum(1)[:, :n]).astype(np.int64)


def add_memory_outside(model, static, ctx, on) -> None:
  """Memory at the positions outside the span (with ``ctx.live``): what
  the freed ops' devices add there to the incumbent's live bytes must fit.

  Two kinds of copies outlive the span: inputs' and outputs' own copies
  (resident throughout, or to the end), and copies of values made before
  the span that a freed op reads on its new device (live from the
  producer, or from its last reader there before the span, up to the
  span). At each such copy's first position, the copies it adds that are
  live by then, less those the window removes, fit in the least headroom
  from there to the span. Copies made inside the span and read after it
  exist whatever the window decides (only their size may change).
  """
  live = ctx.live
  if live is None or not on:
    return
  lo, hi = ctx.lo, ctx.hi
  after = live[:, hi + 1:].max(1, initial=0)
  outside = np.maximum(live[:, :lo].max(1, initial=0), after)
  for d in range(static.capacity_kib.size):
    cap = int(static.capacity_kib[d])
    inputs, outputs = [], []       # own copies: throughout, to the end
    most = np.zeros(2, np.int64)
    for v, literals in on.items():
      if static.ends_live[v] and d in literals and static.out_kib[v]:
        kib, kind = int(static.out_kib[v]), int(not static.is_input[v])
        terms = outputs if kind else inputs
        if ctx.placement[v] == d:
          terms.append(-kib * (1 - literals[d]))
        else:
          terms.append(kib * literals[d])
          most[kind] += kib
    if most[0] > cap - int(outside[d]):
      model.add(sum(inputs) <= cap - int(outside[d]))
    if most.sum() > cap - int(after[d]):
      model.add(sum(inputs) + sum(outputs) <= cap - int(after[d]))
    if lo:
      _add_read_copies(model, static, ctx, on, d, cap)


def _add_read_copies(model, static, ctx, on, d: int, cap: int) -> None:
  """:func:`add_memory_outside`'s copies on device ``d`` of values made
  before the span and read by freed ops."""
  lo = ctx.lo
  readers = {}                    # value -> freed readers that may take d
  for w, literals in on.items():
    if d in literals:
      for u in static.pred[static.pred_ptr[w]:static.pred_ptr[w + 1]]:
        if ctx.position[u] < lo:
          readers.setdefault(int(u), []).append(w)
  added, removed, most = [], [], 0
  for u, choices in readers.items():
    home = int(ctx.placement[u])
    if static.is_input[u] and home == d:
      continue                    # resident anyway
    kib = int(static.out_kib[u] if home == d else static.send_kib[u])
    succ = static.succ[static.succ_ptr[u]:static.succ_ptr[u + 1]]
    there = ctx.placement[succ] == d
    at = ctx.position[succ]
    before = at[there & (at < lo)]
    kept = there & (at >= lo) & ~np.isin(succ, choices)
    if not kib or kept.any():
      continue                    # the copy reaches the span whatever
    first = max(int(ctx.position[u]) + (home == d),
                int(before.max(initial=-1)) + 1)
    if first >= lo:
      continue
    literals = [on[w][d] for w in choices]
    if any(ctx.placement[w] == d for w in choices):  # the incumbent's
      gone = model.new_bool_var("")
      model.add_hint(gone, False)   # as in the incumbent
      for literal in literals:
        model.add_implication(literal, gone.negated())
      removed.append(kib * gone)
    else:
      made = literals[0]
      if len(literals) > 1:
        made = model.new_bool_var("")
        model.add_hint(made, False)
        for literal in literals:
          model.add_implication(literal, made)
      added.append((first, kib, made))
      most += kib
  if not added:
    return
  peak = np.maximum.accumulate(ctx.live[d, :lo][::-1])[::-1]
  if most <= cap - int(peak[min(f for f, _, _ in added)]):
    return
  added.sort(key=lambda item: item[0])
  so_far, terms = 0, []
  for first, kib, made in added:
    so_far += kib
    terms.append(kib * made)
    room = cap - int(peak[first])
    if so_far > room:
      model.add(sum(terms) - sum(removed) <= room)


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
