"""Running the CLI in a fresh process, as a user would, or in this one; compiling
Triton kernels for sm_90 in a fresh process, where no GPU is needed; the suite's
verdict on a softmax output."""
import io
import os
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, expect: str, timeout: float = 600) -> None:
    """Run ``code`` in a fresh interpreter at the repo root; it must print ``expect``."""
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0 and expect in r.stdout, f"exit code {r.returncode}:\n{tail}"


def compile_for_sm90(script: str, timeout: float = 300) -> list:
    """Run ``script`` (given the repo root as argv[1]) in a fresh interpreter
    without TRITON_INTERPRET, so that triton.compile targets sm_90 with
    Triton's own ptxas; its last line of output is JSON, returned parsed.
    Skips the test where the Triton wheel has no ptxas."""
    import json

    import pytest
    import triton

    ptxas = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    if not ptxas.exists():
        pytest.skip(f"no ptxas at {ptxas}")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(Path(os.environ.get("TMPDIR", "/tmp")) / "kernel-suite-triton-aot")
    proc = subprocess.run([sys.executable, "-c", script, str(ROOT)], env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def suite(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


def suite_here(*args: str) -> subprocess.CompletedProcess:
    """``python -m suite ARGS`` in this process, its output captured: for arguments
    refused before any work starts, where a fresh interpreter would add only its
    torch import (about 5 CPU-s).  An exception that would print a traceback
    propagates and fails the test."""
    from suite import cli

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:  # argparse's own refusals
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    return subprocess.CompletedProcess(["python", "-m", "suite", *args], code, out.getvalue(), err.getvalue())


def preset_params(impls, presets=("cpu", "quick")) -> list:
    """pytest params (workload, implementation, case) for every case of ``presets``
    that each (workload, implementation) in ``impls`` supports."""
    import pytest

    from suite.workload import discover

    reg = discover()
    params = []
    for wl_name, impl_name in impls:
        impl = reg.get(wl_name, impl_name)
        for preset in presets:
            for case in reg.workloads[wl_name].cases(preset):
                if impl.supports(case) is None:
                    params.append(pytest.param(wl_name, impl_name, case,
                                               id=f"{impl_name}-{preset}-{case.label}-{case.dtype}"))
    return params


def check_softmax(y, x, impl=None):
    """The suite's verdict (verify.check_case: normwise and element by element)
    on ``y`` as the softmax of ``x`` over its last dimension."""
    import torch

    from suite import verify
    from suite.workload import Case, discover

    wl = discover().workloads["softmax"]
    case = Case.make("softmax", str(x.dtype).removeprefix("torch."), M=x.numel() // x.shape[-1], N=x.shape[-1])
    return verify.check_case(wl, case, y, torch.softmax(x.double(), -1), impl, {"x": x})
