"""CI without a GPU: every .cu under implementations/ must compile for the H200.

nvcc builds each file to an object for sm_90a with torch's headers and the
same defines the real extension build uses, so a syntax or type error in any
kernel (including ones added later: the list is a glob) fails here.  The
shared headers (implementations/_shared/cuda) are on the include path, as
in the real build.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from implementations._shared import cuda_ext
from suite import cuda_build

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "implementations").rglob("*.cu"))

needs_nvcc = pytest.mark.skipif(cuda_build.nvcc_path() is None, reason="nvcc not installed")


def _compile(source: Path) -> tuple[Path, str | None, float]:
    start = time.perf_counter()
    try:
        cuda_ext.compile_check(source, arch="sm_90a")
        err = None
    except Exception as exc:
        err = str(exc)
    return source, err, time.perf_counter() - start


@pytest.fixture(scope="module")
def compiled() -> dict[Path, tuple[str | None, float]]:
    # nvcc of a torch-including .cu is ~30 s of mostly single-threaded work;
    # two at a time matches the CI's two cores.
    with ThreadPoolExecutor(max_workers=2) as pool:
        return {src: (err, secs) for src, err, secs in pool.map(_compile, SOURCES)}


def test_sources_found():
    assert SOURCES, "no .cu files under implementations/"


@needs_nvcc
@pytest.mark.parametrize("source", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_compiles_for_sm90a(source, compiled):
    err, secs = compiled[source]
    assert err is None, err


@needs_nvcc
def test_broken_source_fails(tmp_path):
    # The check itself must be able to fail: a type error in device code.
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* y) { int2 p = y; }\n")
    with pytest.raises(RuntimeError, match="nvcc failed"):
        cuda_build.nvcc_compile_check(bad)


@needs_nvcc
def test_broken_host_code_fails(tmp_path):
    # The check stops before g++ generates host code; nvcc's front end must
    # still reject a type error in host code.
    bad = tmp_path / "bad_host.cu"
    bad.write_text("void launch(float* y) { double* d = y; (void)d; }\n")
    with pytest.raises(RuntimeError, match="nvcc failed"):
        cuda_build.nvcc_compile_check(bad)
