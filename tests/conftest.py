"""Test-session setup.

Without a GPU, Triton kernels run under its interpreter; the variable must be
set before any Triton kernel is defined, so it is set here, before the
implementation modules are imported.  On the GPU machine it is left alone.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from suite.backends import has_cuda, interpret_triton_without_gpu  # noqa: E402

interpret_triton_without_gpu()


def pytest_collection_modifyitems(config, items):
    import pytest

    if has_cuda():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
