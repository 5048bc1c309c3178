"""The head dims the Triton attention kernels take, the tile width each runs at, and
the heads a launch takes (no Triton import: the registrations' ``supports`` read it too)."""
from __future__ import annotations


def head_dim_problem(d: int) -> str | None:
    """None where the kernels take head dim ``d``, else the reason."""
    if d % 8 or not 8 <= d <= 128:
        return f"head dim {d} not supported (a multiple of 8 from 8 to 128)"
    return None


def padded_head_dim(d: int) -> int:
    """The head dim of the tiles (and of the config tables) for head dim ``d``: 64 up
    to 64, else 128; the columns past ``d`` are loaded as zeros and not stored."""
    return 64 if d <= 64 else 128


MAX_HEADS = 65535  # a launch's second grid axis: one (batch, head) a row of programs


def heads_problem(b: int, h: int) -> str | None:
    """None where B x H heads fit one launch's second grid axis, else the reason."""
    if b * h > MAX_HEADS:
        return f"B*H={b * h} exceeds the grid's y limit ({MAX_HEADS})"
    return None
