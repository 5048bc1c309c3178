"""Which tiles the persistent TMA matmul needs off the power-of-two shapes: a one-off device sweep.

``python3 -m lab.gemm_persistent_tiles`` on the H200.  The fuzz preset's
aligned bf16 shapes with M, N, K >= 1024 are where cuBLAS is at its best and
our Triton kernels at 0.54-0.85 of it.  For each such shape (and a seeded set
of other aligned ones) every config below runs the shipped persistent
kernel (implementations/gemm/_triton_persistent.py) unpruned, checked
against cuBLAS's output first, and is timed with the suite's events timer
beside cuBLAS.  The table gives, per shape, cuBLAS's time, the best config's
ratio and the waves each config's tile count makes over the SMs, so that a
choice rule can be read off it rather than a table of shapes.
"""
import random

import torch
import triton

from implementations.gemm import _triton_persistent as P
from implementations._shared.autotune import bucket
from lab._probe import time_us
from triton.tools.tensor_descriptor import TensorDescriptor

CONFIGS = [(128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 8), (128, 128, 64, 5, 8),
           (128, 128, 64, 4, 4), (128, 128, 128, 3, 8), (64, 256, 64, 4, 4), (64, 256, 64, 4, 8),
           (128, 64, 64, 5, 4), (64, 128, 64, 6, 4), (256, 64, 64, 4, 8), (128, 256, 32, 5, 8)]


def shapes():
    fixed = [(1699, 2328, 1152), (1792, 5304, 2376), (3536, 2560, 5376), (7771, 4440, 2048)]
    rng = random.Random(7)
    extra = [(rng.randrange(1024, 8192), 8 * rng.randrange(128, 1024), 8 * rng.randrange(128, 1024)) for _ in range(6)]
    return fixed + extra + [(4096, 4096, 4096)]


def run(a, b, cfg, sms):
    bm, bn, bk, stages, warps = cfg
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    descs = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
             TensorDescriptor.from_tensor(c, [bm, bn]))
    grid = (min(sms, triton.cdiv(M, bm) * triton.cdiv(N, bn)),)
    P._persistent_kernel[grid](*descs, M, N, K, bucket(M), bucket(N), bucket(K), BLOCK_M=bm, BLOCK_N=bn,
                               BLOCK_K=bk, GROUP_M=8, NUM_SMS=sms, UPCAST=False, DTYPE=str(a.dtype),
                               num_stages=stages, num_warps=warps)
    return c


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("gemm_persistent_tiles needs a CUDA GPU (it times kernels; see lab/findings)")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for (M, N, K) in shapes():
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        ref = a @ b
        t_ref = time_us(lambda: a @ b)
        best = None
        line = []
        for cfg in CONFIGS:
            try:
                c = run(a, b, cfg, sms)
                err = ((c.float() - ref.float()).norm() / ref.float().norm()).item()
                if not err < 1e-2:
                    line.append(f"{cfg}: WRONG {err:.1e}")
                    continue
                t = time_us(lambda: run(a, b, cfg, sms))
            except Exception as e:  # out of shared memory and the like
                line.append(f"{cfg}: {type(e).__name__}")
                continue
            tiles = triton.cdiv(M, cfg[0]) * triton.cdiv(N, cfg[1])
            line.append(f"{cfg}: {t_ref / t:.2f} waves {tiles / sms:.2f}")
            if best is None or t < best[0]:
                best = (t, cfg)
        rows.append((M, N, K, t_ref, t_ref / best[0], best[1]))
        print(f"{M}x{N}x{K} cuBLAS {t_ref:.1f} us; " + "; ".join(line), flush=True)
    print("M x N x K            cuBLAS us  best ratio  best config (BM, BN, BK, stages, warps)")
    for M, N, K, t, r, cfg in rows:
        print(f"{M:5d} x {N:5d} x {K:5d} {t:9.1f} {r:11.2f}  {cfg}")


if __name__ == "__main__":
    bench()
