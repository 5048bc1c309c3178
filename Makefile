# The README's two commands are `make run` and `make test`.
PYTHON ?= python3
# GPU: the quick preset on every available backend; CPU-only: the tiny cpu preset.
RUN_ARGS ?= $(shell $(PYTHON) -c "import torch,sys; sys.stdout.write('--preset quick' if torch.cuda.is_available() else '--device cpu --preset cpu')" 2>/dev/null || echo --device cpu --preset cpu)

.PHONY: setup setup-dev run test test-gpu dashboard

setup:
	PYTHON=$(PYTHON) scripts/setup.sh run

setup-dev:
	PYTHON=$(PYTHON) scripts/setup.sh dev

run: setup
	$(PYTHON) -m suite run $(RUN_ARGS)

test: setup-dev
	$(PYTHON) -m pytest -q -ra -m "not gpu"

test-gpu:
	$(PYTHON) -m pytest -q -ra -m gpu

dashboard: setup-dev
	$(PYTHON) -m suite dashboard
