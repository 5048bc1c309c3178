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


def head_runs(bh: int) -> list[tuple[int, int]]:
    """[start, stop) runs of at most MAX_HEADS of ``bh`` heads: one launch each, where
    B x H heads exceed a launch's second grid axis."""
    return [(a, min(a + MAX_HEADS, bh)) for a in range(0, bh, MAX_HEADS)]


def by_head_runs(attention, q, k, v, causal, out):
    """``attention(q, k, v, causal, out=...)`` over each run of heads (head_runs) of
    contiguous (B, H, S, D) tensors, into ``out``; returns out and the last run's
    config text, naming the launches."""
    B, H, S, D = q.shape
    flat = [t.view(1, B * H, S, D) for t in (q, k, v, out)]
    runs = head_runs(B * H)
    for a, b in runs:
        _, text = attention(*(t[:, a:b] for t in flat[:3]), causal, out=flat[3][:, a:b])
    return out, f"{text}; {len(runs)} launches of at most {MAX_HEADS} heads"
