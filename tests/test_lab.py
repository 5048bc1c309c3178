"""Smoke tests of the probes under lab/ (their measurements run on a GPU; their
outputs are in lab/findings): each one parses its arguments and refuses a
machine without a GPU with a clear message, the shared helpers compute what
they say, the pipe probes' kernels are right under the interpreter, and
nothing outside lab/ imports it.  Everything here runs in-process, a few
seconds at most each."""
from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from suite import verify
from tests.helpers import check_softmax

ROOT = Path(__file__).resolve().parents[1]

# Each probe that times on the GPU, and the arguments its entry point takes
# (None: a ``bench()`` without arguments).
GPU_PROBES = {
    "energy_counter": [], "gelu_midsize": None, "gemm_clocks": ["--seconds", "1"], "gemm_ksweep": None, "gemm_order": None,
    "l2_flush_probe": None, "mma_feed": [], "mma_peak": [], "rlg_eviction": None, "rlg_pipe_probe": None,
    "rlg_placement": None, "rlg_prefetch_probe": None, "rlg_smem_probe": None, "sampler_overhead": None,
    "softmax_pipe_probe": None, "softmax_short_rows": None, "power_settle": ["--trials", "1"],
    "gemm_persistent_tiles": None, "softmax_two_pass": None, "gemm_split_tail": None, "skinny_probe": [], "gemm_mma_split": None,
    "softmax_tiny_flat": None, "softmax_tiny_gluon": None, "warp_rows_probe": None, "attention_gluon": [], "rlg_ring": [], "size_ceilings": [], "gemm_pingpong": [],
    "gemm_row_align": [], "skinny_tma": [], "attention_tf32x3": [],
}


def test_every_gpu_probe_is_listed_here():
    """A probe added to lab/ without a smoke test here fails this."""
    others = {"__init__", "_probe", "_attention_next_qk", "_gluon_pingpong", "_rlg_ring", "attention_occupancy", "dashboard_perf", "gate_noise", "gemm_ncu_pair", "interp_fuzz", "ncu_heat", "ncu_rows", "rlg_fit_rows", "live_cols",
              "rlg_wide_rows", "triton_clusters_probe"}
    assert {p.stem for p in (ROOT / "lab").glob("*.py")} - others == set(GPU_PROBES)


@pytest.mark.parametrize("module,words,option", [
    ("gemm_clocks", "SM clock and board power", "--seconds"),
    ("mma_feed", "consumer loop", "--stages"),
    ("mma_peak", "mma.sync", "--out"),
    ("dashboard_perf", "How fast the dashboard answers", "--runs"),
    ("gate_noise", "unchanged kernels move between committed runs", "--dir"),
])
def test_probe_help(module, words, option, capsys):
    mod = importlib.import_module(f"lab.{module}")
    with pytest.raises(SystemExit) as exc:
        mod.main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0 and words in out and option in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU message")
@pytest.mark.parametrize("module", sorted(GPU_PROBES))
def test_probe_without_a_gpu(module, capsys):
    mod = importlib.import_module(f"lab.{module}")
    args = GPU_PROBES[module]
    try:
        code = mod.bench() if args is None else mod.main(args)
        said = capsys.readouterr().err
    except SystemExit as exc:
        code, said = exc.code, str(exc.code)
    assert code not in (0, None) and "needs a CUDA GPU" in said, (code, said)


def test_mma_feed_rejects_a_bad_stage_count(capsys):
    from lab import mma_feed

    with pytest.raises(SystemExit) as exc:
        mma_feed.main(["--stages", "0"])
    assert exc.value.code == 2 and "--stages must be at least 1" in capsys.readouterr().err


def test_gemm_ncu_pair_explains_itself_and_needs_a_gpu(capsys):
    from lab import gemm_ncu_pair

    assert gemm_ncu_pair.main(["cublas", "1", "2", "3"]) == 2
    assert "wgmma-T" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert gemm_ncu_pair.main(["blas", "64", "64", "64"]) == 1
        assert "needs a CUDA GPU" in capsys.readouterr().err


def test_ncu_rows_explains_itself_without_its_four_arguments(capsys):
    from lab import ncu_rows

    assert ncu_rows.main(["softmax-cuda-19"]) == 2
    assert "softmax-triton-split" in capsys.readouterr().err


def test_spread_is_median_and_nearest_rank_quantiles():
    from lab._probe import spread

    assert spread([5.0, 1.0, 4.0, 2.0, 3.0]) == "3.000 [2.000, 5.000]"
    assert spread([1.0, 2.0, 3.0, 4.0], ".1f") == "2.5 [1.0, 4.0]"


@pytest.mark.parametrize("regs,warps,want", [(64, 4, 8), (255, 4, 2), (40, 16, 3), (24, 16, 4), (32, 1, 32)])
def test_fit_counts_programs_an_sm_holds(regs, warps, want):
    from lab._probe import fit

    kernel = SimpleNamespace(n_regs=regs, _init_handles=lambda: None)
    assert fit(kernel, warps) == want


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter form")
@pytest.mark.parametrize("dtype,pairs,n,static,early", [
    (torch.float32, False, 50, False, False),  # a ragged last chunk, tickets
    (torch.bfloat16, True, 48, True, False),  # 16-bit pairs, a static grid
    (torch.bfloat16, False, 33, False, True),  # early writes
], ids=["tickets", "static", "early"])
def test_softmax_pipe_probe_kernel_on_the_cpu(dtype, pairs, n, static, early):
    """The persistent softmax that softmax_pipe_probe times, under the
    interpreter: one program takes every ticket, so rows of at most two
    32-column chunks keep each of its waits on chunks it has itself
    published; the output starts as NaN."""
    from lab.softmax_pipe_probe import pipe

    x = torch.randn(5, n, dtype=dtype) * 3
    out = torch.full_like(x, float("nan"))
    y, _ = pipe(x, 32, 4, 1, pairs, out=out, programs=1, static=static, early=early)
    assert y is out
    assert check_softmax(y, x).correct


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter form")
@pytest.mark.parametrize("dtype,m,n", [(torch.float32, 300, 7), (torch.bfloat16, 517, 5), (torch.bfloat16, 77, 16),
                                       (torch.float32, 129, 3)])
def test_softmax_tiny_flat_kernel_on_the_cpu(dtype, m, n):
    """The flat tiny-row softmax softmax_tiny_flat times, under the interpreter: full blocks
    and a partial last one, into a NaN-filled output."""
    from lab.softmax_tiny_flat import flat_softmax

    x = torch.randn(m, n, dtype=dtype) * 3
    out = torch.full_like(x, float("nan"))
    y = flat_softmax(x, 64, 4, out=out)
    assert y is out
    assert check_softmax(y, x).correct


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter form")
def test_interp_fuzz_runs_every_variant_and_reports_a_wrong_one(monkeypatch, capsys):
    """interp_fuzz (CPU, interpreter) at one shape: every variant passes; with a
    kernel argument sabotaged (LIVE one column short) it prints a failure line
    and exits 1."""
    from implementations.residual_layernorm_gelu import triton as R
    from lab import interp_fuzz

    args = ["--seed", "5", "--shapes", "1", "--workloads", "gelu,residual_layernorm_gelu", "--dtypes", "bfloat16"]
    assert interp_fuzz.main(args) == 0
    out = capsys.readouterr().out
    assert "total: " in out and ", 0 failures" in out and "FAIL" not in out
    monkeypatch.setattr(R, "live_cols", lambda n, b: n - 1)
    assert interp_fuzz.main(args) == 1
    assert "FAIL seed=5 residual_layernorm_gelu triton [kernel=rows" in capsys.readouterr().out
    monkeypatch.delenv("TRITON_INTERPRET")
    assert interp_fuzz.main(args) == 2


def _rlg_inputs(dtype: str, m: int, n: int):
    from suite.workload import Case, discover

    wl = discover().workloads["residual_layernorm_gelu"]
    case = Case.make("residual_layernorm_gelu", dtype, M=m, N=n)
    inp = wl.make_inputs(case, "cpu", m * n)
    ref = wl.reference(case, inp)
    return inp, lambda y: verify.check_case(wl, case, y, ref, inputs=inp)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter form")
@pytest.mark.parametrize("dtype,n,early", [("float32", 50, False), ("bfloat16", 64, True)])
def test_rlg_pipe_probe_kernel_on_the_cpu(dtype, n, early):
    """The persistent residual_layernorm_gelu that rlg_pipe_probe times, under
    the interpreter (one program, rows of at most two 32-column chunks, a
    ragged last one included), against the workload's float64 reference."""
    from lab.rlg_pipe_probe import pipe

    inp, verdict = _rlg_inputs(dtype, 5, n)
    out = torch.full_like(inp["x"], float("nan"))
    y, _ = pipe(inp["x"], inp["r"], inp["weight"], inp["bias"], inp["eps"], 32, 4, early=early, out=out,
                programs=1)
    assert y is out
    assert verdict(y).correct


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter form")
@pytest.mark.parametrize("m,n,eager", [(5, 64, True), (3, 50, False), (1, 64, False)])
def test_rlg_prefetch_probe_rotating_kernel_on_the_cpu(m, n, eager):
    """The persistent kernel rlg_prefetch_probe times, under the interpreter
    (two programs walking the rows, a ragged row, a program with no row), against the workload's
    float64 reference, into a NaN-filled output."""
    from lab.rlg_prefetch_probe import rot

    inp, verdict = _rlg_inputs("bfloat16", m, n)
    out = torch.full_like(inp["x"], float("nan"))
    y, _ = rot(inp["x"], inp["r"], inp["weight"], inp["bias"], inp["eps"], 1, eager, out=out, programs=2)
    assert y is out
    assert verdict(y).correct


# ---------------------------------------------------------------- nothing imports lab
IMPORTS_LAB = re.compile(r"^\s*(from\s+lab(\.\w+)*\s+import\b|import\s+lab(\.\w+)*\s*(,|$|\bas\b))", re.M)
OUTSIDE = ("suite", "implementations", "dashboard", "benchmarks")


def test_the_import_pattern_finds_what_it_should():
    for line in ("from lab import _probe", "from lab._probe import spread", "import lab",
                 "    import lab.gelu_midsize as g", "import lab, os"):
        assert IMPORTS_LAB.search(line), line
    for line in ("from label import x", "import labels", "# see lab/findings", "from suite import lab_x"):
        assert not IMPORTS_LAB.search(line), line


def test_nothing_outside_lab_imports_it():
    files = [p for d in OUTSIDE for p in (ROOT / d).rglob("*.py")]
    assert len(files) > 20
    found = [f"{p.relative_to(ROOT)}: {m.group(0).strip()}" for p in files
             for m in IMPORTS_LAB.finditer(p.read_text(encoding="utf-8"))]
    assert found == []


def test_attention_occupancy_refuses_the_interpreter(monkeypatch, capsys):
    """The occupancy probe compiles for sm_90; under TRITON_INTERPRET it says so and exits 2."""
    from lab.attention_occupancy import main

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert main([]) == 2
    assert "without TRITON_INTERPRET" in capsys.readouterr().err
