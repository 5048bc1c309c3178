"""How far do unchanged kernels move between committed runs, and how often does
`suite compare` call that a change?  (Reads results/; no GPU.)

    python3 -m lab.gate_noise [--dir results/h200]

The rows of torch (ATen, cuBLAS, SDPA) and torch.compile are the same code in
every run of one torch version, so their changes between runs of a case (same
workload, dtype, shape, timer and L2 mode) are the between-run spread that the
gate's band has to hold.  Printed: that spread per kernel time, as the RMS and
as a robust (median absolute deviation) estimate of one run's sigma; then, for
each pair of runs sharing at least 10 such cases, `suite compare --gate all`
run on the pair, and the context cases it calls faster or slower.
"""
from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BINS_US = (0, 10, 20, 30, 60, 100, 300, 1e9)
CONTROL = ("torch", "compile")
KEY = ["workload", "impl", "dtype", "shape", "timer", "l2"]


def _rows(folder: Path):
    import pandas as pd

    frames = []
    for f in sorted(folder.glob("*.parquet")):
        d = pd.read_parquet(f, columns=KEY + ["status", "ms_median", "run_id", "timestamp"])
        frames.append(d.assign(file=f.name))
    d = pd.concat(frames)
    return d[(d.status == "ok") & d.impl.isin(CONTROL)]


def spread_by_time(d):
    """One run's sigma of log time, per bin of kernel time, from consecutive runs of each case."""
    import numpy as np
    import pandas as pd

    diffs = []
    for _, x in d.groupby(KEY):
        x = x.drop_duplicates("run_id").sort_values("timestamp")
        logs = np.log(x.ms_median.to_numpy())
        us = float(x.ms_median.median()) * 1e3
        diffs += [(us, b - a) for a, b in zip(logs, logs[1:])]
    t = pd.DataFrame(diffs, columns=["us", "d"])
    t["bin"] = pd.cut(t.us, list(BINS_US))
    mad = lambda s: 1.4826 * float(np.median(np.abs(s - np.median(s)))) / 2 ** 0.5  # noqa: E731
    rms = lambda s: float(np.sqrt((s ** 2).mean() / 2))  # noqa: E731
    big = lambda s: int((s.abs() > 0.0853).sum())  # noqa: E731  (outside the default band, +-8.9%)
    return t.groupby("bin", observed=True).d.agg(pairs="size", sigma_rms=rms, sigma_robust=mad, beyond_band=big)


def compare_pairs(d, folder: Path):
    """`suite compare` on each pair of files sharing >= 10 control cases: the verdicts of those cases."""
    shared = {f: set(map(tuple, x[KEY].drop_duplicates().to_numpy())) for f, x in d.groupby("file")}
    out = []
    for a, b in itertools.combinations(sorted(shared), 2):
        if len(shared[a] & shared[b]) < 10:
            continue
        proc = subprocess.run([sys.executable, "-m", "suite", "compare", str(folder / a), str(folder / b),
                               "--gate", "all", "--format", "json"], capture_output=True, text=True, cwd=ROOT)
        rows = [r for c in json.loads(proc.stdout)["comparisons"] for r in c["rows"]
                if r["impl"] in CONTROL and r["ratio"] is not None]
        moved = [r for r in rows if r["verdict"] in ("faster", "slower")]
        out.append((a, b, len(rows), moved))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=ROOT / "results" / "h200")
    args = ap.parse_args(argv)
    d = _rows(args.dir)
    print("one run's sigma of log time for unchanged code (torch, compile), by kernel time (us)")
    print(spread_by_time(d).round(4).to_string())
    print("\nsuite compare --gate all on each pair of runs: control cases called faster or slower")
    total = flagged = 0
    for a, b, n, moved in compare_pairs(d, args.dir):
        total, flagged = total + n, flagged + len(moved)
        print(f"{a} vs {b}: {len(moved)} of {n}")
        for r in sorted(moved, key=lambda r: r["base_ms"]):
            print(f"   {r['base_ms'] * 1e3:7.1f} us x{r['ratio']:.3f} band +-{r['band']:.1%} {r['verdict']:6s} "
                  f"{r['workload']} {r['impl']} {r['dtype']} {r['shape']}")
    print(f"\nin all: {flagged} of {total} unchanged cases called a change")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
