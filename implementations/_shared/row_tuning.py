"""Autotuning shared by the row-wise Triton kernels (softmax, residual_layernorm_gelu).

Each kernel has a hand-written ``plan()``; the autotuner tries that plan and a
few neighbours on the GPU at the first call (the harness's warm-up) and keeps
the fastest per (N, dtype, power-of-two M bucket).
"""
from __future__ import annotations

import functools
from typing import Callable

import triton
from implementations._shared.autotune import BENCH_LIMITS, autotune

# The real candidates depend on the problem and come from the prune hook; the
# two placeholders only make the list long enough for the autotuner to tune.
PLACEHOLDERS = [triton.Config({}, num_warps=4), triton.Config({}, num_warps=8)]


def rows_plan(m: int, block_n: int, dtype_bytes: int) -> dict:
    """Launch parameters when whole rows fit on chip (block_n is the padded row).

    About 16 KB of each input a program, spread over more programs (about two
    an SM) as long as a warp still gets 16-byte accesses (at least 512 bytes
    of row a program), and about 16 values a thread, up to 32 warps.
    """
    target = 16384 // dtype_bytes
    rows = max(1, min(target // block_n, triton.next_power_of_2(m)))
    min_rows = min(rows, max(1, 512 // (block_n * dtype_bytes)))
    while rows > min_rows and triton.cdiv(m, rows) < 264:
        rows //= 2
    warps = max(1, min(32, rows * block_n // 512))
    return dict(kernel="rows", ROWS=rows, BLOCK_N=block_n, num_warps=warps)


TINY = 16  # rows narrower than this (next power of two) are padded to 16 by the plans


def tiny_rows(m: int, n: int, dtype_bytes: int) -> list[dict]:
    """Rows kernel shapes for rows of at most TINY columns, the block as
    narrow as the row (BLOCK_N = next_pow2(n), at least 2), sized by the
    row's real bytes.

    The plans pad such rows to 16 columns and size a program by those padded
    slots, so at N=3 a program reads 3/16 of the bytes it was sized for (a
    few KB) and most lanes hold masked columns.  Here a program holds about
    16, 32 or 8 KB of real row bytes (ROWS a power of two), at 16 or 32
    values a thread, up to 32 warps.
    """
    bn = max(2, triton.next_power_of_2(n))
    if bn > TINY:
        return []
    out = []
    for target in (16384, 32768, 8192):
        rows = 1
        while rows * 2 * n * dtype_bytes <= target:
            rows *= 2
        rows = min(rows, triton.next_power_of_2(m))
        for ept in (16, 32):
            warps = rows * bn // (32 * ept)
            if 1 <= warps <= 32:
                c = dict(kernel="rows", ROWS=rows, BLOCK_N=bn, num_warps=warps)
                if c not in out:
                    out.append(c)
    return out


WARP_ROWS_MAX = 1024  # widest row (BLOCK_N) tried one to a warp
# (rows a warp, warps a program), in the order tried
WARP_DESIGNS = ((1, 4), (2, 4), (1, 8), (2, 8), (1, 2), (2, 2), (2, 1))


def row_align(n: int, dtype_bytes: int) -> int:
    """The largest power of two dividing n, up to one 16-byte vector: the
    access width a row kernel can prove (the launcher specialises only
    N % 16 == 0, so N = 1000 would otherwise get scalar accesses)."""
    return min(16 // dtype_bytes, n & -n)


def live_cols(n: int, dtype_bytes: int) -> int:
    """The LIVE of a rows kernel: n rounded up to a warp's pass of 16-byte
    accesses (512 bytes: 128 float32 or 256 16-bit columns).  A kernel masks
    its columns with ``cols < LIVE`` besides ``cols < n``; LIVE being a
    compile-time constant, the compiler drops every register whose column
    it can prove to lie past it (a thread's values sit at fixed strides of
    the block), so a block of the row's next power of two holds and computes
    only what covers the row (640 float32 on one warp: five passes of 128,
    not eight).  Rounding keeps it to one compile per 512 bytes of width."""
    g = 512 // dtype_bytes
    return -(-n // g) * g


def warp_rows(m: int, n: int, dtype_bytes: int, block_n: int, wb: bool = False) -> list[dict]:
    """Rows kernel shapes with each row on one warp (the LANES form), for
    rows of at most WARP_ROWS_MAX that one pass of a warp's accesses does not
    cover: one or two rows a warp on 1 to 8 warps, at most 32 values a thread
    (64 for two 16-bit rows of 1024 on one or two warps).

    Triton lays a ROWS x BLOCK_N tile out with the warps along the row
    first: 512 float32 span four warps at 16-byte accesses, and an unaligned
    row of 64 or more spans several, so every row's reductions cross warps
    through shared memory and a barrier.  One-warp programs avoid that but
    hold one row each: at softmax bf16 35712 x 319 a grid of 35712 one-warp
    blocks, which the H200 ran at 24% achieved occupancy.  ``wb``: the
    shape's WB_EARLY (residual_layernorm_gelu's w and b before the
    reductions) where it holds at most 16 values a thread, else after.
    """
    lanes = 32 * row_align(n, dtype_bytes)
    if block_n > WARP_ROWS_MAX or block_n <= lanes:  # (narrower rows share a warp in the plain layout)
        return []
    out = []
    for per_warp, warps in WARP_DESIGNS:
        rows = per_warp * warps
        held = per_warp * block_n // 32  # values a thread
        if rows > triton.next_power_of_2(m) or held > (64 if dtype_bytes == 2 and warps <= 2 else 32):
            continue
        c = dict(kernel="rows", ROWS=rows, BLOCK_N=block_n, num_warps=warps, LANES=lanes,
                 ALIGN=row_align(n, dtype_bytes))
        if wb:
            c["WB_EARLY"] = held <= 16
        out.append(c)
    return out


def neighbours(base: dict, m: int, long_kernel: str, long_choices) -> list[dict]:
    """The plan first, then its neighbours, without duplicates.

    Rows kernel: ROWS kept, halved and doubled, each with 16 or 8 values a
    thread, and 32 for single rows at up to 16 warps (packed rows at 32 hit
    ptxas's register cap and spilled).  Looped kernel: ``long_choices`` as
    (chunk, warps) pairs.  The sm_90 compile test checks every one for spills.
    """
    out = [base]
    if base["kernel"] == "rows":
        r0, bn = base["ROWS"], base["BLOCK_N"]
        for rows in (r0, r0 // 2, min(2 * r0, triton.next_power_of_2(m))):
            for ept in (16, 8, 32):
                warps = rows * bn // (32 * ept)
                if rows >= 1 and 1 <= warps <= 32 and (ept < 32 or (rows == 1 and warps <= 16)):
                    out.append(dict(kernel="rows", ROWS=rows, BLOCK_N=bn, num_warps=warps))
    else:
        for chunk, warps in long_choices:
            out.append(dict(kernel=long_kernel, BLOCK=chunk, num_warps=warps))
    unique: list[dict] = []
    for c in out:
        if c not in unique:
            unique.append(c)
    return unique


def tuned(kernel, candidates: Callable[[int, int, int], list[dict]], reset_to_zero: list[str] | None = None):
    """``kernel`` autotuned over ``candidates(m, n, dtype bytes)``, keyed on N and M_BUCKET;
    ``reset_to_zero``: arguments zeroed before each timing run (a team's counters)."""

    def prune(configs, named_args, **kwargs):
        x, n = named_args["x_ptr"], named_args["N"]
        return [triton.Config({k: v for k, v in c.items() if k not in ("kernel", "num_warps", "maxnreg")},
                              num_warps=c["num_warps"], maxnreg=c.get("maxnreg"))
                for c in candidates(x.numel() // n, n, x.element_size())]

    return autotune(configs=PLACEHOLDERS, key=["N", "M_BUCKET"], reset_to_zero=reset_to_zero,
                    prune_configs_by={"early_config_prune": prune})(kernel)


def describe(kernel: str, kwargs: dict, warps: int, maxnreg: int | None = None) -> str:
    return " ".join([f"kernel={kernel}"] + [f"{k}={v}" for k, v in kwargs.items()] + [f"num_warps={warps}"]
                    + ([f"maxnreg={maxnreg}"] if maxnreg else []))


class Chosen:
    """What the autotuner picked per (kernel, N, dtype bytes, M bucket), for the
    `config` column; before a case has run, its untuned ``plan(m, n, bytes)``."""

    def __init__(self, plan: Callable[[int, int, int], dict]):
        self.plan = plan
        self.seen: dict[tuple, str] = {}

    def record(self, name: str, kernel, n: int, dtype_bytes: int, bucket: int) -> None:
        """Called after each launch; the first one of a key also keeps what
        every candidate took in the autotuner's timing (medians)."""
        key = (name, n, dtype_bytes, bucket)
        if key in self.seen:
            return
        best = kernel.best_config
        text = describe(name, best.kwargs, best.num_warps, getattr(best, "maxnreg", None)) + " (autotuned)"
        timings = getattr(kernel, "configs_timings", None) or {}
        if best in timings and len(timings) > 1:
            def median(t):
                return t[0] if isinstance(t, (list, tuple)) else t

            tried = sorted(timings.items(), key=lambda kv: median(kv[1]))
            text += "; tried " + ", ".join(
                ",".join(f"{v}" for v in c.kwargs.values()) + f",w{c.num_warps}"
                + (f",r{c.maxnreg}" if getattr(c, "maxnreg", None) else "") + f":{median(t) * 1000:.0f}us"
                for c, t in tried)
        self.seen[key] = text

    def config(self, m: int, n: int, dtype_bytes: int) -> str:
        p = self.plan(m, n, dtype_bytes)
        chosen = self.seen.get((p["kernel"], n, dtype_bytes, triton.next_power_of_2(m)))
        if chosen:
            return chosen
        return describe(p.pop("kernel"), {k: v for k, v in p.items() if k != "num_warps"}, p["num_warps"])


class Raced(Chosen):
    """Chosen, plus a race of two or more kernels (rows against split; for 16-bit
    long softmax rows, split against pipe; rlg's rows, parts or split against a
    team and a fitted kernel) at the widths where either may win: per (N, dtype, M bucket), the
    kernel that won and the text for the `config` column (the winner's tuning,
    the head-to-head times, the losers' tuning)."""

    def __init__(self, plan):
        super().__init__(plan)
        self.raced: dict[tuple, tuple[str, str]] = {}

    def race(self, n: int, dtype: str, dtype_bytes: int, bucket: int, times: dict[str, float]) -> str:
        winner = min(times, key=times.get)
        losers = [k for k in times if k != winner]
        text = (self.seen.get((winner, n, dtype_bytes, bucket), f"kernel={winner}")
                + "; head to head " + ", ".join(f"{k} {t * 1000:.0f}us" for k, t in times.items())
                + "; lost: " + "; ".join(self.seen.get((k, n, dtype_bytes, bucket), f"kernel={k}")
                                         for k in losers))
        self.raced[(n, dtype, bucket)] = (winner, text)
        return winner

    def run_or_race(self, n: int, dtype: str, dtype_bytes: int, bucket: int, runs: dict[str, Callable[[], None]],
                    timer: Callable[[Callable[[], None]], float]) -> None:
        """The first call of a key runs (so tunes) every kernel of ``runs``,
        times each as called here and keeps the fastest; later calls run only it.
        A call whose ``runs`` lacks the kept kernel (the forms offered also hang
        on the operands and the device: another residual dtype, fewer SMs) races
        its own anew."""
        raced = self.raced.get((n, dtype, bucket))
        if raced is not None and raced[0] in runs:
            runs[raced[0]]()
            return
        for run in runs.values():
            run()
        self.race(n, dtype, dtype_bytes, bucket, {k: timer(run) for k, run in runs.items()})

    def config_for(self, m: int, n: int, dtype: str, dtype_bytes: int) -> str:
        raced = self.raced.get((n, dtype, triton.next_power_of_2(m)))
        return raced[1] if raced else self.config(m, n, dtype_bytes)


@functools.lru_cache(maxsize=None)
def sm_count(index: int) -> int:
    """SMs of CUDA device ``index`` (asked once)."""
    import torch

    return torch.cuda.get_device_properties(index).multi_processor_count


def device_index(x) -> int:
    """The CUDA device index of tensor ``x`` (0 for a bare "cuda")."""
    return x.device.index if x.device.index is not None else 0


def time_ms(fn) -> float:
    """Median time of ``fn`` by the timer the autotuner ranks candidates with."""
    from dataclasses import replace

    from suite.timing import current_protocol, measure

    return measure([fn], "cuda", "events", protocol=replace(current_protocol(), **BENCH_LIMITS)).median
