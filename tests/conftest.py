"""Test-session setup.

Without a GPU, Triton kernels run under its interpreter; the variable must be
set before any Triton kernel is defined, so it is set here, before the
implementation modules are imported.  On the GPU machine it is left alone.
"""
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from suite.backends import has_cuda, interpret_triton_without_gpu  # noqa: E402

interpret_triton_without_gpu()


def _prebuild_cuda_extensions() -> None:
    """Build every CUDA extension side by side before the GPU tests load them
    one after another (each takes 30-50 s on a fresh H200 machine)."""
    from suite import cuda_build
    from suite.sweep import extension_modules
    from suite.workload import discover

    modules = extension_modules(discover().impls.values())
    if not modules:
        return
    built = cuda_build.prebuild(modules)
    print(f"\nCUDA extensions built in parallel: "
          + ", ".join(f"{m.split('.')[-2] if m.endswith('.cuda') else m.split('.')[-1]} "
                      + (f"{s:.0f} s" if s is not None else "failed") for m, s in built.items()),
          file=sys.stderr)


@pytest.hookimpl(trylast=True)  # after -m/-k have deselected what will not run
def pytest_collection_modifyitems(config, items):
    if has_cuda():
        if any("gpu" in item.keywords and "cuda" in item.nodeid for item in items):
            _prebuild_cuda_extensions()
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
