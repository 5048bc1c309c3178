"""Availability checks shared by implementations of the same backend."""
from __future__ import annotations

import functools
import os


def needs_cuda(device: str) -> str | None:
    if device != "cuda":
        return "needs a CUDA GPU"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch"
    return None


def has_cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:
        return False


def interpret_triton_without_gpu() -> None:
    """Run Triton kernels under its interpreter where there is no GPU.

    Must be called before any Triton kernel is defined (test and benchmark
    session set-up); on a GPU machine it leaves the environment alone.
    """
    if not has_cuda():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


@functools.lru_cache(maxsize=None)
def _triton_import_error() -> str | None:
    try:
        import triton  # noqa: F401
        import triton.language  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"triton cannot be imported: {exc}"
    return None


def needs_triton(device: str) -> str | None:
    """Triton runs on a CUDA GPU, or on the CPU under TRITON_INTERPRET=1."""
    err = _triton_import_error()
    if err:
        return err
    if device == "cpu":
        return None if interpreting() else "Triton on the CPU needs TRITON_INTERPRET=1"
    return needs_cuda(device)


def needs_hopper(device: str) -> str | None:
    err = needs_cuda(device)
    if err:
        return err
    import torch

    major, minor = torch.cuda.get_device_capability()
    if major != 9:
        return f"needs a Hopper GPU (sm_90); this one is sm_{major}{minor}"
    return None


def dtype_in(*names: str):
    """A `supports` check that accepts only the given dtypes."""

    def supports(case) -> str | None:
        if case.dtype not in names:
            return f"{case.dtype} not supported (only {', '.join(names)})"
        return None

    return supports
