#!/usr/bin/env bash
# The GPU checks, run through the device tool on a lent GPU machine (never in
# CI): one call, each step under its own time limit. The steps' logs and the
# studies' output folders (device_results/<step>: README.md with the command,
# date, machine and table, and the JSON figures) come back in $OUT/logs.tar
# (updated after every step: the device tool brings back at most 8 files),
# next to fidelity_data.tar.
#
#   1. the executor test matrix (outputs equal jax.jit(fn)) with every case
#      placed across CPU + GPU (GPLACE_TEST_ACCELERATOR=1);
#   1b. experiments/transfer_costs.py: what moving freshly computed values
#      between CPU and GPU costs per value, as the executor copies them now
#      (one device_put) and two other ways (device_get first; packed into
#      one buffer);
#   2. simulator speed on that machine's host CPU pinned to 2 cores (AVX-512
#      where the CPU has it), both schedule paths;
#   3. experiments/fidelity.py on CPU + GPU;
#   4. experiments/bench_train_step.py at 80k nodes on the GPU;
#   5. the slow rest of the executor matrix, as far as time allows;
#   6. experiments/cross_platform.py: jax.jit(fn) on the CPU against on the
#      GPU, no placement (the yardstick for the matrix's training steps);
#   7. simulator_gpu: the jitted simulator (both schedules) vmapped over
#      4096 placements on the GPU;
#   8. local: experiments/local_check.py on CPU + GPU: gplace.optimize(fn,
#      topology="local") on one CPU device and the GPU, its answer measured
#      against everything on the CPU and everything on the GPU;
#   9. sim_batch: the shared-order scan (gplace.simulate's static schedule)
#      over 16,384 placements in one batch on the GPU (on CPU such batches
#      run in blocks of gplace.sim.runner.MAX_SCAN_ROWS).
#
#   bash experiments/device_check.sh [STEPS]   # e.g. executor,fidelity
#
# The fidelity step takes FID_WORKLOADS, FID_SIZE, FID_PLACEMENTS,
# FID_SCHEDULES (default sim,static: the default schedule and node-id
# order, what runs before 2026-11-27 called sim), FID_CALIBRATION_ROUNDS,
# FID_EXTRA (more fidelity.py flags, e.g. --calibrate-in-rounds) and
# FID_LIMIT (seconds) from the environment.
#
# Carry .whl (jraph, ml_collections, pymetis, ortools, immutabledict: the
# packages the machine's image lacks; see /work/.library/device/README.md).
set -u
OUT=${OUT:-/tmp/device_check}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
# f32 matmuls at full precision on the GPU too (no TF32), as on the CPU.
export JAX_DEFAULT_MATMUL_PRECISION=highest
STEPS=${1:-executor,transfers,simulator,fidelity,train_step,executor_slow,cross_platform,local,sim_batch}
step() {  # step NAME SECONDS COMMAND...: run under a SIGINT time limit
  local name=$1 limit=$2; shift 2
  case ",$STEPS," in *",$name,"*) ;; *) return ;; esac
  echo "=== $name ($(date -u +%T), limit ${limit}s)"
  mkdir -p /tmp/device_logs
  timeout -s INT -k 10 "$limit" "$@" 2>&1 | tee "/tmp/device_logs/$name.log" \
    | tail -25
  echo "=== $name rc=${PIPESTATUS[0]} ($(date -u +%T))"
  mkdir -p /tmp/device_results
  tar -C /tmp -cf "$OUT/logs.tar" device_logs device_results
}
RESULTS=/tmp/device_results
nvidia-smi -L
lscpu | grep -E "Model name|^CPU\(s\)" ; grep -o -m1 "avx512[a-z]*" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
python3 -c "import jax; print('jax', jax.__version__, jax.devices(), jax.devices('cpu')[:2])"
MATRIX="tests/execution/test_executor.py -q -p no:cacheprovider -k matches_jit"
step executor 100 env GPLACE_TEST_ACCELERATOR=1 JAX_PLATFORMS=cuda,cpu \
  python3 -m pytest $MATRIX -n 8
step transfers 90 python3 experiments/transfer_costs.py --counts 1,8,32 \
  --out "$RESULTS/transfers"
step simulator 90 env JAX_PLATFORMS=cpu taskset -c 0,1 \
  python3 experiments/bench_simulator.py --sizes 10000 80000 --placements 256 \
  --repeats 5 --schedules static dynamic --out "$RESULTS/simulator"
step fidelity ${FID_LIMIT:-200} python3 experiments/fidelity.py \
  --workloads ${FID_WORKLOADS:-resnet50,bert} --size ${FID_SIZE:-tiny} \
  --placements ${FID_PLACEMENTS:-16} --rounds 2 --repeats 5 \
  --calibration-rounds ${FID_CALIBRATION_ROUNDS:-7} \
  --schedules ${FID_SCHEDULES:-sim,static} --cache /tmp/fcache \
  --dump /tmp/fdump --out "$RESULTS/fidelity" --verbose ${FID_EXTRA:-}
# The dumps and profiles in one file ($OUT brings back at most 8 files, and
# none whose name holds a '+', as the profiles' names do).
[ -d /tmp/fdump ] && tar -C /tmp -cf "$OUT/fidelity_data.tar" fdump fcache
step simulator_gpu ${SIMGPU_LIMIT:-90} python3 experiments/bench_simulator.py \
  --sizes 1000 10000 --placements 4096 --repeats 3 --schedules static dynamic \
  --reference-placements 1 --out "$RESULTS/simulator_gpu"
step train_step ${TRAIN_LIMIT:-80} python3 experiments/bench_train_step.py --sizes=80000
step executor_slow ${SLOW_LIMIT:-90} env GPLACE_TEST_ACCELERATOR=1 JAX_PLATFORMS=cuda,cpu \
  GPLACE_SLOW_TESTS=1 python3 -m pytest $MATRIX -n 12
step cross_platform 90 python3 experiments/cross_platform.py \
  --workloads resnet50,bert,inception_v3
step local ${LOCAL_LIMIT:-240} env JAX_PLATFORMS=cuda,cpu \
  python3 experiments/local_check.py --devices 1 \
  --budget_s ${LOCAL_BUDGET:-20} --repeats 20 --out "$RESULTS/local"
step sim_batch ${SIMBATCH_LIMIT:-90} python3 experiments/bench_simulator.py \
  --sizes 1000 10000 --placements 16384 --repeats 3 --schedules static \
  --reference-placements 1 --out "$RESULTS/sim_batch"
