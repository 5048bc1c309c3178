"""The test tree collects on a machine without the optional packages.

The GPU image has torch, triton, pandas, pyarrow, rich, numpy and pytest, and
none of the dashboard's or dev's extras: `make test-gpu` there must collect
every module (a module that needs an absent package skips itself) instead of
stopping at the first import error.
"""
import subprocess
import sys

from tests.helpers import ROOT

OPTIONAL = ("streamlit", "plotly", "scipy", "yaml", "playwright", "pytest_benchmark")

COLLECT = f"""
import os, sys
import pytest

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {OPTIONAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, Absent())
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # pytest-benchmark's entry point is absent too
sys.exit(pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-m", "gpu", "tests"]))
"""


def test_the_gpu_tests_collect_without_the_optional_packages():
    r = subprocess.run([sys.executable, "-c", COLLECT], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-3000:]
    assert "error" not in out.lower().split("short test summary")[-1], out[-3000:]
    assert "tests collected" in out
