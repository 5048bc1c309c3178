"""Without a GPU the CUDA backend says so and never tries to build."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from implementations._shared import cuda_ext, row_plans
from suite import cuda_build
from suite.workload import discover

# every workload has a CUDA backend; the test covers whatever is registered
EXPECTED = {("gelu", "cuda"), ("gelu", "cuda:scalar"), ("residual_layernorm_gelu", "cuda"),
            ("softmax", "cuda"), ("gemm", "cuda"), ("gemm", "cuda:naive"), ("gemm", "cuda:tf32x3"),
            ("gemm", "cuda:wgmma"), ("attention", "cuda")}


def test_cpu_device_is_unavailable():
    assert cuda_build.cuda_available("cpu") == "needs a CUDA GPU"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_no_gpu_reports_unavailable_without_building(monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("tried to build a CUDA extension on a machine without a GPU")

    monkeypatch.setattr(cuda_build, "load", no_build)
    monkeypatch.setattr("torch.utils.cpp_extension.load", no_build)
    registry = discover()
    cuda_impls = {key for key, impl in registry.impls.items() if impl.backend == "cuda"}
    assert EXPECTED <= cuda_impls
    for wl, name in sorted(cuda_impls):
        assert (wl, "cuda") not in registry.broken, registry.broken[(wl, "cuda")]
        impl = registry.get(wl, name)
        for device in ("cuda", "cpu"):
            reason = impl.check_available(device)
            assert reason, f"{wl}/{name} claims to be available on {device} without a GPU"
    assert not any(cuda_build.is_loaded(n) for n in registry.workloads)


def test_flags_are_defined_once_and_precise():
    # No fast math (see the comment in cuda_build); the debug switch swaps -O3 for -G -O0.
    assert "--use_fast_math" not in cuda_build.COMMON_CUDA_FLAGS
    assert {"-O3", "-lineinfo", "-std=c++17"} <= set(cuda_build.COMMON_CUDA_FLAGS)
    assert {"-G", "-O0"} <= set(cuda_build.DEBUG_CUDA_FLAGS)


def test_debug_switch_and_hopper_arch(monkeypatch):
    monkeypatch.setattr("torch.cuda.get_device_capability", lambda *a: (9, 0))
    monkeypatch.delenv("KSUITE_CUDA_DEBUG", raising=False)
    cuda, _ = cuda_build.build_flags()
    assert "-O3" in cuda and "-G" not in cuda
    assert "-gencode=arch=compute_90,code=sm_90" in cuda
    assert "-gencode=arch=compute_90a,code=sm_90a" in cuda_build.build_flags(hopper=True)[0]
    monkeypatch.setenv("KSUITE_CUDA_DEBUG", "1")
    cuda, cxx = cuda_build.build_flags()
    assert {"-G", "-O0"} <= set(cuda) and "-O3" not in cuda and "-O0" in cxx
    monkeypatch.setattr("torch.cuda.get_device_capability", lambda *a: (8, 0))
    with pytest.raises(RuntimeError, match="sm_90"):
        cuda_build.build_flags(hopper=True)


def test_cache_key_follows_sources_and_flags(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text("// v1\n")
    key = cuda_build._fingerprint([src], ["-O3"])
    assert key == cuda_build._fingerprint([src], ["-O3"])
    assert key != cuda_build._fingerprint([src], ["-O0"])
    (tmp_path / "k.cuh").write_text("// a header beside the source\n")
    with_header = cuda_build._fingerprint([src], ["-O3"])
    assert with_header != key
    src.write_text("// v2\n")
    assert cuda_build._fingerprint([src], ["-O3"]) != with_header


def test_cache_key_follows_headers_under_include_dirs(tmp_path):
    src = tmp_path / "src" / "k.cu"
    src.parent.mkdir()
    src.write_text("// v1\n")
    inc = tmp_path / "include"
    (inc / "lib").mkdir(parents=True)
    header = inc / "lib" / "helpers.cuh"
    header.write_text("// v1\n")
    key = cuda_build._fingerprint([src], ["-O3"], [inc])
    assert key != cuda_build._fingerprint([src], ["-O3"])
    header.write_text("// v2\n")
    assert cuda_build._fingerprint([src], ["-O3"], [inc]) != key


def test_workload_builds_put_the_shared_headers_on_the_include_path(monkeypatch):
    seen = {}

    def fake_load(name, sources, hopper=False, fakes=None, include_dirs=()):
        seen[name] = list(include_dirs)
        return "ops"

    monkeypatch.setattr(cuda_build, "load", fake_load)
    extra = Path("/somewhere/else")
    assert cuda_ext.load("k", [], include_dirs=[extra]) == "ops"
    assert seen["k"] == [cuda_ext.INCLUDE_DIR, extra]
    assert (cuda_ext.INCLUDE_DIR / "ksuite" / "common.cuh").is_file()


@pytest.mark.parametrize("n,size,staged,plan", [
    (1, 4, 4, "registers: 1 lanes"), (781, 4, 4, "registers: block of 128"),
    (128, 2, 2, "registers: 4 lanes"), (8195, 4, 4, "cluster of 1 "),
    (16384, 2, 2, "registers: block of 512"), (32768, 2, 2, "registers: block of 1024"),
    (32768, 2, 4, "registers: block of 1024"), (131072, 4, 4, "cluster of 8 "),
    (600_000, 4, 4, "two reads")])
def test_row_plan_picks_the_plan_by_row_width(n, size, staged, plan):
    assert row_plans.row_plan(n, size, staged).startswith(plan)
