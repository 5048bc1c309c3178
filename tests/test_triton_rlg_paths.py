"""residual_layernorm_gelu's split kernel (_rlg_split): the cooperative
one-read scheme (KIND "coop") and the looped one (KIND "loop").

On the CPU the interpreter cannot wait on other programs, so "coop" runs as
its two-launch form (statistics, then output) with the same arithmetic; the
GPU tests run the real one-read kernel, autotuned and with every candidate
forced once.
"""
from __future__ import annotations

import pytest
import torch

from suite import verify
from suite.workload import Case, discover
from tests.test_triton_memory import _check, poisoned  # noqa: F401 - poisoned is a fixture

WL = "residual_layernorm_gelu"
DTYPES = ("float32", "float16", "bfloat16")
cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="interpreter tests")


# (M, N, block): one element, ragged last chunks of 1 and 40, one chunk past a power of two
@cpu_only
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n,block", [(3, 1, 1), (3, 7, 2), (5, 1000, 64), (1, 4097, 1024)])
def test_coop_forced(m, n, block, dtype, poisoned):  # noqa: F811
    _check(WL, Case.make(WL, dtype, M=m, N=n), seed=m * n + 17, max_fused=1, block=block, kind="coop")


@cpu_only
def test_loop_forced(poisoned):  # noqa: F811
    for dtype in DTYPES:
        _check(WL, Case.make(WL, dtype, M=3, N=1000), seed=23, max_fused=1, block=64, kind="loop")


@cpu_only
@pytest.mark.parametrize("kind", ("coop", "loop"))
def test_merge_numerics(kind):
    """A constant row (variance 0: y = gelu(bias)) and rows whose mean is far
    from zero against their spread, h exact in float32 (r = 0), so only the
    statistics differ from the float64 reference."""
    reg = discover()
    wl, impl = reg.workloads[WL], reg.get(WL, "triton")
    case = Case.make(WL, "float32", M=3, N=1000)
    inputs = wl.make_inputs(case, "cpu", 29)
    g = torch.Generator().manual_seed(31)
    inputs["x"][0] = 3.7
    inputs["x"][1] = torch.randn(1000, generator=g) + 100.0  # (the float32 mean's rounding stays under tolerance)
    inputs["x"][2] = torch.randn(1000, generator=g) * 0.1 - 8.0
    inputs["r"].zero_()
    ref = wl.reference(case, inputs)
    out = impl.fn(**inputs, max_fused=1, block=64, kind=kind)
    for i in range(3):
        assert verify.relative_error(out[i], ref[i]) <= wl.tolerance(case), (i, verify.relative_error(out[i], ref[i]))


def test_split_candidates_and_plan():
    from implementations.residual_layernorm_gelu import triton as rlg

    for b in (2, 4):
        cands = rlg.candidates(4096, 32768, b)
        kinds = [c["KIND"] for c in cands]
        assert cands[0] == rlg.plan(4096, 32768, b) and kinds[0] == "coop" and "loop" in kinds
        for c in cands:
            if c["KIND"] == "coop":
                assert c["P_MAX"] == 1 << (-(-32768 // c["BLOCK"]) - 1).bit_length()
        # rows too long to split over COOP_MAX_PROGRAMS programs are looped over
        assert {c["KIND"] for c in rlg.candidates(8, 1 << 22, b)} == {"loop"}
        assert {c["KIND"] for c in rlg.candidates(4096, 32768, b, "loop")} == {"loop"}


_COMPILE = r"""
import json, os, re, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import implementations.residual_layernorm_gelu.triton as R

ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
jobs = {}
for n in (32768, 20001):
    for ty, b in (("*fp32", 4), ("*bf16", 2)):
        for c in R.candidates(4096, n, b):
            const = dict({k: v for k, v in c.items() if k not in ("kernel", "num_warps")}, EXACT=b == 4)
            jobs[(ty, n % 16, tuple(sorted(const.items())), c["num_warps"])] = (ty, n % 16 == 0, const, c["num_warps"])
out = []
for ty, n16, const, warps in jobs.values():
    sig = dict({k: ty for k in ("x_ptr", "r_ptr", "w_ptr", "b_ptr", "y_ptr")}, stats_ptr="*fp32",
               count_ptr="*i32", N="i32", eps="fp32", M_BUCKET="i32", **{k: "constexpr" for k in const})
    attrs = {(i,): [["tt.divisibility", 16]] for i in range(8 if n16 else 7)}  # pointers, and N where so
    k = triton.compile(ASTSource(fn=R._rlg_split, signature=sig, constexprs=const, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(k.asm["ptx"])
    log = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                         capture_output=True, text=True, check=True).stderr
    os.unlink(f.name)
    out.append({"config": f"{ty} N%16={int(not n16)} {const} w{warps}",
                "spill": int(re.search(r"(\d+) bytes spill stores", log).group(1))})
print(json.dumps(out))
"""


def test_split_candidates_compile_for_sm90_without_spills():
    """Every split candidate at 4096 x 32768 and an odd width, both kinds, for sm_90 with Triton's ptxas."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").exists():
        pytest.skip("no ptxas")
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "kernel-suite-triton-aot")
    proc = subprocess.run([sys.executable, "-c", _COMPILE, str(root)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(results) >= 20
    assert not [r for r in results if r["spill"]], [r for r in results if r["spill"]]


# --- GPU: the real one-read kernel ------------------------------------------------

gpu = pytest.mark.gpu


@gpu
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
@pytest.mark.parametrize("m,n", [(4096, 32768), (33, 20001), (5, 65537)])
def test_gpu_autotuned(m, n, dtype):
    from tests.test_gpu_triton_memory import _run

    case = Case.make(WL, dtype, M=m, N=n)
    _run(WL, case)
    config = discover().get(WL, "triton").config(case)
    assert "KIND=" in config and "(autotuned)" in config and "tried" in config, config
    torch.cuda.empty_cache()


@gpu
@pytest.mark.parametrize("dtype", ("float32", "bfloat16"))
def test_gpu_every_split_candidate(dtype):
    """Each candidate launched as the autotuner would (counters zeroed, MODE "coop" waiting for real)."""
    import triton

    from implementations.residual_layernorm_gelu import triton as rlg

    reg = discover()
    wl = reg.workloads[WL]
    m, n = 37, 20001
    case = Case.make(WL, dtype, M=m, N=n)
    inputs = wl.make_inputs(case, "cuda", 41)
    ref = wl.reference(case, inputs)
    x = inputs["x"]
    for c in rlg.candidates(m, n, x.element_size()):
        y = torch.full_like(x, float("nan"))
        stats = torch.empty(m * 2 * c["P_MAX"], device="cuda", dtype=torch.float32)
        count = torch.zeros(m + 1, device="cuda", dtype=torch.int32)
        grid = (m * triton.cdiv(n, c["BLOCK"]) if c["KIND"] == "coop" else m,)
        rlg._rlg_split[grid](x, inputs["r"], inputs["weight"], inputs["bias"], y, stats, count, n,
                             float(inputs["eps"]), triton.next_power_of_2(m), KIND=c["KIND"], BLOCK=c["BLOCK"],
                             P_MAX=c["P_MAX"], EXACT=x.element_size() == 4, EVICT=c["EVICT"],
                             num_warps=c["num_warps"])
        torch.cuda.synchronize()
        res = verify.check(y, ref, wl.tolerance(case))
        assert res.correct, f"{c}: {res.message}"


@gpu
@pytest.mark.parametrize("m,n,block", [(257, 3001, 1024), (300, 131072, 2048), (2, 1, 16), (9, 17, 16)])
def test_gpu_coop_forced(m, n, block):
    """Forced cooperative launches: up to 64 programs a row waiting on each other, one-element rows."""
    from tests.test_gpu_triton_memory import _run

    for dtype in ("float32", "bfloat16"):
        _run(WL, Case.make(WL, dtype, M=m, N=n), max_fused=1, block=block, kind="coop")
