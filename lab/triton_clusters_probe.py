"""Does Triton compile a row reduction across a cluster of CTAs (``num_ctas`` > 1) for sm_90?

    python3 -m lab.triton_clusters_probe

Compiles (no GPU needed) a one-row LayerNorm-like kernel, two reductions over
a 32768-wide bfloat16 row held as 1 x 32768, 2 x 16384 or 8 x 4096, for sm_90
with num_ctas 1, 2 and 4, and prints whether each compiled and whether its PTX
touches distributed shared memory.  Then the same row in Gluon, Triton's
explicit-layout dialect, whose layouts can name how a cluster's CTAs share a
tensor (``cga_layout``): each in a child process, since the compiler may
abort rather than raise.
The CUDA residual_layernorm_gelu reaches 0.92 of copy at 4096 x 32768 only by
splitting a row over a cluster and exchanging its statistics through
distributed shared memory; this probe is the check that the Triton kernels
cannot take the same route with the installed Triton.
"""
from __future__ import annotations

import subprocess
import sys

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource


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


@gluon.jit
def _gluon_row_norm(x_ptr, y_ptr, N, BLOCK: gl.constexpr, L: gl.constexpr):
    """One row of BLOCK elements in layout L (split over the cluster's CTAs by L's cga_layout)."""
    row = gl.program_id(0).to(gl.int64)
    offs = gl.arange(0, BLOCK, layout=L)
    x = gl.load(x_ptr + row * N + offs).to(gl.float32)
    mean = gl.sum(x, axis=0) / N
    d = x - mean
    rstd = gl.rsqrt(gl.sum(d * d, axis=0) / N + 1e-5)
    gl.store(y_ptr + row * N + offs, (d * rstd).to(y_ptr.dtype.element_ty))


def gluon_compile(ctas: int) -> str:
    """Compile _gluon_row_norm for a 32768-wide bf16 row over ``ctas`` CTAs (16 warps each)."""
    layout = gl.BlockedLayout([8], [32], [16], [0], [[1 << i] for i in range(ctas.bit_length() - 1)])
    sig = {"x_ptr": "*bf16", "y_ptr": "*bf16", "N": "i32", "BLOCK": "constexpr", "L": "constexpr"}
    k = triton.compile(GluonASTSource(fn=_gluon_row_norm, signature=sig, constexprs={"BLOCK": 32768, "L": layout}),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 16, "num_ctas": ctas})
    return f"compiles; distributed shared memory in PTX: {'shared::cluster' in k.asm['ptx']}"


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
    for ctas in (1, 2, 4):
        what = f"gluon 1 x 32768, cga_layout over {ctas} CTA{'s' if ctas > 1 else ''}"
        proc = subprocess.run([sys.executable, __file__, "--gluon", str(ctas)], capture_output=True, text=True)
        if proc.returncode == 0:
            print(f"{what}: {proc.stdout.strip()}")
        else:
            said = [line for line in proc.stderr.splitlines() if "Assertion" in line or "error" in line]
            print(f"{what}: does not compile (exit {proc.returncode}): {(said or ['?'])[0].strip()[-160:]}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--gluon"]:
        print(gluon_compile(int(sys.argv[2])))
    else:
        main()
