"""The card's clock, power and limits recorded with each timed row."""
import threading
import time

import pytest

from suite import clocks


def test_limit_names_in_bit_order_and_idle_is_not_a_limit():
    assert clocks.limit_names(0) == ""
    assert clocks.limit_names(0x1) == ""  # GPU idle
    assert clocks.limit_names(0x4) == "power cap"
    assert clocks.limit_names(0x4 | 0x20 | 0x1) == "power cap, thermal"


def test_sampler_means_over_the_window_and_ors_the_limits():
    reads = iter([(1980.0, 300.0, 0), (1800.0, 690.0, 0x4), (1700.0, None, 0x4 | 0x1)])
    last = (1650.0, 700.0, 0)

    def read():
        return next(reads, last)

    with clocks.Sampler(read, interval_s=0.001) as s:
        time.sleep(0.03)
    n = len(s.samples)
    assert n >= 4  # one on entry, one on exit, the thread's in between
    f = s.fields()
    clocks_seen = [x[0] for x in s.samples]
    assert f["sm_clock_mhz"] == pytest.approx(sum(clocks_seen) / n)
    assert 1650.0 < f["sm_clock_mhz"] < 1980.0
    watts = [x[1] for x in s.samples if x[1] is not None]
    assert f["power_w"] == pytest.approx(sum(watts) / len(watts))  # a missing power read is skipped
    assert f["clock_limits"] == "power cap"


def test_sampler_thread_stops_and_a_failing_read_is_a_missing_sample():
    calls = []

    def read():
        calls.append(1)
        if len(calls) % 2:
            raise RuntimeError("driver went away")
        return (1500.0, 100.0, 0)

    before = threading.active_count()
    with clocks.Sampler(read, interval_s=0.001) as s:
        time.sleep(0.02)
    assert threading.active_count() == before
    assert s.samples and all(x == (1500.0, 100.0, 0) for x in s.samples)
    assert len(s.samples) < len(calls)
    assert s.fields()["clock_limits"] == ""


def test_without_nvml_every_field_is_none():
    with clocks.Sampler(None) as s:
        pass
    assert s.fields() == {"sm_clock_mhz": None, "power_w": None, "clock_limits": None}
    with clocks.sampler("cpu") as s:
        pass
    assert s.fields() == {"sm_clock_mhz": None, "power_w": None, "clock_limits": None}


def test_nvml_for_never_raises(monkeypatch):
    def missing(name):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(clocks, "_opened", {})
    monkeypatch.setattr(clocks.ctypes, "CDLL", missing)
    assert clocks.nvml_for(0) is None
    assert clocks._opened == {0: None}  # tried once per device, not at every row


class _FakeNvml:
    """The NVML calls _Nvml makes, answering through the ctypes references it passes."""

    def __init__(self, instant: int | None, average_mw: int = 111_000):
        self.instant, self.average_mw = instant, average_mw
        if instant is None:
            self.nvmlDeviceGetFieldValues = lambda handle, n, ref: 999  # NVML_ERROR_UNKNOWN

    def nvmlDeviceGetFieldValues(self, handle, n, ref):
        f = ref._obj
        assert n == 1 and f.fieldId == clocks.NVML_FI_DEV_POWER_INSTANT
        f.valueType, f.nvmlReturn = clocks.NVML_VALUE_TYPE_UNSIGNED_INT, 0
        f.value.uiVal = self.instant
        return 0

    def nvmlDeviceGetPowerUsage(self, handle, ref):
        ref._obj.value = self.average_mw
        return 0

    def nvmlDeviceGetClockInfo(self, handle, which, ref):
        ref._obj.value = 1755
        return 0

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle, ref):
        ref._obj.value = 0x4 | 0x1
        return 0


def test_power_is_the_instantaneous_field_where_the_driver_has_it():
    nv = clocks._Nvml(_FakeNvml(instant=612_345), None)
    assert nv.power_source == "instant"
    assert nv.read() == (1755.0, pytest.approx(612.345), 0x5)


def test_an_instant_power_given_as_a_double_is_read_as_one():
    lib = _FakeNvml(instant=0)

    def as_double(handle, n, ref):
        f = ref._obj
        f.valueType, f.nvmlReturn, f.value.dVal = clocks.NVML_VALUE_TYPE_DOUBLE, 0, 455_500.0
        return 0

    lib.nvmlDeviceGetFieldValues = as_double
    nv = clocks._Nvml(lib, None)
    assert nv.power_source == "instant" and nv.read()[1] == pytest.approx(455.5)


def test_power_falls_back_to_the_driver_average_without_the_field():
    nv = clocks._Nvml(_FakeNvml(instant=None), None)
    assert nv.power_source == "average"
    assert nv.read()[1] == pytest.approx(111.0)

    class OldNvml:  # an NVML too old to have the call
        nvmlDeviceGetPowerUsage = _FakeNvml.nvmlDeviceGetPowerUsage
        nvmlDeviceGetClockInfo = _FakeNvml.nvmlDeviceGetClockInfo
        average_mw = 222_000

    old = clocks._Nvml(OldNvml(), None)
    assert old.power_source == "average" and old.read() == (1755.0, pytest.approx(222.0), 0)


def test_a_field_that_answers_with_an_error_is_not_used():
    lib = _FakeNvml(instant=500_000)

    def not_supported(handle, n, ref):
        ref._obj.nvmlReturn = 3  # NVML_ERROR_NOT_SUPPORTED, in the value's own status
        return 0

    lib.nvmlDeviceGetFieldValues = not_supported
    assert clocks._Nvml(lib, None).power_source == "average"


@pytest.mark.gpu
def test_nvml_reads_the_card_under_load():
    import torch

    x = torch.randn(4096, 4096, device="cuda")
    with clocks.sampler("cuda") as s:
        for _ in range(50):
            x = torch.tanh(x @ x * 1e-3)
        torch.cuda.synchronize()
    f = s.fields()
    assert len(s.samples) >= 2
    assert 200.0 < f["sm_clock_mhz"] < 4000.0, f
    assert f["power_w"] is None or 10.0 < f["power_w"] < 2000.0, f
    assert isinstance(f["clock_limits"], str)
    nv = clocks.nvml_for(torch.cuda.current_device())
    print(f"power source: {nv.power_source}, fields: {f}")
