#!/usr/bin/env bash
# The regression gate's targets (quick gemm and gelu, bf16), measured on one GPU in about 8 minutes:
#   A/A     `suite ab HEAD HEAD`: 0 regressions of our own implementations
#           (triton, here with torch as context), both sides the same code;
#   10%     a plugin kernel made 10% slower (tests/slow_impls.py, slow:10) is
#           flagged by `suite ab` and by `suite compare` on every case >= 50 us;
#   3%      one made 3% slower (slow:3) is flagged by `suite ab` on cases >= 200 us.
# Both slowdowns come twice: as a hold of the GPU (slow:10, slow:3) and as more of the
# op's own work (slow:work10, slow:work3), which a power-capped GPU cannot hide by
# raising its clock in the idle time (lab/findings/ab_power_cap-9af2779.txt).
# On the GPU every measurement waits 300 ms idle first (--settle-ms): without it an
# implementation late in a sweep starts its samples at whatever clock the cases
# before it left at the power cap, which moves from round to round by more than 3%.
# One A/B run serves all three: both sides are HEAD and carry the same
# implementations; only the candidate's runs have KSUITE_SLOW=1, which turns the
# slow:* plugins' slowdown on; each slowdown is calibrated once, in the candidate's
# warm-up round, and kept for the later rounds in a KSUITE_SLOW_CACHE file, which both
# sides see (so that neither times calibration bursts after the warm-up).  Then two
# plain runs (base, then candidate with KSUITE_SLOW=1) go through `suite compare`.
# The JSON reports, the runs and a summary land in OUT_DIR (default $OUT, else
# gate-targets/).
#
#   scripts/gate_targets.sh [OUT_DIR]        # on the GPU machine
#   CPU=1 ROUNDS=2 scripts/gate_targets.sh   # the same flow on the CPU (a dry run, noisy)
#
# `suite ab` needs git history; a copy of the tree without .git is made a
# one-commit repository first (with .git, HEAD is what is measured).
set -uo pipefail
out=${1:-${OUT:-gate-targets}}
mkdir -p "$out"
py=${PYTHON:-python3}
rounds=${ROUNDS:-5}
if [ "${CPU:-0}" = 1 ]; then
  device=(--device cpu)
  what=(--device cpu --preset cpu --workloads gemm --dtypes float32 --samples 5,30 --budget-ms 30)
else
  device=(--device cuda)
  what=(--preset quick --workloads gemm,gelu --dtypes bfloat16 --samples 10,60 --budget-ms 80 --settle-ms 300)
fi
impls=(--impls torch,triton,slow:10,slow:3,slow:work10,slow:work3 --plugin tests.slow_impls)
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }

have_git=1
if ! git rev-parse --verify -q HEAD >/dev/null 2>&1; then
  stamp "no git history here: committing a snapshot of the tree"
  { git init -q . && git add -A && git -c user.name=gate -c user.email=gate@localhost commit -qm snapshot; } \
    || { have_git=0; stamp "git unavailable: suite ab is skipped, suite compare still runs"; }
elif [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  stamp "note: uncommitted changes are not measured by suite ab (it checks out HEAD)"
fi
if [ "$have_git" = 1 ] && ! git cat-file -e HEAD:tests/slow_impls.py 2>/dev/null; then
  stamp "HEAD has no tests/slow_impls.py: suite ab is skipped (it measures HEAD)"
  have_git=0
fi

stamp "ceilings (measured once, cached for the runs below)"
$py -m suite ceilings --cached "${device[@]}" >/dev/null 2>&1 || echo "ceilings exit $?"

if [ "$have_git" = 1 ]; then
  stamp "suite ab HEAD HEAD, $rounds rounds, slow:* slowed on the candidate only"
  KSUITE_SLOW_CACHE="$(cd "$out" && pwd)/slow-calibration.json" \
    $py -m suite ab HEAD HEAD --rounds "$rounds" --seed 11 --out "$out/ab" --format json \
    --cand-env KSUITE_SLOW=1 "${what[@]}" "${impls[@]}" > "$out/ab.json"
  echo "ab exit $?"
fi

stamp "two runs for suite compare: base, then the candidate with KSUITE_SLOW=1"
$py -m suite run "${what[@]}" "${impls[@]}" --seed 21 --reuse-ceilings --no-progress \
  --out "$out/base.parquet" > "$out/base.log" 2>&1 || echo "base run exit $?"
KSUITE_SLOW=1 $py -m suite run "${what[@]}" "${impls[@]}" --seed 22 --reuse-ceilings --no-progress \
  --out "$out/cand.parquet" > "$out/cand.log" 2>&1 || echo "candidate run exit $?"
$py -m suite compare "$out/base.parquet" "$out/cand.parquet" --format json > "$out/compare.json"
echo "compare exit $?"
stamp "done"

$py - "$out" <<'EOF' | tee "$out/summary.txt"
import json, sys
from pathlib import Path

out = Path(sys.argv[1])


def rows(name):
    p = out / name
    if not p.exists() or not p.read_text().strip():
        print(f"{name}: no report")
        return []
    return [r for c in json.loads(p.read_text())["comparisons"] for r in c["rows"]]


def target(label, rows, impl, min_ms, want):
    mine = [r for r in rows if r["impl"] == impl and r["base_ms"] and r["base_ms"] >= min_ms]
    hit = [r for r in mine if (r["verdict"] == "slower") == want]
    ok = bool(mine) and len(hit) == len(mine)
    print(f"{'PASS' if ok else 'FAIL'}  {label}: {len(hit)}/{len(mine)} cases")
    return ok


for name in ("ab.json", "compare.json"):
    rs = rows(name)
    print(f"\n{name}")
    for r in sorted(rs, key=lambda r: (r["impl"], r["base_ms"] or 0)):
        ci = r.get("ci")
        fast = r.get("fast_ci")
        judged = (f"CI {1 / ci[1]:.3f}-{1 / ci[0]:.3f}" + (f", p10 {1 / fast[1]:.3f}-{1 / fast[0]:.3f}" if fast else "")
                  if ci else (f"band +-{r['band']:.1%}" if r["band"] is not None else ""))
        ratio = f"{r['ratio']:.4f}" if r["ratio"] else "-"
        base = f"{r['base_ms']:.4f}" if r["base_ms"] else "-"
        print(f"  {r['impl']:8s} {r['shape']:20s} base {base:>8s} ms  time x{ratio:7s} {judged:44s} "
              f"{r['verdict']}{' REGRESSION' if r['regression'] else ''}")
    if not rs:
        continue
    own = [r for r in rs if r["impl"] == "triton" and r["regression"]]
    print(f"{'PASS' if not own else 'FAIL'}  A/A: {len(own)} regression(s) of triton "
          f"({sum(r['impl'] == 'triton' for r in rs)} cases)")
    for kind, tag in (("slow:", "hold"), ("slow:work", "more work")):
        target(f"10% ({tag}) caught on cases >= 50 us", rs, f"{kind}10", 0.05, True)
        if name == "ab.json":
            target(f"3% ({tag}) caught on cases >= 200 us", rs, f"{kind}3", 0.2, True)
EOF
