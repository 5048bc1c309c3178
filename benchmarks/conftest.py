"""pytest-benchmark over every registered implementation, one small shape per workload.

Kept out of ``testpaths``: run it as ``pytest benchmarks/ --benchmark-only``
(add ``--benchmark-autosave`` / ``--benchmark-compare`` as usual).  On a CUDA
GPU each workload uses the first ``quick`` shape in float32 and bfloat16; on
the CPU the first ``cpu`` shape in float32 only.  ``KSUITE_BENCH_DTYPES``
(comma list) and ``KSUITE_BENCH_ROUNDS`` override those choices;
``KSUITE_BENCH_AUTOTUNE=1`` adds compile:max-autotune.
"""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from suite.backends import has_cuda, interpret_triton_without_gpu  # noqa: E402

interpret_triton_without_gpu()  # before any Triton kernel is defined


def bench_device() -> str:
    return "cuda" if has_cuda() else "cpu"


def bench_params():
    """(id, (workload, impl name, case) or (workload, backend, reason)) for every kernel."""
    from suite.workload import discover

    reg = discover()
    device = bench_device()
    preset = "quick" if device == "cuda" else "cpu"
    wanted = os.environ.get("KSUITE_BENCH_DTYPES")
    out = []
    for name, wl in sorted(reg.workloads.items()):
        # float32 and bfloat16 on the GPU, as the quick preset sweeps them; float32 on the CPU.
        default = ["float32", "bfloat16"] if device == "cuda" else ["float32"]
        dtypes = wanted.split(",") if wanted else default
        shape = wl.presets[preset][0]
        cases = [c for c in wl.cases(preset, dtypes) if c.dims == shape]
        for impl in reg.for_workload(name):
            for case in cases:
                out.append((f"{name}-{impl.name}-{case.dtype}-{case.label}", (wl, impl, case)))
        for (w, backend), reason in sorted(reg.broken.items()):
            if w == name:
                out.append((f"{name}-{backend}-broken", (wl, None, reason)))
    return out


def pytest_generate_tests(metafunc):
    if "kernel" in metafunc.fixturenames:
        params = bench_params()
        metafunc.parametrize("kernel", [p for _, p in params], ids=[i for i, _ in params])


@pytest.fixture(scope="session")
def device() -> str:
    return bench_device()


@pytest.fixture(scope="session")
def env(device) -> dict:
    from suite import environment

    return environment.collect(device)


@pytest.fixture(scope="session")
def peaks(device, env):
    """peaks(dtype, math, read_bytes, write_bytes) -> (GB/s of that read:write mix,
    TFLOP/s of that math mode) from suite.ceilings, or (None, None).

    The ceilings are measured once per device and cached by suite.ceilings, so
    only the first benchmark session on a machine pays for them.
    """
    try:
        from suite import ceilings

        c = ceilings.get(device, env["fingerprint"], env["gpu_name"], reuse=True)
    except Exception:  # no ceilings: sol stays None rather than failing every benchmark
        c = None

    def lookup(dtype: str, math_mode: str | None, read_bytes: float, write_bytes: float):
        if c is None:
            return None, None
        from suite.roofline import mix_gbps

        return mix_gbps(read_bytes, write_bytes, c.bandwidths()), c.roofs().get(math_mode or dtype)

    return lookup
