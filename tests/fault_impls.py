"""Test-only implementations of gelu that fail in every way a kernel can.

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
