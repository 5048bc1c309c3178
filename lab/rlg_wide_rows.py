"""A whole 32768-wide residual_layernorm_gelu row on one program, held as four quarters.

A one-off device comparison (``python3 -m lab.rlg_wide_rows`` on the
H200; its output is in lab/findings/): the shipped Triton kernel at
4096 x 32768 (raced as the suite calls it: the whole-row kernel in bf16, the split
kernel in float32) beside ``_rlg_quarters``, which holds the row as four 8192-wide
quarters, each loaded and added on its own, so that the float32 row fits 32 warps
at 64 registers without spills (one 32768-wide block of float32 spills there),
with and without a barrier between the quarters' loads.  Each is checked
against float64 and timed with the suite's events timer; the copy rate is
measured in the same run.  Not a shipped kernel: it reads x and r once like
the whole-row kernel and so asks whether float32 loses to the re-read of
the split kernel or to the one-row-an-SM shape they share.
"""
import os
import re
import subprocess
import tempfile

import triton
import triton.language as tl

from implementations._shared.gelu_math import gelu_f32


@triton.jit
def _part(x_ptr, r_ptr, base, off, cols, N):
    m = off + cols < N
    return (tl.load(x_ptr + base + off + cols, mask=m, other=0.0).to(tl.float32)
            + tl.load(r_ptr + base + off + cols, mask=m, other=0.0).to(tl.float32))


@triton.jit
def _out(h, mean, rstd, w_ptr, b_ptr, y_ptr, base, off, cols, N, EXACT: tl.constexpr):
    m = off + cols < N
    w = tl.load(w_ptr + off + cols, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + off + cols, mask=m, other=0.0).to(tl.float32)
    y = gelu_f32((h - mean) * rstd * w + b, EXACT)
    tl.store(y_ptr + base + off + cols, y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rlg_quarters(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, N, eps, Q: tl.constexpr, EXACT: tl.constexpr, FENCE: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * N
    cols = tl.arange(0, Q)
    h0 = _part(x_ptr, r_ptr, base, 0, cols, N)
    if FENCE:
        tl.debug_barrier()
    h1 = _part(x_ptr, r_ptr, base, Q, cols, N)
    if FENCE:
        tl.debug_barrier()
    h2 = _part(x_ptr, r_ptr, base, 2 * Q, cols, N)
    if FENCE:
        tl.debug_barrier()
    h3 = _part(x_ptr, r_ptr, base, 3 * Q, cols, N)
    mean = (tl.sum(h0, 0) + tl.sum(h1, 0) + tl.sum(h2, 0) + tl.sum(h3, 0)) / N
    m0 = cols < N
    m1 = Q + cols < N
    m2 = 2 * Q + cols < N
    m3 = 3 * Q + cols < N
    d0 = tl.where(m0, h0 - mean, 0.0)
    d1 = tl.where(m1, h1 - mean, 0.0)
    d2 = tl.where(m2, h2 - mean, 0.0)
    d3 = tl.where(m3, h3 - mean, 0.0)
    var = (tl.sum(d0 * d0, 0) + tl.sum(d1 * d1, 0) + tl.sum(d2 * d2, 0) + tl.sum(d3 * d3, 0)) / N
    rstd = tl.math.rsqrt(var + eps)
    _out(h0, mean, rstd, w_ptr, b_ptr, y_ptr, base, 0, cols, N, EXACT)
    if FENCE:
        tl.debug_barrier()
    _out(h1, mean, rstd, w_ptr, b_ptr, y_ptr, base, Q, cols, N, EXACT)
    if FENCE:
        tl.debug_barrier()
    _out(h2, mean, rstd, w_ptr, b_ptr, y_ptr, base, 2 * Q, cols, N, EXACT)
    if FENCE:
        tl.debug_barrier()
    _out(h3, mean, rstd, w_ptr, b_ptr, y_ptr, base, 3 * Q, cols, N, EXACT)


def bench():
    import torch
    from suite import verify
    from suite.timing import measure
    from suite.workload import Case, discover

    reg = discover()
    wl = reg.workloads["residual_layernorm_gelu"]
    impl = reg.get("residual_layernorm_gelu", "triton")
    out = []
    for dtype in ("float32", "bfloat16"):
        case = Case.make("residual_layernorm_gelu", dtype, M=4096, N=32768)
        inputs = wl.make_inputs(case, "cuda", 7)
        ref = wl.reference(case, inputs)
        args = (inputs["x"], inputs["r"], inputs["weight"], inputs["bias"])
        gb = (3 * 4096 * 32768 + 2 * 32768) * inputs["x"].element_size() / 1e9
        def suite_fn():
            return impl.fn(**inputs)

        res = verify.check(suite_fn(), ref, wl.tolerance(case))
        assert res.correct, res.message
        t = measure([suite_fn], "cuda", "events", min_samples=20, max_samples=100, budget_ms=300.0)
        out.append((dtype, "suite (raced)", t.median * 1e3, t.p20 * 1e3, t.p80 * 1e3, gb / t.median * 1e3,
                    impl.config(case)))
        for fence in (False, True):
            for warps in (32, 16):
                y = verify.poison_(torch.empty_like(inputs["x"]))

                def fn():
                    _rlg_quarters[(4096,)](*args, y, 32768, float(inputs["eps"]), Q=8192, EXACT=dtype == "float32",
                                           FENCE=fence, num_warps=warps)
                fn(); torch.cuda.synchronize()
                res = verify.check(y, ref, wl.tolerance(case))
                t = measure([fn], "cuda", "events", min_samples=20, max_samples=100, budget_ms=300.0)
                out.append((dtype, f"quarters fence={fence} warps={warps}", t.median * 1e3, t.p20 * 1e3, t.p80 * 1e3,
                            gb / t.median * 1e3, "ok" if res.correct else res.message))
    src = torch.empty(1 << 28, device="cuda"); dst = torch.empty_like(src)
    t = measure([lambda: dst.copy_(src)], "cuda", "events", min_samples=20, max_samples=100, budget_ms=300.0)
    print("copy GB/s", 2 * src.numel() * 4 / t.median / 1e6)
    for r in out:
        print("%-9s %-32s %7.1f us [%7.1f, %7.1f] %6.0f GB/s %s" % r)


def spills() -> None:
    """Registers and spill bytes of each form for sm_90a (ptxas -v), on any machine."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    for p, exact in (("*fp32", True), ("*bf16", False)):
        for fence in (False, True):
            for warps in (32, 16):
                sig = {k: p for k in ["x_ptr", "r_ptr", "w_ptr", "b_ptr", "y_ptr"]}
                sig.update(N="i32", eps="fp32")
                const = dict(Q=8192, EXACT=exact, FENCE=fence)
                sig.update({k: "constexpr" for k in const})
                attrs = {(i,): [["tt.divisibility", 16]] for i in range(6)}
                k = triton.compile(ASTSource(fn=_rlg_quarters, signature=sig, constexprs=const, attrs=attrs),
                                   target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
                with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
                    f.write(k.asm["ptx"])
                log = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                                     capture_output=True, text=True).stderr
                os.unlink(f.name)
                print(p, "fence", fence, "warps", warps, "registers",
                      re.search(r"Used (\d+) registers", log).group(1),
                      "spill bytes", re.search(r"(\d+) bytes spill stores", log).group(1))


if __name__ == "__main__":
    import torch

    if torch.cuda.is_available():
        bench()
    spills()
