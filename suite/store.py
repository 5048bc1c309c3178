"""Results on disk: one Parquet file per run, one row per case x impl x timer.

Writes are atomic (a temp file in the same folder, then ``os.replace``), so a
reader never sees half a file and a killed run leaves the last checkpoint.
Reading accepts files, folders (searched recursively) and globs, and returns
one DataFrame plus a list of problems: a corrupt or foreign file is named in
one line and skipped, and the other files still load.
"""
from __future__ import annotations

import glob
import os
import re
import tempfile
from pathlib import Path
from typing import Iterable, Sequence

import pandas as pd

SCHEMA_VERSION = 1

# The contract of DESIGN.md: never rename these.
REQUIRED = [
    "schema_version", "run_id", "timestamp", "workload", "impl", "backend", "dtype", "shape",
    "timer", "l2", "ms_median", "ms_p20", "ms_p80", "ms_min", "n_samples", "flops", "min_bytes",
    "eager_bytes", "gbps", "tflops", "intensity", "bound_ms", "sol", "peak_gbps", "peak_tflops",
    "rel_err", "tol", "correct", "compile_s", "peak_mem_bytes", "status", "error", "device",
    "gpu_name", "gpu_sms", "driver", "cuda", "torch", "triton", "commit", "dirty",
]
SHAPE_KEYS = ["N", "M", "K", "B", "H", "S", "D", "causal"]
SHAPE_COLUMNS = [f"shape_{k}" for k in SHAPE_KEYS]
# Extra columns; readers must cope with any of these missing in older files.
EXTRA = [
    "size", "bound", "preset", "config", "math", "samples_ms", "shard", "seed", "graph_sets",
    "ms_median_repeat", "ms_p20_repeat", "ms_p80_repeat", "traceback",
    "peak_gbps_datasheet", "peak_tflops_datasheet", "gpu_mem_bytes", "python", "hostname",
    "sm_clock_start_mhz", "sm_clock_end_mhz", "mem_clock_start_mhz", "mem_clock_end_mhz",
    "gpu_slug", "l2_bytes", "sm_clock_mhz", "power_w", "clock_limits", "shape_source",
    "impl_source", "run_args", "ceilings",
    # the traffic mix and every measured bandwidth roof (peak_gbps is the mix's)
    "read_bytes", "write_bytes", "copy_gbps", "read_gbps", "write_gbps", "mix21_gbps",
    # the check: the test that failed, and the worst element against its bound
    "check", "elem_err", "elem_tol",
    # joules a call over a back-to-back burst (suite.energy)
    "energy_j", "energy_w", "energy_calls", "gflops_per_j", "gb_per_j",
    # Nsight Compute per call (suite.ncu, --profile ncu)
    "ncu_kernels", "ncu_ms", "ncu_ratio", "ncu_dram_bytes", "ncu_dram_gbps", "ncu_local_bytes",
    "ncu_dram_pct", "ncu_sm_pct", "ncu_tensor_pct", "ncu_occupancy_pct", "ncu_l2_hit_pct",
    "ncu_regs", "ncu_smem_bytes", "ncu_top_kernel", "ncu_error", "ncu_csv",
    # the GPU of the host a row ran on (--gpus), as the run listed it
    "device_index",
]
COLUMNS = REQUIRED[:8] + SHAPE_COLUMNS + REQUIRED[8:] + EXTRA

STATUSES = ("ok", "incorrect", "error", "unsupported", "unavailable", "suspect")
# The key that identifies one measurement within a run (and matches runs).
ROW_KEY = ["workload", "impl", "dtype", "shape", "timer"]

_FLOAT = ["ms_median", "ms_p20", "ms_p80", "ms_min", "flops", "min_bytes", "eager_bytes", "gbps",
          "tflops", "intensity", "bound_ms", "sol", "peak_gbps", "peak_tflops", "rel_err", "tol",
          "compile_s", "peak_gbps_datasheet", "peak_tflops_datasheet", "sm_clock_start_mhz",
          "sm_clock_end_mhz", "mem_clock_start_mhz", "mem_clock_end_mhz", "ms_median_repeat",
          "ms_p20_repeat", "ms_p80_repeat", "sm_clock_mhz", "power_w", "read_bytes", "write_bytes",
          "copy_gbps", "read_gbps", "write_gbps", "mix21_gbps", "elem_err", "elem_tol",
          "energy_j", "energy_w", "energy_calls", "gflops_per_j", "gb_per_j", "ncu_kernels", "ncu_ms",
          "ncu_ratio", "ncu_dram_bytes", "ncu_dram_gbps", "ncu_local_bytes", "ncu_dram_pct", "ncu_sm_pct",
          "ncu_tensor_pct", "ncu_occupancy_pct", "ncu_l2_hit_pct", "ncu_regs", "ncu_smem_bytes"]
_INT = ["schema_version", "n_samples", "peak_mem_bytes", "gpu_sms", "size", "seed", "graph_sets",
        "gpu_mem_bytes", "l2_bytes", "device_index"] + SHAPE_COLUMNS
_BOOL = ["correct", "dirty"]


class StoreError(Exception):
    """A results file that cannot be read, with a message naming it."""


def l2_column(df: pd.DataFrame) -> pd.Series:
    """Each row's ``l2``, "-" where it is missing or the file predates the column."""
    if "l2" not in df.columns:
        return pd.Series("-", index=df.index, dtype=object)
    return df["l2"].astype(object).where(df["l2"].notna(), "-")


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", (text or "unknown").lower()).strip("-")
    return s.removeprefix("nvidia-") or "unknown"


# A user's own runs go to runs/ (ignored by git); results/ holds the reference
# runs that results/MANIFEST.md lists.
RUNS = "runs"
RESULTS = "results"


def default_path(root: str | os.PathLike, gpu_name: str, timestamp: str, commit: str) -> Path:
    """``<root>/<gpu-slug>/<UTC timestamp>-<commit7>.parquet``."""
    stamp = re.sub(r"[^0-9TZ]", "", timestamp)
    return Path(root) / slug(gpu_name) / f"{stamp}-{(commit or 'nogit')[:7]}.parquet"


def to_frame(rows: Sequence[dict]) -> pd.DataFrame:
    """Rows -> a DataFrame with every known column, in a stable order and typed."""
    df = pd.DataFrame(list(rows))
    return normalize(df)


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in COLUMNS if c not in df.columns]
    # added at once: one column at a time fragments a frame of this many columns
    df = pd.concat([df, pd.DataFrame({c: [None] * len(df) for c in missing}, index=df.index, dtype=object)],
                   axis=1) if missing else df.copy()
    for col in _FLOAT:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    for col in _INT:
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("Int64")
    for col in _BOOL:
        df[col] = df[col].astype("boolean")
    extra = [c for c in df.columns if c not in COLUMNS]
    return df[COLUMNS + extra]


def _codec() -> str:
    """zstd, a tenth smaller than pyarrow's default snappy on these rows (the
    raw timing samples are most of a file); snappy where this pyarrow was
    built without zstd."""
    import pyarrow as pa

    return "zstd" if pa.Codec.is_available("zstd") else "snappy"


def write_atomic(df: pd.DataFrame, path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        df.to_parquet(tmp, index=False, compression=_codec())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it 0600; a results file is for sharing
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class RunFile:
    """A run's rows, checkpointed to one Parquet file after every case."""

    def __init__(self, path: str | os.PathLike, rows: Iterable[dict] = ()):
        self.path = Path(path)
        self.rows: list[dict] = list(rows)
        # columns every row added from now on carries (the run's options and ceilings)
        self.fields: dict = {}

    @classmethod
    def resume(cls, path: str | os.PathLike) -> "RunFile":
        # "source" is added by the reader, not part of the run: do not store it back
        df = read_file(path).drop(columns=["source"])
        return cls(path, df.to_dict("records"))

    def done_keys(self) -> set[tuple]:
        return {tuple(r[k] for k in ROW_KEY) for r in self.rows}

    def add(self, rows: Iterable[dict]) -> None:
        self.rows.extend(dict(r, **self.fields) for r in rows)

    def save(self) -> Path:
        return write_atomic(to_frame(self.rows), self.path)


def read_file(path: str | os.PathLike) -> pd.DataFrame:
    """One results file, or StoreError naming it and saying what is wrong."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: no such file")
    try:
        df = pd.read_parquet(path)
    except Exception as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"{path}: not a readable Parquet file ({reason[:160]})") from None
    missing = [c for c in ("schema_version", "workload", "impl", "status") if c not in df.columns]
    if missing:
        raise StoreError(f"{path}: not a kernel-suite results file (no column {', '.join(missing)})")
    versions = set(pd.to_numeric(df["schema_version"], errors="coerce").dropna().astype(int))
    if versions - {v for v in range(1, SCHEMA_VERSION + 1)}:
        raise StoreError(f"{path}: schema_version {sorted(versions)} is newer than this suite "
                         f"understands ({SCHEMA_VERSION})")
    df = normalize(df)
    df["source"] = str(path)
    return df


def expand(paths: Iterable[str | os.PathLike]) -> tuple[list[Path], list[str]]:
    """Files, folders (recursively) and globs -> sorted Parquet files, plus problems."""
    files: list[Path] = []
    problems: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(x for x in p.rglob("*.parquet") if not x.name.startswith("."))
            files.extend(found)
        elif p.is_file():
            files.append(p)
        elif any(ch in str(raw) for ch in "*?["):
            matched = sorted(Path(m) for m in glob.glob(str(raw), recursive=True))
            if not matched:
                problems.append(f"{raw}: the pattern matches no file")
            files.extend(m for m in matched if m.is_file())
        else:
            problems.append(f"{raw}: no such file or folder")
    unique = list(dict.fromkeys(files))
    return unique, problems


def read_runs(paths: Iterable[str | os.PathLike]) -> tuple[pd.DataFrame, list[str]]:
    """Every run under ``paths`` as one DataFrame, and one line per problem."""
    files, problems = expand(paths)
    frames = []
    for f in files:
        try:
            frames.append(read_file(f))
        except StoreError as exc:
            problems.append(str(exc))
    if not frames:
        return normalize(pd.DataFrame(columns=COLUMNS)).assign(source=pd.Series(dtype=str)), problems
    return pd.concat(frames, ignore_index=True), problems
