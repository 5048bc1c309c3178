"""The one build helper for the hand-written CUDA kernels.

Every ``implementations/<workload>/cuda/*.cu`` is built here, with the flags
defined once below, by ``torch.utils.cpp_extension.load`` into a per-user cache
(``~/.cache/kernel-suite/cuda/<name>-<hash>``).  The hash covers the sources,
the headers beside them, the headers under the include folders the caller
names, the flags, the device's architecture and the torch and CUDA versions,
so a second run finds the build and compiles nothing, while any change gets a
fresh directory.  The shared library is loaded with
``torch.ops.load_library``: each ``.cu`` registers its ops into the
``kernel_suite`` namespace (``TORCH_LIBRARY_FRAGMENT``), and they are called as
``torch.ops.kernel_suite.<op>``.  The harness holds no kernel code and no
include folder of its own: the implementations pass theirs.  See docs/cuda.md.

Nothing builds at import time, and :func:`cuda_available` never builds: on a
machine without a GPU the backend is simply unavailable.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

NAMESPACE = "kernel_suite"
HEADER_SUFFIXES = (".h", ".cuh", ".hpp")

# Not --use_fast_math: the memory-bound kernels have tens of spare FLOPs per
# byte, so approximate erf/exp/division buy no time, while fast math's
# flush-to-zero and approximate division change tiny probabilities and the
# tails of activation functions.  -lineinfo keeps Nsight Compute's source
# view at no run-time cost.
COMMON_CUDA_FLAGS = ["-O3", "-lineinfo", "-std=c++17", "--expt-relaxed-constexpr"]
COMMON_CXX_FLAGS = ["-O3", "-std=c++17"]
# KSUITE_CUDA_DEBUG=1: device debug info, no optimisation (cuda-gdb, compute-sanitizer).
DEBUG_CUDA_FLAGS = ["-G", "-O0", "-std=c++17", "--expt-relaxed-constexpr"]
DEBUG_CXX_FLAGS = ["-g", "-O0", "-std=c++17"]

_lock = threading.Lock()
_loaded: dict[str, Any] = {}
_build_seconds: dict[str, float] = {}


def debug_enabled() -> bool:
    return os.environ.get("KSUITE_CUDA_DEBUG", "0") not in ("", "0")


def cache_root() -> Path:
    if os.environ.get("KSUITE_CUDA_CACHE"):
        return Path(os.environ["KSUITE_CUDA_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kernel-suite" / "cuda"


def nvcc_path() -> str | None:
    """nvcc from CUDA_HOME (as torch finds it), else from PATH."""
    try:
        from torch.utils.cpp_extension import CUDA_HOME
    except Exception:
        CUDA_HOME = None
    if CUDA_HOME and os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc")):
        return os.path.join(CUDA_HOME, "bin", "nvcc")
    return shutil.which("nvcc")


def cuda_available(device: str) -> str | None:
    """None when the CUDA backend can build and run here, else why not.  Never builds."""
    if device != "cuda":
        return "needs a CUDA GPU"
    try:
        import torch
    except Exception as exc:
        return f"torch import failed: {exc}"
    if torch.version.cuda is None:
        return "this torch build has no CUDA support"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch"
    if nvcc_path() is None:
        return "nvcc not found (set CUDA_HOME or put nvcc on PATH)"
    from torch.utils.cpp_extension import is_ninja_available

    if not is_ninja_available():
        return "ninja not found (torch.utils.cpp_extension needs it to build)"
    return None


def arch_flags(hopper: bool = False) -> list[str]:
    """-gencode for the current device; sm_90a (wgmma, TMA, setmaxnreg) when asked on sm_90."""
    import torch

    major, minor = torch.cuda.get_device_capability()
    if hopper:
        if (major, minor) != (9, 0):
            raise RuntimeError(f"Hopper-only kernel needs sm_90; this device is sm_{major}{minor}")
        return ["-gencode=arch=compute_90a,code=sm_90a"]
    return [f"-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"]


def build_flags(hopper: bool = False) -> tuple[list[str], list[str]]:
    """(nvcc flags, host compiler flags) for a build on this device."""
    cuda = list(DEBUG_CUDA_FLAGS if debug_enabled() else COMMON_CUDA_FLAGS)
    cxx = list(DEBUG_CXX_FLAGS if debug_enabled() else COMMON_CXX_FLAGS)
    return cuda + arch_flags(hopper), cxx


def _fingerprint(sources: list[Path], flags: list[str], include_dirs: Sequence[Path] = ()) -> str:
    import torch

    h = hashlib.sha256()
    # Headers next to the sources and under the include folders count too: a
    # change to a shared .cuh rebuilds.
    dirs = sorted({p.parent for p in sources})
    headers = sorted(q for d in dirs for q in d.iterdir() if q.suffix in HEADER_SUFFIXES)
    for d in include_dirs:
        d = Path(d)
        headers += sorted(q for q in d.rglob("*") if q.is_file() and q.suffix in HEADER_SUFFIXES)
    for p in list(sources) + headers:
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    h.update(" ".join(flags).encode())
    h.update(f"{torch.__version__}|{torch.version.cuda}|{sys.version_info[:2]}".encode())
    return h.hexdigest()[:16]


def load(name: str, sources: list[Path], hopper: bool = False,
         fakes: Callable[[], None] | None = None, include_dirs: Sequence[Path] = ()) -> Any:
    """Build (once, cached on disk) and load an extension; return ``torch.ops.kernel_suite``.

    Safe to call on every use: after the first call in a process it is a dict
    lookup.  ``include_dirs`` go on the include path, and every header under
    them into the build's hash.  ``fakes`` runs once, right after loading, to
    register the ops' fake (meta) implementations, which need the schemas the
    library defines.
    The wall time of the first call (a real build, or only a load from the
    disk cache) is kept for :func:`last_build_seconds`.
    """
    if name in _loaded:
        return _loaded[name]
    with _lock:
        if name in _loaded:
            return _loaded[name]
        import torch
        from torch.utils.cpp_extension import load as _load

        sources = [Path(s).resolve() for s in sources]
        include_dirs = [Path(d).resolve() for d in include_dirs]
        cuda_flags, cxx_flags = build_flags(hopper)
        tag = _fingerprint(sources, cuda_flags + cxx_flags, include_dirs)
        build_dir = cache_root() / f"{name}-{tag}"
        build_dir.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        _load(name=f"ksuite_{name}_{tag}", sources=[str(s) for s in sources],
              extra_cflags=cxx_flags, extra_cuda_cflags=cuda_flags,
              extra_include_paths=[str(d) for d in include_dirs],
              build_directory=str(build_dir), is_python_module=False,
              verbose=os.environ.get("KSUITE_CUDA_VERBOSE", "0") not in ("", "0"))
        _build_seconds[name] = time.perf_counter() - start
        if fakes is not None:
            fakes()
        _loaded[name] = getattr(torch.ops, NAMESPACE)
        return _loaded[name]


# The child prints the wall-clock time at which its build finished, so that a
# build that ended long before anyone asked is charged its own duration.
_PREBUILD_CHILD = ("import importlib, sys, time; importlib.import_module(sys.argv[1]).ops(); "
                   "print(time.time(), flush=True)")


class Builds:
    """Extension builds in child processes, running while the caller goes on.

    Each module (one with an ``ops()`` that calls :func:`load`) is built by its
    own child process, all in parallel, into the same disk cache the sweep's
    worker then loads from; nvcc is single-threaded per file, so building five
    extensions side by side takes about as long as the slowest one.  The sweep
    starts them before its first case and waits for one only when a case needs
    it, so the builds overlap the cases that need no CUDA extension.
    """

    def __init__(self, modules: list[str], timeout: float = 900.0):
        self.timeout = timeout
        self._results: dict[str, float | None] = {}
        self.failures: dict[str, str] = {}  # module -> why its build gave no time
        self._procs = {}
        for m in modules:
            err = tempfile.TemporaryFile(mode="w+")
            proc = subprocess.Popen([sys.executable, "-c", _PREBUILD_CHILD, m], stdout=subprocess.PIPE,
                                    stderr=err, text=True)
            self._procs[m] = (time.time(), proc, err)

    def __contains__(self, module: str) -> bool:
        return module in self._procs or module in self._results

    def running(self, module: str) -> bool:
        return module in self._procs and self._procs[module][1].poll() is None

    def wait(self, module: str) -> float | None:
        """Seconds the build of ``module`` took, once it has finished; None
        when it failed, timed out or was never started here (the worker then
        builds it itself and reports any error on its rows; ``failures``
        says why)."""
        if module in self._results:
            return self._results[module]
        if module not in self._procs:
            return None
        start, proc, err = self._procs.pop(module)
        try:
            out, _ = proc.communicate(timeout=max(1.0, start + self.timeout - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out = None
            self.failures[module] = f"still building after {self.timeout:.0f} s"
        # The time is printed once ops() has returned, so a child that got
        # that far built the extension, whatever its exit status after.
        seconds = None
        last = (out or "").split()
        try:
            seconds = max(0.0, float(last[-1]) - start) if last else None
        except ValueError:
            seconds = None
        if seconds is None and module not in self.failures:
            err.seek(0)
            tail = " | ".join(line.strip() for line in err.read().strip().splitlines()[-3:])
            self.failures[module] = f"exit status {proc.returncode}" + (f": {tail}" if tail else "")
        err.close()
        self._results[module] = seconds
        return seconds

    def wait_all(self) -> dict[str, float | None]:
        for m in list(self._procs):
            self.wait(m)
        return dict(self._results)

    def close(self) -> None:
        """Stop the builds still running (Ctrl-C, or a sweep that ends early)."""
        for m, (_, proc, err) in list(self._procs.items()):
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
            err.close()
            self._results[m] = None
        self._procs.clear()


def prebuild(modules: list[str], timeout: float = 900.0) -> dict[str, float | None]:
    """Build several extensions at once and wait for all: module -> seconds, or
    None for one that failed or timed out."""
    return Builds(modules, timeout).wait_all()


def last_build_seconds(name: str) -> float | None:
    """Seconds the first :func:`load` of ``name`` took in this process (None: not loaded)."""
    return _build_seconds.get(name)


def is_loaded(name: str) -> bool:
    return name in _loaded


# ---------------------------------------------------------------- CI compile check

def _check_flags(arch: str) -> list[str]:
    import torch
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS, include_paths

    number = arch.removeprefix("sm_")
    includes = include_paths() + [sysconfig.get_paths()["include"]]
    abi = int(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    # The same defines torch's extension build passes, so that what compiles
    # here compiles there (no implicit half <-> float conversions, for one).
    return (COMMON_CUDA_FLAGS + COMMON_NVCC_FLAGS
            + [f"-gencode=arch=compute_{number},code=sm_{number}",
               "-DTORCH_EXTENSION_NAME=ksuite_check",
               f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-Xcompiler", "-fPIC"]
            + [f"-I{p}" for p in includes])


# Generated by torch's CMake build and missing from CPU-only wheels; its whole
# content in a CUDA build is this one define.
_CMAKE_MACROS = ("c10/cuda/impl/cuda_cmake_macros.h",
                 "#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")


def _stub_missing_headers(tmp: str) -> list[str]:
    from torch.utils.cpp_extension import include_paths

    rel, text = _CMAKE_MACROS
    if any(os.path.exists(os.path.join(p, rel)) for p in include_paths()):
        return []
    os.makedirs(os.path.dirname(os.path.join(tmp, "stub", rel)), exist_ok=True)
    Path(tmp, "stub", rel).write_text(text)
    return [f"-I{os.path.join(tmp, 'stub')}"]


def nvcc_compile_check(source: Path, arch: str = "sm_90a", include_dirs: Sequence[Path] = (),
                       extra_flags: Sequence[str] = ()) -> str:
    """Compile one .cu for ``arch`` (no GPU needed); raise with nvcc's output,
    else return it (``extra_flags=["-Xptxas", "-v"]``: ptxas's registers and
    spills of every kernel).

    The device side goes all the way to SASS (front end, cicc, ptxas), and the
    host side through nvcc's C++ front end, which type-checks it.  ``--cuda``
    stops before the host compiler's code generation: that step re-parses
    torch's headers with g++ and is a third of the time, without checking
    anything the front end has not.  ``include_dirs`` are searched first,
    then torch's and Python's headers."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found")
    source = Path(source)
    with tempfile.TemporaryDirectory(prefix="ksuite-nvcc-") as tmp:
        cmd = ([nvcc, "--cuda", str(source), "-o", os.path.join(tmp, source.stem + ".cu.cpp.ii")]
               + [f"-I{d}" for d in include_dirs]
               + _check_flags(arch) + _stub_missing_headers(tmp) + list(extra_flags))
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed on {source} (exit {proc.returncode}):\n"
                           f"{proc.stdout}{proc.stderr}")
    return proc.stdout + proc.stderr


def nvcc_host_program(source: Path, exe: Path, include_dirs: Sequence[Path] = ()) -> None:
    """Build a host program from one .cu with the compile check's flags (no GPU
    needed to build or run it): a check of the kernels' __host__ __device__
    helpers (index maps, bit manipulation) on the CPU.  Raise with nvcc's output."""
    nvcc = nvcc_path()
    if nvcc is None:
        raise FileNotFoundError("nvcc not found")
    with tempfile.TemporaryDirectory(prefix="ksuite-nvcc-") as tmp:
        cmd = ([nvcc, str(source), "-o", str(exe)] + [f"-I{d}" for d in include_dirs]
               + _check_flags("sm_90a") + _stub_missing_headers(tmp))
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed on {source} (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
