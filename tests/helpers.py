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
