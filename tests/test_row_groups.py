"""The group kernel for short unaligned rows (implementations/_shared/row_groups.py),
softmax and residual_layernorm_gelu.

On the CPU: the group arithmetic, and (no GPU needed) the sm_90 code of every
design: 16-byte loads and stores, no spills, and N - 1 max instructions a
row with no shuffles in the softmax tile's code, which shows each row's
reduction stays in its thread's own registers (a select that did not fold
would take GP - 1).  On the GPU: every design at irregular row counts (a
last program that is mostly empty, a group cut short), rows next to each
other that differ by 120 (a shared max would underflow one of them), -inf
entries (softmax); then each registered op's race.  Outputs start poisoned
(NaN).
"""
from __future__ import annotations

import random

import pytest
import torch

from implementations._shared import row_groups as G
from suite import verify
from suite.workload import Case, discover
from tests.helpers import check_softmax, compile_for_sm90

SEED = random.randrange(1 << 30)


@pytest.mark.parametrize("dtype_bytes", (2, 4))
@pytest.mark.parametrize("n", range(1, 80))
def test_group_fills_whole_vectors(n, dtype_bytes):
    vec = 16 // dtype_bytes
    g = G.group_rows(n, dtype_bytes)
    assert g * n % vec == 0 and all(k * n % vec for k in range(1, g))  # the fewest rows that do
    assert G.slots(n, dtype_bytes) >= g * n > G.slots(n, dtype_bytes) // 2
    assert G.group_fits(n, dtype_bytes) == (G.slots(n, dtype_bytes) * dtype_bytes <= G.MAX_GROUP_BYTES)


def test_widths_each_op_races_it_at():
    from implementations.residual_layernorm_gelu.triton import _groups_tried as rlg_tried
    from implementations.softmax.triton import _groups_tried as softmax_tried

    class Fake:  # a CUDA tensor of an sm_90 GPU, as far as the tests ask
        is_cuda = True
        device = "cuda"

        def __init__(self, size):
            self.size = size
            self.dtype = {2: torch.bfloat16, 4: torch.float32}[size]

        def element_size(self):
            return self.size

    real = G.available
    G.available = lambda x: True
    try:
        assert softmax_tried(Fake(2), 7) and softmax_tried(Fake(2), 3) and softmax_tried(Fake(4), 7)
        assert softmax_tried(Fake(2), 72) and softmax_tried(Fake(2), 8)  # N % 16: the rows kernel is scalar there
        assert not softmax_tried(Fake(2), 16) and not softmax_tried(Fake(4), 32)
        assert not softmax_tried(Fake(2), 25) and not softmax_tried(Fake(4), 25)  # more than a thread holds
        # rlg's rows kernel proves what divides N (row_align): 16-byte rows are vectors there already
        assert rlg_tried(Fake(2), Fake(2), 7) and rlg_tried(Fake(2), Fake(2), 13) and rlg_tried(Fake(4), Fake(4), 3)
        assert not rlg_tried(Fake(2), Fake(2), 8) and not rlg_tried(Fake(4), Fake(4), 12)
        assert not rlg_tried(Fake(2), Fake(2), 31)
        assert not rlg_tried(Fake(2), Fake(4), 7)  # x and r of two dtypes: one tile cannot stage both
    finally:
        G.available = real


_COMPILE = r"""
import json, os, re, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon._runtime import GluonASTSource
from implementations._shared import row_groups as G

ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
out = []
for op in (G.SOFTMAX, G.RLG):
    for ty, size, n in (("bf16", 2, 7), ("bf16", 2, 3), ("fp16", 2, 12), ("bf16", 2, 72), ("fp32", 4, 7),
                        ("fp32", 4, 9), ("fp32", 4, 1)):
        if op == G.RLG and n == 72:
            continue  # whole 16-byte vectors: rlg's rows kernel takes it
        for warps in G.WARPS:
            const = dict(N=n, G=G.group_rows(n, size), GP=G.slots(n, size), VEC=16 // size, OP=op,
                         EXACT=size == 4, num_warps=warps)
            sig = {"x_ptr": f"*{ty}", "r_ptr": f"*{ty}", "w_ptr": f"*{ty}", "b_ptr": f"*{ty}", "y_ptr": f"*{ty}",
                   "total": "i64", "eps": "fp32", **{k: "constexpr" for k in const}}
            src = GluonASTSource(fn=G._row_groups, signature=sig, constexprs=const,
                                 attrs={(i,): [["tt.divisibility", 16]] for i in range(5)})
            ptx = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps}).asm["ptx"]
            with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
                f.write(ptx)
            log = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                                 capture_output=True, text=True, check=True).stderr
            os.unlink(f.name)
            out.append({"op": op, "n": n, "size": size, "warps": warps, "g": const["G"], "gp": const["GP"],
                        "spill": int(re.search(r"(\d+) bytes spill stores", log).group(1)),
                        "ld_v4": len(re.findall(r"ld\.global[.\w:]*\.v4", ptx)),
                        "st_v4": len(re.findall(r"st\.global[.\w:]*\.v4", ptx)),
                        "shfl": len(re.findall(r"shfl\.", ptx)),
                        "max": len(re.findall(r"\bmax\.NaN\.f32", ptx))})
print(json.dumps(out))
"""


def test_designs_compile_for_sm90_with_rows_in_registers():
    res = compile_for_sm90(_COMPILE)
    assert len(res) == 26, res
    for r in res:
        # a thread's 16-byte vectors of each input (x; and r), in two copies of the tile's code
        # (full programs; the last one's whole groups); y is stored the same way
        vectors = r["gp"] * r["size"] // 16
        inputs = 1 if r["op"] == 0 else 2
        assert r["ld_v4"] == 2 * inputs * vectors and r["st_v4"] == 2 * vectors and r["spill"] == 0, r
        if r["op"] == 0:
            # In those copies, N - 1 maxima a row (G rows a thread) and no shuffle.  The
            # rows left after the whole groups, one element a lane, reduce across lanes:
            # at most 8 maxima and 8 shuffles a row and reduction.
            rows = 2 * r["g"] * (r["n"] - 1)
            assert rows <= r["max"] <= rows + 8 * r["g"] and r["shfl"] <= 2 * 8 * r["g"], r
        else:
            assert r["shfl"] <= 2 * 2 * 8 * r["g"], r  # two reductions a row, only in the leftover rows' code


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


WIDTHS = (1, 3, 5, 7, 8, 9, 12, 13, 25, 72)


def _widths(size: int):
    return [n for n in WIDTHS if G.group_fits(n, size)]


def _every_launch(size: int):
    """(n, warps, m) over every width the group kernel takes at this element
    size, every warp count, and row counts around one program's rows."""
    for n in _widths(size):
        for warps in G.WARPS:
            per = 32 * warps * G.group_rows(n, size)  # rows a program
            for m in (1, 2, per - 1, per, 3 * per + 5, 20011):
                yield n, warps, m


def _gpu_or_skip() -> None:
    if not G.available(torch.empty(1, device="cuda")):
        pytest.skip("the group kernel is for sm_90")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
def test_gpu_softmax_every_width_and_warps(dtype):
    _gpu_or_skip()
    wl = discover().workloads["softmax"]
    size = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for n, warps, m in _every_launch(size):
        x = _hard_inputs(m, n, dtype)
        y = verify.poison_(torch.empty_like(x))
        G.launch(x, y, warps)
        torch.cuda.synchronize()
        res = check_softmax(y, x)
        assert res.correct, f"{dtype} {m} x {n} {G.label(n, size, warps)} seed={SEED}: {res.message}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ("float32", "float16", "bfloat16"))
def test_gpu_rlg_every_width_and_warps(dtype):
    _gpu_or_skip()
    wl = discover().workloads["residual_layernorm_gelu"]
    size = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    for n, warps, m in _every_launch(size):
        case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
        inputs = wl.make_inputs(case, "cuda", SEED + m + n)
        inputs["x"][0::2] += 8.0  # neighbouring rows apart: one mean for both would show
        ref = wl.reference(case, inputs)
        y = verify.poison_(torch.empty_like(inputs["x"]))
        G.launch(inputs["x"], y, warps, inputs["r"], inputs["weight"], inputs["bias"], inputs["eps"])
        torch.cuda.synchronize()
        res = verify.check_case(wl, case, y, ref, inputs=inputs)
        assert res.correct, f"{case} {G.label(n, size, warps)} seed={SEED}: {res.message}"


@pytest.mark.gpu
@pytest.mark.parametrize("workload,dtype,m,n", [
    ("softmax", "bfloat16", 30011, 7), ("softmax", "float32", 40009, 9), ("softmax", "float16", 9001, 12),
    ("residual_layernorm_gelu", "bfloat16", 30011, 7), ("residual_layernorm_gelu", "float32", 40009, 3),
    ("residual_layernorm_gelu", "float16", 9001, 13)])
def test_gpu_race_against_rows(workload, dtype, m, n):
    """The registered op races its rows kernel(s) and the group kernel, then runs the winner."""
    _gpu_or_skip()
    reg = discover()
    wl, impl = reg.workloads[workload], reg.get(workload, "triton")
    case = Case.make(workload, dtype, M=m, N=n)
    for _ in range(2):  # the race, then the winner alone
        inputs = wl.make_inputs(case, "cuda", SEED)
        ref = wl.reference(case, inputs)
        verify.poison_allocator("cuda", int(ref.numel()) * inputs["x"].element_size())
        out = impl.fn(**inputs)
        torch.cuda.synchronize()
        res = verify.check_case(wl, case, out, ref, impl, inputs)
        assert res.correct, f"{case} seed={SEED} config={impl.config(case)}: {res.message}"
    text = impl.config(case)
    assert "head to head" in text and "rows" in text and "groups G=" in text, text
