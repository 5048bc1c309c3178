"""Running the CLI in a fresh process, as a user would."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, expect: str, timeout: float = 600) -> None:
    """Run ``code`` in a fresh interpreter at the repo root; it must print ``expect``."""
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=timeout, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0 and expect in r.stdout, f"exit code {r.returncode}:\n{tail}"


def suite(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


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
