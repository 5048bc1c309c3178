"""``python -m suite run``: cases x implementations -> checked, timed rows.

The sweep runs in a worker process (suite.worker).  A crash (segfault, a CUDA
error that poisons the context) or a hang past ``--timeout`` costs one row,
recorded as ``status=error`` with the reason, and a fresh worker carries on:
one long-lived worker per sweep keeps process start-up (torch import, CUDA
context, about 5 s) out of the common path, and a restart is paid only on a
crash.  The Parquet file is rewritten atomically after every case, so Ctrl-C
or a kill loses at most the case in flight, and ``--resume`` finishes it.
"""
from __future__ import annotations

import argparse
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from suite.cli import UsageError, choose, csv_list
from suite.store import RunFile, default_path
from suite.timing import TIMERS
from suite.workload import DTYPES, Case, Implementation, discover

PRESETS = ("cpu", "quick", "full")
GPU_PRESETS = ("quick", "full")


def configure(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "Every output is checked against a float64 reference before it is timed, and\n"
        "what was timed is checked again; an implementation that fails is stored as\n"
        "'incorrect' (the column 'check' names the test), and a row timed faster than\n"
        "its roof allows as 'suspect'.\n"
        "Timers: 'events' (CUDA events, L2 evicted before each call), 'graph' (CUDA\n"
        "graph replays over rotating input sets larger than L2), 'wall' (CPU).\n\n"
        "examples:\n"
        "  python -m suite run                                  # quick preset on the GPU\n"
        "  python -m suite run --device cpu --preset cpu --out /tmp/cpu.parquet\n"
        "  python -m suite run --workloads softmax --backends torch,triton --dtypes bfloat16\n"
        "  python -m suite run --preset full --shard 2/4        # a quarter of the sweep\n"
        "  python -m suite run --resume results/h200/20261129T101500Z-abc1234.parquet")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when a GPU is visible, else cpu")
    p.add_argument("--preset", choices=PRESETS,
                   help="shape preset: cpu (tiny, irregular), quick or full (GPU); default quick on a GPU, cpu on the CPU")
    p.add_argument("--workloads", help="comma-separated workload names (default: all)")
    p.add_argument("--impls", help="comma-separated implementation names, e.g. torch,triton,compile:dynamic; "
                   "compile:max-autotune (15-60 s of autotuning per shape) runs only when named here")
    p.add_argument("--backends", help="comma-separated backends (eager, torch, compile, triton, cuda): all their variants")
    p.add_argument("--dtypes", help=f"comma-separated dtypes from {','.join(DTYPES)} "
                   "(default: all three; float32,bfloat16 for the quick preset)")
    p.add_argument("--timer", default=None,
                   help=f"comma-separated timers from {', '.join(TIMERS)} (default: events on a GPU, wall on the CPU)")
    p.add_argument("--out", type=Path, help="output Parquet file (default: results/<gpu>/<UTC time>-<commit>.parquet)")
    p.add_argument("--resume", type=Path, metavar="FILE",
                   help="complete a partial run in FILE without redoing the cases it already holds")
    p.add_argument("--shard", metavar="K/N", help="run only the K-th of N deterministic slices of the cases")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds one implementation may take on one case, compilation included (default 600)")
    p.add_argument("--seed", type=int, help="base seed for the random inputs (default: fresh each run)")
    p.add_argument("--l2-flush", choices=("clean", "write"), default="clean",
                   help="how the events timer evicts L2 before each sample: 'clean' reads a buffer of 4 L2s "
                        "(l2=cold-clean); 'write' fills one (l2=cold-flush, the suite's protocol before "
                        "cold-clean), which leaves dirty lines whose write-back the timed call pays for "
                        "(default clean)")
    p.add_argument("--samples", default="10,100", metavar="MIN,MAX", help="timed samples per measurement (default 10,100)")
    p.add_argument("--budget-ms", type=float, default=150.0,
                   help="target time spent in timed samples per measurement (default 150)")
    p.add_argument("--repeat", action="store_true", help="time every implementation twice, to show run-to-run noise")
    p.add_argument("--reuse-ceilings", action="store_true", help="use this device's cached ceilings instead of measuring")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                   help="import MODULE in the workers too (registers extra implementations)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (plain log lines)")


@dataclass
class Plan:
    device: str
    preset: str
    timers: tuple[str, ...]
    cases: list[tuple[Case, list[Implementation]]]


def make_plan(args, registry) -> Plan:
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA GPU is visible; use --device cpu --preset cpu")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    preset = args.preset or ("quick" if device == "cuda" else "cpu")
    if device == "cpu" and preset in GPU_PRESETS:
        raise UsageError(f"preset {preset!r} is sized for a GPU and this run is on the CPU; "
                         f"use --preset cpu (presets: {', '.join(PRESETS)})")
    timers = tuple(choose(csv_list(args.timer), list(TIMERS), "timer") or
                   (["events"] if device == "cuda" else ["wall"]))
    if device == "cpu" and set(timers) - {"wall"}:
        raise UsageError(f"timer {','.join(timers)} needs a GPU; on the CPU use --timer wall")
    names = sorted(registry.workloads)
    workloads = choose(csv_list(args.workloads), names, "workload") or names
    dtypes = choose(csv_list(args.dtypes), list(DTYPES), "dtype")
    all_impls = sorted({name for (_, name) in registry.impls})
    impl_filter = choose(csv_list(args.impls), all_impls, "implementation")
    backends = sorted({i.backend for i in registry.impls.values()})
    backend_filter = choose(csv_list(args.backends), backends, "backend")

    cases = []
    for w in workloads:
        impls = [i for i in registry.for_workload(w)
                 if (i.name in impl_filter if impl_filter else i.in_default_sweep)
                 and (backend_filter is None or i.backend in backend_filter)]
        if not impls:
            continue
        for case in registry.workloads[w].cases(preset, dtypes):
            cases.append((case, impls))
    if args.shard:
        cases = shard(cases, args.shard)
    if not cases:
        raise UsageError("nothing to run: the filters leave no (case, implementation) pair")
    return Plan(device, preset, timers, cases)


def shard(items: list, spec: str) -> list:
    """The K-th of N round-robin slices (1-based): disjoint, and together everything."""
    try:
        k, n = (int(x) for x in spec.split("/"))
        assert 1 <= k <= n
    except (ValueError, AssertionError):
        raise UsageError(f"--shard {spec!r}: expected K/N with 1 <= K <= N, e.g. 2/4") from None
    return [item for i, item in enumerate(items) if i % n == k - 1]


def main(args) -> int:
    from suite import ceilings, environment
    from suite.summary import print_summary
    from suite.sweep import Sweep, start_builds

    registry = discover(args.plugin)
    plan = make_plan(args, registry)
    try:
        lo, hi = (int(x) for x in args.samples.split(","))
    except ValueError:
        raise UsageError(f"--samples {args.samples!r}: expected MIN,MAX, e.g. 10,200") from None

    env = environment.collect(plan.device)
    env["clocks_start"] = environment.clocks() if plan.device == "cuda" else {}
    print(f"device: {environment.describe(env)}", file=sys.stderr)

    timestamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if args.resume:
        if not args.resume.exists():
            raise UsageError(f"--resume {args.resume}: no such file")
        from suite.store import StoreError

        try:
            run = RunFile.resume(args.resume)
        except StoreError as exc:
            raise UsageError(str(exc)) from None
        run_id = str(run.rows[0]["run_id"]) if run.rows else secrets.token_hex(6)
        timestamp = str(run.rows[0]["timestamp"]) if run.rows else timestamp
    else:
        out = args.out or default_path("results", env["gpu_name"], timestamp, env["commit"])
        run = RunFile(out)
        run_id = secrets.token_hex(6)

    # CUDA extensions build in the background from here on, through the
    # ceiling measurement and the cases that need no extension.
    builds = start_builds(plan.device, plan.cases)
    try:
        print("measuring ceilings..." if not args.reuse_ceilings else "loading ceilings...",
              file=sys.stderr)
        ceil = ceilings.get(plan.device, env["fingerprint"], env["gpu_name"], reuse=args.reuse_ceilings)
    except BaseException:
        if builds is not None:
            builds.close()
        raise
    print(f"ceilings: read {ceil.read_gbps:.0f}, write {ceil.write_gbps:.0f}, copy {ceil.copy_gbps:.0f}, "
          f"2:1 {ceil.mix21_gbps:.0f} GB/s; matmul "
          + ", ".join(f"{k} {v:.1f}" for k, v in ceil.matmul_tflops.items()) + " TFLOP/s", file=sys.stderr)

    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    sweep = Sweep(plan=plan, registry=registry, out=run, env=env, ceil=ceil, run_id=run_id,
                  timestamp=timestamp, seed=seed, timeout=args.timeout, plugins=tuple(args.plugin),
                  limits={"min_samples": lo, "max_samples": hi, "budget_ms": args.budget_ms,
                          "flush": args.l2_flush},
                  repeat=args.repeat, shard=args.shard, progress=not args.no_progress,
                  builds=builds)
    interrupted = sweep.run()
    print(f"wrote {len(run.rows)} rows to {run.path}", file=sys.stderr)
    print_summary(run.rows)
    if interrupted:
        print(f"interrupted: finish with --resume {run.path}", file=sys.stderr)
        return 130
    return 0



