"""Does Triton compile a row reduction across a cluster of CTAs (``num_ctas`` > 1) for sm_90?

    python benchmarks/triton_clusters_probe.py

Compiles (no GPU needed) a one-row LayerNorm-like kernel, two reductions over
a 32768-wide bfloat16 row held as 1 x 32768, 2 x 16384 or 8 x 4096, for sm_90
with num_ctas 1, 2 and 4, and prints whether each compiled and whether its PTX
touches distributed shared memory.
The CUDA residual_layernorm_gelu reaches 0.92 of copy at 4096 x 32768 only by
splitting a row over a cluster and exchanging its statistics through
distributed shared memory; this probe is the check that the Triton kernels
cannot take the same route with the installed Triton.
"""
from __future__ import annotations

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def _row_norm(x_ptr, y_ptr, N, R: tl.constexpr, C: tl.constexpr):
    """One row of R * C elements, held as an R x C block (R = 1: a plain row)."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, R)[:, None] * C + tl.arange(0, C)[None, :]
    x = tl.load(x_ptr + row * N + offs).to(tl.float32)
    mean = tl.sum(tl.sum(x, axis=1), axis=0) / N
    d = x - mean
    rstd = tl.math.rsqrt(tl.sum(tl.sum(d * d, axis=1), axis=0) / N + 1e-5)
    tl.store(y_ptr + row * N + offs, (d * rstd).to(y_ptr.dtype.element_ty))


def main() -> None:
    print(f"triton {triton.__version__}")
    sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "N": "i32", "R": "constexpr", "C": "constexpr"}
    for r, c in ((1, 32768), (2, 16384), (8, 4096)):
        for ctas in (1, 2, 4):
            what = f"{r} x {c}, num_ctas={ctas}"
            try:
                k = triton.compile(ASTSource(fn=_row_norm, signature=sig, constexprs={"R": r, "C": c}),
                                   target=GPUTarget("cuda", 90, 32), options={"num_warps": 16, "num_ctas": ctas})
            except Exception as e:  # the compiler's own error (the pass and reason go to stderr)
                print(f"{what}: does not compile: {str(e).strip().splitlines()[-1][:200]}")
                continue
            ptx = k.asm["ptx"]
            print(f"{what}: compiles; distributed shared memory in PTX: {'shared::cluster' in ptx}")


if __name__ == "__main__":
    main()
