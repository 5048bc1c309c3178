#!/usr/bin/env bash
# Install what this machine lacks, and nothing it already has.
#   scripts/setup.sh venv  only create .venv (see below)
#   scripts/setup.sh run   the runner's needs (torch, triton, numpy, pandas, pyarrow, rich)
#   scripts/setup.sh dev   plus the dashboard, the test tools and a browser for UI tests
# Where: into $PYTHON's environment when PYTHON is set (the GPU workflow sets
# PYTHON=python3); otherwise into .venv, created from python3 with
# --system-site-packages so that a machine whose python3 already has torch and
# triton (the GPU image, which has no network) uses them and installs nothing.
# torch and triton are installed by one pip command with both pinned
# (torch==2.13.0 triton==3.6.0), so pip cannot pull another triton for torch.
# On an ordinary Linux machine torch==2.13.0 from PyPI is the CUDA build
# (several GB); a machine whose pip finds a local CPU wheel of it gets that.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PY=${PYTHON:-$VENV/bin/python}
what=${1:-run}

if [ "$PY" = "$VENV/bin/python" ] && [ ! -x "$PY" ]; then
    echo "setup: creating $VENV (python3 -m venv --system-site-packages)" >&2
    # A python3 without ensurepip (some distributions split it off) still
    # makes a venv without pip; its pip, if any, comes from the system's site-packages.
    python3 -m venv --system-site-packages "$VENV" \
        || python3 -m venv --system-site-packages --without-pip "$VENV"
fi
[ "$what" = venv ] && exit 0

have() { "$PY" -c "import $1" >/dev/null 2>&1; }
pip_install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }

linux=$([ "$(uname -s)" = Linux ] && echo 1 || echo)
if ! have torch; then
    pip_install "torch==2.13.0" ${linux:+"triton==3.6.0"}
elif ! have triton && [ -n "$linux" ]; then
    pip_install "triton==3.6.0"
fi
for mod in numpy pandas pyarrow rich; do
    if ! have "$mod"; then pip_install numpy pandas pyarrow rich; break; fi
done

if [ "$what" = dev ]; then
    # numpy < 2.3: Triton 3.6's interpreter fails on loops with runtime bounds under 2.4
    pip_install --no-deps -e .
    pip_install "numpy>=1.26,<2.3" "streamlit>=1.67" "plotly>=5.20" "pytest>=8" \
        "pytest-benchmark>=4" "pytest-timeout>=2" "pytest-xdist>=3" "scipy>=1.11" "playwright>=1.45" "pyyaml>=6"
    if ! command -v chromium >/dev/null 2>&1; then
        if command -v apt-get >/dev/null 2>&1; then
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq && apt-get install -y -qq chromium >/dev/null
        else
            echo "setup: no chromium and no apt-get; browser tests will be skipped" >&2
        fi
    fi
fi
