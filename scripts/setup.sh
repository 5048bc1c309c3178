#!/usr/bin/env bash
# Install what this machine lacks, and nothing it already has.
#   scripts/setup.sh run   the runner's needs (torch, triton, numpy, pandas, pyarrow, rich)
#   scripts/setup.sh dev   plus the dashboard, the test tools and a browser for UI tests
# On a CPU-only machine torch comes from the CPU wheel (torch==2.13.0), never
# from an open range that would pull a multi-GB CUDA build.  On the GPU image,
# which already has torch and triton and no network, `run` installs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
what=${1:-run}

have() { "$PY" -c "import $1" >/dev/null 2>&1; }
pip_install() { "$PY" -m pip install --disable-pip-version-check -q "$@"; }

if ! have torch; then
    pip_install "torch==2.13.0"
fi
if ! have triton && [ "$(uname -s)" = Linux ]; then
    pip_install "triton==3.6.0"
fi
for mod in numpy pandas pyarrow rich; do
    if ! have "$mod"; then pip_install numpy pandas pyarrow rich; break; fi
done

if [ "$what" = dev ]; then
    # numpy < 2.3: Triton 3.6's interpreter fails on loops with runtime bounds under 2.4
    pip_install --no-deps -e .
    pip_install "numpy>=1.26,<2.3" "streamlit>=1.40" "plotly>=5.20" "pytest>=8" \
        "pytest-benchmark>=4" "pytest-timeout>=2" "scipy>=1.11" "playwright>=1.45" "pyyaml>=6"
    if ! command -v chromium >/dev/null 2>&1; then
        if command -v apt-get >/dev/null 2>&1; then
            export DEBIAN_FRONTEND=noninteractive
            apt-get update -qq && apt-get install -y -qq chromium >/dev/null
        else
            echo "setup: no chromium and no apt-get; browser tests will be skipped" >&2
        fi
    fi
fi
