"""Test-only implementations that fail in every way a kernel can.

Imported by the runner's workers through ``--plugin tests.fault_impls``.
"""
import os
import signal
import time

import torch

from suite.workload import register


@register("gelu", "fault:raises")
def raises(x):
    raise RuntimeError("deliberate failure in the launcher")


@register("gelu", "fault:wrong")
def wrong(x):
    return x * 1.01  # plausible-looking, wrong


@register("gelu", "fault:nan")
def nan(x):
    out = torch.nn.functional.gelu(x)
    out[out.numel() // 2] = float("nan")
    return out


@register("gelu", "fault:unwritten")
def unwritten(x):
    out = torch.empty_like(x)
    out[: out.numel() // 2] = torch.nn.functional.gelu(x[: x.numel() // 2])
    return out


@register("gelu", "fault:segfault")
def segfault(x):
    os.kill(os.getpid(), signal.SIGSEGV)


@register("gelu", "fault:hang")
def hang(x):
    time.sleep(3600)


@register("gelu", "fault:picky", supports=lambda case: "only N < 10000" if case["N"] >= 10000 else None)
def picky(x):
    return torch.nn.functional.gelu(x)


@register("gelu", "fault:absent", available=lambda device: "needs hardware this machine lacks")
def absent(x):
    return x


@register("gelu", "fault:skip-last")
def skip_last(x):
    """Every element but the last: it reads as whatever the allocator left there."""
    out = torch.empty_like(x)
    out[:-1] = torch.nn.functional.gelu(x[:-1])
    return out


@register("gelu", "fault:wrong-dtype")
def wrong_dtype(x):
    return torch.nn.functional.gelu(x.double())  # right values, float64 output


_calls: dict = {}


@register("gelu", "fault:timed-wrong")
def timed_wrong(x):
    """Right on its first two calls of a case (the warm-up and the checked call), wrong after."""
    key = (x.data_ptr(), tuple(x.shape), x.dtype)
    _calls[key] = _calls.get(key, 0) + 1
    out = torch.nn.functional.gelu(x)
    return out if _calls[key] <= 2 else out * 1.25


@register("softmax", "fault:zero-row")
def softmax_zero_row(x):
    out = torch.softmax(x.float(), dim=-1).to(x.dtype)
    out[-1] = 0
    return out


@register("softmax", "fault:uniform-row")
def softmax_uniform_row(x):
    out = torch.softmax(x.float(), dim=-1).to(x.dtype)
    out[-1] = 1.0 / x.shape[-1]
    return out


@register("residual_layernorm_gelu", "fault:zero-row")
def rlg_zero_row(x, r, weight, bias, eps):
    h = (x + r).float()
    y = torch.nn.functional.gelu(torch.nn.functional.layer_norm(h, (h.shape[-1],), weight.float(),
                                                                bias.float(), eps)).to(x.dtype)
    y[-1] = 0
    return y
