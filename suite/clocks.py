"""The SM clock, board power and clock limits while a case is timed.

A time alone cannot say whether a kernel was slow or the card was slowed.  On
a power-capped GPU (an H200 holds 700 W through a long 8192^3 matmul) two
kernels that do the same work can run at clocks 10% apart, and which one
meets the hotter card depends on the order they ran in.  So every timed row
carries what the card did during its samples:

- ``sm_clock_mhz``: the mean SM clock over the timed window;
- ``power_w``: the mean of the board's instantaneous power over it
  (``NVML_FI_DEV_POWER_INSTANT``; where the driver lacks that field, the
  power it reports by default, which on Ampere and later is averaged over
  the last second, so that short cases read their neighbours' power in
  part); the window holds the L2 flushes and launch gaps between samples
  too, so this is the card's draw while the case is timed, not the kernel's
  alone;
- ``clock_limits``: what held the clock below its maximum at some sample,
  as NVML names it ("power cap", "thermal", ...), empty when nothing did.

A thread reads NVML every ``INTERVAL_S`` from just before the first sample to
just after the last; the reads are cheap calls into the driver (ctypes,
``libnvidia-ml.so.1``, which ships with the driver: no Python package).  Every
step is best effort: without NVML, or on the CPU, the fields are None and
nothing raises.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Callable

INTERVAL_S = 0.002
NVML_CLOCK_SM = 1
# nvmlClocksEventReasons bits (nvml.h); GPU idle (0x1) is not a limit
LIMITS = {
    0x2: "application clocks",
    0x4: "power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "thermal",
    0x40: "hardware thermal",
    0x80: "power brake",
    0x100: "display clock",
}
def limit_names(mask: int) -> str:
    """The named limits in an NVML clocks-event mask, comma-separated, in bit order."""
    return ", ".join(name for bit, name in LIMITS.items() if mask & bit)


NVML_FI_DEV_POWER_INSTANT = 186  # nvml.h: current board power in mW (field values API)
NVML_VALUE_TYPE_DOUBLE, NVML_VALUE_TYPE_UNSIGNED_INT = 0, 1  # nvmlValueType_t


class _Value(ctypes.Union):
    _fields_ = [("dVal", ctypes.c_double), ("uiVal", ctypes.c_uint), ("ulVal", ctypes.c_ulong),
                ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong)]


class _FieldValue(ctypes.Structure):
    """nvmlFieldValue_t."""
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", _Value)]


class _Nvml:
    """The three NVML reads the sampler needs, and the energy counter (suite.energy), for one
    device handle."""

    def __init__(self, lib, handle):
        self.lib, self.handle = lib, handle
        # the current name of the call, else its older one
        self.reasons = getattr(lib, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or getattr(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", None)
        self.power_source = "average"
        self.instant = _FieldValue(fieldId=NVML_FI_DEV_POWER_INSTANT)
        if self._instant_mw() is not None:
            self.power_source = "instant"

    def _instant_mw(self) -> int | None:
        """The instantaneous board power in mW, or None where this driver lacks the field."""
        get = getattr(self.lib, "nvmlDeviceGetFieldValues", None)
        if get is None:
            return None
        f = self.instant
        f.fieldId, f.scopeId, f.nvmlReturn = NVML_FI_DEV_POWER_INSTANT, 0, -1
        if get(self.handle, 1, ctypes.byref(f)) != 0 or f.nvmlReturn != 0:
            return None
        if f.valueType == NVML_VALUE_TYPE_DOUBLE:
            return int(f.value.dVal)
        return int(f.value.uiVal) if f.valueType == NVML_VALUE_TYPE_UNSIGNED_INT else int(f.value.ullVal)

    def _power_w(self) -> float | None:
        if self.power_source == "instant":
            mw = self._instant_mw()
            return mw / 1000.0 if mw is not None else None
        mw = ctypes.c_uint()
        return mw.value / 1000.0 if self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw)) == 0 else None

    def energy_mj(self) -> int | None:
        """The board's total energy since the driver loaded, in mJ (Volta and later), or None."""
        get = getattr(self.lib, "nvmlDeviceGetTotalEnergyConsumption", None)
        mj = ctypes.c_ulonglong()
        return int(mj.value) if get is not None and get(self.handle, ctypes.byref(mj)) == 0 else None

    def read(self) -> tuple[float | None, float | None, int]:
        mhz, mask = ctypes.c_uint(), ctypes.c_ulonglong()
        clock = float(mhz.value) if self.lib.nvmlDeviceGetClockInfo(self.handle, NVML_CLOCK_SM,
                                                                       ctypes.byref(mhz)) == 0 else None
        power = self._power_w()
        limits = int(mask.value) if self.reasons is not None and self.reasons(self.handle,
                                                                                 ctypes.byref(mask)) == 0 else 0
        return clock, power, limits


_opened: dict[int, _Nvml | None] = {}


def _bus_id(index: int) -> bytes | None:
    """The PCI bus id NVML knows this CUDA device by (CUDA and NVML may number devices differently)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    if not all(hasattr(props, a) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")):
        return None
    return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0".encode()


def nvml_for(index: int) -> _Nvml | None:
    """NVML for CUDA device ``index``, or None where it cannot be had; opened once."""
    if index in _opened:
        return _opened[index]
    nv = None
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() == 0:
            handle = ctypes.c_void_p()
            bus = _bus_id(index)
            if bus is not None:
                ok = lib.nvmlDeviceGetHandleByPciBusId_v2(ctypes.c_char_p(bus), ctypes.byref(handle)) == 0
            else:  # fall back to CUDA_VISIBLE_DEVICES's numbering, where it uses numbers
                visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
                nvml_index = (visible[index] if index < len(visible) else "") if visible else str(index)
                ok = nvml_index.isdigit() and lib.nvmlDeviceGetHandleByIndex_v2(
                    int(nvml_index), ctypes.byref(handle)) == 0
            if ok:
                nv = _Nvml(lib, handle)
    except Exception:  # noqa: BLE001 - no driver, no library, an old library: no clocks
        nv = None
    _opened[index] = nv
    return nv


class Sampler:
    """``with Sampler(read) as s: <time>``, then ``s.fields()`` for the row.

    ``read()`` returns (SM MHz or None, watts or None, limits mask); one read
    is taken on entry and one on exit, so even a window shorter than the
    interval has two.  ``read=None`` (the CPU, no NVML) gives None fields.
    """

    def __init__(self, read: Callable[[], tuple] | None, interval_s: float = INTERVAL_S):
        self.read, self.interval_s = read, interval_s
        self.samples: list[tuple] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _take(self) -> None:
        try:
            self.samples.append(self.read())
        except Exception:  # noqa: BLE001 - a failed read is a missing sample
            pass

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._take()

    def __enter__(self) -> "Sampler":
        if self.read is not None:
            self._take()
            self._thread = threading.Thread(target=self._loop, name="clock-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._take()

    def fields(self) -> dict:
        clocks = [s[0] for s in self.samples if s[0] is not None]
        watts = [s[1] for s in self.samples if s[1] is not None]
        mask = 0
        for s in self.samples:
            mask |= int(s[2] or 0)
        return {"sm_clock_mhz": sum(clocks) / len(clocks) if clocks else None,
                "power_w": sum(watts) / len(watts) if watts else None,
                "clock_limits": limit_names(mask) if self.samples else None}


def sampler(device: str) -> Sampler:
    """A sampler for the current CUDA device, or an empty one elsewhere."""
    if device != "cuda":
        return Sampler(None)
    import torch

    nv = nvml_for(torch.cuda.current_device())
    return Sampler(nv.read if nv is not None else None)


def energy_counter(device: str) -> Callable[[], int | None] | None:
    """The current CUDA device's energy counter (mJ) as a call, or None on the CPU or without NVML."""
    if device != "cuda":
        return None
    import torch

    nv = nvml_for(torch.cuda.current_device())
    return nv.energy_mj if nv is not None and nv.energy_mj() is not None else None
