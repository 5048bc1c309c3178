"""``triton.autotune`` as the Triton kernels here use it, with two changes that
shorten the warm-up of a first run without changing what is chosen from:

- The candidates of a new key are compiled side by side in threads before the
  first is timed, through Triton's own asynchronous compile mode; compiling
  is most of a candidate's cost, and triton.compile spends most of its time
  outside the GIL (MLIR passes, LLVM, ptxas), so on a many-core host eight
  candidates compile in little more than the time of the slowest.
- Each candidate is timed for 25 ms after 5 ms of warm-up instead of Triton's
  default 100 ms after 25 ms: still tens to thousands of calls, enough to rank
  configurations, which is all the autotuner does; the suite's own timer
  measures the winner.

Nothing changes under TRITON_INTERPRET (one config runs there) or when a
key's winner comes from Triton's disk cache (``cache_results=True``): no
candidate is timed then, so none is compiled ahead.
"""
from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import triton
from triton.runtime.autotuner import Autotuner

from suite.backends import interpreting

BENCH_WARMUP_MS = 5
BENCH_REP_MS = 25


def _bench(fn, quantiles=None):
    return triton.testing.do_bench(fn, warmup=BENCH_WARMUP_MS, rep=BENCH_REP_MS, quantiles=quantiles)


class _ParallelAutotuner(Autotuner):
    _pending: list | None = None

    def prune_configs(self, kwargs):
        configs = super().prune_configs(kwargs)
        self._pending = list(configs)  # compiled at the first _bench of this key
        return configs

    def _bench(self, *args, config, **meta):
        pending, self._pending = self._pending, None
        if pending and len(pending) > 1 and not interpreting():
            precompile(self.fn, args, meta, pending)
        return super()._bench(*args, config=config, **meta)


def precompile(fn, args: tuple, meta: dict, configs: list) -> None:
    """Compile ``fn`` for each config (as its launch with ``args`` and ``meta``
    would) in a thread pool; a config that fails to compile is left for the
    autotuner, which times it as infinitely slow and reports nothing."""
    from triton.runtime._async_compile import AsyncCompileMode

    meta = {k: v for k, v in meta.items() if k not in ("grid", "warmup")}
    workers = max(1, min(len(configs), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        with AsyncCompileMode(pool, ignore_errors=True):
            for config in configs:
                try:
                    fn.run(*args, grid=(1,), warmup=True, **meta, **config.all_kwargs())
                except Exception:  # noqa: BLE001 - the autotuner meets it again and skips it
                    pass


def autotune(configs, key, **kwargs):
    """Drop-in for ``triton.autotune`` (same arguments) with parallel
    compilation of the candidates and shorter timing of each."""
    kwargs.setdefault("do_bench", _bench)

    @functools.wraps(triton.autotune)
    def decorator(fn):
        tuner = triton.autotune(configs=configs, key=key, **kwargs)(fn)
        if isinstance(tuner, Autotuner):
            tuner.__class__ = _ParallelAutotuner  # same state, two methods overridden
        return tuner

    return decorator
