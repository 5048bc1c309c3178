"""The GPU-only measurement scripts under benchmarks/ explain themselves and
refuse a machine without a GPU with a clear message (their measurements run
on the device; see results/h200/diagnostics)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from implementations._shared import cuda_ext
from suite import cuda_build, verify

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module,words,option", [
    ("benchmarks.gemm_clocks", "SM clock and board power", "--seconds"),
    ("benchmarks.mma_feed", "consumer loop", "--stages"),
])
def test_script_help(module, words, option):
    proc = _run(module, "--help")
    assert proc.returncode == 0, proc.stderr
    assert words in proc.stdout and option in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU message")
@pytest.mark.parametrize("args", [("benchmarks.gemm_clocks", "--seconds", "1"), ("benchmarks.mma_feed",),
                                  ("benchmarks.softmax_pipe_probe",), ("benchmarks.rlg_pipe_probe",),
                                  ("benchmarks.rlg_smem_probe",), ("benchmarks.rlg_prefetch_probe",),
                                  ("benchmarks.gelu_midsize",), ("benchmarks.sampler_overhead",),
                                  ("benchmarks.gemm_order",), ("benchmarks.gemm_ksweep",),
                                  ("benchmarks.l2_flush_probe",), ("benchmarks.rlg_placement",),
                                  ("benchmarks.softmax_short_rows",)])
def test_script_without_a_gpu(args):
    proc = _run(*args)
    assert proc.returncode != 0
    assert "needs a CUDA GPU" in proc.stderr


def _script(name: str) -> subprocess.CompletedProcess:
    """A script run as a file, compiled for sm_90 rather than interpreted."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the compile-only form")
def test_rlg_wide_rows_quarters_fit_without_spills():
    """The whole float32 row on 32 warps that rlg_wide_rows times fits 64 registers."""
    proc = _script("rlg_wide_rows.py")
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("*fp32") and "warps 32 " in line]
    assert len(lines) == 2 and all(line.endswith("spill bytes 0") for line in lines), proc.stdout


def test_triton_clusters_probe_reports_each_cluster_size():
    proc = _script("triton_clusters_probe.py")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 x 32768, num_ctas=1: compiles" in proc.stdout
    assert all(f"{shape}, num_ctas={n}:" in proc.stdout
               for shape in ("1 x 32768", "2 x 16384", "8 x 4096") for n in (1, 2, 4))
    assert "gluon 1 x 32768, cga_layout over 1 CTA: compiles" in proc.stdout
    assert all(f"gluon 1 x 32768, cga_layout over {n} CTAs:" in proc.stdout for n in (2, 4))


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter form")
@pytest.mark.parametrize("dtype,pairs,n", [(torch.float32, False, 50), (torch.bfloat16, True, 48),
                                           (torch.bfloat16, False, 33), (torch.float32, False, 32)])
@pytest.mark.parametrize("static,early", [(False, False), (True, False), (False, True)],
                         ids=["tickets", "static", "early"])
def test_softmax_pipe_probe_kernel_on_the_cpu(dtype, pairs, n, static, early):
    """The persistent softmax that softmax_pipe_probe times, under the
    interpreter: one program takes every ticket, so rows of at most two
    32-column chunks (ragged last chunk included) keep each of its waits on
    chunks it has itself published; the output starts as NaN."""
    from benchmarks.softmax_pipe_probe import pipe

    x = torch.randn(5, n, dtype=dtype) * 3
    out = torch.full_like(x, float("nan"))
    y, _ = pipe(x, 32, 4, 1, pairs, out=out, programs=1, static=static, early=early)
    assert y is out
    tol = {torch.float32: 1e-5, torch.bfloat16: 1.6e-2}[dtype]  # the softmax workload's tolerances
    assert verify.check(y, torch.softmax(x.double(), -1), tol).correct


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter form")
@pytest.mark.parametrize("dtype,n", [(torch.float32, 50), (torch.bfloat16, 64), (torch.float32, 32)])
@pytest.mark.parametrize("early", [False, True], ids=["wait", "early"])
def test_rlg_pipe_probe_kernel_on_the_cpu(dtype, n, early):
    """The persistent residual_layernorm_gelu that rlg_pipe_probe times, under
    the interpreter (one program, rows of at most two 32-column chunks, a
    ragged last one included), against the workload's float64 reference."""
    from benchmarks.rlg_pipe_probe import pipe
    from suite.workload import Case, discover

    wl = discover().workloads["residual_layernorm_gelu"]
    case = Case.make("residual_layernorm_gelu", str(dtype).removeprefix("torch."), M=5, N=n)
    inp = wl.make_inputs(case, "cpu", n)
    out = torch.full_like(inp["x"], float("nan"))
    y, _ = pipe(inp["x"], inp["r"], inp["weight"], inp["bias"], inp["eps"], 32, 4, early=early, out=out,
                programs=1)
    assert y is out
    assert verify.check(y, wl.reference(case, inp), wl.tolerance(case)).correct


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter form")
@pytest.mark.parametrize("m,n,programs", [(5, 64, 2), (3, 50, 2), (1, 64, 2)])
@pytest.mark.parametrize("eager", [False, True], ids=["late", "eager"])
def test_rlg_prefetch_probe_rotating_kernel_on_the_cpu(m, n, programs, eager):
    """The persistent kernel rlg_prefetch_probe times, under the interpreter
    (two programs walking 5 rows, a ragged row, a program with no row), against
    the workload's float64 reference, into a NaN-filled output."""
    from benchmarks.rlg_prefetch_probe import rot
    from suite.workload import Case, discover

    wl = discover().workloads["residual_layernorm_gelu"]
    case = Case.make("residual_layernorm_gelu", "bfloat16", M=m, N=n)
    inp = wl.make_inputs(case, "cpu", m * n)
    out = torch.full_like(inp["x"], float("nan"))
    y, _ = rot(inp["x"], inp["r"], inp["weight"], inp["bias"], inp["eps"], 1, eager, out=out, programs=programs)
    assert y is out
    assert verify.check(y, wl.reference(case, inp), wl.tolerance(case)).correct


def test_mma_feed_rejects_a_bad_stage_count():
    proc = _run("benchmarks.mma_feed", "--stages", "0")
    assert proc.returncode == 2 and "--stages must be at least 1" in proc.stderr


@pytest.mark.skipif(cuda_build.nvcc_path() is None, reason="nvcc not installed")
def test_mma_feed_source_compiles():
    """mma_feed.cu includes the GEMM's own headers (warp_tile.cuh, hopper.cuh):
    a change there that breaks it fails here, not on the device."""
    cuda_ext.compile_check(ROOT / "benchmarks" / "mma_feed.cu",
                           include_dirs=[ROOT / "implementations" / "gemm" / "cuda"])


@pytest.mark.parametrize("call,smem", [
    ("'bfloat16', 8192, 16, True", 4 * 8192 * 2),  # h in 16 bits
    ("'bfloat16', 8192, 16, True, stages=4", 4 * 8192 * 2 + 2 * 4 * 8192 * 2),  # and the x, r ring
    ("'float32', 2048, 16, False, stages=4", 16 * 2048 * 4 + 2 * 4 * 2048 * 4),
])
def test_rlg_smem_probe_kernels_compile_for_sm90(call, smem):
    """The Gluon kernels rlg_smem_probe times compile for the H200 without a
    GPU: the shared memory they were measured with, at most 128 registers, no
    spills, 16-byte global accesses (the interpreter runs no Gluon)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", "from benchmarks.rlg_smem_probe import sm90_resources as f; "
                           f"print(*f({call}))"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0 and "no ptxas" in proc.stderr:
        pytest.skip(proc.stderr.strip().splitlines()[-1])
    assert proc.returncode == 0, proc.stderr[-2000:]
    regs, spills, shared, wide = proc.stdout.split()
    assert int(regs) <= 128 and int(spills) == 0 and wide == "True"
    assert smem <= int(shared) < smem + 4096  # and the reductions' scratch
