"""CI without a GPU: every .cu under implementations/ must compile for the H200.

nvcc builds each file for sm_90a with torch's headers and the same defines
the real extension build uses, so a syntax or type error in any kernel
(including ones added later: the list is a glob) fails here.  The shared
headers (implementations/_shared/cuda) are on the include path, as in the
real build.

Parsing torch's headers costs nvcc about 30 CPU-seconds a file (once in its
host pass, once in its device pass), most of this check's time.  So the
files that include them are compiled together, as one translation unit that
#includes each (their internal names are kept distinct for that); where that
unit fails, each of its files is compiled alone, so an error names its file.
The files that include no torch header are compiled one by one.
"""
from __future__ import annotations

import re
import tempfile
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


TORCH_INCLUDE = re.compile(r"^\s*#\s*include\s*<(torch|ATen|c10)/", re.M)


def includes_torch(source: Path) -> bool:
    return bool(TORCH_INCLUDE.search(source.read_text()))


def _compile_together(sources: list[Path]) -> dict[Path, tuple[str | None, float]]:
    """One translation unit #including every source; on failure, each source alone."""
    with tempfile.TemporaryDirectory(prefix="ksuite-unit-") as tmp:
        unit = Path(tmp) / "together.cu"
        unit.write_text("".join(f'#include "{s}"\n' for s in sources))
        _, err, secs = _compile(unit)
    if err is None:
        return {s: (None, secs) for s in sources}
    return {src: (e, t) for src, e, t in map(_compile, sources)}


@pytest.fixture(scope="module")
def compiled() -> dict[Path, tuple[str | None, float]]:
    # nvcc is mostly single-threaded: the torch unit on one thread, the other
    # files on a second, matching the CI's two cores.
    heavy = [s for s in SOURCES if includes_torch(s)]
    light = [s for s in SOURCES if s not in heavy]
    with ThreadPoolExecutor(max_workers=2) as pool:
        together = pool.submit(_compile_together, heavy)
        alone = {src: (err, secs) for src, err, secs in pool.map(_compile, light)}
        return {**alone, **together.result()}


def test_sources_found():
    assert SOURCES, "no .cu files under implementations/"


@needs_nvcc
@pytest.mark.parametrize("source", SOURCES, ids=[str(p.relative_to(ROOT)) for p in SOURCES])
def test_compiles_for_sm90a(source, compiled):
    err, secs = compiled[source]
    assert err is None, err


@needs_nvcc
def test_a_broken_file_in_the_unit_is_named_alone(tmp_path):
    """Compiled together with a good file, a broken one fails the unit, and the
    fallback names the broken file only."""
    good, bad = tmp_path / "good.cu", tmp_path / "bad.cu"
    good.write_text("__global__ void k(float* y) { y[0] = 1.0f; }\n")
    bad.write_text("__global__ void k2(float* y) { int2 p = y; }\n")
    out = _compile_together([good, bad])
    assert out[good][0] is None and out[bad][0] and "bad.cu" in out[bad][0]


def test_every_torch_source_is_found(tmp_path):
    assert {s.name for s in SOURCES if includes_torch(s)} >= {"gelu.cu", "softmax.cu", "gemm_wgmma.cu"}
    plain = tmp_path / "plain.cu"
    plain.write_text('#include "ksuite/common.cuh"\n// #include <torch/extension.h> in a comment\n')
    assert not includes_torch(plain)


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
