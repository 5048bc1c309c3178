"""Where a number came from: device, clocks, versions and the commit.

Everything is best effort: a missing tool or a machine without git gives a
sensible placeholder, never an exception.  ``KSUITE_COMMIT`` / ``KSUITE_DIRTY``
override git for copies of the tree that travel without their .git folder.
"""
from __future__ import annotations

import hashlib
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path | None = None, timeout: float = 10.0) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def pick_device(requested: str | None) -> str:
    """``requested``, or cuda where a GPU is visible and else cpu; asking for cuda
    without one is a usage error (one line, exit 2), not a traceback later."""
    import torch

    if requested == "cuda" and not torch.cuda.is_available():
        from suite.args import UsageError

        raise UsageError("--device cuda: no CUDA GPU is visible; use --device cpu")
    if requested:
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def git_state() -> tuple[str, bool | None]:
    """(commit, dirty); tracked changes only, so the run's own output does not count."""
    if os.environ.get("KSUITE_COMMIT"):
        dirty = os.environ.get("KSUITE_DIRTY")
        return os.environ["KSUITE_COMMIT"], (None if dirty is None else dirty not in ("0", "false", ""))
    commit = _run(["git", "rev-parse", "HEAD"], cwd=ROOT)
    if not commit:
        return "nogit", None
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT)
    return commit, bool(status)


def clocks(gpu: str | None = None) -> dict[str, float | None]:
    """Current SM and memory clocks in MHz, from nvidia-smi where it answers, of ``gpu``
    (an nvidia-smi id; default the first of CUDA_VISIBLE_DEVICES, else 0)."""
    gpu = gpu or os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    out = _run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader,nounits",
                "-i", gpu])
    if not out:
        return {"sm_mhz": None, "mem_mhz": None}
    try:
        sm, mem = (float(x) for x in out.splitlines()[0].split(","))
        return {"sm_mhz": sm, "mem_mhz": mem}
    except ValueError:
        return {"sm_mhz": None, "mem_mhz": None}


def _version(module: str) -> str:
    try:
        mod = __import__(module)
        return str(getattr(mod, "__version__", "unknown"))
    except Exception:
        return "not installed"


def collect(device: str) -> dict:
    import torch

    commit, dirty = git_state()
    env = {
        "device": device, "torch": torch.__version__, "triton": _version("triton"),
        "python": platform.python_version(), "hostname": socket.gethostname(),
        "commit": commit, "dirty": dirty, "cuda": torch.version.cuda or "none",
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        env.update(gpu_name=props.name, gpu_sms=props.multi_processor_count,
                   gpu_mem_bytes=props.total_memory, driver=(driver or "unknown").splitlines()[0],
                   l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
                   capability=f"{props.major}.{props.minor}")
    else:
        env.update(gpu_name=f"CPU {platform.processor() or platform.machine()}".strip(),
                   gpu_sms=os.cpu_count() or 0, gpu_mem_bytes=None, driver="none", l2_bytes=0,
                   capability="cpu")
    key = "|".join(str(env[k]) for k in ("gpu_name", "gpu_sms", "gpu_mem_bytes", "driver", "torch", "cuda"))
    env["fingerprint"] = hashlib.sha1(key.encode()).hexdigest()[:16]
    return env


def describe(env: dict) -> str:
    where = (env["gpu_name"] if env.get("device") == "cpu" else  # a CPU has no SMs to count
             f"{env['gpu_name']} ({env['gpu_sms']} SMs), driver {env['driver']}")
    return (f"{where}, CUDA {env['cuda']}, torch {env['torch']}, triton {env['triton']}, "
            f"Python {env['python']}, commit {str(env['commit'])[:7]}{'+dirty' if env.get('dirty') else ''}")


if __name__ == "__main__":  # pragma: no cover - a quick look from the shell
    print(collect(pick_device(sys.argv[1] if len(sys.argv) > 1 else None)))
