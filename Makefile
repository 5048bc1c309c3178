# The README's two commands are `make run` and `make test`.
# A python3 that already has torch (a GPU image, often without a network) is used
# as it is; anywhere else everything installs into .venv (scripts/setup.sh creates
# it with --system-site-packages). `make PYTHON=... ` picks an interpreter.
VENV ?= .venv
PYTHON ?= $(shell python3 -c "import torch" >/dev/null 2>&1 && echo python3 || echo $(VENV)/bin/python)
# GPU: the quick preset on every available backend; CPU-only: the tiny cpu preset.
RUN_ARGS ?= $(shell $(PYTHON) -c "import torch,sys; sys.stdout.write('--preset quick' if torch.cuda.is_available() else '--device cpu --preset cpu')" 2>/dev/null || echo --device cpu --preset cpu)
# CPU tests run on every core (pytest-xdist); the nvcc checks add two threads of their own.
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
SETUP = VENV=$(VENV) PYTHON=$(PYTHON) scripts/setup.sh

.PHONY: venv setup setup-dev run test test-slow test-gpu dashboard

venv:
	$(SETUP) venv

setup:
	$(SETUP) run

setup-dev:
	$(SETUP) dev

run: setup
	$(PYTHON) -m suite run $(RUN_ARGS)

test: setup-dev
	$(PYTHON) -m pytest -q -ra -m "not gpu and not slow" -n $(TEST_WORKERS)

# real timings on the CPU (an A/B of two runs of this tree): minutes, and noisy on a busy machine
test-slow: setup-dev
	$(PYTHON) -m pytest -q -ra -m "slow and not gpu"

test-gpu: venv
	$(PYTHON) -m pytest -q -ra -m gpu

dashboard: setup-dev
	$(PYTHON) -m suite dashboard
