"""The Makefile and scripts/setup.sh: a virtual environment that sees python3's packages."""
import os
import re
import shutil
import subprocess

import pytest

from tests.helpers import ROOT


def _make_n(*args: str, torch_in_python3: bool | None = None, tmp=None) -> str:
    """``make -n``; with ``torch_in_python3`` set, a stand-in python3 first on the PATH
    answers the Makefile's "does python3 have torch" question that way."""
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VENV", "MAKEFLAGS")}
    if torch_in_python3 is not None:
        fake = tmp / "bin"
        fake.mkdir(exist_ok=True)
        (fake / "python3").write_text(f"#!/bin/sh\nexit {0 if torch_in_python3 else 1}\n")
        (fake / "python3").chmod(0o755)
        env["PATH"] = f"{fake}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True, env=env).stdout


def test_make_installs_into_and_runs_the_venv(tmp_path):
    out = _make_n("test", torch_in_python3=False, tmp=tmp_path)
    assert "PYTHON=.venv/bin/python scripts/setup.sh dev" in out
    assert ".venv/bin/python -m pytest" in out
    assert ".venv/bin/python -m pytest" in _make_n("test-gpu", torch_in_python3=False, tmp=tmp_path)
    # an explicit interpreter is used as it is
    assert "python3 -m suite run" in _make_n("run", "PYTHON=python3", "RUN_ARGS=--preset cpu")


def test_a_python3_that_has_torch_is_used_as_it_is(tmp_path):
    """The GPU image's python3 has torch and no network: no venv, nothing to install."""
    out = _make_n("run", "RUN_ARGS=--preset cpu", torch_in_python3=True, tmp=tmp_path)
    assert "PYTHON=python3 scripts/setup.sh run" in out and "python3 -m suite run" in out
    assert ".venv" not in out.replace("VENV=.venv", "")


def test_torch_and_triton_are_pinned_in_one_pip_command():
    """Installing torch alone lets pip pick a triton for it past the pin."""
    script = (ROOT / "scripts" / "setup.sh").read_text()
    torch_lines = [ln for ln in script.splitlines() if "torch==" in ln and "pip_install" in ln]
    assert torch_lines, "setup.sh installs torch"
    for line in torch_lines:
        assert re.search(r"triton==3\.6\.0", line), line


def test_the_venv_sees_the_system_packages(tmp_path):
    venv = tmp_path / "venv"
    env = dict(os.environ, VENV=str(venv), PYTHON=str(venv / "bin" / "python"))
    r = subprocess.run(["bash", "scripts/setup.sh", "venv"], cwd=ROOT, capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^include-system-site-packages = true$", (venv / "pyvenv.cfg").read_text(), re.M)
    r = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print(sys.prefix)"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == str(venv), r.stderr
    assert not list((venv / "lib").glob("python*/site-packages/torch"))
    if subprocess.run(["python3", "-c", "import torch"], capture_output=True).returncode == 0:
        # where python3 has torch (a GPU image), the venv imports it from there
        r = subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr
