"""ksuite/rows.cuh's any-alignment helpers (split_row, join_words) and the
index map of residual_layernorm_gelu's plans 18 and 19, checked on the CPU:
tests/ksuite_rows_check.cu, built by nvcc as a host program and run (no GPU).
Every column of a row written once at every misalignment, packs on 16-byte
boundaries, the 16 bytes at any element put together from the words read."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from implementations._shared import cuda_ext
from suite import cuda_build

SOURCE = Path(__file__).with_name("ksuite_rows_check.cu")

needs_nvcc = pytest.mark.skipif(cuda_build.nvcc_path() is None, reason="nvcc not installed")


@needs_nvcc
def test_row_split_and_word_join_on_the_host(tmp_path):
    exe = tmp_path / "ksuite_rows_check"
    cuda_build.nvcc_host_program(SOURCE, exe, include_dirs=[cuda_ext.INCLUDE_DIR])
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr

