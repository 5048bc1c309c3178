"""``triton.autotune`` as the Triton kernels here use it, with three changes:

- The candidates of a new key are compiled side by side in threads before the
  first is timed, through Triton's own asynchronous compile mode; compiling
  is most of a candidate's cost, and triton.compile spends most of its time
  outside the GIL (MLIR passes, LLVM, ptxas), so on a many-core host eight
  candidates compile in little more than the time of the slowest.
- Each candidate is timed by the suite's own events timer (L2 flushed
  outside the timed interval, the GPU held while the launcher runs, so a
  Python launch is not counted) for about 10 ms a pass, instead of Triton's
  default benchmark of 100 ms after 25 ms of warm-up: the candidates are
  ranked the way the suite will measure the winner, and short kernels (tens
  of microseconds) are not ranked by their launch overhead.
- The candidates are timed in RACE_PASSES passes, in order and in reverse by
  turns, and each one's time is the mean of its passes (the CUDA variant
  tuner's rule, cuda_variants.TUNE_PASSES): one pass in a fixed order lets a
  card that slows as the passes go on pick the winner, and a single timing
  each cannot separate candidates a few percent apart.

Keys are sizes rounded up to a half-octave (:func:`bucket`): a kernel passes
``bucket(M)`` and the like as arguments it ignores and names them in ``key``,
so every shape in a bucket reuses the bucket's winner and a sweep of new
shapes tunes once per bucket, not once per shape.

Nothing changes under TRITON_INTERPRET (one config runs there) or when a
key's winner comes from Triton's disk cache (``cache_results=True``): no
candidate is timed then, so none is compiled ahead.
"""
from __future__ import annotations

import functools
import math
import os
from concurrent.futures import ThreadPoolExecutor

import triton
from triton.runtime.autotuner import Autotuner

from implementations._shared.cuda_variants import TUNE_LIMITS, TUNE_PASSES, alternating_means
from suite.backends import interpreting

# per candidate and pass: the CUDA variant tuner's sample limits, under the
# run's l2 (suite.timing.current_protocol)
BENCH_LIMITS = TUNE_LIMITS


def _bench(fn, quantiles=None):
    from dataclasses import replace

    from suite.timing import current_protocol, measure

    t = measure([fn], "cuda", "events", protocol=replace(current_protocol(), **BENCH_LIMITS))
    if quantiles is None:
        return t.median
    by_q = {0.5: t.median, 0.2: t.p20, 0.8: t.p80}
    return [by_q.get(q, t.median) for q in quantiles]


# passes of race(): in order, then in reverse, twice (the CUDA variant tuner's
# rule, implementations/_shared/cuda_variants.py: a card at its power cap
# slows as a fixed order goes on, and a forward and a reverse pass give every
# candidate the same mean position, so a drift linear in time cancels)
RACE_PASSES = TUNE_PASSES


def race(runs: dict, bench=None) -> dict:
    """Mean time of each of ``runs`` (name -> call) over RACE_PASSES passes, in
    order and in reverse by turns, each pass ``bench(call)`` (default: this
    module's timer).  A call that raises, on its first run or while timed,
    sits the race out and has no time."""
    bench = bench or _bench
    ready = {}
    for name, run in runs.items():
        try:
            run()
        except Exception:  # noqa: BLE001 - a candidate that fails to build or launch
            continue
        ready[name] = run

    def time_one(name):
        try:
            return bench(ready[name])
        except Exception:  # noqa: BLE001
            return None

    return alternating_means(list(ready), time_one, RACE_PASSES)


def bucket(x: int) -> int:
    """``x`` rounded up to the next 2^k or 3 * 2^(k-1): 1, 2, 3, 4, 6, 8, 12, ...,
    3072, 4096, 6144, 8192.  Within a bucket sizes differ by at most a third, so
    the tile that wins for one suits the rest; the kernels mask every edge, so
    any size runs correctly whatever its bucket's winner."""
    if x <= 3:
        return max(int(x), 1)
    p = 1 << (int(x) - 1).bit_length()
    return 3 * p // 4 if x <= 3 * p // 4 else p


class _ParallelAutotuner(Autotuner):
    _pending: list | None = None
    _means: dict | None = None

    def prune_configs(self, kwargs):
        configs = super().prune_configs(kwargs)
        self._pending = list(configs)  # compiled and raced at the first _bench of this key
        return configs

    def _bench(self, *args, config, **meta):
        """Triton's autotuner calls this once per candidate of a new key, in
        order; the first call compiles and times them all (see race_configs)
        and every call answers from those times."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._means = None
            if len(pending) > 1 and not interpreting():
                precompile(self.fn, args, meta, pending, dict(zip(self.arg_names, args)))
                self._means = race_configs(lambda c: Autotuner._bench(self, *args, config=c, **meta), pending)
        if self._means is not None and config in self._means:
            return self._means[config]
        return super()._bench(*args, config=config, **meta)


def race_configs(bench, configs: list) -> dict:
    """Each config's [median, p20, p80] as the means of ``bench(config)``'s
    over RACE_PASSES passes in order and in reverse by turns; a config whose
    first timing is infinite (it failed to compile or launch, as Triton's
    _bench reports it) sits out the later passes and keeps that timing."""
    seen: dict = {}

    def time_one(config):
        t = list(bench(config))
        seen.setdefault(config, []).append(t)
        return None if math.isinf(t[0]) else t[0]

    means = alternating_means(list(configs), time_one, RACE_PASSES)
    return {c: ([sum(q) / len(q) for q in zip(*seen[c])] if c in means else seen[c][0]) for c in seen}


def precompile(fn, args: tuple, meta: dict, configs: list, nargs: dict | None = None) -> None:
    """Compile ``fn`` for each config (as its launch with ``args`` and ``meta``
    would) in a thread pool; a config that fails to compile is left for the
    autotuner, which times it as infinitely slow and reports nothing.

    A config's pre_hook runs first, with ``nargs`` (the arguments by name),
    ``meta`` and the config's own values, as before its timed launches: a
    hook that sets tensor descriptors' block shapes changes the kernel that
    gets compiled (the key is read before the compile is handed to the pool).
    """
    from triton.runtime._async_compile import AsyncCompileMode

    meta = {k: v for k, v in meta.items() if k not in ("grid", "warmup")}
    workers = max(1, min(len(configs), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        with AsyncCompileMode(pool, ignore_errors=True):
            for config in configs:
                try:
                    if config.pre_hook is not None:
                        config.pre_hook({**(nargs or {}), **meta, **config.all_kwargs()})
                    fn.run(*args, grid=(1,), warmup=True, **meta, **config.all_kwargs())
                except Exception:  # noqa: BLE001 - the autotuner meets it again and skips it
                    pass


def autotune(configs, key, **kwargs):
    """Drop-in for ``triton.autotune`` (same arguments) with parallel
    compilation of the candidates, each timed by the suite's timer."""
    kwargs.setdefault("do_bench", _bench)

    @functools.wraps(triton.autotune)
    def decorator(fn):
        tuner = triton.autotune(configs=configs, key=key, **kwargs)(fn)
        if isinstance(tuner, Autotuner):
            tuner.__class__ = _ParallelAutotuner  # same state, two methods overridden
        return tuner

    return decorator
