"""Nsight Compute on a timed row: why a kernel sits where it does on the roofline.

``--profile ncu`` replays each (case, implementation) that timed ok (or
suspect) under ``ncu`` in a process of its own (``python -m suite.replay``):
the same inputs (same seed), ``WARMUP`` calls outside the profiled range, then
``CALLS`` calls between ``cudaProfilerStart`` and ``cudaProfilerStop``, which
``--profile-from-start off`` profiles and nothing else.  ncu runs with
``--clock-control none`` (the clocks stay as the run found them, so ncu's
durations are comparable with the suite's events timer) and its default
``--cache-control all`` (caches flushed before each kernel replay: cold L2, as
the timer's samples).  The report is exported, then printed with
``--page raw --csv --print-units base``: a header row of metric names, a
units row, one row per profiled kernel.  Both files are kept per row
(``ncu_csv`` names the CSV) so that a run's profiles can be read again.

What a row gets, per call (the profiled calls' kernels divided by CALLS):

- ``ncu_kernels``: kernels a call launches;
- ``ncu_ms``: their summed ``gpu__time_duration``; ``ncu_ratio`` = ncu_ms / ms_median
  (about 1 for memory-bound kernels; 0.87-0.95 for compute-bound ones at a power
  cap, whose profiled kernel runs at a clock the timed run's sustained load does not hold);
- ``ncu_dram_bytes``, ``ncu_local_bytes`` (local-memory loads + stores: spills): summed;
  ``ncu_dram_gbps`` = ncu_dram_bytes / ncu_ms;
- ``ncu_dram_pct``, ``ncu_sm_pct``, ``ncu_tensor_pct``, ``ncu_occupancy_pct``,
  ``ncu_l2_hit_pct``: means over the kernels weighted by their durations, so a
  multi-kernel call reads as the time it spends at each level (for one kernel,
  that kernel's figure); tensor is the busier of the hmma (mma.sync) and gmma
  (wgmma) pipes;
- ``ncu_regs``, ``ncu_smem_bytes`` (static + dynamic shared memory per block):
  those of the heaviest kernel, ``ncu_top_kernel``: the kernel name with the
  largest summed duration.

ncu missing, not permitted (ERR_NVGPUCTRPERM), failing on a kernel or timing
out leaves every ncu_* figure NaN and says why in one line, ``ncu_error``; the
row's timing and status are never touched.
"""
from __future__ import annotations

import csv
import glob
import io
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

WARMUP = 3
CALLS = 3
TIMEOUT_S = 300.0

TIME = "gpu__time_duration.sum"
DRAM_BYTES = "dram__bytes.sum"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_PCT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
HMMA_PCT = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
GMMA_PCT = "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
OCCUPANCY_PCT = "sm__warps_active.avg.pct_of_peak_sustained_active"
REGS = "launch__registers_per_thread"
SMEM_STATIC = "launch__shared_mem_per_block_static"
SMEM_DYNAMIC = "launch__shared_mem_per_block_dynamic"
LOCAL_LD = "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum"
LOCAL_ST = "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"
L2_HIT = "lts__t_sector_hit_rate.pct"
METRICS = [TIME, DRAM_BYTES, DRAM_PCT, SM_PCT, HMMA_PCT, GMMA_PCT, OCCUPANCY_PCT, REGS, SMEM_STATIC,
           SMEM_DYNAMIC, LOCAL_LD, LOCAL_ST, L2_HIT]
# asked for when the device's ncu knows them; a run whose ncu rejects one is retried without
OPTIONAL = {GMMA_PCT}
PCTS = {"ncu_dram_pct": (DRAM_PCT,), "ncu_sm_pct": (SM_PCT,), "ncu_tensor_pct": (HMMA_PCT, GMMA_PCT),
        "ncu_occupancy_pct": (OCCUPANCY_PCT,), "ncu_l2_hit_pct": (L2_HIT,)}
FIELDS = ["ncu_kernels", "ncu_ms", "ncu_ratio", "ncu_dram_bytes", "ncu_dram_gbps", "ncu_local_bytes",
          *PCTS, "ncu_regs", "ncu_smem_bytes", "ncu_top_kernel"]
ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
              "Block Size", "Grid Size", "Device", "CC")
PERMISSION = "ERR_NVGPUCTRPERM"

# unit -> factor to the base unit (ns for time, bytes for sizes); the base unit's own name maps to 1
_SCALE = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6,
          "second": 1e9, "s": 1e9, "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9,
          "tbyte": 1e12, "kibyte": 1024.0, "mibyte": 1024.0**2, "gibyte": 1024.0**3}


class NcuError(Exception):
    """Why a row has no ncu figures, in one line."""


def find_ncu() -> str | None:
    """ncu on PATH, else in the CUDA toolkit or the newest standalone Nsight Compute."""
    found = shutil.which("ncu")
    if found:
        return found
    for candidate in ["/usr/local/cuda/bin/ncu",
                      *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)]:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def missing_note() -> str:
    return "ncu not found (not on PATH, in /usr/local/cuda/bin or /opt/nvidia/nsight-compute/*/)"


def empty_fields(note: str | None) -> dict:
    """The ncu columns of a row without a profile: NaN figures and the reason."""
    row = {f: math.nan for f in FIELDS}
    row.update(ncu_top_kernel=None, ncu_error=note)
    return row


def _number(text: str) -> float:
    text = (text or "").strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan", "-"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def to_base(value: float, unit: str) -> float:
    """A value in ``unit`` in ns (times) or bytes (sizes); any other unit is kept as is."""
    return value * _SCALE.get((unit or "").strip().lower(), 1.0)


def parse_raw_csv(text: str) -> tuple[list[dict], list[str]]:
    """``--page raw --csv`` text -> one dict per kernel (metric -> base-unit float,
    plus "Kernel Name"), and the ``==ERROR==`` lines found around the table."""
    errors = [ln.strip() for ln in text.splitlines() if ln.startswith("==ERROR==")]
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")]
    table = list(csv.reader(io.StringIO("\n".join(lines))))
    start = next((i for i, r in enumerate(table) if "Kernel Name" in r and "ID" in r), None)
    if start is None:
        return [], errors
    header = table[start]
    body = table[start + 1:]
    units = [""] * len(header)
    if body and (not body[0] or not body[0][0].strip()):  # the units row leaves the ID column empty
        units, body = body[0] + [""] * (len(header) - len(body[0])), body[1:]
    kernels = []
    for r in body:
        if len(r) < len(header):
            continue
        k = {"Kernel Name": r[header.index("Kernel Name")]}
        for i, name in enumerate(header):
            if name not in ID_COLUMNS:
                k[name] = to_base(_number(r[i]), units[i])
        kernels.append(k)
    return kernels, errors


def _get(k: dict, name: str) -> float:
    v = k.get(name, math.nan)
    return v if isinstance(v, float) else math.nan


def _nansum(values) -> float:
    vals = [v for v in values if not math.isnan(v)]
    return sum(vals) if vals else math.nan


def _weighted(kernels: list[dict], names: tuple[str, ...]) -> float:
    """The duration-weighted mean of each kernel's figure (the largest of ``names`` present)."""
    num = den = 0.0
    for k in kernels:
        vals = [_get(k, n) for n in names if not math.isnan(_get(k, n))]
        t = _get(k, TIME)
        if vals and not math.isnan(t):
            num, den = num + max(vals) * t, den + t
    return num / den if den > 0 else math.nan


def summarize(kernels: list[dict], calls: int, ms_median: float) -> dict:
    """Per-call figures of ``calls`` profiled calls' kernels (see the module docstring)."""
    row = empty_fields(None)
    row["ncu_kernels"] = len(kernels) / calls
    if not kernels:
        row["ncu_error"] = "ncu profiled no kernel in the replayed calls"
        return row
    ns = _nansum(_get(k, TIME) for k in kernels) / calls
    row["ncu_ms"] = ns / 1e6
    row["ncu_ratio"] = row["ncu_ms"] / ms_median if ms_median and ms_median > 0 else math.nan
    row["ncu_dram_bytes"] = _nansum(_get(k, DRAM_BYTES) for k in kernels) / calls
    row["ncu_dram_gbps"] = row["ncu_dram_bytes"] / ns if ns > 0 else math.nan  # bytes/ns = GB/s
    row["ncu_local_bytes"] = _nansum(_nansum((_get(k, LOCAL_LD), _get(k, LOCAL_ST)))
                                     for k in kernels) / calls
    for col, names in PCTS.items():
        row[col] = _weighted(kernels, names)
    by_name: dict[str, float] = {}
    for k in kernels:
        t = _get(k, TIME)
        by_name[k["Kernel Name"]] = by_name.get(k["Kernel Name"], 0.0) + (0.0 if math.isnan(t) else t)
    top = max(by_name, key=by_name.get)
    heavy = max((k for k in kernels if k["Kernel Name"] == top),
                key=lambda k: -1.0 if math.isnan(_get(k, TIME)) else _get(k, TIME))
    row["ncu_top_kernel"] = top
    row["ncu_regs"] = _get(heavy, REGS)
    row["ncu_smem_bytes"] = _nansum((_get(heavy, SMEM_STATIC), _get(heavy, SMEM_DYNAMIC)))
    return row


def failure_note(output: str, returncode: int | None) -> str | None:
    """One line saying why ncu gave no usable profile, or None when nothing failed."""
    if PERMISSION in output:
        return (f"ncu not permitted to read the GPU's performance counters ({PERMISSION}): allow them "
                f"for this user (NVreg_RestrictProfilingToAdminUsers=0) or run as root")
    errors = [ln.strip() for ln in output.splitlines() if ln.startswith("==ERROR==")]
    failed = [e for e in errors if "failed to profile" in e.lower()]
    if failed:
        return f"ncu failed on a kernel: {failed[0].removeprefix('==ERROR==').strip()}"[:300]
    if returncode not in (0, None):
        last = errors[-1].removeprefix("==ERROR==").strip() if errors else _last_line(output)
        return f"ncu exited with code {returncode}: {last}"[:300]
    return None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "no output"


def profile_name(workload: str, impl: str, dtype: str, label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", f"{workload}-{impl}-{dtype}-{label}")


def command(ncu: str, metrics: list[str], report: Path, spec: dict) -> list[str]:
    return [ncu, "--profile-from-start", "off", "--target-processes", "application-only",
            "--clock-control", "none", "--cache-control", "all", "--replay-mode", "kernel",
            "--metrics", ",".join(metrics), "--export", str(report), "--force-overwrite",
            sys.executable, "-m", "suite.replay", json.dumps(spec)]


def _run(cmd: list[str], timeout: float, env: dict) -> tuple[int | None, str]:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") + (exc.stderr or b"")
        raise NcuError(f"ncu timed out after {timeout:.0f} s"
                       + (f": {_last_line(out.decode(errors='replace'))}" if out else "")) from None
    except OSError as exc:
        raise NcuError(f"ncu could not start: {exc}") from None
    return p.returncode, (p.stdout or "") + (p.stderr or "")


def profile(spec: dict, out_dir: Path, name: str, ms_median: float, ncu: str | None = None,
            timeout: float = TIMEOUT_S) -> dict:
    """Replay ``spec`` (see suite.replay) under ncu; the row's ncu columns, never raising."""
    ncu = ncu or find_ncu()
    if ncu is None:
        return empty_fields(missing_note())
    out_dir.mkdir(parents=True, exist_ok=True)
    report = out_dir / name
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    try:
        metrics = list(METRICS)
        rc, output = _run(command(ncu, metrics, report, spec), timeout, env)
        if rc != 0 and any(m in output for m in OPTIONAL) and PERMISSION not in output:
            metrics = [m for m in metrics if m not in OPTIONAL]
            rc, output = _run(command(ncu, metrics, report, spec), timeout, env)
        (out_dir / f"{name}.log").write_text(output)
        note = failure_note(output, rc)
        if note:
            return empty_fields(note)
        rc, text = _run([ncu, "--import", f"{report}.ncu-rep", "--page", "raw", "--csv",
                         "--print-units", "base"], timeout, env)
        if rc != 0:
            return empty_fields(f"ncu --import exited with code {rc}: {_last_line(text)}"[:300])
        csv_path = out_dir / f"{name}.csv"
        csv_path.write_text(text)
        return from_csv(text, spec.get("calls", CALLS), ms_median, str(csv_path))
    except NcuError as exc:
        return empty_fields(str(exc))


def from_csv(text: str, calls: int, ms_median: float, path: str | None = None) -> dict:
    """The row's ncu columns from a raw CSV of ``calls`` profiled calls."""
    kernels, errors = parse_raw_csv(text)
    note = failure_note("\n".join(errors), None)
    row = empty_fields(note) if note else summarize(kernels, calls, ms_median)
    row["ncu_csv"] = path
    return row
