"""The graphs of the optimality benchmark (issue 45,
``experiments/optimality.py``): each a graph, its devices and costs.

Three classes, each a fixed list of seeded, deterministic instances
(:func:`specs`), built on demand:

* ``"memory"``: inference steps of the zoo on 1 CPU + k accelerators
  (k = 2, 4) of different speeds, each accelerator holding 50-80% of the
  model's weights, so the model must be split.
* ``"homogeneous"``: a transformer block, a transformer layer's train step,
  a feed-forward net's train step and matmul chains, 100-400 ops, on 4 and
  8 H100-like GPUs.
* ``"paper"``: the zoo's paper-size train steps on ``1cpu+4gpu`` (big;
  minutes to capture).

Host-side: capture, numpy.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, NamedTuple, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from gplace.errors import WorkloadError
from gplace.graphs.capture import capture
from gplace.graphs.graph import Graph, NODE_INPUT
from gplace.sim.presets import preset
from gplace.sim.topology import Topology
from gplace.workloads.common import BatchField, WorkloadSpec, make_step
from gplace.workloads.loader import load

#: The classes, in the order :func:`specs` lists them.
CLASSES = ("memory", "homogeneous", "paper")
#: What ``experiments/optimality.py`` runs unless told otherwise.
DEFAULT_CLASSES = ("memory", "homogeneous")

#: Class "memory": (zoo workload, size) of the inference steps, smallest
#: first, each on 1 CPU + k accelerators for k in ACCELERATORS.
MEMORY_WORKLOADS = (("bert", "tiny"), ("resnet50", "tiny"),
                    ("gnmt2", "small"))
ACCELERATORS = (2, 4)
#: Each accelerator holds this share of the weights, drawn per device.
MEMORY_SHARE = (0.5, 0.8)
#: Each accelerator is this many times slower than the fastest (drawn).
SLOWDOWN = (1.0, 3.0)
#: The CPU runs every op this many times slower than the fastest
#: accelerator.
CPU_SLOWDOWN = 4.0

#: Class "homogeneous": GPU counts.
GPU_COUNTS = (4, 8)
#: Class "paper": the zoo's paper-size train steps, on this preset.
PAPER_WORKLOADS = ("rnnlm2", "wavenet2", "transformer_xl4", "gnmt4", "bert",
                   "resnet50", "inception_v3")
PAPER_TOPOLOGY = "1cpu+4gpu"


class Instance(NamedTuple):
  """One benchmark problem.

  Attributes:
    benchmark_class: one of :data:`CLASSES`.
    name: e.g. ``"bert tiny infer, 1cpu+2acc"``.
    graph: the op graph (``N`` nodes).
    topology: the devices (``D``).
    costs: ``[N, D]`` float64 seconds per node and device, or None (the
      topology's roofline).
    devices: the devices in words (speeds, memory caps).
  """

  benchmark_class: str
  name: str
  graph: Graph
  topology: Topology
  costs: Optional[np.ndarray]
  devices: str


class InstanceSpec(NamedTuple):
  """An instance before it is built: ``build()`` captures the graph."""

  benchmark_class: str
  name: str
  build: Callable[[], Instance]


# -- class "memory" -----------------------------------------------------------


def weight_bytes(graph: Graph) -> float:
  """Bytes of the model's weights: the graph inputs named ``.../params/...``
  (flax variables), or all graph inputs when none is so named."""
  inputs = graph.kind == NODE_INPUT
  params = inputs & np.array(["/params/" in str(n) for n in graph.names],
                             bool)
  return float(graph.out_bytes[params if params.any() else inputs].sum())


def memory_capped(graph: Graph, n_accelerators: int, seed: int
                  ) -> tuple[Topology, np.ndarray, str]:
  """``(topology, costs [N, D], description)``: ``graph`` on one CPU and
  ``n_accelerators`` accelerators (the ``1cpu+kgpu`` preset's links).

  Costs: the preset GPU's roofline seconds of each op, times each
  accelerator's slowdown (1 for the first, the rest drawn from
  :data:`SLOWDOWN`, sorted), and :data:`CPU_SLOWDOWN` on the CPU. Each
  accelerator's memory is a share of :func:`weight_bytes` drawn from
  :data:`MEMORY_SHARE`; the CPU keeps the preset's 128 GiB.
  """
  rng = np.random.default_rng(seed)
  base = preset(f"1cpu+{n_accelerators}gpu")
  slowdown = np.concatenate(
      [[1.0], np.sort(rng.uniform(*SLOWDOWN, n_accelerators - 1))])
  share = rng.uniform(*MEMORY_SHARE, n_accelerators)
  weights = weight_bytes(graph)
  devices = [base.devices[0]] + [
      dataclasses.replace(device, name=f"acc:{i}",
                          memory_bytes=float(share[i] * weights))
      for i, device in enumerate(base.devices[1:])]
  topology = base.replace(devices=tuple(devices),
                          name=f"1cpu+{n_accelerators}acc")
  gpu_s = base.op_costs(graph)[:, 1]
  costs = np.stack([gpu_s * CPU_SLOWDOWN] + [gpu_s * s for s in slowdown],
                   axis=1)
  description = (f"cpu (x{CPU_SLOWDOWN:g}) + {n_accelerators} acc: slowdown "
                 + "/".join(f"{s:.2f}" for s in slowdown)
                 + ", memory " + "/".join(f"{s:.2f}" for s in share)
                 + f" of weights ({weights / 1e6:.3g} MB)")
  return topology, costs, description


def _memory_instance(name: str, size: str, n_accelerators: int, seed: int,
                     cache_dir: Optional[str]) -> Instance:
  graph = load(name, size, "infer", cache_dir=cache_dir).graph
  topology, costs, description = memory_capped(graph, n_accelerators, seed)
  return Instance("memory", f"{name} {size} infer, {topology.name}", graph,
                  topology, costs, description)


def memory_specs(cache_dir: Optional[str] = None) -> list[InstanceSpec]:
  """Class ``"memory"``, smallest first; instance ``i`` draws with seed
  ``i``."""
  out = []
  for name, size in MEMORY_WORKLOADS:
    for k in ACCELERATORS:
      seed = len(out)
      out.append(InstanceSpec(
          "memory", f"{name} {size} infer, 1cpu+{k}acc",
          lambda name=name, size=size, k=k, seed=seed: _memory_instance(
              name, size, k, seed, cache_dir)))
  return out


# -- class "homogeneous" -------------------------------------------------------

# Sizes: matmuls of tens of microseconds on an H100 (200 TFLOP/s), and
# activations whose transfer (450 GB/s) takes about as long: where to cut
# matters.
TOKENS = (8, 512)             # batch, sequence
D_MODEL = 1024
HEADS = 16
D_FF = 4096


class Block(nn.Module):
  """A pre-norm transformer block: ``[B, T, D] -> [B, T, D]``."""
  heads: int
  d_ff: int

  @nn.compact
  def __call__(self, x):
    dim = x.shape[-1]
    h = nn.LayerNorm(name="ln_attention")(x)
    split = lambda y: y.reshape(y.shape[:-1] + (self.heads, -1))
    q = split(nn.Dense(dim, name="query")(h))
    k = split(nn.Dense(dim, name="key")(h))
    v = split(nn.Dense(dim, name="value")(h))
    scores = jnp.einsum("bthd,bshd->bhts", q, k) / np.sqrt(q.shape[-1])
    context = jnp.einsum("bhts,bshd->bthd", jax.nn.softmax(scores, -1), v)
    x = x + nn.Dense(dim, name="output")(context.reshape(x.shape))
    h = nn.LayerNorm(name="ln_mlp")(x)
    h = nn.Dense(dim, name="mlp_out")(nn.gelu(nn.Dense(self.d_ff,
                                                       name="mlp_in")(h)))
    return x + h


class Stack(nn.Module):
  """``n_blocks`` :class:`Block` s."""
  n_blocks: int
  heads: int
  d_ff: int

  @nn.compact
  def __call__(self, x):
    for i in range(self.n_blocks):
      x = Block(self.heads, self.d_ff, name=f"block_{i}")(x)
    return x


class FeedForwardNet(nn.Module):
  """``n_layers`` dense layers with ReLU: ``[B, D] -> [B, D]``."""
  n_layers: int
  width: int

  @nn.compact
  def __call__(self, x):
    for i in range(self.n_layers):
      x = nn.relu(nn.Dense(self.width, name=f"dense_{i}")(x))
    return x


def _mean_square(outputs, batch):
  del batch
  return jnp.mean(jnp.square(outputs))


def _spec(model: nn.Module, shape: tuple[int, ...]) -> WorkloadSpec:
  return WorkloadSpec(model=model, batch={"x": BatchField(shape)},
                      model_inputs=lambda batch: (batch["x"],),
                      loss=_mean_square, optimizer=optax.sgd(1e-3))


def _captured(spec: WorkloadSpec, step: str, name: str) -> Graph:
  fn, args = make_step(spec, step, abstract=True)
  return capture(fn, *args, name=name)


def matmul_chains(n_chains: int = 4, length: int = 24,
                  dim: int = 2048) -> Graph:
  """``n_chains`` independent chains of ``length`` ``[dim, dim]`` matmuls
  (each followed by tanh, each weight its own input) from one input,
  summed: parallel work that pays only where a chain's activations cross a
  link seldom."""
  x = jax.ShapeDtypeStruct((dim, dim), jnp.float32)
  weights = [[jax.ShapeDtypeStruct((dim, dim), jnp.float32)
              for _ in range(length)] for _ in range(n_chains)]

  def chains(x, weights):
    total = 0.0
    for chain in weights:
      y = x
      for w in chain:
        y = jnp.tanh(y @ w)
      total = total + y
    return total

  return capture(chains, x, weights, name="matmul_chains")


def homogeneous_graphs() -> list[tuple[str, Callable[[], Graph]]]:
  """``(name, build)`` of the class's graphs, smallest first."""
  tokens = (*TOKENS, D_MODEL)
  return [
      ("transformer 2 blocks forward", lambda: _captured(
          _spec(Stack(2, HEADS, D_FF), tokens), "infer",
          "transformer_block")),
      ("matmul chains 4x24", matmul_chains),
      ("feed-forward train step", lambda: _captured(
          _spec(FeedForwardNet(8, D_FF), (TOKENS[0] * TOKENS[1], D_FF)),
          "train", "feed_forward")),
      ("transformer layer train step", lambda: _captured(
          _spec(Stack(1, HEADS, D_FF), tokens), "train",
          "transformer_layer")),
  ]


def gpus(n_gpus: int) -> Topology:
  """``n_gpus`` of the ``8xh100`` preset's GPUs and links."""
  base = preset("8xh100")
  if not 1 <= n_gpus <= base.n_devices:
    raise WorkloadError(f"gpus: n_gpus must be 1..{base.n_devices}, got "
                        f"{n_gpus!r}.")
  return base.replace(devices=base.devices[:n_gpus],
                      link_bandwidth=base.link_bandwidth[:n_gpus, :n_gpus],
                      link_latency=base.link_latency[:n_gpus, :n_gpus],
                      compute_group=base.compute_group[:n_gpus],
                      name=f"{n_gpus}xh100")


def homogeneous_specs() -> list[InstanceSpec]:
  """Class ``"homogeneous"``: each graph on each of :data:`GPU_COUNTS`."""
  out = []
  for label, build in homogeneous_graphs():
    for n in GPU_COUNTS:
      def instance(label=label, build=build, n=n):
        topology = gpus(n)
        return Instance("homogeneous", f"{label}, {topology.name}", build(),
                        topology, None, f"{n} x H100 (roofline), 80 GB each")
      out.append(InstanceSpec("homogeneous", f"{label}, {n}xh100", instance))
  return out


# -- class "paper" -------------------------------------------------------------


def paper_specs(cache_dir: Optional[str] = None) -> list[InstanceSpec]:
  """Class ``"paper"``: the zoo's paper-size train steps on
  :data:`PAPER_TOPOLOGY` (roofline costs)."""
  def instance(name):
    graph = load(name, "paper", "train", cache_dir=cache_dir).graph
    return Instance("paper", f"{name} paper train, {PAPER_TOPOLOGY}", graph,
                    preset(PAPER_TOPOLOGY), None,
                    f"{PAPER_TOPOLOGY} preset (roofline)")
  return [InstanceSpec("paper", f"{name} paper train, {PAPER_TOPOLOGY}",
                       lambda name=name: instance(name))
          for name in PAPER_WORKLOADS]


def specs(classes: Sequence[str] = DEFAULT_CLASSES,
          cache_dir: Optional[str] = None) -> list[InstanceSpec]:
  """The instances of ``classes`` (names of :data:`CLASSES`), class by
  class; zoo graphs are read from / written to ``cache_dir`` if given.

  Raises:
    WorkloadError: an unknown class.
  """
  unknown = [c for c in classes if c not in CLASSES]
  if unknown:
    raise WorkloadError(f"Unknown benchmark class(es) {unknown}; choose from "
                        f"{', '.join(CLASSES)}.")
  makers = {"memory": lambda: memory_specs(cache_dir),
            "homogeneous": homogeneous_specs,
            "paper": lambda: paper_specs(cache_dir)}
  return [spec for c in classes for spec in makers[c]()]


def select(graphs: str, classes: str,
           cache_dir: Optional[str] = None) -> list[InstanceSpec]:
  """The instances of ``classes`` (comma-separated names of
  :data:`CLASSES`) whose name contains one of ``graphs``' ``|``-separated
  strings, e.g. ``select("bert|resnet50", "paper")``.

  Raises:
    WorkloadError: an unknown class, or no instance matches.
  """
  wanted = [w for w in graphs.split("|") if w]
  chosen = [spec for spec in specs([c for c in classes.split(",") if c],
                                   cache_dir=cache_dir)
            if any(w in spec.name for w in wanted)]
  if not chosen:
    raise WorkloadError(f"graphs {graphs!r} names no graph of classes "
                        f"{classes!r}; see gplace.workloads.benchmark.")
  return chosen
