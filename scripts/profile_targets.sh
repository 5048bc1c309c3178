#!/usr/bin/env bash
# Nsight Compute against the suite's timer, on one GPU in about 8 minutes:
# the quick preset's largest shape of each workload (by the workload's size),
# one implementation per backend (eager, torch, compile, triton, cuda), in
# bfloat16 (DTYPES=float32,bfloat16 for both; about twice as long), timed and
# then replayed under ncu (`run --profile ncu`).  Prints one line per row:
# workload, impl, ms_median, ncu_ms, ncu_ratio, DRAM %, SM %, tensor %, and
# flags every row of at least 100 us whose ncu duration is more than 3% off
# the median.  The run, each row's ncu report and raw CSV (OUT_DIR/ncu/) and
# the log land in OUT_DIR (default $OUT, else profile-targets/).
#
#   scripts/profile_targets.sh [OUT_DIR]     # on the GPU machine
set -uo pipefail
out=${1:-${OUT:-profile-targets}}
mkdir -p "$out"
py=${PYTHON:-python3}
dtypes=${DTYPES:-bfloat16}
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

# the largest quick shape of every workload, as a shapes file
$py - "$out/largest.toml" <<'EOF' || { echo "could not list the quick shapes"; exit 2; }
import sys
from suite.workload import discover

lines = []
for name, wl in sorted(discover().workloads.items()):
    cases = wl.cases("quick")
    if not cases:
        continue
    big = max(cases, key=wl.size)
    lines += [f"[{name}]"] + [f"{k} = {v}" for k, v in big.shape] + [""]
open(sys.argv[1], "w").write("\n".join(lines))
EOF
stamp "shapes: $(grep -c '^\[' "$out/largest.toml") workloads, $out/largest.toml"

stamp "run --profile ncu (dtypes $dtypes)"
$py -m suite run --shapes "$out/largest.toml" --dtypes "$dtypes" \
  --impls eager,torch,compile,triton,cuda --samples 10,50 --budget-ms 80 --seed 5 --no-progress \
  --profile ncu --energy --profile-dir "$out/ncu" --out "$out/profile.parquet" > "$out/run.log" 2>&1
echo "run exit $? (log: $out/run.log)"
grep -m3 -E "warning: .*ncu|ERR_NVGPUCTRPERM" "$out/run.log"

$py - "$out/profile.parquet" <<'EOF'
import math
import sys

import pandas as pd

df = pd.read_parquet(sys.argv[1]).sort_values(["workload", "ms_median"])
cols = ["workload", "impl", "dtype", "status", "ms_median", "ncu_ms", "ncu_ratio", "ncu_dram_pct",
        "ncu_sm_pct", "ncu_tensor_pct", "ncu_kernels", "energy_j"]
with pd.option_context("display.width", 200, "display.max_rows", 200, "display.float_format", "{:.4g}".format):
    print(df[[c for c in cols if c in df.columns]].to_string(index=False))
timed = df[df["status"].isin(["ok", "suspect"])]
long = timed[timed["ms_median"] >= 0.1]
off = long[(long["ncu_ratio"] - 1).abs() > 0.03]
missing = long[long["ncu_ratio"].isna()]
print(f"\n{len(long)} timed rows of >= 100 us; ncu within 3% of the median on "
      f"{len(long) - len(off) - len(missing)}, off by more on {len(off)}, no ncu figure on {len(missing)}")
for _, r in pd.concat([off, missing]).iterrows():
    why = r["ncu_error"] if isinstance(r.get("ncu_error"), str) else f"ratio {r['ncu_ratio']:.3f}"
    print(f"  {r['workload']} {r['impl']} {r['dtype']}: {r['ms_median']:.4g} ms, {why}")
EOF
stamp "done"
