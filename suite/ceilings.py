"""The two roofs, measured on this device: copy bandwidth and matmul rate.

Bandwidth is a large device-to-device copy, counting bytes read plus bytes
written.  The matrix rate is a large torch.matmul on random data per dtype
(float32 in true FP32, and ``tf32`` separately).  Both are medians of timed
repetitions after warm-up, so they are statistics of the same kind as the
kernels' own.  A datasheet table sits beside them for reference only: it is
never used inside a formula.
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
    measured_at: str
    seconds: float
    datasheet: dict = field(default_factory=dict)

    def roofs(self) -> dict[str, float]:
        """The compute roof per dtype (or math mode) used in the roofline.

        A kernel in a narrow dtype can always upcast and compute in float32, so
        its roof is never below the float32 rate (this matters on CPUs, whose
        float16 matmul can be slower than their float32 one).
        """
        fp32 = self.matmul_tflops.get("float32", 0.0)
        return {k: max(v, fp32) for k, v in self.matmul_tflops.items()}


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


def measure(device: str, fingerprint: str, gpu_name: str) -> Ceilings:
    import torch

    t_start = time.perf_counter()
    gpu = device == "cuda"
    timed = (lambda f, w, r: _median_events_ms(f, w, r)) if gpu else (
        lambda f, w, r: _median_ms(f, lambda: None, w, r))

    n_copy = (1 << 28) if gpu else (1 << 24)  # floats: 1 GiB on the GPU, 64 MiB on the CPU
    src = torch.rand(n_copy, device=device)
    dst = torch.empty_like(src)
    ms = timed(lambda: dst.copy_(src), 3, 20 if gpu else 5)
    copy_gbps = 2 * src.numel() * 4 / (ms * 1e-3) / 1e9
    del src, dst

    rates: dict[str, float] = {}
    n = 8192 if gpu else 512
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for name in MATMUL_DTYPES:
            dt = torch.float32 if name in ("float32", "tf32") else getattr(torch, name)
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            a = torch.randn(n, n, device=device).to(dt)
            b = torch.randn(n, n, device=device).to(dt)
            ms = timed(lambda: torch.matmul(a, b), 2, 10 if gpu else 3)
            rates[name] = 2 * n**3 / (ms * 1e-3) / 1e12
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    if gpu:
        torch.cuda.empty_cache()
    return Ceilings(device=device, gpu_name=gpu_name, fingerprint=fingerprint, copy_gbps=copy_gbps,
                    matmul_tflops=rates, measured_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    seconds=time.perf_counter() - t_start, datasheet=datasheet(gpu_name))


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


def main(args) -> int:
    from suite import environment

    device = environment.pick_device(args.device)
    env = environment.collect(device)
    c = get(device, env["fingerprint"], env["gpu_name"], reuse=args.cached)
    sheet = c.datasheet or {}
    print(f"device: {c.gpu_name} ({c.device}); measured {c.measured_at} in {c.seconds:.1f} s")
    print(f"cache: {_cache_file()}")
    ds_bw = sheet.get("gbps")
    print(f"{'ceiling':<22}{'measured':>12}{'datasheet':>12}{'ratio':>8}")
    print(f"{'copy GB/s (r+w)':<22}{c.copy_gbps:>12.0f}{ds_bw or float('nan'):>12.0f}"
          f"{(c.copy_gbps / ds_bw) if ds_bw else float('nan'):>8.2f}")
    for name, rate in c.matmul_tflops.items():
        ds = sheet.get("tflops", {}).get(name)
        print(f"{'matmul ' + name + ' TFLOP/s':<22}{rate:>12.1f}{ds or float('nan'):>12.1f}"
              f"{(rate / ds) if ds else float('nan'):>8.2f}")
    if sheet:
        print(f"datasheet row: {sheet['label']} (reference only; formulas use the measured figures)")
    return 0
