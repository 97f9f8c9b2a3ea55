"""Real-executor rewards: placements run and timed on the local JAX devices.

Sampling and the update stay jitted; each step measures the K sampled
placements with gplace.execution (host side) in between.

It needs several local devices: on one, every placement is the same
placement and the measured "runtimes" rank timing noise (gplace warns, see
``gplace.execution.inputs.check_several_devices``). On a CPU-only machine,
force several host devices before JAX starts:

  XLA_FLAGS=--xla_force_host_platform_device_count=4 \
  python experiments/run.py --config experiments/configs/executor.py \
      --workdir /tmp/gplace_executor

On a machine with several GPUs, drop ``XLA_FLAGS``: the placement then
indexes the CPU and every GPU (``gplace.execution.default_devices``).
"""

from experiments.configs import quickstart


def get_config():
  config = quickstart.get_config()
  config.topology = "local"
  config.rl.reward = "executor"
  config.rl.num_samples = 4
  config.rl.loss = "reinforce"
  config.warm_start.steps = 50
  config.train.num_steps = 20
  config.train.chunk_steps = 5
  config.train.checkpoint_every = 10
  config.executor.repeats = 3
  config.executor.warmup = 1
  return config
