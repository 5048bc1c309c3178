"""``--gpus all|0,1,...``: which GPUs a run's workers use, one worker per listed index.

An index is a torch device ordinal of the run (0 .. device_count-1 of what the
parent sees); the worker of index i is given ``CUDA_VISIBLE_DEVICES`` of
that one GPU, so everything inside it runs on its ``cuda:0`` as in a
single-GPU run.  An index listed twice gets two workers sharing that GPU.

``KSUITE_FAKE_GPUS=N`` lets the CPU stand in for N GPUs: ``--device cpu
--gpus ...`` then runs one CPU worker per listed index, which is how the
scheduling, the merging and the per-device ceilings are tested without a GPU.
"""
from __future__ import annotations

import os

from suite.args import UsageError, csv_list

FAKE_ENV = "KSUITE_FAKE_GPUS"


def count(device: str) -> int:
    """GPUs a run on ``device`` can list."""
    if device == "cuda":
        import torch

        return torch.cuda.device_count()
    try:
        return int(os.environ.get(FAKE_ENV, "0"))
    except ValueError:
        return 0


def parse(spec: str | None, device: str) -> list[int] | None:
    """The listed indices, in order, repeats kept; None without ``--gpus``."""
    if spec is None:
        return None
    n = count(device)
    if n == 0:
        raise UsageError(f"--gpus {spec}: no GPU to list on {device}"
                         + (f" (the CPU stands in for N GPUs with {FAKE_ENV}=N)" if device == "cpu" else ""))
    if spec.strip() == "all":
        return list(range(n))
    items = csv_list(spec) or []
    try:
        indices = [int(x) for x in items]
    except ValueError:
        indices = []
    if not indices or any(not 0 <= i < n for i in indices):
        raise UsageError(f"--gpus {spec!r}: expected all or indices from 0 to {n - 1}, e.g. 0,1")
    return indices


def visible(index: int) -> str:
    """CUDA_VISIBLE_DEVICES for the worker of ``index``: the parent's own list narrowed to it."""
    parent = csv_list(os.environ.get("CUDA_VISIBLE_DEVICES"))
    return parent[index] if parent and index < len(parent) else str(index)


def plain_index(device: str) -> int | None:
    """The device index a run without --gpus records: its current CUDA device; None on the CPU."""
    if device != "cuda":
        return None
    import torch

    return torch.cuda.current_device()
