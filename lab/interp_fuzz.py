"""Are the Triton kernels right at shapes no test or preset names, on every path and
config a GPU could pick for them?  (CPU only: Triton's interpreter.)

    TRITON_INTERPRET=1 python -m lab.interp_fuzz --seed 7001 [--seed 7002 ...] [--shapes 6]
        [--workloads softmax,gemm] [--dtypes float32,bfloat16] [--verbose]

For each workload and seed it draws shapes in the spirit of the ``fuzz`` preset's ranges,
scaled down so that the interpreter runs them in seconds: few rows, small M and B*H, but
the widths that pick kernel paths kept (rows of 1..16, widths that are not multiples of
8, 16, 64 or 128, primes, widths just below and above each path's threshold, long rows
past the split thresholds; GEMM M, N and K off every block multiple, M of 1..16;
attention lengths off every block, head dims of 64, 96, 128 and other multiples of 8,
causal and not).  For each Triton implementation and dtype its ``supports`` accepts it runs

- the registered call, as the interpreter runs it (the untuned plan);
- the rows workloads (softmax, residual_layernorm_gelu): every autotuning candidate of
  every kernel the launcher tunes or races at this width (candidates(), split_candidates(),
  parts_, team_ and fit_candidates()) for any M the fuzz preset could pair with it (the
  candidates hang on M through its power of two, and the kernels mask rows, so any
  candidate runs at this M), each launched with the arguments the tuned launcher
  passes; the split and team kernels, whose one-launch form (MODE 0) waits for the
  other programs of a row, as their two-launch form (MODE 1 then 2), which is all the
  interpreter, running one program at a time, can do; the softmax pipe kernel (forced
  with ``long_rows="pipe"``) only at chunks of at least half a row, for the same reason;
- gelu: the plan's block and each candidate's (``block=``);
- gemm and attention: each GPU tile through the tests' hook (the module's
  INTERPRETER_CONFIG): the GEMM's candidates at this shape and at a fuzz preset shape of
  the same kind (decode, skinny, large), the tiled GEMM's K split planned for the H200's
  132 SMs and for the interpreter's 4, and its K-whole twin; the padded GEMM path
  (``padding.PAD_BELOW`` lifted); the persistent GEMM on copies of A and B on 128-byte
  lines; the attention kernels' tiles for the head dim, and the float32 attention's
  split passes and its split in the kernel.

Fresh random inputs (the workload's own make_inputs, never zeros), the output's memory
poisoned with NaN by the CPU harness's poison (suite.verify.poisoned_empty), each output
checked by suite.verify.check_case against the float64 reference.  One line per failure,
a summary table last (exit 1 when anything failed).  Not run here: the Gluon kernels
(softmax and rlg row groups, the sm_90 attention), which the interpreter does not run.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import sys
import time
import zlib
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

WORKLOADS = ("gelu", "softmax", "residual_layernorm_gelu", "gemm", "attention")
DTYPES = ("float32", "float16", "bfloat16")
GPU_SMS = 132  # the H200's: what the launchers plan splits and prefetches for


@dataclass
class Variant:
    impl: str  # the registered implementation whose rule (tolerance, math) holds the output
    path: str  # the kernel and config, as a failure line names it
    run: Callable  # inputs -> output


@contextlib.contextmanager
def patched(obj, **values):
    old = {k: getattr(obj, k) for k in values}
    try:
        for k, v in values.items():
            setattr(obj, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(obj, k, v)


def describe(c: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in c.items())


def unique(items) -> list:
    out = []
    for c in items:
        if c not in out:
            out.append(c)
    return out


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2(x: int) -> int:
    return 1 << max(0, x - 1).bit_length()


# ------------------------------------------------------------------ shapes


def _near(rng: random.Random, edges) -> int:
    """A width at, just below or just above one of ``edges`` (a path's threshold)."""
    return max(1, rng.choice(edges) + rng.choice((-1, 1, -3, 3, -8, 8, 0)))


def gelu_shape(rng, i, wl):
    from suite.shapes import fuzz_size

    kind = i % 4
    if kind == 0:
        n = rng.randint(1, 16)
    elif kind == 1:
        n = fuzz_size(rng, 17, 4096)
    elif kind == 2:  # off a multiple of one of the blocks (plan and candidates, both sizes)
        n = max(1, rng.choice((512, 1024, 2048, 4096, 8192)) * rng.randint(1, 6) + rng.choice((-1, 1, -7, 7, 0)))
    else:
        n = fuzz_size(rng, 4097, 1 << 17)
    return {"N": n}, None


SOFTMAX_EDGES = (16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)


def softmax_shape(rng, i, wl):
    from suite.shapes import fuzz_size

    kind = i % 6
    if kind == 0:  # rows of 1..16 (tiny_rows), many to a program
        n, m = rng.randint(1, 16), fuzz_size(rng, 1, 512)
    elif kind == 1:  # short rows (packed rows, LANES, granules, row groups on the GPU)
        n, m = fuzz_size(rng, 17, 1024), fuzz_size(rng, 1, 160)
    elif kind == 2:  # at a path's threshold
        n = _near(rng, SOFTMAX_EDGES)
        m = fuzz_size(rng, 1, max(1, min(64, 40000 // n)))
    elif kind == 3:  # 1K-16K (raced against split above 8192)
        n, m = fuzz_size(rng, 1025, 16384), fuzz_size(rng, 1, 8)
    elif kind == 4:  # long rows: split, pipe
        n, m = fuzz_size(rng, 16385, 131072), rng.randint(1, 3)
    else:  # vocabulary rows, now and then past the split kernel's 64 programs a row (online)
        n = fuzz_size(rng, 262145, 300000) if rng.random() < 0.25 else fuzz_size(rng, 32000, 152064)
        m = rng.randint(1, 2)
    return {"M": m, "N": n}, None


RLG_EDGES = (16, 64, 1024, 2048, 4096, 8192, 16384, 32768, 65536)


def rlg_shape(rng, i, wl):
    from suite.shapes import fuzz_size

    kind = i % 6
    if kind == 0:
        n, m = rng.randint(1, 16), fuzz_size(rng, 1, 400)
    elif kind == 1:
        n, m = fuzz_size(rng, 17, 1024), fuzz_size(rng, 1, 160)
    elif kind == 2:
        n = _near(rng, RLG_EDGES)
        m = fuzz_size(rng, 1, max(1, min(64, 40000 // n)))
    elif kind == 3:  # hidden sizes: rows, capped rows, fit, team above 4096
        n, m = fuzz_size(rng, 1025, 8192), fuzz_size(rng, 1, 8)
    elif kind == 4:  # wide rows: split, parts, team, fit
        n, m = fuzz_size(rng, 8193, 32768), rng.randint(1, 4)
    else:  # past the fuzz preset's 32768: split and team
        n, m = fuzz_size(rng, 32769, 65536), rng.randint(1, 2)
    return {"M": m, "N": n}, None


def gemm_shape(rng, i, wl):
    from suite.shapes import fuzz_size

    kind = i % 5
    if kind == 0:  # decode
        m, n, k = rng.randint(1, 16), fuzz_size(rng, 1, 320), fuzz_size(rng, 16, 3000)
    elif kind == 1:  # skinny
        m, n, k = fuzz_size(rng, 17, 160), fuzz_size(rng, 1, 300), fuzz_size(rng, 1, 800)
    elif kind == 2:  # one off a block multiple on every side
        m, n, k = (max(1, rng.choice((16, 32, 64, 128, 256)) * rng.randint(1, 2) + rng.choice((-1, 1)))
                   for _ in range(3))
    elif kind == 3:
        m, n, k = fuzz_size(rng, 129, 300), fuzz_size(rng, 17, 300), fuzz_size(rng, 1, 400)
    else:  # 16-byte rows in 16-bit (TMA: the persistent kernel), off 64 and 128
        m, n, k = fuzz_size(rng, 1, 200), 8 * fuzz_size(rng, 1, 40), 8 * fuzz_size(rng, 2, 100)
    return {"M": m, "N": n, "K": k}, wl.fuzz_shape(rng, kind % 4)  # whose tiles the GPU also tries


def attention_shape(rng, i, wl):
    from suite.shapes import fuzz_size

    kind = i % 4
    s = (rng.randint(1, 16), fuzz_size(rng, 17, 300), _near(rng, (16, 32, 64, 128, 256)),
         fuzz_size(rng, 257, 520))[kind]
    d = rng.choice((64, 96, 128)) if rng.random() < 0.5 else 8 * rng.randint(1, 16)
    if rng.random() < 0.1:
        d = rng.choice((160, 192, 256))  # models' head dims past the tiles
    b, h = (rng.randint(1, 2), rng.randint(1, 3)) if s <= 128 else (1, rng.randint(1, 2))
    return {"B": b, "H": h, "S": s, "D": d, "causal": rng.randint(0, 1)}, None


SHAPES = {"gelu": gelu_shape, "softmax": softmax_shape, "residual_layernorm_gelu": rlg_shape, "gemm": gemm_shape,
          "attention": attention_shape}


# ------------------------------------------------------------------ variants


def _registered(name: str, impl) -> Variant:
    return Variant(name, "registered call (interpreter)", lambda inp: impl.fn(**inp))


def _launch_kwargs(c: dict) -> dict:
    """A candidate's launch arguments, as row_tuning.tuned hands them to the autotuner."""
    return {k: v for k, v in c.items() if k != "kernel" and not (k == "maxnreg" and v is None)}


def gelu_variants(reg, case, companion):
    from implementations.gelu import triton as G
    from suite.workload import itemsize

    impl = reg.get("gelu", "triton")
    b = itemsize(case.dtype)
    blocks = unique([G.plan(case["N"], b)[0]] + [blk for blk, _, _ in G.candidates(b)])
    return [_registered("triton", impl)] + [
        Variant("triton", f"BLOCK={blk}", lambda inp, blk=blk: impl.fn(**inp, block=blk)) for blk in blocks]


def _softmax_launch(x, c: dict):
    """Candidate ``c`` launched as the tuned launcher launches it (split: MODE 0 as MODE 1, 2)."""
    import torch
    import triton

    from implementations.softmax import triton as S

    n = x.shape[-1]
    m = x.numel() // n
    y = torch.empty_like(x)
    bucket = triton.next_power_of_2(m)
    kw = _launch_kwargs(c)
    if c["kernel"] == "rows":  # _run_rows_tuned
        S._softmax_rows[(triton.cdiv(m, c["ROWS"]),)](x, y, m, n, bucket, LIVE=S.live_cols(n, x.element_size()),
                                                     **kw)
    elif c["kernel"] == "online":  # _online_tuned
        S._softmax_online[(m,)](x, y, n, bucket, **kw)
    else:  # _run_split_tuned
        p_max = triton.next_power_of_2(triton.cdiv(n, S.SPLIT_MIN_CHUNK))
        stats, count = S._split_buffers(x, m, p_max)
        for mode in (1, 2):
            S._softmax_split[(m * triton.cdiv(n, c["BLOCK"]),)](x, y, stats, count, n, bucket, P_MAX=p_max,
                                                               MODE=mode, **kw)
    return y


FUZZ_ELEMS = 1 << 25  # the fuzz preset's largest M * N


def row_counts(m: int, n: int) -> list[int]:
    """``m`` and every power of two of rows up to the fuzz preset's largest M at width
    ``n``: the candidates of a rows kernel hang on M only through its power of two."""
    return [m] + [1 << k for k in range(max(1, FUZZ_ELEMS // n).bit_length())]


def softmax_variants(reg, case, companion):
    from implementations.softmax import triton as S
    from suite.workload import itemsize

    impl = reg.get("softmax", "triton")
    m, n, b = case["M"], case["N"], itemsize(case.dtype)
    cands = [c for rows in row_counts(m, n) for c in S.candidates(rows, n, b)]
    if S.split_tried(n):
        cands += S.split_candidates(m, n, b)
    out = [_registered("triton", impl)]
    out += [Variant("triton", describe(c), lambda inp, c=c: _softmax_launch(inp["x"], c)) for c in unique(cands)]
    if S.pipe_fits(n, b, GPU_SMS):  # raced on the GPU; here rows of one or two chunks
        for blk in unique([_pow2(_cdiv(n, 2)), _pow2(n)]):
            out.append(Variant("triton", f"kernel=pipe BLOCK={blk} (long_rows='pipe', {_cdiv(n, blk)} chunks a row)",
                               lambda inp, blk=blk: impl.fn(**inp, long_rows="pipe", block=blk)))
    return out


def _rlg_launch(inp: dict, c: dict):
    """Candidate ``c`` launched as the tuned launcher's run_rows, run_split, run_parts,
    run_team (MODE 0 as MODE 1, 2) or run_fit launches it."""
    import torch
    import triton

    from implementations.residual_layernorm_gelu import triton as R

    x, r, w, bias, eps = inp["x"], inp["r"], inp["weight"], inp["bias"], float(inp["eps"])
    y = torch.empty_like(x)
    n = x.shape[-1]
    m, b = x.numel() // n, x.element_size()
    args, exact, bucket, kw = (x, r, w, bias, y), b == 4, triton.next_power_of_2(m), _launch_kwargs(c)
    kernel = c["kernel"]
    if kernel == "rows":
        R._rlg_rows[(triton.cdiv(m, c["ROWS"]),)](*args, m, n, eps, bucket, EXACT=exact,
                                                  EVEN_N=n == R.plan(m, n, b)["BLOCK_N"], ALIGN=R.row_align(n, b),
                                                  LIVE=R.live_cols(n, b), **kw)
    elif kernel == "split":
        R._rlg_split[(m,)](*args, n, eps, bucket, EXACT=exact, **kw)
    elif kernel == "parts":
        R._rlg_parts[(m,)](*args, m, n, eps, bucket, GPU_SMS, EXACT=exact, ALIGN=R.row_align(n, b), **kw)
    elif kernel == "team":
        p_max = triton.next_power_of_2(triton.cdiv(n, R.TEAM_MIN_CHUNK))
        stats, count = R._team_buffers(x, m, p_max)
        for mode in (1, 2):
            R._rlg_team[(m * triton.cdiv(n, c["BLOCK"]),)](*args, stats, count, n, eps, bucket, P_MAX=p_max,
                                                           MODE=mode, EXACT=exact, ALIGN=R.row_align(n, b), **kw)
    elif kernel == "fit":
        R._rlg_fit[(triton.cdiv(m, c["ROWS"]),)](*args, m, n, eps, bucket, EXACT=exact, **kw)
    else:
        raise ValueError(f"no launch for kernel {kernel!r}")
    return y


def rlg_variants(reg, case, companion):
    from implementations.residual_layernorm_gelu import triton as R
    from suite.workload import itemsize

    impl = reg.get("residual_layernorm_gelu", "triton")
    m, n, b = case["M"], case["N"], itemsize(case.dtype)
    cands = []
    for rows in row_counts(m, n):
        cands += (R.candidates(rows, n, b) + R.parts_candidates(rows, n, b) + R.team_candidates(rows, n, b)
                  + R.fit_candidates(rows, n, b))
    return [_registered("triton", impl)] + [
        Variant("triton", describe(c), lambda inp, c=c: _rlg_launch(inp, c)) for c in unique(cands)]


def _tiled(inp, precision: str, cfg: dict, sms: int):
    from implementations.gemm import _triton_tiled as T

    with patched(T, INTERPRETER_CONFIG=cfg):
        return T.matmul(inp["a"], inp["b"], precision, sms)[0]


def _persistent(inp, cfg: dict | None, sms: int | None, lined: bool | None = None):
    from implementations.gemm import _triton_persistent as P

    with patched(P, INTERPRETER_CONFIG=cfg or P.INTERPRETER_CONFIG, INTERPRETER_SMS=sms or P.INTERPRETER_SMS):
        return P.matmul(inp["a"], inp["b"], lined)[0]


def gemm_variants(reg, case, big):
    from implementations._shared.autotune import bucket
    from implementations.gemm import _triton_persistent as P
    from implementations.gemm import _triton_tiled as T
    from implementations.gemm import padding
    from suite.workload import itemsize

    m, n, k, isz = case["M"], case["N"], case["K"], itemsize(case.dtype)
    out = []
    for name, precision in (("triton", "ieee"), ("triton:tf32", "tf32"), ("triton:tf32x3", "tf32x3")):
        out.append(_registered(name, reg.get("gemm", name)))
        prec = precision if case.dtype == "float32" else "tf32"
        tiles = unique(dict(c.kwargs) for mm, nn in ((m, n), (big["M"], big["N"]))
                       for c in T.candidates(bucket(mm), bucket(nn), isz, prec))
        for cfg in tiles:
            tile = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} GROUP_M={cfg['GROUP_M']}"
            plans = {s: T.split_plan(m, n, k, cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], s)
                     for s in (GPU_SMS, T.INTERPRETER_SMS)}
            runs = []  # (SMs, WHOLE_K): each distinct split of the last wave, then K whole (the split's twin)
            for sms in (GPU_SMS, T.INTERPRETER_SMS):
                if plans[sms][1] > 1 and plans[sms] not in [plans[s] for s, _ in runs]:
                    runs.append((sms, 0))
            runs.append((GPU_SMS, 1 if runs else 0))
            for sms, whole in runs:
                what = "K whole" if (sms, whole) == runs[-1] else f"split_k={plans[sms][1]} on {sms} SMs"
                out.append(Variant(name, f"{tile} {what}",
                                   lambda inp, c=dict(cfg, WHOLE_K=whole), s=sms, p=precision: _tiled(inp, p, c, s)))
        e = 16 // isz
        if k % e or n % e:  # the padded path, with its size rule lifted
            def padded(inp, impl=reg.get("gemm", name)):
                with patched(padding, PAD_BELOW=1.0):
                    return impl.fn(**inp)
            out.append(Variant(name, "A and B padded to 16-byte rows (PAD_BELOW lifted)", padded))
    out.append(_registered("triton:persistent", reg.get("gemm", "triton:persistent")))
    for cfg in unique(dict(c.kwargs) for c in P.LARGE + P.MID + P.SKINNY):
        tile = f"{cfg['BLOCK_M']}x{cfg['BLOCK_N']}x{cfg['BLOCK_K']} GROUP_M={cfg['GROUP_M']}"
        plan = P.plan(m, n, k, cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"], GPU_SMS)
        out.append(Variant("triton:persistent", f"{tile} on {GPU_SMS} SMs" + (f" split_k={plan[1]}" if plan[1] > 1 else ""),
                           lambda inp, c=cfg: _persistent(inp, c, GPU_SMS)))
    out.append(Variant("triton:persistent", "A and B copied onto 128-byte lines (lined=True)",
                       lambda inp: _persistent(inp, None, None, lined=True)))
    return out


def _flash(inp, cfg: dict):
    from implementations.attention import _triton_flash as A

    with patched(A, INTERPRETER_CONFIG=cfg):
        return A.attention(inp["q"], inp["k"], inp["v"], inp["causal"])[0]


def _tf32x3(inp, cfg: dict, in_kernel: bool):
    from implementations.attention import _triton_tf32x3 as F

    with patched(F, INTERPRETER_CONFIG=cfg):
        return F.attention(inp["q"], inp["k"], inp["v"], inp["causal"], in_kernel=in_kernel)[0]


def attention_variants(reg, case, companion):
    from implementations.attention import _triton_flash as A
    from implementations.attention import _triton_tf32x3 as F
    from implementations.attention.head_dims import head_dim_problem, padded_head_dim

    out = [_registered("triton", reg.get("attention", "triton")),
           _registered("triton:tf32x3", reg.get("attention", "triton:tf32x3"))]
    if head_dim_problem(case["D"]):
        return out  # (supports refuses it; the refusal is counted)
    dp = padded_head_dim(case["D"])

    def tiles(configs):
        return unique({"BLOCK_M": c.kwargs["BLOCK_M"], "BLOCK_N": c.kwargs["BLOCK_N"]} for c in configs)

    out += [Variant("triton", f"BLOCK_M={c['BLOCK_M']} BLOCK_N={c['BLOCK_N']}", lambda inp, c=c: _flash(inp, c))
            for c in tiles(A.CONFIGS[dp])]
    out += [Variant("triton:tf32x3", f"split passes BLOCK_M={c['BLOCK_M']} BLOCK_N={c['BLOCK_N']}",
                    lambda inp, c=c: _tf32x3(inp, c, False)) for c in tiles(F.CONFIGS[dp])]
    out += [Variant("triton:tf32x3", f"split in the kernel BLOCK_M={c['BLOCK_M']} BLOCK_N={c['BLOCK_N']}",
                    lambda inp, c=c: _tf32x3(inp, c, True)) for c in tiles(F.IN_KERNEL_CONFIGS[dp])]
    return out


VARIANTS = {"gelu": gelu_variants, "softmax": softmax_variants, "residual_layernorm_gelu": rlg_variants,
            "gemm": gemm_variants, "attention": attention_variants}


# ------------------------------------------------------------------ the run


def _stats():
    return {"seeds": set(), "shapes": set(), "cases": set(), "paths": set(), "runs": 0, "failures": 0,
            "refused": {}, "seconds": 0.0, "worst": (0.0, "")}


def run(seeds, count: int, workloads, dtypes, verbose: bool = False, out=sys.stdout) -> dict:
    """Every variant of ``count`` shapes a workload and seed; returns the stats by (workload, impl)."""
    from suite import verify
    from suite.workload import Case, discover

    reg = discover()
    stats: dict = defaultdict(_stats)
    for seed in seeds:
        for wname in workloads:
            wl = reg.workloads[wname]
            rng = random.Random(f"interp_fuzz:{wname}:{seed}")
            t_wl, n_runs, n_fail = time.perf_counter(), 0, 0
            for i in range(count):
                shape, companion = SHAPES[wname](rng, i, wl)
                for dtype in dtypes:
                    if dtype not in wl.dtypes:
                        continue
                    case = Case.make(wname, dtype, **shape)
                    inputs = ref = None
                    seen = set()
                    for v in VARIANTS[wname](reg, case, companion):
                        if (v.impl, v.path) in seen:
                            continue
                        seen.add((v.impl, v.path))
                        impl, st = reg.get(wname, v.impl), stats[(wname, v.impl)]
                        why = impl.supports(case)
                        if why:
                            st["refused"].setdefault(why, set()).add(case.label)
                            continue
                        if inputs is None:
                            inputs = wl.make_inputs(case, "cpu", zlib.crc32(repr((seed, case.key)).encode()))
                            ref = wl.reference(case, inputs)
                        t = time.perf_counter()
                        try:
                            with verify.poisoned_empty():
                                y = v.run(inputs)
                            res = verify.check_case(wl, case, y, ref, impl, inputs)
                            ok, check, message = res.correct, res.check, res.message
                            used = res.elem_err / res.elem_tol  # the share of the elementwise bound used
                            if ok and used > st["worst"][0]:
                                st["worst"] = (used, f"[{v.path}] {dtype} {case.label} seed={seed}")
                        except Exception as exc:  # noqa: BLE001 - a launch that fails is a finding too
                            ok, check, message = False, "error", f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
                        took = time.perf_counter() - t
                        st["seconds"] += took
                        st["runs"] += 1
                        st["seeds"].add(seed)
                        st["shapes"].add(case.label)
                        st["cases"].add((case.label, dtype))
                        st["paths"].add(v.path)
                        n_runs += 1
                        if not ok:
                            st["failures"] += 1
                            n_fail += 1
                            print(f"FAIL seed={seed} {wname} {v.impl} [{v.path}] {dtype} {case.label}: {check}: "
                                  f"{message}", file=out, flush=True)
                        elif verbose:
                            print(f"ok   seed={seed} {wname} {v.impl} [{v.path}] {dtype} {case.label} ({took:.2f} s)",
                                  file=out, flush=True)
            print(f"seed {seed} {wname}: {count} shapes, {n_runs} runs, {n_fail} failures, "
                  f"{time.perf_counter() - t_wl:.1f} s", file=out, flush=True)
    return stats


def summary(stats: dict, out=sys.stdout) -> None:
    print(f"\n{'workload':<24} {'impl':<18} {'seeds':>5} {'shapes':>6} {'cases':>5} {'configs':>7} "
          f"{'runs':>5} {'failed':>6} {'refused':>7} {'s':>6} {'worst':>5}", file=out)
    for (wname, impl), st in sorted(stats.items()):
        refused = len({label for labels in st["refused"].values() for label in labels})
        print(f"{wname:<24} {impl:<18} {len(st['seeds']):>5} {len(st['shapes']):>6} {len(st['cases']):>5} "
              f"{len(st['paths']):>7} {st['runs']:>5} {st['failures']:>6} {refused:>7} {st['seconds']:>6.1f} "
              f"{st['worst'][0]:>5.2f}", file=out)
    total = sum(st["runs"] for st in stats.values())
    failed = sum(st["failures"] for st in stats.values())
    print(f"total: {total} runs, {failed} failures", file=out)
    print("worst: the largest share of the elementwise bound a passing output used, at", file=out)
    for (wname, impl), st in sorted(stats.items()):
        if st["worst"][1]:
            print(f"  {wname} {impl}: {st['worst'][0]:.2f} {st['worst'][1]}", file=out)
    refusals = defaultdict(list)  # (workload, impl, the reason less its figures) -> [(reason, shapes)]
    for (wname, impl), st in sorted(stats.items()):
        for why, labels in sorted(st["refused"].items()):
            refusals[(wname, impl, re.sub(r"\d+", "#", why))].append((why, len(labels)))
    if refusals:
        print("refused by supports (shapes; one reason as given):", file=out)
        for (wname, impl, _), whys in refusals.items():
            print(f"  {wname} {impl}: {sum(n for _, n in whys)} x {whys[0][0]}", file=out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.interp_fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, action="append", help="a seed (repeatable; default 7001)")
    parser.add_argument("--shapes", type=int, default=6, help="shapes a workload and seed (default 6)")
    parser.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated (default: all five)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated (default: all three)")
    parser.add_argument("--verbose", action="store_true", help="a line for every check that passed too")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        print("interp_fuzz runs the kernels under Triton's interpreter: set TRITON_INTERPRET=1", file=sys.stderr)
        return 2
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    bad = [w for w in workloads if w not in WORKLOADS] + [d for d in dtypes if d not in DTYPES]
    if bad or args.shapes < 1:
        print(f"unknown workload or dtype, or --shapes below 1: {bad or args.shapes}", file=sys.stderr)
        return 2
    seeds = args.seed or [7001]
    print(f"# TRITON_INTERPRET=1 python -m lab.interp_fuzz " + " ".join(f"--seed {s}" for s in seeds)
          + f" --shapes {args.shapes} --workloads {','.join(workloads)} --dtypes {','.join(dtypes)}", flush=True)
    stats = run(seeds, args.shapes, workloads, dtypes, args.verbose)
    summary(stats)
    return 1 if any(st["failures"] for st in stats.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
