#!/usr/bin/env bash
# --gpus on a one-GPU machine, in about 4 minutes: the same small slice of the quick
# preset run three ways into OUT_DIR (default $OUT, else gpus-targets/):
#   plain     python -m suite run ...
#   gpus0     ... --gpus 0        (one worker of --gpus on GPU 0)
#   gpus00    ... --gpus 0,0      (two workers sharing GPU 0)
# then prints whether the three sets of (workload, impl, dtype, shape, timer, status)
# are identical, which device_index each file records, and the wall time of each.
# The plain run goes first and pays the cold Triton and CUDA-extension caches, so
# the later runs' times are warm; two workers sharing one GPU contend for it, so
# their timings are for the machinery, not for the kernels.
#
#   scripts/gpus_targets.sh [OUT_DIR]
#   CPU=1 scripts/gpus_targets.sh /tmp/g   # the same flow on the CPU standing in for one GPU
set -uo pipefail
out=${1:-${OUT:-gpus-targets}}
mkdir -p "$out"
py=${PYTHON:-python3}
limit=${RUN_LIMIT:-150}   # seconds a run may take before it is stopped
what=(--preset quick --workloads "${WORKLOADS:-gelu,softmax}" --backends "${BACKENDS:-torch,triton,cuda}"
      --dtypes "${DTYPES:-bfloat16}" --seed 1 --reuse-ceilings --no-progress)
if [ "${CPU:-0}" = 1 ]; then
  export KSUITE_FAKE_GPUS=1
  what=(--device cpu --preset cpu --workloads gelu,softmax --backends eager,torch --dtypes float32
        --samples 3,5 --seed 1 --reuse-ceilings --no-progress)
fi
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

declare -A wall
for name in plain gpus0 gpus00; do
  case $name in
    plain) extra=() ;;
    gpus0) extra=(--gpus 0) ;;
    gpus00) extra=(--gpus 0,0) ;;
  esac
  stamp "run $name ${extra[*]}"
  s=$SECONDS
  timeout "$limit" $py -m suite run "${what[@]}" "${extra[@]}" --out "$out/$name.parquet" \
    >"$out/$name.stdout" 2>"$out/$name.stderr"
  code=$?
  wall[$name]=$((SECONDS - s))
  stamp "$name: exit $code, ${wall[$name]} s"
  [ $code -eq 0 ] || tail -5 "$out/$name.stderr"
done

WALL_PLAIN=${wall[plain]} WALL_GPUS0=${wall[gpus0]} WALL_GPUS00=${wall[gpus00]} $py - "$out" <<'PY' | tee "$out/summary.txt"
import os, sys
from pathlib import Path

from suite import store

out = Path(sys.argv[1])
key = ["workload", "impl", "dtype", "shape", "timer", "status"]
sets = {}
for name in ("plain", "gpus0", "gpus00"):
    path = out / f"{name}.parquet"
    if not path.exists():
        print(f"{name}: no file")
        continue
    df = store.read_file(path)
    sets[name] = set(map(tuple, df[key].astype(str).values.tolist()))
    idx = sorted(df["device_index"].dropna().astype(int).value_counts().items())
    ok = int((df["status"] == "ok").sum())
    print(f"{name}: {len(df)} rows ({ok} ok), {df['run_id'].nunique()} run id, device_index {idx}, "
          f"copy_gbps {sorted(df['copy_gbps'].dropna().round(0).unique().tolist())}, "
          f"wall {float(os.environ['WALL_' + name.upper()]):.1f} s")
base = sets.get("plain")
for name in ("gpus0", "gpus00"):
    if base is None or name not in sets:
        continue
    same = sets[name] == base
    print(f"{name} vs plain: row sets {'identical' if same else 'DIFFER'}")
    for row in sorted(base - sets[name])[:10]:
        print(f"  only in plain: {row}")
    for row in sorted(sets[name] - base)[:10]:
        print(f"  only in {name}: {row}")
PY
stamp "done"
