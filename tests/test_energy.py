"""Joules a call from the energy counter over a back-to-back burst, on a fake card."""
from __future__ import annotations

import ctypes
import math

import pytest

from suite import clocks, energy


class Card:
    """A fake GPU: each call takes ``ms`` of the clock and ``mj`` of the energy counter."""

    def __init__(self, ms: float, mj: float):
        self.ms, self.mj = ms, mj
        self.t, self.e, self.calls, self.syncs = 0.0, 1_000_000.0, 0, 0

    def call(self):
        self.calls += 1
        self.t += self.ms / 1e3
        self.e += self.mj

    def sync(self):
        self.syncs += 1

    def counter(self):
        return int(round(self.e))

    def clock(self):
        return self.t


def test_joules_a_call_over_a_burst_that_fills_the_target():
    card = Card(ms=1.0, mj=50.0)  # 50 mJ a call of 1 ms: 50 W
    got = energy.burst(card.call, card.sync, card.counter, ms_per_call=1.0, target_ms=200, clock=card.clock)
    assert got["energy_calls"] == 200 == card.calls
    assert got["energy_j"] == pytest.approx(0.05)
    assert got["energy_w"] == pytest.approx(50.0)
    assert card.syncs >= 2  # the counter is read after the GPU is idle, before and after


def test_a_burst_much_shorter_than_the_target_is_run_again_longer():
    card = Card(ms=1.0, mj=20.0)
    # the hint says 10 ms a call: 20 calls, 20 ms, under half of 200 ms -> 200 calls counted
    got = energy.burst(card.call, card.sync, card.counter, ms_per_call=10.0, target_ms=200, clock=card.clock)
    assert got["energy_calls"] == 200 and card.calls == 220
    assert got["energy_j"] == pytest.approx(0.02)


def test_no_counter_or_a_counter_that_does_not_move_is_nan():
    card = Card(ms=1.0, mj=0.0)
    assert all(math.isnan(v) for v in energy.burst(card.call, card.sync, None, 1.0).values())
    got = energy.burst(card.call, card.sync, card.counter, 1.0, target_ms=10, clock=card.clock)
    assert math.isnan(got["energy_j"])
    assert math.isnan(energy.burst(card.call, card.sync, lambda: None, 1.0)["energy_j"])


def test_calls_for_is_bounded():
    assert energy.calls_for(0.001, 200) == energy.MAX_CALLS
    assert energy.calls_for(1000.0, 200) == energy.MIN_CALLS
    assert energy.calls_for(math.nan) == energy.MIN_CALLS
    assert energy.calls_for(2.0, 200) == 100


def test_gflop_and_gb_per_joule():
    row = {"energy_j": 0.5, "flops": 2e12, "min_bytes": 4e9}
    got = energy.per_joule(row)
    assert got["gflops_per_j"] == pytest.approx(4000.0) and got["gb_per_j"] == pytest.approx(8.0)
    assert all(math.isnan(v) for v in energy.per_joule({"energy_j": math.nan, "flops": 1, "min_bytes": 1}).values())
    assert math.isnan(energy.per_joule({"energy_j": 0.5, "flops": 0, "min_bytes": 1})["gflops_per_j"])


def test_the_nvml_energy_read_in_millijoules():
    class Lib:
        def nvmlDeviceGetTotalEnergyConsumption(self, handle, ref):
            ctypes.cast(ref, ctypes.POINTER(ctypes.c_ulonglong)).contents.value = 123_456
            return 0

    nv = clocks._Nvml.__new__(clocks._Nvml)
    nv.lib, nv.handle = Lib(), None
    assert nv.energy_mj() == 123_456
    nv.lib = object()  # a driver without the call
    assert nv.energy_mj() is None


def test_the_cpu_has_no_counter():
    assert clocks.energy_counter("cpu") is None
