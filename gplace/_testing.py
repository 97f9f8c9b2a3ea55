"""Small programs for tests and examples (control flow, nesting, custom rules).

Public so that tests of every module, notebooks and users' own tests can share
them; nothing here is used by the library itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


@jax.custom_vjp
def _clipped_sin(x):
  return jnp.sin(x)


_clipped_sin.defvjp(lambda x: (jnp.sin(x), x),
                    lambda x, g: (jnp.clip(g * jnp.cos(x), -1.0, 1.0),))


def control_flow_program(params, x):
  """Uses nested jit, custom_jvp (relu), custom_vjp, remat, scan, while, cond.

  Args:
    params: ``{"w": [d, d], "b": [d]}``.
    x: ``[batch, d]``.

  Returns:
    ``{"y": [batch, d], "total": []}``.
  """

  @jax.jit
  def layer(h):
    return jax.nn.relu(h @ params["w"] + params["b"])

  h = jax.checkpoint(layer)(x)
  h = _clipped_sin(h)

  def body(carry, row):
    carry = jnp.tanh(carry + row)
    return carry, carry.sum()

  carry, sums = jax.lax.scan(body, jnp.zeros(h.shape[1]), h)
  h = jax.lax.cond(sums.sum() > 0, lambda a: a * 2.0, lambda a: a - 1.0, h)
  h = jax.lax.fori_loop(0, 3, lambda i, a: a * 0.5 + carry, h)
  count = jax.lax.while_loop(lambda c: c[0] < 5,
                             lambda c: (c[0] + 1, c[1] * 1.5),
                             (0, jnp.float32(1.0)))[1]
  return {"y": h * count, "total": jnp.sum(h)}


def control_flow_args(d: int = 8, batch: int = 4, seed: int = 0):
  """Example arguments of :func:`control_flow_program`."""
  k1, k2, k3 = jax.random.split(jax.random.key(seed), 3)
  params = {"w": jax.random.normal(k1, (d, d)) / d**0.5,
            "b": jax.random.normal(k2, (d,)) * 0.1}
  return params, jax.random.normal(k3, (batch, d))
