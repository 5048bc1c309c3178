"""What the one-off persistent-kernel probes (softmax_pipe_probe, rlg_pipe_probe) share:
how many programs an SM holds, the suite's timer, the copy rate, and the table."""
from __future__ import annotations


def fit(kernel, warps: int) -> int:
    """Programs of ``kernel`` an SM holds by its registers (8 a thread at a time, 64K an SM, 64 warps)."""
    kernel._init_handles()  # a warmed-up kernel learns its registers when loaded
    return min(65536 // (-(-kernel.n_regs // 8) * 8 * 32 * warps), 64 // warps, 32)


def time_us(fn) -> float:
    """Median of ``fn`` by the suite's events timer (L2 flushed before each sample)."""
    from suite.timing import measure

    return measure([fn], "cuda", "events", min_samples=20, max_samples=100, budget_ms=300.0).median * 1e3


def print_table(rows: list[tuple], err_name: str) -> None:
    """The copy rate, measured now, then the rows (dtype, shape, kernel, registers, us, GB/s, error),
    each with its GB/s as a fraction of that copy rate."""
    import torch

    src = torch.randn(2 ** 28, device="cuda")
    dst = torch.empty_like(src)
    copy = 2 * src.numel() * 4 / time_us(lambda: dst.copy_(src)) / 1e3
    print(f"copy {copy:.0f} GB/s (2^28 float32)")
    width = max(len(r[2]) for r in rows)
    print(f"{'dtype':9s} {'shape':12s} {'kernel':{width}s} {'registers':26s} {'us':>9s} {'GB/s':>8s} {'x copy':>6s} "
          f"{err_name}")
    for name, shape, kernel, regs, t, gbps, err in rows:
        print(f"{name:9s} {shape:12s} {kernel:{width}s} {regs:26s} {t:9.1f} {gbps:8.0f} {gbps / copy:6.3f} {err:.1e}")
