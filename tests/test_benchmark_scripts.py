"""The GPU-only measurement scripts under benchmarks/ explain themselves and
refuse a machine without a GPU with a clear message (their measurements run
on the device; see results/h200/diagnostics)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_gemm_clocks_help():
    proc = _run("benchmarks.gemm_clocks", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "SM clock and board power" in proc.stdout and "--seconds" in proc.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU message")
def test_gemm_clocks_without_a_gpu():
    proc = _run("benchmarks.gemm_clocks", "--seconds", "1")
    assert proc.returncode != 0
    assert "needs a CUDA GPU" in proc.stderr
