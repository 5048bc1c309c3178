"""Run-time choice among the hand-written variants of a CUDA op.

The memory-bound CUDA ops (gelu, softmax, residual_layernorm_gelu) each have
a few designs behind one ``<op>_v(..., variant)`` entry point (tile shapes,
loads in flight a thread, register, cluster or streaming plans; see each .cu).
Which is fastest depends on the shape and the GPU, so, like Triton's
autotuner, the first call for a new key times every variant with the suite's
own events timer (L2 flushed before each sample), in order and in reverse
by turns (see TUNE_PASSES), and keeps the fastest (a variant far slower than
the others in a first probe is dropped before the passes, see PRUNE); later calls of that key
run it directly.  The first call is the harness's warm-up,
so the tuning lands in ``compile_s`` and never in the timed samples, and the
output checked against float64 is the chosen variant's.

A variant that cannot run a shape runs the op's automatic plan instead (the
.cu files say so), so every variant is safe to call; ``runs`` mirrors those
conditions so that only the designs that really run are timed and named.  Inside torch.compile
tracing or a CUDA graph capture no tuning happens: the automatic plan (0)
runs unless the key was tuned before.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Hashable, NamedTuple

# per variant and pass: a few samples inside a 10 ms budget, under the run's
# l2 (suite.timing.current_protocol); four passes give each variant 40 ms,
# enough to rank designs that differ by a few percent on kernels of 10 us to 1 ms
TUNE_LIMITS = dict(min_samples=3, max_samples=25, budget_ms=10.0)
# The variants are timed in order, then in reverse, twice, and each one's
# time is the mean of its pass medians.  One pass in a fixed order lets the
# card's drift pick the winner where a shape holds it at its power cap (the
# GEMM at 8192^3): the later variants meet a hotter, slower-clocked card.
# Over a forward and a reverse pass every variant's mean position is the
# same, so a drift linear in time cancels; the second pair halves what is
# left of the card's swings there (two passes can still pick a GEMM tile that
# paired rounds find 3-5% slower; implementations/gemm/NOTES.md).
TUNE_PASSES = 4
# The tuning passes are short bursts with the L2 flushed between calls: the
# card is cooler and faster-clocked than under sustained load.  Where a
# kernel draws more power a FLOP than its rival (a smaller GEMM tile streams
# more bytes from L2 for the same math), the difference shows only at the
# power cap, so an op may name the variants it prefers (``prefer``) and the
# first of them within TIE of the fastest tuned time is kept instead.
TIE = 0.02
# Before the passes every variant is probed with two flushed calls, and one
# more than PRUNE times slower than the fastest probe is not timed further:
# where a design does not suit a shape (a cluster plan on 128-column rows)
# it runs 10-100x slower, and four passes over such variants would cost more
# than the rest of the case.  A factor of three is far outside what one probe
# of a kernel of at least a few microseconds can be off by.
PRUNE = 3.0


class Limits(NamedTuple):
    """What the launchers ask of the device: its compute capability's major
    number (thread-block clusters and TMA from 9), its opt-in shared memory a
    block and its SMs.  The ``runs`` mirrors read them, so that a variant the
    device cannot launch is never timed, and the plans' texts, so that they
    name what runs there."""

    major: int
    smem_optin: int
    sms: int = 132

    @property
    def clusters(self) -> bool:
        return self.major >= 9


H200 = Limits(9, 232448, 132)


def device() -> Limits:
    """The current CUDA device's Limits, as the .cu launchers read them; an H200's
    where there is no CUDA device (a plan's text and the tests, without a GPU)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return H200
        index = torch.cuda.current_device()
    except Exception:  # no torch, or no driver: describe the H200
        return H200
    return _limits(index)


def limits_of(dev) -> Limits:
    """The Limits of the device a tensor lives on (``tensor.device``): a cached lookup,
    cheap enough for a launcher's every call; an H200's for a CPU tensor."""
    if dev.type != "cuda":
        return H200
    if dev.index is None:
        import torch

        return _limits(torch.cuda.current_device())
    return _limits(dev.index)


@functools.lru_cache(maxsize=None)
def _limits(index: int) -> Limits:
    import torch

    props = torch.cuda.get_device_properties(index)
    return Limits(props.major, int(getattr(props, "shared_memory_per_block_optin", 49152)),
                  props.multi_processor_count)


def alternating_means(names: list, time_one: Callable[[Any], float | None], passes: int = TUNE_PASSES) -> dict:
    """Each of ``names`` timed ``passes`` times, in order and in reverse by
    turns (see TUNE_PASSES), and the mean of its times.  ``time_one(name)``
    returns a time, or None to drop the name from the remaining passes and
    from the result."""
    times: dict = {name: [] for name in names}
    for p in range(passes):
        for name in (names if p % 2 == 0 else names[::-1]):
            if name in times:
                t = time_one(name)
                if t is None:
                    del times[name]
                else:
                    times[name].append(t)
    return {name: sum(t) / len(t) for name, t in times.items()}


class VariantTuner:
    def __init__(self, variants: tuple[int, ...], describe: dict[int, str],
                 runs: Callable[[int, Hashable], bool] | None = None,
                 prefer: tuple[int, ...] = ()):
        """``runs(variant, key)``: whether the op really runs that design for
        the key (a Python mirror of the .cu's launch conditions); a variant
        that would fall back to the automatic plan is not timed or named.
        ``prefer``: variants in order of preference where their tuned times
        tie (within TIE of the fastest); see _pick."""
        self.variants = variants
        self.describe = describe
        self.runs = runs
        self.prefer = prefer
        self.best: dict[Hashable, int] = {}
        self.times: dict[Hashable, dict[int, float]] = {}
        self.timed_at: dict[Hashable, str] = {}
        self.failed: dict[Hashable, dict[int, str]] = {}

    def run(self, key: Hashable, call: Callable[[int], Any], at: str | None = None) -> Any:
        """``call(variant)`` with the key's tuned variant, tuning it first at
        the key's first call; ``at`` names that call's shape, for config."""
        variant = self.best.get(key)
        if variant is None:
            if _capturing():
                return call(0)
            variant = self._tune(key, call)
            if at is not None:
                self.timed_at[key] = at
        return call(variant)

    def _tune(self, key: Hashable, call: Callable[[int], Any]) -> int:
        """Time the candidates and keep the fastest.  A variant that raises when
        probed or timed (a launch the device refuses that no ``runs`` mirror
        foresaw) sits the tuning out, as a Triton candidate does in
        autotune.race, and config names it with its error; where every variant
        raises, the first error is the case's."""
        from dataclasses import replace

        from suite.timing import current_protocol, measure, probe_ms

        candidates = [v for v in self.variants if self.runs is None or self.runs(v, key)]
        if not candidates:
            self.best[key], self.times[key] = 0, {}
            return 0
        protocol = replace(current_protocol(), **TUNE_LIMITS)
        probes, failed = {}, {}
        for v in candidates:
            try:
                probes[v] = probe_ms(lambda v=v: call(v), "cuda", protocol.l2)
            except Exception as exc:  # noqa: BLE001 - sits the tuning out
                failed[v] = exc
        if not probes:
            raise next(iter(failed.values()))
        fastest = min(probes.values())
        kept = [v for v in probes if probes[v] <= PRUNE * fastest]

        def time_one(v):
            try:
                return measure([lambda: call(v)], "cuda", "events", protocol=protocol).median
            except Exception as exc:  # noqa: BLE001 - sits the tuning out
                failed[v] = exc
                return None

        times = alternating_means(kept, time_one)
        times.update({v: probes[v] for v in probes if v not in times and v not in failed})  # shown, never picked
        if not times:
            raise next(iter(failed.values()))
        best = self._pick(times)
        self.best[key], self.times[key] = best, times
        self.failed[key] = {v: f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                            for v, e in failed.items()}
        return best

    def _pick(self, times: dict[int, float]) -> int:
        """The fastest variant, unless a preferred one is within TIE of it."""
        best = min(times, key=times.get)
        for v in self.prefer:
            if v == best:
                break
            if v in times and times[v] <= times[best] * (1 + TIE):
                return v
        return best

    def config(self, key: Hashable, at: str | None = None) -> str | None:
        """'variant k: what it is (autotuned over ...)' once ``key`` was tuned
        here; naming the shape it was timed at where that is not ``at``."""
        v = self.best.get(key)
        if v is None or not self.times.get(key):
            return None  # not tuned here, or no variant runs the shape: the automatic plan did
        times = self.times[key]
        tried = ", ".join(f"{k}:{t * 1000:.0f}us" for k, t in sorted(times.items()))
        tie = "" if times[v] <= min(times.values()) else f"; preferred at a tie within {TIE:.0%}"
        where = self.timed_at.get(key)
        shared = f"; timed at {where}, whose key this shape shares" if where and at and where != at else ""
        failed = "".join(f"; {k} failed: {why}" for k, why in sorted(self.failed.get(key, {}).items()))
        return f"variant {v}: {self.describe[v]} (autotuned; {tried}{tie}{shared}{failed})"


def _capturing() -> bool:
    import torch

    compiling = getattr(getattr(torch, "compiler", None), "is_compiling", lambda: False)
    if compiling():
        return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
