"""The roofs, measured on this device: streaming bandwidth per traffic mix, matmul rate.

Bandwidth is measured for four mixes of HBM traffic, since reads and writes
do not cost the same: read-only (a sum), write-only (a fill), copy (1:1) and
two reads a write (c = a + b), each the best of its forms, counting bytes
read plus bytes written.  A row's memory roof is the bandwidth of its own
workload's read:write mix (suite.roofline.mix_gbps); the copy figure is kept
beside it.  The matrix rate is the best of three large torch.matmul shapes
on random data (matmul_shapes) per dtype and math mode (float32 in true
FP32, and ``tf32`` separately; ``tf32x3``, three TF32 products, gets a third
of the TF32 rate).  All are medians of
timed repetitions after warm-up, so they are statistics of the same kind as
the kernels' own.  A datasheet table sits beside them for
reference only: it is never used inside a formula.
"""
from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

# name fragments (matched in order, lowercase) -> (GB/s, {dtype: dense TFLOP/s})
DATASHEET = [
    ("gh200", "NVIDIA GH200", 4000, {"bfloat16": 989, "float16": 989, "tf32": 494, "float32": 67}),
    ("h200", "NVIDIA H200 SXM", 4800, {"bfloat16": 989, "float16": 989, "tf32": 494, "float32": 67}),
    ("h100 pcie", "NVIDIA H100 PCIe", 2000, {"bfloat16": 756, "float16": 756, "tf32": 378, "float32": 51}),
    ("h100 nvl", "NVIDIA H100 NVL", 3900, {"bfloat16": 835, "float16": 835, "tf32": 418, "float32": 60}),
    ("h100", "NVIDIA H100 SXM", 3350, {"bfloat16": 989, "float16": 989, "tf32": 494, "float32": 67}),
    ("b200", "NVIDIA B200", 8000, {"bfloat16": 2250, "float16": 2250, "tf32": 1100, "float32": 80}),
    ("a100 40gb pcie", "NVIDIA A100 40GB PCIe", 1555, {"bfloat16": 312, "float16": 312, "tf32": 156, "float32": 19.5}),
    ("a100-sxm4-40gb", "NVIDIA A100 40GB SXM", 1555, {"bfloat16": 312, "float16": 312, "tf32": 156, "float32": 19.5}),
    ("a100 80gb pcie", "NVIDIA A100 80GB PCIe", 1935, {"bfloat16": 312, "float16": 312, "tf32": 156, "float32": 19.5}),
    ("a100", "NVIDIA A100 80GB SXM", 2039, {"bfloat16": 312, "float16": 312, "tf32": 156, "float32": 19.5}),
    ("l40s", "NVIDIA L40S", 864, {"bfloat16": 362, "float16": 362, "tf32": 183, "float32": 91.6}),
    ("l4", "NVIDIA L4", 300, {"bfloat16": 121, "float16": 121, "tf32": 60, "float32": 30.3}),
    ("a10g", "NVIDIA A10G", 600, {"bfloat16": 70, "float16": 70, "tf32": 35, "float32": 31.2}),
    ("a10", "NVIDIA A10", 600, {"bfloat16": 125, "float16": 125, "tf32": 62.5, "float32": 31.2}),
    ("4090", "NVIDIA GeForce RTX 4090", 1008, {"bfloat16": 165, "float16": 165, "tf32": 82.6, "float32": 82.6}),
    ("t4", "NVIDIA T4", 320, {"float16": 65, "float32": 8.1}),
]

MATMUL_DTYPES = ("float32", "tf32", "float16", "bfloat16")


@dataclass
class Ceilings:
    device: str
    gpu_name: str
    fingerprint: str
    copy_gbps: float
    matmul_tflops: dict[str, float]
    read_gbps: float
    write_gbps: float
    mix21_gbps: float  # two bytes read for each written
    measured_at: str
    seconds: float
    datasheet: dict = field(default_factory=dict)

    def bandwidths(self) -> dict[float, float]:
        """Read fraction of the traffic -> measured GB/s, for roofline.mix_gbps."""
        return {0.0: self.write_gbps, 0.5: self.copy_gbps, 2.0 / 3.0: self.mix21_gbps,
                1.0: self.read_gbps}

    def roofs(self) -> dict[str, float]:
        """The compute roof per dtype (or math mode) used in the roofline.

        A kernel in a narrow dtype can always upcast and compute in float32, so
        its roof is never below the float32 rate (this matters on CPUs, whose
        float16 matmul can be slower than their float32 one).
        """
        fp32 = self.matmul_tflops.get("float32", 0.0)
        roofs = {k: max(v, fp32) for k, v in self.matmul_tflops.items()}
        if "tf32" in self.matmul_tflops:
            # float32 as three TF32 products (tf32x3) does three TF32 matmuls' work:
            # a third of the measured TF32 rate, derived, not measured on its own
            roofs["tf32x3"] = max(self.matmul_tflops["tf32"] / 3, fp32)
        return roofs


def datasheet(gpu_name: str) -> dict:
    """The vendor's figures for a device name, matched leniently; {} if unknown."""
    name = (gpu_name or "").lower().replace("_", " ")
    for frag, label, gbps, tflops in DATASHEET:
        parts = frag.split()
        if all(p in name for p in parts):
            return {"label": label, "gbps": gbps, "tflops": tflops}
    return {}


def cache_dir() -> Path:
    base = os.environ.get("KSUITE_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "kernel-suite"


def _cache_file() -> Path:
    return cache_dir() / "ceilings.json"


def load_cached(fingerprint: str) -> Ceilings | None:
    try:
        data = json.loads(_cache_file().read_text())
        entry = data.get(fingerprint)
        return Ceilings(**entry) if entry else None
    except (OSError, ValueError, TypeError):
        return None


def save_cached(c: Ceilings) -> None:
    path = _cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            data = {}
        data[c.fingerprint] = asdict(c)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home must not stop a run


def _median_ms(fn, sync, warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def _median_events_ms(fn, warmup: int, reps: int) -> float:
    import torch

    for _ in range(warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def _best_gbps(forms, nbytes: float, timed) -> float:
    """The best rate over several ways of making one traffic mix: a roof is the
    most any kernel reached, and torch's kernels differ in how close they get."""
    return max(nbytes / (timed(f) * 1e-3) / 1e9 for f in forms)


def _bandwidths(device: str, timed) -> dict[str, float]:
    import torch

    gpu = device == "cuda"
    n = (1 << 28) if gpu else (1 << 23)  # floats: 1 GiB a buffer on the GPU, 32 MiB on the CPU
    a = torch.rand(n, device=device)
    b = torch.rand(n, device=device)
    c = torch.empty_like(a)
    half = torch.empty(n // 2, device=device)
    one = torch.empty((), device=device)
    rows = torch.empty(n // 1024, device=device)
    x = torch.rand(1024, device=device)
    size = a.numel() * a.element_size()
    # the reads' forms write 1/1024 of what they read, or less, which is left uncounted
    out = {
        "read_gbps": _best_gbps([lambda: torch.sum(a, dim=0, out=one),
                                 lambda: torch.sum(a.view(-1, 1024), dim=1, out=rows),
                                 lambda: torch.mv(a.view(-1, 1024), x, out=rows)], size, timed),
        "write_gbps": _best_gbps([lambda: c.fill_(1.0), lambda: c.zero_()], size, timed),
        "copy_gbps": _best_gbps([lambda: c.copy_(a)], 2 * size, timed),
        "mix21_gbps": max(_best_gbps([lambda: torch.add(a, b, out=c)], 3 * size, timed),
                          _best_gbps([lambda: torch.sum(a.view(2, -1), dim=0, out=half)], 1.5 * size, timed)),
    }
    del a, b, c, half, rows
    return out


def matmul_shapes(gpu: bool) -> tuple[tuple[int, int, int], ...]:
    """(M, N, K) of the matmuls whose best rate is the compute roof: on a GPU a
    square, and the same work as a long-K and a short-K product, since the
    library's best kernel differs by shape and a long K can beat the square;
    on the CPU, whose runs are not scored on a roofline, one small square."""
    if not gpu:
        return ((512, 512, 512),)
    n = 8192
    return (n, n, n), (n // 2, n // 2, 4 * n), (2 * n, 2 * n, n // 4)


def _matmul_tflops(m: int, n: int, k: int, dtype, device: str) -> float:
    import torch

    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    if device == "cuda":
        ms = _median_events_ms(lambda: torch.matmul(a, b), 2, 10)
    else:
        ms = _median_ms(lambda: torch.matmul(a, b), lambda: None, 2, 3)
    return 2 * m * n * k / (ms * 1e-3) / 1e12


def measure(device: str, fingerprint: str, gpu_name: str) -> Ceilings:
    import torch

    t_start = time.perf_counter()
    gpu = device == "cuda"
    reps = 20 if gpu else 5
    timed = (lambda f: _median_events_ms(f, 3, reps)) if gpu else (
        lambda f: _median_ms(f, lambda: None, 2, reps))
    bandwidth = _bandwidths(device, timed)

    rates: dict[str, float] = {}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for name in MATMUL_DTYPES:
            dt = torch.float32 if name in ("float32", "tf32") else getattr(torch, name)
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            rates[name] = max(_matmul_tflops(m, n, k, dt, device) for m, n, k in matmul_shapes(gpu))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    if gpu:
        torch.cuda.empty_cache()
    return Ceilings(device=device, gpu_name=gpu_name, fingerprint=fingerprint, matmul_tflops=rates,
                    measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    seconds=time.perf_counter() - t_start, datasheet=datasheet(gpu_name), **bandwidth)


def get(device: str, fingerprint: str, gpu_name: str, reuse: bool = False) -> Ceilings:
    """Measure now (and refresh the cache), or reuse the cached figures if asked."""
    if reuse:
        cached = load_cached(fingerprint)
        if cached:
            return cached
    c = measure(device, fingerprint, gpu_name)
    save_cached(c)
    return c


def configure(p) -> None:
    p.add_argument("--device", choices=("cuda", "cpu"), default=None,
                   help="device to measure (default: cuda if available, else cpu)")
    p.add_argument("--cached", action="store_true",
                   help="show the cached figures for this device instead of measuring again")


def _figure(x, spec: str) -> str:
    """A figure of the table: '-' where there is none (no datasheet row, as on a CPU), else
    plain.figure's (at least two significant digits: a CPU's rates)."""
    from suite.plain import figure

    return "-" if x is None else figure(x, spec)


def main(args) -> int:
    from suite import environment

    device = environment.pick_device(args.device)
    env = environment.collect(device)
    c = get(device, env["fingerprint"], env["gpu_name"], reuse=args.cached)
    sheet = c.datasheet or {}
    print(f"device: {c.gpu_name} ({c.device}); measured {c.measured_at} in {c.seconds:.1f} s")
    print(f"cache: {_cache_file()}")
    rows = [(label, gbps, sheet.get("gbps"), ".0f") for label, gbps in (
        ("read GB/s", c.read_gbps), ("write GB/s", c.write_gbps),
        ("copy GB/s (1:1)", c.copy_gbps), ("2:1 r:w GB/s", c.mix21_gbps))]
    rows += [(f"matmul {name} TFLOP/s", rate, sheet.get("tflops", {}).get(name), ".1f")
             for name, rate in c.matmul_tflops.items()]
    width = max(len(r[0]) for r in rows) + 2
    print(f"{'ceiling':<{width}}{'measured':>12}{'datasheet':>12}{'ratio':>8}")
    for label, measured, ds, spec in rows:
        print(f"{label:<{width}}{_figure(measured, spec):>12}{_figure(ds, spec):>12}"
              f"{_figure(measured / ds if ds else None, '.2f'):>8}")
    if sheet:
        print(f"datasheet row: {sheet['label']} (reference only; formulas use the measured figures)")
    return 0
