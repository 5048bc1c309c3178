"""Few long softmax rows: statistics and output as two launches, x re-read from L2.

``python3 -m lab.softmax_two_pass`` on the H200.  The fuzz preset's softmax
rows of 20k-90k columns, a few hundred to 1.6k of them (64-240 MB of
traffic), run at 0.42-0.75 of copy under the shipped split kernel, whose
programs of a row wait for each other at a counter.  Here the same kernel's
MODE 1 (each chunk's max and sum of exp, loads marked evict_last) and MODE 2
(the output, x read again) run as two launches with no waiting: where x fits
in L2 the second read costs no HBM traffic.  Each variant is checked against
float64 on a NaN-poisoned output, then timed with the suite's events timer
(L2 flushed before each sample); a plain copy of x's bytes, timed the same
way, says what this size allows.
"""
import torch
import triton

from implementations.softmax.triton import _softmax_split, _split_buffers, softmax_triton
from lab._probe import time_us

SHAPES = [(191, 90533), (256, 88813), (367, 82153), (503, 59367), (595, 34968), (1567, 19945), (1024, 32768),
          (4096, 16384)]


def two_pass(x, y, block, warps, evict1="evict_last"):
    m, n = x.shape
    chunks = triton.cdiv(n, block)
    p_max = triton.next_power_of_2(chunks)
    stats, count = _split_buffers(x, m, p_max)
    for mode, evict in ((1, evict1), (2, "evict_first")):
        _softmax_split[(m * chunks,)](x, y, stats, count, n, triton.next_power_of_2(m), BLOCK=block, SUB=block,
                                      P_MAX=p_max, MODE=mode, EVICT=evict, num_warps=warps)
    return y


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("softmax_two_pass needs a CUDA GPU (it times kernels; see lab/findings)")
    rows = []
    for dtype in (torch.bfloat16, torch.float32):
        for m, n in SHAPES:
            x = torch.randn(m, n, device="cuda", dtype=dtype) * 3
            ref = torch.softmax(x.double(), -1)
            gb = 2 * x.numel() * x.element_size() / 1e9
            dst = torch.empty_like(x)
            t_copy = time_us(lambda: dst.copy_(x))
            res = {}
            softmax_triton(x)  # tuning
            res["shipped"] = (time_us(lambda: softmax_triton(x)), (softmax_triton(x).double() - ref).abs().max().item())
            for block, warps in ((4096, 4), (8192, 8), (8192, 4), (16384, 16), (16384, 8)):
                for ev in ("evict_last", ""):
                    y = torch.full_like(x, float("nan"))
                    two_pass(x, y, block, warps, ev)
                    err = (y.double() - ref).abs().max().item()
                    out = torch.empty_like(x)
                    res[f"2pass {block}/{warps} {ev or 'nohint'}"] = (
                        time_us(lambda: two_pass(x, out, block, warps, ev)), err)
            for k, (t, err) in res.items():
                rows.append((str(dtype)[6:], f"{m}x{n}", k, t, t_copy / t, gb / t * 1e6, err))
                print(rows[-1], flush=True)
    print(f"{'dtype':9s} {'shape':12s} {'kernel':28s} {'us':>8s} {'x copy':>7s} {'GB/s':>6s} max err")
    for r in rows:
        print(f"{r[0]:9s} {r[1]:12s} {r[2]:28s} {r[3]:8.1f} {r[4]:7.3f} {r[5]:6.0f} {r[6]:.1e}")


if __name__ == "__main__":
    bench()
