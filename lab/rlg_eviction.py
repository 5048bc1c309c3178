"""Eviction hints of the x/r loads in a residual_layernorm_gelu Triton kernel, against Inductor.

A one-off device sweep (run as ``python3 -m lab.rlg_eviction`` on the
H200 at 62ad320; its output is lab/findings/rlg-eviction-62ad320.txt): one row a
program held in registers, with and without evict_first on the x and r loads (and with a
streaming store), and an Inductor-like two-pass kernel, each checked against float64 and timed
with the suite's events timer beside a static torch.compile of the eager chain.  The kernels here
are simplified copies for the sweep (exact erf in every dtype), not the shipped ones.
"""
import torch, triton, triton.language as tl
import torch._dynamo
from suite.timing import measure
from implementations.residual_layernorm_gelu.eager import residual_layernorm_gelu_eager
from implementations._shared.gelu_math import gelu_f32

@triton.jit
def rows_k(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, N, eps, BLOCK_N: tl.constexpr, EVICT: tl.constexpr, SEVICT: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    x = tl.load(x_ptr + row * N + cols, eviction_policy=EVICT)
    r = tl.load(r_ptr + row * N + cols, eviction_policy=EVICT)
    w = tl.load(w_ptr + cols, eviction_policy="evict_last")
    b = tl.load(b_ptr + cols, eviction_policy="evict_last")
    h = x.to(tl.float32) + r.to(tl.float32)
    mean = tl.sum(h, axis=0) / N
    d = h - mean
    rstd = tl.math.rsqrt(tl.sum(d * d, axis=0) / N + eps)
    y = gelu_f32(d * rstd * w.to(tl.float32) + b.to(tl.float32), True)
    if SEVICT:
        tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty), cache_modifier=".cs")
    else:
        tl.store(y_ptr + row * N + cols, y.to(y_ptr.dtype.element_ty))

@triton.jit
def two_pass_k(x_ptr, r_ptr, w_ptr, b_ptr, y_ptr, N, eps, R: tl.constexpr, E1: tl.constexpr, E2: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    xr = x_ptr + row * N
    rr = r_ptr + row * N
    cols = tl.arange(0, R)
    shift = (tl.load(xr).to(tl.float32) + tl.load(rr).to(tl.float32))
    s1 = tl.zeros([R], tl.float32)
    s2 = tl.zeros([R], tl.float32)
    for k in range(0, N, R):
        m = k + cols < N
        h = tl.load(xr + k + cols, mask=m, other=0.0, eviction_policy=E1).to(tl.float32) + \
            tl.load(rr + k + cols, mask=m, other=0.0, eviction_policy=E1).to(tl.float32)
        d = tl.where(m, h - shift, 0.0)
        s1 += d
        s2 += d * d
    mu = tl.sum(s1, axis=0) / N
    var = tl.maximum(tl.sum(s2, axis=0) / N - mu * mu, 0.0)
    mean = shift + mu
    rstd = tl.math.rsqrt(var + eps)
    for k in range(0, N, R):
        m = k + cols < N
        h = tl.load(xr + k + cols, mask=m, other=0.0, eviction_policy=E2).to(tl.float32) + \
            tl.load(rr + k + cols, mask=m, other=0.0, eviction_policy=E2).to(tl.float32)
        w = tl.load(w_ptr + k + cols, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
        b = tl.load(b_ptr + k + cols, mask=m, other=0.0, eviction_policy="evict_last").to(tl.float32)
        y = gelu_f32((h - mean) * rstd * w + b, True)
        tl.store(y_ptr + row * N + k + cols, y.to(y_ptr.dtype.element_ty), mask=m)

def us(fn):
    return measure([fn], "cuda", "events", budget_ms=60).median * 1e3


def bench() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("rlg_eviction needs a CUDA GPU (it times kernels; see lab/findings)")
    for dt in (torch.float32, torch.bfloat16):
        for m, n in ((65536, 1024), (32768, 4096), (16384, 8192)):
            torch._dynamo.reset()
            comp = torch.compile(residual_layernorm_gelu_eager, dynamic=False)
            x = torch.randn(m, n, device="cuda", dtype=dt) + 0.5; r = torch.randn_like(x)
            w = (torch.randn(n, device="cuda") * 0.2 + 1).to(dt); b = (torch.randn(n, device="cuda") * 0.2).to(dt)
            ref = residual_layernorm_gelu_eager(x.double(), r.double(), w.double(), b.double(), 1e-5)
            byt = 3 * m * n * x.element_size()
            rows = [("compile (static)", us(lambda: comp(x, r, w, b, 1e-5)))]
            try:
                from torch._inductor.codecache import PyCodeCache
                for mod in list(PyCodeCache.modules):
                    for k, v in vars(mod).items():
                        if k.startswith("triton_") and hasattr(v, "launchers") and v.launchers:
                            c = v.launchers[0].config
                            print("   inductor", k, c.kwargs, "warps", c.num_warps, "stages", c.num_stages)
            except Exception as e:
                print("   (inductor config unavailable:", e, ")")
            y = torch.empty_like(x)
            cfgs = []
            if n <= 8192:
                for wp in (4, 8, 16):
                    for ev in ("evict_first", ""):
                        for se in ((False, True) if ev == "" else (False,)):
                            cfgs.append((f"rows w{wp} {ev or 'none'} {'cs' if se else ''}",
                                         lambda wp=wp, ev=ev, se=se: rows_k[(m,)](x, r, w, b, y, n, 1e-5, BLOCK_N=n, EVICT=ev, SEVICT=se, num_warps=wp)))
            for R in (1024, 2048):
                for wp in (4, 8):
                    for e1, e2 in (("evict_last", "evict_first"), ("", "")):
                        if R // (32 * wp) < 1: continue
                        cfgs.append((f"2pass R{R} w{wp} {e1 or 'none'}/{e2 or 'none'}",
                                     lambda R=R, wp=wp, e1=e1, e2=e2: two_pass_k[(m,)](x, r, w, b, y, n, 1e-5, R=R, E1=e1, E2=e2, num_warps=wp)))
            for name, f in cfgs:
                y.fill_(float("nan")); f()
                err = (y.double() - ref).abs().max().item()
                if not err < (1e-4 if dt == torch.float32 else 3e-2):
                    rows.append((name + f" BAD {err:.1e}", float("inf"))); continue
                rows.append((name, us(f)))
            rows.append(("compile again", us(lambda: comp(x, r, w, b, 1e-5))))
            print(f"rlg {m}x{n} {dt}")
            best = sorted(rows[1:-1], key=lambda t: t[1])[:8]
            for name, t in [rows[0]] + best + [rows[-1]]:
                print(f"  {name:40s} {t:8.1f} us {byt/t/1e3:7.0f} GB/s x{rows[0][1]/t:.3f} compile", flush=True)


if __name__ == "__main__":
    bench()
