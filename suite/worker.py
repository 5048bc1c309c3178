"""The process that runs cases, so that a crash costs only itself.

A worker starts by answering ``("ready", info)``: ``info`` is empty, or for a
worker of ``--gpus`` its own device and the ceilings it measured (or loaded)
for it.  The parent (suite.sweep) then sends one case at a time with the
implementations still to do; the worker answers, per implementation, ``("start", name)`` then
``("row", row)`` for each timer.  After an error that leaves the CUDA context
unusable (an illegal address, a device-side assert) the worker reports it and
exits, and the parent starts a fresh one for the rest of the sweep.  Segfaults
and hangs are the parent's to notice (the pipe closes, or a timeout passes).
"""
from __future__ import annotations

import gc
import math
import os
import signal
import time
import traceback
import zlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from suite import clocks, energy, roofline, verify
from suite.store import SCHEMA_VERSION
from suite.timing import Protocol, l2_bytes, measure, rotation_sets, settle, use_protocol
from suite.workload import Case, Implementation, Workload, discover, impl_source, itemsize, torch_dtype

# Messages after which the CUDA context cannot be trusted any more.
FATAL_MARKERS = ("illegal memory access", "device-side assert", "unspecified launch failure",
                 "misaligned address", "illegal instruction", "an illegal", "cudaErrorLaunchFailure",
                 "CUDA error: unknown error", "uncorrectable ECC")


@dataclass
class Options:
    device: str
    timers: tuple[str, ...]
    preset: str
    seed: int
    peaks_gbps: float  # the copy bandwidth
    peaks_tflops: dict[str, float]
    plugins: tuple[str, ...] = ()
    protocol: Protocol = field(default_factory=Protocol)
    repeat: bool = False  # time every implementation a second time (noise check)
    # read fraction of the traffic -> measured GB/s (Ceilings.bandwidths); empty: copy only
    bandwidths: dict[float, float] = field(default_factory=dict)
    # score rows on the roofline; None: on a GPU only (a CPU run is a smoke run)
    roofline: bool | None = None
    profile: str | None = None  # "ncu": replay each timed row under Nsight Compute (suite.ncu)
    profile_dir: str | None = None  # where the ncu reports and raw CSVs go
    energy: bool = False  # joules a call over a burst against NVML's energy counter (suite.energy)
    # a worker of --gpus: the CUDA_VISIBLE_DEVICES it sets before touching CUDA,
    # and, with describe, its device reported at start (name, SMs, clocks), with
    # the ceilings of its own device when own_ceilings names their cache key
    visible_devices: str | None = None
    describe: bool = False
    own_ceilings: str | None = None
    reuse_ceilings: bool = False
    # start Inductor's compile workers with the worker (the plan has torch.compile
    # rows): they then import torch while the ceilings and first cases run,
    # instead of the first compile waiting for them or compiling serially
    warm_compile: bool = False

    @property
    def scored(self) -> bool:
        return self.device != "cpu" if self.roofline is None else self.roofline


# what a worker of --gpus reports about its device, for its rows
DEVICE_ENV = ("gpu_name", "gpu_sms", "gpu_mem_bytes", "driver", "l2_bytes", "fingerprint")


def with_ceilings(opts: Options, ceil) -> Options:
    """``opts`` scored against the roofs of ``ceil`` (a suite.ceilings.Ceilings)."""
    return replace(opts, peaks_gbps=ceil.copy_gbps, peaks_tflops=ceil.roofs(),
                   bandwidths=ceil.bandwidths())


def case_seed(base: int, case: Case) -> int:
    return (base ^ zlib.crc32(repr(case.key).encode())) & 0x7FFFFFFF


def is_fatal(message: str) -> bool:
    return any(m.lower() in message.lower() for m in FATAL_MARKERS)


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[0] if lines else type(exc).__name__)[:500]


def base_row(wl: Workload, case: Case, impl_name: str, opts: Options, math_mode: str | None = None) -> dict:
    """The row's identity and napkin math; its roofs are those of its own traffic mix
    (read_bytes : write_bytes) and math mode (``math``: the implementation's, else the dtype)."""
    flops, nbytes = wl.flops(case), wl.min_bytes(case)
    math_mode = math_mode or case.dtype
    peak_tf = opts.peaks_tflops.get(math_mode, math.nan)
    written = wl.write_bytes(case)
    read = wl.read_bytes(case)
    peak_bw = roofline.mix_gbps(read, written, opts.bandwidths) if opts.bandwidths else opts.peaks_gbps
    row = {
        "schema_version": SCHEMA_VERSION, "workload": case.workload, "impl": impl_name,
        "backend": impl_name.split(":", 1)[0], "dtype": case.dtype, "shape": case.label,
        "flops": flops, "min_bytes": nbytes, "eager_bytes": wl.eager_bytes(case),
        "read_bytes": read, "write_bytes": written,
        "intensity": roofline.intensity(flops, nbytes), "peak_gbps": peak_bw,
        "copy_gbps": opts.peaks_gbps, "read_gbps": opts.bandwidths.get(1.0),
        "write_gbps": opts.bandwidths.get(0.0), "mix21_gbps": opts.bandwidths.get(2.0 / 3.0),
        "peak_tflops": peak_tf, "size": wl.size(case), "preset": opts.preset, "math": math_mode,
        # a CPU run is a smoke run: its rows are not scored on a roofline (sol stays NaN too)
        "bound_ms": roofline.bound_ms(flops, nbytes, peak_bw, peak_tf) if opts.scored else math.nan,
        "bound": roofline.limiter(flops, nbytes, peak_bw, peak_tf),
        "status": None, "error": None, "correct": None, "device": opts.device,
        "shape_source": case.source or None,
        "impl_source": impl_source(case.workload, impl_name),
    }
    for k, v in case.shape:
        row[f"shape_{k}"] = v
    return row


def _timed_fields(row: dict, timing) -> dict:
    ms = timing.median
    row.update(timer=timing.timer, l2=timing.l2, ms_median=ms, ms_p20=timing.p20, ms_p80=timing.p80,
               ms_min=timing.min, n_samples=timing.n, samples_ms=list(timing.samples_ms),
               gbps=roofline.gbps(row["min_bytes"], ms), tflops=roofline.tflops(row["flops"], ms),
               sol=roofline.sol(row["bound_ms"], ms))
    total = row["read_bytes"] + row["write_bytes"]
    mix = f"for {row['read_bytes'] / total:.0%} reads" if total > 0 else ""
    reason = roofline.suspect_reason(row["sol"], row["l2"], row.get("bound"), row["peak_gbps"],
                                     row["peak_tflops"], mix, row.get("math"))
    if reason:
        row.update(status="suspect", error=reason)
    return row


def _check_fields(chk: verify.Check) -> dict:
    return {"rel_err": chk.rel_err, "correct": chk.correct, "check": chk.check,
            "elem_err": chk.elem_err, "elem_tol": chk.elem_tol}


def _keeping(fn: Callable, inputs: dict, outs: list, i: int) -> Callable[[], Any]:
    """A call that keeps its latest output in ``outs[i]``, so that what was timed can be
    checked: for the events and wall timers the last timed call's output; for a CUDA
    graph the tensor captured for input set i, which each replay rewrites."""
    def call():
        outs[i] = fn(**inputs)
        return outs[i]
    return call


def _check_timed(outs: list, reference_of: Callable[[int], Any], rule: verify.Rule,
                 timer: str) -> tuple[verify.Check, str] | None:
    """The first timed output that fails its check, with where it came from; None if all pass."""
    for i, out in enumerate(outs):
        ref, cond = reference_of(i)
        chk = verify.check(out, ref, rule, cond)
        if not chk.correct:
            where = f"graph input set {i} of {len(outs)}" if timer == "graph" else "the last timed call"
            return chk, where
    return None


def run_impl(wl: Workload, case: Case, impl: Implementation, inputs: dict, ref, opts: Options,
             more_inputs: Callable[[int], list[dict]],
             reference_of: Callable[[int], Any] | None = None, cond=None) -> list[dict]:
    """Warm up, check, time, then check what was timed; one row per timer.

    ``reference_of(i)`` is the reference of input set i (0: ``inputs``, then
    ``more_inputs``'s) and its rows' condition (Workload.row_condition), for
    the graph timer's rotating sets; ``cond`` that of ``ref``.
    """
    import torch

    template = base_row(wl, case, impl.name, opts, impl.math)
    rows = lambda **kw: [dict(template, timer=t, **kw) for t in opts.timers]  # noqa: E731
    reason = impl.supports(case)
    if reason:
        return rows(status="unsupported", error=reason)
    rule = verify.rule_for(wl, case, impl)
    template.update(tol=rule.norm_tol, elem_tol=rule.elem_tol)
    call = lambda: impl.fn(**inputs)  # noqa: E731

    t0 = time.perf_counter()
    out = call()  # warm-up: compilation, autotuning, extension builds happen here
    _sync(opts.device)
    template["compile_s"] = time.perf_counter() - t0
    del out

    out_bytes = ref.numel() * itemsize(case.dtype)
    # unwritten output elements read as NaN of the output's own dtype
    verify.poison_allocator(opts.device, out_bytes, torch_dtype(case.dtype))
    if opts.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base_mem = torch.cuda.memory_allocated()
    with verify.poisoned_empty():
        out = call()
        _sync(opts.device)
    if opts.device == "cuda":
        template["peak_mem_bytes"] = torch.cuda.max_memory_allocated() - base_mem
    chk = verify.check(out, ref, rule, cond)
    del out
    template.update(_check_fields(chk))
    try:
        template["config"] = impl.config(case)
    except Exception as exc:
        template["config"] = f"config unavailable: {_short(exc)}"
    if not chk.correct:
        return rows(status="incorrect", error=chk.message)

    result = []
    for timer in opts.timers:
        if timer == "graph":
            set_bytes = sum(t.numel() * t.element_size() for t in inputs.values()
                            if isinstance(t, torch.Tensor)) + out_bytes
            k = rotation_sets(set_bytes, l2_bytes(opts.device))
            sets = [inputs] + more_inputs(k - 1)
        else:
            sets = [inputs]
        outs: list = [None] * len(sets)
        calls = [_keeping(impl.fn, s, outs, i) for i, s in enumerate(sets)]
        settle(opts.device, opts.protocol)
        with clocks.sampler(opts.device) as card:
            timing = measure(calls, opts.device, timer, opts.protocol)
        row = _timed_fields(dict(template, status="ok", **card.fields()), timing)
        if opts.repeat:
            settle(opts.device, opts.protocol)
            again = measure(calls, opts.device, timer, opts.protocol)
            row.update(ms_median_repeat=again.median, ms_p20_repeat=again.p20, ms_p80_repeat=again.p80)
        if timer == "graph":
            row["graph_sets"] = len(calls)
        del calls
        _sync(opts.device)
        bad = _check_timed(outs, reference_of or (lambda i: (ref, cond)), rule, timer)
        del outs
        if bad:
            chk, where = bad
            row = dict(template, timer=timer, **_check_fields(chk))
            row.update(check=f"timed:{chk.check}", status="incorrect", error=f"{where}: {chk.message}")
        result.append(row)
    _maybe_energy(result, call, opts)
    return result


TIMED = ("ok", "suspect")


def _maybe_energy(rows: list[dict], call: Callable, opts: Options) -> None:
    """``run --energy``: joules a call on the timed rows; otherwise their energy columns stay NaN."""
    if opts.energy:
        _add_energy(rows, call, opts.device)


def _add_energy(rows: list[dict], call: Callable, device: str) -> None:
    """Joules a call (suite.energy) on every timed row of one implementation, measured once."""
    timed = [r for r in rows if r.get("status") in TIMED]
    if not timed:
        return
    fields = energy.empty()
    counter = clocks.energy_counter(device)
    if counter is not None:
        try:
            fields.update(energy.burst(call, lambda: _sync(device), counter,
                                       min(r["ms_median"] for r in timed)))
        except Exception:  # noqa: BLE001 - the call ran through its timing: keep those rows
            fields = energy.empty()
    for r in timed:
        r.update(fields)
        r.update(energy.per_joule(r))


def _add_ncu(rows: list[dict], case: Case, impl: Implementation, opts: Options, seed: int) -> None:
    """Nsight Compute's figures (suite.ncu) on every timed row, from one replay."""
    timed = [r for r in rows if r.get("status") in TIMED]
    if not timed:
        return
    import sys

    import torch

    from suite import ncu, replay

    spec = replay.spec(case, impl.name, seed, opts.plugins, torch.cuda.current_device(),
                       ncu.WARMUP, ncu.CALLS, opts.protocol.l2)
    name = ncu.profile_name(case.workload, impl.name, case.dtype, case.label)
    fields = ncu.profile(spec, Path(opts.profile_dir or "ncu"), name, timed[0]["ms_median"])
    if fields.get("ncu_error"):
        print(f"warning: {case} {impl.name}: {fields['ncu_error']}", file=sys.stderr, flush=True)
    for r in timed:
        r.update(fields)
        ms = r.get("ms_median")
        r["ncu_ratio"] = fields["ncu_ms"] / ms if ms and ms > 0 else math.nan


def run_case(wl: Workload, case: Case, impls: list[Implementation], opts: Options, send) -> bool:
    """Run every implementation of one case; False when the worker must exit."""
    import torch

    seed = case_seed(opts.seed, case)
    try:
        inputs = wl.make_inputs(case, opts.device, seed)
        ref = wl.reference(case, inputs)
        cond = wl.row_condition(case, inputs)
    except Exception as exc:
        msg = f"inputs or reference failed: {_short(exc)}"
        for impl in impls:
            send(("start", impl.name))
            for t in opts.timers:
                send(("row", dict(base_row(wl, case, impl.name, opts, impl.math), timer=t,
                                  status="error", error=msg)))
        return not is_fatal(msg)

    extra_sets: list[dict] = []
    extra_refs: dict[int, Any] = {}

    def more_inputs(n: int) -> list[dict]:
        while len(extra_sets) < n:
            extra_sets.append(wl.make_inputs(case, opts.device, seed + 1 + len(extra_sets)))
        return extra_sets[:n]

    def reference_of(i: int):
        if i == 0:
            return ref, cond
        if i not in extra_refs:
            extra_refs[i] = (wl.reference(case, extra_sets[i - 1]), wl.row_condition(case, extra_sets[i - 1]))
        return extra_refs[i]

    for impl in impls:
        send(("start", impl.name))
        try:
            rows = run_impl(wl, case, impl, inputs, ref, opts, more_inputs, reference_of, cond)
        except Exception as exc:  # noqa: BLE001 - every failure becomes a row
            msg = _short(exc)
            if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in msg.lower():
                msg = f"out of memory: {msg}"
            template = base_row(wl, case, impl.name, opts, impl.math)
            rows = [dict(template, timer=t, status="error", error=msg,
                         traceback=traceback.format_exc()[-2000:]) for t in opts.timers]
            for row in rows:
                send(("row", row))
            if is_fatal(msg):
                return False
            gc.collect()
            if opts.device == "cuda":
                torch.cuda.empty_cache()
            continue
        if opts.profile == "ncu":
            _add_ncu(rows, case, impl, opts, seed)
        for row in rows:
            send(("row", row))
        _tidy(opts.device)
    return True


# A full gc.collect() costs 0.2-0.3 s once torch and Inductor are loaded, more
# than timing a small case: after each implementation only the young
# generations are collected, and a full collection runs when the memory left
# behind grows large.
FULL_GC_FRACTION = 0.25


def _tidy(device: str) -> None:
    gc.collect(1)
    if device == "cuda":
        import torch

        total = torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory
        if torch.cuda.memory_allocated() > FULL_GC_FRACTION * total:
            gc.collect()
            torch.cuda.empty_cache()


def _own_device(opts: Options) -> tuple[Options, dict]:
    """With ``describe``: this worker's device, and the ceilings it measured or loaded."""
    if not opts.describe:
        return opts, {}
    from suite import ceilings, environment

    env = environment.collect(opts.device)
    info = {"env": {k: env.get(k) for k in DEVICE_ENV}}
    info["env"]["clocks_start"] = environment.clocks() if opts.device == "cuda" else {}
    if opts.own_ceilings is not None:
        ceil = ceilings.get(opts.device, f"{env['fingerprint']}/{opts.own_ceilings}", env["gpu_name"],
                            reuse=opts.reuse_ceilings)
        opts = with_ceilings(opts, ceil)
        info["ceilings"] = asdict(ceil)
    return opts, info


def _warm_compile_pool() -> None:
    try:
        from torch._inductor.async_compile import maybe_warm_pool

        maybe_warm_pool()
    except Exception:  # noqa: BLE001 - an optimisation: the first compile starts the pool itself
        pass


def worker_main(conn, opts: Options) -> None:
    """Entry point of the worker process: serve cases until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    if opts.visible_devices is not None:  # before anything initialises CUDA
        os.environ["CUDA_VISIBLE_DEVICES"] = opts.visible_devices
    use_protocol(opts.protocol)  # the autotuners time under it too
    registry = discover(opts.plugins)
    if opts.device == "cuda":
        import torch

        torch.cuda.init()
        if opts.warm_compile:
            _warm_compile_pool()
    opts, info = _own_device(opts)
    conn.send(("ready", info))
    while True:
        msg = conn.recv()
        if msg[0] == "stop":
            return
        _, case, names = msg
        wl = registry.workloads[case.workload]
        impls = [registry.get(case.workload, n) for n in names]
        keep_going = run_case(wl, case, impls, opts, conn.send)
        conn.send(("case_done", keep_going))
        if not keep_going:  # the CUDA context is unusable after the error just reported
            return
