"""Triton matmuls: a tiled autotuned kernel (exact float32, or TF32 / 3xTF32 when named so)
and a persistent TMA kernel for Hopper.  Kernels live in _triton_tiled.py and
_triton_persistent.py; this module registers them and remembers the config
each shape was tuned to, for the results' `config` column.
"""
from __future__ import annotations

from suite.backends import needs_hopper, needs_triton
from suite.workload import Case, itemsize, register

# (impl name, M, N, K, dtype) -> the config the autotuner settled on
_CHOSEN: dict[tuple, str] = {}


def _remember(name: str, a, b, description: str) -> None:
    _CHOSEN[(name, a.shape[0], b.shape[1], a.shape[1], str(a.dtype).removeprefix("torch."))] = description


def _config_of(name: str):
    def config(case: Case) -> str | None:
        return _CHOSEN.get((name, case["M"], case["N"], case["K"], case.dtype))

    return config


def _tiled_supports(case: Case) -> str | None:
    from implementations.gemm._triton_tiled import size_problem

    return size_problem(case["M"], case["N"], case["K"])


def _only_float32(case: Case) -> str | None:
    if case.dtype != "float32":
        return f"TF32 applies to float32 inputs only, not {case.dtype}"
    return _tiled_supports(case)


def _persistent_supports(case: Case) -> str | None:
    if case.dtype not in ("float16", "bfloat16"):
        return f"the TMA/wgmma kernel takes 16-bit inputs only, not {case.dtype}"
    from implementations.gemm._triton_persistent import alignment_problem

    return alignment_problem(case["K"], case["N"], itemsize(case.dtype))


@register("gemm", "triton", available=needs_triton, supports=_tiled_supports, config=_config_of("triton"),
          description="tiled Triton matmul, autotuned, grouped ordering; float32 exact (no TF32)")
def gemm_triton(a, b):
    from implementations.gemm._triton_tiled import matmul

    c, description = matmul(a, b, precision="ieee")
    _remember("triton", a, b, description)
    return c


@register("gemm", "triton:tf32", available=needs_triton, supports=_only_float32,
          config=_config_of("triton:tf32"), math="tf32", tolerance={"float32": 2e-3},
          description="tiled Triton matmul, float32 inputs on TF32 tensor cores")
def gemm_triton_tf32(a, b):
    from implementations.gemm._triton_tiled import matmul

    c, description = matmul(a, b, precision="tf32")
    _remember("triton:tf32", a, b, description)
    return c


@register("gemm", "triton:tf32x3", available=needs_triton, supports=_only_float32,
          config=_config_of("triton:tf32x3"), math="tf32x3",
          description="tiled Triton matmul, float32 on TF32 tensor cores as three products "
                      "(each operand a TF32 head plus a TF32 tail, tail x tail dropped); "
                      "checked at float32's tolerance")
def gemm_triton_tf32x3(a, b):
    from implementations.gemm._triton_tiled import matmul

    c, description = matmul(a, b, precision="tf32x3")
    _remember("triton:tf32x3", a, b, description)
    return c


def _hopper(device: str) -> str | None:
    err = needs_hopper(device)
    if err:
        return err if "Hopper" in err else f"needs a Hopper GPU (sm_90: TMA descriptors, wgmma): {err}"
    return needs_triton(device)


@register("gemm", "triton:persistent", available=_hopper, supports=_persistent_supports,
          config=_config_of("triton:persistent"),
          description="persistent Triton matmul on Hopper: TMA descriptors, ~1 program per SM; needs sm_90")
def gemm_triton_persistent(a, b):
    from implementations.gemm._triton_persistent import matmul

    c, description = matmul(a, b)
    _remember("triton:persistent", a, b, description)
    return c
