"""``python -m suite run``: cases x implementations -> checked, timed rows.

The sweep runs in a worker process (suite.worker).  A crash (segfault, a CUDA
error that poisons the context) or a hang past ``--timeout`` costs one row,
recorded as ``status=error`` with the reason, and a fresh worker carries on:
one long-lived worker per sweep keeps process start-up (torch import, CUDA
context, about 5 s) out of the common path, and a restart is paid only on a
crash.  The Parquet file is rewritten atomically after every case, so Ctrl-C
or a kill loses at most the case in flight, and ``--resume`` finishes it.
With ``--gpus`` there is one worker per listed GPU, each measuring the
ceilings of its own device, and the cases go to whichever is free, most
expensive first (suite.sweep); the rows still go into one file, each with the
``device_index`` it ran on.
"""
from __future__ import annotations

import argparse
import importlib.util
import secrets
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from suite.args import UsageError, choose, csv_list, writable_file
from suite.store import RUNS, RunFile, default_path
from suite.timing import L2_CHOICES, TIMERS, Protocol
from suite.workload import DTYPES, Case, Implementation, discover

PRESETS = ("cpu", "quick", "full", "llm", "fuzz")
GPU_PRESETS = ("quick", "full", "llm", "fuzz")
DEFAULT = Protocol()


def configure(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "Every output is checked against a float64 reference before it is timed, and\n"
        "what was timed is checked again; an implementation that fails is stored as\n"
        "'incorrect' (the column 'check' names the test), and a row timed faster than\n"
        "its roof allows as 'suspect'.\n"
        "Timers: 'events' (CUDA events, L2 evicted before each call), 'graph' (CUDA\n"
        "graph replays over rotating input sets larger than L2; l2=cold-rotate), 'wall'\n"
        "(host clock; l2=n/a on the CPU).  --l2-flush, how the events timer evicts L2\n"
        "before each sample, is stored as the rows' l2:\n"
        + "".join(f"  {name:11s} {text}\n" for name, text in L2_CHOICES.items()) + "\n"
        "examples:\n"
        "  python -m suite run                                  # quick preset on the GPU\n"
        "  python -m suite run --device cpu --preset cpu --out /tmp/cpu.parquet\n"
        "  python -m suite run --workloads NAME --backends torch,triton --dtypes bfloat16\n"
        "  python -m suite run --workloads NAME --shape M=3000,N=5000 --dtypes bfloat16\n"
        "  python -m suite run --shapes examples/shapes.toml  # shapes and dtypes from a TOML file\n"
        "  python -m suite run --preset llm                     # shapes of open LLMs' configs\n"
        "  python -m suite run --preset fuzz --seed 1           # 24 seeded random shapes per workload\n"
        "  python -m suite run --preset full --shard 2/4        # a quarter of the sweep\n"
        "  python -m suite run --gpus all                       # one worker per GPU of this host\n"
        "  python -m suite run --resume runs/h200/20261129T101500Z-abc1234.parquet")
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when a GPU is visible, else cpu")
    p.add_argument("--preset", choices=PRESETS,
                   help="shape preset: cpu (tiny, irregular), quick, full, llm (open models' shapes; GPU) or "
                        "fuzz (seeded random shapes of the sizes users run, drawn from --seed; GPU); "
                        "default quick on a GPU, cpu on the CPU, none when --shape or --shapes is given")
    p.add_argument("--shape", action="append", default=[], metavar="K=V,...",
                   help="a shape of your own, e.g. M=3000,N=5000 (repeatable; a boolean key such as causal takes 0/1): "
                        "for the --workloads given, else every workload whose keys are exactly these")
    p.add_argument("--shapes", type=Path, metavar="FILE",
                   help="a TOML file of shapes and dtypes per workload, lists swept as a product "
                        "(see examples/shapes.toml)")
    p.add_argument("--workloads", help="comma-separated workload names (default: all)")
    p.add_argument("--impls", help="comma-separated implementation names, e.g. torch,triton,compile:dynamic; "
                   "compile:max-autotune (15-60 s of autotuning per shape) runs only when named here")
    p.add_argument("--backends", help="comma-separated backends (eager, torch, compile, triton, cuda): all their variants")
    p.add_argument("--dtypes", help=f"comma-separated dtypes from {','.join(DTYPES)} "
                   "(default: all three; float32,bfloat16 for the quick preset)")
    p.add_argument("--timer", default=None,
                   help=f"comma-separated timers from {', '.join(TIMERS)} (default: events on a GPU, wall on the CPU)")
    p.add_argument("--out", type=Path, help="output Parquet file (default: runs/<gpu>/<UTC time>-<commit>.parquet)")
    p.add_argument("--resume", type=Path, metavar="FILE",
                   help="complete a partial run in FILE without redoing the cases it already holds, "
                        "with the options, seed and ceilings the file records")
    p.add_argument("--shard", metavar="K/N", help="run only the K-th of N deterministic slices of the cases "
                   "(1-based: 1/4 .. 4/4; `python -m suite shards FOLDER` checks a folder of them)")
    p.add_argument("--gpus", metavar="all|0,1,...",
                   help="one worker per listed GPU (an index listed twice: two workers sharing it), "
                        "cases handed to the next free one, most expensive first; each GPU's rows "
                        "keep its own ceilings and device_index")
    p.add_argument("--timeout", type=float, default=600.0,
                   help="seconds one implementation may take on one case, compilation included (default 600)")
    p.add_argument("--seed", type=int, help="base seed for the random inputs and the fuzz preset's shapes "
                   "(default: fresh each run; every row records it)")
    p.add_argument("--l2-flush", choices=tuple(L2_CHOICES), default=DEFAULT.l2,
                   help=f"how the events timer evicts L2 before each sample, stored as the rows' l2 "
                        f"(each choice is explained below; default {DEFAULT.l2})")
    p.add_argument("--samples", default=f"{DEFAULT.min_samples},{DEFAULT.max_samples}", metavar="MIN,MAX",
                   help=f"timed samples per measurement (default {DEFAULT.min_samples},{DEFAULT.max_samples})")
    p.add_argument("--budget-ms", type=float, default=DEFAULT.budget_ms,
                   help=f"target time spent in timed samples per measurement (default {DEFAULT.budget_ms:g})")
    p.add_argument("--settle-ms", type=float, default=DEFAULT.settle_ms, metavar="MS",
                   help="leave the GPU idle this long before each measurement, so that every case starts "
                        "its samples from the same power state, not from the heat of the case before "
                        "(for GPUs that run at their power limit; default 0)")
    p.add_argument("--repeat", action="store_true", help="time every implementation twice, to show run-to-run noise")
    p.add_argument("--reuse-ceilings", action="store_true", help="use this device's cached ceilings instead of measuring")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE|PATH",
                   help="import a module, or a .py file by path, that registers implementations "
                        "(examples/ has one); the workers import it too. Repeatable")
    p.add_argument("--profile", choices=("ncu",),
                   help="after timing, replay each timed row under Nsight Compute (GPU only) and store "
                        "its kernels, duration, DRAM/SM/tensor throughput, occupancy, registers, shared "
                        "and local memory, L2 hit rate as the ncu_* columns")
    p.add_argument("--profile-dir", type=Path, metavar="DIR",
                   help="where --profile ncu keeps each row's report and raw CSV "
                        "(default: a folder beside the output file, named after it with .ncu)")
    p.add_argument("--energy", action="store_true",
                   help="after timing, run each timed row back to back for about a second against NVML's "
                        "energy counter (it steps every 100 ms) and store energy_j, joules a call, and "
                        "GFLOP/J or GB/J (GPU only; adds ~1 s a row)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (plain log lines)")


@dataclass
class Plan:
    device: str
    preset: str | None  # None: only the user's shapes (--shape, --shapes) run
    timers: tuple[str, ...]
    cases: list[tuple[Case, list[Implementation]]]


def make_plan(args, registry) -> Plan:
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA GPU is visible; use --device cpu --preset cpu")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu" and getattr(args, "profile", None):
        raise UsageError(f"--profile {args.profile} profiles GPU kernels and this run is on the CPU")
    if device == "cpu" and getattr(args, "energy", False):
        raise UsageError("--energy reads a GPU's energy counter and this run is on the CPU")
    user_shapes = bool(args.shape or args.shapes)
    preset = args.preset or (None if user_shapes else "quick" if device == "cuda" else "cpu")
    if device == "cpu" and preset in GPU_PRESETS:
        raise UsageError(f"preset {preset!r} is sized for a GPU and this run is on the CPU; "
                         f"use --preset cpu (presets: {', '.join(PRESETS)})")
    timers = tuple(choose(csv_list(args.timer), list(TIMERS), "timer") or
                   (["events"] if device == "cuda" else ["wall"]))
    if device == "cpu" and set(timers) - {"wall"}:
        raise UsageError(f"timer {','.join(timers)} needs a GPU; on the CPU use --timer wall")
    names = sorted(registry.workloads)
    named = choose(csv_list(args.workloads), names, "workload")
    workloads = named or names
    dtypes = choose(csv_list(args.dtypes), list(DTYPES), "dtype")
    chosen = chosen_cases(args, registry, preset, named, workloads, dtypes, device)
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
        cases += [(case, impls) for case in chosen if case.workload == w]
    if args.shard:
        cases = shard(cases, args.shard)
    if not cases:
        raise UsageError("nothing to run: the filters leave no (case, implementation) pair")
    return Plan(device, preset, timers, cases)


def chosen_cases(args, registry, preset, named, workloads, dtypes, device) -> list[Case]:
    """The preset's cases, then those of --shape and --shapes (checked to fit
    in memory), each once, in that order."""
    from suite import shapes

    cases = [c for w in workloads if preset in registry.workloads[w].preset_names()
             for c in registry.workloads[w].cases(preset, dtypes, seed=args.seed)] if preset else []
    user = shapes.cli_cases(args.shape, registry.workloads, named, dtypes)
    if args.shapes:
        user += shapes.file_cases(args.shapes, registry.workloads, named, dtypes)
    shapes.check_fits(user, registry.workloads, device)
    once: dict = {}
    for case in cases + user:
        once.setdefault(case.key, case)
    return list(once.values())


def shard(items: list, spec: str) -> list:
    """The K-th of N round-robin slices (1-based): disjoint, and together everything."""
    try:
        k, n = (int(x) for x in spec.split("/"))
        assert 1 <= k <= n
    except (ValueError, AssertionError):
        raise UsageError(f"--shard {spec!r}: expected K/N with 1 <= K <= N, e.g. 2/4") from None
    return [item for i, item in enumerate(items) if i % n == k - 1]


def make_protocol(args) -> Protocol:
    """The run's timing protocol from --l2-flush, --samples, --budget-ms and --settle-ms."""
    try:
        lo, hi = (int(x) for x in args.samples.split(","))
    except ValueError:
        raise UsageError(f"--samples {args.samples!r}: expected MIN,MAX, e.g. 10,200") from None
    try:
        return Protocol(l2=args.l2_flush, min_samples=lo, max_samples=hi, budget_ms=args.budget_ms,
                        settle_ms=args.settle_ms)
    except ValueError as exc:
        settle = f" --settle-ms {args.settle_ms:g}" if args.settle_ms else ""
        raise UsageError(f"--samples {args.samples} --budget-ms {args.budget_ms:g}{settle}: {exc}") from None


CPU_NOTE = "CPU run: a smoke run, not scored on a roofline (its rows leave sol and bound_ms empty)"


def main(args) -> int:
    from suite import ceilings, environment, gpus, resume
    from suite.summary import print_summary
    from suite.sweep import Slot, Sweep, gpu_slots, start_builds

    run, recorded = None, False
    if args.resume:  # the file's options and ceilings, before anything else reads args
        if args.out is not None and Path(args.out).resolve() != Path(args.resume).resolve():
            raise UsageError(f"--resume {args.resume} writes the run back to that file; leave out "
                             f"--out {args.out} (or copy the file there first and resume the copy)")
        run = _open_resume(args.resume)
        recorded = resume.apply(args, run.rows, _defaults(), args.resume)
    protocol = make_protocol(args)  # checked before anything slow runs
    if args.profile_dir is not None and args.profile != "ncu":
        raise UsageError(f"--profile-dir {args.profile_dir}: only --profile ncu writes there; add "
                         f"--profile ncu or leave it out")
    if not args.timeout > 0:  # NaN too; inf is no limit
        raise UsageError(f"--timeout {args.timeout:g}: expected a positive number of seconds")
    if args.out is not None and run is None:
        writable_file(args.out)  # a bad path stops the run before any case, not at its first checkpoint
    if args.seed is not None and not 0 <= args.seed < 2**63:  # every row stores it as an int64
        raise UsageError(f"--seed {args.seed}: expected a whole number from 0 to {2**63 - 1}")
    # the seed before the plan: the fuzz preset's shapes are drawn from it
    args.seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    registry = discover(args.plugin)
    plan = make_plan(args, registry)
    refuse_unrunnable(plan)
    indices = gpus.parse(args.gpus, plan.device)

    env = environment.collect(plan.device)
    env["clocks_start"] = environment.clocks() if plan.device == "cuda" else {}
    print(f"device: {environment.describe(env)}", file=sys.stderr)
    if plan.device == "cpu":
        print(CPU_NOTE, file=sys.stderr)

    timestamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ceil = None
    if run is not None:
        run_id = str(run.rows[0]["run_id"]) if run.rows else secrets.token_hex(6)
        timestamp = str(run.rows[0]["timestamp"]) if run.rows else timestamp
        ceil = resume.ceilings(run.rows) if recorded else None
        if not recorded:
            print(f"note: {run.path} records no run options (written by an older runner): the "
                  f"command line's filters apply and the ceilings are measured again", file=sys.stderr)
        if ceil is not None and not indices and ceil.gpu_name != env["gpu_name"]:
            raise UsageError(f"--resume {run.path}: the run was measured on {ceil.gpu_name}, this "
                             f"machine has {env['gpu_name']}; finish it on the same device")
    else:
        out = args.out or default_path(RUNS, env["gpu_name"], timestamp, env["commit"])
        run = RunFile(out)
        run_id = secrets.token_hex(6)
    # what --resume reads back: the resolved device, preset, timers and seed
    args.device, args.preset, args.timer = plan.device, plan.preset, ",".join(plan.timers)

    # CUDA extensions build in the background from here on, through the
    # ceiling measurement and the cases that need no extension.
    builds = start_builds(plan.device, plan.cases)
    slots = None
    if indices:
        recorded_by = resume.ceilings_by_device(run.rows) if ceil is not None else {}
        slots = gpu_slots(indices, recorded_by)
        ceil = None
        print(f"{len(slots)} workers on GPU {','.join(map(str, indices))}: each measures (or with "
              f"--reuse-ceilings loads) the ceilings of its own GPU"
              + (f"; GPU {','.join(map(str, sorted(recorded_by)))} keep the run's own" if recorded_by else ""),
              file=sys.stderr)
    try:
        if ceil is not None:
            print(f"ceilings: the run's own, from {run.path} (measured {ceil.measured_at})", file=sys.stderr)
        elif not slots:
            print("measuring ceilings..." if not args.reuse_ceilings else "loading ceilings...",
                  file=sys.stderr)
            ceil = ceilings.get(plan.device, env["fingerprint"], env["gpu_name"], reuse=args.reuse_ceilings)
    except BaseException:
        if builds is not None:
            builds.close()
        raise
    if ceil is not None:
        print(f"ceilings: read {ceil.read_gbps:.0f}, write {ceil.write_gbps:.0f}, copy {ceil.copy_gbps:.0f}, "
              f"2:1 {ceil.mix21_gbps:.0f} GB/s; matmul "
              + ", ".join(f"{k} {v:.3g}" for k, v in ceil.matmul_tflops.items()) + " TFLOP/s", file=sys.stderr)
        slots = [Slot(index=gpus.plain_index(plan.device), ceil=ceil)]
    run.fields = {"run_args": resume.record(args)}  # each row's ceilings: those of its GPU (Sweep.stamp)

    profile_dir = None
    if args.profile == "ncu":
        from suite import ncu

        profile_dir = str(args.profile_dir or run.path.with_suffix(".ncu"))
        if ncu.find_ncu() is None:
            print(f"warning: --profile ncu: {ncu.missing_note()}; rows are timed without it",
                  file=sys.stderr)
        else:
            print(f"ncu reports and raw CSVs go to {profile_dir}", file=sys.stderr)
    sweep = Sweep(plan=plan, registry=registry, out=run, env=env, ceil=ceil, run_id=run_id,
                  timestamp=timestamp, seed=args.seed, timeout=args.timeout, plugins=tuple(args.plugin),
                  protocol=protocol,
                  repeat=args.repeat, shard=args.shard, progress=not args.no_progress,
                  builds=builds, slots=slots, reuse_ceilings=args.reuse_ceilings,
                  profile=args.profile, profile_dir=profile_dir, energy=args.energy)
    interrupted = sweep.run()
    print_summary(run.rows)
    print(f"wrote {len(run.rows)} rows to {run.path}", file=sys.stderr)
    if interrupted:
        print(f"interrupted: finish with --resume {run.path}", file=sys.stderr)
        return 130
    print(f"open it in the dashboard: {_python()} -m suite dashboard {run.path}", file=sys.stderr)
    if importlib.util.find_spec("streamlit") is None or importlib.util.find_spec("plotly") is None:
        print("(the dashboard needs streamlit and plotly: `make setup-dev` installs them)", file=sys.stderr)
    return 0


def _open_resume(path: Path) -> RunFile:
    from suite.store import StoreError

    if not path.exists():
        raise UsageError(f"--resume {path}: no such file")
    if path.is_dir():  # pandas reads a folder as one dataset, and a checkpoint cannot replace it
        raise UsageError(f"--resume {path}: a folder; name the run file to finish, e.g. {path / 'run.parquet'}")
    try:
        run = RunFile.resume(path)
    except StoreError as exc:
        raise UsageError(str(exc)) from None
    if not run.rows:  # a run is checkpointed only once a case is done: no row, no options to finish
        raise UsageError(f"--resume {path}: the file holds no rows, so there is nothing to resume; "
                         f"start a new run instead (--out {path} writes it there)")
    return run


def _defaults() -> dict:
    """Each run option's value when it is not given."""
    p = argparse.ArgumentParser()
    configure(p)
    return vars(p.parse_args([]))


def refuse_unrunnable(plan: Plan) -> None:
    """UsageError naming every selected implementation when none can run on this device."""
    reasons = {}
    for _, impls in plan.cases:
        for impl in impls:
            reasons.setdefault(impl.name, set()).add(impl.check_available(plan.device))
    if all(None not in why for why in reasons.values()):
        listed = "; ".join(f"{name}: {' / '.join(sorted(why))}" for name, why in sorted(reasons.items()))
        raise UsageError(f"nothing can run on {plan.device}: every selected implementation is "
                         f"unavailable ({listed})")


def _python() -> str:
    """This interpreter as a user would type it: .venv/bin/python under make, else its name."""
    exe = Path(sys.executable)
    try:
        return str(exe.relative_to(Path.cwd()))
    except ValueError:
        return exe.name
