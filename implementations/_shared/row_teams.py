"""A team of Triton programs a row: the ticket that gives a program its chunk, and the
meeting at the row's counter (the softmax split kernel and rlg's team kernel).

count_ptr is int32 [1 + M], zero at launch: a ticket counter, then one counter a row.
Programs take tickets in the order they start, so that the programs a row waits for
have started, or start as soon as any slot frees (the launcher makes sure the GPU holds
a whole team at once).  MODE 0 is the one-launch form that meets; MODE 1 and 2 are the
two-launch form (statistics, then output), which uses program ids and never waits.
"""
from __future__ import annotations

import triton
import triton.language as tl


def team_buffers(x, m: int, stats: int, p_max: int):
    """(statistics, counters) of m rows: float32 [m, stats, p_max] (``stats`` values a
    chunk, p_max chunks at most), and count_ptr's int32 [1 + m] at zero."""
    import torch

    return (torch.empty(m * stats * p_max, device=x.device, dtype=torch.float32),
            torch.zeros(m + 1, device=x.device, dtype=torch.int32))


@triton.jit
def team_chunk(count_ptr, N, BLOCK: tl.constexpr, MODE: tl.constexpr):
    """(row, chunk, chunks a row) of this program: by ticket in MODE 0, else by program id."""
    if MODE == 0:
        t = tl.atomic_add(count_ptr, 1, sem="relaxed")
    else:
        t = tl.program_id(0)
    p = tl.cdiv(N, BLOCK)
    row = t // p
    return row, t - row * p, p


@triton.jit
def team_meet(count_ptr, row, p):
    """Count this program in at its row's counter (after every thread's stores of its
    statistics, released) and wait until all p of the team have (acquired)."""
    tl.debug_barrier()
    seen = tl.atomic_add(count_ptr + 1 + row, 1, sem="release") + 1
    while seen < p:
        seen = tl.atomic_add(count_ptr + 1 + row, 0, sem="acquire")
    tl.debug_barrier()
