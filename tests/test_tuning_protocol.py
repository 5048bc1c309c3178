"""A run's timing protocol reaches its worker, and the autotuners time under its l2
with their own short sample limits."""
import math
from types import SimpleNamespace

import pytest

import suite.timing
from suite import worker
from suite.timing import Protocol

RUN = Protocol(l2="cold-flush", min_samples=7, max_samples=70, budget_ms=99.0)


@pytest.fixture
def received(monkeypatch):
    """Every protocol measure() is given, with the run's protocol made current."""
    got = []

    def fake_measure(calls, device, timer, protocol=None, **limits):
        assert (device, timer, limits) == ("cuda", "events", {})
        got.append(protocol)
        return SimpleNamespace(median=1.0, p20=0.9, p80=1.1)

    def fake_probe(fn, device, l2="cold-clean", n=2):
        got.append(("probe", device, l2))
        return 1.0

    monkeypatch.setattr(suite.timing, "measure", fake_measure)
    monkeypatch.setattr(suite.timing, "probe_ms", fake_probe)
    monkeypatch.setattr(suite.timing, "_current", RUN)
    return got


def test_the_triton_autotuner_times_under_the_current_l2(received):
    from implementations._shared import autotune as _autotune

    assert _autotune._bench(lambda: None) == 1.0
    assert _autotune._bench(lambda: None, quantiles=[0.5, 0.2]) == [1.0, 0.9]
    assert received == [Protocol(l2="cold-flush", **_autotune.BENCH_LIMITS)] * 2


def test_the_row_tuner_times_under_the_current_l2(received):
    from implementations._shared import autotune as _autotune, row_tuning as _row_tuning

    assert _row_tuning.time_ms(lambda: None) == 1.0
    assert received == [Protocol(l2="cold-flush", **_autotune.BENCH_LIMITS)]


def test_the_cuda_variant_tuner_times_under_the_current_l2(received):
    from implementations._shared import cuda_variants as _cuda_variants

    tuner = _cuda_variants.VariantTuner((1, 2), {1: "one", 2: "two"})
    tuner.run("k", lambda v: v)
    want = Protocol(l2="cold-flush", **_cuda_variants.TUNE_LIMITS)
    assert received == [("probe", "cuda", "cold-flush")] * 2 + [want] * (2 * _cuda_variants.TUNE_PASSES)


def test_a_cuda_variant_key_shared_by_shapes_names_where_it_was_timed(received):
    from implementations._shared import cuda_variants as _cuda_variants

    tuner = _cuda_variants.VariantTuner((1, 2), {1: "one", 2: "two"})
    assert tuner.run("k", lambda v: v, at="1000x512x512") == tuner.best["k"]
    assert "timed at" not in tuner.config("k", at="1000x512x512")
    assert "; timed at 1000x512x512, whose key this shape shares" in tuner.config("k", at="1024x512x512")
    tuner.run("k", lambda v: v, at="1024x512x512")        # tuned already: not again
    assert tuner.timed_at["k"] == "1000x512x512"


class _Conn:
    """The worker's end of the pipe, told to stop at once."""

    def __init__(self):
        self.sent = []

    def send(self, msg):
        self.sent.append(msg)

    def recv(self):
        return ("stop",)


def test_the_worker_makes_its_options_protocol_current(monkeypatch):
    monkeypatch.setattr(suite.timing, "_current", Protocol())
    monkeypatch.setattr(worker.signal, "signal", lambda *a: None)  # keep this process's Ctrl-C
    opts = worker.Options(device="cpu", timers=("wall",), preset="cpu", seed=1, peaks_gbps=1.0,
                          peaks_tflops={}, protocol=RUN)
    conn = _Conn()
    worker.worker_main(conn, opts)
    assert conn.sent == [("ready", {})]  # a plain worker reports no device of its own
    assert suite.timing.current_protocol() is RUN


def test_autotune_keys_are_half_octave_buckets():
    from implementations._shared.autotune import bucket

    assert [bucket(x) for x in (1, 2, 3, 4, 5, 6, 7, 8, 9)] == [1, 2, 3, 4, 6, 6, 8, 8, 12]
    assert bucket(3000) == bucket(3072) == 3072 and bucket(3073) == bucket(4000) == 4096
    for x in range(1, 20000, 7):
        b = bucket(x)
        assert x <= b < 1.5 * x + 1 and bucket(b) == b


def test_a_race_on_a_drifting_card_is_won_by_the_fastest():
    """autotune.race times the candidates in order and in reverse by turns, so
    a card that slows as the race goes on (power cap) does not hand the win to
    whoever is timed first; one that fails sits out, and each time is a mean."""
    from implementations._shared import autotune

    true = {"first": 1.10, "second": 1.00, "third": 0.98, "broken": 0.5}
    calls = []

    def bench(run):
        name = run()
        drift = 0.03 * len(calls)  # every timing finds the card slower
        calls.append(name)
        return true[name] + drift

    def broken():
        raise RuntimeError("out of shared memory")

    runs = {n: (lambda n=n: n) for n in ("first", "second", "third")}
    runs["broken"] = broken
    # one pass in a fixed order would pick "second" (1.03 against third's 1.04)
    assert min(("first", "second", "third"), key=lambda n: true[n] + 0.03 * list(runs).index(n)) == "second"
    times = autotune.race(runs, bench)
    assert set(times) == {"first", "second", "third"}
    assert min(times, key=times.get) == "third"
    assert calls == ["first", "second", "third", "third", "second", "first"] * (autotune.RACE_PASSES // 2)
    for name, t in times.items():
        timed = [true[name] + 0.03 * i for i, c in enumerate(calls) if c == name]
        assert t == pytest.approx(sum(timed) / len(timed))


def test_the_triton_autotuner_races_its_candidates_on_a_drifting_card(monkeypatch):
    """A new key's candidates are timed in RACE_PASSES alternating passes
    through Triton's own Autotuner.run: the card's drift does not pick the
    winner, each candidate's timing is its mean, and one that fails to build
    keeps Triton's infinite timing and is not timed again."""
    import triton
    import triton.language as tl
    from triton.runtime.autotuner import Autotuner

    from implementations._shared import autotune

    @triton.jit
    def kernel(x, n, BLOCK: tl.constexpr):
        pass

    true = {16: 1.10, 32: 1.00, 64: 0.98, 128: math.inf}
    calls = []

    def base_bench(self, *args, config, **meta):
        block = config.kwargs["BLOCK"]
        calls.append(block)
        if math.isinf(true[block]):
            return [math.inf] * 3
        t = true[block] + 0.03 * len(calls)  # every timing finds the card slower
        return [t, t - 0.01, t + 0.01]

    monkeypatch.setattr(Autotuner, "_bench", base_bench)
    monkeypatch.setattr(autotune, "precompile", lambda *a, **k: None)
    monkeypatch.setattr(autotune, "interpreting", lambda: False)
    tuner = autotune.autotune(configs=[triton.Config({"BLOCK": b}) for b in true], key=["n"])(kernel)
    launched = []
    tuner.fn = SimpleNamespace(run=lambda *a, **k: launched.append(k["BLOCK"]))

    tuner.run(None, 5, grid=(1,), warmup=False)
    assert launched == [64]  # one pass in order would have kept 32 (1.06 against 64's 1.07)
    order = [16, 32, 64, 128]
    assert calls == order + [64, 32, 16] + [16, 32, 64] + [64, 32, 16]
    for config, timing in tuner.configs_timings.items():
        block = config.kwargs["BLOCK"]
        if math.isinf(true[block]):
            assert timing == [math.inf] * 3
            continue
        timed = [true[block] + 0.03 * (i + 1) for i, c in enumerate(calls) if c == block]
        assert timing == pytest.approx([sum(timed) / 4 + d for d in (0, -0.01, 0.01)])
    tuner.run(None, 7, grid=(1,), warmup=False)  # a new key: raced again
    assert len(calls) == 2 * 13
    tuner.run(None, 5, grid=(1,), warmup=False)  # a key seen before: no timing
    assert len(calls) == 2 * 13 and launched == [64, 64, 64]


def test_precompile_gives_each_config_its_pre_hook_first(monkeypatch):
    """A config whose pre_hook sets tensor descriptors' boxes (the TMA
    kernels) is compiled with its own boxes, not with the launcher's
    placeholders: the hook sees the arguments by name, the launch's meta and
    the config's values, and runs before that config's compile launch."""
    import triton

    from implementations._shared import autotune

    desc = SimpleNamespace(block_shape=[64, 64])

    def set_box(nargs):
        nargs["desc"].block_shape = [nargs["BLOCK"], nargs["WIDTH"]]

    configs = [triton.Config({"BLOCK": b}, pre_hook=set_box) for b in (16, 32)] + [triton.Config({"BLOCK": 8})]
    seen = []
    fn = SimpleNamespace(run=lambda *args, **kw: seen.append((kw["BLOCK"], list(args[0].block_shape))))
    autotune.precompile(fn, (desc, 7), {"WIDTH": 128, "grid": None, "warmup": True}, configs,
                        {"desc": desc, "n": 7})
    assert seen == [(16, [16, 128]), (32, [32, 128]), (8, [32, 128])]
