"""The CUDA ops' run-time variant choice: fastest kept per key, tuned once, shown in config."""
from types import SimpleNamespace

import pytest

from implementations._shared.cuda_variants import VariantTuner


@pytest.fixture(autouse=True)
def probes_keep_everything(monkeypatch):
    """The first look ranks every variant alike unless a test says otherwise."""
    import suite.timing

    monkeypatch.setattr(suite.timing, "probe_ms", lambda fn, *a, **k: (fn(), 1.0)[1])


def test_tuner_keeps_the_fastest_variant_per_key_and_tunes_once(monkeypatch):
    import suite.timing

    cost = {("a", 1): 3.0, ("a", 2): 1.0, ("a", 3): 2.0, ("b", 1): 0.5, ("b", 2): 1.0, ("b", 3): 2.0}
    timed = []

    def fake_measure(calls, device, timer, **limits):
        assert device == "cuda" and timer == "events"
        out = calls[0]()
        timed.append(out)
        return SimpleNamespace(median=cost[out])

    monkeypatch.setattr(suite.timing, "measure", fake_measure)
    tuner = VariantTuner((1, 2, 3), {1: "one", 2: "two", 3: "three"})
    ran = []

    def op(key):
        return lambda v: ran.append(v) or (key, v)

    assert tuner.config("a") is None
    assert tuner.run("a", op("a")) == ("a", 2)
    assert [v for _, v in timed] == [1, 2, 3, 3, 2, 1] * 2  # in order, then reversed, twice
    assert tuner.run("a", op("a")) == ("a", 2) and len(timed) == 12  # not tuned again
    assert tuner.run("b", op("b")) == ("b", 1) and len(timed) == 24
    text = tuner.config("a")
    assert text.startswith("variant 2: two (autotuned") and "1:3000us" in text


def test_a_card_slowing_down_while_tuning_does_not_pick_the_first_variant(monkeypatch):
    """Each timing comes out 4% slower than the one before (a card heating up to
    its power cap): in one pass variant 1, timed first, would win by 1%."""
    import suite.timing

    true = {1: 1.01, 2: 1.00, 3: 1.02}
    clock = []

    def drifting(calls, *a, **k):
        v = calls[0]()
        clock.append(v)
        return SimpleNamespace(median=true[v] * (1 + 0.04 * (len(clock) - 1)))

    monkeypatch.setattr(suite.timing, "measure", drifting)
    tuner = VariantTuner((1, 2, 3), {1: "one", 2: "two", 3: "three"})
    assert tuner.run("k", lambda v: v) == 2
    assert tuner.times["k"][2] < tuner.times["k"][1] < tuner.times["k"][3]


def test_a_variant_that_falls_back_is_not_timed(monkeypatch):
    import suite.timing

    monkeypatch.setattr(suite.timing, "measure", lambda calls, *a, **k: SimpleNamespace(median=float(calls[0]())))
    tuner = VariantTuner((1, 2, 3), {1: "one", 2: "two", 3: "three"}, runs=lambda v, key: v != 1)
    assert tuner.run("k", lambda v: v) == 2  # 1 would be fastest but is not what runs
    assert "1:" not in tuner.config("k")
    nothing = VariantTuner((1, 2), {1: "one", 2: "two"}, runs=lambda v, key: False)
    assert nothing.run("k", lambda v: v) == 0 and nothing.config("k") is None


def test_the_row_ops_know_which_plans_run():
    from implementations.residual_layernorm_gelu.cuda import _runs as rlg_runs
    from implementations.softmax.cuda import _runs as sm_runs

    # a 131072-wide row fits no register plan; TMA, cluster, streaming and
    # the persistent plans run (float32 512 KB rows: 8 CTAs of 64 KB slices,
    # 2 or 3 of them a CTA, for the 32 KB target too)
    assert [sm_runs(v, "float32", 131072, 4096) for v in range(1, 11)] == [False] * 3 + [True] * 7
    assert [sm_runs(v, "bfloat16", 131072, 4096) for v in range(1, 11)] == [False] * 3 + [True] * 7
    # slice in registers: 8 CTAs of 512 x 4, 256 x 8 or 1024 x 4 packs; float32 131072 fits only the last
    assert [sm_runs(v, "bfloat16", 131072, 4096) for v in (18, 19, 20, 21, 22)] == [True] * 5
    assert [sm_runs(v, "float32", 131072, 4096) for v in (18, 19, 20, 21, 22)] == [False, False, True, False, False]
    # raw packs in registers, 8 a thread: bf16 131072 on 4, 8 or 2 CTAs; float32 (32768 packs) does
    # not fit 8 CTAs of 256 x 8
    assert [sm_runs(v, "bfloat16", 131072, 4096) for v in (23, 24, 25, 27, 28, 29)] == [True] * 6
    # half2 exps on clusters of 4 CTAs of 512 x 8 packs: 16-bit rows of <= 8 x 4096 packs
    assert [sm_runs(v, dt, 131072, 4096) for v in (30, 31) for dt in ("bfloat16", "float32")] == [True, False] * 2
    assert not any(sm_runs(v, "bfloat16", 262152, 8) for v in (30, 31))
    # and on clusters of 2 CTAs of 512 x 16 or 1024 x 8 packs: 16-bit rows of <= 8 x 8192 packs
    assert [sm_runs(v, dt, 131072, 4096) for v in (32, 33) for dt in ("bfloat16", "float32")] == [True, False] * 2
    assert [sm_runs(v, "bfloat16", n, 8) for v in (32, 33) for n in (524288, 524296)] == [True, False] * 2
    assert [sm_runs(v, "float32", 131072, 4096) for v in (23, 24, 25, 27, 28, 29)] == [True, False, True, True,
                                                                                      False, False]
    # any alignment: threads for the body's n // vec packs (2053 bf16: 256 packs, 64 threads at 4 a
    # thread, 32 at 8); the raw plan 26 takes blocks of <= 256 threads (bf16 32768 would need 1024)
    assert [sm_runs(v, "bfloat16", 2053, 65536) for v in (15, 16, 17, 26)] == [True] * 4
    assert [sm_runs(v, "bfloat16", 2053, 65536) for v in (23, 24, 25)] == [False] * 3
    assert [sm_runs(v, "bfloat16", 32768, 4096) for v in (15, 26)] == [True, False]
    # shared-memory tiles of whole rows: 1..256 columns in any dtype, aligned or not; wider rows run auto
    for dt in ("float32", "bfloat16", "float16"):
        assert all(sm_runs(v, dt, n, 1 << 22) for v in (34, 35) for n in (1, 3, 7, 8, 25, 64, 128, 256))
        assert not any(sm_runs(v, dt, n, 8) for v in (34, 35) for n in (257, 781, 4096))
    # rows of 781 are not 16-byte multiples: softmax.cu ignores the variant
    assert not any(sm_runs(v, "float32", 781, 2048) for v in range(1, 11))
    assert all(sm_runs(v, "bfloat16", 4096, 32768) for v in (1, 2, 3, 7, 8, 9, 10))
    # 1.2 MB rows: one 150 KB slice a CTA fits (TMA), two or three do not
    assert [sm_runs(v, "bfloat16", 600_000, 2) for v in (4, 5, 8, 9, 10)] == [True, True, False, False, False]
    # 3 x 88 KB slices (float32 180224 = 704 KB) overflow a block, 2 fit
    assert [sm_runs(v, "float32", 180_224, 64) for v in (8, 9, 10)] == [True, True, False]
    # one pack a thread would need 2048 threads a row
    assert [rlg_runs(v, "float32", 8192, 16384) for v in range(1, 6)] == [True, True, False, True, True]
    assert [rlg_runs(v, "bfloat16", 32768, 64) for v in range(1, 6)] == [True, False, False, True, True]
    # persistent TMA: one CTA holds <= 1024 x 4 16-byte packs (bf16 32768, float32 16384); the cluster
    # plan 2..8 CTAs of them (float32 32768 on 2, bf16 131072 on 4); 16-byte rows only
    assert [rlg_runs(v, "bfloat16", 32768, 4096) for v in (8, 9)] == [True, True]
    assert [rlg_runs(v, "float32", 32768, 4096) for v in (8, 9)] == [False, True]
    assert [rlg_runs(v, "float32", 16384, 4096) for v in (8, 9)] == [True, True]
    assert [rlg_runs(v, "bfloat16", 16392, 8) for v in (8, 9)] == [True, True]
    assert [rlg_runs(v, "float32", 16392, 8) for v in (8, 9)] == [False, True]
    assert [rlg_runs(v, "bfloat16", 262144, 8) for v in (8, 9)] == [False, True]
    assert [rlg_runs(v, "bfloat16", 262152, 8) for v in (8, 9)] == [False, False]
    assert not any(rlg_runs(v, "bfloat16", 781, 2048) for v in (8, 9))
    # two slices in flight and w/b in shared memory: <= 512 x 4 packs a CTA, 2..8 CTAs (bf16 32768 on 2,
    # float32 on 4, bf16 131072 on 8; 131080 on none)
    assert [rlg_runs(12, dt, 32768, 4096) for dt in ("bfloat16", "float32")] == [True, True]
    assert [rlg_runs(12, "bfloat16", n, 8) for n in (65536, 131072, 131080)] == [True, True, False]
    assert not rlg_runs(12, "bfloat16", 781, 2048)
    # 512 x 8 or 1024 x 4 packs, one CTA a row: the same rows as plan 8; 16 those of 12
    for v in (16, 17):
        assert [rlg_runs(v, "bfloat16", n, 8) for n in (32768, 131072, 131080)] == [True, True, False]
    for v in (13, 14, 15):
        assert [rlg_runs(v, dt, 32768, 4096) for dt in ("bfloat16", "float32")] == [True, False]
        assert [rlg_runs(v, "float32", n, 8) for n in (16384, 16392)] == [True, False]
        assert not rlg_runs(v, "bfloat16", 781, 2048)
    # any alignment (18: 4 packs a thread, <= 1024 threads; 19: 8 packs, <= 512): rows that are not
    # 16-byte multiples whose body (n // vec packs) fits: bf16 up to 4096 packs, float32 4096;
    # on 16-byte rows they are not timed (plans 1-17 cover them)
    for v in (18, 19):
        assert [rlg_runs(v, "bfloat16", n, 1024) for n in (7, 781, 13437, 25905, 32775, 32777)] == \
            [True] * 5 + [False]
        assert [rlg_runs(v, "float32", n, 2048) for n in (1, 4721, 16387, 16389)] == [True] * 3 + [False]
        assert not any(rlg_runs(v, dt, n, 64) for dt, n in (("bfloat16", 4096), ("float32", 1000)))
    # the fuzz preset's unaligned bf16 rows: the any-alignment plans and the two long-row plans
    assert [v for v in range(1, 21) if rlg_runs(v, "bfloat16", 25905, 1024)] == [4, 5, 18, 19, 20]


def test_rlg_streamed_plan_races_at_unaligned_rows_that_two_buffers_hold():
    """Plan 21 (a persistent CTA streaming rows through two shared buffers of
    a row's raw x and r) is raced at rows that are not 16-byte multiples,
    from 512 packs (one a thread of 512) up to the 3616 that two buffers of
    the opt-in shared memory hold."""
    from implementations.residual_layernorm_gelu.cuda import _TUNER
    from implementations.residual_layernorm_gelu.cuda import _runs as rlg_runs

    assert 21 in _TUNER.variants and "persistent" in _TUNER.describe[21]
    assert [rlg_runs(21, "bfloat16", n, 64) for n in (511 * 8 + 1, 512 * 8 + 1, 3616 * 8 + 7, 3617 * 8 + 1)] == \
        [False, True, True, False]
    assert [rlg_runs(21, "float32", n, 64) for n in (2047, 2049, 14467, 14469)] == [False, True, True, False]
    assert not any(rlg_runs(21, dt, n, 64) for dt, n in (("bfloat16", 8192), ("float32", 4096)))  # 16-byte rows
    # the fuzz preset's wide unaligned rows race it beside the register and cluster plans
    assert [v for v in range(1, 22) if rlg_runs(v, "bfloat16", 19379, 1024)] == [4, 5, 18, 19, 20, 21]


def test_rlg_cluster_at_any_alignment_runs_where_its_body_fits():
    """Plan 20 (residual_layernorm_gelu.cu's cluster with a scalar head and
    tail and a 16-byte body): rows that are not 16-byte multiples whose
    n // vec packs, as float, fit 8 CTAs' slices (64 KB each, or up to a
    block's opt-in shared memory at 8 CTAs); on 16-byte rows plan 4 covers
    it, untimed.  Auto runs it for unaligned rows too long for registers."""
    from implementations.residual_layernorm_gelu.cuda import _TUNER, _auto_plan
    from implementations.residual_layernorm_gelu.cuda import _runs as rlg_runs
    from suite.workload import Case

    assert 20 in _TUNER.variants and "any alignment" in _TUNER.describe[20]
    # the slow unaligned rows: bf16 19379 (2422 packs of 32 B as float: 2 CTAs), 25905 (3238: 2),
    # 14749 (1843: 1), float32 19379 (4844 packs of 16 B: 2), 25905 (6476: 2); plan 4 at VEC = 1 and
    # two reads run too
    for dt, n in (("bfloat16", 19379), ("bfloat16", 25905), ("bfloat16", 14749), ("float32", 19379),
                  ("float32", 25905), ("float16", 131073)):
        assert [v for v in range(1, 21) if rlg_runs(v, dt, n, 1024) and v not in (18, 19)] == [4, 5, 20]

    def auto(dt, n):
        return _auto_plan(Case.make("residual_layernorm_gelu", dt, M=656, N=n))

    assert auto("bfloat16", 19379).startswith("cluster of 2 x 512 threads, row in shared memory, scalar head")
    assert auto("bfloat16", 25905).startswith("cluster of 2 ") and auto("float32", 25905).startswith("cluster of 2 ")
    assert all(auto(dt, 131073).startswith("cluster of 8 ") for dt in ("float16", "float32"))  # 512 KB of floats
    assert auto("bfloat16", 14749).startswith("cluster of 1 ")
    # unaligned rows that fit registers (one element a load, 8 a thread, <= 1024 threads): auto keeps them
    assert auto("bfloat16", 8191).startswith("registers") and auto("bfloat16", 8193).startswith("cluster of 1 ")
    assert auto("float32", 781).startswith("registers") and rlg_runs(20, "float32", 781, 2048)
    # rows of no whole pack run (all head and tail); 16-byte rows are plan 4's
    assert all(rlg_runs(20, dt, n, 8) for dt in ("float32", "bfloat16") for n in (1, 3, 7, 8193, 131073))
    assert not any(rlg_runs(20, dt, n, 8) for dt in ("float32", "bfloat16") for n in (8, 4096, 131072))
    # too long for 8 CTAs (bf16 524291: 65536 packs of 32 B, 8 x 256 KB; float32 600001): two reads
    for dt, n in (("bfloat16", 524_291), ("float32", 600_001)):
        assert not rlg_runs(20, dt, n, 2) and not rlg_runs(4, dt, n, 2) and rlg_runs(5, dt, n, 2)
        assert auto(dt, n).startswith("two reads")
    # the longest that fit: 8 slices of 226 KB and 1 KB to spare (of the H200's 227 KB a block):
    # bf16 8 x 7232 packs of 32 B, float32 8 x 14464 of 16 B
    assert rlg_runs(20, "bfloat16", 8 * 7232 * 8 + 7, 2) and not rlg_runs(20, "bfloat16", (8 * 7232 + 1) * 8 + 7, 2)
    assert rlg_runs(20, "float32", 8 * 14464 * 4 + 3, 2) and not rlg_runs(20, "float32", (8 * 14464 + 1) * 4 + 3, 2)


def test_softmax_cluster_at_any_alignment_runs_where_its_body_fits():
    """Plan 36 (softmax.cu's cluster with a scalar head and tail and a 16-byte
    body): any n whose n // vec packs fit 8 CTAs' slices (64 KB, or up to a
    block's opt-in shared memory at 8 CTAs), aligned or not; for unaligned
    rows too long for registers auto runs it, so variant 0 is no candidate
    of its own there, but is where registers hold the row (one element a
    load) or where plan 36 does not fit (two reads a row)."""
    from implementations.softmax.cuda import _TUNER, _plan
    from implementations.softmax.cuda import _runs as sm_runs

    assert 36 in _TUNER.variants and "any alignment" in _TUNER.describe[36]
    # the slow unaligned rows: bf16 90533 (11316 packs, 4 CTAs), bf16 50257 (2 CTAs), float32 19945 (2 CTAs)
    for dt, n in (("bfloat16", 90533), ("bfloat16", 50257), ("float32", 19945), ("float16", 131073)):
        assert sm_runs(36, dt, n, 256) and not sm_runs(0, dt, n, 256)
        assert not any(sm_runs(v, dt, n, 256) for v in (1, 4, 6, 15, 23, 34))
    assert _plan(90533, 2).startswith("cluster of 4 x 512 threads, row in shared memory, scalar head and tail")
    assert _plan(50257, 2).startswith("cluster of 2 ") and _plan(19945, 4).startswith("cluster of 2 ")
    # short and aligned rows: it runs too (a body of 0 packs, or no head and tail)
    assert all(sm_runs(36, dt, n, 8) for dt in ("float32", "bfloat16") for n in (1, 7, 781, 4096, 131072))
    assert sm_runs(0, "bfloat16", 781, 2048) and _plan(781, 2).startswith("registers")
    assert _plan(8193, 2).startswith("cluster of 1 ") and not sm_runs(0, "bfloat16", 8193, 8)
    assert sm_runs(0, "bfloat16", 8191, 8)  # 1024 threads of 8 elements: registers
    # too long for 8 CTAs (bf16 1000003: 125000 packs, 8 x 250 KB; float32 600001): two reads
    for dt, n in (("bfloat16", 1_000_003), ("float32", 600_001)):
        assert not sm_runs(36, dt, n, 2) and sm_runs(0, dt, n, 2)
        assert _plan(n, 2 if dt == "bfloat16" else 4).startswith("two reads")


def test_variant_zero_is_a_real_choice_where_it_is_one(monkeypatch):
    """gemm tile 0 and attention tiling 0 are designs, not 'the automatic plan'."""
    import suite.timing

    monkeypatch.setattr(suite.timing, "measure", lambda calls, *a, **k: SimpleNamespace(median=float(calls[0]()) + 1))
    tuner = VariantTuner((0, 1, 2), {0: "zero", 1: "one", 2: "two"})
    assert tuner.run("k", lambda v: v) == 0
    assert tuner.config("k").startswith("variant 0: zero (autotuned")


def test_a_preferred_variant_wins_a_tie_but_not_a_real_gap(monkeypatch):
    """prefer=(3, 4): 3 is kept when it is within TIE of the fastest, not when it is further off."""
    import suite.timing
    from implementations._shared import cuda_variants

    cost = {}
    monkeypatch.setattr(suite.timing, "measure", lambda calls, *a, **k: SimpleNamespace(median=cost[calls[0]()]))
    tuner = VariantTuner((3, 4, 5), {3: "big", 4: "small", 5: "tiny"}, prefer=(3, 4, 5))
    cost.update({3: 1.0 + cuda_variants.TIE / 2, 4: 1.0, 5: 1.5})
    assert tuner.run("tie", lambda v: v) == 3
    cost.update({3: 1.0 + 2 * cuda_variants.TIE, 4: 1.0, 5: 1.5})
    assert tuner.run("gap", lambda v: v) == 4
    # the fastest is kept when no preferred variant before it ties
    cost.update({3: 1.2, 4: 1.1, 5: 1.0})
    assert tuner.run("fast", lambda v: v) == 5
    assert tuner.config("tie").startswith("variant 3: big") and "preferred at a tie within 2%" in tuner.config("tie")
    assert "preferred" not in tuner.config("gap")


def test_a_variant_far_slower_in_the_probe_is_not_timed_further(monkeypatch):
    """Variant 3 probes at 4x the fastest (over PRUNE): shown in config, never in the passes."""
    import suite.timing
    from implementations._shared import cuda_variants

    cost = {1: 1.2, 2: 1.0, 3: 4.0 * cuda_variants.PRUNE / 3}
    probed, timed = [], []
    monkeypatch.setattr(suite.timing, "probe_ms", lambda fn, *a, **k: probed.append(fn()) or cost[probed[-1]])
    monkeypatch.setattr(suite.timing, "measure",
                        lambda calls, *a, **k: timed.append(calls[0]()) or SimpleNamespace(median=cost[timed[-1]]))
    tuner = VariantTuner((1, 2, 3), {1: "one", 2: "two", 3: "three"})
    assert tuner.run("k", lambda v: v) == 2
    assert probed == [1, 2, 3]
    assert timed == [1, 2, 2, 1] * 2
    assert "3:4000us" in tuner.config("k")
    # within PRUNE, a slower probe still gets its passes
    cost[3] = 0.9 * cuda_variants.PRUNE
    probed.clear(), timed.clear()
    tuner.run("k2", lambda v: v)
    assert sorted(set(timed)) == [1, 2, 3]


def test_a_variant_that_raises_sits_the_tuning_out_and_is_named(monkeypatch):
    """A launch the device refuses (more shared memory than it has, say) costs that
    variant its place, not the case; where every variant raises, the error stands."""
    import suite.timing

    monkeypatch.setattr(suite.timing, "measure", lambda calls, *a, **k: SimpleNamespace(median=float(calls[0]())))

    def op(v):
        if v == 1:
            raise RuntimeError("CUDA error: invalid argument\nmore lines")
        return v

    tuner = VariantTuner((1, 2, 3), {1: "one", 2: "two", 3: "three"})
    assert tuner.run("k", op) == 2
    text = tuner.config("k")
    assert "1:" not in text and "2:2000us" in text and text.endswith("; 1 failed: RuntimeError: CUDA error: invalid argument)")

    # raising only once timed (the probe passed): dropped from the passes too
    calls = []

    def late(v):
        calls.append(v)
        if v == 2 and len(calls) > 3:
            raise RuntimeError("late")
        return v

    monkeypatch.setattr(suite.timing, "measure", lambda fns, *a, **k: SimpleNamespace(median=float(fns[0]())))
    assert VariantTuner((2, 3), {2: "two", 3: "three"}).run("k", late) == 3

    def broken(v):
        raise RuntimeError(f"variant {v} broke")

    with pytest.raises(RuntimeError, match="variant 1 broke"):
        VariantTuner((1, 2), {1: "one", 2: "two"}).run("k", broken)
