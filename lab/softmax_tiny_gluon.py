"""Softmax over rows of a few columns, a group of rows a thread (implementations/_shared/row_groups.py).

``python3 -m lab.softmax_tiny_gluon`` on the H200; ``--compile`` on any
machine prints the sm_90 PTX's instruction mix instead (that the per-row
selects fold: eight rows of 7 take 6 max.NaN a row).  At N=7 bf16 a row
starts every 14 bytes, so the rows kernel moves one element a lane.  The
group kernel on 4 and on 8 warps is checked against float64 on a
NaN-poisoned output, then timed in paired rounds beside the registered
torch, triton (which races it) and cuda implementations.
"""
from __future__ import annotations

import sys

import torch
import triton

from implementations._shared import row_groups as G

SHAPES = [(3021808, 7), (3813928, 3), (657893, 5), (1000003, 12), (2232008, 9), (4000037, 6)]
ROUNDS = 9


def compile_report() -> None:
    """Compile for sm_90 here (no GPU needed) and count the PTX's instructions by kind."""
    import re
    from collections import Counter

    from triton.backends.compiler import GPUTarget
    from triton.experimental.gluon._runtime import GluonASTSource

    for n, ty in ((7, "bf16"), (7, "fp32"), (3, "bf16"), (12, "fp16")):
        size = 4 if ty == "fp32" else 2
        for warps in G.WARPS:
            const = dict(N=n, G=G.group_rows(n, size), GP=G.slots(n, size), VEC=16 // size, OP=G.SOFTMAX,
                         EXACT=size == 4, num_warps=warps)
            sig = {"x_ptr": f"*{ty}", "r_ptr": f"*{ty}", "w_ptr": f"*{ty}", "b_ptr": f"*{ty}", "y_ptr": f"*{ty}",
                   "total": "i64", "eps": "fp32", **{k: "constexpr" for k in const}}
            src = GluonASTSource(fn=G._row_groups, signature=sig, constexprs=const,
                                 attrs={(i,): [["tt.divisibility", 16]] for i in range(5)})
            k = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
            ops = Counter(m.group(1) for m in re.finditer(r"^\s+(?:@%p\d+ )?([a-z][\w.]*)", k.asm["ptx"], re.M))
            keep = {o: c for o, c in ops.items()
                    if re.match(r"(ld|st|max|ex2|rcp|div|shfl|bar|selp|add\.f|mul\.f|fma)", o)}
            print(f"{ty} N={n} {G.label(n, size, warps)}: {sum(ops.values())} PTX lines "
                  "(full and last-program paths); " + ", ".join(f"{o} {c}" for o, c in sorted(keep.items())))


def bench() -> None:
    from lab._probe import check_poisoned, paired_rounds, registered_cases

    if not torch.cuda.is_available():
        raise SystemExit("softmax_tiny_gluon needs a CUDA GPU (it times kernels); --compile works without one")
    for wl, case, x, ref, calls in registered_cases("softmax", SHAPES, ("bfloat16", "float32"),
                                                    ("torch", "triton", "cuda")):
        m, n = x.shape
        if not G.group_fits(n, x.element_size()):
            continue
        for warps in G.WARPS:
            def fn(w=warps):
                y = torch.empty_like(x)
                G.launch(x, y, w)
                return y
            check_poisoned(f"groups/{warps}", fn, ref, wl.tolerance(case), x.dtype)
            calls[f"groups/{warps}"] = fn
        paired_rounds(calls, ROUNDS, wl.min_bytes(case) / 1e9, f"{case.dtype} {m} x {n}", peer="cuda")


if __name__ == "__main__":
    compile_report() if "--compile" in sys.argv else bench()
