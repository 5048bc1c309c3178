"""Running the CLI in a fresh process, as a user would."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def suite(*args: str, timeout: float = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    return subprocess.run([sys.executable, "-m", "suite", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)
