"""How every workload's cuda/ module builds: suite.cuda_build with this
folder's ``cuda/`` (the ``#include "ksuite/..."`` headers) on the include path
and in the build's hash, so editing a shared header rebuilds each extension
that could include it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from suite import cuda_build

INCLUDE_DIR = Path(__file__).resolve().parent / "cuda"

cuda_available = cuda_build.cuda_available


def load(name: str, sources: list[Path], hopper: bool = False,
         fakes: Callable[[], None] | None = None, include_dirs: Sequence[Path] = ()) -> Any:
    """cuda_build.load with the shared headers first on the include path."""
    return cuda_build.load(name, sources, hopper=hopper, fakes=fakes,
                           include_dirs=[INCLUDE_DIR, *include_dirs])


def compile_check(source: Path, arch: str = "sm_90a", include_dirs: Sequence[Path] = (),
                  extra_flags: Sequence[str] = ()) -> str:
    """cuda_build.nvcc_compile_check with the shared headers on the include path; nvcc's output."""
    return cuda_build.nvcc_compile_check(source, arch=arch, include_dirs=[INCLUDE_DIR, *include_dirs],
                                         extra_flags=extra_flags)
