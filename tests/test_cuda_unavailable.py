"""Without a GPU the CUDA backend says so and never tries to build."""
from __future__ import annotations

import pytest
import torch

from suite import cuda_build
from suite.workload import discover

CUDA_IMPLS = [("gelu", "cuda"), ("gelu", "cuda:scalar"), ("residual_layernorm_gelu", "cuda"),
              ("softmax", "cuda")]


def test_cpu_device_is_unavailable():
    assert cuda_build.cuda_available("cpu") == "needs a CUDA GPU"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_no_gpu_reports_unavailable_without_building(monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("tried to build a CUDA extension on a machine without a GPU")

    monkeypatch.setattr(cuda_build, "load", no_build)
    monkeypatch.setattr("torch.utils.cpp_extension.load", no_build)
    registry = discover()
    for wl, name in CUDA_IMPLS:
        assert (wl, "cuda") not in registry.broken, registry.broken[(wl, "cuda")]
        impl = registry.get(wl, name)
        for device in ("cuda", "cpu"):
            reason = impl.check_available(device)
            assert reason, f"{wl}/{name} claims to be available on {device} without a GPU"
    assert not any(cuda_build.is_loaded(n) for n in ("gelu", "residual_layernorm_gelu", "softmax"))


def test_flags_are_defined_once_and_precise():
    # No fast math (see the comment in cuda_build); the debug switch swaps -O3 for -G -O0.
    assert "--use_fast_math" not in cuda_build.COMMON_CUDA_FLAGS
    assert {"-O3", "-lineinfo", "-std=c++17"} <= set(cuda_build.COMMON_CUDA_FLAGS)
    assert {"-G", "-O0"} <= set(cuda_build.DEBUG_CUDA_FLAGS)
