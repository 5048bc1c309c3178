"""A residual_layernorm_gelu row held whole in registers as 2..8 parts of Q columns, so that
the tile fits the row instead of its next power of two.

A one-off device comparison (``python3 -m lab.rlg_fit_rows`` on the H200; its output
is in lab/findings/), run before the kernel shipped (as
implementations/residual_layernorm_gelu/_triton_fit.py, which it now imports): it
tries every form of part_forms, aligned widths included, not only the autotuner's
first four.  The Triton rows kernel covers a row with one power-of-two block: 5093
float32 columns take 8192 lanes, and the idle 38% still hold registers, so fewer
rows fit an SM; at such widths the autotuner picks the team
kernel instead, which meets at a counter.  ``_rlg_fit`` holds the row's body of whole
16-byte granules (any alignment, see implementations/_shared/granules.py) as PARTS
parts of Q columns (5093: five of 1024, 0.6% idle), adds the parts before the two
block reductions, and stores each part on its own.  Each variant is checked against
float64 on a NaN-filled output and timed with the suite's events timer beside the
shipped Triton kernel (as the suite calls it) and the CUDA one; the copy rate is
measured in the same run.  Without a GPU it prints registers and spills for sm_90a.
"""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import triton

from implementations.residual_layernorm_gelu._triton_fit import _rlg_fit, part_forms

SHAPES = (("float32", 1279, 5093), ("float32", 2208, 4721), ("float32", 656, 19379), ("float32", 1075, 14749),
          ("float32", 1296, 13920), ("bfloat16", 656, 19379), ("bfloat16", 1597, 13437), ("bfloat16", 1296, 13920))


def bench() -> None:
    import torch

    from lab._probe import check_poisoned, fit, print_table, registered_calls, rlg_shipped, time_us, variant_row
    from suite.workload import Case, discover

    wl = discover().workloads["residual_layernorm_gelu"]
    rows = []
    for dtype, m, n in SHAPES:
        args, gb, rel, row = rlg_shipped(dtype, m, n, 60)
        rows.append(row)
        case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
        inputs = dict(zip(("x", "r", "weight", "bias", "eps"), args))
        ref = wl.reference(case, inputs)
        for name, fn in registered_calls("residual_layernorm_gelu", case, inputs, ref, ["cuda"]).items():
            t = time_us(fn)
            row = (dtype, f"{m}x{n}", name, "", t, gb / t * 1e6, rel(fn()))
            print(row, flush=True)
            rows.append(row)
        x, r, w, b, eps = args
        evict = "" if dtype == "float32" else "evict_first"
        for parts, q, warps in part_forms(n):
            def run(out=None, parts=parts, q=q, warps=warps):
                y = torch.empty_like(x) if out is None else out
                k = _rlg_fit[(m,)](x, r, w, b, y, m, n, float(eps), 1, ROWS=1, PARTS=parts, Q=q,
                                   EXACT=dtype == "float32", EVICT=evict, num_warps=warps)
                return y, k
            check_poisoned("fit", lambda: run()[0], ref, wl.tolerance(case), x.dtype)
            rows.append(variant_row(dtype, f"{m}x{n}", f"fit {parts}x{q} w{warps} {evict or 'none'}", x, gb,
                                    rel, run, lambda k, warps=warps: f"{k.n_regs} regs, {fit(k, warps)} an SM"))
    print_table(rows, "rel. error")


def spills() -> None:
    """Registers and spill bytes of each form at the probe's widths for sm_90a (ptxas -v), on any machine."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    seen = set()
    for dtype, _, n in SHAPES:
        p = "*fp32" if dtype == "float32" else "*bf16"
        for parts, q, warps in part_forms(n):
            if (p, parts, q, warps) in seen:
                continue
            seen.add((p, parts, q, warps))
            sig = {k: p for k in ["x_ptr", "r_ptr", "w_ptr", "b_ptr", "y_ptr"]}
            sig.update(M="i32", N="i32", eps="fp32", M_BUCKET="i32")
            const = dict(ROWS=1, PARTS=parts, Q=q, EXACT=dtype == "float32", EVICT="evict_first")
            sig.update({k: "constexpr" for k in const})
            attrs = {(i,): [["tt.divisibility", 16]] for i in range(5)}
            k = triton.compile(ASTSource(fn=_rlg_fit, signature=sig, constexprs=const, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
            ptx = k.asm["ptx"]
            with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
                f.write(ptx)
            log = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                                 capture_output=True, text=True).stderr
            os.unlink(f.name)
            print(p, f"{parts}x{q} w{warps}", "registers", re.search(r"Used (\d+) registers", log).group(1),
                  "spill bytes", re.search(r"(\d+) bytes spill stores", log).group(1),
                  "v4 loads", len(re.findall(r"ld\.global[^;]*\.v4", ptx)),
                  "scalar loads", len(re.findall(r"ld\.global(?:\.[a-z_0-9]+)*\.b(?:16|32) ", ptx)))


if __name__ == "__main__":
    import torch

    if torch.cuda.is_available():
        bench()
    spills()
