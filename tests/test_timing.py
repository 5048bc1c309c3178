"""The timers' arithmetic and protocol on the CPU, and on a GPU that launch time is not kernel time."""
import dataclasses
import re
import time

import pytest

from suite import timing


def test_quantiles_and_median():
    t = timing.Timing([5.0, 1.0, 3.0, 2.0, 4.0], "wall", "n/a")
    assert t.median == 3.0
    assert t.min == 1.0
    assert t.p20 == pytest.approx(1.8)
    assert t.p80 == pytest.approx(4.2)
    assert t.n == 5


def test_sample_count_respects_budget_and_bounds():
    assert timing.sample_count(1.0, 150, 10, 100) == 100  # capped
    assert timing.sample_count(5.0, 150, 10, 100) == 30
    assert timing.sample_count(100.0, 150, 10, 100) == 10  # floor
    assert timing.sample_count(0.0, 150, 10, 100) == 100


def test_rotation_sets_exceed_three_l2s():
    l2 = 50 * 2**20
    for set_bytes in (4096, 2**20, 40 * 2**20, 10 * l2):
        k = timing.rotation_sets(set_bytes, l2)
        assert k >= 2
        if k < 512:
            assert (k - 1) * set_bytes >= 3 * l2


def test_hold_covers_twice_the_launch_time_within_bounds():
    assert timing.hold_us(0.0) == timing.HOLD_MIN_US
    assert timing.hold_us(30.0) == 60.0
    assert timing.hold_us(1e6) == timing.HOLD_MAX_US


def test_wall_timer_measures_host_time():
    t = timing.measure([lambda: time.sleep(0.002)], "cpu", "wall", min_samples=3, max_samples=5,
                       budget_ms=10)
    assert 3 <= t.n <= 5
    assert 1.5 < t.median < 50


def test_gpu_timers_refuse_the_cpu():
    with pytest.raises(ValueError, match="CUDA device"):
        timing.measure([lambda: None], "cpu", "events")
    with pytest.raises(ValueError, match="unknown timer"):
        timing.measure([lambda: None], "cpu", "stopwatch")


@pytest.mark.parametrize("fields,needle", [
    (dict(l2="clean"), "unknown l2 'clean'; choose from cold-clean, cold-flush"),
    (dict(l2="cold-rotate"), "unknown l2 'cold-rotate'"),  # the graph timer's label, not a choice
    (dict(min_samples=0), "min_samples must be a whole number of at least 1, not 0"),
    (dict(min_samples=2.5), "min_samples must be a whole number"),
    (dict(min_samples=20, max_samples=10), "max_samples must be a whole number of at least min_samples (20), not 10"),
    (dict(budget_ms=0), "budget_ms must be a positive number of milliseconds, not 0"),
    (dict(budget_ms=-5.0), "budget_ms must be a positive"),
    (dict(budget_ms=float("nan")), "budget_ms must be a positive"),
    (dict(settle_ms=-1.0), "settle_ms must be a number of milliseconds, 0 or more, not -1.0"),
    (dict(settle_ms=float("inf")), "settle_ms must be a number of milliseconds"),
    (dict(settle_ms="1"), "settle_ms must be a number of milliseconds"),
])
def test_a_protocol_with_a_bad_field_is_refused_when_made(fields, needle):
    with pytest.raises(ValueError, match=re.escape(needle)):
        timing.Protocol(**fields)
    with pytest.raises(ValueError, match=re.escape(needle)):  # replace() makes a new one, checked alike
        dataclasses.replace(timing.Protocol(), **fields)


def test_the_default_protocol_is_frozen_and_names_a_row_l2():
    p = timing.Protocol()
    assert p.l2 == "cold-clean" and p.l2 in timing.L2_CHOICES
    assert set(timing.L2_CHOICES) == {"cold-clean", "cold-flush"}
    assert set(timing._EVICT) == set(timing.L2_CHOICES)  # flush_l2 has a way for every choice
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.l2 = "cold-flush"


def test_measure_takes_the_protocol_its_limits_override_and_the_cpu_timer_ignores_l2():
    p = timing.Protocol(l2="cold-flush", min_samples=2, max_samples=2)
    t = timing.measure([lambda: None], "cpu", "wall", p)
    assert (t.timer, t.l2, t.n) == ("wall", "n/a", 2)
    t = timing.measure([lambda: None], "cpu", "wall", p, min_samples=4, max_samples=4)
    assert t.n == 4
    with pytest.raises(ValueError, match="max_samples"):
        timing.measure([lambda: None], "cpu", "wall", p, max_samples=1)
    with pytest.raises(TypeError):  # the old keyword is no protocol field
        timing.measure([lambda: None], "cpu", "wall", flush="write")


def test_without_a_protocol_measure_uses_the_current_one(monkeypatch):
    monkeypatch.setattr(timing, "_current", timing.current_protocol())
    timing.use_protocol(timing.Protocol(l2="cold-flush", min_samples=3, max_samples=3))
    assert timing.current_protocol().l2 == "cold-flush"
    assert timing.measure([lambda: None], "cpu", "wall").n == 3


@pytest.mark.gpu
@pytest.mark.parametrize("l2", ["cold-clean", "cold-flush"])
def test_both_flushes_evict_the_l2(l2):
    """A copy of an eighth of the L2 is at least 1.15x slower after either flush than when its
    operands are still in L2 (each warm sample after a long spin hold, so no launch gap is timed).
    On the H200 (60 MiB L2): 7.4-7.8 us cold under cold-clean, 8.4-8.6 under cold-flush,
    5.4-6.1 warm; a flush that left the operands in L2 would give about 1.0."""
    import torch

    x = torch.randn(timing.l2_bytes("cuda") // 32, device="cuda")
    y = torch.empty_like(x)
    copy = lambda: y.copy_(x)  # noqa: E731
    cold = timing.measure([copy], "cuda", "events", timing.Protocol(l2=l2, min_samples=20, max_samples=20))
    assert cold.l2 == l2
    # 200 us of spin, far more than the host needs to queue the next few calls: the GPU must
    # never catch up with the host inside a warm sample (a launch gap would be timed)
    hold = int(200 * timing._spin_rate("cuda"))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(20)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(20)]
    for start, end in zip(starts, ends):  # as the events timer queues them, with a copy instead of the flush
        copy()
        torch.cuda._sleep(hold)
        start.record()
        copy()
        end.record()
    torch.cuda.synchronize()
    warm = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    warm_ms = sorted(warm)[10]
    print(f"{l2}: cold {cold.median * 1e3:.1f} us, warm {warm_ms * 1e3:.1f} us")
    assert cold.median > 1.15 * warm_ms, f"{l2}: cold {cold.median * 1e3:.1f} us, warm {warm_ms * 1e3:.1f} us"


@pytest.mark.gpu
def test_events_do_not_count_a_slow_launcher():
    import torch

    x = torch.randn(4096, device="cuda")

    def slow_launch():  # 300 us of host work before a few-microsecond kernel
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 300e-6:
            pass
        return x * 2

    t = timing.measure([slow_launch], "cuda", "events", min_samples=10, max_samples=20, budget_ms=50)
    assert t.median < 0.1, f"events timer counted host launch time: median {t.median * 1e3:.0f} us"
