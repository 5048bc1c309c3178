"""Correctness against a float64 reference.

The measure is the normwise relative error ||out - ref|| / ||ref||, computed
in float64.  Anything not finite in the output fails: NaN never passes, and
since the harness poisons memory with NaN before the checked call, an element
the implementation never wrote fails too.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class Check:
    rel_err: float
    tol: float
    correct: bool
    message: str = ""


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    diff = out.to(torch.float64) - ref.to(torch.float64)
    den = torch.linalg.vector_norm(ref.to(torch.float64)).item()
    num = torch.linalg.vector_norm(diff).item()
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


def check(out, ref: torch.Tensor, tol: float) -> Check:
    if not isinstance(out, torch.Tensor):
        return Check(math.nan, tol, False, f"returned {type(out).__name__}, not a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return Check(math.nan, tol, False, f"shape {tuple(out.shape)} != expected {tuple(ref.shape)}")
    finite = bool(torch.isfinite(out).all().item()) if out.numel() else True
    if not finite:
        bad = int((~torch.isfinite(out)).sum().item())
        return Check(math.nan, tol, False, f"{bad} of {out.numel()} elements are NaN or inf")
    err = relative_error(out, ref)
    ok = err <= tol
    return Check(err, tol, ok, "" if ok else f"relative error {err:.3g} > tolerance {tol:.3g}")


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill with NaN (floating point) or an absurd value, so unwritten elements show."""
    if t.is_floating_point():
        return t.fill_(math.nan)
    return t.fill_(-12345)


def poison_allocator(device: str, nbytes: float) -> None:
    """Hand the caching allocator NaN-filled blocks of about ``nbytes``.

    Implementations allocate their own outputs; on CUDA the next allocation of
    a similar size reuses a freed block, so filling and freeing blocks first
    makes an output element that a kernel never writes read back as NaN.
    """
    if device != "cuda" or nbytes <= 0:
        return
    blocks = [torch.empty(max(1, int(nbytes) // 4), dtype=torch.float32, device=device).fill_(math.nan)
              for _ in range(2)]
    del blocks
