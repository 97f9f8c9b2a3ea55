"""Does gplace.optimize return a placement that is faster for real, on this
machine, than one device?

Three programs written for the check (an MLP forward pass, a flax
Transformer LM train step with adamw, a small conv net forward pass) are
placed with ``gplace.optimize(fn, *args, topology="local", budget_s=...)``
on this machine's forced CPU devices; then the returned placement and
everything on one device are each measured ``--repeats`` times, interleaved,
and the ratio of their medians is printed with each one's spread. Run it
alone (the figures are wall-clock times):

  python experiments/local_check.py --devices 2 \
      --out experiments/results/local_check/devices_2
  python experiments/local_check.py --devices 4 \
      --out experiments/results/local_check/devices_4

``--devices`` sets ``--xla_force_host_platform_device_count`` before JAX
starts, so each device count is one process.
"""

import argparse
import os
import sys


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--devices", type=int, default=4,
                      help="forced CPU devices")
  parser.add_argument("--budget_s", type=float, default=30.0,
                      help="gplace.optimize's budget per program")
  parser.add_argument("--repeats", type=int, default=20,
                      help="timed calls of each placement, in 4 rounds")
  parser.add_argument("--programs", default="mlp,lm,convnet",
                      help="comma-separated: mlp, lm, convnet")
  parser.add_argument("--out", default="", help="a study folder")
  return parser.parse_args(argv)


ARGS = parse_args()
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           f" --xla_force_host_platform_device_count="
                           f"{ARGS.devices}")

# pylint: disable=g-import-not-at-top,wrong-import-position
import time
import warnings

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import gplace
from gplace import report


def mlp():
  """A 4-layer MLP forward pass, batch 512."""
  rng = np.random.default_rng(0)
  params = [jnp.asarray(rng.normal(size=(1024, 1024)) / 32, jnp.float32)
            for _ in range(4)]
  x = jnp.asarray(rng.normal(size=(512, 1024)), jnp.float32)

  def forward(params, x):
    for w in params:
      x = jax.nn.relu(x @ w)
    return x.mean()
  return forward, (params, x)


class _Block(nn.Module):
  width: int
  heads: int

  @nn.compact
  def __call__(self, x):
    y = nn.LayerNorm(name="ln1")(x)
    y = nn.SelfAttention(num_heads=self.heads, name="attn")(
        y, mask=nn.make_causal_mask(x[..., 0]))
    x = x + y
    y = nn.LayerNorm(name="ln2")(x)
    y = nn.Dense(4 * self.width, name="up")(y)
    return x + nn.Dense(self.width, name="down")(nn.gelu(y))


class _TinyLM(nn.Module):
  vocab: int = 512
  width: int = 128
  layers: int = 4
  heads: int = 4

  @nn.compact
  def __call__(self, tokens):
    x = nn.Embed(self.vocab, self.width, name="embed")(tokens)
    for i in range(self.layers):
      x = _Block(self.width, self.heads, name=f"block_{i}")(x)
    return nn.Dense(self.vocab, name="head")(nn.LayerNorm(name="ln")(x))


def lm():
  """A Transformer LM train step (4 blocks, width 128, adamw)."""
  model = _TinyLM()
  tokens = jnp.asarray(np.random.default_rng(0).integers(0, 512, (8, 64)))
  params = model.init(jax.random.PRNGKey(0), tokens)
  optimizer = optax.adamw(1e-3)
  opt_state = optimizer.init(params)

  def step(params, opt_state, tokens):
    def loss_fn(params):
      logits = model.apply(params, tokens[:, :-1])
      return optax.softmax_cross_entropy_with_integer_labels(
          logits, tokens[:, 1:]).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss
  return step, (params, opt_state, tokens)


class _ConvNet(nn.Module):
  @nn.compact
  def __call__(self, x):
    for i, features in enumerate((32, 64, 64, 128)):
      x = nn.relu(nn.Conv(features, (3, 3), name=f"conv_{i}")(x))
      if i % 2:
        x = nn.avg_pool(x, (2, 2), (2, 2))
    return nn.Dense(10, name="head")(x.mean(axis=(1, 2)))


def convnet():
  """A 4-layer conv net forward pass on 32 images of 64x64x3."""
  model = _ConvNet()
  images = jnp.asarray(np.random.default_rng(0).normal(size=(32, 64, 64, 3)),
                       jnp.float32)
  params = model.init(jax.random.PRNGKey(0), images)
  return (lambda params, images: model.apply(params, images).mean(),
          (params, images))


PROGRAMS = {"mlp": mlp, "lm": lm, "convnet": convnet}


def interleaved(placed: dict, args: tuple, repeats: int, rounds: int = 4
                ) -> dict:
  """``{name: [times]}``: each placed function timed ``repeats`` times in
  ``rounds`` interleaved rounds (after one untimed call each)."""
  for function in placed.values():
    jax.block_until_ready(function(*args))
  times = {name: [] for name in placed}
  per_round = max(1, repeats // rounds)
  for _ in range(rounds):
    for name, function in placed.items():
      for _ in range(per_round):
        start = time.perf_counter()
        jax.block_until_ready(function(*args))
        times[name].append(time.perf_counter() - start)
  return times


def check(name: str, budget_s: float, repeats: int) -> dict:
  fn, args = PROGRAMS[name]()
  graph = gplace.capture(fn, *args)
  start = time.perf_counter()
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    result = gplace.optimize(fn, *args, topology="local", budget_s=budget_s,
                             progress=False)
  optimize_s = time.perf_counter() - start
  single = gplace.place(fn, graph, np.zeros(graph.n_nodes, np.int32))
  times = interleaved({"optimize": result.place(fn), "single": single},
                      args, repeats)
  med = {k: float(np.median(v)) for k, v in times.items()}
  iqr = {k: float(np.subtract(*np.percentile(v, [75, 25])))
         for k, v in times.items()}
  used = len(np.unique(result.placement))
  row = dict(program=name, nodes=graph.n_nodes, devices_used=used,
             method=result.method, optimize_s=optimize_s,
             optimize_ms=med["optimize"] * 1e3,
             optimize_iqr_ms=iqr["optimize"] * 1e3,
             single_ms=med["single"] * 1e3, single_iqr_ms=iqr["single"] * 1e3,
             ratio=med["optimize"] / med["single"],
             no_slower=med["optimize"] <= med["single"] + max(
                 iqr["optimize"], iqr["single"]))
  print(f"{name}: {graph.n_nodes} ops, {result.method!r} on {used} "
        f"device(s): {row['optimize_ms']:.2f} ms (IQR "
        f"{row['optimize_iqr_ms']:.2f}) vs one device "
        f"{row['single_ms']:.2f} ms (IQR {row['single_iqr_ms']:.2f}): "
        f"ratio {row['ratio']:.3f}, optimize took {optimize_s:.0f} s",
        flush=True)
  return row


def main() -> None:
  print(f"{len(jax.devices())} devices {jax.devices()}, load average "
        f"{os.getloadavg()}", flush=True)
  rows = [check(name, ARGS.budget_s, ARGS.repeats)
          for name in ARGS.programs.split(",")]
  header = ["program", "ops", "devices", "returned placement", "used",
            "measured ms (IQR)", "one device ms (IQR)", "ratio",
            "no slower", "optimize s"]
  table = [[r["program"], str(r["nodes"]), str(ARGS.devices), r["method"],
            str(r["devices_used"]),
            f"{r['optimize_ms']:.2f} ({r['optimize_iqr_ms']:.2f})",
            f"{r['single_ms']:.2f} ({r['single_iqr_ms']:.2f})",
            f"{r['ratio']:.3f}", "yes" if r["no_slower"] else "NO",
            f"{r['optimize_s']:.0f}"] for r in rows]
  lines = [f"`gplace.optimize(fn, *args, topology='local', budget_s="
           f"{ARGS.budget_s:g})` on {ARGS.devices} forced CPU devices; the "
           f"returned placement and one device each timed {ARGS.repeats} "
           "times, interleaved (measured wall-clock medians).", "",
           "| " + " | ".join(header) + " |",
           "|" + "---|" * len(header)]
  lines += ["| " + " | ".join(row) + " |" for row in table]
  print("\n".join(lines))
  study = report.Study.create(ARGS.out, __file__)
  if study is not None:
    study.write(lines)
  if not all(r["no_slower"] for r in rows):
    sys.exit(1)


if __name__ == "__main__":
  main()
