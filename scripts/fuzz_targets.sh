#!/usr/bin/env bash
# The fuzz preset at two seeds on one GPU: every backend but eager (the targets
# compare ours with torch, torch.compile and cuBLAS/SDPA), float32 and bfloat16,
# then each run's robustness summary (geometric mean and worst of SOL, or of
# the speed against the reference backend, per implementation and dtype).
# Runs and logs land in OUT_DIR (default $OUT, else fuzz-targets/).
#
#   scripts/fuzz_targets.sh [OUT_DIR]                       # seeds 1 and 2, every workload
#   SEEDS=1 WORKLOADS=gemm,attention scripts/fuzz_targets.sh  # a slice, to fit a time limit
#   DTYPES=float16 SEEDS="1 2" scripts/fuzz_targets.sh        # fp16 where the kernels take it
#
# Time: the quick preset (26 shapes x 2 dtypes, every backend) takes about
# 330 s on an H200; fuzz draws 120 shapes, smaller on average, so one seed of
# everything is about 10-15 min even with eager left out and the shorter
# sampling below.  Two seeds need about four slices of the default 10-minute
# limit, e.g. each seed once with WORKLOADS=gemm,attention and once with the
# three memory-bound workloads.
set -uo pipefail
out=${1:-${OUT:-fuzz-targets}}
mkdir -p "$out"
py=${PYTHON:-python3}
seeds=${SEEDS:-1 2}
dtypes=${DTYPES:-float32,bfloat16}
backends=${BACKENDS:-torch,compile,triton,cuda}
workloads=${WORKLOADS:+--workloads $WORKLOADS}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

stamp "ceilings (measured once, cached for the runs below)"
$py -m suite ceilings --cached --device cuda >/dev/null 2>&1 || echo "ceilings exit $?"
for seed in $seeds; do
  stamp "suite run --preset fuzz --seed $seed ($dtypes; $backends; ${WORKLOADS:-every workload})"
  # shellcheck disable=SC2086
  $py -m suite run --device cuda --preset fuzz --seed "$seed" --dtypes "$dtypes" --backends "$backends" \
    $workloads --samples 5,40 --budget-ms 60 --reuse-ceilings --no-progress \
    --out "$out/fuzz-seed$seed.parquet" > "$out/fuzz-seed$seed.log" 2>&1 || echo "run seed $seed exit $?"
done
stamp "done"
for seed in $seeds; do
  f="$out/fuzz-seed$seed.parquet"
  [ -f "$f" ] || { echo "seed $seed: no run"; continue; }
  $py -m suite show "$f" --robustness | tee "$out/robustness-seed$seed.txt"
done
