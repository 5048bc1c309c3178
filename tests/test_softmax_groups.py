"""The Triton softmax's group kernel for short unaligned rows (implementations/softmax/_gluon_groups.py).

On the CPU: the group arithmetic, and (no GPU needed) the sm_90 code of every
design: 16-byte loads and stores, no spills, and N - 1 max instructions a
row with no shuffles in the tile's code, which shows each row's reduction
stays in its thread's own registers (a select that did not fold would take
GP - 1).  On the GPU: every design at irregular row counts
(a last program that is mostly empty, a group cut short), rows next to each
other that differ by 120 (a shared max would underflow one of them), -inf
entries; then the registered op's race.  Outputs start poisoned (NaN).
"""
from __future__ import annotations

import random

import pytest
import torch

from implementations.softmax import _gluon_groups as G
from suite import verify
from suite.workload import Case, discover
from tests.helpers import compile_for_sm90

SEED = random.randrange(1 << 30)


@pytest.mark.parametrize("dtype_bytes", (2, 4))
@pytest.mark.parametrize("n", range(1, 80))
def test_group_fills_whole_vectors(n, dtype_bytes):
    vec = 16 // dtype_bytes
    g = G.group_rows(n, dtype_bytes)
    assert g * n % vec == 0 and all(k * n % vec for k in range(1, g))  # the fewest rows that do
    assert G.slots(n, dtype_bytes) >= g * n > G.slots(n, dtype_bytes) // 2
    assert G.fits(n, dtype_bytes) == (n % 16 != 0 and G.slots(n, dtype_bytes) * dtype_bytes <= G.MAX_GROUP_BYTES)


def test_fits_the_short_unaligned_widths():
    assert G.fits(7, 2) and G.fits(3, 2) and G.fits(7, 4) and G.fits(72, 2) and G.fits(8, 2)
    assert not G.fits(16, 2) and not G.fits(32, 4)  # aligned: the rows kernel moves 16-byte vectors there
    assert not G.fits(25, 2) and not G.fits(25, 4)  # 8 rows of 25 bf16, 4 of float32: more than a thread holds


_COMPILE = r"""
import json, os, re, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from implementations.softmax import _gluon_groups as G

ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
out = []
for ty, size, n in (("bf16", 2, 7), ("bf16", 2, 3), ("fp16", 2, 12), ("bf16", 2, 72), ("fp32", 4, 7),
                    ("fp32", 4, 9), ("fp32", 4, 1)):
    for warps in G.WARPS:
        const = dict(N=n, G=G.group_rows(n, size), GP=G.slots(n, size), VEC=16 // size, num_warps=warps)
        sig = {"x_ptr": f"*{ty}", "y_ptr": f"*{ty}", "total": "i64", **{k: "constexpr" for k in const}}
        src = GluonASTSource(fn=G._softmax_groups, signature=sig, constexprs=const,
                             attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]})
        ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["ptx"]
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx)
        log = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                             capture_output=True, text=True, check=True).stderr
        os.unlink(f.name)
        out.append({"n": n, "size": size, "warps": warps, "g": const["G"], "gp": const["GP"],
                    "spill": int(re.search(r"(\d+) bytes spill stores", log).group(1)),
                    "ld_v4": len(re.findall(r"ld\.global[.\w:]*\.v4", ptx)),
                    "st_v4": len(re.findall(r"st\.global[.\w:]*\.v4", ptx)),
                    "shfl": len(re.findall(r"shfl\.", ptx)),
                    "max": len(re.findall(r"\bmax\.NaN\.f32", ptx))})
print(json.dumps(out))
"""


def test_designs_compile_for_sm90_with_rows_in_registers():
    res = compile_for_sm90(_COMPILE)
    assert len(res) == 14, res
    for r in res:
        # a thread's 16-byte vectors, in two copies of the tile's code (full programs; the last one's whole groups)
        vectors = r["gp"] * r["size"] // 16
        assert r["ld_v4"] == 2 * vectors and r["st_v4"] == 2 * vectors and r["spill"] == 0, r
        # In those copies, N - 1 maxima a row (G rows a thread) and no shuffle.  The
        # rows left after the whole groups, one element a lane, reduce across lanes:
        # at most 8 maxima and 8 shuffles a row and reduction.
        rows = 2 * r["g"] * (r["n"] - 1)
        assert rows <= r["max"] <= rows + 8 * r["g"] and r["shfl"] <= 2 * 8 * r["g"], r


# --------------------------------------------------------------------------- GPU

def _hard_inputs(m: int, n: int, dtype: str):
    gen = torch.Generator(device="cuda").manual_seed(SEED + m * 131 + n)
    x = torch.randn(m, n, device="cuda", generator=gen) * 3
    x[0::2] += 60.0  # neighbouring rows 120 apart: one max for both would underflow the lower row
    x[1::2] -= 60.0
    if m > 2 and n > 1:
        x[2, 0] = float("-inf")
        x[m - 1, n - 1] = float("-inf")
    return x.to(getattr(torch, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
def test_gpu_every_width_and_warps(dtype):
    if not G.available(torch.empty(1, device="cuda")):
        pytest.skip("the group kernel is for sm_90")
    wl = discover().workloads["softmax"]
    size = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for n in (1, 3, 5, 7, 8, 9, 12, 25, 72):
        if not G.fits(n, size):
            continue
        for warps in G.WARPS:
            per = 32 * warps * G.group_rows(n, size)  # rows a program
            for m in (1, 2, per - 1, per, 3 * per + 5, 20011):
                x = _hard_inputs(m, n, dtype)
                y = verify.poison_(torch.empty_like(x))
                G.softmax(x, y, warps)
                torch.cuda.synchronize()
                res = verify.check(y, torch.softmax(x.double(), -1), wl.tolerance(Case.make("softmax", dtype, M=m, N=n)))
                assert res.correct, f"{dtype} {m} x {n} {G.label(n, size, warps)} seed={SEED}: {res.message}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,m,n", [("bfloat16", 30011, 7), ("float32", 40009, 9), ("float16", 9001, 12)])
def test_gpu_race_against_rows(dtype, m, n):
    """The registered op races the rows kernel and the group designs, then runs the winner."""
    if not G.available(torch.empty(1, device="cuda")):
        pytest.skip("the group kernel is for sm_90")
    reg = discover()
    wl, impl = reg.workloads["softmax"], reg.get("softmax", "triton")
    case = Case.make("softmax", dtype, M=m, N=n)
    for _ in range(2):  # the race, then the winner alone
        inputs = wl.make_inputs(case, "cuda", SEED)
        ref = wl.reference(case, inputs)
        verify.poison_allocator("cuda", int(ref.numel()) * inputs["x"].element_size())
        out = impl.fn(**inputs)
        torch.cuda.synchronize()
        res = verify.check(out, ref, wl.tolerance(case))
        assert res.correct, f"{case} seed={SEED} config={impl.config(case)}: {res.message}"
    text = impl.config(case)
    assert "head to head" in text and "rows" in text and "groups G=" in text, text
