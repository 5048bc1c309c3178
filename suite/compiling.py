"""torch.compile variants of a workload's eager function, registered together.

- ``compile``: default mode, static shapes: like a user's code, it recompiles
  for every new shape, and the recompilation shows up in ``compile_s``.
- ``compile:dynamic``: ``dynamic=True``, one artifact serving many shapes.
- ``compile:max-autotune``: Inductor's autotuned templates, without Inductor's
  own CUDA graphs, since the harness owns graph capture (``--timer graph``)
  and a graph inside a graph cannot be captured.
"""
from __future__ import annotations

import functools
import types
from typing import Callable

from suite.workload import REGISTRY, Case, register

VARIANTS = {
    "compile": dict(dynamic=False),
    "compile:dynamic": dict(dynamic=True),
    "compile:max-autotune": dict(dynamic=False, mode="max-autotune-no-cudagraphs"),
}


def _raise_recompile_limits() -> None:
    import torch._dynamo.config as cfg

    # A sweep visits dozens of shapes x dtypes; past the default limit Dynamo
    # silently falls back to eager, which would be timed as "compile".
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), 4096))


def _fresh_copy(fn: Callable, tag: str) -> Callable:
    """A function with its own code object, so each variant has its own Dynamo cache."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    copy = types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)
    return functools.update_wrapper(copy, fn)


def _available(device: str) -> str | None:
    try:
        import torch

        if not hasattr(torch, "compile"):
            return "this torch has no torch.compile"
    except Exception as exc:
        return f"torch import failed: {exc}"
    if device == "cuda":
        from suite.backends import needs_triton

        return needs_triton(device)  # Inductor's GPU code is Triton
    return None


def register_compiled(workload: str, fn: Callable,
                      supports: Callable[[Case], str | None] | None = None) -> None:
    # held to the bound of the function it compiles: Inductor may leave that
    # chain's roundings as they are
    rounding = next((i.rounding for i in REGISTRY.impls.values()
                     if i.workload == workload and i.fn is fn), None)
    for name, options in VARIANTS.items():
        tag = name.replace(":", "_").replace("-", "_")
        state: dict[str, Callable] = {}

        def compiled(_options=options, _tag=tag, _state=state, **inputs):
            if "fn" not in _state:
                import torch

                _raise_recompile_limits()
                _state["fn"] = torch.compile(_fresh_copy(fn, _tag), **_options)
            return _state["fn"](**inputs)

        extra = {"supports": supports} if supports else {}
        if rounding is not None:
            extra["rounding"] = rounding
        if options.get("mode"):
            # Autotuning costs 15-60 s per new shape on an H200 (measured), too
            # much for a sweep: it runs when named with --impls.
            extra["in_default_sweep"] = False
        register(workload, name, available=_available,
                 description=f"torch.compile({fn.__name__}, {options})", **extra)(compiled)
