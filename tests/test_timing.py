"""The timers' arithmetic on the CPU, and on a GPU that launch time is not kernel time."""
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


def test_unknown_l2_flush_is_refused_and_the_cpu_timer_ignores_the_flush():
    with pytest.raises(ValueError, match="unknown L2 flush 'zero'; choose from clean, write"):
        timing.measure([lambda: None], "cpu", "wall", flush="zero")
    with pytest.raises(ValueError, match="unknown L2 flush"):
        timing.flush_l2("cpu", "zero")
    t = timing.measure([lambda: None], "cpu", "wall", flush="write", min_samples=2, max_samples=2)
    assert (t.timer, t.l2, t.n) == ("wall", "n/a", 2)
    assert timing.FLUSHES == {"clean": "cold-clean", "write": "cold-flush"}


@pytest.mark.gpu
@pytest.mark.parametrize("flush", ["clean", "write"])
def test_both_flushes_evict_the_l2(flush):
    """A copy of an eighth of the L2 is at least 1.15x slower after either flush than when its
    operands are still in L2 (each warm sample after a long spin hold, so no launch gap is timed).
    On the H200 (60 MiB L2): 7.4-7.8 us cold after the clean flush, 8.4-8.6 after the written one,
    5.4-6.1 warm; a flush that left the operands in L2 would give about 1.0."""
    import torch

    x = torch.randn(timing.l2_bytes("cuda") // 32, device="cuda")
    y = torch.empty_like(x)
    copy = lambda: y.copy_(x)  # noqa: E731
    cold = timing.measure([copy], "cuda", "events", flush=flush, min_samples=20, max_samples=20)
    assert cold.l2 == timing.FLUSHES[flush]
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
    print(f"{flush}: cold {cold.median * 1e3:.1f} us, warm {warm_ms * 1e3:.1f} us")
    assert cold.median > 1.15 * warm_ms, f"{flush}: cold {cold.median * 1e3:.1f} us, warm {warm_ms * 1e3:.1f} us"


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
