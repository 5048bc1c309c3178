"""Joules a call from the energy counter over a back-to-back burst, on a fake card."""
from __future__ import annotations

import ctypes
import math
import time

import pytest

from suite import clocks, energy


class Card:
    """A fake GPU drawing ``watts`` whose energy counter steps every ``step_s``
    (an H200's steps every 100 ms), on the real clock; a call sleeps ``ms``."""

    def __init__(self, watts: float, step_s: float, ms: float):
        self.watts, self.step_s, self.ms = watts, step_s, ms
        self.t0, self.calls, self.syncs, self.busy_s = time.perf_counter(), 0, 0, 0.0

    def call(self):
        self.calls += 1
        t = time.perf_counter()
        time.sleep(self.ms / 1e3)
        self.busy_s += time.perf_counter() - t  # a loaded machine sleeps longer than asked

    def sync(self):
        self.syncs += 1

    def counter(self):
        steps = int((time.perf_counter() - self.t0) / self.step_s)
        return 5_000_000 + int(round(steps * self.step_s * self.watts * 1000))


def test_power_from_the_counters_steps_not_from_a_fixed_window():
    # steps of 20 ms: a before/after read over a 30 ms burst would be off by
    # up to a step (67%); between two stamped steps the power is right
    card = Card(watts=500.0, step_s=0.02, ms=1.0)
    got = energy.burst(card.call, card.sync, card.counter, ms_per_call=1.0)
    assert got["energy_w"] == pytest.approx(500.0, rel=0.1)
    assert got["energy_calls"] == card.calls > 0
    # joules a call are the power times the time a call really took (sleep(1 ms) runs long,
    # by half again on a loaded 2-core machine)
    assert got["energy_j"] == pytest.approx(500.0 * card.busy_s / card.calls, rel=0.15)
    assert card.syncs >= got["energy_calls"] // energy.chunk_calls(1.0)  # never more than a chunk queued


def test_no_counter_or_a_counter_that_does_not_move_is_nan():
    card = Card(watts=0.0, step_s=0.02, ms=1.0)
    assert all(math.isnan(v) for v in energy.burst(card.call, card.sync, None, 1.0).values())
    t = time.perf_counter()
    assert math.isnan(energy.burst(card.call, card.sync, card.counter, 1.0, max_s=0.1)["energy_j"])
    assert time.perf_counter() - t < 1.0  # gives up at max_s
    assert math.isnan(energy.burst(card.call, card.sync, lambda: None, 1.0)["energy_j"])


def test_chunks_hold_about_five_ms_of_calls():
    assert energy.chunk_calls(0.001) == 5000
    assert energy.chunk_calls(1000.0) == 1
    assert energy.chunk_calls(math.nan) == 1
    assert energy.chunk_calls(2.0) == 2


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


def test_energy_on_the_cpu_is_a_usage_error(capsys):
    from suite.cli import main

    assert main(["run", "--device", "cpu", "--preset", "cpu", "--energy"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--energy" in err[0] and "CPU" in err[0]


def test_the_worker_measures_energy_only_when_asked(monkeypatch):
    from suite import worker

    called = []
    monkeypatch.setattr(worker, "_add_energy", lambda rows, call, device: called.append(device))
    rows = [{"status": "ok", "ms_median": 1.0}]
    for asked in (False, True):
        opts = worker.Options(device="cpu", timers=("wall",), preset="cpu", seed=1, peaks_gbps=1.0,
                              peaks_tflops={}, energy=asked)
        worker._maybe_energy(rows, lambda: None, opts)
    assert called == ["cpu"]
